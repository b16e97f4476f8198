// The Cache API as workerd offers it (`caches.default`, `caches.open()`,
// match/put/delete with workerd's checks and messages), stored on this node
// by src/lib.rs; how long a response is kept is src/policy.rs's call.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayPrototypeIncludes,
  ArrayPrototypePush,
  DateParse,
  Error,
  JSONParse,
  JSONStringify,
  MathMax,
  MathMin,
  NumberParseInt,
  ObjectPrototypeIsPrototypeOf,
  PromiseReject,
  RegExpPrototypeExec,
  SafeArrayIterator,
  String,
  StringPrototypeSplit,
  StringPrototypeToLowerCase,
  StringPrototypeTrim,
  StringPrototypeReplace,
  Symbol,
  TypedArrayPrototypeSubarray,
  TypeError,
  Uint8Array,
} = primordials;
const { op_cache_put, op_cache_get, op_cache_delete, op_cache_ttl } = core.ops;
const { Request } = core.loadExtScript("ext:deno_fetch/23_request.js");
const { Response, toInnerResponse } = core.loadExtScript("ext:deno_fetch/23_response.js");
const { Headers } = core.loadExtScript("ext:deno_fetch/20_headers.js");
const { ReadableStreamPrototype } = core.loadExtScript("ext:deno_web/06_streams.js");

const kCreate = Symbol("create");
const NULL_BODY = [101, 204, 205, 304];

function notImplemented(cls, method) {
  return () =>
    PromiseReject(new Error(`Failed to execute '${method}' on '${cls}': the method is not implemented.`));
}

function toRequest(request) {
  if (ObjectPrototypeIsPrototypeOf(Request.prototype, request)) return request;
  const url = String(request);
  try {
    return new Request(url);
  } catch {
    throw new TypeError(`Invalid URL: ${url}`);
  }
}

function headerList(headers) {
  const out = [];
  for (const pair of headers) ArrayPrototypePush(out, [pair[0], pair[1]]);
  return out;
}

function varyNames(headers) {
  const vary = headers.get("vary");
  if (vary === null) return [];
  const names = [];
  for (const n of new SafeArrayIterator(StringPrototypeSplit(vary, ","))) {
    const name = StringPrototypeToLowerCase(StringPrototypeTrim(n));
    if (name !== "") ArrayPrototypePush(names, name);
  }
  return names;
}

const opaqueTag = (t) => StringPrototypeReplace(StringPrototypeTrim(t), /^W\//, "");

// 304 for a matching If-None-Match (weak comparison) or, without one, an
// If-Modified-Since no older than Last-Modified.
function notModified(request, headers) {
  const inm = request.headers.get("if-none-match");
  if (inm !== null) {
    const etag = headers.get("etag");
    if (etag === null) return false;
    for (const t of new SafeArrayIterator(StringPrototypeSplit(inm, ","))) {
      const tag = StringPrototypeTrim(t);
      if (tag === "*" || opaqueTag(tag) === opaqueTag(etag)) return true;
    }
    return false;
  }
  const ims = request.headers.get("if-modified-since");
  const lm = headers.get("last-modified");
  if (ims === null || lm === null) return false;
  const since = DateParse(ims);
  const modified = DateParse(lm);
  return since === since && modified === modified && modified <= since;
}

// One `bytes=` range of a body of `size` bytes: [start, end], "unsatisfiable",
// or null (no range, a malformed one, or several: the whole body is sent).
function byteRange(header, size) {
  if (header === null) return null;
  const m = RegExpPrototypeExec(/^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i, header);
  if (m === null || (m[1] === "" && m[2] === "")) return null;
  if (m[1] === "") {
    const n = NumberParseInt(m[2], 10);
    if (n === 0) return "unsatisfiable";
    return [MathMax(0, size - n), size - 1];
  }
  const start = NumberParseInt(m[1], 10);
  const end = m[2] === "" ? size - 1 : MathMin(NumberParseInt(m[2], 10), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return [start, end];
}

export class Cache {
  #name;
  constructor(key, name) {
    if (key !== kCreate) throw new TypeError("Illegal constructor");
    this.#name = name;
  }

  async match(request, options) {
    const req = toRequest(request);
    if (req.method !== "GET" && options?.ignoreMethod !== true) return undefined;
    const entry = op_cache_get(this.#name, req.url);
    if (entry === null || entry === undefined) return undefined;
    const headers = new Headers(JSONParse(entry.headers));
    headers.set("cf-cache-status", "HIT");
    if (notModified(req, headers)) return new Response(null, { status: 304, headers });
    const body = entry.body;
    if (entry.status === 200) {
      const range = byteRange(req.headers.get("range"), body.byteLength);
      if (range === "unsatisfiable") {
        return new Response(null, {
          status: 416,
          headers: { "content-range": `bytes */${body.byteLength}`, "cf-cache-status": "HIT" },
        });
      }
      if (range !== null) {
        headers.set("content-range", `bytes ${range[0]}-${range[1]}/${body.byteLength}`);
        headers.set("content-length", String(range[1] - range[0] + 1));
        return new Response(TypedArrayPrototypeSubarray(body, range[0], range[1] + 1), { status: 206, headers });
      }
    }
    return new Response(body, { status: entry.status, headers });
  }

  async put(request, response) {
    const req = toRequest(request);
    if (!ObjectPrototypeIsPrototypeOf(Response.prototype, response)) {
      throw new TypeError("Failed to execute 'put' on 'Cache': parameter 2 is not of type 'Response'.");
    }
    if (req.method !== "GET") throw new TypeError("Cannot cache response to non-GET request.");
    if (response.status === 206) {
      throw new TypeError("Cannot cache response to a range request (206 Partial Content).");
    }
    if (ArrayPrototypeIncludes(varyNames(response.headers), "*")) throw new TypeError("Cannot cache response with 'Vary: *' header.");
    if (response.status === 101) {
      throw new TypeError(
        'Worker tried to return a WebSocket in a response to a request which did not contain the header "Upgrade: websocket".',
      );
    }
    if (response.bodyUsed) {
      throw new TypeError(
        "Body has already been used. It can only be used once. Use tee() first if you need to read it twice.",
      );
    }
    // A body of known length keeps it as Content-Length (a stream's has none).
    const inner = toInnerResponse(response).body;
    const known = inner !== null &&
      (inner.length !== null || !ObjectPrototypeIsPrototypeOf(ReadableStreamPrototype, inner.streamOrStatic));
    const body = new Uint8Array(await response.arrayBuffer());
    const headers = new Headers(response.headers);
    if (known && !headers.has("content-length")) {
      headers.set("content-length", String(body.byteLength));
    }
    const list = JSONStringify(headerList(headers));
    // Not storable (or a body-less status): declined, as wrangler's cache does.
    const ttl = ArrayPrototypeIncludes(NULL_BODY, response.status) ? 0 : op_cache_ttl(response.status, list);
    if (ttl > 0) op_cache_put(this.#name, req.url, response.status, list, body, ttl);
    return undefined;
  }

  async delete(request, options) {
    const req = toRequest(request);
    if (req.method !== "GET" && options?.ignoreMethod !== true) return false;
    return op_cache_delete(this.#name, req.url);
  }
}
Cache.prototype.add = notImplemented("Cache", "add");
Cache.prototype.addAll = notImplemented("Cache", "addAll");
Cache.prototype.matchAll = notImplemented("Cache", "matchAll");
Cache.prototype.keys = notImplemented("Cache", "keys");

export class CacheStorage {
  #default;
  constructor(key) {
    if (key !== kCreate) throw new TypeError("Illegal constructor");
    this.#default = new Cache(kCreate, "default");
  }
  get default() {
    return this.#default;
  }
  async open(cacheName) {
    const name = String(cacheName);
    if (name.length > 1024) throw new TypeError("Cache name is too long.");
    // A name of its own, never the default cache's.
    return new Cache(kCreate, `named:${name}`);
  }
}
CacheStorage.prototype.has = notImplemented("CacheStorage", "has");
CacheStorage.prototype.keys = notImplemented("CacheStorage", "keys");
CacheStorage.prototype.delete = notImplemented("CacheStorage", "delete");
CacheStorage.prototype.match = notImplemented("CacheStorage", "match");

export const caches = new CacheStorage(kCreate);

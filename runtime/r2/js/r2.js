// An R2 bucket binding (`env.BUCKET`) as workerd shapes it: the checks and
// messages workerd makes itself here, what R2 decides (and its errors,
// "<action>: <message> (<code>)") in src/store.rs.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayBufferIsView,
  StringPrototypeToLowerCase,
  SafeWeakSet,
  ObjectGetOwnPropertyDescriptor,
  NumberIsNaN,
  FunctionPrototypeCall,
  ArrayPrototypePush,
  ArrayPrototypeIncludes,
  ArrayBufferPrototypeGetByteLength,
  ArrayIsArray,
  ArrayPrototypeMap,
  DatePrototypeGetTime,
  DatePrototypeToUTCString,
  Error,
  JSONParse,
  JSONStringify,
  MathTrunc,
  NumberIsInteger,
  ObjectDefineProperty,
  ObjectEntries,
  ObjectPrototypeIsPrototypeOf,
  RangeError,
  StringPrototypeEndsWith,
  StringPrototypeIndexOf,
  StringPrototypeSlice,
  StringPrototypeStartsWith,
  SymbolToStringTag,
  TypeError,
  TypedArrayPrototypeSlice,
  Uint8Array,
} = primordials;
const {
  op_r2_head,
  op_r2_get,
  op_r2_put,
  op_r2_delete,
  op_r2_list,
  op_r2_upload_create,
  op_r2_upload_part,
  op_r2_upload_complete,
  op_r2_upload_abort,
} = core.ops;
const { ReadableStreamPrototype, isReadableStreamDisturbed } = core.loadExtScript("ext:deno_web/06_streams.js");
const { BlobPrototype } = core.loadExtScript("ext:deno_web/09_file.js");
const { Headers } = core.loadExtScript("ext:deno_fetch/20_headers.js");
const HeadersPrototype = Headers.prototype;
const { Request } = core.loadExtScript("ext:deno_fetch/23_request.js");
const { Response } = core.loadExtScript("ext:deno_fetch/23_response.js");


// An R2 error as workerd reports it: the action, R2's message and code.
async function call(action, f) {
  try {
    return await f();
  } catch (e) {
    throw new Error(`${action}: ${e.message}`);
  }
}

const isHeaders = (v) => v !== null && typeof v === "object" && ObjectPrototypeIsPrototypeOf(HeadersPrototype, v);
const isDate = (v) => v instanceof Date;

function bytesOf(v) {
  if (ArrayBufferIsView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (v instanceof ArrayBuffer) return new Uint8Array(v, 0, ArrayBufferPrototypeGetByteLength(v));
  return null;
}

const hex = (bytes) => {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
  return s;
};
const unhex = (s) => {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out.buffer;
};

function randomHex(n) {
  return hex(crypto.getRandomValues(new Uint8Array(n)));
}

// 128 random bytes in base64url, as R2 (and miniflare) make upload ids and part ETags.
function randomId() {
  const b = crypto.getRandomValues(new Uint8Array(128));
  let s = "";
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

function base64Utf8(s) {
  const b = core.encode(s);
  let bin = "";
  for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]);
  return btoa(bin);
}

function fromBase64Utf8(s) {
  try {
    const bin = atob(s);
    const b = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
    return new TextDecoder().decode(b);
  } catch {
    return "";
  }
}

// ---- objects ----------------------------------------------------------------

class Checksums {
  #sums;
  constructor(sums) {
    this.#sums = sums;
    for (const name of ["sha512", "sha384", "sha256", "sha1", "md5"]) {
      const h = sums[name];
      ObjectDefineProperty(this, name, {
        value: h === undefined ? undefined : unhex(h),
        enumerable: true,
      });
    }
  }
  toJSON() {
    const out = {};
    for (const name of ["md5", "sha1", "sha256", "sha384", "sha512"]) {
      if (this.#sums[name] !== undefined) out[name] = this.#sums[name];
    }
    return out;
  }
}

const HTTP_FIELDS = ["contentType", "contentLanguage", "contentDisposition", "contentEncoding", "cacheControl"];

// Stored HTTP metadata (cacheExpiry in ms) as the API gives it.
function httpMetadataOut(m) {
  const out = {};
  for (const f of HTTP_FIELDS) if (m[f] !== undefined) out[f] = m[f];
  if (m.cacheExpiry !== undefined) out.cacheExpiry = new Date(m.cacheExpiry);
  return out;
}

class HeadResult {
  constructor(meta, range, http, custom) {
    const sums = { ...meta.checksums };
    if (meta.etag.length === 32 && /^[0-9a-f]+$/.test(meta.etag)) sums.md5 = meta.etag;
    // Own properties in workerd's order (it defines them last-first).
    const define = (name, value) => ObjectDefineProperty(this, name, { value, enumerable: true });
    define("ssecKeyMd5", undefined);
    define("storageClass", meta.storageClass);
    define("range", range);
    define("customMetadata", custom === undefined ? { ...meta.customMetadata } : custom);
    define("httpMetadata", http === undefined ? httpMetadataOut(meta.httpMetadata) : http);
    define("uploaded", new Date(meta.uploaded));
    define("checksums", new Checksums(sums));
    define("httpEtag", `"${meta.etag}"`);
    define("etag", meta.etag);
    define("size", meta.size);
    define("version", meta.version);
    define("key", meta.key);
  }

  writeHttpMetadata(headers) {
    if (!isHeaders(headers)) throw new TypeError("Failed to execute 'writeHttpMetadata' on 'HeadResult': parameter 1 is not of type 'Headers'.");
    const m = this.httpMetadata;
    if (m === undefined) {
      throw new TypeError(`HTTP metadata unknown for key \`${this.key}\`. Did you forget to add 'httpMetadata' to \`include\` when listing?`);
    }
    if (m.contentType !== undefined) headers.set("content-type", m.contentType);
    if (m.contentLanguage !== undefined) headers.set("content-language", m.contentLanguage);
    if (m.contentDisposition !== undefined) headers.set("content-disposition", m.contentDisposition);
    if (m.contentEncoding !== undefined) headers.set("content-encoding", m.contentEncoding);
    if (m.cacheControl !== undefined) headers.set("cache-control", m.cacheControl);
    if (m.cacheExpiry !== undefined) headers.set("expires", DatePrototypeToUTCString(m.cacheExpiry));
  }
}

const BODY_USED = "Body has already been used. It can only be used once. Use tee() first if you need to read it twice.";

class GetResult extends HeadResult {
  #response;
  constructor(meta, range, bytes) {
    super(meta, range);
    // A stream of its own (not a body's), so reading it disturbs it.
    const body = new ReadableStream({
      type: "bytes",
      start(c) {
        if (bytes.byteLength > 0) c.enqueue(bytes);
        c.close();
      },
    });
    this.#response = new Response(markSized(body));
  }
  get body() {
    return this.#response.body;
  }
  get bodyUsed() {
    return isReadableStreamDisturbed(this.#response.body);
  }
  #check() {
    if (this.bodyUsed) throw new TypeError(BODY_USED);
  }
  async arrayBuffer() {
    this.#check();
    return this.#response.arrayBuffer();
  }
  async bytes() {
    this.#check();
    return new Uint8Array(await this.#response.arrayBuffer());
  }
  async text() {
    this.#check();
    return this.#response.text();
  }
  async json() {
    return JSONParse(await this.text());
  }
  async blob() {
    const buf = await this.arrayBuffer();
    return new Blob([buf], { type: this.httpMetadata.contentType ?? "" });
  }
}

// ---- arguments and options, converted as workerd's bindings convert them ----

function notParam(method, cls, n, type) {
  return new TypeError(`Failed to execute '${method}' on '${cls}': parameter ${n} is not of type '${type}'.`);
}

function notField(field, struct, type) {
  return new TypeError(`Incorrect type for the '${field}' field on '${struct}': the provided value is not of type '${type}'.`);
}

// A string parameter: coerced, but one that was not passed is an error.
function key(args, n, method, cls = "R2Bucket") {
  if (args.length < n) throw notParam(method, cls, n, "string");
  const k = args[n - 1];
  if (typeof k === "symbol") throw new TypeError("Cannot convert a Symbol value to a string");
  return `${k}`;
}

// workerd's NonCoercible<String> field: a string or nothing.
function strField(o, field, struct) {
  const v = o[field];
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw notField(field, struct, "string");
  return v;
}

// A kj::Date field: a Date or milliseconds.
function dateField(o, field, struct) {
  const v = o[field];
  if (v === undefined) return undefined;
  if (isDate(v)) return DatePrototypeGetTime(v);
  if (typeof v === "number") return v;
  throw notField(field, struct, "date");
}

const isObject = (v) => v !== null && (typeof v === "object" || typeof v === "function");

// An options dictionary parameter (missing, undefined or null: none).
function dict(v, method, n, type, cls = "R2Bucket") {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw notParam(method, cls, n, type);
  return v;
}

// C++'s spelling of a double in workerd's messages.
function num(x) {
  if (NumberIsNaN(x)) return "nan";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  return `${x}`;
}

// If-Match / If-None-Match as workerd parses them.
function parseEtagHeader(h) {
  const out = [];
  let commaNeeded = false;
  for (;;) {
    while (h.length > 0 && (h[0] === " " || h[0] === "\t")) h = StringPrototypeSlice(h, 1);
    if (h.length === 0) return out;
    switch (h[0]) {
      case ",":
        h = StringPrototypeSlice(h, 1);
        commaNeeded = false;
        continue;
      case "*":
        if (commaNeeded) throw new Error("Comma was expected to separate etags. Encountered a wildcard character '*' instead.");
        return [{ type: "wildcard" }];
      case "W": {
        if (commaNeeded) {
          throw new Error("Comma was expected to separate etags. Encountered a weak quotation character 'W' instead. This would otherwise indicate the start of a new weak etag.");
        }
        if (!(h.length > 2 && h[1] === "/" && h[2] === '"')) throw new Error("Weak etags must start with W/ and their value must be quoted");
        h = StringPrototypeSlice(h, 3);
        const q = StringPrototypeIndexOf(h, '"');
        if (q < 0) throw new Error("Unclosed double quote for Etag");
        ArrayPrototypePush(out, { type: "weak", value: StringPrototypeSlice(h, 0, q) });
        h = StringPrototypeSlice(h, q + 1);
        commaNeeded = true;
        continue;
      }
      case '"': {
        if (commaNeeded) {
          throw new Error(`Comma was expected to separate etags. Encountered a double quote character '"' instead. This would otherwise indicate the start of a new strong etag.`);
        }
        h = StringPrototypeSlice(h, 1);
        const q = StringPrototypeIndexOf(h, '"');
        if (q < 0) throw new Error("Unclosed double quote for Etag");
        ArrayPrototypePush(out, { type: "strong", value: StringPrototypeSlice(h, 0, q) });
        h = StringPrototypeSlice(h, q + 1);
        commaNeeded = true;
        continue;
      }
      default:
        return out;
    }
  }
}

function onlyIf(o, struct) {
  const c = o.onlyIf;
  if (c === undefined) return undefined;
  if (isHeaders(c)) {
    const out = { secondsGranularity: true };
    const m = c.get("if-match");
    if (m !== null) {
      out.etagMatches = parseEtagHeader(m);
      if (out.etagMatches.length === 0) throw new Error("Invalid ETag in if-match header");
    }
    const n = c.get("if-none-match");
    if (n !== null) {
      out.etagDoesNotMatch = parseEtagHeader(n);
      if (out.etagDoesNotMatch.length === 0) throw new Error("Invalid ETag in if-none-match header");
    }
    const after = c.get("if-modified-since");
    if (after !== null && !NumberIsNaN(Date.parse(after))) out.uploadedAfter = Date.parse(after);
    const before = c.get("if-unmodified-since");
    if (before !== null && !NumberIsNaN(Date.parse(before))) out.uploadedBefore = Date.parse(before);
    return out;
  }
  if (!isObject(c)) throw notField("onlyIf", struct, "Conditional or Headers");
  const out = { secondsGranularity: !!c.secondsGranularity };
  const etag = (field) => {
    const v = strField(c, field, "Conditional");
    if (v === undefined) return undefined;
    if (StringPrototypeStartsWith(v, '"') && StringPrototypeEndsWith(v, '"')) {
      throw new TypeError(`Conditional ETag should not be wrapped in quotes (${v}).`);
    }
    return [v === "*" ? { type: "wildcard" } : { type: "strong", value: v }];
  };
  out.etagMatches = etag("etagMatches");
  out.etagDoesNotMatch = etag("etagDoesNotMatch");
  out.uploadedBefore = dateField(c, "uploadedBefore", "Conditional");
  out.uploadedAfter = dateField(c, "uploadedAfter", "Conditional");
  return out;
}

function range(o) {
  const r = o.range;
  if (r === undefined) return {};
  if (isHeaders(r)) {
    const h = r.get("range");
    return h === null ? {} : { header: h };
  }
  if (!isObject(r)) throw notField("range", "GetOptions", "Range or Headers");
  const out = {};
  const n = (v) => (v === undefined ? undefined : Number(v));
  const offset = n(r.offset);
  const length = n(r.length);
  const suffix = n(r.suffix);
  if (offset !== undefined) {
    if (!(offset >= 0)) throw new RangeError(`Invalid range. Starting offset (${num(offset)}) must be greater than or equal to 0.`);
    if (!NumberIsInteger(offset)) throw new RangeError(`Invalid range. Starting offset (${num(offset)}) must be an integer, not floating point.`);
    out.offset = offset;
  }
  if (length !== undefined) {
    if (!(length >= 0)) throw new RangeError(`Invalid range. Length (${num(length)}) must be greater than or equal to 0.`);
    if (!NumberIsInteger(length)) throw new RangeError(`Invalid range. Length (${num(length)}) must be an integer, not floating point.`);
    out.length = length;
  }
  if (suffix !== undefined) {
    if (offset !== undefined) throw new TypeError("Suffix is incompatible with offset.");
    if (length !== undefined) throw new TypeError("Suffix is incompatible with length.");
    if (!(suffix >= 0)) throw new RangeError(`Invalid suffix. Suffix (${num(suffix)}) must be greater than or equal to 0.`);
    if (!NumberIsInteger(suffix)) throw new RangeError(`Invalid range. Suffix (${num(suffix)}) must be an integer, not floating point.`);
    out.suffix = suffix;
  }
  return out;
}

// httpMetadata as given (object or Headers): what is stored, and what the
// put's answer shows.
function httpMetadataIn(o, struct) {
  const m = o.httpMetadata;
  if (m === undefined) return [{}, {}];
  const stored = {};
  const shown = {};
  if (isHeaders(m)) {
    const names = ["content-type", "content-language", "content-disposition", "content-encoding", "cache-control"];
    for (let i = 0; i < names.length; i++) {
      const v = m.get(names[i]);
      if (v !== null) stored[HTTP_FIELDS[i]] = shown[HTTP_FIELDS[i]] = v;
    }
    const exp = m.get("expires");
    if (exp !== null) {
      const d = new Date(exp);
      stored.cacheExpiry = DatePrototypeGetTime(d);
      shown.cacheExpiry = d;
    }
    return [stored, shown];
  }
  if (!isObject(m)) throw notField("httpMetadata", struct, "HttpMetadata or Headers");
  for (const f of HTTP_FIELDS) if (m[f] !== undefined) stored[f] = shown[f] = `${m[f]}`;
  const exp = dateField(m, "cacheExpiry", "HttpMetadata");
  if (exp !== undefined) {
    stored.cacheExpiry = exp;
    shown.cacheExpiry = new Date(exp);
  }
  return [stored, shown];
}

function customMetadataIn(o, struct) {
  const m = o.customMetadata;
  if (m === undefined) return {};
  if (!isObject(m) || ArrayIsArray(m)) throw notField("customMetadata", struct, "object");
  const out = {};
  for (const { 0: k, 1: v } of ObjectEntries(m)) out[k] = `${v}`;
  return out;
}

const HASHES = [
  ["md5", "MD5", 16],
  ["sha1", "SHA-1", 20],
  ["sha256", "SHA-256", 32],
  ["sha384", "SHA-384", 48],
  ["sha512", "SHA-512", 64],
];

function checksumsIn(o) {
  const out = {};
  let given = false;
  for (const { 0: field, 1: name, 2: size } of HASHES) {
    const v = o[field];
    if (v === undefined) continue;
    const b = bytesOf(v);
    if (b === null && typeof v !== "string") throw notField(field, "PutOptions", "JsBufferSource or string");
    if (given) throw new TypeError("You cannot specify multiple hashing algorithms.");
    given = true;
    if (b !== null) {
      if (b.byteLength !== size) throw new TypeError(`${name} is ${size} bytes, not ${b.byteLength}`);
      out[field] = hex(b);
    } else {
      if (v.length !== size * 2) throw new TypeError(`${name} is ${size * 2} hex characters, not ${v.length}`);
      if (!/^[0-9a-fA-F]*$/.test(v)) throw new TypeError(`Provided ${name} wasn't a valid hex string`);
      out[field] = StringPrototypeToLowerCase(v);
    }
  }
  return out;
}

// Customer-provided encryption keys: checked as workerd checks them, then
// refused by name (nothing here would encrypt with them).
function ssecKey(o) {
  const k = o.ssecKey;
  if (k === undefined) return;
  if (typeof k === "string") {
    if (!/^[0-9a-f]+$/.test(k)) throw new Error("SSE-C Key has invalid format");
    if (k.length !== 64) throw new Error("SSE-C Key must be 32 bytes in length");
  } else {
    const b = bytesOf(k);
    if (b === null || b.byteLength !== 32) throw new Error("SSE-C Key must be 32 bytes in length");
  }
  throw new Error("R2 ssecKey (SSE-C, customer-provided encryption keys) is not supported by cellhost");
}

// Streams R2 can size up front, as workerd requires of a put's stream:
// request and response bodies and FixedLengthStream's readable side.
const sizedStreams = new SafeWeakSet();
export function markSized(stream) {
  if (stream !== null) sizedStreams.add(stream);
  return stream;
}
for (const proto of [Request.prototype, Response.prototype]) {
  const desc = ObjectGetOwnPropertyDescriptor(proto, "body");
  const get = desc.get;
  const wrapped = {
    get body() {
      return markSized(FunctionPrototypeCall(get, this));
    },
  };
  desc.get = ObjectGetOwnPropertyDescriptor(wrapped, "body").get;
  ObjectDefineProperty(proto, "body", desc);
}

const VALUE_TYPE = "ReadableStream or ArrayBuffer or ArrayBufferView or string or Blob";

// A put's value as bytes.
async function valueBytes(args, method, cls) {
  if (args.length < 2) throw notParam(method, cls, 2, VALUE_TYPE);
  const v = args[1];
  if (v === null && method === "put") return new Uint8Array(0);
  if (typeof v === "string") return core.encode(v);
  const b = bytesOf(v);
  if (b !== null) return TypedArrayPrototypeSlice(b);
  if (isObject(v) && ObjectPrototypeIsPrototypeOf(BlobPrototype, v)) return new Uint8Array(await v.arrayBuffer());
  if (isObject(v) && ObjectPrototypeIsPrototypeOf(ReadableStreamPrototype, v)) {
    if (!sizedStreams.has(v)) {
      throw new TypeError(
        "Provided readable stream must have a known length (request/response body or readable half of FixedLengthStream)",
      );
    }
    return new Uint8Array(await new Response(v).arrayBuffer());
  }
  throw notParam(method, cls, 2, VALUE_TYPE);
}

// workerd's int conversion of a part number (NaN: 0).
function partNumber(v) {
  const n = MathTrunc(Number(v));
  const part = NumberIsNaN(n) ? 0 : n;
  if (!(part >= 1 && part <= 10000)) {
    throw new TypeError(`Part number must be between 1 and 10000 (inclusive). Actual value was: ${part}`);
  }
  return part;
}

// ---- the binding ------------------------------------------------------------

class R2MultipartUpload {
  #binding;
  constructor(binding, key, uploadId) {
    this.#binding = binding;
    ObjectDefineProperty(this, "uploadId", { value: uploadId, enumerable: true });
    ObjectDefineProperty(this, "key", { value: key, enumerable: true });
  }

  async uploadPart(part, value, options) {
    const n = partNumber(part);
    ssecKey(dict(options, "uploadPart", 3, "UploadPartOptions", "R2MultipartUpload"));
    const bytes = await valueBytes(arguments, "uploadPart", "R2MultipartUpload");
    const etag = randomId();
    await call("uploadPart", () => op_r2_upload_part(this.#binding, this.key, this.uploadId, n, etag, bytes));
    return { partNumber: n, etag };
  }

  async abort() {
    await call("abortMultipartUpload", () => op_r2_upload_abort(this.#binding, this.key, this.uploadId));
  }

  async complete(parts) {
    if (!ArrayIsArray(parts)) throw notParam("complete", "R2MultipartUpload", 1, "Array");
    const list = ArrayPrototypeMap(parts, (p) => ({ part: partNumber(p?.partNumber), etag: `${p?.etag}` }));
    const meta = await call("completeMultipartUpload", () =>
      op_r2_upload_complete(this.#binding, this.key, this.uploadId, randomHex(16), list)
    );
    return new HeadResult(JSONParse(meta), undefined);
  }
}

class R2Bucket {
  #binding;
  constructor(binding) {
    this.#binding = binding;
  }

  get [SymbolToStringTag]() {
    return "R2Bucket";
  }

  async head(_key) {
    const k = key(arguments, 1, "head");
    const meta = await call("head", () => op_r2_head(this.#binding, k));
    if (meta === null) return null;
    const m = JSONParse(meta);
    return new HeadResult(m, { offset: 0, length: m.size });
  }

  async get(_key, options) {
    const k = key(arguments, 1, "get");
    const o = dict(options, "get", 2, "GetOptions");
    const request = { onlyIf: onlyIf(o, "GetOptions"), range: range(o) };
    ssecKey(o);
    const r = await call("get", () => op_r2_get(this.#binding, k, JSONStringify(request)));
    if (r.kind === 0) return null;
    const m = JSONParse(r.meta);
    if (r.kind === 1) return new HeadResult(m, { offset: 0, length: m.size });
    return new GetResult(m, { offset: r.offset, length: r.length }, r.body);
  }

  async put(_key, _value, options) {
    const k = key(arguments, 1, "put");
    const o = dict(options, "put", 3, "PutOptions");
    const cond = onlyIf(o, "PutOptions");
    const custom = customMetadataIn(o, "PutOptions");
    const { 0: http, 1: shown } = httpMetadataIn(o, "PutOptions");
    const checksums = checksumsIn(o);
    // Accepted and, as in wrangler dev, not kept: there are no storage
    // classes here.
    if (o.storageClass !== undefined) `${o.storageClass}`;
    ssecKey(o);
    const bytes = await valueBytes(arguments, "put", "R2Bucket");
    const request = { version: randomHex(16), httpMetadata: http, customMetadata: custom, onlyIf: cond, checksums };
    const meta = await call("put", () => op_r2_put(this.#binding, k, bytes, JSONStringify(request)));
    if (meta === null) return null;
    return new HeadResult(JSONParse(meta), undefined, shown, { ...custom });
  }

  async delete(keys) {
    if (arguments.length < 1) throw notParam("delete", "R2Bucket", 1, "string or Array");
    const list = ArrayIsArray(keys) ? ArrayPrototypeMap(keys, (k) => `${k}`) : [key(arguments, 1, "delete")];
    await call("delete", () => op_r2_delete(this.#binding, list));
  }

  async list(options) {
    const o = dict(options, "list", 1, "ListOptions");
    const request = {
      prefix: strField(o, "prefix", "ListOptions") ?? "",
      delimiter: strField(o, "delimiter", "ListOptions"),
      include: [],
    };
    if (o.limit !== undefined) {
      // workerd's int conversion; a negative limit is no limit on wrangler dev.
      const n = MathTrunc(Number(o.limit));
      const limit = NumberIsNaN(n) ? 0 : n;
      if (limit >= 0) request.limit = limit;
    }
    let after = strField(o, "startAfter", "ListOptions");
    const cursor = strField(o, "cursor", "ListOptions");
    if (cursor !== undefined && cursor !== "") {
      const c = fromBase64Utf8(cursor);
      if (after === undefined || c > after) after = c;
    }
    request.startAfter = after;
    if (o.include !== undefined) {
      if (!ArrayIsArray(o.include)) throw notField("include", "ListOptions", "Array");
      for (let i = 0; i < o.include.length; i++) {
        const f = o.include[i];
        if (typeof f !== "string") {
          throw new TypeError(`Incorrect type for array element ${i}: the provided value is not of type 'string'.`);
        }
        if (f !== "httpMetadata" && f !== "customMetadata") throw new RangeError(`Unsupported include value ${f}`);
        ArrayPrototypePush(request.include, f);
      }
    }
    const res = JSONParse(await call("list", () => op_r2_list(this.#binding, JSONStringify(request))));
    const withHttp = ArrayPrototypeIncludes(request.include, "httpMetadata");
    const withCustom = ArrayPrototypeIncludes(request.include, "customMetadata");
    const objects = ArrayPrototypeMap(
      res.objects,
      (m) => new HeadResult(m, undefined, withHttp ? undefined : {}, withCustom ? undefined : {}),
    );
    const out = { objects, truncated: res.truncated };
    if (res.cursor !== null) out.cursor = base64Utf8(res.cursor);
    out.delimitedPrefixes = res.delimitedPrefixes;
    return out;
  }

  async createMultipartUpload(_key, options) {
    const k = key(arguments, 1, "createMultipartUpload");
    const o = dict(options, "createMultipartUpload", 2, "MultipartOptions");
    const custom = customMetadataIn(o, "MultipartOptions");
    const { 0: http } = httpMetadataIn(o, "MultipartOptions");
    ssecKey(o);
    const id = randomId();
    const request = JSONStringify({ httpMetadata: http, customMetadata: custom });
    await call("createMultipartUpload", () => op_r2_upload_create(this.#binding, k, id, request));
    return new R2MultipartUpload(this.#binding, k, id);
  }

  resumeMultipartUpload(_key, _uploadId) {
    const k = key(arguments, 1, "resumeMultipartUpload");
    return new R2MultipartUpload(this.#binding, k, key(arguments, 2, "resumeMultipartUpload"));
  }
}

export function r2Bucket(binding) {
  return new R2Bucket(binding);
}

// A Workers KV namespace binding (`env.NS`) as workerd shapes it, with the
// checks and messages workerd makes itself and those its local KV service
// (miniflare's) answers with, worded as workerd reports them:
// "KV <METHOD> failed: <status> <text>". Storage: src/lib.rs.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayBufferIsView,
  ArrayBufferPrototypeSlice,
  ArrayIsArray,
  ArrayPrototypePush,
  DataView,
  DataViewPrototypeGetBuffer,
  DataViewPrototypeGetByteLength,
  DataViewPrototypeGetByteOffset,
  Error,
  Map,
  MapPrototypeSet,
  JSONParse,
  JSONStringify,
  MathFloor,
  MathTrunc,
  NumberIsNaN,
  NumberParseInt,
  ObjectPrototypeIsPrototypeOf,
  SymbolToStringTag,
  TypeError,
  TypedArrayPrototypeGetBuffer,
  TypedArrayPrototypeGetByteLength,
  TypedArrayPrototypeGetByteOffset,
  Uint8Array,
} = primordials;
const { op_kvns_get, op_kvns_put, op_kvns_delete, op_kvns_list } = core.ops;
const { ReadableStreamPrototype } = core.loadExtScript("ext:deno_web/06_streams.js");

const MAX_KEY_BYTES = 512;
const MIN_CACHE_TTL = 30;
const MIN_EXPIRATION_TTL = 60;
const MAX_LIST_KEYS = 1000;
const MAX_VALUE_BYTES = 25 * 1024 * 1024;
const MAX_METADATA_BYTES = 1024;
const MAX_BULK_KEYS = 100;

const encoder = new TextEncoder();
const utf8Length = (s) => encoder.encode(s).byteLength;

function failed(method, status, text) {
  return new Error(`KV ${method} failed: ${status} ${text}`);
}

function checkKeyLength(method, name) {
  const n = utf8Length(name);
  if (n > MAX_KEY_BYTES) {
    throw failed(method, 414, `UTF-8 encoded length of ${n} exceeds key length limit of ${MAX_KEY_BYTES}.`);
  }
}

// workerd's own check of a key, before any request.
function validateKeyName(method, name) {
  if (name === "") throw new TypeError("Key name cannot be empty.");
  if (name === ".") throw new TypeError('"." is not allowed as a key name.');
  if (name === "..") throw new TypeError('".." is not allowed as a key name.');
  checkKeyLength(method, name);
}

// The service's check of a key (bulk reads skip workerd's).
function serviceKeyCheck(method, name) {
  if (name === "") throw failed(method, 400, "Key names must not be empty");
  if (name === "." || name === "..") {
    throw failed(method, 400, `Illegal key name "${name}". Please use a different name.`);
  }
  checkKeyLength(method, name);
}

function checkCacheTtl(method, cacheTtl) {
  if (cacheTtl !== undefined && (NumberIsNaN(cacheTtl) || cacheTtl < MIN_CACHE_TTL)) {
    throw failed(method, 400, `Invalid cache_ttl of ${cacheTtl}. Cache TTL must be at least ${MIN_CACHE_TTL}.`);
  }
}

function readOptions(options) {
  if (options === undefined || options === null) return { type: undefined, cacheTtl: undefined };
  if (typeof options === "string") return { type: options, cacheTtl: undefined };
  const cacheTtl = options.cacheTtl === undefined ? undefined : MathTrunc(+options.cacheTtl);
  return {
    type: options.type === undefined ? undefined : `${options.type}`,
    cacheTtl,
  };
}

function decodeValue(bytes, type) {
  switch (type ?? "text") {
    case "text":
      return new TextDecoder().decode(bytes);
    case "json":
      return JSONParse(new TextDecoder().decode(bytes));
    case "arrayBuffer":
      return TypedArrayPrototypeGetBuffer(bytes).byteLength === TypedArrayPrototypeGetByteLength(bytes)
        ? TypedArrayPrototypeGetBuffer(bytes)
        : ArrayBufferPrototypeSlice(TypedArrayPrototypeGetBuffer(bytes), 0);
    case "stream":
      return new ReadableStream({
        start(controller) {
          if (bytes.byteLength > 0) controller.enqueue(bytes);
          controller.close();
        },
      });
    default:
      throw new TypeError(
        'Unknown response type. Possible types are "text", "arrayBuffer", "json", and "stream".',
      );
  }
}

function toBytes(value) {
  if (typeof value !== "object" || value === null) return encoder.encode(`${value}`);
  if (ObjectPrototypeIsPrototypeOf(ArrayBuffer.prototype, value)) return new Uint8Array(value);
  if (ObjectPrototypeIsPrototypeOf(DataView.prototype, value)) {
    return new Uint8Array(
      DataViewPrototypeGetBuffer(value),
      DataViewPrototypeGetByteOffset(value),
      DataViewPrototypeGetByteLength(value),
    );
  }
  if (ArrayBufferIsView(value)) {
    return new Uint8Array(
      TypedArrayPrototypeGetBuffer(value),
      TypedArrayPrototypeGetByteOffset(value),
      TypedArrayPrototypeGetByteLength(value),
    );
  }
  return null;
}

async function readStream(stream) {
  const chunks = [];
  let total = 0;
  for await (const chunk of stream) {
    const bytes = toBytes(chunk);
    if (bytes === null || typeof chunk !== "object") {
      throw new TypeError("This TransformStream is being used as a byte stream, but received an object of non-ArrayBuffer/ArrayBufferView type on its writable side.");
    }
    ArrayPrototypePush(chunks, bytes);
    total += bytes.byteLength;
    if (total > MAX_VALUE_BYTES) {
      throw failed("PUT", 413, `Value length of ${total} exceeds limit of ${MAX_VALUE_BYTES}.`);
    }
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

const nowSeconds = () => MathFloor(Date.now() / 1000);

class KVNamespace {
  #id;
  constructor(id) {
    this.#id = id;
  }

  get [SymbolToStringTag]() {
    return "KvNamespace";
  }

  get(name, options) {
    if (ArrayIsArray(name)) return this.#bulk(name, options, false);
    return this.#getWithMetadata(name, options).then((r) => r.value);
  }

  getWithMetadata(name, options) {
    if (ArrayIsArray(name)) return this.#bulk(name, options, true);
    return this.#getWithMetadata(name, options);
  }

  async #getWithMetadata(name, options) {
    name = `${name}`;
    validateKeyName("GET", name);
    const { type, cacheTtl } = readOptions(options);
    checkCacheTtl("GET", cacheTtl);
    const entry = op_kvns_get(this.#id, name);
    if (entry === null) return { value: null, metadata: null, cacheStatus: null };
    const value = decodeValue(entry.value, type);
    const metadata = entry.metadata === null ? null : JSONParse(entry.metadata);
    return { value, metadata, cacheStatus: null };
  }

  async #bulk(names, options, withMetadata) {
    const method = "GET_BULK";
    names = names.map((n) => `${n}`);
    const { type, cacheTtl } = readOptions(options);
    if (type !== undefined && type !== "" && type !== "text" && type !== "json") {
      throw failed(method, 400, `"${type}" is not a valid type. Use "json" or "text"`);
    }
    if (names.length > MAX_BULK_KEYS) {
      throw failed(method, 400, `You can request a maximum of ${MAX_BULK_KEYS} keys`);
    }
    if (names.length < 1) throw failed(method, 400, "You must request a minimum of 1 key");
    // A plain Map: the Worker gets what workerd gives.
    const out = new Map();
    let total = 0;
    for (const name of names) {
      serviceKeyCheck(method, name);
      checkCacheTtl(method, cacheTtl);
      const entry = op_kvns_get(this.#id, name);
      let value = null;
      if (entry !== null) {
        const text = new TextDecoder().decode(entry.value);
        total += text.length;
        try {
          value = type === "json" ? JSONParse(text) : text;
        } catch {
          throw failed(method, 400, `At least one of the requested keys corresponds to a non-${type} value`);
        }
        // The local service wraps only values that are truthy (as miniflare).
        if (value && withMetadata) {
          value = { value, metadata: entry.metadata === null ? null : JSONParse(entry.metadata) };
        }
      }
      MapPrototypeSet(out, name, value);
    }
    if (total > MAX_VALUE_BYTES) {
      throw failed(method, 413, `Total size of request exceeds the limit of ${MAX_VALUE_BYTES / 1024 / 1024}MB`);
    }
    return out;
  }

  async put(name, value, options) {
    name = `${name}`;
    validateKeyName("PUT", name);
    let bytes = toBytes(value);
    const isStream = bytes === null && ObjectPrototypeIsPrototypeOf(ReadableStreamPrototype, value);
    if (bytes === null && !isStream) {
      throw new TypeError(
        "KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and ReadableStreams as values.",
      );
    }
    const now = nowSeconds();
    let expiration = 0;
    if (options?.expirationTtl !== undefined) {
      const raw = `${MathTrunc(+options.expirationTtl)}`;
      const ttl = NumberParseInt(raw);
      if (NumberIsNaN(ttl) || ttl <= 0) {
        throw failed("PUT", 400, `Invalid expiration_ttl of ${raw}. Please specify integer greater than 0.`);
      }
      if (ttl < MIN_EXPIRATION_TTL) {
        throw failed("PUT", 400, `Invalid expiration_ttl of ${raw}. Expiration TTL must be at least ${MIN_EXPIRATION_TTL}.`);
      }
      expiration = now + ttl;
    } else if (options?.expiration !== undefined) {
      const raw = `${MathTrunc(+options.expiration)}`;
      expiration = NumberParseInt(raw);
      if (NumberIsNaN(expiration) || expiration <= now) {
        throw failed("PUT", 400, `Invalid expiration of ${raw}. Please specify integer greater than the current number of seconds since the UNIX epoch.`);
      }
      if (expiration < now + MIN_EXPIRATION_TTL) {
        throw failed("PUT", 400, `Invalid expiration of ${raw}. Expiration times must be at least ${MIN_EXPIRATION_TTL} seconds in the future.`);
      }
    }
    let metadata = "";
    if (options?.metadata !== undefined && options.metadata !== null) {
      metadata = JSONStringify(options.metadata);
      const n = utf8Length(metadata);
      if (n > MAX_METADATA_BYTES) {
        throw failed("PUT", 413, `Metadata length of ${n} exceeds limit of ${MAX_METADATA_BYTES}.`);
      }
    }
    if (isStream) bytes = await readStream(value);
    if (bytes.byteLength > MAX_VALUE_BYTES) {
      throw failed("PUT", 413, `Value length of ${bytes.byteLength} exceeds limit of ${MAX_VALUE_BYTES}.`);
    }
    await op_kvns_put(this.#id, name, bytes, metadata, expiration);
  }

  async delete(name) {
    name = `${name}`;
    validateKeyName("DELETE", name);
    await op_kvns_delete(this.#id, name);
  }

  async list(options) {
    let limit = MAX_LIST_KEYS;
    if (options?.limit !== undefined && options.limit !== null) {
      const l = MathTrunc(+options.limit);
      if (l > 0) limit = l;
    }
    if (limit > MAX_LIST_KEYS) {
      throw failed("GET", 400, `Invalid key_count_limit of ${limit}. Please specify an integer less than ${MAX_LIST_KEYS}.`);
    }
    const prefix = options?.prefix === undefined || options.prefix === null ? "" : `${options.prefix}`;
    checkKeyLength("GET", prefix);
    const cursor = options?.cursor === undefined || options.cursor === null ? "" : `${options.cursor}`;
    const res = JSONParse(op_kvns_list(this.#id, prefix, limit, cursor));
    for (const k of res.keys) {
      if (k.metadata !== undefined) k.metadata = JSONParse(k.metadata);
    }
    if (res.cursor === undefined) return { keys: res.keys, list_complete: true, cacheStatus: null };
    return { keys: res.keys, list_complete: false, cursor: res.cursor, cacheStatus: null };
  }
}

export function kvNamespace(id) {
  return new KVNamespace(id);
}


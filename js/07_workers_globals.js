// Globals workerd offers beyond the Web platform: `scheduler`,
// `IdentityTransformStream`, `FixedLengthStream`, `headers.getAll`, and the `cf` object of
// incoming requests.
import { core, primordials } from "ext:core/mod.js";
import { markSized } from "ext:cellhost_r2/r2.js";

const {
  ArrayPrototypeIncludes,
  Error,
  ObjectDefineProperty,
  PromiseReject,
  Proxy,
  ReflectConstruct,
  RangeError,
  SafeSet,
  StringPrototypeToUpperCase,
  SymbolToStringTag,
  TypeError,
} = primordials;
const { TransformStream } = core.loadExtScript("ext:deno_web/06_streams.js");

class Scheduler {
  /** Resolves after `delay` ms; an aborted signal rejects with its reason. */
  wait(delay, options) {
    const signal = options?.signal;
    if (signal?.aborted) return PromiseReject(signal.reason);
    return new Promise((resolve, reject) => {
      const t = setTimeout(resolve, delay);
      signal?.addEventListener("abort", () => {
        clearTimeout(t);
        reject(signal.reason);
      }, { once: true });
    });
  }
}
ObjectDefineProperty(Scheduler.prototype, SymbolToStringTag, {
  value: "Scheduler",
  configurable: true,
});
export const scheduler = new Scheduler();

function asBytes(chunk) {
  if (ArrayBuffer.isView(chunk)) {
    return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new TypeError(
    "This TransformStream is being used as a byte stream, but received an object of non-ArrayBuffer/ArrayBufferView type on its writable side.",
  );
}

/** A byte stream that passes what is written to its readable side. */
export class IdentityTransformStream extends TransformStream {
  constructor(transformer) {
    super(transformer ?? {
      transform(chunk, controller) {
        controller.enqueue(asBytes(chunk));
      },
    });
  }
}

/** An identity byte stream of a declared length: writing more, or closing
 * early, errors it; a Response over its readable side gets Content-Length. */
export class FixedLengthStream extends IdentityTransformStream {
  #length;
  constructor(length) {
    const expected = Number(length);
    if (!Number.isInteger(expected) || expected < 0) {
      throw new RangeError("FixedLengthStream requires a non-negative integer expected length.");
    }
    let seen = 0;
    super({
      transform(chunk, controller) {
        const bytes = asBytes(chunk);
        seen += bytes.byteLength;
        if (seen > expected) {
          throw new TypeError("Attempt to write too many bytes through a FixedLengthStream.");
        }
        controller.enqueue(bytes);
      },
      flush() {
        if (seen < expected) {
          throw new TypeError("FixedLengthStream did not see all expected bytes before close().");
        }
      },
    });
    this.#length = expected;
    fixedLengths.set(this.readable, expected);
    markSized(this.readable);
  }
  get expectedLength() {
    return this.#length;
  }
}

/** The declared length of a FixedLengthStream's readable side, if any. */
export const fixedLengths = new primordials.SafeWeakMap();

// `headers.getAll(name)`: workerd's older way to read every Set-Cookie
// header (before getSetCookie); any other name is refused, as on workerd.
const { Headers } = core.loadExtScript("ext:deno_fetch/20_headers.js");
ObjectDefineProperty(Headers.prototype, "getAll", {
  value: function getAll(name) {
    if (`${name}`.toLowerCase() !== "set-cookie") {
      throw new TypeError('getAll() can only be used with the header name "Set-Cookie".');
    }
    return this.getSetCookie();
  },
  writable: true,
  configurable: true,
});

// Request's `cache` option as workerd takes it: refused before 2024-11-11
// (cache_option_enabled), then only the modes it honours: `no-store`, and
// `no-cache` from 2025-08-07 (cache_no_cache_enabled). Checked where a
// Worker constructs a Request and by fetch(); `request.cache` is the mode
// given. Set by `requestCache` before the Worker's modules run.
let cacheModes = null; // null: the option is refused.

// The methods workerd knows (kj's list). A name in another case is
// upper-cased from 2024-10-14 (upper_case_all_http_methods); before, only
// the six the Fetch standard normalizes are; any other name is refused.
// (TRACE stays refused here: deno_fetch forbids it.)
const METHODS = new SafeSet([
  "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "PURGE", "OPTIONS", "TRACE", "COPY", "LOCK", "MKCOL", "MOVE",
  "PROPFIND", "PROPPATCH", "SEARCH", "UNLOCK", "ACL", "REPORT", "MKACTIVITY", "CHECKOUT", "MERGE", "MSEARCH",
  "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "QUERY", "BAN",
]);
const STANDARD = new SafeSet(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]);
let upperCaseAll = true;
function method(m) {
  if (METHODS.has(m)) return m;
  const upper = StringPrototypeToUpperCase(m);
  if (METHODS.has(upper) && (upperCaseAll || STANDARD.has(upper))) return upper;
  throw new TypeError(`Invalid HTTP method string: ${m}`);
}

/** The RequestInit to construct with: `init` checked as workerd checks it
 * (the cache option, the method), with the method workerd would use. */
function checkInit(init) {
  if (init === null || typeof init !== "object") return init;
  const mode = init.cache;
  if (mode !== undefined) {
    if (cacheModes === null) {
      throw new Error("The 'cache' field on 'RequestInitializerDict' is not implemented.");
    }
    if (!ArrayPrototypeIncludes(cacheModes, `${mode}`)) {
      throw new TypeError(`Unsupported cache mode: ${mode}`);
    }
  }
  const given = init.method;
  if (given === undefined) return init;
  const m = method(`${given}`);
  return m === given ? init : { ...init, method: m };
}
export { checkInit as checkRequestInit };

/** Installs the cache option's rules for the Worker's flags (the object
 * `Cloudflare.compatibilityFlags` is) on the global Request, which is
 * returned. */
export function requestCache(flags, requestMod) {
  upperCaseAll = !!flags.upper_case_all_http_methods;
  if (flags.cache_option_enabled) {
    cacheModes = flags.cache_no_cache_enabled ? ["no-store", "no-cache"] : ["no-store"];
    ObjectDefineProperty(requestMod.Request.prototype, "cache", {
      get() {
        return requestMod.toInnerRequest(this).cacheMode;
      },
      enumerable: true,
      configurable: true,
    });
  }
  return new Proxy(requestMod.Request, {
    construct(target, args, newTarget) {
      if (args.length > 1) args[1] = checkInit(args[1]);
      return ReflectConstruct(target, args, newTarget);
    },
  });
}

// `request.cf` of an incoming request: wrangler dev's fallback (Cloudflare
// adds the real one at its edge; a host has no geolocation of its own).
export function fallbackCf() {
  return {
    asOrganization: "",
    asn: 395747,
    colo: "DFW",
    city: "Austin",
    region: "Texas",
    regionCode: "TX",
    metroCode: "635",
    postalCode: "78701",
    country: "US",
    continent: "NA",
    timezone: "America/Chicago",
    latitude: "30.27130",
    longitude: "-97.74260",
    clientTcpRtt: 0,
    httpProtocol: "HTTP/1.1",
    requestPriority: "weight=192;exclusive=0",
    tlsCipher: "",
    tlsVersion: "",
    edgeRequestKeepAliveStatus: 0,
    clientTrustScore: 99,
    botManagement: {
      corporateProxy: false,
      verifiedBot: false,
      ja3Hash: "",
      staticResource: false,
      detectionIds: [],
      score: 99,
    },
  };
}


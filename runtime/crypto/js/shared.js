// Helpers the Web Crypto additions share: BufferSource copies, algorithm
// names, workerd's canonical usages and names, and promise settling.
import { primordials } from "ext:core/mod.js";

const {
  ArrayFrom,
  ArrayPrototypeFilter,
  ArrayPrototypeFind,
  ArrayPrototypeIncludes,
  SymbolIterator,
  ArrayBufferIsView,
  ObjectDefineProperty,
  ObjectPrototypeIsPrototypeOf,
  PromiseReject,
  PromiseResolve,
  StringPrototypeToUpperCase,
  TypedArrayPrototypeSlice,
  Uint8Array,
  ArrayBufferPrototype,
  SharedArrayBufferPrototype,
} = primordials;

// A BufferSource's bytes as a fresh copy (Web Crypto copies its inputs
// when called), or undefined for anything else.
export function copyOf(data) {
  if (ArrayBufferIsView(data)) {
    return TypedArrayPrototypeSlice(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }
  if (ObjectPrototypeIsPrototypeOf(ArrayBufferPrototype, data) || ObjectPrototypeIsPrototypeOf(SharedArrayBufferPrototype, data)) {
    return TypedArrayPrototypeSlice(new Uint8Array(data));
  }
  return undefined;
}

export function upperName(algorithm) {
  const name = typeof algorithm === "string" ? algorithm : algorithm?.name;
  return typeof name === "string" ? StringPrototypeToUpperCase(name) : undefined;
}

export const JWK_MEMBERS = ["kty", "use", "key_ops", "alg", "ext", "crv", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi", "oth", "k", "pub", "priv"];
export const USAGE_ORDER = ["encrypt", "decrypt", "sign", "verify", "deriveKey", "deriveBits", "wrapKey", "unwrapKey"];

// Known usages in workerd's order, once each; anything else is left for
// deno_crypto's checks (a non-iterable, an unknown usage) to refuse.
export function canonicalUsages(usages) {
  if (usages === null || typeof usages !== "object" || typeof usages[SymbolIterator] !== "function") return usages;
  const given = ArrayFrom(usages);
  const known = ArrayPrototypeFilter(USAGE_ORDER, (u) => ArrayPrototypeIncludes(given, u));
  const unknown = ArrayPrototypeFilter(given, (u) => !ArrayPrototypeIncludes(USAGE_ORDER, u));
  return [...new primordials.SafeArrayIterator(known), ...new primordials.SafeArrayIterator(unknown)];
}

export const HASHES = ["SHA-1", "SHA-256", "SHA-384", "SHA-512", "MD5"];
export const CURVES = ["P-256", "P-384", "P-521"];
export const canonical = (list, name) =>
  typeof name === "string" ? (ArrayPrototypeFind(list, (n) => n === StringPrototypeToUpperCase(name)) ?? name) : name;

// workerd matches hash and curve names case-insensitively and keeps the
// canonical spelling in key.algorithm ("sha-256" -> "SHA-256", "p-256").
export function canonicalNames(algorithm) {
  if (algorithm === null || typeof algorithm !== "object") return algorithm;
  const { hash, namedCurve } = algorithm;
  const fixedHash = typeof hash === "string" ? canonical(HASHES, hash)
    : hash !== null && typeof hash === "object" && typeof hash.name === "string"
    ? { ...hash, name: canonical(HASHES, hash.name) }
    : hash;
  const fixedCurve = canonical(CURVES, namedCurve);
  if (fixedHash === hash && fixedCurve === namedCurve) return algorithm;
  const copy = { __proto__: algorithm };
  if (hash !== undefined) copy.hash = fixedHash;
  if (namedCurve !== undefined) copy.namedCurve = fixedCurve;
  return copy;
}

export function define(object, name, value) {
  ObjectDefineProperty(object, name, { configurable: true, writable: true, enumerable: false, value });
}

export function settle(fn) {
  try {
    return PromiseResolve(fn());
  } catch (e) {
    return PromiseReject(e);
  }
}

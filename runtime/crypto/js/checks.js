// workerd's argument checks, in front of every SubtleCrypto method: the
// algorithms, hashes and formats it knows, its limits on keys, its error
// classes, and MD5 for HMAC, PBKDF2 and HKDF (computed in Rust).
import { core, internals, primordials } from "ext:core/mod.js";
import {
  canonical,
  copyOf,
  CURVES,
  settle,
} from "ext:cellhost_crypto/shared.js";

const {
  MathCeil,
  MathTrunc,
  ArrayPrototypeIncludes,
  ReflectApply,
  ArrayBufferIsView,
  FunctionPrototypeCall,
  ObjectDefineProperty,
  ObjectGetOwnPropertyDescriptor,
  ObjectPrototypeIsPrototypeOf,
  PromisePrototypeThen,
  StringPrototypeToUpperCase,
  TypedArrayPrototypeSlice,
  TypeError,
  Uint8Array,
} = primordials;
const {
  op_crypto_hmac_md5,
  op_crypto_hmac_md5_verify,
  op_crypto_pbkdf2_md5,
  op_crypto_hkdf_md5,
  op_crypto_ec_point_valid,
} = core.ops;

// Which algorithms workerd knows (upper-cased), per operation; the rest
// (deno_crypto's SHA-3, X448, ML-KEM, ...) are NotSupportedError there.
const DIGESTS = ["SHA-1", "SHA-256", "SHA-384", "SHA-512", "MD5"];
const KEY_ALGORITHMS = ["RSASSA-PKCS1-V1_5", "RSA-PSS", "RSA-OAEP", "ECDSA", "ECDH", "AES-CTR", "AES-CBC", "AES-GCM", "AES-KW", "HMAC", "X25519", "ED25519", "NODE-ED25519"];
const IMPORTABLE = [...new primordials.SafeArrayIterator(KEY_ALGORITHMS), "HKDF", "PBKDF2"];
const DERIVABLE = ["AES-CTR", "AES-CBC", "AES-GCM", "AES-KW", "HMAC", "HKDF", "PBKDF2"];
const RSA = ["RSASSA-PKCS1-V1_5", "RSA-PSS", "RSA-OAEP"];
const AES = ["AES-CTR", "AES-CBC", "AES-GCM", "AES-KW"];
const FORMATS = ["raw", "pkcs8", "spki", "jwk"];
// Formats workerd knows but keeps behind a compatibility flag.
const GATED_FORMATS = ["raw-secret", "raw-public", "raw-private", "raw-seed"];
const HASH_BYTES = { "SHA-1": 20, "SHA-256": 32, "SHA-384": 48, "SHA-512": 64, "MD5": 16 };
// A JWK "alg" names a hash for any RSA scheme in workerd (it checks only
// the hash), and names outside this table are NotSupportedError.
const RSA_JWK_HASH = {
  "RS1": "SHA-1", "RS256": "SHA-256", "RS384": "SHA-384", "RS512": "SHA-512",
  "PS1": "SHA-1", "PS256": "SHA-256", "PS384": "SHA-384", "PS512": "SHA-512",
  "RSA-OAEP": "SHA-1", "RSA-OAEP-256": "SHA-256", "RSA-OAEP-384": "SHA-384", "RSA-OAEP-512": "SHA-512",
};
const RSA_JWK_PREFIX = { "RSASSA-PKCS1-V1_5": "RS", "RSA-PSS": "PS", "RSA-OAEP": "RSA-OAEP-" };
// The NIST curves' coordinate sizes; a public point off its curve is
// refused (op_crypto_ec_point_valid), as workerd refuses it.
const EC = {
  "P-256": { name: "P-256", size: 32 },
  "P-384": { name: "P-384", size: 48 },
  "P-521": { name: "P-521", size: 66 },
};
const JWK_BYTES = ["k", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi"];

function nameOf(algorithm) {
  if (algorithm === null || algorithm === undefined) throw new TypeError("Algorithm must be a string or an object with a name.");
  if (typeof algorithm === "object" || typeof algorithm === "function") {
    const name = algorithm.name;
    return name === undefined ? undefined : primordials.String(name);
  }
  return primordials.String(algorithm);
}

const toHex = (bytes) => {
  let h = "0x0";
  for (let i = 0; i < bytes.length; i++) h += primordials.StringPrototypePadStart(primordials.NumberPrototypeToString(bytes[i], 16), 2, "0");
  return h;
};
const big = (bytes) => primordials.BigInt(toHex(bytes));

// base64url with workerd's leniency: whitespace is skipped, the standard
// alphabet's + and / are read as - and _.
function lenientB64(s) {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === " " || c === "\t" || c === "\n" || c === "\r") continue;
    out += c === "+" ? "-" : c === "/" ? "_" : c;
  }
  return out;
}
function b64uDecode(s) {
  const out = new Uint8Array(MathCeil((s.length * 3) / 4));
  let acc = 0, bits = 0, n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = primordials.StringPrototypeCharCodeAt(s, i);
    let v;
    if (c >= 65 && c <= 90) v = c - 65;
    else if (c >= 97 && c <= 122) v = c - 71;
    else if (c >= 48 && c <= 57) v = c + 4;
    else if (c === 45) v = 62;
    else if (c === 95) v = 63;
    else if (c === 61) break;
    else return undefined;
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 255;
    }
  }
  return TypedArrayPrototypeSlice(out, 0, n);
}

function onCurve(curve, x, y) {
  const point = new Uint8Array(1 + x.length + y.length);
  point[0] = 4;
  primordials.TypedArrayPrototypeSet(point, x, 1);
  primordials.TypedArrayPrototypeSet(point, y, 1 + x.length);
  return op_crypto_ec_point_valid(curve.name, point);
}
// An uncompressed point 04|X|Y: on the curve or not; undefined for any
// other encoding (deno_crypto judges those).
function pointOk(curve, bytes) {
  if (bytes.length !== 1 + 2 * curve.size || bytes[0] !== 4) return undefined;
  return op_crypto_ec_point_valid(curve.name, bytes);
}
// One DER element at `at`: [tag, content start, end], or undefined.
function der(bytes, at) {
  if (at + 2 > bytes.length) return undefined;
  let len = bytes[at + 1], start = at + 2;
  if (len & 0x80) {
    const k = len & 0x7f;
    if (k === 0 || k > 3 || start + k > bytes.length) return undefined;
    len = 0;
    for (let i = 0; i < k; i++) len = len * 256 + bytes[start + i];
    start += k;
  }
  return start + len > bytes.length ? undefined : [bytes[at], start, start + len];
}
// The subjectPublicKey of an SPKI (the BIT STRING's bytes), or undefined.
function spkiPoint(bytes) {
  const outer = der(bytes, 0);
  if (outer === undefined || outer[0] !== 0x30) return undefined;
  const algid = der(bytes, outer[1]);
  if (algid === undefined) return undefined;
  const key = der(bytes, algid[2]);
  if (key === undefined || key[0] !== 0x03 || key[2] - key[1] < 1 || bytes[key[1]] !== 0) return undefined;
  return primordials.TypedArrayPrototypeSubarray(bytes, key[1] + 1, key[2]);
}

// An RSA key's modulus size in bits, read from its DER (deno_crypto's
// modulusLength counts whole bytes): SPKI for a public key, PKCS#8 for a
// private one.
function intBits(buf, el) {
  let i = el[1];
  while (i < el[2] && buf[i] === 0) i++;
  if (i === el[2]) return 0;
  let n = 0;
  for (let b = buf[i]; b; b >>= 1) n++;
  return (el[2] - i - 1) * 8 + n;
}
function rsaModulusBits({ type, data }) {
  if (type === "public") {
    const key = spkiPoint(data);
    const seq = key && der(key, 0);
    const n = seq && der(key, seq[1]);
    return n && n[0] === 2 ? intBits(key, n) : undefined;
  }
  const outer = der(data, 0);
  const version = outer && der(data, outer[1]);
  const algid = version && der(data, version[2]);
  const octets = algid && der(data, algid[2]);
  const seq = octets && octets[0] === 4 ? der(data, octets[1]) : undefined;
  const v = seq && der(data, seq[1]);
  const n = v && der(data, v[2]);
  return n && n[0] === 2 ? intBits(data, n) : undefined;
}

// PBKDF2 and HKDF over HMAC-MD5 (computed in Rust), with workerd's checks.
function kdfMd5(name, algorithm, secret, length, fail) {
  if (length === null || length === undefined || length % 8 !== 0) fail("OperationError", "The length must be a multiple of 8.");
  const bytes = length / 8;
  const salt = copyOf(algorithm.salt);
  if (salt === undefined) throw new TypeError("salt must be a BufferSource.");
  if (name === "PBKDF2") {
    const iterations = algorithm.iterations;
    if (iterations === undefined) throw new TypeError("iterations is required.");
    if (!(iterations >= 1)) fail("OperationError", "iterations must be at least 1.");
    return op_crypto_pbkdf2_md5(secret, salt, iterations, bytes).buffer;
  }
  const info = copyOf(algorithm.info);
  if (info === undefined) throw new TypeError("info must be a BufferSource.");
  if (bytes > 255 * 16) fail("OperationError", "HKDF-MD5 derives at most 4080 bytes.");
  return op_crypto_hkdf_md5(secret, salt, info, bytes).buffer;
}
export function installChecks(crypto, subtle, { get, keyBytes, DOMException, utf8, importSync }) {
  const { CryptoKey } = crypto;
  const fail = (name, message) => {
    throw new DOMException(message, name);
  };
  const isKey = (k) => ObjectPrototypeIsPrototypeOf(CryptoKey.prototype, k);
  const isBuffer = (d) => copyOf(d) !== undefined;
  const inner = {};
  const METHODS = ["encrypt", "decrypt", "sign", "verify", "digest", "generateKey", "deriveKey", "deriveBits", "importKey", "exportKey", "wrapKey", "unwrapKey", "timingSafeEqual"];
  for (const m of new primordials.SafeArrayIterator(METHODS)) inner[m] = subtle[m];
  const call = (m, self, args) => ReflectApply(inner[m], self, args);

  function supported(list, algorithm) {
    const name = nameOf(algorithm);
    const upper = name === undefined ? undefined : StringPrototypeToUpperCase(name);
    if (upper === undefined || !ArrayPrototypeIncludes(list, upper)) fail("NotSupportedError", `Unrecognized or unimplemented algorithm: ${name}`);
    return upper;
  }
  function hashOf(algorithm) {
    const hash = typeof algorithm === "object" ? algorithm.hash : undefined;
    if (hash === undefined || hash === null) throw new TypeError("Algorithm is missing the required member \"hash\".");
    return supported(DIGESTS, hash);
  }
  const format = (f) => {
    if (!ArrayPrototypeIncludes(FORMATS, f)) fail("NotSupportedError", `Unrecognized key format: ${primordials.String(f)}`);
  };
  // workerd checks the key's algorithm and usage before the parameters.
  function keyCheck(algorithm, key, usage) {
    let name = nameOf(algorithm);
    name = name === undefined ? undefined : StringPrototypeToUpperCase(name);
    if (name === "NODE-ED25519") name = "ED25519";
    if (name !== StringPrototypeToUpperCase(get.algorithm(key).name)) fail("InvalidAccessError", "Requested algorithm does not match the key's algorithm.");
    if (!ArrayPrototypeIncludes(get.usages(key), usage)) fail("InvalidAccessError", `Requested key usage "${usage}" is not allowed by this key.`);
    return name;
  }
  const keyHash = (key) => get.algorithm(key).hash?.name;
  function nodeEdCurve(algorithm) {
    const curve = typeof algorithm === "object" ? algorithm.namedCurve : undefined;
    if (curve === undefined) throw new TypeError("Algorithm is missing the required member \"namedCurve\".");
    if (curve !== "NODE-ED25519") fail("NotSupportedError", "NODE-ED25519 needs namedCurve \"NODE-ED25519\".");
  }
  // RSA-PSS saltLength as workerd reads it (an int: NaN and infinities are
  // 0), refused when negative or longer than the key allows.
  function pss(algorithm, key, signing) {
    let salt = typeof algorithm === "object" ? algorithm.saltLength : undefined;
    if (salt === undefined) {
      if (!signing) throw new TypeError("RSA-PSS needs a saltLength.");
      fail("DataError", "RSA-PSS needs a saltLength.");
    }
    salt = primordials.Number(salt);
    salt = primordials.NumberIsFinite(salt) ? primordials.MathTrunc(salt) : 0;
    if (salt > 2147483647 || salt < -2147483648) throw new TypeError("saltLength is out of range.");
    if (salt < 0) fail("DataError", "saltLength must not be negative.");
    const a = get.algorithm(key);
    if (signing && MathCeil((a.modulusLength - 1) / 8) < (HASH_BYTES[a.hash.name] ?? 0) + salt + 2) {
      fail("OperationError", "saltLength is too long for this key.");
    }
    return { name: "RSA-PSS", saltLength: salt };
  }
  // workerd signs with no key under 512 bits (an internal error), after a
  // size check for PKCS#1 v1.5 (found by probing: the key's bytes against
  // the hash's plus 32).
  const keyBits = (key) => {
    const bits = get.algorithm(key).modulusLength;
    return bits > 512 ? bits : (rsaModulusBits(internals.cryptoKeyStatics.exportNodeMaterial(key)) ?? bits);
  };
  function smallRsa(name, key) {
    const a = get.algorithm(key);
    const bits = keyBits(key);
    if (bits >= 512) return;
    if (name === "RSASSA-PKCS1-V1_5" && MathCeil(bits / 8) < (HASH_BYTES[a.hash.name] ?? 0) + 32) {
      fail("OperationError", "The key is too small for this hash.");
    }
    throw new primordials.Error("RSA keys under 512 bits cannot sign.");
  }
  const rsaError = (e) => {
    if (e?.name === "Error" && !ObjectPrototypeIsPrototypeOf(DOMException.prototype, e)) fail("OperationError", e.message);
    throw e;
  };
  // A JWK with workerd's leniency in its base64 members (a copy when one
  // changes).
  function lenientJwk(jwk) {
    if (jwk === null || typeof jwk !== "object") return jwk;
    let copy = jwk;
    for (const m of new primordials.SafeArrayIterator(JWK_BYTES)) {
      const v = jwk[m];
      if (typeof v !== "string") continue;
      const fixed = lenientB64(v);
      if (fixed === v) continue;
      if (copy === jwk) copy = { ...jwk };
      copy[m] = fixed;
    }
    return copy;
  }
  function rsaJwk(jwk, name, hash) {
    if (typeof jwk.kty === "string" && jwk.kty !== "RSA") fail("DataError", "The JWK's kty must be \"RSA\".");
    if (jwk.alg !== undefined) {
      const h = RSA_JWK_HASH[jwk.alg];
      if (h === undefined) fail("NotSupportedError", `Unrecognized JWK alg: ${jwk.alg}`);
      if (h !== hash) fail("DataError", "The JWK's alg does not match the hash.");
      const bits = h === "SHA-1" ? "1" : primordials.StringPrototypeSlice(h, 4);
      jwk = { ...jwk, alg: name === "RSA-OAEP" && h === "SHA-1" ? "RSA-OAEP" : RSA_JWK_PREFIX[name] + bits };
    }
    if (typeof jwk.e === "string") {
      const e = b64uDecode(jwk.e);
      if (e !== undefined) {
        const v = big(e);
        if (v !== 3n && v !== 17n && v !== 65537n) fail("OperationError", "Unsupported RSA public exponent.");
      }
    }
    return jwk;
  }
  function okpJwk(jwk, name) {
    if (jwk.kty !== "OKP") return;
    const crv = name === "X25519" ? "X25519" : "Ed25519";
    if (jwk.crv !== undefined && jwk.crv !== crv) fail("NotSupportedError", `Unsupported curve: ${jwk.crv}`);
    if (jwk.x === undefined) fail("DataError", "The JWK is missing \"x\".");
    if (name !== "X25519" && jwk.alg !== undefined && jwk.alg !== "EdDSA") fail("DataError", "The JWK's alg must be \"EdDSA\".");
  }
  function ecJwk(jwk, curve) {
    if (jwk.kty !== "EC" || typeof jwk.x !== "string" || typeof jwk.y !== "string") return;
    const x = b64uDecode(jwk.x), y = b64uDecode(jwk.y);
    if (x === undefined || y === undefined) return;
    if (x.length !== curve.size || y.length !== curve.size || !onCurve(curve, x, y)) fail("OperationError", "Invalid EC public point.");
  }

  const methods = {
    encrypt(algorithm, key, data) {
      return settle(() => {
        if (arguments.length >= 3 && isKey(key) && isBuffer(data) && keyCheck(algorithm, key, "encrypt") === "RSA-OAEP" && keyBits(key) < 512) {
          fail("OperationError", "RSA keys under 512 bits cannot encrypt.");
        }
        return call("encrypt", this, arguments);
      });
    },
    decrypt(algorithm, key, data) {
      return settle(() => {
        if (arguments.length >= 3 && isKey(key) && isBuffer(data)) keyCheck(algorithm, key, "decrypt");
        return call("decrypt", this, arguments);
      });
    },
    sign(algorithm, key, data) {
      return settle(() => {
        if (arguments.length < 3 || !isKey(key) || !isBuffer(data)) return call("sign", this, arguments);
        const name = keyCheck(algorithm, key, "sign");
        if (name === "HMAC" && keyHash(key) === "MD5") return op_crypto_hmac_md5(keyBytes(key), copyOf(data)).buffer;
        if (name === "ECDSA" && hashOf(algorithm) === "MD5") throw new primordials.Error("ECDSA with MD5 is not supported.");
        if (name === "RSA-PSS") algorithm = pss(algorithm, key, true);
        if (name === "RSA-PSS" || name === "RSASSA-PKCS1-V1_5") smallRsa(name, key);
        const result = call("sign", this, [algorithm, key, data]);
        return name === "RSA-PSS" || name === "RSASSA-PKCS1-V1_5" ? PromisePrototypeThen(result, undefined, rsaError) : result;
      });
    },
    verify(algorithm, key, signature, data) {
      return settle(() => {
        if (arguments.length < 4 || !isKey(key) || !isBuffer(signature) || !isBuffer(data)) return call("verify", this, arguments);
        const name = keyCheck(algorithm, key, "verify");
        if (name === "HMAC" && keyHash(key) === "MD5") {
          return op_crypto_hmac_md5_verify(keyBytes(key), copyOf(data), copyOf(signature));
        }
        if (name === "ECDSA" && hashOf(algorithm) === "MD5") throw new primordials.Error("ECDSA with MD5 is not supported.");
        if (name === "RSA-PSS") algorithm = pss(algorithm, key, false);
        return call("verify", this, [algorithm, key, signature, data]);
      });
    },
    digest(algorithm, data) {
      return settle(() => {
        if (arguments.length >= 2) supported(DIGESTS, algorithm);
        return call("digest", this, arguments);
      });
    },
    generateKey(algorithm, extractable, usages) {
      return settle(() => {
        if (arguments.length < 3) return call("generateKey", this, arguments);
        const name = supported(KEY_ALGORITHMS, algorithm);
        const hash = name === "HMAC" || ArrayPrototypeIncludes(RSA, name) ? hashOf(algorithm) : undefined;
        if (name === "NODE-ED25519") nodeEdCurve(algorithm);
        if (ArrayPrototypeIncludes(RSA, name)) {
          // BoringSSL's sizes: whole multiples of 128 bits, 512 to 16384.
          const bits = algorithm.modulusLength;
          if (typeof bits === "number") {
            const m = MathTrunc(bits);
            if (!(m >= 512 && m <= 16384 && m % 128 === 0)) fail("OperationError", "Unsupported RSA modulus length.");
          }
          // workerd reports the exponent as given, leading zeros and all.
          const e = copyOf(algorithm.publicExponent);
          if (e !== undefined && e.length > 1 && e[0] === 0) {
            return PromisePrototypeThen(call("generateKey", this, arguments), (pair) => {
              pair.publicKey.algorithm.publicExponent = TypedArrayPrototypeSlice(e);
              pair.privateKey.algorithm.publicExponent = TypedArrayPrototypeSlice(e);
              return pair;
            });
          }
        }
        // HMAC-MD5 and HMAC keys of a length that is not whole bytes: made
        // as a key of whole bytes (which checks the usages), then imported.
        const length = name === "HMAC" ? algorithm.length : undefined;
        if (name === "HMAC" && (hash === "MD5" || (typeof length === "number" && length % 8 !== 0))) {
          const bits = length === undefined ? 512 : MathTrunc(primordials.Number(length));
          if (!(bits > 0)) fail("OperationError", "The HMAC key length must not be 0.");
          const whole = { name: "HMAC", hash: "SHA-256", length: MathCeil(bits / 8) * 8 };
          return PromisePrototypeThen(call("generateKey", this, [whole, extractable, usages]), (key) =>
            FunctionPrototypeCall(methods.importKey, this, "raw", keyBytes(key), { name: "HMAC", hash, length: bits }, extractable, usages));
        }
        return call("generateKey", this, arguments);
      });
    },
    deriveKey(algorithm, baseKey, derivedKeyType, extractable, usages) {
      return settle(() => {
        if (arguments.length < 5 || !isKey(baseKey)) return call("deriveKey", this, arguments);
        const name = keyCheck(algorithm, baseKey, "deriveKey");
        const target = supported(DERIVABLE, derivedKeyType);
        const kdfHash = name === "PBKDF2" || name === "HKDF" ? hashOf(algorithm) : undefined;
        const targetHash = target === "HMAC" ? hashOf(derivedKeyType) : undefined;
        if (ArrayPrototypeIncludes(AES, target) && (typeof derivedKeyType !== "object" || derivedKeyType.length === undefined)) {
          throw new TypeError("Algorithm is missing the required member \"length\".");
        }
        if (kdfHash !== "MD5" && targetHash !== "MD5") return call("deriveKey", this, arguments);
        let bits;
        if (target === "HMAC") bits = derivedKeyType.length ?? (targetHash === "SHA-384" || targetHash === "SHA-512" ? 1024 : 512);
        else if (ArrayPrototypeIncludes(AES, target)) {
          bits = derivedKeyType.length;
          if (bits !== 128 && bits !== 192 && bits !== 256) fail("OperationError", "AES keys are 128, 192 or 256 bits.");
        } else return call("deriveKey", this, arguments);
        const make = (raw) => FunctionPrototypeCall(methods.importKey, this, "raw", raw, derivedKeyType, extractable, usages);
        if (kdfHash === "MD5") return make(kdfMd5(name, algorithm, keyBytes(baseKey), bits, fail));
        const carrier = { name: "HMAC", hash: "SHA-256", length: bits };
        return PromisePrototypeThen(call("deriveKey", this, [algorithm, baseKey, carrier, true, ["sign"]]), (k) => make(keyBytes(k)));
      });
    },
    deriveBits(algorithm, baseKey, length) {
      return settle(() => {
        if (arguments.length < 2 || !isKey(baseKey)) return call("deriveBits", this, arguments);
        const name = keyCheck(algorithm, baseKey, "deriveBits");
        if ((name === "PBKDF2" || name === "HKDF") && hashOf(algorithm) === "MD5") return kdfMd5(name, algorithm, keyBytes(baseKey), length, fail);
        return call("deriveBits", this, arguments);
      });
    },
    importKey(fmt, keyData, algorithm, extractable, usages) {
      return settle(() => {
        if (arguments.length < 5) return call("importKey", this, arguments);
        format(fmt);
        const name = supported(IMPORTABLE, algorithm);
        const hash = name === "HMAC" || ArrayPrototypeIncludes(RSA, name) ? hashOf(algorithm) : undefined;
        if (name === "NODE-ED25519") nodeEdCurve(algorithm);
        if ((name === "PBKDF2" || name === "HKDF") && extractable) fail("SyntaxError", `${name} keys cannot be extractable.`);
        const curve = name === "ECDSA" || name === "ECDH" ? EC[canonical(CURVES, algorithm.namedCurve)] : undefined;
        if (fmt === "jwk" && keyData !== null && typeof keyData === "object") {
          keyData = lenientJwk(keyData);
          if (ArrayPrototypeIncludes(RSA, name)) keyData = rsaJwk(keyData, name, hash);
          else if (name === "ED25519" || name === "X25519") okpJwk(keyData, name);
          else if (curve !== undefined) ecJwk(keyData, curve);
          else if (name === "HMAC" && hash === "MD5") {
            if (keyData.alg !== undefined) fail("NotSupportedError", "No JWK alg names HMAC with MD5.");
            // deno_crypto checks the JWK as one for SHA-256; the bytes go on.
            const check = { name: "HMAC", hash: "SHA-256", length: algorithm.length };
            return PromisePrototypeThen(call("importKey", this, ["jwk", keyData, check, extractable, usages]), (key) =>
              call("importKey", this, ["raw", keyBytes(key), algorithm, extractable, usages]));
          }
        }
        if (curve !== undefined && (fmt === "raw" || fmt === "spki")) {
          const bytes = copyOf(keyData);
          const point = bytes === undefined ? undefined : fmt === "raw" ? bytes : spkiPoint(bytes);
          if (point !== undefined && pointOk(curve, point) === false) fail("DataError", "Invalid EC public point.");
        }
        return call("importKey", this, [fmt, keyData, algorithm, extractable, usages]);
      });
    },
    exportKey(fmt, key) {
      return settle(() => {
        if (arguments.length < 2) return call("exportKey", this, arguments);
        // An unknown format: workerd checks extractable first, and only its
        // AES and HMAC keys call that NotSupportedError.
        if (!ArrayPrototypeIncludes(FORMATS, fmt) && !ArrayPrototypeIncludes(GATED_FORMATS, fmt) && isKey(key)) {
          const a = get.algorithm(key).name;
          if (!get.extractable(key) || (a !== "HMAC" && !ArrayPrototypeIncludes(AES, StringPrototypeToUpperCase(a)))) {
            fail("InvalidAccessError", `Unrecognized key format: ${primordials.String(fmt)}`);
          }
        }
        format(fmt);
        if (fmt === "jwk" && isKey(key) && get.extractable(key) && get.algorithm(key).name === "HMAC" && keyHash(key) === "MD5") {
          fail("NotSupportedError", "No JWK alg names HMAC with MD5.");
        }
        return call("exportKey", this, arguments);
      });
    },
    // A JWK is wrapped as workerd serializes it (its member order, no
    // padding); AES-KW takes only whole 64-bit blocks, two at least.
    wrapKey(fmt, key, wrappingKey, wrapAlgorithm) {
      return settle(() => {
        if (arguments.length < 4) return call("wrapKey", this, arguments);
        format(fmt);
        if (!isKey(key) || !isKey(wrappingKey)) return call("wrapKey", this, arguments);
        const name = keyCheck(wrapAlgorithm, wrappingKey, "wrapKey");
        if (!get.extractable(key) || (fmt !== "jwk" && name !== "AES-KW")) return call("wrapKey", this, arguments);
        return PromisePrototypeThen(FunctionPrototypeCall(methods.exportKey, this, fmt, key), (exported) => {
          const bytes = fmt === "jwk" ? utf8.encode(primordials.JSONStringify(exported)) : new Uint8Array(exported);
          if (name === "AES-KW" && (bytes.length < 16 || bytes.length % 8 !== 0)) fail("OperationError", "AES-KW wraps whole 64-bit blocks, at least two.");
          if (fmt !== "jwk") return call("wrapKey", this, [fmt, key, wrappingKey, wrapAlgorithm]);
          const carrier = importSync("raw", bytes, { name: "HMAC", hash: "SHA-256" }, true, ["sign"]);
          return call("wrapKey", this, ["raw", carrier, wrappingKey, wrapAlgorithm]);
        });
      });
    },
    unwrapKey(fmt, wrappedKey, unwrappingKey, unwrapAlgorithm, unwrappedKeyAlgorithm, extractable, usages) {
      return settle(() => {
        if (arguments.length < 7) return call("unwrapKey", this, arguments);
        format(fmt);
        if (!isKey(unwrappingKey)) return call("unwrapKey", this, arguments);
        const name = keyCheck(unwrapAlgorithm, unwrappingKey, "unwrapKey");
        const wrapped = copyOf(wrappedKey);
        if (name === "AES-KW" && wrapped !== undefined && (wrapped.length < 24 || wrapped.length % 8 !== 0)) {
          fail("OperationError", "AES-KW unwraps whole 64-bit blocks, at least three.");
        }
        // workerd decrypts before it reads the algorithm of the key inside.
        const target = nameOf(unwrappedKeyAlgorithm);
        if (target === undefined || !ArrayPrototypeIncludes(IMPORTABLE, StringPrototypeToUpperCase(target))) {
          const carrier = { name: "HMAC", hash: "SHA-256" };
          return PromisePrototypeThen(call("unwrapKey", this, ["raw", wrappedKey, unwrappingKey, unwrapAlgorithm, carrier, false, ["sign"]]), () =>
            supported(IMPORTABLE, unwrappedKeyAlgorithm));
        }
        return call("unwrapKey", this, arguments);
      });
    },
    timingSafeEqual(a, b) {
      return ReflectApply(inner.timingSafeEqual, this, arguments);
    },
  };
  // As workerd has them: every method enumerable with length 0, in its
  // order.
  for (const m of new primordials.SafeArrayIterator(METHODS)) {
    const f = methods[m];
    ObjectDefineProperty(f, "length", { value: 0, configurable: true });
    delete subtle[m];
    ObjectDefineProperty(subtle, m, { value: f, writable: true, enumerable: true, configurable: true });
  }

  const CryptoProto = crypto.Crypto.prototype;
  // getRandomValues: a TypeError for anything but an ArrayBufferView.
  const getRandomValues = CryptoProto.getRandomValues;
  const grv = {
    getRandomValues(array) {
      if (!ArrayBufferIsView(array)) throw new TypeError("getRandomValues takes an ArrayBufferView.");
      return FunctionPrototypeCall(getRandomValues, this, array);
    },
  }.getRandomValues;
  ObjectDefineProperty(grv, "length", { value: 0, configurable: true });
  ObjectDefineProperty(CryptoProto, "getRandomValues", { value: grv, writable: true, enumerable: true, configurable: true });
  // The subtle getter is anonymous in workerd.
  const subtleGetter = ObjectGetOwnPropertyDescriptor(CryptoProto, "subtle").get;
  const anonymous = [function () {
    return FunctionPrototypeCall(subtleGetter, this);
  }][0];
  ObjectDefineProperty(CryptoProto, "subtle", { get: anonymous, enumerable: true, configurable: true });
  const DS = CryptoProto.DigestStream;
  ObjectDefineProperty(DS, "length", { value: 0, configurable: true });
  ObjectDefineProperty(CryptoProto, "DigestStream", { value: DS, writable: true, enumerable: true, configurable: true });
  // globalThis.crypto is a data property in workerd. deno_crypto makes the
  // object lazily (not in the snapshot), so the first access puts it there.
  const lazy = ObjectGetOwnPropertyDescriptor(globalThis, "crypto");
  if (lazy?.get !== undefined) {
    const settleGlobal = (value) =>
      ObjectDefineProperty(globalThis, "crypto", { value, writable: true, enumerable: true, configurable: true });
    ObjectDefineProperty(globalThis, "crypto", {
      get: [function () {
        const value = crypto.crypto;
        settleGlobal(value);
        return value;
      }][0],
      set: [function (value) {
        settleGlobal(value);
      }][0],
      enumerable: true,
      configurable: true,
    });
  }
}

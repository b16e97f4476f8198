// workerd's Web Crypto beyond deno_crypto, installed on deno_crypto's
// classes before the snapshot is taken: subtle.digest("MD5"), AES-GCM with
// IVs of any length, subtle.timingSafeEqual and crypto.DigestStream. In
// front of every SubtleCrypto method, workerd's argument checks (see
// installChecks): the algorithms, hashes and formats it knows, its limits
// on keys, and MD5 for HMAC, PBKDF2 and HKDF. The rest goes to deno_crypto.
import { core, internals, primordials } from "ext:core/mod.js";
import {
  canonical,
  canonicalNames,
  canonicalUsages,
  copyOf,
  define,
  JWK_MEMBERS,
  settle,
  upperName,
} from "ext:cellhost_crypto/shared.js";
import { installChecks } from "ext:cellhost_crypto/checks.js";

const {
  MathCeil,
  ObjectKeys,
  ArrayPrototypeIncludes,
  ReflectApply,
  ArrayBufferIsView,
  FunctionPrototypeCall,
  ObjectDefineProperty,
  ObjectGetOwnPropertyDescriptor,
  ObjectPrototypeIsPrototypeOf,
  PromisePrototypeThen,
  PromiseReject,
  TypedArrayPrototypeSlice,
  TypeError,
  Uint8Array,
} = primordials;
const {
  op_crypto_gcm,
  op_crypto_ctr,
  op_crypto_md5,
  op_crypto_digest_new,
  op_crypto_digest_update,
  op_crypto_digest_finish,
  op_crypto_digest_drop,
  op_crypto_timing_safe_equal,
} = core.ops;

export function install(crypto) {
  const { SubtleCrypto, CryptoKey } = crypto;
  const subtle = SubtleCrypto.prototype;
  const { digest, encrypt, decrypt, sign, verify, exportKey } = subtle;
  const { DOMException } = core.loadExtScript("ext:deno_web/01_dom_exception.js");
  const keyBytes = (key) => internals.cryptoKeyStatics.exportNodeMaterial(key).data;

  // AES-GCM at IV lengths deno_crypto refuses (all but 12 and 16 bytes).
  // deno_crypto still checks the key and its usages: the same call with a
  // 12-byte IV on an empty input (decrypt: a bare tag, which can only fail
  // authentication) rejects exactly when they are wrong, with deno_crypto's
  // error; the tag length is checked by the op.
  // Tags other than 128 bits are ours too: deno_crypto fails to decrypt
  // with a shorter one, and reads a null tagLength as the default (workerd:
  // 0, refused).
  function gcmCase(algorithm, key, data) {
    if (upperName(algorithm) !== "AES-GCM" || !ObjectPrototypeIsPrototypeOf(CryptoKey.prototype, key)) return;
    const iv = copyOf(algorithm.iv);
    const otherTag = algorithm.tagLength !== undefined && algorithm.tagLength !== 128;
    if (iv === undefined || ((iv.length === 12 || iv.length === 16) && !otherTag)) return;
    const bytes = copyOf(data);
    if (bytes === undefined) return;
    const aad = algorithm.additionalData === undefined ? new Uint8Array(0) : copyOf(algorithm.additionalData);
    if (aad === undefined) return;
    const tagLength = algorithm.tagLength === undefined ? 128 : +algorithm.tagLength;
    const probe = { name: "AES-GCM", iv: new Uint8Array(12), additionalData: aad };
    return { iv, bytes, aad, tagLength, probe };
  }
  // AES-CTR at counter lengths deno_crypto refuses (workerd: 1 to 128
  // bits); deno_crypto checks the rest with a 64-bit length on empty input.
  function ctrCase(algorithm, key, data) {
    if (upperName(algorithm) !== "AES-CTR" || !ObjectPrototypeIsPrototypeOf(CryptoKey.prototype, key)) return;
    const length = algorithm.length;
    if (typeof length !== "number" || length === 32 || length === 64 || length === 128 || !(length >= 1 && length <= 128)) return;
    const counter = copyOf(algorithm.counter);
    const bytes = copyOf(data);
    if (counter === undefined || bytes === undefined) return;
    return (original, self) =>
      PromisePrototypeThen(
        FunctionPrototypeCall(original, self, { name: "AES-CTR", counter, length: 64 }, key, new Uint8Array(0)),
        () => op_crypto_ctr(keyBytes(key), counter, length, bytes).buffer,
      );
  }
  const methods = {
    digest(algorithm, data) {
      if (upperName(algorithm) === "MD5") {
        const bytes = copyOf(data);
        if (bytes !== undefined) return settle(() => op_crypto_md5(bytes).buffer);
      }
      return FunctionPrototypeCall(digest, this, algorithm, data);
    },

    encrypt(algorithm, key, data) {
      const ctr = ctrCase(algorithm, key, data);
      if (ctr !== undefined) return ctr(encrypt, this);
      const c = gcmCase(algorithm, key, data);
      if (c === undefined) return FunctionPrototypeCall(encrypt, this, algorithm, key, data);
      return PromisePrototypeThen(
        FunctionPrototypeCall(encrypt, this, c.probe, key, new Uint8Array(0)),
        () => op_crypto_gcm(true, keyBytes(key), c.iv, c.aad, c.tagLength, c.bytes).buffer,
      );
    },
    decrypt(algorithm, key, data) {
      const ctr = ctrCase(algorithm, key, data);
      if (ctr !== undefined) return ctr(decrypt, this);
      const c = gcmCase(algorithm, key, data);
      if (c === undefined) return FunctionPrototypeCall(decrypt, this, algorithm, key, data);
      const run = () => op_crypto_gcm(false, keyBytes(key), c.iv, c.aad, c.tagLength, c.bytes).buffer;
      return PromisePrototypeThen(
        FunctionPrototypeCall(decrypt, this, c.probe, key, new Uint8Array(16)),
        run,
        (e) => {
          if (e?.name !== "OperationError") throw e;
          return run();
        },
      );
    },
    // workerd refuses an Ed25519 signature that is not 64 bytes (deno_crypto
    // answers false).
    sign(algorithm, key, data) {
      return FunctionPrototypeCall(sign, this, nodeEd(algorithm) ? "Ed25519" : algorithm, key, data);
    },
    verify(algorithm, key, signature, data) {
      if (nodeEd(algorithm)) algorithm = "Ed25519";
      const sig = copyOf(signature);
      if (
        upperName(algorithm) === "ED25519" && sig !== undefined && sig.length !== 64 &&
        ObjectPrototypeIsPrototypeOf(CryptoKey.prototype, key) && key.algorithm.name === "Ed25519" &&
        ArrayPrototypeIncludes(key.usages, "verify")
      ) {
        return PromiseReject(new DOMException(`Invalid Ed25519 signature length ${sig.length}`, "OperationError"));
      }
      return FunctionPrototypeCall(verify, this, algorithm, key, signature, data);
    },
    // A JWK as workerd shapes it: every JWK member name, in its order, the
    // unused ones undefined; EC keys carry no "alg", Ed25519 keys "EdDSA".
    exportKey(format, key) {
      const result = FunctionPrototypeCall(exportKey, this, format, key);
      if (format !== "jwk") return result;
      return PromisePrototypeThen(result, (jwk) => {
        const out = {};
        for (const name of JWK_MEMBERS) out[name] = jwk[name];
        if (jwk.kty === "EC") out.alg = undefined;
        if (jwk.kty === "OKP" && jwk.crv === "Ed25519") out.alg = "EdDSA";
        return out;
      });
    },
    timingSafeEqual(a, b) {
      const x = copyOf(a);
      const y = copyOf(b);
      if (x === undefined || y === undefined) {
        throw new TypeError("Failed to execute 'timingSafeEqual' on 'SubtleCrypto': parameters must be ArrayBuffer or ArrayBufferView.");
      }
      if (x.length !== y.length) {
        throw new TypeError("Input buffers must have the same byte length.");
      }
      return op_crypto_timing_safe_equal(x, y);
    },
  };
  for (const name of ["digest", "encrypt", "decrypt", "sign", "verify", "exportKey", "timingSafeEqual"]) {
    define(subtle, name, methods[name]);
  }

  // Keys as workerd makes them: `extractable` by Web IDL's boolean
  // conversion (any truthy value), and `usages` in the canonical order
  // without duplicates (which also orders JWK key_ops). Which argument is
  // which, for each method that makes a key.
  // workerd's legacy NODE-ED25519 (older Discord-verification templates) is
  // Ed25519 under another name: the key's algorithm says NODE-ED25519.
  const nodeEd = (algorithm) => upperName(algorithm) === "NODE-ED25519";
  // key.algorithm as workerd builds it: the legacy name kept, and HMAC and
  // RSA members in workerd's order (JSON.stringify(key.algorithm) shows it).
  const ORDERS = {
    HMAC: ["name", "hash", "length"],
    RSA: ["name", "modulusLength", "publicExponent", "hash"],
  };
  // And as workerd has them, a key's usages, algorithm, extractable and
  // type are its own enumerable data properties (JSON.stringify(key) shows
  // them; read-only, but algorithm and usages are plain, mutable copies).
  // deno_crypto's getters, taken off the prototype (workerd's has only its
  // constructor): every key a Worker can get is shaped here.
  const get = {};
  for (const name of ["usages", "algorithm", "extractable", "type"]) {
    const getter = ObjectGetOwnPropertyDescriptor(CryptoKey.prototype, name).get;
    get[name] = (key) => FunctionPrototypeCall(getter, key);
    delete CryptoKey.prototype[name];
  }
  const copyMember = (v) =>
    ArrayBufferIsView(v) ? TypedArrayPrototypeSlice(v) : v !== null && typeof v === "object" ? { ...v } : v;
  const shape = (legacy) => (key) => {
    if (!ObjectPrototypeIsPrototypeOf(CryptoKey.prototype, key)) {
      if (key?.privateKey !== undefined) {
        shape(legacy)(key.privateKey);
        shape(legacy)(key.publicKey);
      }
      return key;
    }
    const a = get.algorithm(key);
    let algorithm;
    if (legacy) algorithm = { name: "NODE-ED25519", namedCurve: "NODE-ED25519" };
    else {
      const order = ORDERS[a.name] ?? (a.modulusLength !== undefined ? ORDERS.RSA : ObjectKeys(a));
      algorithm = {};
      for (const m of new primordials.SafeArrayIterator(order)) if (a[m] !== undefined) algorithm[m] = copyMember(a[m]);
    }
    const own = {
      usages: [...new primordials.SafeArrayIterator(get.usages(key))],
      algorithm,
      extractable: get.extractable(key),
      type: get.type(key),
    };
    for (const name of ["usages", "algorithm", "extractable", "type"]) {
      ObjectDefineProperty(key, name, { value: own[name], writable: false, enumerable: true, configurable: true });
    }
    // workerd cannot clone a CryptoKey (structuredClone, storage, RPC):
    // a brand that is not a function makes the serializer refuse it.
    ObjectDefineProperty(key, core.hostObjectBrand, { value: "CryptoKey", writable: false, enumerable: false, configurable: true });
    return key;
  };
  const statics = internals.cryptoKeyStatics;
  const importSync = statics.importSync;
  statics.importSync = (...args) => shape(false)(ReflectApply(importSync, undefined, args));
  const keyMakers = { importKey: [2, 3, 4], generateKey: [0, 1, 2], deriveKey: [2, 3, 4], unwrapKey: [4, 5, 6] };
  // deriveBits to a length that is not whole bytes: the bits past it are
  // zero, as the spec and workerd have them.
  {
    const deriveBits = subtle.deriveBits;
    const wrapped = {
      deriveBits(algorithm, baseKey, length) {
        const result = ReflectApply(deriveBits, this, arguments);
        if (typeof length !== "number" || length % 8 === 0) return result;
        return PromisePrototypeThen(result, (buffer) => {
          const bytes = new Uint8Array(buffer);
          if (bytes.length > 0) bytes[bytes.length - 1] &= (0xff << (8 - (length % 8))) & 0xff;
          return buffer;
        });
      },
    }.deriveBits;
    ObjectDefineProperty(wrapped, "length", { value: deriveBits.length });
    define(subtle, "deriveBits", wrapped);
  }
  for (const name in keyMakers) {
    const original = subtle[name];
    const [alg, ext, use] = keyMakers[name];
    const wrapped = {
      [name](...args) {
        if (args.length > use) {
          args[ext] = !!args[ext];
          args[use] = canonicalUsages(args[use]);
        }
        args[alg] = canonicalNames(args[alg]);
        // An HMAC key of a length that is not whole bytes: the bits past it
        // are zero (workerd, and the spec).
        if (name === "importKey" && args[0] === "raw" && upperName(args[alg]) === "HMAC") {
          const bits = args[alg].length;
          const bytes = copyOf(args[1]);
          if (typeof bits === "number" && bits % 8 !== 0 && bytes !== undefined && bytes.length === MathCeil(bits / 8)) {
            bytes[bytes.length - 1] &= (0xff << (8 - (bits % 8))) & 0xff;
            args[1] = bytes;
          }
        }
        const legacy = nodeEd(args[alg]);
        if (legacy) args[alg] = "Ed25519";
        return PromisePrototypeThen(ReflectApply(original, this, args), shape(legacy));
      },
    }[name];
    ObjectDefineProperty(wrapped, "length", { value: original.length });
    define(subtle, name, wrapped);
  }

  const { WritableStream } = core.loadExtScript("ext:deno_web/06_streams.js");
  const { TextEncoder } = core.loadExtScript("ext:deno_web/08_text_encoding.js");
  const utf8 = new TextEncoder();
  class DigestStream extends WritableStream {
    #digest;
    #written = 0;
    constructor(algorithm) {
      if (algorithm === undefined) {
        throw new TypeError("Failed to construct 'DigestStream': 1 argument required, but only 0 present.");
      }
      const rid = op_crypto_digest_new(upperName(algorithm) ?? "");
      let resolve, reject;
      const digest = new primordials.Promise((res, rej) => {
        resolve = res;
        reject = rej;
      });
      let self;
      super({
        write(chunk) {
          // workerd hashes a string chunk as its UTF-8 bytes.
          const bytes = typeof chunk === "string" ? utf8.encode(chunk) : copyOf(chunk);
          if (bytes === undefined) throw new TypeError("DigestStream is a byte stream: write strings, ArrayBuffers or ArrayBufferViews");
          op_crypto_digest_update(rid, bytes);
          self.#written += bytes.length;
        },
        close() {
          resolve(op_crypto_digest_finish(rid).buffer);
        },
        abort(reason) {
          op_crypto_digest_drop(rid);
          reject(reason);
        },
      });
      self = this;
      // An abandoned digest must not be an unhandled rejection.
      PromisePrototypeThen(digest, undefined, () => {});
      this.#digest = digest;
    }
    get digest() {
      return this.#digest;
    }
    get bytesWritten() {
      return this.#written;
    }
  }
  ObjectDefineProperty(DigestStream.prototype, primordials.SymbolToStringTag, { value: "DigestStream", configurable: true });
  define(crypto.Crypto.prototype, "DigestStream", DigestStream);

  installChecks(crypto, subtle, { get, keyBytes, DOMException, utf8, importSync: statics.importSync });
}

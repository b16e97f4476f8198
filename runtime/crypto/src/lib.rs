//! workerd's Web Crypto beyond what deno_crypto gives: AES-GCM with IVs of
//! any length (`gcm`), AES-CTR with any counter length (`aes_ctr`), `subtle.digest("MD5")`, `crypto.DigestStream` and
//! `subtle.timingSafeEqual`. The JS side (`js/crypto.js`) wraps
//! deno_crypto's `SubtleCrypto` and leaves every other case to it.

use std::cell::RefCell;
use std::rc::Rc;

use deno_core::{OpState, Resource, ResourceId, op2};
use deno_error::JsErrorBox;

pub mod aes_ctr;
mod ec;
pub mod gcm;
mod md5mac;

/// Deno's DOMException classes (registered by deno_web).
fn dom(name: &str, message: impl Into<String>) -> JsErrorBox {
  JsErrorBox::new(format!("DOMException{name}"), message.into())
}

/// Encrypt or decrypt with AES-GCM at an IV length deno_crypto refuses.
#[op2]
#[buffer]
fn op_crypto_gcm(
  encrypt: bool,
  #[buffer] key: &[u8],
  #[buffer] iv: &[u8],
  #[buffer] aad: &[u8],
  #[smi] tag_bits: u32,
  #[buffer] data: &[u8],
) -> Result<Vec<u8>, JsErrorBox> {
  use gcm::GcmError::*;
  gcm::seal_or_open(encrypt, key, iv, aad, tag_bits as usize, data).map_err(|e| match e {
    KeyLength => dom("OperationError", "Invalid AES-GCM key length."),
    EmptyIv => dom("OperationError", "AES-GCM IV must not be empty."),
    TagLength => dom(
      "OperationError",
      format!("Invalid AES-GCM tag length {tag_bits}."),
    ),
    Failed if encrypt => dom("OperationError", "AES-GCM encryption failed."),
    Failed => dom("OperationError", "Decryption failed."),
  })
}

/// AES-CTR at a counter length deno_crypto refuses (all but 32, 64, 128).
#[op2]
#[buffer]
fn op_crypto_ctr(
  #[buffer] key: &[u8],
  #[buffer] counter: &[u8],
  #[smi] length: u32,
  #[buffer] data: &[u8],
) -> Result<Vec<u8>, JsErrorBox> {
  use aes_ctr::CtrError::*;
  aes_ctr::apply(key, counter, length, data).map_err(|e| match e {
    KeyLength => dom("OperationError", "Invalid AES-CTR key length."),
    CounterLength => dom("OperationError", "Invalid AES-CTR counter or length."),
    TooLong => dom(
      "OperationError",
      "Input is too long for the AES-CTR counter length.",
    ),
  })
}

/// The hashes workerd's digest and DigestStream offer.
enum Hasher {
  Md5(md5::Md5),
  Sha1(sha1::Sha1),
  Sha256(sha2::Sha256),
  Sha384(sha2::Sha384),
  Sha512(sha2::Sha512),
}

impl Hasher {
  fn new(name: &str) -> Option<Hasher> {
    use md5::Digest as _;
    Some(match name.to_ascii_uppercase().as_str() {
      "MD5" => Hasher::Md5(md5::Md5::new()),
      "SHA-1" => Hasher::Sha1(sha1::Sha1::new()),
      "SHA-256" => Hasher::Sha256(sha2::Sha256::new()),
      "SHA-384" => Hasher::Sha384(sha2::Sha384::new()),
      "SHA-512" => Hasher::Sha512(sha2::Sha512::new()),
      _ => return None,
    })
  }

  fn update(&mut self, data: &[u8]) {
    use md5::Digest as _;
    match self {
      Hasher::Md5(h) => h.update(data),
      Hasher::Sha1(h) => h.update(data),
      Hasher::Sha256(h) => h.update(data),
      Hasher::Sha384(h) => h.update(data),
      Hasher::Sha512(h) => h.update(data),
    }
  }

  fn finish(self) -> Vec<u8> {
    use md5::Digest as _;
    match self {
      Hasher::Md5(h) => h.finalize().to_vec(),
      Hasher::Sha1(h) => h.finalize().to_vec(),
      Hasher::Sha256(h) => h.finalize().to_vec(),
      Hasher::Sha384(h) => h.finalize().to_vec(),
      Hasher::Sha512(h) => h.finalize().to_vec(),
    }
  }
}

/// MD5 for `crypto.subtle.digest("MD5")` (legacy APIs still ask for it).
#[op2]
#[buffer]
fn op_crypto_md5(#[buffer] data: &[u8]) -> Vec<u8> {
  let mut h = Hasher::new("MD5").unwrap();
  h.update(data);
  h.finish()
}

/// One DigestStream's running hash.
struct DigestResource(RefCell<Option<Hasher>>);

impl Resource for DigestResource {
  fn name(&self) -> std::borrow::Cow<'_, str> {
    "digestStream".into()
  }
}

#[op2(fast)]
#[smi]
fn op_crypto_digest_new(
  state: &mut OpState,
  #[string] algorithm: &str,
) -> Result<ResourceId, JsErrorBox> {
  let hasher = Hasher::new(algorithm).ok_or_else(|| {
    dom(
      "NotSupportedError",
      "Unrecognized or unimplemented digest algorithm requested.",
    )
  })?;
  Ok(
    state
      .resource_table
      .add(DigestResource(RefCell::new(Some(hasher)))),
  )
}

#[op2(fast)]
fn op_crypto_digest_update(
  state: &mut OpState,
  #[smi] rid: ResourceId,
  #[buffer] data: &[u8],
) -> Result<(), JsErrorBox> {
  let r = state
    .resource_table
    .get::<DigestResource>(rid)
    .map_err(JsErrorBox::from_err)?;
  if let Some(h) = r.0.borrow_mut().as_mut() {
    h.update(data);
  }
  Ok(())
}

/// Finishes the hash and frees the stream's resource.
#[op2]
#[buffer]
fn op_crypto_digest_finish(
  state: &mut OpState,
  #[smi] rid: ResourceId,
) -> Result<Vec<u8>, JsErrorBox> {
  let r: Rc<DigestResource> = state
    .resource_table
    .take(rid)
    .map_err(JsErrorBox::from_err)?;
  let h = r.0.borrow_mut().take();
  Ok(h.map(Hasher::finish).unwrap_or_default())
}

/// Drops an aborted stream's hash.
#[op2(fast)]
fn op_crypto_digest_drop(state: &mut OpState, #[smi] rid: ResourceId) {
  let _ = state.resource_table.take::<DigestResource>(rid);
}

/// `crypto.subtle.timingSafeEqual`: the time taken does not depend on
/// where the inputs differ (callers check the lengths first).
#[op2(fast)]
fn op_crypto_timing_safe_equal(#[buffer] a: &[u8], #[buffer] b: &[u8]) -> bool {
  use subtle::ConstantTimeEq;
  a.len() == b.len() && bool::from(a.ct_eq(b))
}

deno_core::extension!(
  cellhost_crypto,
  deps = [deno_web, deno_crypto],
  ops = [
    op_crypto_gcm,
    op_crypto_ctr,
    op_crypto_md5,
    op_crypto_digest_new,
    op_crypto_digest_update,
    op_crypto_digest_finish,
    op_crypto_digest_drop,
    op_crypto_timing_safe_equal,
    md5mac::op_crypto_hmac_md5,
    md5mac::op_crypto_hmac_md5_verify,
    md5mac::op_crypto_pbkdf2_md5,
    md5mac::op_crypto_hkdf_md5,
    ec::op_crypto_ec_point_valid,
  ],
  esm = [dir "js", "shared.js", "checks.js", "crypto.js"],
);

/// Build-time preparation of deno_crypto's JS (host/build.rs): the
/// `CryptoKey` class carries three static methods for deno_node's
/// KeyObject interop, one of which hands out any key's bytes, extractable
/// or not. They are taken off the class (a Worker can reach it) and kept in
/// `internals.cryptoKeyStatics` for the runtime's own callers.
pub fn prepare(name: &str, code: &str) -> Option<String> {
  if name != "ext:deno_crypto/00_crypto.js" {
    return None;
  }
  const STATICS: [&str; 3] = ["exportNodeMaterial", "fromCloneData", "importSync"];
  let anchor = "} = core.ops;\n";
  let at = code
    .find(anchor)
    .expect("00_crypto.js destructures core.ops")
    + anchor.len();
  let mut out = code[..at].to_string();
  out.push_str("const cryptoKeyStatics = internals.cryptoKeyStatics = {};\n");
  for s in STATICS {
    out.push_str(&format!(
      "cryptoKeyStatics.{s} = primordials.FunctionPrototypeBind(CryptoKey.{s}, CryptoKey);\ndelete CryptoKey.{s};\n"
    ));
  }
  let mut rest = code[at..].to_string();
  for s in STATICS {
    rest = rest.replace(
      &format!("CryptoKey.{s}("),
      &format!("cryptoKeyStatics.{s}("),
    );
  }
  out.push_str(&rest);
  Some(out)
}

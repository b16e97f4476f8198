//! HMAC, PBKDF2 and HKDF over MD5: workerd keeps MD5 for these (legacy
//! tokens, old password stores), deno_crypto refuses it. The checks of
//! the arguments are the JS side's; these only compute.

use deno_core::op2;
use deno_error::JsErrorBox;
use hmac::{Hmac, Mac};
use md5::Md5;

type HmacMd5 = Hmac<Md5>;

fn mac(key: &[u8]) -> HmacMd5 {
  // HMAC takes a key of any length.
  HmacMd5::new_from_slice(key).expect("HMAC accepts any key length")
}

fn hmac_md5(key: &[u8], data: &[u8]) -> Vec<u8> {
  let mut m = mac(key);
  m.update(data);
  m.finalize().into_bytes().to_vec()
}

/// Whether `signature` is the HMAC-MD5 of `data` (compared in constant time).
fn hmac_md5_verify(key: &[u8], data: &[u8], signature: &[u8]) -> bool {
  let mut m = mac(key);
  m.update(data);
  m.verify_slice(signature).is_ok()
}

#[op2]
#[buffer]
pub fn op_crypto_hmac_md5(#[buffer] key: &[u8], #[buffer] data: &[u8]) -> Vec<u8> {
  hmac_md5(key, data)
}

#[op2(fast)]
pub fn op_crypto_hmac_md5_verify(
  #[buffer] key: &[u8],
  #[buffer] data: &[u8],
  #[buffer] signature: &[u8],
) -> bool {
  hmac_md5_verify(key, data, signature)
}

#[op2]
#[buffer]
pub fn op_crypto_pbkdf2_md5(
  #[buffer] password: &[u8],
  #[buffer] salt: &[u8],
  iterations: u32,
  bytes: u32,
) -> Result<Vec<u8>, JsErrorBox> {
  let mut out = vec![0; bytes as usize];
  pbkdf2::pbkdf2::<HmacMd5>(password, salt, iterations, &mut out)
    .map_err(|e| JsErrorBox::generic(format!("PBKDF2: {e}")))?;
  Ok(out)
}

#[op2]
#[buffer]
pub fn op_crypto_hkdf_md5(
  #[buffer] key: &[u8],
  #[buffer] salt: &[u8],
  #[buffer] info: &[u8],
  bytes: u32,
) -> Result<Vec<u8>, JsErrorBox> {
  let mut out = vec![0; bytes as usize];
  hkdf::Hkdf::<Md5>::new(Some(salt), key)
    .expand(info, &mut out)
    .map_err(|e| JsErrorBox::generic(format!("HKDF: {e}")))?;
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn hmac_md5_is_rfc_2104s() {
    // RFC 2104's test vector 2.
    let m = hmac_md5(b"Jefe", b"what do ya want for nothing?");
    assert_eq!(
      m,
      [
        0x75, 0x0c, 0x78, 0x3e, 0x6a, 0xb0, 0xb5, 0x03, 0xea, 0xa8, 0x6e, 0x31, 0x0a, 0x5d, 0xb7,
        0x38
      ]
    );
    assert!(hmac_md5_verify(
      b"Jefe",
      b"what do ya want for nothing?",
      &m
    ));
    assert!(!hmac_md5_verify(
      b"Jefe",
      b"what do ya want for something?",
      &m
    ));
  }
}

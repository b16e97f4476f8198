//! AES-GCM for IV lengths deno_crypto refuses (all but 12 and 16 bytes).
//! workerd (BoringSSL) takes any IV of at least one byte; NIST SP 800-38D
//! derives the pre-counter block J0 from such an IV with GHASH. Built from
//! the RustCrypto primitives deno_crypto's own AES-GCM uses (aes, ctr,
//! ghash); only the J0 derivation is not available there at run-time IV
//! lengths.

use aes::cipher::{BlockEncrypt, KeyInit, KeyIvInit, StreamCipher, consts::U16};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use subtle::ConstantTimeEq;

#[derive(Debug, PartialEq)]
pub enum GcmError {
  /// The key is not 16, 24 or 32 bytes.
  KeyLength,
  /// An empty IV (SP 800-38D requires at least one bit).
  EmptyIv,
  /// The tag is not one of 32, 64, 96..=128 (step 8) bits.
  TagLength,
  /// Authentication failed, or the input is shorter than its tag.
  Failed,
}

/// Encrypts (ciphertext || tag) or decrypts (plaintext) with AES-GCM.
pub fn seal_or_open(
  encrypt: bool,
  key: &[u8],
  iv: &[u8],
  aad: &[u8],
  tag_bits: usize,
  data: &[u8],
) -> Result<Vec<u8>, GcmError> {
  match key.len() {
    16 => run::<aes::Aes128>(encrypt, key, iv, aad, tag_bits, data),
    24 => run::<aes::Aes192>(encrypt, key, iv, aad, tag_bits, data),
    32 => run::<aes::Aes256>(encrypt, key, iv, aad, tag_bits, data),
    _ => Err(GcmError::KeyLength),
  }
}

fn run<C>(
  encrypt: bool,
  key: &[u8],
  iv: &[u8],
  aad: &[u8],
  tag_bits: usize,
  data: &[u8],
) -> Result<Vec<u8>, GcmError>
where
  C:
    BlockEncrypt + KeyInit + aes::cipher::BlockSizeUser<BlockSize = U16> + aes::cipher::BlockCipher,
{
  if iv.is_empty() {
    return Err(GcmError::EmptyIv);
  }
  if ![32, 64, 96, 104, 112, 120, 128].contains(&tag_bits) {
    return Err(GcmError::TagLength);
  }
  let tag_len = tag_bits / 8;
  let cipher = C::new_from_slice(key).map_err(|_| GcmError::KeyLength)?;
  let mut h = Default::default();
  cipher.encrypt_block(&mut h);
  let lengths = |a: usize, b: usize| {
    let mut block = [0u8; 16];
    block[..8].copy_from_slice(&((a as u64) * 8).to_be_bytes());
    block[8..].copy_from_slice(&((b as u64) * 8).to_be_bytes());
    block
  };
  let j0: [u8; 16] = if iv.len() == 12 {
    let mut j = [0u8; 16];
    j[..12].copy_from_slice(iv);
    j[15] = 1;
    j
  } else {
    let mut g = GHash::new(&h);
    g.update_padded(iv);
    g.update_padded(&lengths(0, iv.len()));
    g.finalize().into()
  };
  let (text, given_tag) = if encrypt {
    (data, &[][..])
  } else {
    if data.len() < tag_len {
      return Err(GcmError::Failed);
    }
    data.split_at(data.len() - tag_len)
  };
  let tag = |ciphertext: &[u8]| -> Vec<u8> {
    let mut g = GHash::new(&h);
    g.update_padded(aad);
    g.update_padded(ciphertext);
    g.update_padded(&lengths(aad.len(), ciphertext.len()));
    let mut s: [u8; 16] = g.finalize().into();
    let mut ek_j0 = j0.into();
    cipher.encrypt_block(&mut ek_j0);
    for (a, b) in s.iter_mut().zip(ek_j0.iter()) {
      *a ^= b;
    }
    s[..tag_len].to_vec()
  };
  let mut counter = j0;
  let low = u32::from_be_bytes(counter[12..].try_into().unwrap()).wrapping_add(1);
  counter[12..].copy_from_slice(&low.to_be_bytes());
  let mut out = text.to_vec();
  let mut ctr =
    ctr::Ctr32BE::<C>::new_from_slices(key, &counter).map_err(|_| GcmError::KeyLength)?;
  if encrypt {
    ctr.apply_keystream(&mut out);
    let t = tag(&out);
    out.extend_from_slice(&t);
    Ok(out)
  } else {
    if !bool::from(tag(text).ct_eq(given_tag)) {
      return Err(GcmError::Failed);
    }
    ctr.apply_keystream(&mut out);
    Ok(out)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
      .step_by(2)
      .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
      .collect()
  }

  // The GCM specification's test case 6 (McGrew and Viega): a 60-byte IV,
  // which goes through the GHASH derivation of J0.
  #[test]
  fn long_iv_matches_the_specification() {
    let key = hex("feffe9928665731c6d6a8f9467308308");
    let iv = hex(concat!(
      "9313225df88406e555909c5aff5269aa6a7a9538534f7da1e4c303d2a318a728",
      "c3c0c95156809539fcf0e2429a6b525416aedbf5a0de6a57a637b39b"
    ));
    let pt = hex(concat!(
      "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72",
      "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
    ));
    let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
    let out = seal_or_open(true, &key, &iv, &aad, 128, &pt).unwrap();
    let (ct, tag) = out.split_at(pt.len());
    assert_eq!(
      ct,
      hex(concat!(
        "8ce24998625615b603a033aca13fb894be9112a5c3a211a8ba262a3cca7e2ca7",
        "01e4a9a4fba43c90ccdcb281d48c7c6fd62875d2aca417034c34aee5"
      ))
    );
    assert_eq!(tag, hex("619cc5aefffe0bfa462af43c1699d050"));
    assert_eq!(seal_or_open(false, &key, &iv, &aad, 128, &out).unwrap(), pt);
  }

  // Test case 5: an 8-byte IV.
  #[test]
  fn short_iv_matches_the_specification() {
    let key = hex("feffe9928665731c6d6a8f9467308308");
    let iv = hex("cafebabefacedbad");
    let pt = hex(concat!(
      "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72",
      "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
    ));
    let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
    let out = seal_or_open(true, &key, &iv, &aad, 128, &pt).unwrap();
    assert_eq!(&out[pt.len()..], hex("3612d2e79e3b0785561be14aaca2fccb"));
  }

  #[test]
  fn tampering_and_bad_parameters_are_refused() {
    let key = [7u8; 32];
    let mut out = seal_or_open(true, &key, &[1], b"", 96, b"hello").unwrap();
    assert_eq!(out.len(), 5 + 12);
    assert_eq!(
      seal_or_open(false, &key, &[1], b"", 96, &out).unwrap(),
      b"hello"
    );
    out[0] ^= 1;
    assert_eq!(
      seal_or_open(false, &key, &[1], b"", 96, &out),
      Err(GcmError::Failed)
    );
    assert_eq!(
      seal_or_open(true, &key, &[], b"", 128, b"x"),
      Err(GcmError::EmptyIv)
    );
    assert_eq!(
      seal_or_open(true, &key, &[1], b"", 100, b"x"),
      Err(GcmError::TagLength)
    );
    assert_eq!(
      seal_or_open(false, &key, &[1], b"", 128, b"short"),
      Err(GcmError::Failed)
    );
    assert_eq!(
      seal_or_open(true, &[0; 20], &[1], b"", 128, b"x"),
      Err(GcmError::KeyLength)
    );
  }
}

//! Durable Object ids, derived exactly as workerd derives them: the namespace
//! key is SHA-256 of its unique key (`<script name>-<ClassName>`); an id is
//! 16 bytes (HMAC of the name, or random) followed by the first 16 bytes of
//! an HMAC over those 16 bytes, so `idFromString` can tell foreign ids.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub type Id = [u8; 32];

pub fn namespace_key(unique_key: &str) -> [u8; 32] {
  Sha256::digest(unique_key.as_bytes()).into()
}

fn mac16(key: &[u8; 32], data: &[u8]) -> [u8; 16] {
  let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
  m.update(data);
  let full = m.finalize().into_bytes();
  full[..16].try_into().unwrap()
}

fn with_mac(key: &[u8; 32], first: [u8; 16]) -> Id {
  let mut id = [0u8; 32];
  id[..16].copy_from_slice(&first);
  id[16..].copy_from_slice(&mac16(key, &first));
  id
}

pub fn from_name(key: &[u8; 32], name: &str) -> Id {
  with_mac(key, mac16(key, name.as_bytes()))
}

pub fn unique(key: &[u8; 32], random: [u8; 16]) -> Id {
  with_mac(key, random)
}

/// Parses a 64-hex-digit id and checks that it belongs to this namespace,
/// with workerd's messages.
pub fn from_string(key: &[u8; 32], s: &str) -> Result<Id, &'static str> {
  const BAD: &str = "Invalid Durable Object ID: must be 64 hex digits";
  if s.len() != 64 {
    return Err(BAD);
  }
  let mut id = [0u8; 32];
  for (i, pair) in s.as_bytes().chunks(2).enumerate() {
    let hi = (pair[0] as char).to_digit(16).ok_or(BAD)?;
    let lo = (pair[1] as char).to_digit(16).ok_or(BAD)?;
    id[i] = (hi * 16 + lo) as u8;
  }
  if id[16..] != mac16(key, &id[..16]) {
    return Err("Durable Object ID is not valid for this namespace.");
  }
  Ok(id)
}

pub fn to_hex(id: &Id) -> String {
  id.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Ids `wrangler dev` gives for these script and class names: computed by
  /// miniflare's `durableObjectNamespaceIdFromName` (wrangler 4.86.0), whose
  /// unique key is `<script name>-<ClassName>`.
  #[test]
  fn ids_match_wrangler_dev() {
    let cases = [
      (
        "counter-Counter",
        "a",
        "131f150e8659005742bf5954011a81428d5f0f721e2071278f57542397896f3c",
      ),
      (
        "counter-Counter",
        "",
        "fd2686b6179ca9e34aeebf6e50318e179562e9eba2a1514eeef0c81b666bcd14",
      ),
      (
        "counter-Counter",
        "ünï😀",
        "66539fe2c4daefec69a72fad40c852b98ad9afb7a637fe7b6eb654ba050a7e66",
      ),
      (
        "worker-MyDurableObject",
        "foo",
        "79a0e26951e811698d50dca4c868674068e922f365122669d3008eae4be8d3f0",
      ),
    ];
    for (unique_key, name, hex) in cases {
      assert_eq!(
        to_hex(&from_name(&namespace_key(unique_key), name)),
        hex,
        "{unique_key} {name:?}"
      );
    }
  }

  #[test]
  fn name_ids_are_deterministic_and_verifiable() {
    let k = namespace_key("worker-Counter");
    let a = from_name(&k, "a");
    assert_eq!(a, from_name(&k, "a"));
    assert_ne!(a, from_name(&k, "b"));
    let hex = to_hex(&a);
    assert_eq!(from_string(&k, &hex), Ok(a));
    assert_eq!(from_string(&k, &hex.to_uppercase()), Ok(a));
    let other = namespace_key("other-Counter");
    assert_eq!(
      from_string(&other, &hex),
      Err("Durable Object ID is not valid for this namespace.")
    );
    assert_eq!(
      from_string(&k, &hex[..63]),
      Err("Invalid Durable Object ID: must be 64 hex digits")
    );
    let mut flipped = hex.clone().into_bytes();
    flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    assert_eq!(
      from_string(&k, &flipped),
      Err("Durable Object ID is not valid for this namespace.")
    );
  }
}

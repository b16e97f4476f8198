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

/// Whether `s` is an id of this namespace in the form cell scopes and bucket keys use (lower
/// case, as [`to_hex`] writes it). `idFromString` also takes upper case; a bucket key naming
/// the object that way is not its cell's key.
pub fn is_canonical(key: &[u8; 32], s: &str) -> bool {
  from_string(key, s).is_ok_and(|id| to_hex(&id) == s)
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

  /// Found writing the id properties: the waker checked a wake entry's id with
  /// `from_string`, which takes upper case, then used the key's spelling as the object's id:
  /// `Counter:AB…` woke an object `AB…` whose cell is not `Counter:ab…`'s.
  #[test]
  fn only_lower_case_ids_are_canonical() {
    let k = namespace_key("worker-Counter");
    let hex = to_hex(&from_name(&k, "a"));
    assert!(is_canonical(&k, &hex));
    assert!(!is_canonical(&k, &hex.to_uppercase()));
    assert!(!is_canonical(&namespace_key("other-Counter"), &hex));
    assert!(!is_canonical(&k, &hex[..63]));
  }

  /// Property tests of `idFromString`: CI runs the default case count, `PROPTEST_CASES=N`
  /// more (scripts/fuzz.sh); the `id` cargo-fuzz target (`fuzz/`) checks the same with
  /// coverage guidance.
  mod props {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = [u8; 32]> {
      prop_oneof![Just(namespace_key("worker-Counter")), any::<[u8; 32]>(),]
    }

    /// Strings near an id: the right length mostly, hex mostly, any character sometimes.
    fn near_id() -> impl Strategy<Value = String> {
      prop_oneof![
        "[0-9a-fA-F]{64}",
        "[0-9a-fA-F]{60,68}",
        "[0-9a-fA-FgG \\-+\u{0}é😀]{62,66}",
        any::<String>(),
      ]
    }

    proptest! {
      /// Whatever a Worker passes, idFromString answers; what it accepts is an id of the
      /// namespace, given back in canonical (lower-case) form.
      #[test]
      fn from_string_never_panics_and_accepts_only_its_ids(k in key(), s in near_id()) {
        if let Ok(id) = from_string(&k, &s) {
          prop_assert_eq!(to_hex(&id), s.to_ascii_lowercase());
          prop_assert_eq!(&id[16..], &mac16(&k, &id[..16])[..]);
        }
        prop_assert_eq!(is_canonical(&k, &s), from_string(&k, &s).is_ok() && s == s.to_ascii_lowercase());
      }

      #[test]
      fn ids_round_trip(k in key(), name in any::<String>(), random in any::<[u8; 16]>()) {
        for id in [from_name(&k, &name), unique(&k, random)] {
          let hex = to_hex(&id);
          prop_assert_eq!(hex.len(), 64);
          prop_assert_eq!(from_string(&k, &hex), Ok(id));
          prop_assert_eq!(from_string(&k, &hex.to_uppercase()), Ok(id));
        }
      }

      /// Changing any one hex digit of an id (other than its case) makes it foreign.
      #[test]
      fn a_changed_digit_is_refused(k in key(), random in any::<[u8; 16]>(), at in 0usize..64, d in 1u32..16) {
        let mut hex = to_hex(&unique(&k, random)).into_bytes();
        // Another digit: the old one plus 1 to 15 (no rejected cases, which a long run
        // would exhaust).
        let old = char::from(hex[at]).to_digit(16).unwrap();
        hex[at] = char::from_digit((old + d) % 16, 16).unwrap() as u8;
        let hex = String::from_utf8(hex).unwrap();
        prop_assert_eq!(from_string(&k, &hex), Err("Durable Object ID is not valid for this namespace."));
      }
    }
  }
}

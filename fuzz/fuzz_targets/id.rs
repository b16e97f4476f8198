//! `idFromString` (runtime/ext/src/id.rs) on arbitrary strings, and on ids of the namespace
//! with one character changed. Properties: no panic; an accepted string is the id's hex in
//! any case and carries the namespace's MAC; `is_canonical` is "accepted and lower case"; a
//! changed digit is refused, a changed case is not.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../runtime/ext/src/id.rs"]
#[allow(dead_code)]
mod id;

fuzz_target!(|data: &[u8]| {
  let Some((&mode, rest)) = data.split_first() else {
    return;
  };
  let key = if mode & 1 == 0 {
    id::namespace_key("worker-Counter")
  } else {
    id::namespace_key(&String::from_utf8_lossy(rest.get(..8).unwrap_or(rest)))
  };
  // Arbitrary text.
  let s = String::from_utf8_lossy(rest);
  check(&key, &s);
  // A real id with the input's edits: (position, byte) pairs.
  let mut random = [0u8; 16];
  for (r, b) in random.iter_mut().zip(rest) {
    *r = *b;
  }
  let good = id::to_hex(&id::unique(&key, random));
  assert!(id::is_canonical(&key, &good));
  let mut edited = good.clone().into_bytes();
  for pair in rest.get(16..).unwrap_or_default().chunks(2) {
    if let [at, b] = *pair {
      edited[usize::from(at) % 64] = b;
    }
  }
  if let Ok(edited) = String::from_utf8(edited) {
    check(&key, &edited);
    let accepted = id::from_string(&key, &edited).is_ok();
    assert_eq!(accepted, edited.eq_ignore_ascii_case(&good), "{edited}");
  }
});

fn check(key: &[u8; 32], s: &str) {
  match id::from_string(key, s) {
    Ok(i) => {
      assert_eq!(id::to_hex(&i), s.to_ascii_lowercase());
      assert_eq!(id::unique(key, i[..16].try_into().unwrap()), i);
      assert_eq!(id::is_canonical(key, s), s == s.to_ascii_lowercase());
    }
    Err(_) => assert!(!id::is_canonical(key, s)),
  }
}

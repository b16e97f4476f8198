//! What another writer may have put in the bucket: JSON records (runtime/fleet/src/records.rs)
//! and object keys (the logic core's LTX keys, wake entries, scopes), and listings of LTX
//! keys into the restore's chain rule. Properties: no panic; a record that parses
//! re-serializes to itself, and the hand-written `own.json` writer is valid JSON; a key that
//! parses is the canonical name of what it parses to; a chain starts at TXID 1, is contiguous
//! and comes from the newest epoch holding a snapshot.

#![no_main]

use cellhost_logic::own::{OwnRecord, split_scope, validate_scope};
use cellhost_logic::restore::{LtxKey, restore_chain};
use cellhost_logic::wake::{entry_key, entry_scope};
use libfuzzer_sys::fuzz_target;

#[path = "../../runtime/fleet/src/records.rs"]
#[allow(dead_code)]
mod records;

use records::*;

fuzz_target!(|data: &[u8]| {
  json_records(data);
  let s = String::from_utf8_lossy(data);
  keys(&s);
  chain(data);
});

fn json_records(b: &[u8]) {
  if let Ok(r) = parse_own(b) {
    let json = own_json(&r);
    let v: serde_json::Value = serde_json::from_str(&json).expect("own_json writes JSON");
    assert_eq!(v, serde_json::json!({ "node": r.node, "epoch": r.epoch }));
    assert_eq!(parse_own(json.as_bytes()).unwrap(), r);
  }
  if let Ok(l) = parse_lease(b) {
    assert_eq!(parse_lease(lease_json(&l).as_bytes()).unwrap(), l);
  }
  if let Ok(h) = parse_hint(b) {
    assert_eq!(parse_hint(hint_json(&h).as_bytes()).unwrap(), h);
  }
  if let Ok(w) = parse_waker(b) {
    assert_eq!(parse_waker(waker_json(&w).as_bytes()).unwrap(), w);
  }
  // Any string as a node name survives own.json.
  let node = String::from_utf8_lossy(b).into_owned();
  let r = OwnRecord::owned(node, b.len() as u64);
  assert_eq!(parse_own(own_json(&r).as_bytes()).unwrap(), r);
}

fn keys(s: &str) {
  for key in [s.to_string(), format!("cells/C:a/ltx/{s}")] {
    if let Some(k) = LtxKey::parse("C:a", &key) {
      assert_eq!(k.object_key("C:a"), key);
      assert!(k.min_txid >= 1 && k.min_txid <= k.max_txid);
    }
  }
  if let Some(scope) = entry_scope(s) {
    assert_eq!(entry_key(scope), s);
  }
  if validate_scope(s).is_ok() {
    assert!(!s.is_empty() && s.len() <= 255 && s != "." && s != "..");
    assert!(!s.contains('/'));
    let (class, id) = split_scope(s);
    assert!(class.len() + id.len() <= s.len());
  }
}

/// 17 bytes a key: epoch (0..4), min TXID, then how far max reaches (0..=3, or to the end).
fn chain(data: &[u8]) {
  let keys: Vec<LtxKey> = data
    .chunks_exact(17)
    .map(|c| {
      let min = u64::from_le_bytes(c[1..9].try_into().unwrap()) % 8 + 1;
      let min = if c[0] & 0x80 != 0 {
        u64::MAX - min + 1
      } else {
        min
      };
      let reach = u64::from_le_bytes(c[9..17].try_into().unwrap());
      let max = if reach & 0x80 != 0 {
        u64::MAX
      } else {
        min.saturating_add(reach % 4)
      };
      LtxKey {
        epoch: u64::from(c[0] & 3),
        level: 0,
        min_txid: min,
        max_txid: max,
      }
    })
    .collect();
  let newest = keys
    .iter()
    .filter(|k| k.min_txid == 1)
    .map(|k| k.epoch)
    .max();
  match restore_chain(&keys) {
    None => assert_eq!(newest, None),
    Some(c) => {
      assert_eq!(Some(c.epoch), newest);
      let mut next = Some(1u64);
      for k in &c.keys {
        assert!(keys.contains(k));
        assert_eq!(k.epoch, c.epoch);
        assert_eq!(Some(k.min_txid), next);
        next = k.max_txid.checked_add(1);
      }
    }
  }
}

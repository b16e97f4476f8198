//! "The bucket wins": what a new owner restores.
//!
//! Every time a node takes a cell it replaces the cell's local database with
//! the newest epoch chain in the bucket, even when its local file is not
//! empty: that file may be older than what other owners wrote since, or hold
//! commits that never became durable. A bucket that holds nothing for the
//! cell starts it empty. This module names the LTX objects and picks the
//! chain; it never looks at a local file, so there is no way to ask it for
//! one.
//!
//! Chain rule: an epoch prefix `cells/<scope>/ltx/e<epoch>/` opens with a
//! snapshot at TXID 1, or (an epoch that paged in, [`paged`]) with a marker
//! linking it to the state of an older epoch it continues. The restore
//! takes the newest epoch that can start a chain either way and follows it
//! as far as the objects are contiguous. An epoch that can start none is
//! skipped. Objects above a gap are a stale owner's unacknowledged tail or
//! an upload still in flight; they are not part of the chain.

use std::fmt;

pub mod listing;
pub mod paged;
pub use listing::{ListStep, RestoreListing, gather, snapshot_hint_key};
pub use paged::{Marker, linked_chain};

/// One LTX object of a cell, as named in the bucket:
/// `cells/<scope>/ltx/e<epoch>/<level %04x>/<min %016x>-<max %016x>.ltx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LtxKey {
  pub epoch: u64,
  pub level: u32,
  pub min_txid: u64,
  pub max_txid: u64,
}

impl LtxKey {
  /// A level-0 object holding one transaction.
  pub fn l0(epoch: u64, txid: u64) -> Self {
    LtxKey {
      epoch,
      level: 0,
      min_txid: txid,
      max_txid: txid,
    }
  }

  /// The object key in the bucket.
  pub fn object_key(&self, scope: &str) -> String {
    format!(
      "cells/{scope}/ltx/e{}/{:04x}/{:016x}-{:016x}.ltx",
      self.epoch, self.level, self.min_txid, self.max_txid
    )
  }

  /// Parses an object key of `scope`; `None` for anything else (a legacy
  /// `e<epoch>.seal.json`, a foreign object), which a restore ignores.
  pub fn parse(scope: &str, key: &str) -> Option<Self> {
    let rest = key.strip_prefix(&ltx_prefix(scope))?;
    let (epoch, rest) = rest.strip_prefix('e')?.split_once('/')?;
    let (level, name) = rest.split_once('/')?;
    let (min, max) = name.strip_suffix(".ltx")?.split_once('-')?;
    let key = LtxKey {
      epoch: parse_dec(epoch)?,
      level: u32::try_from(parse_hex(level, 4)?).ok()?,
      min_txid: parse_hex(min, 16)?,
      max_txid: parse_hex(max, 16)?,
    };
    (key.min_txid >= 1 && key.min_txid <= key.max_txid).then_some(key)
  }
}

impl fmt::Display for LtxKey {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(
      f,
      "e{}/{:04x}/{}-{}",
      self.epoch, self.level, self.min_txid, self.max_txid
    )
  }
}

/// Decimal without sign, leading zeros or overflow: `e07` is not `e7`.
fn parse_dec(s: &str) -> Option<u64> {
  if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit()) {
    return None;
  }
  s.parse().ok()
}

/// Exactly `digits` lowercase hex digits, as [`LtxKey::object_key`] writes them. No sign and
/// no upper case (`from_str_radix` takes `+` and `A-F`): a key that is not the canonical name
/// of what it parses to would alias another object.
fn parse_hex(s: &str, digits: usize) -> Option<u64> {
  if s.len() != digits || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
    return None;
  }
  u64::from_str_radix(s, 16).ok()
}

/// The prefix under which a cell's LTX lives: `cells/<scope>/ltx/`.
pub fn ltx_prefix(scope: &str) -> String {
  format!("cells/{scope}/ltx/")
}

/// The newest epoch that holds any LTX: what the lost-record refusal names
/// as the epoch of the repair record.
pub fn newest_epoch(keys: &[LtxKey]) -> Option<u64> {
  keys.iter().map(|k| k.epoch).max()
}

/// The objects a restore applies, in order: the snapshot at TXID 1 (or,
/// for an epoch that paged in, the chain it links to), then each following
/// object whose `min_txid` is the previous `max_txid + 1`. Where the
/// epoch changes along the chain, the next object is TXID 2 of its epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
  pub epoch: u64,
  pub keys: Vec<LtxKey>,
  /// The state of `epoch` the chain reaches.
  pub txid: u64,
}

impl Chain {
  /// The last TXID of `epoch` the chain reaches.
  pub fn max_txid(&self) -> u64 {
    self.txid
  }
}

/// Picks the chain to restore from a listing of the cell's LTX objects (in
/// any order). `None` means the bucket holds nothing restorable: the cell
/// starts empty.
///
/// Where compaction left several objects starting at the same TXID, the one
/// reaching furthest is taken, so fewer objects are read.
pub fn restore_chain(keys: &[LtxKey]) -> Option<Chain> {
  linked_chain(keys, &[])
}

/// Epoch `epoch`'s history, one state per object: its level-0 objects of
/// one commit each, from TXID 1 (TXID 2 for an epoch that paged in, whose
/// state 1 is its predecessor's) while contiguous: what point-in-time
/// bookmarks name and search by commit time.
pub fn history(keys: &[LtxKey], markers: &[Marker], epoch: u64) -> Vec<LtxKey> {
  let mut own: Vec<LtxKey> = (keys.iter())
    .filter(|k| k.epoch == epoch && k.level == 0 && k.min_txid == k.max_txid)
    .copied()
    .collect();
  own.sort();
  let paged = markers.iter().any(|m| m.epoch == epoch);
  let first = match own.first() {
    Some(k) if k.min_txid == 2 && paged => 2,
    _ => 1,
  };
  (own.into_iter())
    .zip(first..)
    .take_while(|(k, t)| k.min_txid == *t)
    .map(|(k, _)| k)
    .collect()
}

/// The objects that rebuild state `txid` of `epoch` (a point-in-time
/// restore): the furthest-reaching snapshot that does not pass `txid` (for
/// an epoch that paged in and has none, the chain its marker links to),
/// then one level-0 object per commit up to `txid`. `None` when the
/// bucket does not hold that state.
pub fn chain_to(keys: &[LtxKey], markers: &[Marker], epoch: u64, txid: u64) -> Option<Vec<LtxKey>> {
  let own = || keys.iter().filter(|k| k.epoch == epoch);
  let (mut out, from) = match own()
    .filter(|k| k.min_txid == 1 && k.max_txid <= txid)
    .max_by_key(|k| (k.max_txid, k.level))
  {
    Some(base) => (vec![*base], base.max_txid + 1),
    None if txid >= 1 => {
      let c = paged::chain_of(keys, markers, epoch, 1, 0)?;
      (c.txid == 1).then_some((c.keys, 2))?
    }
    None => return None,
  };
  for t in from..=txid {
    out.push(*own().find(|k| k.level == 0 && k.min_txid == t && k.max_txid == t)?);
  }
  Some(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn history_is_the_contiguous_level_0_run_from_one() {
    let mut keys: Vec<LtxKey> = [1, 2, 3, 5].iter().map(|&t| LtxKey::l0(2, t)).collect();
    keys.extend([
      LtxKey::l0(1, 4),
      LtxKey {
        epoch: 2,
        level: crate::compact::SNAPSHOT_LEVEL,
        min_txid: 1,
        max_txid: 3,
      },
    ]);
    let h: Vec<u64> = history(&keys, &[], 2).iter().map(|k| k.max_txid).collect();
    assert_eq!(h, [1, 2, 3], "to the first gap; snapshots are not states");
    assert!(history(&keys, &[], 1).is_empty(), "no TXID 1");
    assert!(history(&keys, &[], 3).is_empty(), "no such epoch");
  }

  #[test]
  fn a_point_in_time_starts_from_the_snapshot_below_it() {
    let snap = |max| LtxKey {
      epoch: 2,
      level: crate::compact::SNAPSHOT_LEVEL,
      min_txid: 1,
      max_txid: max,
    };
    let mut keys: Vec<LtxKey> = (1..=9).map(|t| LtxKey::l0(2, t)).collect();
    keys.extend([snap(4), snap(8), LtxKey::l0(1, 1)]);
    assert_eq!(
      chain_to(&keys, &[], 2, 6),
      Some(vec![snap(4), LtxKey::l0(2, 5), LtxKey::l0(2, 6)])
    );
    assert_eq!(chain_to(&keys, &[], 2, 8), Some(vec![snap(8)]));
    assert_eq!(chain_to(&keys, &[], 2, 3).map(|c| c.len()), Some(3));
    assert_eq!(chain_to(&keys, &[], 2, 10), None);
    assert_eq!(chain_to(&keys, &[], 3, 1), None);
    keys.retain(|k| *k != LtxKey::l0(2, 5));
    assert_eq!(chain_to(&keys, &[], 2, 6), None, "a gap below the state");
  }

  #[test]
  fn keys_round_trip() {
    let k = LtxKey {
      epoch: 12,
      level: 0,
      min_txid: 1,
      max_txid: 0x2a,
    };
    let s = k.object_key("Counter:ab");
    assert_eq!(
      s,
      "cells/Counter:ab/ltx/e12/0000/0000000000000001-000000000000002a.ltx"
    );
    assert_eq!(LtxKey::parse("Counter:ab", &s), Some(k));
    assert_eq!(LtxKey::parse("Counter:ac", &s), None);
    assert_eq!(
      LtxKey::parse(
        "C:a",
        "cells/C:a/ltx/e07/0000/0000000000000001-0000000000000001.ltx"
      ),
      None
    );
    assert_eq!(LtxKey::parse("C:a", "cells/C:a/ltx/e7.seal.json"), None);
    assert_eq!(
      LtxKey::parse(
        "C:a",
        "cells/C:a/ltx/e7/0000/0000000000000002-0000000000000001.ltx"
      ),
      None
    );
  }

  /// Found by the `records` fuzz target: `from_str_radix` took a sign and upper case, so
  /// keys that are not what `object_key` writes parsed as if they were, aliasing the
  /// canonical object (a restore would then fetch a name that does not exist).
  #[test]
  fn only_canonical_keys_parse() {
    for key in [
      "cells/C:a/ltx/e1/0000/+000000000000001-0000000000000001.ltx",
      "cells/C:a/ltx/e1/+000/0000000000000001-0000000000000001.ltx",
      "cells/C:a/ltx/e1/0000/0000000000000001-000000000000000A.ltx",
      "cells/C:a/ltx/e1/000A/0000000000000001-0000000000000001.ltx",
      "cells/C:a/ltx/e1/0000/0000000000000001-+00000000000000a.ltx",
    ] {
      assert_eq!(LtxKey::parse("C:a", key), None, "{key}");
    }
  }

  /// Found by the `records` fuzz target: an object ending at TXID 2^64-1 overflowed
  /// `max_txid + 1` (a panic in debug builds).
  #[test]
  fn a_chain_may_end_at_the_last_txid() {
    let last = LtxKey {
      epoch: 1,
      level: 0,
      min_txid: 1,
      max_txid: u64::MAX,
    };
    let c = restore_chain(&[last, LtxKey::l0(1, 2)]).unwrap();
    assert_eq!(c.keys, vec![last]);
    assert_eq!(c.max_txid(), u64::MAX);
  }

  #[test]
  fn newest_epoch_with_a_snapshot_wins() {
    let keys = [
      LtxKey::l0(3, 1),
      LtxKey::l0(3, 2),
      LtxKey::l0(5, 1),
      LtxKey::l0(5, 2),
      LtxKey::l0(4, 1),
    ];
    let c = restore_chain(&keys).unwrap();
    assert_eq!(c.epoch, 5);
    assert_eq!(c.keys, vec![LtxKey::l0(5, 1), LtxKey::l0(5, 2)]);
    assert_eq!(c.max_txid(), 2);
    assert_eq!(newest_epoch(&keys), Some(5));
  }

  #[test]
  fn a_gap_ends_the_chain_and_an_epoch_without_snapshot_is_skipped() {
    let keys = [
      LtxKey::l0(2, 1),
      LtxKey::l0(2, 2),
      LtxKey::l0(2, 4),
      LtxKey::l0(3, 2),
    ];
    let c = restore_chain(&keys).unwrap();
    assert_eq!(c.epoch, 2);
    assert_eq!(c.max_txid(), 2);
    assert_eq!(restore_chain(&[]), None);
    assert_eq!(restore_chain(&[LtxKey::l0(9, 3)]), None);
  }

  #[test]
  fn compacted_objects_are_preferred() {
    let big = LtxKey {
      epoch: 1,
      level: 1,
      min_txid: 1,
      max_txid: 3,
    };
    let keys = [
      LtxKey::l0(1, 1),
      LtxKey::l0(1, 2),
      LtxKey::l0(1, 3),
      big,
      LtxKey::l0(1, 4),
    ];
    let c = restore_chain(&keys).unwrap();
    assert_eq!(c.keys, vec![big, LtxKey::l0(1, 4)]);
  }

  /// Property tests of the bucket-key parser and the chain rule: CI runs the default case
  /// count; `PROPTEST_CASES=N` runs more (scripts/fuzz.sh). The `records` cargo-fuzz target
  /// checks the same properties with coverage guidance.
  mod props {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = LtxKey> {
      (any::<u64>(), 0u32..=0xffff, 1u64.., any::<u64>()).prop_map(|(epoch, level, min, n)| {
        LtxKey {
          epoch,
          level,
          min_txid: min,
          max_txid: min.saturating_add(n % 4),
        }
      })
    }

    /// A canonical key with one span replaced: near misses reach every branch.
    fn near_key() -> impl Strategy<Value = String> {
      let junk = prop::sample::select(vec![
        "",
        "+",
        "-",
        "A",
        "f",
        "0",
        "/",
        "e",
        ".ltx",
        "e0",
        "00",
        "ffffffffffffffff",
        "é",
      ]);
      (key(), any::<prop::sample::Index>(), 0usize..4, junk).prop_map(|(k, at, len, junk)| {
        let mut s = k.object_key("C:a");
        let at = at.index(s.len());
        let end = (at + len).min(s.len());
        s.replace_range(at..end, junk);
        s
      })
    }

    proptest! {
      #[test]
      fn keys_round_trip(k in key()) {
        prop_assert_eq!(LtxKey::parse("C:a", &k.object_key("C:a")), Some(k));
      }

      #[test]
      fn a_key_that_parses_is_the_canonical_name(s in prop_oneof![near_key(), ".{0,80}"]) {
        if let Some(k) = LtxKey::parse("C:a", &s) {
          prop_assert_eq!(k.object_key("C:a"), s);
        }
      }

      #[test]
      fn chains_are_contiguous_from_one(keys in prop::collection::vec(
        (0u64..4, 1u64..8, prop_oneof![0u64..3, Just(u64::MAX)]).prop_map(|(epoch, min, n)| {
          LtxKey {
            epoch,
            level: 0,
            min_txid: min,
            max_txid: min.saturating_add(n),
          }
        }),
        0..24,
      )) {
        match restore_chain(&keys) {
          None => prop_assert!(keys.iter().all(|k| k.min_txid != 1)),
          Some(c) => {
            let newest = keys.iter().filter(|k| k.min_txid == 1).map(|k| k.epoch).max();
            prop_assert_eq!(Some(c.epoch), newest);
            let mut next = Some(1u64);
            for k in &c.keys {
              prop_assert!(keys.contains(k));
              prop_assert_eq!(k.epoch, c.epoch);
              prop_assert_eq!(Some(k.min_txid), next);
              next = k.max_txid.checked_add(1);
            }
            prop_assert!(!c.keys.is_empty());
          }
        }
      }
    }
  }
}

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
//! Chain rule (whole-snapshot epochs only; cellhost does not page in): each
//! epoch prefix `cells/<scope>/ltx/e<epoch>/` is a self-contained lineage
//! that opens with a snapshot at TXID 1. The restore takes the newest epoch
//! that holds a TXID-1 object and follows it from TXID 1 as far as the
//! objects are contiguous. An epoch without a TXID-1 object cannot start a
//! chain and, since no epoch continues another, is skipped. Objects above a
//! gap are a stale owner's unacknowledged tail or an upload still in flight;
//! they are not part of the chain.

use std::fmt;

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
    if level.len() != 4 || min.len() != 16 || max.len() != 16 {
      return None;
    }
    let epoch = parse_dec(epoch)?;
    let key = LtxKey {
      epoch,
      level: u32::from_str_radix(level, 16).ok()?,
      min_txid: u64::from_str_radix(min, 16).ok()?,
      max_txid: u64::from_str_radix(max, 16).ok()?,
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

/// The prefix under which a cell's LTX lives: `cells/<scope>/ltx/`.
pub fn ltx_prefix(scope: &str) -> String {
  format!("cells/{scope}/ltx/")
}

/// The newest epoch that holds any LTX: what the lost-record refusal names
/// as the epoch of the repair record.
pub fn newest_epoch(keys: &[LtxKey]) -> Option<u64> {
  keys.iter().map(|k| k.epoch).max()
}

/// The objects a restore applies, in order: the snapshot at TXID 1, then
/// each following object whose `min_txid` is the previous `max_txid + 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
  pub epoch: u64,
  pub keys: Vec<LtxKey>,
}

impl Chain {
  /// The last TXID the chain reaches.
  pub fn max_txid(&self) -> u64 {
    self.keys.last().map_or(0, |k| k.max_txid)
  }
}

/// Picks the chain to restore from a listing of the cell's LTX objects (in
/// any order). `None` means the bucket holds nothing restorable: the cell
/// starts empty.
///
/// Where compaction left several objects starting at the same TXID, the one
/// reaching furthest is taken, so fewer objects are read.
pub fn restore_chain(keys: &[LtxKey]) -> Option<Chain> {
  let mut epochs: Vec<u64> = keys
    .iter()
    .filter(|k| k.min_txid == 1)
    .map(|k| k.epoch)
    .collect();
  epochs.sort_unstable();
  let epoch = *epochs.last()?;
  let mut own: Vec<LtxKey> = keys.iter().filter(|k| k.epoch == epoch).copied().collect();
  // By min ascending, then the furthest-reaching first.
  own.sort_unstable_by(|a, b| {
    a.min_txid
      .cmp(&b.min_txid)
      .then(b.max_txid.cmp(&a.max_txid))
  });
  let mut chain = Vec::new();
  let mut next = 1;
  for k in own {
    if k.min_txid == next {
      next = k.max_txid + 1;
      chain.push(k);
    } else if k.min_txid > next {
      break;
    }
  }
  Some(Chain { epoch, keys: chain })
}

#[cfg(test)]
mod tests {
  use super::*;

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
}

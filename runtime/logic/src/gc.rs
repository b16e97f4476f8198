//! Epoch GC (`--ltx-retention-secs`, off by default): the owner of a cell
//! deletes the epoch prefixes that no restore reads, in the seeds' order.
//!
//! 1. List every LTX object of the cell and build the restore chain over
//!    them. Go on only when the chain's epoch is the owner's own: its own
//!    first object is in the listing, so a node that takes the cell over
//!    from now on lists it too and restores from this epoch or a newer one.
//! 2. Read the ownership record; go on only when it names this node at
//!    this epoch (read *after* the listing: see the seeds).
//! 3. Write `retired.json` with the base, then delete the epochs below it,
//!    keeping the owner's epoch, the epoch before it (the newest older one
//!    that can start a chain: what a node that listed before the owner's
//!    first object landed restores from, perhaps still downloading it),
//!    and every epoch younger than the retention (point-in-time recovery
//!    reads them).
//!
//! An epoch's age is the commit time of its newest object. The late delete
//! is safe because an epoch below the base never becomes part of a chain
//! again; the argument needs list-after-write consistency, which the
//! storage test checks when GC is on.

use crate::restore::{LtxKey, Marker, linked_chain};

/// Where `retired.json` of a cell lives.
pub fn retired_key(scope: &str) -> String {
  format!("cells/{scope}/retired.json")
}

/// Why a pass stopped without deleting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
  /// The newest chain is not this owner's epoch (its first object has not
  /// landed, or another node has taken the cell since).
  NotNewest { chain: Option<u64> },
  /// The ownership record no longer names this node at this epoch.
  NotOwner,
  /// This epoch paged in and has no snapshot of its own yet: its chain
  /// still reads the epoch it links to.
  Linked,
  /// Nothing old enough to delete.
  Nothing,
}

/// The epochs of a listing that a pass may delete, once their ages are
/// known: every epoch below the base except the one before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidates {
  pub base: u64,
  /// The epoch before the base, kept.
  pub previous: Option<u64>,
  /// Older epochs, newest first, with the newest object of each (whose
  /// commit time is the epoch's age).
  pub older: Vec<(u64, LtxKey)>,
}

/// Step 1: what may go, if this owner (at `epoch`) may collect at all.
pub fn candidates(keys: &[LtxKey], markers: &[Marker], epoch: u64) -> Result<Candidates, Skip> {
  let chain = linked_chain(keys, markers);
  if chain.as_ref().map(|c| c.epoch) != Some(epoch) {
    return Err(Skip::NotNewest {
      chain: chain.map(|c| c.epoch),
    });
  }
  if chain.is_some_and(|c| c.keys.iter().any(|k| k.epoch != epoch)) {
    return Err(Skip::Linked);
  }
  let previous = (keys.iter())
    .filter(|k| k.epoch < epoch && k.min_txid == 1)
    .map(|k| k.epoch)
    .chain(markers.iter().map(|m| m.epoch).filter(|&e| e < epoch))
    .max();
  let mut older: Vec<(u64, LtxKey)> = Vec::new();
  for k in keys
    .iter()
    .filter(|k| k.epoch < epoch && Some(k.epoch) != previous)
  {
    match older.iter_mut().find(|(e, _)| *e == k.epoch) {
      Some((_, newest)) if newest.max_txid < k.max_txid => *newest = *k,
      Some(_) => {}
      None => older.push((k.epoch, *k)),
    }
  }
  older.sort_unstable_by_key(|(e, _)| std::cmp::Reverse(*e));
  if older.is_empty() {
    return Err(Skip::Nothing);
  }
  Ok(Candidates {
    base: epoch,
    previous,
    older,
  })
}

/// The epochs to delete: those whose newest commit is at least
/// `retention_ms` old at `now_ms` (`times`: the commit time of each
/// candidate's newest object, in `older`'s order).
pub fn expired(c: &Candidates, times: &[u64], now_ms: u64, retention_ms: u64) -> Vec<u64> {
  (c.older.iter().zip(times))
    .filter(|(_, t)| now_ms.saturating_sub(**t) >= retention_ms)
    .map(|((e, _), _)| *e)
    .collect()
}

/// Step 2: whether the record read after the listing lets the pass go on.
pub fn still_owner(record: Option<&crate::own::OwnRecord>, node: &str, epoch: u64) -> bool {
  record.is_some_and(|r| r.node == node && r.epoch == epoch)
}

/// The objects of `epochs` in a listing: what step 3 deletes.
pub fn doomed(keys: &[LtxKey], epochs: &[u64]) -> Vec<LtxKey> {
  (keys.iter())
    .filter(|k| epochs.contains(&k.epoch))
    .copied()
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;

  fn snap(epoch: u64, max: u64) -> LtxKey {
    LtxKey {
      epoch,
      level: crate::compact::SNAPSHOT_LEVEL,
      min_txid: 1,
      max_txid: max,
    }
  }

  #[test]
  fn only_the_owner_of_the_newest_chain_collects() {
    let keys = [LtxKey::l0(1, 1), LtxKey::l0(2, 1), LtxKey::l0(3, 2)];
    // Epoch 3 has no first object yet: the newest chain is epoch 2's.
    assert_eq!(
      candidates(&keys, &[], 3),
      Err(Skip::NotNewest { chain: Some(2) })
    );
    assert_eq!(
      candidates(&keys, &[], 1),
      Err(Skip::NotNewest { chain: Some(2) })
    );
    assert_eq!(
      candidates(&[], &[], 1),
      Err(Skip::NotNewest { chain: None })
    );
  }

  #[test]
  fn a_paged_epoch_collects_only_once_it_stands_alone() {
    let mut keys = vec![
      LtxKey::l0(1, 1),
      LtxKey::l0(1, 2),
      LtxKey::l0(2, 1),
      LtxKey::l0(3, 2),
    ];
    let m = Marker {
      epoch: 3,
      from: 2,
      cut: 1,
    };
    assert_eq!(candidates(&keys, &[m], 3), Err(Skip::Linked));
    keys.push(snap(3, 2));
    let c = candidates(&keys, &[m], 3).unwrap();
    assert_eq!((c.previous, c.older.len()), (Some(2), 1));
  }

  #[test]
  fn the_epoch_before_is_kept_and_the_rest_may_go_by_age() {
    let keys = [
      LtxKey::l0(1, 1),
      LtxKey::l0(1, 2),
      snap(1, 2),
      LtxKey::l0(2, 1),
      LtxKey::l0(2, 5),
      // Epoch 3 never committed; epoch 4 holds a stale owner's tail only.
      LtxKey::l0(4, 3),
      LtxKey::l0(5, 1),
      LtxKey::l0(6, 1),
    ];
    let c = candidates(&keys, &[], 6).unwrap();
    assert_eq!(c.base, 6);
    assert_eq!(c.previous, Some(5));
    assert_eq!(
      c.older,
      vec![
        (4, LtxKey::l0(4, 3)),
        (2, LtxKey::l0(2, 5)),
        (1, LtxKey::l0(1, 2))
      ]
    );
    // Epoch 2 committed 10 s ago, the others long before.
    let gone = expired(&c, &[100, 90_000, 0], 100_000, 60_000);
    assert_eq!(gone, vec![4, 1]);
    assert_eq!(doomed(&keys, &gone).len(), 4);
    assert_eq!(candidates(&keys[6..], &[], 6), Err(Skip::Nothing));
  }

  #[test]
  fn the_record_must_name_this_owner_at_this_epoch() {
    use crate::own::OwnRecord;
    assert!(still_owner(Some(&OwnRecord::owned("a", 3)), "a", 3));
    assert!(!still_owner(Some(&OwnRecord::owned("a", 4)), "a", 3));
    assert!(!still_owner(Some(&OwnRecord::owned("b", 3)), "a", 3));
    assert!(!still_owner(Some(&OwnRecord::released(3)), "a", 3));
    assert!(!still_owner(None, "a", 3));
  }
}

//! Paged epochs: an owner that opened a large cell over the bucket's pages
//! (`--paged-min-mb`) never held the whole database, so its epoch cannot
//! open with a snapshot of its own. Its prefix holds a marker instead,
//! `cells/<scope>/ltx/e<epoch>/paged/e<from>-<cut %016x>`, written before
//! the cell serves: state 1 of the epoch is state `cut` of epoch `from`,
//! and the epoch's own deltas follow from TXID 2.
//!
//! A restore composes the chain down the links: the epoch's deltas on top
//! of epoch `from`'s chain clipped at `cut`, which must reach `cut`
//! exactly (an epoch whose link does not hold is not part of any chain).
//! Clipping is safe: the takeover recovery gate sealed `from`'s node-log
//! session before the paged owner restored, so nothing past the cut was
//! acknowledged. A paged epoch gets a snapshot of its own once its local
//! file is complete; from then on it stands alone, and only then may
//! epoch GC delete what it linked to.

use super::{Chain, LtxKey, ltx_prefix, parse_dec, parse_hex};

/// A paged epoch's link to the state it opened from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Marker {
  pub epoch: u64,
  /// The epoch whose chain the owner paged in.
  pub from: u64,
  /// The TXID of `from` it paged in at.
  pub cut: u64,
}

impl Marker {
  pub fn object_key(&self, scope: &str) -> String {
    format!(
      "{}e{}/paged/e{}-{:016x}",
      ltx_prefix(scope),
      self.epoch,
      self.from,
      self.cut
    )
  }

  /// Parses a marker key of `scope`; `None` for anything else. A marker
  /// that links to its own epoch or a later one links nothing.
  pub fn parse(scope: &str, key: &str) -> Option<Self> {
    let rest = key.strip_prefix(&ltx_prefix(scope))?;
    let (epoch, rest) = rest.strip_prefix('e')?.split_once("/paged/e")?;
    let (from, cut) = rest.split_once('-')?;
    let m = Marker {
      epoch: parse_dec(epoch)?,
      from: parse_dec(from)?,
      cut: parse_hex(cut, 16)?,
    };
    (m.from < m.epoch && m.cut >= 1).then_some(m)
  }
}

/// Links deeper than this are not followed (each goes to an older epoch,
/// so only a corrupt listing could come near).
const MAX_LINKS: usize = 64;

/// The chain of the newest epoch that can start one, on its own snapshot
/// or through its marker's link. `None`: the cell starts empty.
pub fn linked_chain(keys: &[LtxKey], markers: &[Marker]) -> Option<Chain> {
  let mut epochs: Vec<u64> = (keys.iter())
    .filter(|k| k.min_txid == 1)
    .map(|k| k.epoch)
    .chain(markers.iter().map(|m| m.epoch))
    .collect();
  epochs.sort_unstable();
  epochs.dedup();
  (epochs.iter().rev()).find_map(|&e| chain_of(keys, markers, e, u64::MAX, 0))
}

/// Epoch `epoch`'s chain, reaching no further than `limit`.
pub(crate) fn chain_of(
  keys: &[LtxKey],
  markers: &[Marker],
  epoch: u64,
  limit: u64,
  depth: usize,
) -> Option<Chain> {
  let mut own: Vec<LtxKey> = (keys.iter())
    .filter(|k| k.epoch == epoch && k.max_txid <= limit)
    .copied()
    .collect();
  // By min ascending, then the furthest-reaching first, then the higher
  // level (a snapshot over a level-0 object of the same reach).
  own.sort_unstable_by(|a, b| {
    a.min_txid
      .cmp(&b.min_txid)
      .then(b.max_txid.cmp(&a.max_txid))
      .then(b.level.cmp(&a.level))
  });
  let (mut chain, start) = if own.iter().any(|k| k.min_txid == 1) {
    (Vec::new(), 1)
  } else {
    if depth >= MAX_LINKS || limit < 1 {
      return None;
    }
    // One owner per epoch writes one marker; should a listing show more,
    // the first whose link holds is taken.
    let base = (markers.iter())
      .filter(|m| m.epoch == epoch)
      .find_map(|m| {
        let base = chain_of(keys, markers, m.from, m.cut, depth + 1)?;
        (base.txid == m.cut).then_some(base)
      })?;
    (base.keys, 2)
  };
  let mut next = start;
  let mut txid = start - 1;
  for k in own {
    if k.min_txid == next {
      chain.push(k);
      txid = k.max_txid;
      // An object that ends at the last TXID there is ends the chain.
      let Some(n) = k.max_txid.checked_add(1) else {
        break;
      };
      next = n;
    } else if k.min_txid > next {
      break;
    }
  }
  Some(Chain {
    epoch,
    keys: chain,
    txid,
  })
}

/// Whether epoch `epoch`'s chain up to `limit` may still change with
/// epochs below `lowest` (not listed yet): it has no snapshot of its own
/// within `limit`, and a marker of it links below `lowest`, directly or
/// through the epochs it links to.
pub(crate) fn reaches_below(
  keys: &[LtxKey],
  markers: &[Marker],
  epoch: u64,
  limit: u64,
  lowest: u64,
  depth: usize,
) -> bool {
  let own_start = (keys.iter()).any(|k| k.epoch == epoch && k.min_txid == 1 && k.max_txid <= limit);
  if own_start || depth >= MAX_LINKS {
    return false;
  }
  (markers.iter())
    .filter(|m| m.epoch == epoch)
    .any(|m| m.from < lowest || reaches_below(keys, markers, m.from, m.cut, lowest, depth + 1))
}

#[cfg(test)]
mod tests {
  use super::super::restore_chain;
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
  fn markers_round_trip_and_only_link_down() {
    let m = Marker {
      epoch: 7,
      from: 3,
      cut: 0x2a,
    };
    let k = m.object_key("C:a");
    assert_eq!(k, "cells/C:a/ltx/e7/paged/e3-000000000000002a");
    assert_eq!(Marker::parse("C:a", &k), Some(m));
    assert_eq!(Marker::parse("C:b", &k), None);
    for bad in [
      "cells/C:a/ltx/e7/paged/e7-000000000000002a",
      "cells/C:a/ltx/e7/paged/e8-000000000000002a",
      "cells/C:a/ltx/e7/paged/e3-0000000000000000",
      "cells/C:a/ltx/e7/paged/e03-000000000000002a",
      "cells/C:a/ltx/e7/paged/e3-2a",
      "cells/C:a/ltx/e7/0000/0000000000000001-0000000000000001.ltx",
    ] {
      assert_eq!(Marker::parse("C:a", bad), None, "{bad}");
    }
  }

  #[test]
  fn a_paged_epoch_continues_its_predecessor_clipped_at_the_cut() {
    // Epoch 2: snapshot to 4, deltas 5..=9 (8 and 9 a stale tail past the
    // cut). Epoch 3 paged in at 7 and committed 2..=3.
    let mut keys: Vec<LtxKey> = (5..=9).map(|t| LtxKey::l0(2, t)).collect();
    keys.extend([snap(2, 4), snap(2, 8), LtxKey::l0(3, 2), LtxKey::l0(3, 3)]);
    let m = Marker {
      epoch: 3,
      from: 2,
      cut: 7,
    };
    let c = linked_chain(&keys, &[m]).unwrap();
    assert_eq!(c.epoch, 3);
    assert_eq!(c.txid, 3);
    assert_eq!(
      c.keys,
      vec![
        snap(2, 4),
        LtxKey::l0(2, 5),
        LtxKey::l0(2, 6),
        LtxKey::l0(2, 7),
        LtxKey::l0(3, 2),
        LtxKey::l0(3, 3)
      ]
    );
    // Without its marker the paged epoch starts nothing.
    assert_eq!(linked_chain(&keys, &[]), restore_chain(&keys));
    assert_eq!(linked_chain(&keys, &[]).unwrap().epoch, 2);
    // A marker alone: state 1 of epoch 3 is state 7 of epoch 2.
    let bare: Vec<LtxKey> = keys.iter().filter(|k| k.epoch == 2).copied().collect();
    let c = linked_chain(&bare, &[m]).unwrap();
    assert_eq!((c.epoch, c.txid, c.keys.len()), (3, 1, 4));
    // A link that does not reach its cut is no chain: the older one wins.
    let gap: Vec<LtxKey> = keys
      .iter()
      .filter(|k| **k != LtxKey::l0(2, 6))
      .copied()
      .collect();
    assert_eq!(linked_chain(&gap, &[m]).unwrap().epoch, 2);
    // Once the paged epoch has a snapshot of its own, it stands alone.
    keys.push(snap(3, 3));
    assert_eq!(linked_chain(&keys, &[m]).unwrap().keys, vec![snap(3, 3)]);
  }

  #[test]
  fn a_paged_epochs_states_start_from_its_link() {
    use super::super::{chain_to, history};
    let mut keys: Vec<LtxKey> = (1..=5).map(|t| LtxKey::l0(1, t)).collect();
    keys.extend((2..=4).map(|t| LtxKey::l0(2, t)));
    let m = [Marker {
      epoch: 2,
      from: 1,
      cut: 3,
    }];
    let h: Vec<u64> = history(&keys, &m, 2).iter().map(|k| k.max_txid).collect();
    assert_eq!(h, [2, 3, 4]);
    assert!(
      history(&keys, &[], 2).is_empty(),
      "no TXID 1 without its marker"
    );
    let l0 = |e, t| LtxKey::l0(e, t);
    assert_eq!(
      chain_to(&keys, &m, 2, 3),
      Some(vec![l0(1, 1), l0(1, 2), l0(1, 3), l0(2, 2), l0(2, 3)])
    );
    assert_eq!(
      chain_to(&keys, &m, 2, 1),
      Some(vec![l0(1, 1), l0(1, 2), l0(1, 3)])
    );
    assert_eq!(chain_to(&keys, &m, 2, 5), None);
    assert_eq!(chain_to(&keys, &[], 2, 3), None);
  }

  #[test]
  fn links_compose_and_a_newer_whole_epoch_wins() {
    let keys = vec![
      LtxKey::l0(1, 1),
      LtxKey::l0(1, 2),
      LtxKey::l0(2, 2),
      LtxKey::l0(3, 2),
      LtxKey::l0(3, 3),
    ];
    let ms = [
      Marker {
        epoch: 2,
        from: 1,
        cut: 2,
      },
      Marker {
        epoch: 3,
        from: 2,
        cut: 2,
      },
    ];
    let c = linked_chain(&keys, &ms).unwrap();
    assert_eq!((c.epoch, c.txid), (3, 3));
    assert_eq!(c.keys.len(), 5);
    let mut newer = keys.clone();
    newer.push(LtxKey::l0(4, 1));
    assert_eq!(
      linked_chain(&newer, &ms).unwrap().keys,
      vec![LtxKey::l0(4, 1)]
    );
  }
}

//! What a restore lists. A cell that stays open keeps one epoch for its
//! whole life, and that epoch's level-0 objects grow with every commit; the
//! snapshots within it (`compact`) bound what a restore reads, and this
//! bounds what it lists: per epoch, newest first, the levels above 0 whole
//! (snapshots: one per many commits), then only the level-0 objects after
//! the furthest-reaching chain start found there, by a start-after listing.
//! It stops at the first epoch that holds a chain start. An epoch without
//! a snapshot of its own that paged in (`paged`) holds a marker instead:
//! then the listing goes on down to the epoch the marker links to, listing
//! that epoch's level-0 objects from the furthest snapshot not past the
//! cut, and stops once the newest chain its keys give can no longer be
//! changed by what is below.
//!
//! A cell's snapshot hint (`cells/<scope>/snapshot-hint`, the key of the
//! newest snapshot its owner uploaded, written after the snapshot) lets the
//! snapshot level be listed from that snapshot on, so a restore lists
//! O(recent) keys, not one per snapshot the epoch ever took. A hint is only
//! a starting point: a stale one lists a little more, a missing or foreign
//! one is ignored.
//!
//! The keys it gathers give [`restore_chain`](super::restore_chain) and
//! [`newest_epoch`](super::newest_epoch) the answers the whole listing
//! gives: older epochs are never restored while a newer one can start a
//! chain, and the level-0 objects a chain start covers are never read
//! (`restore_chain` follows from its `max_txid + 1`). Epochs newer than the
//! one restored (no chain start: a stale owner's tail) are listed whole.
//! The steps need not see one instant of the bucket: the epochs below the
//! new owner's are written only by stale owners, whose objects a restore
//! either saw before the new epoch was taken or never acknowledged.

use super::paged::reaches_below;
use super::{LtxKey, Marker, linked_chain, ltx_prefix, parse_dec, parse_hex};

/// Where a cell's snapshot hint lives.
pub fn snapshot_hint_key(scope: &str) -> String {
  format!("cells/{scope}/snapshot-hint")
}

/// The next listing to perform, or the keys gathered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListStep {
  /// Read the object at `key` (the snapshot hint); its text, or `None` when
  /// absent, goes to `on_hint`.
  Hint { key: String },
  /// The names of the "directories" directly under `prefix` (a delimiter
  /// listing: `e7` for `<prefix>e7/…`), in any order.
  Dirs { prefix: String },
  /// The keys under `prefix`; with `after`, only those greater than it.
  Keys {
    prefix: String,
    after: Option<String>,
  },
  /// What the restore decides from: the objects and the markers.
  Done(Vec<LtxKey>, Vec<Marker>),
}

/// The sans-IO listing: [`ListStep`]s out, answers in (`on_dirs`,
/// `on_keys`).
pub struct RestoreListing {
  scope: String,
  /// Epochs still to look at, newest last (popped).
  epochs: Vec<u64>,
  /// The epoch being listed and its levels still to list (popped).
  current: Option<(u64, Vec<u32>)>,
  /// Whether the epoch being listed has markers still to list.
  paged: bool,
  keys: Vec<LtxKey>,
  markers: Vec<Marker>,
  hint: Option<LtxKey>,
}

impl RestoreListing {
  pub fn new(scope: &str) -> (Self, ListStep) {
    let me = RestoreListing {
      scope: scope.to_string(),
      epochs: Vec::new(),
      current: None,
      paged: false,
      keys: Vec::new(),
      markers: Vec::new(),
      hint: None,
    };
    let step = ListStep::Hint {
      key: snapshot_hint_key(scope),
    };
    (me, step)
  }

  /// The answer to [`ListStep::Hint`] (a failed read is `None`: the hint
  /// is only a shortcut).
  pub fn on_hint(&mut self, text: Option<&str>) -> ListStep {
    self.hint = text
      .and_then(|t| LtxKey::parse(&self.scope, t.trim()))
      .filter(|k| k.level > 0 && k.min_txid == 1);
    ListStep::Dirs {
      prefix: ltx_prefix(&self.scope),
    }
  }

  /// The answer to a [`ListStep::Dirs`].
  pub fn on_dirs(&mut self, names: &[String]) -> ListStep {
    match self.current.as_mut() {
      None => {
        self.epochs = names
          .iter()
          .filter_map(|n| parse_dec(n.strip_prefix('e')?))
          .collect();
        self.epochs.sort_unstable();
        self.epochs.dedup();
        self.next_epoch()
      }
      Some((_, levels)) => {
        // Popped highest first: level 0 last, after the levels that may
        // hold chain starts.
        self.paged = names.iter().any(|n| n == "paged");
        *levels = names
          .iter()
          .filter_map(|n| parse_hex(n, 4))
          .map(|l| l as u32)
          .collect();
        levels.sort_unstable();
        levels.dedup();
        self.next_level()
      }
    }
  }

  /// The answer to a [`ListStep::Keys`]: the keys as listed (relative to
  /// the bucket; foreign names are ignored).
  pub fn on_keys(&mut self, listed: &[String]) -> ListStep {
    self
      .keys
      .extend(listed.iter().filter_map(|k| LtxKey::parse(&self.scope, k)));
    (self.markers).extend(listed.iter().filter_map(|k| Marker::parse(&self.scope, k)));
    self.next_level()
  }

  fn next_epoch(&mut self) -> ListStep {
    match self.epochs.pop() {
      None => self.done(),
      Some(e) => {
        self.current = Some((e, Vec::new()));
        ListStep::Dirs {
          prefix: format!("{}e{e}/", ltx_prefix(&self.scope)),
        }
      }
    }
  }

  fn next_level(&mut self) -> ListStep {
    let (epoch, levels) = self.current.as_mut().expect("listing an epoch");
    let epoch = *epoch;
    // An epoch a marker links to is read only up to the cut.
    let cut = (self.markers.iter())
      .filter(|m| m.from == epoch)
      .map(|m| m.cut)
      .min()
      .unwrap_or(u64::MAX);
    let starts = || {
      (self.keys.iter())
        .filter(|k| k.epoch == epoch && k.min_txid == 1 && k.max_txid <= cut)
        .map(|k| k.max_txid)
        .max()
    };
    match levels.pop() {
      Some(level) => {
        let prefix = format!("{}e{epoch}/{level:04x}/", ltx_prefix(&self.scope));
        // Level 0 comes last: start after what the furthest chain start
        // found above it covers. The hinted level starts at the hinted
        // snapshot (those before it reach less far).
        let after = if level == 0 {
          starts().map(|max| format!("{prefix}{max:016x}-{:016x}.ltx", u64::MAX))
        } else {
          (self.hint)
            .filter(|h| h.epoch == epoch && h.level == level && h.max_txid > 1)
            .map(|h| format!("{prefix}{:016x}-{:016x}.ltx", 1, h.max_txid - 1))
        };
        ListStep::Keys { prefix, after }
      }
      // No snapshot of its own: its marker, if it paged in.
      None if self.paged && starts().is_none() => {
        self.paged = false;
        ListStep::Keys {
          prefix: format!("{}e{epoch}/paged/", ltx_prefix(&self.scope)),
          after: None,
        }
      }
      None => {
        // Done once the newest chain is settled: no newer paged epoch
        // could still link, through its markers, to an epoch not listed.
        let (keys, markers) = (&self.keys, &self.markers);
        let settled = linked_chain(keys, markers).is_some_and(|c| {
          (markers.iter())
            .filter(|m| m.epoch > c.epoch)
            .all(|m| !reaches_below(keys, markers, m.epoch, u64::MAX, epoch, 0))
        });
        if settled {
          self.done()
        } else {
          self.next_epoch()
        }
      }
    }
  }

  fn done(&mut self) -> ListStep {
    ListStep::Done(
      std::mem::take(&mut self.keys),
      std::mem::take(&mut self.markers),
    )
  }
}

/// Runs the listing against a bucket holding exactly `keys` (seen at one
/// instant) and the snapshot hint `hint`: what a restore would gather, and
/// how many keys its listings returned. The simulator's restores go
/// through it.
pub fn gather(scope: &str, keys: &[LtxKey], hint: Option<LtxKey>) -> (Vec<LtxKey>, usize) {
  let (keys, _, listed) = gather_linked(scope, keys, &[], hint);
  (keys, listed)
}

/// [`gather`] over a bucket that also holds `markers`.
pub fn gather_linked(
  scope: &str,
  keys: &[LtxKey],
  markers: &[Marker],
  hint: Option<LtxKey>,
) -> (Vec<LtxKey>, Vec<Marker>, usize) {
  let bucket: std::collections::BTreeSet<String> = (keys.iter())
    .map(|k| k.object_key(scope))
    .chain(markers.iter().map(|m| m.object_key(scope)))
    .collect();
  let (mut l, mut step) = RestoreListing::new(scope);
  let mut listed = 0;
  loop {
    step = match step {
      ListStep::Hint { .. } => l.on_hint(hint.map(|h| h.object_key(scope)).as_deref()),
      ListStep::Dirs { prefix } => {
        let mut names: Vec<String> = (bucket.iter())
          .filter_map(|k| Some(k.strip_prefix(&prefix)?.split_once('/')?.0.to_string()))
          .collect();
        names.dedup();
        l.on_dirs(&names)
      }
      ListStep::Keys { prefix, after } => {
        let got: Vec<String> = (bucket.iter())
          .filter(|k| k.starts_with(&prefix) && after.as_ref().is_none_or(|a| *k > a))
          .cloned()
          .collect();
        listed += got.len();
        l.on_keys(&got)
      }
      ListStep::Done(k, m) => return (k, m, listed),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::super::{newest_epoch, restore_chain};
  use super::*;
  use crate::compact::SNAPSHOT_LEVEL;

  fn snap(epoch: u64, max: u64) -> LtxKey {
    LtxKey {
      epoch,
      level: SNAPSHOT_LEVEL,
      min_txid: 1,
      max_txid: max,
    }
  }

  #[test]
  fn a_long_epoch_lists_its_snapshots_and_what_follows_the_newest() {
    let mut keys: Vec<LtxKey> = (1..=10_000).map(|t| LtxKey::l0(3, t)).collect();
    keys.extend([snap(3, 4_000), snap(3, 9_990)]);
    keys.extend((1..=50).map(|t| LtxKey::l0(2, t)));
    // A stale owner's tail above a gap in a newer epoch.
    keys.extend([LtxKey::l0(4, 7)]);
    let (got, listed) = gather("C:a", &keys, None);
    assert_eq!(listed, 2 + 10 + 1);
    assert_eq!(restore_chain(&got), restore_chain(&keys));
    assert_eq!(restore_chain(&got).unwrap().keys.len(), 11);
    assert_eq!(newest_epoch(&got), Some(4));
    // With the hint, the older snapshot is not listed.
    let (hinted, listed) = gather("C:a", &keys, Some(snap(3, 9_990)));
    assert_eq!(listed, 1 + 10 + 1);
    assert_eq!(restore_chain(&hinted), restore_chain(&keys));
    // A stale hint lists from the older snapshot on; a foreign one is
    // ignored.
    assert_eq!(gather("C:a", &keys, Some(snap(3, 4_000))).1, 2 + 10 + 1);
    assert_eq!(gather("C:a", &keys, Some(snap(1, 7))).1, 2 + 10 + 1);
  }

  /// Any bucket: the gathered keys decide as the whole listing does.
  #[test]
  fn gathered_keys_decide_as_the_whole_listing() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      seed % n
    };
    for _ in 0..3_000 {
      let mut keys = Vec::new();
      for epoch in 1..=next(4) + 1 {
        let from = if next(4) == 0 { 2 } else { 1 };
        let upto = next(40);
        for t in from..=upto {
          if next(12) != 0 {
            keys.push(LtxKey::l0(epoch, t));
          }
        }
        for _ in 0..next(3) {
          keys.push(snap(epoch, next(45) + 1));
        }
      }
      // Any snapshot present may be the hint (the newest, or a stale one),
      // or none.
      let snaps: Vec<LtxKey> = keys.iter().filter(|k| k.level > 0).copied().collect();
      let hint =
        (!snaps.is_empty() && next(4) != 0).then(|| snaps[next(snaps.len() as u64) as usize]);
      let (got, _) = gather("C:a", &keys, hint);
      assert_eq!(
        restore_chain(&got),
        restore_chain(&keys),
        "{keys:?} {hint:?}"
      );
      assert_eq!(newest_epoch(&got), newest_epoch(&keys), "{keys:?}");
    }
  }

  /// Any bucket with paged epochs: the gathered keys and markers decide as
  /// the whole listing does, and a settled link is listed whole.
  #[test]
  fn gathered_markers_decide_as_the_whole_listing() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      seed % n
    };
    let mut linked = 0;
    for _ in 0..5_000 {
      let (mut keys, mut markers) = (Vec::new(), Vec::new());
      for epoch in 1..=next(5) + 1 {
        let paged = epoch > 1 && next(2) == 0;
        if paged {
          markers.push(Marker {
            epoch,
            from: next(epoch - 1) + 1,
            cut: next(12) + 1,
          });
        }
        let from = if paged || next(5) == 0 { 2 } else { 1 };
        for t in from..=next(25) {
          if next(40) != 0 {
            keys.push(LtxKey::l0(epoch, t));
          }
        }
        for _ in 0..next(3) {
          keys.push(snap(epoch, next(28) + 1));
        }
      }
      let (got, got_markers, _) = gather_linked("C:a", &keys, &markers, None);
      let want = linked_chain(&keys, &markers);
      assert_eq!(
        linked_chain(&got, &got_markers),
        want,
        "{keys:?} {markers:?}"
      );
      linked += usize::from(want.is_some_and(|c| c.keys.iter().any(|k| k.epoch != c.epoch)));
    }
    assert!(linked > 250, "only {linked} linked chains");
  }

  #[test]
  fn foreign_names_are_skipped() {
    let mut l = RestoreListing::new("C:a").0;
    l.on_hint(Some(
      "cells/C:b/ltx/e1/0009/0000000000000001-0000000000000009.ltx",
    ));
    assert_eq!(l.hint, None, "another cell's snapshot");
    let step = l.on_dirs(&["e1".into(), "e07".into(), "seal.json".into()]);
    assert_eq!(
      step,
      ListStep::Dirs {
        prefix: "cells/C:a/ltx/e1/".into()
      }
    );
    assert_eq!(
      l.on_dirs(&["0000".into(), "zz".into()]),
      ListStep::Keys {
        prefix: "cells/C:a/ltx/e1/0000/".into(),
        after: None
      }
    );
    assert_eq!(
      l.on_keys(&["cells/C:a/ltx/e1/0000/x".into()]),
      ListStep::Done(vec![], vec![])
    );
  }
}

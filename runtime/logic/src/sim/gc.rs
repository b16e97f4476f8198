//! The epoch GC half of a simulated node's I/O shell: list, read the
//! record, delete, each step deciding through [`crate::gc`].

use super::node::Slot;
use super::store::{Answer, Op};
use super::{Flaw, World};
use crate::restore::LtxKey;

/// A pass in flight.
#[derive(Clone, Debug)]
pub(super) enum Pass {
  Listing,
  /// The listing allows deleting these epochs; the record is being read.
  Reading(Vec<u64>),
  Deleting(usize),
}

impl World {
  /// Starts a pass over cell `c`, which node `n` owns, unless one is in
  /// flight or this seed runs no GC.
  pub(super) fn start_gc(&mut self, n: usize, c: usize) {
    if !self.gc {
      return;
    }
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.gc.is_some() {
      return;
    }
    r.gc = Some(Pass::Listing);
    let run = r.run;
    self.send(n, super::node::Purpose::Gc { cell: c, run }, Op::ListLtx(c));
  }

  pub(super) fn on_gc_answer(&mut self, n: usize, c: usize, run: u64, answer: Answer) {
    let flaw = self.flaw;
    let name = self.nodes[n].name.clone();
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.run != run {
      return;
    }
    let purpose = super::node::Purpose::Gc { cell: c, run };
    let (next, op) = match (r.gc.take(), answer) {
      (Some(Pass::Listing), Answer::List(Ok(l))) => {
        let keys: Vec<LtxKey> = l.iter().map(|(k, _)| *k).collect();
        if flaw == Some(Flaw::GcWithoutGuards) {
          let mut below: Vec<u64> = (keys.iter().map(|k| k.epoch))
            .filter(|e| *e < r.epoch)
            .collect();
          below.sort_unstable();
          below.dedup();
          if below.is_empty() {
            return;
          }
          (Pass::Deleting(below.len()), Op::DeleteEpochs(c, below))
        } else {
          let markers = self.store.markers.get(&c).cloned().unwrap_or_default();
          let Ok(cands) = crate::gc::candidates(&keys, &markers, r.epoch) else {
            return;
          };
          // No retention: every candidate has expired.
          let times = vec![0; cands.older.len()];
          let epochs = crate::gc::expired(&cands, &times, u64::MAX, 0);
          (Pass::Reading(epochs), Op::GetOwn(c))
        }
      }
      (Some(Pass::Reading(epochs)), Answer::Own(Ok(rec))) => {
        let rec = rec.map(|(r, _)| r);
        if !crate::gc::still_owner(rec.as_ref(), &name, r.epoch) {
          return;
        }
        (Pass::Deleting(epochs.len()), Op::DeleteEpochs(c, epochs))
      }
      (Some(Pass::Deleting(k)), Answer::Write(crate::WriteAnswer::Applied(_))) => {
        self.stats.gc_epochs += k as u64;
        return;
      }
      // A failed step ends the pass; a later one starts over.
      _ => return,
    };
    r.gc = Some(next);
    self.send(n, purpose, op);
  }
}

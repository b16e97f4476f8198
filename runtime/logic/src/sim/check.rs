//! The invariants, checked as the simulation runs and after its final
//! takeover. Each check names what it protects; the broken variants in
//! [`super::Flaw`] exist to prove that each one can fail.

use std::collections::BTreeMap;
use std::fmt;

use super::T0;
use super::store::{OwnChange, Writer};

/// At most this many violations are kept per run; the first one matters.
const MAX_KEPT: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
  /// (a) An epoch is won by one writer (a node incarnation) and only that
  /// writer uploads under `e<epoch>`.
  OneWriterPerEpoch,
  /// (b) Every acknowledged write is in every later owner's restored state
  /// and in the final takeover's restore of the newest epoch chain.
  AckedWriteLost,
  /// (c) No acknowledgement once the node's lease could have expired by
  /// true time: `true_now + skew < expires_ms` at every ack.
  AckAfterLeaseExpiry,
  /// (d) A takeover never finds the previous owner still able to
  /// acknowledge (its fence deadline not yet passed by its clock).
  TakeoverFromLiveOwner,
  /// (e) The epoch of `own.json` never goes down.
  EpochWentBackwards,
  /// (f) A restored state holds no write twice and none nobody committed.
  CorruptRestore,
  /// (g) Once faults stop and every lease expired, a fresh node can take
  /// every cell.
  FinalTakeoverFailed,
  /// (h) Once faults and clients stop, every cell with a due wake hint
  /// comes to be held by a serving node (so its alarm fires), through the
  /// wake index alone.
  DueAlarmNotWoken,
}

impl Check {
  pub fn name(&self) -> &'static str {
    match self {
      Check::OneWriterPerEpoch => "one-writer-per-epoch",
      Check::AckedWriteLost => "acked-write-lost",
      Check::AckAfterLeaseExpiry => "ack-after-lease-expiry",
      Check::TakeoverFromLiveOwner => "takeover-from-live-owner",
      Check::EpochWentBackwards => "epoch-went-backwards",
      Check::CorruptRestore => "corrupt-restore",
      Check::FinalTakeoverFailed => "final-takeover-failed",
      Check::DueAlarmNotWoken => "due-alarm-not-woken",
    }
  }
}

impl fmt::Display for Check {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(self.name())
  }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
  pub check: Check,
  /// True time since the start of the run.
  pub at_ms: u64,
  pub detail: String,
}

impl fmt::Display for Violation {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{} at {} ms: {}", self.check, self.at_ms, self.detail)
  }
}

pub(super) struct Checker {
  skew: u64,
  /// Writer index `nodes` is the final auditor.
  nodes: usize,
  /// (cell, epoch) -> the writer that won it, and when.
  epochs: BTreeMap<(usize, u64), (Writer, u64)>,
  /// Per cell: acknowledged writes and when.
  acked: Vec<Vec<(u64, u64)>>,
  committed: Vec<bool>,
  /// Off for the final takeover, whose clock is "after everything".
  pub lease_checks: bool,
  pub violations: Vec<Violation>,
}

impl Checker {
  pub fn new(cells: usize, nodes: usize, skew: u64) -> Self {
    Checker {
      skew,
      nodes,
      epochs: BTreeMap::new(),
      acked: vec![Vec::new(); cells],
      committed: Vec::new(),
      lease_checks: true,
      violations: Vec::new(),
    }
  }

  pub fn violation(&mut self, check: Check, now: u64, detail: String) {
    if self.violations.len() < MAX_KEPT {
      self.violations.push(Violation {
        check,
        at_ms: now - T0,
        detail,
      });
    }
  }

  /// (a) and (e) on every applied write of `own.json`.
  pub fn on_own_change(&mut self, now: u64, ch: &OwnChange, from: Writer) {
    let c = ch.cell;
    if let Some(b) = &ch.before
      && ch.after.epoch < b.epoch
    {
      let msg = format!(
        "cell {c}: own.json went from epoch {} to {}",
        b.epoch, ch.after.epoch
      );
      self.violation(Check::EpochWentBackwards, now, msg);
    }
    if ch.after.is_released() {
      return;
    }
    match self.epochs.get(&(c, ch.after.epoch)) {
      Some(&(w, _)) if w != from => {
        let msg = format!(
          "cell {c}: epoch {} won by {} and again by {}",
          ch.after.epoch,
          self.who(w),
          self.who(from)
        );
        self.violation(Check::OneWriterPerEpoch, now, msg);
      }
      Some(_) => {}
      None => {
        self.epochs.insert((c, ch.after.epoch), (from, now));
      }
    }
  }

  /// (a) at every LTX upload, when it is sent.
  pub fn on_upload(&mut self, now: u64, c: usize, epoch: u64, from: Writer) {
    match self.epochs.get(&(c, epoch)) {
      Some(&(w, _)) if w == from => {}
      won => {
        let by = won.map_or("nobody".to_string(), |&(w, _)| self.who(w));
        let msg = format!(
          "cell {c}: {} uploads under e{epoch}, won by {by}",
          self.who(from)
        );
        self.violation(Check::OneWriterPerEpoch, now, msg);
      }
    }
  }

  /// `n1.0` (node 1, first process), or the final auditor.
  fn who(&self, (n, inc): Writer) -> String {
    if n == self.nodes {
      "the final takeover".to_string()
    } else {
      format!("n{n}.{inc}")
    }
  }

  pub fn on_commit(&mut self, w: u64) {
    let i = w as usize;
    if self.committed.len() <= i {
      self.committed.resize(i + 1, false);
    }
    self.committed[i] = true;
  }

  /// (c) at every acknowledgement; records it for (b).
  pub fn on_ack(
    &mut self,
    now: u64,
    c: usize,
    w: u64,
    n: usize,
    trusted: bool,
    expires: Option<u64>,
  ) {
    self.acked[c].push((w, now));
    if !self.lease_checks || !trusted {
      return;
    }
    // Some healthy clock may read up to `skew` ahead of true time.
    let limit = expires.unwrap_or(0);
    if now + self.skew >= limit {
      let msg = format!(
        "n{n} acknowledged w{w} at true {} but its lease expires at {} (skew {})",
        now - T0,
        limit as i64 - T0 as i64,
        self.skew
      );
      self.violation(Check::AckAfterLeaseExpiry, now, msg);
    }
  }

  /// (b) and (f) when a node takes a cell: every write acknowledged before
  /// the epoch was won must be in what it restored.
  pub fn on_activate(&mut self, now: u64, c: usize, epoch: u64, db: &[u64]) {
    let won_at = self.epochs.get(&(c, epoch)).map_or(now, |&(_, at)| at);
    let sorted = self.restore_ok(now, c, db);
    let missing: Vec<u64> = self.acked[c]
      .iter()
      .filter(|&&(w, at)| at < won_at && sorted.binary_search(&w).is_err())
      .map(|&(w, _)| w)
      .collect();
    if !missing.is_empty() {
      let msg = format!("cell {c}: epoch {epoch} restored without acknowledged writes {missing:?}");
      self.violation(Check::AckedWriteLost, now, msg);
    }
  }

  /// (b) and (f) on the final takeover's restore.
  pub fn on_final_restore(&mut self, now: u64, c: usize, db: &[u64]) {
    let sorted = self.restore_ok(now, c, db);
    let missing: Vec<u64> = self.acked[c]
      .iter()
      .filter(|&&(w, _)| sorted.binary_search(&w).is_err())
      .map(|&(w, _)| w)
      .collect();
    if !missing.is_empty() {
      let msg = format!("cell {c}: the final restore lacks acknowledged writes {missing:?}");
      self.violation(Check::AckedWriteLost, now, msg);
    }
  }

  /// (f); returns the state sorted, for lookups.
  fn restore_ok(&mut self, now: u64, c: usize, db: &[u64]) -> Vec<u64> {
    let mut sorted = db.to_vec();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|p| p[0] == p[1]) {
      let msg = format!("cell {c}: write w{} restored twice", w[0]);
      self.violation(Check::CorruptRestore, now, msg);
    }
    if let Some(w) = sorted
      .iter()
      .find(|&&w| !self.committed.get(w as usize).copied().unwrap_or(false))
    {
      let msg = format!("cell {c}: restored w{w}, which no node committed");
      self.violation(Check::CorruptRestore, now, msg);
    }
    sorted
  }
}

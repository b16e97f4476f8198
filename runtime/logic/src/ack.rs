//! The acknowledgement rule (RPO 0 on a bucket proof).
//!
//! A write committed locally at some TXID may be acknowledged only when:
//!
//! 1. the LTX uploads of every TXID up to it, under `e<epoch>/`, completed;
//! 2. **then** a read of `own.json`, *started after* those uploads finished,
//!    names this node at this epoch; and
//! 3. the node's fence deadline (`expires_ms - margin`) has not passed by its
//!    local clock.
//!
//! Why the read comes after the upload ("check twice"): a node can confirm
//! its epoch, begin an upload, stall while another node takes the cell and
//! restores, and finish the upload into a prefix nobody reads any more.
//! Reading the record after the upload closes that window without trusting a
//! clock: if the record still names us, any later owner's compare-and-swap
//! comes after our upload, so its restore lists our upload. If it names
//! anyone else, the cell is lost and nothing more is acknowledged.
//!
//! [`AckGate`] sequences this for one cell's epoch: uploads pipelined (up to
//! [`UPLOAD_WINDOW`] in flight) and settled in TXID order, one ownership read
//! at a time that covers every upload settled before it started,
//! acknowledgements in TXID order. Once one upload failed for good, nothing
//! above it is acknowledged in that epoch ([`RoundLatch`]): a restore reads
//! the chain only up to its first gap.

use crate::lease::can_acknowledge;
use crate::own::OwnRecord;
use crate::{ReadResult, broken_object_message};

/// Wait before re-reading `own.json` after a failed read.
pub const OWN_READ_RETRY_MS: u64 = 100;

/// What the ownership read allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckDecision {
  /// Acknowledge what the read covers.
  Ack,
  /// The record moved (or vanished): the cell is lost to this node.
  NotOwner,
  /// The node's lease could have lapsed: self-fencing.
  LeaseLapsed,
}

/// The rule for one ownership read of `own.json` that started after the
/// uploads it covers completed.
pub fn ack_decision(
  record: Option<&OwnRecord>,
  node: &str,
  epoch: u64,
  now_ms: u64,
  deadline_ms: u64,
) -> AckDecision {
  if !record.is_some_and(|r| r.names(node, epoch)) {
    AckDecision::NotOwner
  } else if !can_acknowledge(now_ms, deadline_ms) {
    AckDecision::LeaseLapsed
  } else {
    AckDecision::Ack
  }
}

/// Why a cell's gate closed for good; the cell must be reset and every
/// unacknowledged caller told so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Broken {
  /// `own.json` no longer names this node at this epoch (as read).
  OwnershipLost { record: Option<OwnRecord> },
  /// The node's lease could have lapsed.
  LeaseLapsed,
  /// An upload kept failing.
  UploadFailed { txid: u64 },
}

impl Broken {
  /// The `BrokenObjectError` message for callers of the cell.
  pub fn message(&self, cell: &str) -> String {
    match self {
      Broken::OwnershipLost { record: Some(r) } => broken_object_message(&format!(
        "{cell} is now owned by {:?} at epoch {}",
        r.node, r.epoch
      )),
      Broken::OwnershipLost { record: None } => {
        broken_object_message(&format!("the ownership record of {cell} is gone"))
      }
      Broken::LeaseLapsed => broken_object_message(&crate::lease_lapsed_message(cell)),
      Broken::UploadFailed { txid } => {
        broken_object_message(&format!("{cell}: the upload of transaction {txid} failed"))
      }
    }
  }
}

/// How many uploads of one cell may be in flight: TXID `t` starts once
/// every TXID up to `t - UPLOAD_WINDOW` settled. Matches the runtime's two
/// durability rounds in flight, so answers come back out of order.
pub const UPLOAD_WINDOW: u64 = 2;

/// What the caller must do after feeding the gate. Several fields can be set
/// at once; perform them all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateActions {
  /// Upload the LTX of each of these TXIDs (PUT under `e<epoch>/`).
  pub upload: Vec<u64>,
  /// Read `own.json` after this many milliseconds (0: now); answer with
  /// [`AckGate::on_own_read`].
  pub read_own: Option<u64>,
  /// Acknowledge every write committed at or below this TXID.
  pub ack_through: Option<u64>,
  /// The gate closed: fail every unacknowledged write, reset the cell.
  pub broken: Option<Broken>,
}

/// The acknowledgement gate of one cell at one epoch.
///
/// Uploads are pipelined ([`UPLOAD_WINDOW`]) and may answer in any order,
/// but they *settle* in TXID order, each as one round of a [`RoundLatch`]:
/// the first upload that failed for good closes the gate, and the uploads
/// above it are refused by the same rule the runtime's rounds follow, even
/// those that landed.
#[derive(Clone, Debug)]
pub struct AckGate {
  node: String,
  epoch: u64,
  committed: u64,
  /// Uploads were started for every TXID up to this one.
  started: u64,
  /// Every TXID up to this one settled (its answer taken in order).
  settled: u64,
  /// Answers above `settled`, waiting for those below: TXID -> applied.
  answers: std::collections::BTreeMap<u64, bool>,
  /// Every TXID up to this one is in the bucket and no round below failed:
  /// the most an ownership read can cover.
  uploaded: u64,
  /// Keyed by the epoch: this gate is one incarnation of the cell.
  latch: RoundLatch<u64>,
  /// The ownership read in flight (or waiting to start) covers uploads up
  /// to this TXID.
  reading: Option<u64>,
  acked: u64,
  broken: Option<Broken>,
}

impl AckGate {
  pub fn new(node: &str, epoch: u64) -> Self {
    AckGate {
      node: node.to_string(),
      epoch,
      committed: 0,
      started: 0,
      settled: 0,
      answers: Default::default(),
      uploaded: 0,
      latch: RoundLatch::default(),
      reading: None,
      acked: 0,
      broken: None,
    }
  }

  pub fn epoch(&self) -> u64 {
    self.epoch
  }

  pub fn committed(&self) -> u64 {
    self.committed
  }

  pub fn acked(&self) -> u64 {
    self.acked
  }

  /// Every TXID up to this one is in the bucket with no failed one below.
  pub fn uploaded(&self) -> u64 {
    self.uploaded
  }

  pub fn broken(&self) -> Option<&Broken> {
    self.broken.as_ref()
  }

  /// A local commit at `txid` (the next one). Its upload starts at once if
  /// the window allows, else when the uploads below it settle.
  pub fn on_commit(&mut self, txid: u64) -> GateActions {
    assert_eq!(txid, self.committed + 1, "commits are numbered in order");
    self.committed = txid;
    let mut a = GateActions::default();
    if self.broken.is_none() {
      self.start_uploads(&mut a);
    }
    a
  }

  /// The upload of `txid` applied. Once the uploads below it settled too,
  /// starts the next uploads, and an ownership read covering them unless
  /// one is already in flight (that one started before these uploads
  /// finished, so it cannot cover them).
  pub fn on_uploaded(&mut self, txid: u64) -> GateActions {
    self.on_upload_answer(txid, true)
  }

  /// The upload of `txid` failed for good (after the caller's own retries
  /// of the idempotent PUT). Closes the gate once the uploads below it
  /// settled; nothing above it is acknowledged in this epoch.
  pub fn on_upload_failed(&mut self, txid: u64) -> GateActions {
    self.on_upload_answer(txid, false)
  }

  fn on_upload_answer(&mut self, txid: u64, applied: bool) -> GateActions {
    assert!(
      txid > self.settled && txid <= self.started && !self.answers.contains_key(&txid),
      "answer to an upload in flight"
    );
    self.answers.insert(txid, applied);
    let mut a = GateActions::default();
    // Rounds settle in order: an answer above a gap waits for the gap.
    while let Some(applied) = self.answers.remove(&(self.settled + 1)) {
      self.settled += 1;
      let failed: &[u64] = if applied { &[] } else { &[self.epoch] };
      if self.latch.settle(&[self.epoch], failed).is_empty() {
        self.uploaded = self.settled;
      } else if self.broken.is_none() {
        a = self.close(Broken::UploadFailed { txid: self.settled });
      }
    }
    if self.broken.is_some() {
      return a;
    }
    self.start_uploads(&mut a);
    if self.reading.is_none() && self.uploaded > self.acked {
      self.reading = Some(self.uploaded);
      a.read_own = Some(0);
    }
    a
  }

  fn start_uploads(&mut self, a: &mut GateActions) {
    while self.started < self.committed && self.started < self.settled + UPLOAD_WINDOW {
      self.started += 1;
      a.upload.push(self.started);
    }
  }

  /// The answer to the ownership read, with the local clock *now* and the
  /// node's fence deadline.
  pub fn on_own_read(
    &mut self,
    read: ReadResult<OwnRecord>,
    now_ms: u64,
    deadline_ms: u64,
  ) -> GateActions {
    let mut a = GateActions::default();
    if self.broken.is_some() {
      return a;
    }
    let covered = self
      .reading
      .take()
      .expect("an ownership read was requested");
    let record = match read {
      Ok(r) => r.map(|(r, _)| r),
      Err(_) => {
        if !can_acknowledge(now_ms, deadline_ms) {
          return self.close(Broken::LeaseLapsed);
        }
        // Proves nothing; a later read covers at least as much.
        self.reading = Some(self.uploaded);
        a.read_own = Some(OWN_READ_RETRY_MS);
        return a;
      }
    };
    match ack_decision(record.as_ref(), &self.node, self.epoch, now_ms, deadline_ms) {
      AckDecision::Ack => {
        if covered > self.acked {
          self.acked = covered;
          a.ack_through = Some(covered);
        }
        if self.uploaded > self.acked {
          self.reading = Some(self.uploaded);
          a.read_own = Some(0);
        }
        a
      }
      AckDecision::NotOwner => self.close(Broken::OwnershipLost { record }),
      AckDecision::LeaseLapsed => self.close(Broken::LeaseLapsed),
    }
  }

  /// Closes the gate from outside (the node fenced, the cell is released).
  pub fn close(&mut self, why: Broken) -> GateActions {
    if self.broken.is_some() {
      return GateActions::default();
    }
    self.broken = Some(why.clone());
    GateActions {
      broken: Some(why),
      ..GateActions::default()
    }
  }
}

/// The gap rule for pipelined durability rounds: a cell's writes are made
/// durable in rounds that may overlap (the next round's uploads start before
/// the previous one answered), but rounds settle strictly in order. Once one
/// round failed for a cell, no later round acknowledges that cell's writes in
/// the same epoch, even if its own upload and ownership read succeeded:
/// a restore reads the chain only up to its first gap, so anything above the
/// gap would be lost (invariant 2).
///
/// `K` names one incarnation of a cell (one epoch): a cell that is reset and
/// taken again comes back under a new key, or after [`RoundLatch::forget`].
/// [`AckGate`] settles each of its uploads as a round of one latch, so the
/// simulator drives this very rule.
#[derive(Clone, Debug)]
pub struct RoundLatch<K> {
  broken: std::collections::HashSet<K>,
}

impl<K> Default for RoundLatch<K> {
  fn default() -> Self {
    RoundLatch {
      broken: std::collections::HashSet::new(),
    }
  }
}

impl<K: std::hash::Hash + Eq + Clone> RoundLatch<K> {
  /// A round settled (call in round order). `cells` are the cells whose
  /// writes the round carries, `failed` those whose durability failed in it.
  /// Returns the cells of the round that must not acknowledge: the failed
  /// ones, and those already broken by an earlier round.
  pub fn settle(&mut self, cells: &[K], failed: &[K]) -> Vec<K> {
    for k in failed {
      self.broken.insert(k.clone());
    }
    let mut out: Vec<K> = Vec::new();
    for k in cells.iter().chain(failed) {
      if self.broken.contains(k) && !out.contains(k) {
        out.push(k.clone());
      }
    }
    out
  }

  /// Whether a round failed for this cell already.
  pub fn is_broken(&self, k: &K) -> bool {
    self.broken.contains(k)
  }

  /// The incarnation is gone (reset, closed): its key may be reused.
  pub fn forget(&mut self, k: &K) {
    self.broken.remove(k);
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::Token;

  fn mine(epoch: u64) -> ReadResult<OwnRecord> {
    Ok(Some((OwnRecord::owned("a", epoch), Token::new("v"))))
  }

  #[test]
  fn decision() {
    let r = OwnRecord::owned("a", 4);
    assert_eq!(ack_decision(Some(&r), "a", 4, 10, 11), AckDecision::Ack);
    assert_eq!(
      ack_decision(Some(&r), "a", 4, 11, 11),
      AckDecision::LeaseLapsed
    );
    assert_eq!(
      ack_decision(Some(&r), "a", 3, 10, 11),
      AckDecision::NotOwner
    );
    assert_eq!(
      ack_decision(Some(&r), "b", 4, 10, 11),
      AckDecision::NotOwner
    );
    assert_eq!(ack_decision(None, "a", 4, 10, 11), AckDecision::NotOwner);
  }

  fn uploads(t: &[u64]) -> GateActions {
    GateActions {
      upload: t.to_vec(),
      ..Default::default()
    }
  }

  #[test]
  fn upload_then_read_then_ack() {
    let mut g = AckGate::new("a", 4);
    assert_eq!(g.on_commit(1), uploads(&[1]));
    // The window holds two uploads; the third commit waits for the first.
    assert_eq!(g.on_commit(2), uploads(&[2]));
    assert_eq!(g.on_commit(3), GateActions::default());
    let a = g.on_uploaded(1);
    assert_eq!(
      a,
      GateActions {
        upload: vec![3],
        read_own: Some(0),
        ..Default::default()
      }
    );
    // Upload 2 finishes while the read for 1 is in flight: it is not covered.
    assert_eq!(g.on_uploaded(2), GateActions::default());
    let a = g.on_own_read(mine(4), 100, 200);
    assert_eq!(
      a,
      GateActions {
        ack_through: Some(1),
        read_own: Some(0),
        ..Default::default()
      }
    );
    let a = g.on_own_read(mine(4), 101, 200);
    assert_eq!(
      a,
      GateActions {
        ack_through: Some(2),
        ..Default::default()
      }
    );
    assert_eq!(g.acked(), 2);
    // 3 started when 1 settled; a read of its own covers it.
    assert_eq!(g.on_uploaded(3).read_own, Some(0));
    assert_eq!(g.on_own_read(mine(4), 102, 200).ack_through, Some(3));
  }

  #[test]
  fn pipelined_answers_settle_in_txid_order() {
    let mut g = AckGate::new("a", 4);
    g.on_commit(1);
    g.on_commit(2);
    g.on_commit(3);
    g.on_commit(4);
    // 2 lands before 1: nothing is covered yet (1 could still fail), and
    // the window does not move.
    assert_eq!(g.on_uploaded(2), GateActions::default());
    // 1 lands: both settle, the window moves by two, one read covers both.
    let a = g.on_uploaded(1);
    assert_eq!(
      a,
      GateActions {
        upload: vec![3, 4],
        read_own: Some(0),
        ..Default::default()
      }
    );
    assert_eq!(g.on_own_read(mine(4), 100, 200).ack_through, Some(2));
    // 4 lands, then 3 fails for good: 4 is in the bucket, above a gap.
    assert_eq!(g.on_uploaded(4), GateActions::default());
    let a = g.on_upload_failed(3);
    assert_eq!(a.broken, Some(Broken::UploadFailed { txid: 3 }));
    assert_eq!((a.ack_through, a.read_own), (None, None));
    assert_eq!(g.acked(), 2);
  }

  #[test]
  fn a_landed_upload_above_a_failed_one_is_not_acknowledged() {
    // The fault injector's case: 61 fails, 62 fails, 63 lands.
    let mut g = AckGate::new("a", 9);
    for t in 1..=60 {
      g.on_commit(t);
      g.on_uploaded(t);
      g.on_own_read(mine(9), 100, 200);
    }
    assert_eq!(g.acked(), 60);
    assert_eq!(g.on_commit(61), uploads(&[61]));
    assert_eq!(g.on_commit(62), uploads(&[62]));
    g.on_commit(63);
    let a = g.on_upload_failed(61);
    assert_eq!(a.broken, Some(Broken::UploadFailed { txid: 61 }));
    assert!(a.upload.is_empty(), "63 never starts on a closed gate");
    // Answers still in flight settle, and the latch refuses them.
    assert_eq!(g.on_upload_failed(62), GateActions::default());
    assert_eq!(g.on_own_read(mine(9), 101, 200), GateActions::default());
    assert_eq!(g.acked(), 60);
    // Had 62 landed instead, the same: the gap at 61 hides it.
    let mut g = AckGate::new("a", 9);
    g.on_commit(1);
    g.on_commit(2);
    assert_eq!(g.on_uploaded(2), GateActions::default());
    let a = g.on_upload_failed(1);
    assert_eq!(a.broken, Some(Broken::UploadFailed { txid: 1 }));
    assert_eq!(a.ack_through, None);
  }

  #[test]
  fn a_failure_above_an_upload_in_flight_waits_for_it() {
    let mut g = AckGate::new("a", 2);
    g.on_commit(1);
    g.on_commit(2);
    // 2 failed, but 1 might still land: rounds settle in order.
    assert_eq!(g.on_upload_failed(2), GateActions::default());
    assert_eq!(g.broken(), None);
    let a = g.on_uploaded(1);
    assert_eq!(a.broken, Some(Broken::UploadFailed { txid: 2 }));
    assert_eq!(a.read_own, None);
  }

  #[test]
  fn a_moved_record_breaks_the_cell() {
    let mut g = AckGate::new("a", 4);
    g.on_commit(1);
    g.on_uploaded(1);
    let moved = Ok(Some((OwnRecord::owned("b", 5), Token::new("v5"))));
    let a = g.on_own_read(moved, 100, 200);
    let b = Broken::OwnershipLost {
      record: Some(OwnRecord::owned("b", 5)),
    };
    assert_eq!(a.broken, Some(b.clone()));
    assert_eq!(a.ack_through, None);
    assert_eq!(g.broken(), Some(&b));
    assert!(
      b.message("C:1")
        .starts_with("Durable Object reset because C:1 is now owned by")
    );
    // Nothing more happens on a broken gate.
    assert_eq!(g.on_commit(2), GateActions::default());
  }

  #[test]
  fn lapsed_lease_breaks_even_when_the_record_is_ours() {
    let mut g = AckGate::new("a", 4);
    g.on_commit(1);
    g.on_uploaded(1);
    let a = g.on_own_read(mine(4), 200, 200);
    assert_eq!(a.broken, Some(Broken::LeaseLapsed));
    assert!(
      Broken::LeaseLapsed
        .message("C:1")
        .contains("this node's lease has lapsed")
    );
  }

  #[test]
  fn read_errors_retry_and_upload_failures_break() {
    let mut g = AckGate::new("a", 1);
    g.on_commit(1);
    g.on_uploaded(1);
    let a = g.on_own_read(Err(crate::StoreError("timeout".into())), 10, 200);
    assert_eq!(
      a,
      GateActions {
        read_own: Some(OWN_READ_RETRY_MS),
        ..Default::default()
      }
    );
    let a = g.on_own_read(mine(1), 20, 200);
    assert_eq!(a.ack_through, Some(1));
    g.on_commit(2);
    let a = g.on_upload_failed(2);
    assert_eq!(a.broken, Some(Broken::UploadFailed { txid: 2 }));
  }

  #[test]
  fn a_round_after_a_failed_one_does_not_acknowledge_that_cell() {
    let mut l = RoundLatch::default();
    // Round 1 fails for cell 7; round 2 (already in flight) succeeded.
    assert_eq!(l.settle(&[7, 8], &[7]), vec![7]);
    assert_eq!(l.settle(&[7, 8], &[]), vec![7], "above the gap: refused");
    assert!(l.is_broken(&7) && !l.is_broken(&8));
    l.forget(&7);
    assert_eq!(l.settle(&[7], &[]), Vec::<u32>::new());
  }
}

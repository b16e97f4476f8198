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
//! [`AckGate`] sequences this for one cell's epoch: uploads strictly in TXID
//! order, one ownership read at a time that covers every upload completed
//! before it started, acknowledgements in TXID order.

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

/// What the caller must do after feeding the gate. Several fields can be set
/// at once; perform them all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateActions {
  /// Upload the LTX of this TXID (PUT under `e<epoch>/`).
  pub upload: Option<u64>,
  /// Read `own.json` after this many milliseconds (0: now); answer with
  /// [`AckGate::on_own_read`].
  pub read_own: Option<u64>,
  /// Acknowledge every write committed at or below this TXID.
  pub ack_through: Option<u64>,
  /// The gate closed: fail every unacknowledged write, reset the cell.
  pub broken: Option<Broken>,
}

/// The acknowledgement gate of one cell at one epoch.
#[derive(Clone, Debug)]
pub struct AckGate {
  node: String,
  epoch: u64,
  committed: u64,
  uploading: Option<u64>,
  uploaded: u64,
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
      uploading: None,
      uploaded: 0,
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

  pub fn broken(&self) -> Option<&Broken> {
    self.broken.as_ref()
  }

  /// A local commit at `txid` (the next one). Its upload starts when the
  /// previous one finished: a cell's LTX is written strictly in order.
  pub fn on_commit(&mut self, txid: u64) -> GateActions {
    assert_eq!(txid, self.committed + 1, "commits are numbered in order");
    self.committed = txid;
    let mut a = GateActions::default();
    if self.broken.is_none() && self.uploading.is_none() {
      self.uploading = Some(txid);
      a.upload = Some(txid);
    }
    a
  }

  /// The upload of `txid` applied. Starts the next upload, and an ownership
  /// read covering it unless one is already in flight (that one started
  /// before this upload finished, so it cannot cover it).
  pub fn on_uploaded(&mut self, txid: u64) -> GateActions {
    let mut a = GateActions::default();
    if self.broken.is_some() {
      return a;
    }
    assert_eq!(self.uploading, Some(txid), "answer to the upload in flight");
    self.uploading = None;
    self.uploaded = txid;
    if self.committed > self.uploaded {
      self.uploading = Some(txid + 1);
      a.upload = Some(txid + 1);
    }
    if self.reading.is_none() {
      self.reading = Some(self.uploaded);
      a.read_own = Some(0);
    }
    a
  }

  /// The upload of `txid` failed for good (after the caller's own retries
  /// of the idempotent PUT).
  pub fn on_upload_failed(&mut self, txid: u64) -> GateActions {
    self.close(Broken::UploadFailed { txid })
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

  #[test]
  fn upload_then_read_then_ack() {
    let mut g = AckGate::new("a", 4);
    let a = g.on_commit(1);
    assert_eq!(
      a,
      GateActions {
        upload: Some(1),
        ..Default::default()
      }
    );
    // A second commit waits for the first upload.
    assert_eq!(g.on_commit(2), GateActions::default());
    let a = g.on_uploaded(1);
    assert_eq!(
      a,
      GateActions {
        upload: Some(2),
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
}

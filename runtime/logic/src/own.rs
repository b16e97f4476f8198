//! The ownership record `cells/<scope>/own.json` and the decisions around it.
//!
//! The record is `{ "node": ..., "epoch": N }`. A released record keeps its
//! epoch and names no node. The rules:
//!
//! * **Taking a cell.** With no record, the first activation creates one at
//!   epoch 1 (`If-None-Match: *`) — unless the bucket already holds LTX for
//!   the cell: then the record was lost, and the cell is refused for
//!   [`LOST_RECORD_REFUSAL_MS`] instead of restarting it empty. With a
//!   record, the node raises the epoch by one with a compare-and-swap
//!   (`If-Match`), and only if the record names this node, no node, or a node
//!   whose lease has expired. **Every activation raises the epoch**, a local
//!   re-activation included, so no epoch ever has two writers.
//! * **Races.** A rejected write means another writer moved the record:
//!   re-read and decide again. An ambiguous write may have happened: re-read,
//!   and if the record is exactly what this node wrote, it owns the cell.
//! * **Restore.** Only after the write applied does the node list the LTX
//!   and restore ([`crate::restore`]): a listing taken after the winning
//!   write sees every upload that an earlier owner acknowledged.
//! * **Releasing** writes `{node: "", epoch}` only over a record that still
//!   names this node at this epoch, so a late release cannot clear a newer
//!   owner's record.
//!
//! [`Acquire`] and [`Release`] are sans-IO machines: each returns the next
//! store request for the caller to perform and takes its answer.

use std::fmt;

use crate::lease::NodeLease;
use crate::restore::{self, Chain, LtxKey};
use crate::{ReadResult, StoreError, Token, WriteAnswer};

/// How long a cell whose record was lost is refused before the next try.
pub const LOST_RECORD_REFUSAL_MS: u64 = 10_000;

/// Decisions one acquisition makes before it gives up under contention.
pub const MAX_ACQUIRE_ROUNDS: u32 = 8;

/// Longest cell scope, in bytes: it is a path and key component.
pub const MAX_SCOPE_BYTES: usize = 255;

/// The content of `cells/<scope>/own.json`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnRecord {
  /// The owning node, or `""` when released.
  pub node: String,
  pub epoch: u64,
}

impl OwnRecord {
  pub fn owned(node: impl Into<String>, epoch: u64) -> Self {
    OwnRecord { node: node.into(), epoch }
  }

  /// The record a release leaves: no node, the same epoch.
  pub fn released(epoch: u64) -> Self {
    OwnRecord { node: String::new(), epoch }
  }

  pub fn is_released(&self) -> bool {
    self.node.is_empty()
  }

  /// Whether this record names `node` at `epoch`: the proof of ownership.
  pub fn names(&self, node: &str, epoch: u64) -> bool {
    self.node == node && self.epoch == epoch
  }

  /// The JSON body, as celld writes it.
  pub fn to_json(&self) -> String {
    format!("{{\"node\": {}, \"epoch\": {}}}", json_string(&self.node), self.epoch)
  }
}

/// A JSON string literal; node names are plain, but quote what must be.
fn json_string(s: &str) -> String {
  let mut out = String::with_capacity(s.len() + 2);
  out.push('"');
  for c in s.chars() {
    match c {
      '"' => out.push_str("\\\""),
      '\\' => out.push_str("\\\\"),
      c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
      c => out.push(c),
    }
  }
  out.push('"');
  out
}

/// `cells/<scope>/own.json`.
pub fn own_key(scope: &str) -> String {
  format!("cells/{scope}/own.json")
}

/// Checks a cell scope (`Class:id`): ASCII letters, digits and `_ - . : $`,
/// 1 to 255 bytes, not `.` or `..`. The scope becomes a path and a key
/// component, so this charset is a security fence.
pub fn validate_scope(scope: &str) -> Result<(), String> {
  if scope.is_empty() || scope.len() > MAX_SCOPE_BYTES {
    return Err(format!("invalid cell scope {scope:?}: must be 1 to {MAX_SCOPE_BYTES} bytes"));
  }
  if scope == "." || scope == ".." {
    return Err(format!("invalid cell scope {scope:?}"));
  }
  match scope.bytes().find(|b| !(b.is_ascii_alphanumeric() || b"_-.:$".contains(b))) {
    Some(b) => Err(format!("invalid cell scope {scope:?}: byte {b:#04x} is not allowed")),
    None => Ok(()),
  }
}

/// Splits `Class:id` into its class and id (the id may itself hold `:`).
pub fn split_scope(scope: &str) -> (&str, &str) {
  scope.split_once(':').unwrap_or((scope, ""))
}

/// Another node's live ownership record holds the cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellOwnedElsewhereError {
  pub class: String,
  pub id: String,
  /// The owner named by the record.
  pub owner: String,
}

impl fmt::Display for CellOwnedElsewhereError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "Durable Object {}/{} is owned by another node", self.class, self.id)
  }
}

impl std::error::Error for CellOwnedElsewhereError {}

/// `own.json` is missing while the bucket holds LTX for the cell: a
/// lifecycle rule or an operator removed it. Neither side guesses the epoch;
/// the operator writes the released record the message names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnershipRecordLost {
  pub scope: String,
  /// The newest epoch that holds LTX: the epoch of the repair record.
  pub newest_epoch: u64,
  /// Refused until this local time; see [`LOST_RECORD_REFUSAL_MS`].
  pub retry_at_ms: u64,
}

impl OwnershipRecordLost {
  /// The record that repairs the cell.
  pub fn repair(&self) -> OwnRecord {
    OwnRecord::released(self.newest_epoch)
  }
}

impl fmt::Display for OwnershipRecordLost {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let scope = &self.scope;
    write!(
      f,
      "ownership record lost: cells/{scope}/own.json is missing, but the bucket holds LTX \
       up to epoch {epoch} under cells/{scope}/ltx/; the cell is refused for {secs} s. \
       Repair: write the released record {repair} to cells/{scope}/own.json",
      epoch = self.newest_epoch,
      secs = LOST_RECORD_REFUSAL_MS / 1000,
      repair = self.repair().to_json(),
    )
  }
}

impl std::error::Error for OwnershipRecordLost {}

/// Why an acquisition ended without the cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireError {
  OwnedElsewhere(CellOwnedElsewhereError),
  RecordLost(OwnershipRecordLost),
  /// A read or listing failed. If the failure came after this node's write
  /// applied, the record names this node; a later activation raises the
  /// epoch again, so nothing is left half-owned.
  Store(StoreError),
  /// The record kept moving under us for [`MAX_ACQUIRE_ROUNDS`] decisions.
  Contention { rounds: u32 },
}

impl fmt::Display for AcquireError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      AcquireError::OwnedElsewhere(e) => e.fmt(f),
      AcquireError::RecordLost(e) => e.fmt(f),
      AcquireError::Store(e) => e.fmt(f),
      AcquireError::Contention { rounds } => {
        write!(f, "ownership record kept changing ({rounds} attempts)")
      }
    }
  }
}

impl std::error::Error for AcquireError {}

/// What to do with the record as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
  /// No record: create one at epoch 1 (after checking for lost LTX).
  Create,
  /// Replace it with this record (If-Match on the version read).
  Raise(OwnRecord),
  /// It names another node: take it only if that node's lease expired.
  CheckLease { owner: String },
}

/// The claim rule: raise the epoch over a record that names this node or no
/// node; ask about the lease of any other owner.
pub fn claim(current: Option<&OwnRecord>, node: &str) -> Claim {
  match current {
    None => Claim::Create,
    Some(r) if r.is_released() || r.node == node => Claim::Raise(OwnRecord::owned(node, r.epoch + 1)),
    Some(r) => Claim::CheckLease { owner: r.node.clone() },
  }
}

/// Whether the owner's lease has expired, judged at `judged_at_ms`.
///
/// A missing lease is expired: the node deleted it on shutdown, or never
/// had one. `judged_at_ms` must be a clock reading taken *before* the lease
/// read was sent: a reading taken when the answer arrives could be later
/// than a renewal the owner made after the read, and would take the cell
/// from a live owner.
pub fn owner_lease_expired(lease: Option<&NodeLease>, judged_at_ms: u64) -> bool {
  lease.is_none_or(|l| l.expires_ms <= judged_at_ms)
}

/// The next store request of an acquisition, or its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireStep {
  /// GET `cells/<scope>/own.json`; answer with [`Acquire::on_own`].
  ReadOwn,
  /// Note the local clock, then GET `nodes/<node>.json`; answer with
  /// [`Acquire::on_lease`], passing the clock noted *before* the read.
  ReadLease { node: String },
  /// LIST `cells/<scope>/ltx/`; answer with [`Acquire::on_ltx`].
  ListLtx,
  /// PUT `own.json` with `If-None-Match: *`; answer with [`Acquire::on_write`].
  Create { record: OwnRecord },
  /// PUT `own.json` with `If-Match: token`; answer with [`Acquire::on_write`].
  Cas { record: OwnRecord, token: Token },
  /// The cell is ours: restore `restore` (or start empty), never the local file.
  Acquired(Acquired),
  Failed(AcquireError),
}

/// A won cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acquired {
  pub epoch: u64,
  /// The version of our record: the condition of a later release.
  pub token: Token,
  /// The chain to restore; `None` starts the cell empty.
  pub restore: Option<Chain>,
}

#[derive(Clone, Debug)]
enum AcqState {
  ReadOwn,
  ReadLease { next: OwnRecord, token: Token },
  CheckLtx,
  Write { record: OwnRecord },
  Reconcile { wrote: OwnRecord },
  Restore { epoch: u64, token: Token },
  Done,
}

/// One activation of one cell on one node.
#[derive(Clone, Debug)]
pub struct Acquire {
  scope: String,
  node: String,
  state: AcqState,
  rounds: u32,
  now_ms: u64,
}

impl Acquire {
  /// Starts an activation of `scope` by `node`; the first step reads the
  /// record. `now_ms` is only used to date a lost-record refusal.
  pub fn new(scope: &str, node: &str, now_ms: u64) -> (Self, AcquireStep) {
    let a = Acquire {
      scope: scope.to_string(),
      node: node.to_string(),
      state: AcqState::ReadOwn,
      rounds: 0,
      now_ms,
    };
    (a, AcquireStep::ReadOwn)
  }

  pub fn node(&self) -> &str {
    &self.node
  }

  /// The answer to [`AcquireStep::ReadOwn`].
  pub fn on_own(&mut self, read: ReadResult<OwnRecord>, now_ms: u64) -> AcquireStep {
    self.now_ms = now_ms;
    let read = match read {
      Ok(r) => r,
      Err(e) => return self.fail(AcquireError::Store(e)),
    };
    match std::mem::replace(&mut self.state, AcqState::Done) {
      AcqState::Reconcile { wrote } => match read {
        // Our ambiguous write happened (or an identical one of an earlier
        // incarnation of this node, which is as good: nobody else writes
        // this node's name).
        Some((r, token)) if r == wrote => self.restore(r.epoch, token),
        other => self.decide(other),
      },
      AcqState::ReadOwn => self.decide(read),
      s => panic!("Acquire::on_own in state {s:?}"),
    }
  }

  /// The answer to [`AcquireStep::ReadLease`]. `read_started_ms` is the
  /// local clock read before the lease GET was sent; see
  /// [`owner_lease_expired`] for why it must not be the arrival time.
  pub fn on_lease(&mut self, read: ReadResult<NodeLease>, read_started_ms: u64) -> AcquireStep {
    let AcqState::ReadLease { next, token } = std::mem::replace(&mut self.state, AcqState::Done)
    else {
      panic!("Acquire::on_lease out of order");
    };
    let lease = match read {
      Ok(l) => l.map(|(l, _)| l),
      Err(e) => return self.fail(AcquireError::Store(e)),
    };
    // The record we read is still the one the token versions: the CAS fails
    // cleanly if it moved since.
    if owner_lease_expired(lease.as_ref(), read_started_ms) {
      self.write_cas(next, token)
    } else {
      let (class, id) = split_scope(&self.scope);
      let owner = lease.map(|l| l.node).unwrap_or_default();
      self.fail(AcquireError::OwnedElsewhere(CellOwnedElsewhereError {
        class: class.to_string(),
        id: id.to_string(),
        owner,
      }))
    }
  }

  /// The answer to [`AcquireStep::ListLtx`], in any order.
  pub fn on_ltx(&mut self, listing: Result<&[LtxKey], StoreError>) -> AcquireStep {
    let keys = match listing {
      Ok(k) => k,
      Err(e) => return self.fail(AcquireError::Store(e)),
    };
    match std::mem::replace(&mut self.state, AcqState::Done) {
      AcqState::CheckLtx => match restore::newest_epoch(keys) {
        Some(newest_epoch) => self.fail(AcquireError::RecordLost(OwnershipRecordLost {
          scope: self.scope.clone(),
          newest_epoch,
          retry_at_ms: self.now_ms + LOST_RECORD_REFUSAL_MS,
        })),
        None => {
          let record = OwnRecord::owned(self.node.clone(), 1);
          self.state = AcqState::Write { record: record.clone() };
          AcquireStep::Create { record }
        }
      },
      AcqState::Restore { epoch, token } => {
        AcquireStep::Acquired(Acquired { epoch, token, restore: restore::restore_chain(keys) })
      }
      s => panic!("Acquire::on_ltx in state {s:?}"),
    }
  }

  /// The answer to [`AcquireStep::Create`] or [`AcquireStep::Cas`].
  pub fn on_write(&mut self, answer: WriteAnswer) -> AcquireStep {
    let AcqState::Write { record } = std::mem::replace(&mut self.state, AcqState::Done) else {
      panic!("Acquire::on_write out of order");
    };
    match answer {
      WriteAnswer::Applied(token) => self.restore(record.epoch, token),
      // Someone else moved the record first: look again.
      WriteAnswer::Rejected => {
        self.state = AcqState::ReadOwn;
        AcquireStep::ReadOwn
      }
      // Maybe ours: read to find out, never write again blindly.
      WriteAnswer::Ambiguous => {
        self.state = AcqState::Reconcile { wrote: record };
        AcquireStep::ReadOwn
      }
    }
  }

  fn decide(&mut self, current: Option<(OwnRecord, Token)>) -> AcquireStep {
    self.rounds += 1;
    if self.rounds > MAX_ACQUIRE_ROUNDS {
      return self.fail(AcquireError::Contention { rounds: self.rounds - 1 });
    }
    let (record, token) = match current {
      Some((r, t)) => (Some(r), Some(t)),
      None => (None, None),
    };
    match claim(record.as_ref(), &self.node) {
      Claim::Create => {
        // Lost-record check before creating: LTX without a record must not
        // restart empty.
        self.state = AcqState::CheckLtx;
        AcquireStep::ListLtx
      }
      Claim::Raise(next) => self.write_cas(next, token.expect("a record has a token")),
      Claim::CheckLease { owner } => {
        let epoch = record.map_or(0, |r| r.epoch);
        let next = OwnRecord::owned(self.node.clone(), epoch + 1);
        self.state = AcqState::ReadLease { next, token: token.expect("a record has a token") };
        AcquireStep::ReadLease { node: owner }
      }
    }
  }

  /// CAS `record` (the next epoch) over the record versioned `token`.
  fn write_cas(&mut self, record: OwnRecord, token: Token) -> AcquireStep {
    self.state = AcqState::Write { record: record.clone() };
    AcquireStep::Cas { record, token }
  }

  fn restore(&mut self, epoch: u64, token: Token) -> AcquireStep {
    self.state = AcqState::Restore { epoch, token };
    AcquireStep::ListLtx
  }

  fn fail(&mut self, e: AcquireError) -> AcquireStep {
    self.state = AcqState::Done;
    AcquireStep::Failed(e)
  }
}

/// The next store request of a release, or its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseStep {
  /// PUT `own.json` = `record` with `If-Match: token`; answer with [`Release::on_write`].
  Cas { record: OwnRecord, token: Token },
  /// GET `own.json`; answer with [`Release::on_own`].
  ReadOwn,
  Done(ReleaseOutcome),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
  /// The record is `{node: "", epoch}`: the next node takes the cell at once.
  Released,
  /// The record no longer names this node at this epoch: nothing to undo,
  /// and nothing was written over the newer record.
  Moved,
  /// A read failed; the record may still name us. Our lease expiring (or
  /// our next activation) frees it.
  Failed(StoreError),
}

/// Releasing one cell: CAS to `{node: "", epoch}` only over our own record.
#[derive(Clone, Debug)]
pub struct Release {
  node: String,
  epoch: u64,
  rounds: u32,
}

impl Release {
  /// Starts a release of the record `{node, epoch}` we hold at version `token`.
  pub fn new(node: &str, epoch: u64, token: Token) -> (Self, ReleaseStep) {
    let r = Release { node: node.to_string(), epoch, rounds: 0 };
    (r, ReleaseStep::Cas { record: OwnRecord::released(epoch), token })
  }

  /// The answer to [`ReleaseStep::Cas`]: anything but applied is settled by
  /// reading, since the CAS must not be repeated blindly.
  pub fn on_write(&mut self, answer: WriteAnswer) -> ReleaseStep {
    match answer {
      WriteAnswer::Applied(_) => ReleaseStep::Done(ReleaseOutcome::Released),
      WriteAnswer::Rejected | WriteAnswer::Ambiguous => ReleaseStep::ReadOwn,
    }
  }

  /// The answer to [`ReleaseStep::ReadOwn`].
  pub fn on_own(&mut self, read: ReadResult<OwnRecord>) -> ReleaseStep {
    match read {
      Err(e) => ReleaseStep::Done(ReleaseOutcome::Failed(e)),
      Ok(Some((r, token))) if r.names(&self.node, self.epoch) => {
        // Still ours (our token was stale, or the write was lost): retry
        // with the version just read.
        self.rounds += 1;
        if self.rounds > MAX_ACQUIRE_ROUNDS {
          return ReleaseStep::Done(ReleaseOutcome::Failed(StoreError(
            "ownership record kept changing".into(),
          )));
        }
        ReleaseStep::Cas { record: OwnRecord::released(self.epoch), token }
      }
      Ok(Some((r, _))) if r == OwnRecord::released(self.epoch) => {
        ReleaseStep::Done(ReleaseOutcome::Released)
      }
      Ok(_) => ReleaseStep::Done(ReleaseOutcome::Moved),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn tok(s: &str) -> Token {
    Token::new(s)
  }

  fn lease(node: &str, expires_ms: u64) -> NodeLease {
    NodeLease { node: node.into(), expires_ms, address: "10.0.0.1:9000".into(), load: 0 }
  }

  #[test]
  fn records_and_scopes() {
    assert_eq!(OwnRecord::released(7).to_json(), r#"{"node": "", "epoch": 7}"#);
    assert_eq!(OwnRecord::owned("n\"1", 2).to_json(), r#"{"node": "n\"1", "epoch": 2}"#);
    assert!(OwnRecord::owned("a", 3).names("a", 3));
    assert!(!OwnRecord::owned("a", 3).names("a", 4));
    assert_eq!(own_key("Counter:x"), "cells/Counter:x/own.json");
    assert!(validate_scope("Counter:abc_-.:$9").is_ok());
    assert!(validate_scope("Counter/abc").is_err());
    assert!(validate_scope("..").is_err());
    assert!(validate_scope("").is_err());
    assert!(validate_scope(&"a".repeat(256)).is_err());
    assert_eq!(split_scope("Counter:a:b"), ("Counter", "a:b"));
  }

  #[test]
  fn claim_rule() {
    assert_eq!(claim(None, "a"), Claim::Create);
    assert_eq!(claim(Some(&OwnRecord::owned("a", 4)), "a"), Claim::Raise(OwnRecord::owned("a", 5)));
    assert_eq!(claim(Some(&OwnRecord::released(4)), "a"), Claim::Raise(OwnRecord::owned("a", 5)));
    assert_eq!(
      claim(Some(&OwnRecord::owned("b", 4)), "a"),
      Claim::CheckLease { owner: "b".into() }
    );
    assert!(owner_lease_expired(None, 0));
    assert!(owner_lease_expired(Some(&lease("b", 100)), 100));
    assert!(!owner_lease_expired(Some(&lease("b", 100)), 99));
  }

  #[test]
  fn first_activation_creates_epoch_one() {
    let (mut a, s) = Acquire::new("C:1", "a", 0);
    assert_eq!(s, AcquireStep::ReadOwn);
    assert_eq!(a.on_own(Ok(None), 0), AcquireStep::ListLtx);
    let s = a.on_ltx(Ok(&[]));
    assert_eq!(s, AcquireStep::Create { record: OwnRecord::owned("a", 1) });
    assert_eq!(a.on_write(WriteAnswer::Applied(tok("v1"))), AcquireStep::ListLtx);
    let s = a.on_ltx(Ok(&[]));
    assert_eq!(s, AcquireStep::Acquired(Acquired { epoch: 1, token: tok("v1"), restore: None }));
  }

  #[test]
  fn every_activation_raises_the_epoch() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let s = a.on_own(Ok(Some((OwnRecord::owned("a", 4), tok("v4")))), 0);
    assert_eq!(s, AcquireStep::Cas { record: OwnRecord::owned("a", 5), token: tok("v4") });
    assert_eq!(a.on_write(WriteAnswer::Applied(tok("v5"))), AcquireStep::ListLtx);
    let keys = [LtxKey::l0(4, 1), LtxKey::l0(4, 2)];
    match a.on_ltx(Ok(&keys)) {
      AcquireStep::Acquired(got) => {
        assert_eq!(got.epoch, 5);
        assert_eq!(got.restore.unwrap().keys, keys.to_vec());
      }
      s => panic!("{s:?}"),
    }
  }

  #[test]
  fn takeover_waits_for_the_owner_lease() {
    let (mut a, _) = Acquire::new("Counter:xyz", "a", 0);
    let s = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ReadLease { node: "b".into() });
    match a.on_lease(Ok(Some((lease("b", 1_000), tok("l")))), 999) {
      AcquireStep::Failed(AcquireError::OwnedElsewhere(e)) => {
        assert_eq!(e.to_string(), "Durable Object Counter/xyz is owned by another node");
        assert_eq!(e.owner, "b");
      }
      s => panic!("{s:?}"),
    }
    let (mut a, _) = Acquire::new("Counter:xyz", "a", 0);
    a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    let s = a.on_lease(Ok(Some((lease("b", 1_000), tok("l")))), 1_000);
    assert_eq!(s, AcquireStep::Cas { record: OwnRecord::owned("a", 4), token: tok("v3") });
    // A missing lease is a dead owner.
    let (mut a, _) = Acquire::new("Counter:xyz", "a", 0);
    a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert!(matches!(a.on_lease(Ok(None), 0), AcquireStep::Cas { .. }));
  }

  #[test]
  fn rejected_rereads_and_ambiguous_reconciles() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    assert_eq!(a.on_write(WriteAnswer::Rejected), AcquireStep::ReadOwn);
    // Someone else won epoch 3 and is alive.
    let s = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ReadLease { node: "b".into() });

    // Ambiguous, and the record is exactly what we wrote: ours.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    assert_eq!(a.on_write(WriteAnswer::Ambiguous), AcquireStep::ReadOwn);
    let s = a.on_own(Ok(Some((OwnRecord::owned("a", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ListLtx);
    assert!(matches!(a.on_ltx(Ok(&[])), AcquireStep::Acquired(Acquired { epoch: 3, .. })));

    // Ambiguous, and it did not happen: decide again from what is there.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    a.on_write(WriteAnswer::Ambiguous);
    let s = a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    assert_eq!(s, AcquireStep::Cas { record: OwnRecord::owned("a", 3), token: tok("v2") });
  }

  #[test]
  fn contention_gives_up() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let mut last = AcquireStep::ReadOwn;
    for i in 0..=MAX_ACQUIRE_ROUNDS as u64 {
      last = a.on_own(Ok(Some((OwnRecord::released(i), tok("v")))), 0);
      if let AcquireStep::Cas { .. } = last {
        assert_eq!(a.on_write(WriteAnswer::Rejected), AcquireStep::ReadOwn);
      }
    }
    assert_eq!(last, AcquireStep::Failed(AcquireError::Contention { rounds: MAX_ACQUIRE_ROUNDS }));
  }

  #[test]
  fn lost_record_is_refused_with_the_repair() {
    let (mut a, _) = Acquire::new("Counter:abc", "a", 5_000);
    assert_eq!(a.on_own(Ok(None), 5_000), AcquireStep::ListLtx);
    let keys = [LtxKey::l0(6, 1), LtxKey::l0(7, 1), LtxKey::l0(7, 2)];
    match a.on_ltx(Ok(&keys)) {
      AcquireStep::Failed(AcquireError::RecordLost(e)) => {
        assert_eq!(e.newest_epoch, 7);
        assert_eq!(e.retry_at_ms, 15_000);
        assert_eq!(e.repair(), OwnRecord::released(7));
        let msg = e.to_string();
        assert!(
          msg.starts_with(
            "ownership record lost: cells/Counter:abc/own.json is missing, but the bucket holds LTX"
          ),
          "{msg}"
        );
        assert!(msg.contains(r#"{"node": "", "epoch": 7}"#), "{msg}");
        assert!(msg.contains("10 s"), "{msg}");
      }
      s => panic!("{s:?}"),
    }
  }

  #[test]
  fn store_errors_end_the_attempt() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let e = StoreError("timeout".into());
    assert_eq!(a.on_own(Err(e.clone()), 0), AcquireStep::Failed(AcquireError::Store(e)));
  }

  #[test]
  fn release_only_over_our_own_record() {
    let (mut r, s) = Release::new("a", 5, tok("v5"));
    assert_eq!(s, ReleaseStep::Cas { record: OwnRecord::released(5), token: tok("v5") });
    assert_eq!(r.on_write(WriteAnswer::Applied(tok("v6"))), ReleaseStep::Done(ReleaseOutcome::Released));

    let (mut r, _) = Release::new("a", 5, tok("v5"));
    assert_eq!(r.on_write(WriteAnswer::Rejected), ReleaseStep::ReadOwn);
    let s = r.on_own(Ok(Some((OwnRecord::owned("b", 6), tok("v6")))));
    assert_eq!(s, ReleaseStep::Done(ReleaseOutcome::Moved));

    let (mut r, _) = Release::new("a", 5, tok("v5"));
    assert_eq!(r.on_write(WriteAnswer::Ambiguous), ReleaseStep::ReadOwn);
    let s = r.on_own(Ok(Some((OwnRecord::released(5), tok("v6")))));
    assert_eq!(s, ReleaseStep::Done(ReleaseOutcome::Released));

    let (mut r, _) = Release::new("a", 5, tok("stale"));
    r.on_write(WriteAnswer::Rejected);
    let s = r.on_own(Ok(Some((OwnRecord::owned("a", 5), tok("v5b")))));
    assert_eq!(s, ReleaseStep::Cas { record: OwnRecord::released(5), token: tok("v5b") });
  }
}

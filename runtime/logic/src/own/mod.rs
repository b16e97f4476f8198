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
//! * **Store failures.** A failed write, a failed read, or an ambiguous write
//!   whose record reads back unchanged is the store's fault, not a race:
//!   the same request goes again after a growing, jittered pause, and after
//!   [`MAX_STORE_FAILURES`] the attempt gives up naming the store error, not
//!   "kept changing".
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

use crate::StoreError;
use crate::lease::NodeLease;

mod acquire;
mod release;
mod route;

pub use acquire::{Acquire, AcquireStep, Acquired};
pub use release::{Release, ReleaseOutcome, ReleaseStep};
pub use route::{Route, owner_to_check, route};

/// How long a cell whose record was lost is refused before the next try.
pub const LOST_RECORD_REFUSAL_MS: u64 = 10_000;

/// Races one acquisition (or release) loses to other writers before it
/// gives up: the record kept changing.
pub const MAX_ACQUIRE_ROUNDS: u32 = 8;

/// Store failures in a row (a failed read or write, or an ambiguous write
/// whose record reads back unchanged) one acquisition or release retries,
/// with growing jittered pauses ([`RETRY_BASE_MS`] up to [`RETRY_CAP_MS`],
/// about 2 to 4.5 s in all), before it gives up: enough to ride out a blip
/// of the store without a burst of requests.
pub const MAX_STORE_FAILURES: u32 = 8;

/// The first pause before an ownership request is retried.
pub const RETRY_BASE_MS: u64 = 50;

/// The longest pause between retries of an ownership request.
pub const RETRY_CAP_MS: u64 = 1_000;

/// Longest cell scope, in bytes: it is a path and key component.
pub const MAX_SCOPE_BYTES: usize = 255;

/// The content of `cells/<scope>/own.json`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnRecord {
  /// The owning node, or `""` when released.
  pub node: String,
  pub epoch: u64,
  /// The owner's process session, whose node log may hold acknowledged
  /// writes of the cell not yet in the bucket: a takeover seals it first
  /// ([`crate::ensemble::recovery`]). `""` when released, or written by a
  /// node without node-log sessions.
  pub session: String,
}

impl OwnRecord {
  pub fn owned(node: impl Into<String>, epoch: u64) -> Self {
    OwnRecord {
      node: node.into(),
      epoch,
      session: String::new(),
    }
  }

  /// The record naming the owner's session too.
  pub fn in_session(self, session: &str) -> Self {
    OwnRecord {
      session: session.to_string(),
      ..self
    }
  }

  /// The record a release leaves: no node, the same epoch.
  pub fn released(epoch: u64) -> Self {
    OwnRecord::owned("", epoch)
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
    let session = match self.session.as_str() {
      "" => String::new(),
      s => format!(", \"session\": {}", json_string(s)),
    };
    format!(
      "{{\"node\": {}, \"epoch\": {}{session}}}",
      json_string(&self.node),
      self.epoch
    )
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
    return Err(format!(
      "invalid cell scope {scope:?}: must be 1 to {MAX_SCOPE_BYTES} bytes"
    ));
  }
  if scope == "." || scope == ".." {
    return Err(format!("invalid cell scope {scope:?}"));
  }
  match scope
    .bytes()
    .find(|b| !(b.is_ascii_alphanumeric() || b"_-.:$".contains(b)))
  {
    Some(b) => Err(format!(
      "invalid cell scope {scope:?}: byte {b:#04x} is not allowed"
    )),
    None => Ok(()),
  }
}

/// The scope of the object `id` of class `class`: `Class:id`.
pub fn cell_scope(class: &str, id: &str) -> String {
  format!("{class}:{id}")
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
    write!(
      f,
      "Durable Object {}/{} is owned by another node",
      self.class, self.id
    )
  }
}

impl std::error::Error for CellOwnedElsewhereError {}

/// `own.json` is missing while the bucket holds LTX for the cell: a
/// lifecycle rule or an operator removed it. Neither side guesses the epoch;
/// the operator writes the released record the message names.
///
/// Caveat for the repair: the lost record may have named an epoch above the
/// newest LTX (an owner that had not uploaded yet). The repair then lets the
/// next activation reuse that epoch while that owner may still upload under
/// it (it stops at its next ownership read, which finds the record gone).
/// A repair at `newest_epoch + 1` would leave no such window; the seeds name
/// `newest_epoch`, and this crate follows them.
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
  /// The store kept failing for [`MAX_STORE_FAILURES`] tries in a row, with
  /// pauses between them; no other writer was seen. As with `Store`, an
  /// ambiguous write may have left the record naming this node.
  Unavailable {
    failures: u32,
    last: StoreError,
  },
  /// Other writers moved the record under us [`MAX_ACQUIRE_ROUNDS`] times.
  Contention {
    rounds: u32,
  },
}

impl fmt::Display for AcquireError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      AcquireError::OwnedElsewhere(e) => e.fmt(f),
      AcquireError::RecordLost(e) => e.fmt(f),
      AcquireError::Store(e) => e.fmt(f),
      AcquireError::Unavailable { failures, last } => write!(
        f,
        "the bucket failed {failures} times in a row while this node took the cell \
         (nobody else wrote the ownership record); last: {last}"
      ),
      AcquireError::Contention { rounds } => write!(
        f,
        "ownership record kept changing: {rounds} writes in a row lost the race to another \
         write"
      ),
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
    Some(r) if r.is_released() || r.node == node => {
      Claim::Raise(OwnRecord::owned(node, r.epoch + 1))
    }
    Some(r) => Claim::CheckLease {
      owner: r.node.clone(),
    },
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

#[cfg(test)]
mod tests {
  use super::*;

  fn lease(node: &str, expires_ms: u64) -> NodeLease {
    NodeLease::for_test(node, expires_ms)
  }

  #[test]
  fn records_and_scopes() {
    assert_eq!(
      OwnRecord::released(7).to_json(),
      r#"{"node": "", "epoch": 7}"#
    );
    assert_eq!(
      OwnRecord::owned("n\"1", 2).to_json(),
      r#"{"node": "n\"1", "epoch": 2}"#
    );
    assert_eq!(
      OwnRecord::owned("n1", 2).in_session("n1.7").to_json(),
      r#"{"node": "n1", "epoch": 2, "session": "n1.7"}"#
    );
    assert!(OwnRecord::owned("a", 3).names("a", 3));
    assert!(!OwnRecord::owned("a", 3).names("a", 4));
    assert_eq!(own_key("Counter:x"), "cells/Counter:x/own.json");
    assert!(validate_scope("Counter:abc_-.:$9").is_ok());
    assert!(validate_scope("Counter/abc").is_err());
    assert!(validate_scope("..").is_err());
    assert!(validate_scope("").is_err());
    assert!(validate_scope(&"a".repeat(256)).is_err());
    assert_eq!(split_scope("Counter:a:b"), ("Counter", "a:b"));
    assert_eq!(split_scope(&cell_scope("Counter", "ab")), ("Counter", "ab"));
  }

  #[test]
  fn claim_rule() {
    assert_eq!(claim(None, "a"), Claim::Create);
    assert_eq!(
      claim(Some(&OwnRecord::owned("a", 4)), "a"),
      Claim::Raise(OwnRecord::owned("a", 5))
    );
    assert_eq!(
      claim(Some(&OwnRecord::released(4)), "a"),
      Claim::Raise(OwnRecord::owned("a", 5))
    );
    assert_eq!(
      claim(Some(&OwnRecord::owned("b", 4)), "a"),
      Claim::CheckLease { owner: "b".into() }
    );
    assert!(owner_lease_expired(None, 0));
    assert!(owner_lease_expired(Some(&lease("b", 100)), 100));
    assert!(!owner_lease_expired(Some(&lease("b", 100)), 99));
  }
}

//! The pure decision core of cellhost's fleet mode.
//!
//! A fleet of nodes shares one object-store bucket. Every Durable Object (a
//! *cell*) must have exactly one writer at a time, and no write that was
//! acknowledged may be lost. This crate decides, and only decides:
//!
//! * [`own`]: the ownership record `cells/<scope>/own.json`: acquiring
//!   (create, compare-and-swap, takeover of an expired owner), releasing, and
//!   refusing a cell whose record was lost while LTX remains.
//! * [`lease`]: the node lease `nodes/<node>.json`: renewal every `ttl/3`,
//!   the self-fence deadline `expires_ms - margin`, and the fence reasons.
//! * [`ack`]: the acknowledgement rule: upload, *then* re-read `own.json`,
//!   then acknowledge only while the lease deadline has not passed.
//! * [`ensemble`]: the fleet proof (followers fsync each batch to their node
//!   logs), the node-log session record, and the takeover recovery gate.
//! * [`restore`]: "the bucket wins": which LTX chain a new owner restores.
//! * [`alarm`]: the alarm retry schedule.
//! * [`place`]: which isolate of one process an object lives on.
//! * [`wake`]: the fleet's wake index (hints under `wake/entries/`) and the
//!   waker role: which node wakes which cell nobody live holds.
//! * [`sim`]: a seeded deterministic simulator with checkers that drives the
//!   decisions above through crashes, pauses, clock drift and store races.
//!
//! Nothing here performs I/O, reads a clock or draws a random number. The
//! machines are *sans-IO*: they return a step for the caller (the I/O shell)
//! to perform and take its answer, and every method that depends on time
//! takes the caller's reading of its local clock in milliseconds.

pub mod ack;
pub mod alarm;
pub mod compact;
pub mod ensemble;
pub mod gc;
pub mod handover;
pub mod lease;
pub mod own;
pub mod place;
pub mod restore;
pub mod sim;
pub mod wake;

use std::fmt;

/// An object version as the store reports it: an S3/R2/Azure etag or a GCS
/// generation. Opaque: it is only compared for equality by the store, and
/// handed back in a conditional write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Token(pub String);

impl Token {
  pub fn new(s: impl Into<String>) -> Self {
    Token(s.into())
  }
}

/// A store request that failed without an answer about the object (a read
/// that timed out, a listing that errored). It proves nothing either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "store error: {}", self.0)
  }
}

impl std::error::Error for StoreError {}

/// The answer to a conditional (or plain) write.
///
/// `Ambiguous` means the write *may* have happened (a timeout, a lost
/// response, a 5xx): the caller must reconcile by reading, and must never
/// retry a compare-and-swap blindly, because the retry could meet its own
/// earlier success and report a false rejection. `Failed` means it provably
/// did not reach the store: the same write may simply be sent again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteAnswer {
  /// The write happened; the object now has this version.
  Applied(Token),
  /// The condition failed cleanly (412, `AlreadyExists`): nothing changed.
  Rejected,
  /// Unknown whether the write happened.
  Ambiguous,
  /// The write never reached the store (staging failed, no connection):
  /// nothing changed.
  Failed(StoreError),
}

/// The answer to a read: the object and its version, absent, or an error.
pub type ReadResult<T> = Result<Option<(T, Token)>, StoreError>;

/// The message of a `BrokenObjectError`: what callers of a reset object see.
pub fn broken_object_message(reason: &str) -> String {
  format!("Durable Object reset because {reason}")
}

/// The refusal a write gets once its node's lease could have lapsed.
pub fn lease_lapsed_message(cell: &str) -> String {
  format!("{cell}: this node's lease has lapsed; the write is refused (self-fencing)")
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn messages_follow_the_seeds() {
    assert_eq!(
      broken_object_message("its lease was lost"),
      "Durable Object reset because its lease was lost"
    );
    assert_eq!(
      lease_lapsed_message("Counter:abc"),
      "Counter:abc: this node's lease has lapsed; the write is refused (self-fencing)"
    );
  }
}

//! The follower ensemble (fleet proof) and the takeover recovery gate.
//!
//! With `--durability fleet` (the default) an owner proves a write durable
//! by having one or two other live nodes (its followers, the ensemble) fsync
//! it to their node logs, instead of waiting for the bucket: a follower
//! fsync is far faster than an object-store round trip. The bucket uploads
//! continue in the background and drain the node logs. A fleet of one node
//! has no follower and keeps the bucket proof ([`crate::ack`]).
//!
//! * [`owner`]: which batch goes to which followers, when a batch is
//!   proven, and the fall back to the bucket proof.
//! * [`follower`]: a follower's node log for one owner session: in-order
//!   appends, sealing, pruning, restart evidence, the `CLT1`/`CLT2` tails.
//! * [`record`]: the session record `log/<node>/<session>.json`.
//! * [`recovery`]: the gate a cold activation passes before it restores:
//!   seal the prior owner's session and upload its acknowledged tail.
//!
//! The prior owner's session is the one its ownership record names, so a
//! takeover knows exactly which session to seal. A cell is released (or
//! evicted) only once its uploads cover every acknowledged write, so a
//! released record needs no recovery.
//!
//! [`crate::sim::ensemble`] drives these machines through follower crashes
//! and restarts, torn batches, lost messages, stale owners and takeovers.

pub mod follower;
pub mod owner;
pub mod record;
pub mod recovery;

/// An owner recruits at most this many followers: three copies in all.
pub const MAX_FOLLOWERS: usize = 2;

/// A follower as a session record names it: its node, and after an `@`
/// the identity of its node log (a node restarted without its disk has a
/// new log, so a recovery never takes that empty log for the old one).
pub fn member_name(node: &str, log: &str) -> String {
  if log.is_empty() {
    node.to_string()
  } else {
    format!("{node}@{log}")
  }
}

/// The node and the log identity of a member name.
pub fn split_member(member: &str) -> (&str, &str) {
  member.split_once('@').unwrap_or((member, ""))
}

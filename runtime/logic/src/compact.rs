//! Snapshots within an epoch: what keeps a restore O(size of the database
//! + recent changes) instead of O(history).
//!
//! An epoch's chain opens with a snapshot at TXID 1 and then grows by one
//! level-0 object per commit. Every so often the owner also uploads the
//! whole database as of TXID `n` as one object covering `1..=n` (level
//! [`SNAPSHOT_LEVEL`], as Litestream names its snapshot level);
//! [`crate::restore::restore_chain`] takes the furthest-reaching object
//! that starts at TXID 1, so a restore reads that snapshot and the level-0
//! objects after it. The level-0 objects stay (point-in-time recovery reads
//! them; deleting history is epoch GC's business, not this module's).
//!
//! Two rules, both checked by the simulator:
//! * a snapshot labelled `n` holds exactly the state after TXID `n`: the
//!   shell takes it right after capturing `n`, before anything else
//!   commits ([`Compactor::on_capture`] says when);
//! * it is uploaded only once TXID `n` is durable
//!   ([`Compactor::on_durable`]), so a snapshot never carries a write the
//!   acknowledgement rule has not covered, and it is dropped when the cell
//!   breaks ([`Compactor::on_broken`]).

/// The level of a whole-database object within an epoch.
pub const SNAPSHOT_LEVEL: u32 = 9;

/// When a snapshot pays for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotPolicy {
  /// At least this many objects since the last snapshot: a tiny database
  /// is not re-uploaded every few commits.
  pub min_objects: u64,
  /// What one more object costs a restore, in bytes of transfer (a
  /// request's round trip at the bucket's bandwidth).
  pub object_cost: u64,
}

impl Default for SnapshotPolicy {
  fn default() -> Self {
    SnapshotPolicy {
      min_objects: 64,
      object_cost: 256 << 10,
    }
  }
}

impl SnapshotPolicy {
  /// Whether a tail of `objects` objects of `bytes` bytes after the last
  /// snapshot costs a restore at least twice what one snapshot of a
  /// `db_bytes` database costs. Snapshots then add at most half again to
  /// what the level-0 uploads cost, and a restore reads at most about
  /// three snapshots' worth.
  pub fn due(&self, objects: u64, bytes: u64, db_bytes: u64) -> bool {
    let tail = objects
      .saturating_mul(self.object_cost)
      .saturating_add(bytes);
    let snapshot = self.object_cost.saturating_add(db_bytes);
    objects >= self.min_objects && tail >= snapshot.saturating_mul(2)
  }
}

/// A snapshot taken and waiting for its TXID to become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
  /// The TXID whose state it holds.
  pub txid: u64,
  /// The position (see [`Compactor`]) at which that TXID is durable.
  pub at: u64,
  objects: u64,
  bytes: u64,
}

/// One cell's snapshot schedule within one epoch. Positions (`at`) only
/// grow and say when a commit is durable: a TXID, or the number of the
/// durability round that carries it.
#[derive(Clone, Debug)]
pub struct Compactor {
  policy: SnapshotPolicy,
  objects: u64,
  bytes: u64,
  pending: Option<Pending>,
  /// The next capture takes a snapshot whatever the policy says.
  owed: bool,
}

impl Compactor {
  /// A fresh epoch: its opening snapshot is the last one.
  pub fn new(policy: SnapshotPolicy) -> Self {
    Compactor {
      policy,
      objects: 0,
      bytes: 0,
      pending: None,
      owed: false,
    }
  }

  /// An epoch that paged in opened without a snapshot: the next capture
  /// takes one, so the epoch stops depending on the one it links to.
  pub fn owe(&mut self) {
    self.owed = true;
  }

  /// TXID `txid` was captured as an object of `ltx_bytes` bytes; the
  /// database is now `db_bytes` long, and the commit is durable at
  /// position `at`. `true`: take a snapshot of the state now, before
  /// anything else commits, and hold it until [`Compactor::on_durable`].
  pub fn on_capture(&mut self, txid: u64, ltx_bytes: u64, db_bytes: u64, at: u64) -> bool {
    self.objects += 1;
    self.bytes = self.bytes.saturating_add(ltx_bytes);
    // One at a time: a snapshot still waiting is not superseded, so a
    // busy cell whose rounds keep failing does not take one per commit.
    if self.pending.is_some() || !(self.owed || self.policy.due(self.objects, self.bytes, db_bytes))
    {
      return false;
    }
    self.owed = false;
    self.pending = Some(Pending {
      txid,
      at,
      objects: std::mem::take(&mut self.objects),
      bytes: std::mem::take(&mut self.bytes),
    });
    true
  }

  /// Everything through position `at` is durable: the snapshot to
  /// upload now (its `txid`), if one waited for it.
  pub fn on_durable(&mut self, at: u64) -> Option<Pending> {
    let p = self.pending.filter(|p| p.at <= at)?;
    self.pending = None;
    Some(p)
  }

  /// The cell broke (a write of it cannot be acknowledged): a snapshot
  /// waiting is dropped, never uploaded.
  pub fn on_broken(&mut self) {
    self.pending = None;
  }

  /// A snapshot's upload failed: its tail counts again, so the next
  /// capture takes another.
  pub fn on_upload_failed(&mut self, failed: Pending) {
    self.objects += failed.objects;
    self.bytes = self.bytes.saturating_add(failed.bytes);
  }

  /// The snapshot just granted could not be taken: its tail counts
  /// again, as after a failed upload.
  pub fn abandon(&mut self) {
    if let Some(p) = self.pending.take() {
      self.on_upload_failed(p);
    }
  }

  /// The snapshot waiting, if any.
  pub fn pending(&self) -> Option<Pending> {
    self.pending
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn small_databases_wait_for_the_minimum() {
    let p = SnapshotPolicy::default();
    assert!(!p.due(63, 63 << 12, 8 << 10));
    assert!(p.due(64, 64 << 12, 8 << 10));
  }

  #[test]
  fn large_databases_wait_for_twice_their_size() {
    let p = SnapshotPolicy::default();
    let db = 1 << 30;
    // 100 objects of 4 MiB: 400 MiB + 25 MiB of requests < 2 GiB.
    assert!(!p.due(100, 100 << 22, db));
    assert!(p.due(500, 500 << 22, db));
  }

  #[test]
  fn a_snapshot_waits_for_its_txid_and_one_waits_at_a_time() {
    let policy = SnapshotPolicy {
      min_objects: 2,
      object_cost: 0,
    };
    let mut c = Compactor::new(policy);
    assert!(!c.on_capture(2, 10, 10, 2));
    assert!(c.on_capture(3, 10, 10, 3));
    // Due again, but one is waiting.
    assert!(!c.on_capture(4, 10, 10, 4));
    assert!(!c.on_capture(5, 10, 10, 5));
    assert_eq!(c.on_durable(2), None);
    assert_eq!(c.on_durable(4).map(|p| p.txid), Some(3));
    assert_eq!(c.on_durable(9), None);
    // The tail since TXID 3 was counted while it waited.
    assert!(c.on_capture(6, 10, 10, 6));
    c.on_broken();
    assert_eq!(c.on_durable(6), None);
  }

  #[test]
  fn a_failed_upload_counts_its_tail_again() {
    let policy = SnapshotPolicy {
      min_objects: 3,
      object_cost: 0,
    };
    let mut c = Compactor::new(policy);
    assert!(!c.on_capture(2, 10, 10, 2));
    assert!(!c.on_capture(3, 10, 10, 3));
    assert!(c.on_capture(4, 10, 10, 4));
    let p = c.on_durable(4).unwrap();
    assert_eq!(p.txid, 4);
    c.on_upload_failed(p);
    assert!(c.on_capture(5, 10, 10, 5));
    c.abandon();
    assert_eq!(c.pending(), None);
    assert!(
      c.on_capture(6, 10, 10, 6),
      "the abandoned tail counts again"
    );
  }
}

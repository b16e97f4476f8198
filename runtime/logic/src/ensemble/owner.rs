//! The owner's side of the fleet proof: which followers each batch goes to,
//! when a batch is proven, and when the node falls back to the bucket.
//!
//! Each durability round of a node session is one batch (`id`, increasing).
//! [`FleetGate`] sends it to every member of the current log epoch and
//! proves it once every member stored it (members store in order, so the
//! smallest "stored through" among them covers the batch). Before the first
//! batch of a log epoch the session's record must name the epoch's members:
//! created with `If-None-Match: *` (a recovery's sealed fence makes that
//! fail), later changed by compare-and-swap. A member that fails, refuses
//! or answers out of order closes the log epoch: its unproven batches fall
//! back to the bucket proof (upload, then the ownership read), and later
//! batches go to a new log epoch of the remaining members and recruits.
//! With no follower available every batch takes the bucket proof. A
//! rejected record write, or a member that answers "sealed", means a
//! recovery fenced the session: nothing more is proven by the fleet.
//!
//! Batches settle in id order: a proven batch waits for the ones before
//! it, so acknowledgements never overtake. The bucket uploads continue in
//! the background ([`FleetGate::on_uploaded`]); members prune what the
//! bucket holds, and a closed log epoch whose batches are all uploaded is
//! marked drained in the record, so recovery no longer needs its members.

use std::collections::{BTreeMap, BTreeSet};

use super::MAX_FOLLOWERS;
use super::follower::AppendAnswer;
use super::record::{LogRecord, LogState};
use crate::{ReadResult, Token, WriteAnswer};

/// Members are told to prune once this many more batches are uploaded.
pub const PRUNE_EVERY: u64 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
  /// Waiting for the record to name a log epoch.
  Queued,
  Fleet {
    epoch: u32,
    seq: u64,
  },
  /// Waiting for its bucket proof.
  Bucket,
  Settled(bool),
}

#[derive(Clone, Debug)]
struct Current {
  n: u32,
  members: Vec<String>,
  next_seq: u64,
  stored: BTreeMap<String, u64>,
  /// The record says this epoch is active: its batches may be proven.
  active: bool,
}

impl Current {
  /// The batches every member stored.
  fn proven(&self) -> u64 {
    (self.members.iter())
      .map(|m| self.stored.get(m).copied().unwrap_or(0))
      .min()
      .unwrap_or(0)
  }
}

#[derive(Clone, Debug, Default)]
struct Progress {
  members: Vec<String>,
  /// Sent batches not yet uploaded.
  unuploaded: BTreeSet<u64>,
  last_seq: u64,
  pruned: u64,
  closed: bool,
  drained: bool,
}

/// A batch to send: `id`, as batch `seq` of log epoch `epoch`, to `member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
  pub member: String,
  pub epoch: u32,
  pub seq: u64,
  pub id: u64,
}

/// The record write to perform (`token: None`: create with
/// `If-None-Match: *`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordWrite {
  pub record: LogRecord,
  pub token: Option<Token>,
}

/// What the caller must do after feeding the gate; perform all of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateOut {
  pub sends: Vec<Send>,
  pub write_record: Option<RecordWrite>,
  /// Read the record back (after an ambiguous write); answer with
  /// [`FleetGate::on_record_read`].
  pub read_record: bool,
  /// Prove these batches through the bucket; answer with
  /// [`FleetGate::on_bucket_proof`].
  pub bucket: Vec<u64>,
  /// Batches settled, in id order: acknowledge (`true`) or fail.
  pub settled: Vec<(u64, bool)>,
  /// Tell `member` that batches of log epoch `epoch` up to `through` are in
  /// the bucket.
  pub prune: Vec<(String, u32, u64)>,
}

/// How the node proves writes now (its status says so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Durability {
  Fleet { members: Vec<String> },
  Bucket,
}

/// The fleet-proof gate of one node session.
#[derive(Clone, Debug)]
pub struct FleetGate {
  node: String,
  session: String,
  live: Vec<String>,
  record: Option<(LogRecord, Token)>,
  writing: Option<LogRecord>,
  fenced: bool,
  current: Option<Current>,
  /// Members of the last closed epoch still answering: kept first.
  keep: Vec<String>,
  failed: BTreeSet<String>,
  slots: BTreeMap<u64, Slot>,
  epochs: BTreeMap<u32, Progress>,
  /// Which log epoch and number each batch was sent as.
  sent_as: BTreeMap<u64, (u32, u64)>,
}

impl FleetGate {
  pub fn new(node: &str, session: &str) -> Self {
    FleetGate {
      node: node.into(),
      session: session.into(),
      live: Vec::new(),
      record: None,
      writing: None,
      fenced: false,
      current: None,
      keep: Vec::new(),
      failed: BTreeSet::new(),
      slots: BTreeMap::new(),
      epochs: BTreeMap::new(),
      sent_as: BTreeMap::new(),
    }
  }

  pub fn durability(&self) -> Durability {
    match &self.current {
      Some(c) if !self.fenced => Durability::Fleet {
        members: c.members.clone(),
      },
      _ => Durability::Bucket,
    }
  }

  pub fn is_fenced(&self) -> bool {
    self.fenced
  }

  /// The log epoch new batches go to, if one is current.
  pub fn current_epoch(&self) -> Option<u32> {
    self.current.as_ref().map(|c| c.n)
  }

  /// The live nodes that may follow (from their leases); this node is
  /// never its own follower. A node that failed as a member is tried again
  /// once it is live in a later call.
  pub fn set_live(&mut self, nodes: &[String]) {
    self.live = (nodes.iter())
      .filter(|n| super::split_member(n).0 != self.node)
      .cloned()
      .collect();
    self.failed.retain(|f| !self.live.contains(f));
  }

  /// Whether a batch committed now would try the fleet: not once fenced,
  /// nor with no log epoch current or forming and no follower to recruit.
  /// The caller may prove such a batch through the bucket without the gate.
  pub fn wants_fleet(&self) -> bool {
    !self.fenced
      && (self.current.is_some()
        || self.writing.is_some()
        || self.live.iter().any(|n| !self.failed.contains(n)))
  }

  /// A new batch (ids increase).
  pub fn on_commit(&mut self, id: u64) -> GateOut {
    let mut out = GateOut::default();
    if self.fenced {
      self.slots.insert(id, Slot::Bucket);
      out.bucket.push(id);
      return out;
    }
    if self.current.is_some() {
      self.slots.insert(id, Slot::Queued);
      self.send(id, &mut out);
      return out;
    }
    self.slots.insert(id, Slot::Queued);
    self.form(&mut out);
    out
  }

  fn send(&mut self, id: u64, out: &mut GateOut) {
    let c = self.current.as_mut().expect("a current log epoch");
    let seq = c.next_seq;
    c.next_seq += 1;
    self.slots.insert(id, Slot::Fleet { epoch: c.n, seq });
    self.sent_as.insert(id, (c.n, seq));
    let p = self.epochs.entry(c.n).or_default();
    p.unuploaded.insert(seq);
    p.last_seq = seq;
    for m in &c.members {
      out.sends.push(Send {
        member: m.clone(),
        epoch: c.n,
        seq,
        id,
      });
    }
  }

  /// Starts a new log epoch for the queued batches, or sends them to the
  /// bucket when no follower is available.
  fn form(&mut self, out: &mut GateOut) {
    if self.writing.is_some() {
      return;
    }
    let mut members: Vec<String> = self
      .keep
      .iter()
      .filter(|m| self.live.contains(m))
      .cloned()
      .collect();
    for n in &self.live {
      if members.len() >= MAX_FOLLOWERS {
        break;
      }
      if !members.contains(n) && !self.failed.contains(n) {
        members.push(n.clone());
      }
    }
    members.truncate(MAX_FOLLOWERS);
    if members.is_empty() {
      self.queued_to_bucket(out);
      self.flush(out);
      return;
    }
    let base = match &self.record {
      Some((r, _)) => r.clone(),
      None => LogRecord::open(&self.node, &self.session),
    };
    let record = base
      .with_epoch(members)
      .with_drained(&self.drained_unrecorded());
    self.write(record, out);
  }

  /// Writes what the record lacks, when no write is in flight: the drained
  /// log epochs (recovery then needs none of their members, which may never
  /// answer again: a node gone with its disk), and the current epoch as
  /// active once a batch of it is stored by every member (before that
  /// batch is proven).
  fn flush(&mut self, out: &mut GateOut) {
    if self.fenced || self.writing.is_some() {
      return;
    }
    let Some((r, _)) = &self.record else {
      return;
    };
    let mut next = r.with_drained(&self.drained_unrecorded());
    if let Some(c) = self
      .current
      .as_ref()
      .filter(|c| !c.active && c.proven() > 0)
    {
      next = next.with_active(c.n);
    }
    if next != *r {
      self.write(next, out);
    }
  }

  /// Drained log epochs the record still lists as active.
  fn drained_unrecorded(&self) -> Vec<u32> {
    let active = |n: u32| {
      self
        .record
        .as_ref()
        .is_some_and(|(r, _)| r.undrained().any(|e| e.n == n))
    };
    (self.epochs.iter())
      .filter(|(n, p)| p.drained && active(**n))
      .map(|(n, _)| *n)
      .collect()
  }

  fn write(&mut self, record: LogRecord, out: &mut GateOut) {
    self.writing = Some(record.clone());
    out.write_record = Some(RecordWrite {
      record,
      token: self.record.as_ref().map(|(_, t)| t.clone()),
    });
  }

  fn queued_to_bucket(&mut self, out: &mut GateOut) {
    for (id, s) in self.slots.iter_mut() {
      if *s == Slot::Queued {
        *s = Slot::Bucket;
        out.bucket.push(*id);
      }
    }
  }

  /// A member's answer to batch `seq` of log epoch `epoch`.
  pub fn on_append(&mut self, member: &str, epoch: u32, a: AppendAnswer) -> GateOut {
    let mut out = GateOut::default();
    match a {
      AppendAnswer::Stored { through } => {
        let Some(c) = self.current.as_mut().filter(|c| c.n == epoch) else {
          return out;
        };
        if !c.members.iter().any(|m| m == member) {
          return out;
        }
        let s = c.stored.entry(member.to_string()).or_insert(0);
        *s = (*s).max(through);
        // The first proof of an epoch waits for the record to say it is
        // active (`flush` asks for that).
        self.prove(&mut out);
        self.flush(&mut out);
      }
      AppendAnswer::Sealed => self.fence(&mut out),
      AppendAnswer::Gap { .. } => self.on_member_failed(member, epoch, &mut out),
    }
    out
  }

  /// A member did not answer (an error, a timeout) for log epoch `epoch`.
  pub fn on_member_error(&mut self, member: &str, epoch: u32) -> GateOut {
    let mut out = GateOut::default();
    self.on_member_failed(member, epoch, &mut out);
    out
  }

  fn on_member_failed(&mut self, member: &str, epoch: u32, out: &mut GateOut) {
    let Some(c) = self
      .current
      .as_ref()
      .filter(|c| c.n == epoch && c.members.iter().any(|m| m == member))
    else {
      return;
    };
    self.keep = c.members.iter().filter(|m| *m != member).cloned().collect();
    self.failed.insert(member.to_string());
    self.close_current(out);
    if self.slots.values().any(|s| *s == Slot::Queued) {
      self.form(out);
    }
    self.flush(out);
  }

  /// Closes the current log epoch: its unproven batches take the bucket
  /// proof.
  fn close_current(&mut self, out: &mut GateOut) {
    let Some(c) = self.current.take() else {
      return;
    };
    if let Some(p) = self.epochs.get_mut(&c.n) {
      p.closed = true;
      // Uploaded whole already: drained (the next record write says so).
      p.drained = p.unuploaded.is_empty();
    }
    for (id, s) in self.slots.iter_mut() {
      if matches!(*s, Slot::Fleet { epoch, .. } if epoch == c.n) {
        *s = Slot::Bucket;
        out.bucket.push(*id);
      }
    }
  }

  fn fence(&mut self, out: &mut GateOut) {
    if self.fenced {
      return;
    }
    self.fenced = true;
    self.writing = None;
    self.close_current(out);
    self.queued_to_bucket(out);
  }

  /// The answer to a record write.
  pub fn on_record_write(&mut self, a: WriteAnswer) -> GateOut {
    let mut out = GateOut::default();
    let Some(written) = self.writing.clone() else {
      return out;
    };
    match a {
      WriteAnswer::Applied(token) => self.applied(written, token, &mut out),
      // Only a recovery moves a session's record: it fenced us.
      WriteAnswer::Rejected => self.fence(&mut out),
      WriteAnswer::Ambiguous => out.read_record = true,
      WriteAnswer::Failed(_) => {
        self.writing = None;
        self.queued_to_bucket(&mut out);
        self.unactivated_to_bucket(&mut out);
      }
    }
    out
  }

  /// A record write that would have activated the current epoch failed:
  /// its batches take the bucket, and later ones a new epoch.
  fn unactivated_to_bucket(&mut self, out: &mut GateOut) {
    if self.current.as_ref().is_some_and(|c| !c.active) {
      self.close_current(out);
    }
  }

  /// The record read back after an ambiguous write.
  pub fn on_record_read(&mut self, r: ReadResult<LogRecord>) -> GateOut {
    let mut out = GateOut::default();
    let Some(written) = self.writing.clone() else {
      return out;
    };
    match r {
      Ok(Some((rec, token))) if rec == written => self.applied(written, token, &mut out),
      Ok(Some((rec, _))) if rec.state != LogState::Open => self.fence(&mut out),
      Ok(Some((rec, token))) => {
        // Ours did not apply; the record is as it was.
        self.record = Some((rec, token));
        self.writing = None;
        self.queued_to_bucket(&mut out);
        self.unactivated_to_bucket(&mut out);
      }
      Ok(None) => {
        self.writing = None;
        self.queued_to_bucket(&mut out);
        self.unactivated_to_bucket(&mut out);
      }
      // Unknown: read again; meanwhile the queued batches take the bucket.
      Err(_) => {
        self.queued_to_bucket(&mut out);
        out.read_record = true;
      }
    }
    out
  }

  fn applied(&mut self, record: LogRecord, token: Token, out: &mut GateOut) {
    self.writing = None;
    let latest = record.latest().cloned();
    self.record = Some((record, token));
    if self.current.is_none()
      && let Some(e) = latest
      && !self.epochs.contains_key(&e.n)
    {
      self.epochs.insert(
        e.n,
        Progress {
          members: e.members.clone(),
          ..Progress::default()
        },
      );
      self.current = Some(Current {
        n: e.n,
        members: e.members,
        next_seq: 1,
        stored: BTreeMap::new(),
        active: e.active,
      });
      let queued: Vec<u64> = (self.slots.iter())
        .filter(|(_, s)| **s == Slot::Queued)
        .map(|(id, _)| *id)
        .collect();
      for id in queued {
        self.send(id, out);
      }
    } else if self.current.is_none() && self.slots.values().any(|s| *s == Slot::Queued) {
      self.form(out);
    }
    let recorded_active = |n: u32| {
      (self.record.as_ref()).is_some_and(|(r, _)| r.epochs.iter().any(|e| e.n == n && e.active))
    };
    if let Some(n) = self.current.as_ref().filter(|c| !c.active).map(|c| c.n)
      && recorded_active(n)
    {
      if let Some(c) = self.current.as_mut() {
        c.active = true;
      }
      self.prove(out);
    }
    self.flush(out);
  }

  /// The bucket proof of batch `id` finished (`ok`: upload and ownership
  /// read passed).
  pub fn on_bucket_proof(&mut self, id: u64, ok: bool) -> GateOut {
    let mut out = GateOut::default();
    if let Some(s) = self.slots.get_mut(&id)
      && *s == Slot::Bucket
    {
      *s = Slot::Settled(ok);
    }
    self.settle(&mut out);
    out
  }

  /// Proves what every member of the active current epoch stored.
  fn prove(&mut self, out: &mut GateOut) {
    let Some(c) = self.current.as_ref().filter(|c| c.active) else {
      return;
    };
    let (epoch, proven) = (c.n, c.proven());
    for s in self.slots.values_mut() {
      if matches!(*s, Slot::Fleet { epoch: e, seq } if e == epoch && seq <= proven) {
        *s = Slot::Settled(true);
      }
    }
    self.settle(out);
  }

  fn settle(&mut self, out: &mut GateOut) {
    while let Some((&id, &Slot::Settled(ok))) = self.slots.iter().next() {
      self.slots.remove(&id);
      out.settled.push((id, ok));
    }
  }

  /// Every entry of batch `id` is in the bucket (its background upload).
  pub fn on_uploaded(&mut self, id: u64) -> GateOut {
    let mut out = GateOut::default();
    let Some((epoch, seq)) = self.sent_as.remove(&id) else {
      return out;
    };
    let Some(p) = self.epochs.get_mut(&epoch) else {
      return out;
    };
    p.unuploaded.remove(&seq);
    let through = p.unuploaded.first().map_or(p.last_seq, |s| s - 1);
    // Pruned in steps (or once closed): a call per round would double the
    // followers' load.
    if through >= p.pruned + PRUNE_EVERY || (p.closed && through > p.pruned) {
      p.pruned = through;
      for m in &p.members {
        out.prune.push((m.clone(), epoch, through));
      }
    }
    if p.closed && p.unuploaded.is_empty() {
      p.drained = true;
    }
    self.flush(&mut out);
    out
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn live(g: &mut FleetGate, nodes: &[&str]) {
    g.set_live(&nodes.iter().map(|s| s.to_string()).collect::<Vec<_>>());
  }

  fn applied(v: &str) -> WriteAnswer {
    WriteAnswer::Applied(Token::new(v))
  }

  #[test]
  fn a_batch_is_proven_when_every_member_stored_it() {
    let mut g = FleetGate::new("a", "a.1");
    live(&mut g, &["a", "b", "c", "d"]);
    let out = g.on_commit(1);
    let w = out.write_record.unwrap();
    assert_eq!(w.token, None, "the first record write is a create");
    assert_eq!(
      w.record.epochs[0].members,
      ["b", "c"],
      "never itself, at most two"
    );
    let out = g.on_record_write(applied("1"));
    assert_eq!(out.sends.len(), 2);
    assert_eq!(
      g.durability(),
      Durability::Fleet {
        members: vec!["b".into(), "c".into()]
      }
    );
    let out = g.on_commit(2);
    assert_eq!(out.sends.iter().map(|s| s.seq).collect::<Vec<_>>(), [2, 2]);
    assert!(
      g.on_append("b", 1, AppendAnswer::Stored { through: 2 })
        .settled
        .is_empty()
    );
    let out = g.on_append("c", 1, AppendAnswer::Stored { through: 1 });
    // Stored by every member, proven only once the record says the epoch
    // is active: recovery then knows to ask its members.
    assert!(out.settled.is_empty());
    let w = out
      .write_record
      .expect("the epoch is recorded active first");
    assert!(w.record.epochs[0].active);
    assert_eq!(w.token, Some(Token::new("1")));
    let out = g.on_record_write(applied("2"));
    assert_eq!(out.settled, [(1, true)]);
    let out = g.on_append("c", 1, AppendAnswer::Stored { through: 2 });
    assert_eq!(out.settled, [(2, true)]);
    assert!(out.write_record.is_none(), "once per epoch");
  }

  #[test]
  fn an_epoch_whose_activation_fails_takes_the_bucket() {
    let mut g = FleetGate::new("a", "a.1");
    live(&mut g, &["b"]);
    g.on_commit(1);
    g.on_record_write(applied("1"));
    assert!(
      g.on_append("b", 1, AppendAnswer::Stored { through: 1 })
        .write_record
        .is_some()
    );
    let out = g.on_record_write(WriteAnswer::Failed(crate::StoreError("down".into())));
    assert_eq!(out.bucket, [1]);
    assert!(out.settled.is_empty());
    // A recovery that fenced the record first: fenced for good.
    let mut g = FleetGate::new("a", "a.2");
    live(&mut g, &["b"]);
    g.on_commit(1);
    g.on_record_write(applied("1"));
    g.on_append("b", 1, AppendAnswer::Stored { through: 1 });
    assert_eq!(g.on_record_write(WriteAnswer::Rejected).bucket, [1]);
    assert!(g.is_fenced());
  }

  #[test]
  fn a_failed_member_closes_the_epoch_and_its_unproven_batches_take_the_bucket() {
    let mut g = FleetGate::new("a", "a.1");
    live(&mut g, &["b", "c"]);
    g.on_commit(1);
    g.on_record_write(applied("1"));
    g.on_commit(2);
    g.on_append("b", 1, AppendAnswer::Stored { through: 2 });
    let out = g.on_member_error("c", 1);
    assert_eq!(out.bucket, [1, 2]);
    // The next batch waits for a log epoch of the remaining member.
    live(&mut g, &["b"]);
    let out = g.on_commit(3);
    let w = out.write_record.unwrap();
    assert_eq!(w.token, Some(Token::new("1")));
    assert_eq!(w.record.latest().unwrap().members, ["b"]);
    let out = g.on_record_write(applied("2"));
    assert_eq!(out.sends[0].seq, 1);
    // Proven (once recorded active), but acknowledged only after the
    // batches before it.
    assert!(
      g.on_append("b", 2, AppendAnswer::Stored { through: 1 })
        .settled
        .is_empty()
    );
    assert!(g.on_record_write(applied("3")).settled.is_empty());
    assert!(g.on_bucket_proof(2, true).settled.is_empty());
    assert_eq!(
      g.on_bucket_proof(1, true).settled,
      [(1, true), (2, true), (3, true)]
    );
  }

  #[test]
  fn without_followers_or_once_fenced_every_batch_takes_the_bucket() {
    let mut g = FleetGate::new("a", "a.1");
    live(&mut g, &["a", "a@7f"]);
    assert!(!g.wants_fleet(), "never its own follower");
    assert_eq!(g.on_commit(1).bucket, [1]);
    assert_eq!(g.durability(), Durability::Bucket);
    live(&mut g, &["b"]);
    g.on_commit(2);
    // A recovery created the record sealed first.
    let out = g.on_record_write(WriteAnswer::Rejected);
    assert_eq!(out.bucket, [2]);
    assert!(g.is_fenced());
    assert!(!g.wants_fleet());
    assert_eq!(g.on_commit(3).bucket, [3]);
    // A member answering "sealed" fences too.
    let mut g = FleetGate::new("a", "a.2");
    live(&mut g, &["b"]);
    g.on_commit(1);
    g.on_record_write(applied("1"));
    assert_eq!(g.on_append("b", 1, AppendAnswer::Sealed).bucket, [1]);
    assert!(g.is_fenced());
  }

  #[test]
  fn an_epoch_closed_after_its_uploads_is_recorded_drained_at_once() {
    let mut g = FleetGate::new("a", "a.1");
    live(&mut g, &["b"]);
    g.on_commit(1);
    g.on_record_write(applied("1"));
    g.on_uploaded(1);
    let out = g.on_member_error("b", 1);
    let w = out
      .write_record
      .expect("the drained epoch is recorded without waiting for a batch");
    assert!(w.record.epochs.iter().all(|e| e.drained));
  }

  #[test]
  fn uploads_prune_members_and_mark_a_closed_epoch_drained() {
    let mut g = FleetGate::new("a", "a.1");
    live(&mut g, &["b", "c"]);
    g.on_commit(1);
    g.on_record_write(applied("1"));
    let last = PRUNE_EVERY + 1;
    for id in 2..=last {
      g.on_commit(id);
    }
    for id in 2..=last {
      assert!(g.on_uploaded(id).prune.is_empty(), "1 is not uploaded yet");
    }
    let out = g.on_uploaded(1);
    assert_eq!(out.prune, [("b".into(), 1, last), ("c".into(), 1, last)]);
    // The closed epoch was uploaded whole: recorded drained at once.
    assert!(g.on_member_error("b", 1).write_record.is_some());
    g.on_record_write(applied("2"));
    live(&mut g, &["c"]);
    let out = g.on_commit(3);
    let w = out.write_record.unwrap();
    // The closed epoch was uploaded whole: drained, and dropped.
    assert_eq!(w.record.epochs.len(), 1);
    assert_eq!(w.record.epochs[0].n, 2);
  }
}

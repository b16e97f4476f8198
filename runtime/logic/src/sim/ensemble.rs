//! A seeded simulator of the follower ensemble and the takeover recovery
//! gate ([`crate::ensemble`]).
//!
//! Three or four nodes; each owns cells and is a follower of the others.
//! Clients write to the node the ownership record names, and sometimes to
//! the one it named before (a stale route). An owner commits each write as
//! one batch, sends it to its ensemble through [`FleetGate`] and uploads it
//! to the bucket in the background; the bucket proof (upload, then the
//! ownership read) covers what the fleet cannot. Follower appends take an
//! fsync's time; messages are delayed or lost (the sender times out). Faults:
//! followers and owners crash (an append being fsynced can be left torn on
//! disk) and restart as a new session, a stored batch can rot on disk, some
//! followers run the old code (entries-only `CLT1` tails), and takeovers
//! move a cell while its owner still runs: the stale owner keeps committing
//! until it fences a while later. Every takeover passes the recovery gate
//! ([`Recovery`]) for the session the record named, then restores the cell
//! from the bucket.
//!
//! Checked: every acknowledged write is in every restore of a later epoch
//! of its cell (at each takeover, at each late acknowledgement, and in a
//! final takeover by a fresh node once every node is back), unless a loss
//! record covers its batch; and the final recoveries complete.
//! [`EnsembleFlaw`] lists the shell's mistakes that must be caught.

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::rng::Rng;
use crate::ensemble::follower::{AppendAnswer, Batch, Scanned, SessionLog, Tail, TailFormat};
use crate::ensemble::owner::{FleetGate, GateOut};
use crate::ensemble::record::LogRecord;
use crate::ensemble::recovery::{MemberAnswer, Recovery, RecoveryStep};
use crate::{Token, WriteAnswer};

/// Mistakes the I/O shell around [`crate::ensemble`] could make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnsembleFlaw {
  /// Acknowledge a batch on the first member's "stored", not on the gate's
  /// settlement.
  AckOnFirstStore,
  /// Read the tails without sealing the members.
  TailWithoutSeal,
  /// Restore as soon as the record is fenced, gathering the tail after.
  RestoreBeforeRecovery,
  /// Take an absent record as proof, without creating it sealed.
  TrustAbsentRecord,
  /// Take an entries-only (`CLT1`) tail as complete.
  TrustEntriesOnly,
  /// A follower seals in memory only: a restart forgets the seal.
  SealNotPersisted,
  /// Use a new log epoch's members without the record naming them.
  EpochWithoutRecord,
  /// A follower answers calls meant for a log its node lost with its disk
  /// (its new, empty log passes for a complete one).
  IgnoreLogIdentity,
  /// Write the ownership record first and recover after: a taker that dies
  /// in between leaves a record naming only itself.
  CasBeforeRecovery,
  /// A follower stores a batch that does not follow what it holds (as if
  /// the missing ones were pruned).
  AcceptGap,
  /// The record never says an epoch is active (the owner proves anyway):
  /// recovery then skips epochs that did prove writes.
  ActiveNotRecorded,
}

impl EnsembleFlaw {
  pub const ALL: [EnsembleFlaw; 11] = [
    EnsembleFlaw::AckOnFirstStore,
    EnsembleFlaw::TailWithoutSeal,
    EnsembleFlaw::RestoreBeforeRecovery,
    EnsembleFlaw::TrustAbsentRecord,
    EnsembleFlaw::TrustEntriesOnly,
    EnsembleFlaw::SealNotPersisted,
    EnsembleFlaw::EpochWithoutRecord,
    EnsembleFlaw::AcceptGap,
    EnsembleFlaw::IgnoreLogIdentity,
    EnsembleFlaw::CasBeforeRecovery,
    EnsembleFlaw::ActiveNotRecorded,
  ];
}

/// (cell, cell epoch, TXID, write): what a batch carries.
type Entry = (usize, u64, u64, u64);

/// How a batch was sent: (owner session, log epoch, batch number).
type SentAs = (String, u32, u64);

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnsembleStats {
  pub writes: u64,
  pub fleet_acks: u64,
  pub bucket_acks: u64,
  pub failed: u64,
  pub takeovers: u64,
  pub recovered_entries: u64,
  pub absent_fences: u64,
  pub sealed_refusals: u64,
  pub torn: u64,
  pub rotted: u64,
  pub losses: u64,
  pub crashes: u64,
  pub epoch_changes: u64,
  /// Crashes that lost the node's disk (its node log).
  pub wipes: u64,
}

const TIMEOUT: u64 = 120;

#[derive(Default)]
struct Disk {
  sealed: bool,
  items: Vec<Scanned<Entry>>,
}

struct Follow {
  disk: Disk,
  mem: SessionLog<Entry>,
  /// In-memory seal of the `SealNotPersisted` flaw.
  sealed_mem: bool,
}

struct Owned {
  epoch: u64,
  next_txid: u64,
}

struct Node {
  up: bool,
  inc: u32,
  /// The node log's identity; a new one after a wipe.
  log_id: u32,
  old_code: bool,
  down_since: u64,
  /// Owner session state.
  gate: FleetGate,
  cells: BTreeMap<usize, Owned>,
  batches: BTreeMap<u64, Entry>,
  uploaded: BTreeSet<u64>,
  bucket_wait: BTreeSet<u64>,
  acked_early: BTreeSet<u64>,
  next_id: u64,
  /// Follower logs per owner session.
  logs: BTreeMap<String, Follow>,
  /// Appends stored in memory, waiting for their fsync (FIFO).
  fsyncs: Vec<(String, Batch<Entry>, String)>,
}

fn name(n: usize) -> String {
  format!("n{n}")
}

/// A follower as the record names it: the node and its log's identity.
fn member(n: usize, log: u32) -> String {
  format!("n{n}@{log}")
}

fn parse_member(m: &str) -> (usize, u32) {
  let (n, l) = m[1..].split_once('@').unwrap();
  (n.parse().unwrap(), l.parse().unwrap())
}

fn session(n: usize, inc: u32) -> String {
  format!("n{n}.{inc}")
}

#[derive(Clone, Debug)]
enum Ev {
  Write(usize),
  Append {
    owner: usize,
    oinc: u32,
    to: usize,
    log: u32,
    batch: Batch<Entry>,
  },
  Fsynced {
    node: usize,
    inc: u32,
  },
  Reply {
    owner: usize,
    oinc: u32,
    member: String,
    epoch: u32,
    answer: Option<AppendAnswer>,
  },
  Prune {
    to: usize,
    log: u32,
    session: String,
    epoch: u32,
    through: u64,
  },
  Uploaded {
    node: usize,
    inc: u32,
    id: u64,
  },
  Crash(usize),
  Restart(usize),
  Takeover(usize),
  /// A restarted node takes back a cell its previous session held.
  Reclaim {
    cell: usize,
    node: usize,
    inc: u32,
  },
  Tail {
    rec: usize,
    to: usize,
    log: u32,
  },
  TailReply {
    rec: usize,
    member: String,
    answer: MemberAnswer<Entry>,
  },
  Step {
    rec: usize,
  },
}

struct Item {
  at: u64,
  seq: u64,
  ev: Ev,
}
impl PartialEq for Item {
  fn eq(&self, o: &Self) -> bool {
    (self.at, self.seq) == (o.at, o.seq)
  }
}
impl Eq for Item {}
impl PartialOrd for Item {
  fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
    Some(self.cmp(o))
  }
}
impl Ord for Item {
  fn cmp(&self, o: &Self) -> std::cmp::Ordering {
    (o.at, o.seq).cmp(&(self.at, self.seq))
  }
}

struct Rec {
  cell: usize,
  taker: usize,
  tinc: u32,
  prior: (usize, String, u64),
  m: Recovery<Entry>,
  next: Option<RecoveryStep<Entry>>,
  answers: BTreeMap<String, MemberAnswer<Entry>>,
  asked: usize,
  restored: bool,
  /// Its taker crashed: the acquisition ended with it.
  abandoned: bool,
}

struct World {
  rng: Rng,
  flaw: Option<EnsembleFlaw>,
  now: u64,
  seq: u64,
  q: BinaryHeap<Item>,
  nodes: Vec<Node>,
  /// Per cell: (node, session, epoch) the ownership record names, the
  /// previous owner, and whether a takeover is under way.
  own: Vec<(usize, String, u64)>,
  prev: Vec<Option<usize>>,
  busy: Vec<bool>,
  records: BTreeMap<String, (LogRecord, u64)>,
  ltx: BTreeMap<(usize, u64, u64), u64>,
  bases: BTreeMap<(usize, u64), Vec<u64>>,
  /// Loss records: (session, log epoch, first uncertified batch).
  losses: Vec<(String, u32, u64)>,
  recs: Vec<Rec>,
  /// Acknowledged writes: write → (cell, epoch, sent as (session, log epoch, seq)).
  acked: BTreeMap<u64, (usize, u64, Option<SentAs>)>,
  /// Batch id → how it was sent, per owner session.
  sent_as: BTreeMap<(String, u64), (u32, u64)>,
  restores: BTreeMap<(usize, u64), BTreeSet<u64>>,
  next_w: u64,
  end: u64,
  violations: Vec<String>,
  stats: EnsembleStats,
  trace: bool,
}

/// Runs one seed; `Err` names the first violation.
pub fn run_ensemble(seed: u64, flaw: Option<EnsembleFlaw>) -> Result<EnsembleStats, String> {
  let mut rng = Rng::new(seed);
  let n = 3 + rng.below(2) as usize;
  let cells = 1 + rng.below(2) as usize;
  let mut w = World {
    flaw,
    now: 0,
    seq: 0,
    q: BinaryHeap::new(),
    nodes: (0..n)
      .map(|i| Node {
        up: true,
        inc: 0,
        log_id: 0,
        old_code: i > 0 && rng.chance(300),
        down_since: 0,
        gate: FleetGate::new(&name(i), &session(i, 0)),
        cells: BTreeMap::new(),
        batches: BTreeMap::new(),
        uploaded: BTreeSet::new(),
        bucket_wait: BTreeSet::new(),
        acked_early: BTreeSet::new(),
        next_id: 1,
        logs: BTreeMap::new(),
        fsyncs: Vec::new(),
      })
      .collect(),
    own: (0..cells).map(|c| (c % n, session(c % n, 0), 1)).collect(),
    prev: vec![None; cells],
    busy: vec![false; cells],
    records: BTreeMap::new(),
    ltx: BTreeMap::new(),
    bases: BTreeMap::new(),
    losses: Vec::new(),
    recs: Vec::new(),
    acked: BTreeMap::new(),
    sent_as: BTreeMap::new(),
    restores: BTreeMap::new(),
    next_w: 1,
    end: 6_000 + rng.below(6_000),
    violations: Vec::new(),
    stats: EnsembleStats::default(),
    trace: std::env::var_os("CELLHOST_SIM_TRACE").is_some(),
    rng,
  };
  for c in 0..cells {
    w.bases.insert((c, 1), Vec::new());
    let o = c % n;
    w.nodes[o].cells.insert(
      c,
      Owned {
        epoch: 1,
        next_txid: 1,
      },
    );
    w.push(10 + c as u64, Ev::Write(c));
  }
  let end = w.end;
  for i in 0..n {
    let crashes = w.rng.below(4);
    for _ in 0..crashes {
      let at = w.rng.range(100, end);
      w.push(at, Ev::Crash(i));
    }
  }
  for _ in 0..w.rng.range(1, 5) {
    let at = w.rng.range(200, end);
    let c = w.rng.below(cells as u64) as usize;
    w.push(at, Ev::Takeover(c));
  }
  w.run(end);
  w.finish();
  match w.violations.first() {
    Some(v) => Err(format!("seed {seed} flaw {flaw:?}: {v}")),
    None => Ok(w.stats),
  }
}

impl World {
  fn push(&mut self, at: u64, ev: Ev) {
    self.seq += 1;
    self.q.push(Item {
      at,
      seq: self.seq,
      ev,
    });
  }

  fn after(&mut self, lo: u64, hi: u64, ev: Ev) {
    let at = self.now + self.rng.range(lo, hi);
    self.push(at, ev);
  }

  fn run(&mut self, until: u64) {
    while let Some(it) = self.q.pop() {
      if it.at > until {
        self.q.push(it);
        break;
      }
      self.now = it.at;
      if self.trace {
        eprintln!("{:>6} {:?}", self.now, it.ev);
      }
      self.handle(it.ev);
      if !self.violations.is_empty() {
        return;
      }
    }
  }

  fn live(&self) -> Vec<String> {
    (0..self.nodes.len())
      .filter(|&i| self.nodes[i].up || self.now < self.nodes[i].down_since + 300)
      .map(|i| member(i, self.nodes[i].log_id))
      .collect()
  }

  /// Whether node `n`'s follower answers a call meant for log `log`.
  fn knows(&self, n: usize, log: u32) -> bool {
    self.nodes[n].log_id == log || self.flaw == Some(EnsembleFlaw::IgnoreLogIdentity)
  }

  fn handle(&mut self, ev: Ev) {
    match ev {
      Ev::Write(c) => self.on_write(c),
      Ev::Append {
        owner,
        oinc,
        to,
        log,
        batch,
      } => self.on_append(owner, oinc, to, log, batch),
      Ev::Fsynced { node, inc } => self.on_fsynced(node, inc),
      Ev::Reply {
        owner,
        oinc,
        member,
        epoch,
        answer,
      } => self.on_reply(owner, oinc, member, epoch, answer),
      Ev::Prune {
        to,
        log,
        session,
        epoch,
        through,
      } => {
        if self.nodes[to].up
          && self.nodes[to].log_id == log
          && let Some(f) = self.nodes[to].logs.get_mut(&session)
        {
          f.mem.prune(epoch, through);
          f.disk.items.push(Scanned::Pruned { epoch, through });
        }
      }
      Ev::Uploaded { node, inc, id } => self.on_uploaded(node, inc, id),
      Ev::Crash(n) => self.crash(n),
      Ev::Restart(n) => self.restart(n),
      Ev::Takeover(c) => self.takeover(c),
      Ev::Reclaim { cell, node, inc } => {
        let prior = self.own[cell].clone();
        if !self.busy[cell]
          && self.nodes[node].up
          && self.nodes[node].inc == inc
          && prior.0 == node
          && prior.1 != session(node, inc)
        {
          self.start_recovery(cell, node, prior);
        }
      }
      Ev::Tail { rec, to, log } => self.on_tail(rec, to, log),
      Ev::TailReply {
        rec,
        member,
        answer,
      } => {
        self.recs[rec].answers.insert(member, answer);
        if self.recs[rec].answers.len() == self.recs[rec].asked && !self.recs[rec].abandoned {
          let answers = std::mem::take(&mut self.recs[rec].answers);
          let s = self.recs[rec].m.on_tails(&answers);
          self.drive(rec, s);
        }
      }
      Ev::Step { rec } => {
        if let Some(s) = self.recs[rec].next.take()
          && !self.recs[rec].abandoned
        {
          self.drive(rec, s);
        }
      }
    }
  }

  // --- the owner ---

  fn on_write(&mut self, c: usize) {
    if self.now < self.end {
      self.after(5, 60, Ev::Write(c));
    }
    let target = match self.prev[c] {
      Some(p) if self.rng.chance(250) => p,
      _ => self.own[c].0,
    };
    let node = &mut self.nodes[target];
    if !node.up {
      return;
    }
    let Some(o) = node.cells.get_mut(&c) else {
      return;
    };
    let (epoch, txid) = (o.epoch, o.next_txid);
    o.next_txid += 1;
    let w = self.next_w;
    self.next_w += 1;
    self.stats.writes += 1;
    let id = node.next_id;
    node.next_id += 1;
    node.batches.insert(id, (c, epoch, txid, w));
    let live = self.live();
    let node = &mut self.nodes[target];
    node.gate.set_live(&live);
    let out = node.gate.on_commit(id);
    let inc = node.inc;
    self.after(
      15,
      250,
      Ev::Uploaded {
        node: target,
        inc,
        id,
      },
    );
    self.perform(target, out);
  }

  fn perform(&mut self, n: usize, mut out: GateOut) {
    let inc = self.nodes[n].inc;
    let me = session(n, inc);
    if let Some(wr) = out.write_record.take() {
      let applied = if self.flaw == Some(EnsembleFlaw::EpochWithoutRecord) && wr.token.is_some() {
        WriteAnswer::Applied(Token::new("unwritten"))
      } else if self.flaw == Some(EnsembleFlaw::ActiveNotRecorded) {
        // Stored without the activation; the owner is told it applied.
        let mut stored = wr.record.clone();
        stored.epochs.iter_mut().for_each(|e| e.active = false);
        self.write_record(&me, stored, wr.token)
      } else {
        self.write_record(&me, wr.record.clone(), wr.token)
      };
      let ambiguous = self.rng.chance(100);
      let o2 = if ambiguous {
        let o = self.nodes[n].gate.on_record_write(WriteAnswer::Ambiguous);
        self.perform(
          n,
          GateOut {
            read_record: false,
            ..o
          },
        );
        let read = self
          .records
          .get(&me)
          .map(|(r, v)| (r.clone(), Token::new(v.to_string())));
        self.nodes[n].gate.on_record_read(Ok(read))
      } else {
        if matches!(applied, WriteAnswer::Rejected) {
          self.stats.sealed_refusals += 1;
        }
        self.nodes[n].gate.on_record_write(applied)
      };
      self.perform(n, o2);
    }
    for s in out.sends {
      self.stats.epoch_changes += u64::from(s.seq == 1);
      let (to, log) = parse_member(&s.member);
      let e = self.nodes[n].batches[&s.id];
      self.sent_as.insert((me.clone(), s.id), (s.epoch, s.seq));
      let batch = Batch {
        epoch: s.epoch,
        seq: s.seq,
        entries: vec![e],
      };
      if self.rng.chance(30) {
        self.push(
          self.now + TIMEOUT,
          Ev::Reply {
            owner: n,
            oinc: inc,
            member: s.member.clone(),
            epoch: s.epoch,
            answer: None,
          },
        );
      } else {
        self.after(
          1,
          20,
          Ev::Append {
            owner: n,
            oinc: inc,
            to,
            log,
            batch,
          },
        );
      }
    }
    for id in out.bucket {
      if self.nodes[n].uploaded.contains(&id) {
        self.bucket_proof(n, id);
      } else {
        self.nodes[n].bucket_wait.insert(id);
      }
    }
    for (id, ok) in out.settled {
      self.settle(n, id, ok);
    }
    for (m, epoch, through) in out.prune {
      let (to, log) = parse_member(&m);
      self.after(
        1,
        20,
        Ev::Prune {
          to,
          log,
          session: me.clone(),
          epoch,
          through,
        },
      );
    }
  }

  fn write_record(&mut self, key: &str, record: LogRecord, token: Option<Token>) -> WriteAnswer {
    let cur = self.records.get(key).map(|(_, v)| *v);
    let ok = match (&token, cur) {
      (None, None) => true,
      (Some(t), Some(v)) => t.0 == v.to_string(),
      _ => false,
    };
    if !ok {
      return WriteAnswer::Rejected;
    }
    let v = cur.unwrap_or(0) + 1;
    self.records.insert(key.to_string(), (record, v));
    WriteAnswer::Applied(Token::new(v.to_string()))
  }

  fn bucket_proof(&mut self, n: usize, id: u64) {
    let (c, epoch, _, _) = self.nodes[n].batches[&id];
    let me = (n, session(n, self.nodes[n].inc), epoch);
    let ok = self.own[c] == me;
    let out = self.nodes[n].gate.on_bucket_proof(id, ok);
    self.perform(n, out);
  }

  fn on_uploaded(&mut self, n: usize, inc: u32, id: u64) {
    let node = &mut self.nodes[n];
    if !node.up || node.inc != inc {
      return;
    }
    let (c, epoch, txid, w) = node.batches[&id];
    self.ltx.insert((c, epoch, txid), w);
    node.uploaded.insert(id);
    let out = node.gate.on_uploaded(id);
    let wait = node.bucket_wait.remove(&id);
    self.perform(n, out);
    if wait {
      self.bucket_proof(n, id);
    }
  }

  fn settle(&mut self, n: usize, id: u64, ok: bool) {
    let (c, epoch, _, w) = self.nodes[n].batches[&id];
    let held = self.nodes[n]
      .cells
      .get(&c)
      .is_some_and(|o| o.epoch == epoch);
    if !ok || !held {
      // A failed batch breaks the cell: nothing after it is acknowledged.
      self.stats.failed += 1;
      if self.nodes[n]
        .cells
        .get(&c)
        .is_some_and(|o| o.epoch == epoch)
      {
        self.nodes[n].cells.remove(&c);
      }
      return;
    }
    if self.nodes[n].acked_early.remove(&id) {
      return;
    }
    self.ack(n, id, c, epoch, w);
  }

  fn ack(&mut self, n: usize, id: u64, c: usize, epoch: u64, w: u64) {
    let me = session(n, self.nodes[n].inc);
    let sent = self
      .sent_as
      .get(&(me.clone(), id))
      .map(|&(e, s)| (me, e, s));
    if sent.is_some() && !self.nodes[n].uploaded.contains(&id) {
      self.stats.fleet_acks += 1;
    } else {
      self.stats.bucket_acks += 1;
    }
    self.acked.insert(w, (c, epoch, sent));
    // A late acknowledgement must be in every restore that came after.
    let later: Vec<_> = (self.restores.iter())
      .filter(|((rc, re), st)| *rc == c && *re > epoch && !st.contains(&w))
      .map(|(k, _)| *k)
      .collect();
    for (rc, re) in later {
      if !self.loss_covers(w) {
        self.violation(format!("write {w} acknowledged in cell {rc} epoch {epoch} after the restore of epoch {re}, which lacks it"));
      }
    }
  }

  fn on_reply(
    &mut self,
    owner: usize,
    oinc: u32,
    member: String,
    epoch: u32,
    answer: Option<AppendAnswer>,
  ) {
    let node = &mut self.nodes[owner];
    if !node.up || node.inc != oinc {
      return;
    }
    let out = match answer {
      Some(a) => {
        if self.flaw == Some(EnsembleFlaw::AckOnFirstStore)
          && let AppendAnswer::Stored { through } = a
        {
          self.ack_first_store(owner, epoch, through);
        }
        self.nodes[owner].gate.on_append(&member, epoch, a)
      }
      None => self.nodes[owner].gate.on_member_error(&member, epoch),
    };
    self.perform(owner, out);
  }

  fn ack_first_store(&mut self, owner: usize, epoch: u32, through: u64) {
    let me = session(owner, self.nodes[owner].inc);
    let ids: Vec<u64> = (self.sent_as.iter())
      .filter(|((s, _), (e, q))| *s == me && *e == epoch && *q <= through)
      .map(|((_, id), _)| *id)
      .collect();
    for id in ids {
      let node = &mut self.nodes[owner];
      let Some(&(c, ce, _, w)) = node.batches.get(&id) else {
        continue;
      };
      if self.acked.contains_key(&w) || node.acked_early.contains(&id) {
        continue;
      }
      if node.cells.get(&c).is_some_and(|o| o.epoch == ce) {
        node.acked_early.insert(id);
        self.ack(owner, id, c, ce, w);
      }
    }
  }

  // --- the follower ---

  fn on_append(&mut self, owner: usize, oinc: u32, to: usize, log: u32, batch: Batch<Entry>) {
    let m = member(to, log);
    if !self.nodes[to].up || !self.knows(to, log) {
      // Down (the caller times out), or a new log refusing calls meant
      // for the one its node lost (an error answer).
      let after = if self.nodes[to].up { 5 } else { TIMEOUT };
      self.push(
        self.now + after,
        Ev::Reply {
          owner,
          oinc,
          member: m,
          epoch: batch.epoch,
          answer: None,
        },
      );
      return;
    }
    let node = &mut self.nodes[to];
    let s = session(owner, oinc);
    let f = node.logs.entry(s.clone()).or_insert_with(|| Follow {
      disk: Disk::default(),
      mem: SessionLog::new(),
      sealed_mem: false,
    });
    let epoch = batch.epoch;
    let sealed_mem = f.sealed_mem;
    let mut answer = f.mem.append(batch.clone());
    if sealed_mem && !matches!(answer, AppendAnswer::Sealed) {
      answer = AppendAnswer::Sealed;
    }
    if self.flaw == Some(EnsembleFlaw::AcceptGap) && matches!(answer, AppendAnswer::Gap { .. }) {
      f.mem.prune(epoch, batch.seq - 1);
      answer = f.mem.append(batch.clone());
    }
    match answer {
      AppendAnswer::Stored { .. } => {
        let fresh = !node
          .fsyncs
          .iter()
          .any(|(ss, b, _)| *ss == s && b.epoch == epoch && b.seq == batch.seq);
        if fresh {
          node.fsyncs.push((s, batch, m));
        }
        let inc = node.inc;
        self.after(1, 6, Ev::Fsynced { node: to, inc });
      }
      a => {
        self.after(
          1,
          20,
          Ev::Reply {
            owner,
            oinc,
            member: m,
            epoch,
            answer: Some(a),
          },
        );
      }
    }
  }

  fn on_fsynced(&mut self, n: usize, inc: u32) {
    let node = &mut self.nodes[n];
    if !node.up || node.inc != inc || node.fsyncs.is_empty() {
      return;
    }
    let (s, b, m) = node.fsyncs.remove(0);
    let f = node.logs.get_mut(&s).unwrap();
    f.disk.items.push(Scanned::Batch(b.clone()));
    let epoch = b.epoch;
    // Only what is on disk counts: the contiguous end of the fsynced batches.
    let through = disk_through(&f.disk, epoch);
    let (own_n, own_inc) = parse_session(&s);
    self.after(
      1,
      20,
      Ev::Reply {
        owner: own_n,
        oinc: own_inc,
        member: m,
        epoch,
        answer: Some(AppendAnswer::Stored { through }),
      },
    );
  }

  fn crash(&mut self, n: usize) {
    let wipe = self.rng.chance(150);
    let node = &mut self.nodes[n];
    if !node.up {
      return;
    }
    self.stats.crashes += 1;
    node.up = false;
    node.down_since = self.now;
    // The append being fsynced may be left torn.
    if let Some((s, b, _)) = node.fsyncs.first().cloned()
      && self.rng.chance(500)
    {
      self.stats.torn += 1;
      node
        .logs
        .get_mut(&s)
        .unwrap()
        .disk
        .items
        .push(Scanned::Damaged {
          at: Some((b.epoch, b.seq)),
        });
    }
    node.fsyncs.clear();
    // Its acquisitions under way end with it.
    for r in self.recs.iter_mut() {
      if r.taker == n && !r.restored && !r.abandoned {
        r.abandoned = true;
        self.busy[r.cell] = false;
      }
    }
    let node = &mut self.nodes[n];
    if wipe {
      // The disk is gone: a new, empty node log with a new identity.
      self.stats.wipes += 1;
      node.logs.clear();
      node.log_id += 1;
    }
    let at = self.now + self.rng.range(50, 1_500);
    self.push(at, Ev::Restart(n));
  }

  fn restart(&mut self, n: usize) {
    let rot = self.rng.chance(200);
    let node = &mut self.nodes[n];
    if node.up {
      return;
    }
    node.up = true;
    node.inc += 1;
    node.gate = FleetGate::new(&name(n), &session(n, node.inc));
    node.cells.clear();
    node.batches.clear();
    node.uploaded.clear();
    node.bucket_wait.clear();
    node.acked_early.clear();
    node.next_id = 1;
    // Bit rot: the newest batch of one session's log.
    let victim = rot.then(|| node.logs.keys().next_back().cloned()).flatten();
    for (s, f) in node.logs.iter_mut() {
      if victim.as_ref() == Some(s)
        && let Some(i) = f
          .disk
          .items
          .iter()
          .rposition(|x| matches!(x, Scanned::Batch(_)))
        && let Scanned::Batch(b) = &f.disk.items[i]
      {
        f.disk.items[i] = Scanned::Damaged {
          at: Some((b.epoch, b.seq)),
        };
        self.stats.rotted += 1;
      }
      f.mem = SessionLog::restored(f.disk.sealed, f.disk.items.clone());
      f.sealed_mem = false;
    }
    let inc = node.inc;
    for cell in 0..self.own.len() {
      if self.own[cell].0 == n {
        self.after(10, 200, Ev::Reclaim { cell, node: n, inc });
      }
    }
  }

  // --- takeover and recovery ---

  fn takeover(&mut self, c: usize) {
    if self.busy[c] {
      return;
    }
    let prior = self.own[c].clone();
    let cands: Vec<usize> = (0..self.nodes.len())
      .filter(|&i| self.nodes[i].up && session(i, self.nodes[i].inc) != prior.1)
      .collect();
    if cands.is_empty() {
      return;
    }
    let t = cands[self.rng.below(cands.len() as u64) as usize];
    self.start_recovery(c, t, prior);
  }

  fn start_recovery(&mut self, c: usize, t: usize, prior: (usize, String, u64)) {
    self.stats.takeovers += 1;
    self.busy[c] = true;
    let tinc = self.nodes[t].inc;
    if self.flaw == Some(EnsembleFlaw::CasBeforeRecovery) {
      self.cas_own(c, t, tinc, &prior);
    }
    // The stale owner keeps going until its lease runs out.
    if self.nodes[prior.0].up && session(prior.0, self.nodes[prior.0].inc) == prior.1 {
      let at = self.now + self.rng.range(0, 800);
      self.push(at, Ev::Crash(prior.0));
    }
    let (m, step) = Recovery::new(&name(prior.0), &prior.1, &name(t), 200, 1_000);
    let rec = self.recs.len();
    self.recs.push(Rec {
      cell: c,
      taker: t,
      tinc,
      prior,
      m,
      next: None,
      answers: BTreeMap::new(),
      asked: 0,
      restored: false,
      abandoned: false,
    });
    if self.flaw == Some(EnsembleFlaw::RestoreBeforeRecovery) {
      self.restore(rec);
    }
    self.drive(rec, step);
  }

  /// The acquisition's compare-and-swap of the ownership record.
  fn cas_own(&mut self, c: usize, t: usize, tinc: u32, prior: &(usize, String, u64)) {
    self.own[c] = (t, session(t, tinc), prior.2 + 1);
    if prior.0 != t {
      self.prev[c] = Some(prior.0);
    }
  }

  fn drive(&mut self, rec: usize, mut step: RecoveryStep<Entry>) {
    if self.recs[rec].abandoned {
      return;
    }
    let key = self.recs[rec].prior.1.clone();
    loop {
      if self.trace {
        eprintln!("{:>6}   rec {rec}: {step:?}", self.now);
      }
      step = match step {
        RecoveryStep::ReadRecord => {
          let r = self
            .records
            .get(&key)
            .map(|(r, v)| (r.clone(), Token::new(v.to_string())));
          self.recs[rec].m.on_record(Ok(r))
        }
        RecoveryStep::Create { record } => {
          if self.flaw == Some(EnsembleFlaw::TrustAbsentRecord) {
            self.recs[rec]
              .m
              .on_write(WriteAnswer::Applied(Token::new("trusted")))
          } else {
            let a = self.write_record(&key, record, None);
            self.stats.absent_fences += u64::from(matches!(a, WriteAnswer::Applied(_)));
            self.recs[rec].m.on_write(a)
          }
        }
        RecoveryStep::Cas { record, token } => {
          let a = self.write_record(&key, record, Some(token));
          let a = if self.rng.chance(100) {
            WriteAnswer::Ambiguous
          } else {
            a
          };
          self.recs[rec].m.on_write(a)
        }
        RecoveryStep::SealTails { members } => {
          let r = &mut self.recs[rec];
          r.asked = members.len();
          r.answers.clear();
          for m in members {
            let (to, log) = parse_member(&m);
            self.after(1, 20, Ev::Tail { rec, to, log });
          }
          return;
        }
        RecoveryStep::Upload { entries } => {
          self.stats.recovered_entries += entries.len() as u64;
          for (c, e, t, w) in entries {
            self.ltx.insert((c, e, t), w);
          }
          self.recs[rec].m.on_uploaded(true)
        }
        RecoveryStep::WriteLoss { loss } => {
          self.stats.losses += 1;
          if self.stats.rotted + self.stats.torn + self.stats.wipes == 0 {
            self.violation(format!(
              "a loss record {loss:?} with no damaged batch anywhere"
            ));
          }
          for (e, from) in loss {
            self.losses.push((key.clone(), e, from));
          }
          self.recs[rec].m.on_uploaded(true)
        }
        RecoveryStep::Retry { after_ms, then } => {
          self.recs[rec].next = Some(*then);
          self.push(self.now + after_ms, Ev::Step { rec });
          return;
        }
        RecoveryStep::Done { .. } => {
          if !self.recs[rec].restored {
            self.restore(rec);
          }
          return;
        }
        RecoveryStep::Failed(e) => {
          self.violation(format!("recovery failed: {e}"));
          return;
        }
      }
    }
  }

  fn on_tail(&mut self, rec: usize, to: usize, log: u32) {
    let knows = self.knows(to, log);
    let node = &mut self.nodes[to];
    let key = self.recs[rec].prior.1.clone();
    let answer = if node.up && !knows {
      MemberAnswer::Gone
    } else if !node.up || self.rng.chance(30) {
      MemberAnswer::Failed
    } else {
      let f = node.logs.entry(key).or_insert_with(|| Follow {
        disk: Disk::default(),
        mem: SessionLog::new(),
        sealed_mem: false,
      });
      match self.flaw {
        Some(EnsembleFlaw::TailWithoutSeal) => {}
        Some(EnsembleFlaw::SealNotPersisted) => f.sealed_mem = true,
        _ => {
          f.mem.seal();
          f.disk.sealed = true;
        }
      }
      if node.old_code {
        // The old code answers every entry it has, certified or not.
        let entries = (f.mem.tail(TailFormat::Ranged).ok())
          .map(|t| match t {
            Tail::Ranged { epochs, .. } => epochs
              .into_iter()
              .flat_map(|e| e.batches)
              .flat_map(|b| b.entries)
              .collect(),
            Tail::Entries(e) => e,
          })
          .unwrap_or_default();
        if self.flaw == Some(EnsembleFlaw::TrustEntriesOnly) {
          trusted(entries)
        } else {
          MemberAnswer::Tail(Tail::Entries(entries))
        }
      } else {
        MemberAnswer::Tail(f.mem.tail(TailFormat::Ranged).unwrap())
      }
    };
    self.after(
      1,
      20,
      Ev::TailReply {
        rec,
        member: member(to, log),
        answer,
      },
    );
  }

  fn restore(&mut self, rec: usize) {
    self.recs[rec].restored = true;
    let (c, t, tinc) = (
      self.recs[rec].cell,
      self.recs[rec].taker,
      self.recs[rec].tinc,
    );
    let prior = self.recs[rec].prior.clone();
    if self.flaw != Some(EnsembleFlaw::CasBeforeRecovery) {
      if self.own[c] != prior {
        // Another acquisition moved the record: this one's write fails.
        self.busy[c] = false;
        return;
      }
      self.cas_own(c, t, tinc, &prior);
    }
    let e = prior.2;
    let state = self.chain_state(c, e);
    let set: BTreeSet<u64> = state.iter().copied().collect();
    let missing: Vec<u64> = (self.acked.iter())
      .filter(|(w, (ac, ae, _))| *ac == c && *ae <= e && !set.contains(w))
      .map(|(w, _)| *w)
      .filter(|w| !self.loss_covers(*w))
      .collect();
    if let Some(w) = missing.first() {
      self.violation(format!(
        "cell {c}: the restore at epoch {} lacks acknowledged write {w}",
        e + 1
      ));
    }
    self.restores.insert((c, e + 1), set);
    self.bases.insert((c, e + 1), state);
    self.busy[c] = false;
    let node = &mut self.nodes[t];
    if node.up && node.inc == tinc && self.own[c] == (t, session(t, tinc), e + 1) {
      node.cells.insert(
        c,
        Owned {
          epoch: e + 1,
          next_txid: 1,
        },
      );
    }
  }

  /// What a restore of epoch `e`'s chain reads: the state the epoch opened
  /// with and its contiguous objects; an epoch that never opened (its taker
  /// died after writing the record) holds nothing, and the chain goes on
  /// below it.
  fn chain_state(&self, c: usize, e: u64) -> Vec<u64> {
    let Some(base) = self.bases.get(&(c, e)) else {
      return if e > 1 {
        self.chain_state(c, e - 1)
      } else {
        Vec::new()
      };
    };
    let mut state = base.clone();
    let mut txid = 1;
    while let Some(&w) = self.ltx.get(&(c, e, txid)) {
      state.push(w);
      txid += 1;
    }
    state
  }

  /// Whether a loss record covers acknowledged write `w`: its own batch's
  /// range, or that of a write before it in the same epoch of its cell (the
  /// chain ends at the first write lost, and every later one goes with it).
  fn loss_covers(&self, w: u64) -> bool {
    let direct = |w: u64| {
      let Some((_, _, Some((s, e, q)))) = self.acked.get(&w) else {
        return false;
      };
      (self.losses.iter()).any(|(ls, le, from)| ls == s && le == e && q >= from)
    };
    let Some(&(c, e, _)) = self.acked.get(&w) else {
      return false;
    };
    (self.acked.range(..=w)).any(|(&w2, &(c2, e2, _))| c2 == c && e2 == e && direct(w2))
  }

  fn violation(&mut self, v: String) {
    self.violations.push(format!("t={} {v}", self.now));
  }

  /// Every node back, every message delivered, then a fresh takeover of
  /// each cell.
  fn finish(&mut self) {
    if !self.violations.is_empty() {
      return;
    }
    for i in 0..self.nodes.len() {
      self.nodes[i].old_code = false;
      if !self.nodes[i].up {
        self.restart(i);
      }
    }
    // No more crashes or takeovers; let everything in flight land.
    let pending: Vec<Item> = std::iter::from_fn(|| self.q.pop()).collect();
    for it in pending {
      if !matches!(it.ev, Ev::Crash(_) | Ev::Takeover(_) | Ev::Restart(_)) {
        self.q.push(it);
      }
    }
    let horizon = self.now + 30_000;
    self.run(horizon);
    // Every closed log epoch of a live session is recorded drained once its
    // uploads landed: recovery must not wait for members that may never
    // answer again.
    let undrained = (0..self.nodes.len()).find_map(|i| {
      let me = session(i, self.nodes[i].inc);
      let g = &self.nodes[i].gate;
      let (r, _) = self.records.get(&me)?;
      if r.state != crate::ensemble::record::LogState::Open || g.is_fenced() {
        return None;
      }
      let n = (r.undrained().map(|e| e.n)).find(|n| Some(*n) != g.current_epoch())?;
      Some(format!(
        "log epoch {n} of session {me} was never recorded drained"
      ))
    });
    if let Some(v) = undrained {
      self.violation(v);
      return;
    }
    for c in 0..self.own.len() {
      if self.busy[c] {
        self.violation(format!("cell {c}: a takeover did not finish"));
        return;
      }
      let prior = self.own[c].clone();
      // A fresh node: the first one, under a session nobody used.
      let t = 0;
      if self.nodes[t].up {
        self.nodes[t].up = false;
        self.nodes[t].fsyncs.clear();
        self.restart(t);
      }
      self.start_recovery(c, t, prior);
      let horizon = self.now + 60_000;
      self.run(horizon);
      if self.busy[c] && self.violations.is_empty() {
        self.violation(format!("cell {c}: the final recovery did not finish"));
      }
    }
  }
}

fn parse_session(s: &str) -> (usize, u32) {
  let (n, i) = s[1..].split_once('.').unwrap();
  (n.parse().unwrap(), i.parse().unwrap())
}

/// The contiguous end of `epoch`'s batches on disk.
fn disk_through(d: &Disk, epoch: u32) -> u64 {
  let mut seqs = BTreeSet::new();
  let mut pruned = 0;
  for it in &d.items {
    match it {
      Scanned::Batch(b) if b.epoch == epoch => {
        seqs.insert(b.seq);
      }
      Scanned::Pruned { epoch: e, through } if *e == epoch => pruned = pruned.max(*through),
      _ => {}
    }
  }
  let mut t = pruned;
  while seqs.contains(&(t + 1)) {
    t += 1;
  }
  t
}

/// The `TrustEntriesOnly` flaw: an entries-only answer dressed as a
/// complete ranged one.
fn trusted(entries: Vec<Entry>) -> MemberAnswer<Entry> {
  MemberAnswer::Tail(Tail::Ranged {
    epochs: vec![crate::ensemble::follower::EpochTail {
      epoch: 0,
      pruned: 0,
      through: 0,
      certified: true,
      batches: vec![Batch {
        epoch: 0,
        seq: 0,
        entries,
      }],
    }],
    whole: true,
  })
}

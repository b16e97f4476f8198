//! A seeded deterministic simulator of a fleet, with checkers.
//!
//! Two or three nodes compete for one or two cells over a shared in-memory
//! bucket ([`store`]). Clients send writes to the node they last heard an
//! acknowledgement from (else to a random one); a node that does not own the
//! cell activates it through [`crate::own::Acquire`], commits locally,
//! uploads LTX-like objects under `e<epoch>` (pipelined: two in flight, so
//! their answers cross), and acknowledges through
//! [`crate::ack::AckGate`], while [`crate::lease::LeaseKeeper`] renews its
//! lease and fences it. Every node also passes over the wake index each
//! second ([`crate::wake`]: the waker role, then each due hint's record and
//! owner lease) and takes the cells it should wake. The node code
//! (`node.rs`, `cell.rs`, `wake.rs`) is a thin I/O shell around those
//! machines: every decision is the crate's.
//!
//! **Faults.** One simulated true time drives everything; each node reads
//! its own drifting clock ([`clock`]). Every store request takes a random
//! latency to apply and another to answer, so concurrent requests land in
//! any order (CAS races are ordinary). Some requests are lost before they
//! apply, some answers are lost after (both read as ambiguous or as an
//! error), some requests are stuck past the caller's timeout and apply
//! later, and whole outages drop every request for a while. In some seeds
//! the store refuses a few LTX objects for good (every retry), while the
//! uploads above them land: a gap in the chain. Nodes crash at
//! any step (all memory lost, the local disk kept or wiped; requests already
//! sent may still land), stop gracefully (release, retire the lease),
//! release idle cells, pause like SIGSTOP (no steps, the clock runs),
//! freeze like a suspended VM (no steps, the clock stops), and suffer a
//! stalled clock while running (a stuck clock source). Freezes and stalls
//! are the only faults that break the clock bound. A fenced process exits
//! and the supervisor restarts it, as does a crashed one.
//!
//! **Checkers** ([`check`]): one writer per epoch; no acknowledged write
//! lost (at every activation, and after a final takeover by a fresh node
//! once all leases expired); no acknowledgement after the lease could have
//! expired by true time; no takeover from an owner that can still
//! acknowledge; epochs never go backwards; restores hold no duplicate or
//! unknown write; the final takeover succeeds; and after a quiet phase (25 s
//! with faults and clients stopped, nodes back), every cell with a due wake
//! hint is held by a serving node. The lease-timing checks skip nodes whose
//! clock was frozen, since their premise is the clock bound.
//!
//! **Broken variants** ([`Flaw`]) are mistakes an I/O shell could make with
//! this crate's API; the checkers must catch each of them.
//!
//! A seed replays exactly: all randomness comes from one [`rng::Rng`], and
//! ties between events at the same instant break by insertion order.
//!
//! **What it found** (both fixed in the crate, both checked by
//! `takeover-from-live-owner`): a lease must be judged by the clock read
//! *before* the lease GET (see [`crate::own::owner_lease_expired`]; the
//! [`Flaw::JudgeLeaseAtReply`] variant keeps the mistake), and a clean
//! shutdown must not DELETE its lease: a DELETE still in flight when the
//! process exits can remove the lease of the node's next process (see
//! [`crate::lease::LeaseKeeper::release`]).
//!
//! **What it missed** while its uploads were strictly serial: the runtime's
//! fault injector found that an upload which failed for good did not stop
//! the rounds in flight above it from acknowledging (a gap in the chain
//! hides them). [`crate::ack::RoundLatch`] holds the rule, the gate settles
//! its pipelined uploads through it, and [`Flaw::AckPastFailedUpload`]
//! keeps the mistake.
//!
//! **Snapshots** ([`crate::compact`]): every few commits an owner uploads
//! its whole state as one object covering TXIDs `1..=n` of its epoch, once
//! `n` is acknowledged, and restores start from the furthest-reaching one.
//! The duplicate and lost-write checks catch a snapshot whose state is not
//! exactly TXID `n`'s ([`Flaw::SnapshotAtUpload`],
//! [`Flaw::SnapshotBeforeCommit`]).
//!
//! **Epoch GC** ([`crate::gc`], odd seeds): an owner collects when it takes
//! a cell and after every third acknowledgement, with no retention, so
//! every epoch the rules allow goes at once; the lost-write checks at each
//! restore then show that nothing a restore needs was deleted, and catch a
//! pass without the guards ([`Flaw::GcWithoutGuards`]).
//!
//! **Paged epochs** ([`crate::restore::paged`], every third seed): half the
//! activations that restore something open their epoch with a marker (the
//! restored chain's epoch and TXID) instead of a snapshot, and number their
//! commits from TXID 2; every later restore, GC pass and the final audit
//! must link through it. An activation that serves without writing its
//! marker is caught ([`Flaw::PagedWithoutMarker`]).

mod cell;
pub mod check;
pub mod clock;
pub mod ensemble;
mod faults;
mod gc;
pub mod handover;
mod node;
pub mod place;
pub mod rng;
pub mod store;
mod wake;

use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;

use crate::WriteAnswer;
use crate::own::Acquire;
use check::Checker;
pub use check::{Check, Violation};
use faults::{Params, draw_params};
use node::{Node, Purpose, Status};
use rng::Rng;
use store::{Answer, Op, Store, Writer};

/// True time at the start of a run: far from 0 so clock offsets never wrap.
pub const T0: u64 = 1_000_000;

/// A mistake the I/O shell could make; each must be caught by a checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flaw {
  /// Acknowledge once the upload completed, without re-reading `own.json`.
  AckWithoutReread,
  /// On takeover, continue from the local file when it is not empty.
  RestoreFromLocal,
  /// Take a cell from another node without looking at its lease.
  TakeoverIgnoresLease,
  /// Never fence: ignore the deadline and the lease watchdog.
  NoSelfFence,
  /// Read `own.json` when the write commits, i.e. before its upload.
  RereadBeforeUpload,
  /// Judge the owner's lease by the clock when its answer arrives.
  JudgeLeaseAtReply,
  /// Release with a plain PUT instead of a compare-and-swap.
  BlindRelease,
  /// Treat an ambiguous ownership write as applied.
  TrustAmbiguous,
  /// Re-activate a cell whose record names this node without a new epoch.
  ReuseEpoch,
  /// Wake due cells only while holding the waker role, so a node's own
  /// cells wait for the waker, which sees that node's live lease.
  WakeOnlyAsWaker,
  /// Let an upload that failed for good settle like any other: its writes
  /// fail, but uploads above it still acknowledge theirs, and the cell is
  /// reset only after them (the runtime before [`crate::ack::RoundLatch`]).
  AckPastFailedUpload,
  /// Read a snapshot's state when it is uploaded (after its TXID was
  /// acknowledged) instead of when that TXID was captured.
  SnapshotAtUpload,
  /// Take a snapshot just before the commit whose TXID labels it.
  SnapshotBeforeCommit,
  /// Epoch GC deletes every epoch below its own at once: without waiting
  /// for its own first object in the listing, without reading the record,
  /// without keeping the epoch before.
  GcWithoutGuards,
  /// A paged activation serves without writing its epoch's marker.
  PagedWithoutMarker,
}

impl Flaw {
  pub const ALL: [Flaw; 15] = [
    Flaw::AckWithoutReread,
    Flaw::RestoreFromLocal,
    Flaw::TakeoverIgnoresLease,
    Flaw::NoSelfFence,
    Flaw::RereadBeforeUpload,
    Flaw::JudgeLeaseAtReply,
    Flaw::BlindRelease,
    Flaw::TrustAmbiguous,
    Flaw::ReuseEpoch,
    Flaw::WakeOnlyAsWaker,
    Flaw::AckPastFailedUpload,
    Flaw::SnapshotAtUpload,
    Flaw::SnapshotBeforeCommit,
    Flaw::GcWithoutGuards,
    Flaw::PagedWithoutMarker,
  ];

  pub fn name(&self) -> &'static str {
    match self {
      Flaw::AckWithoutReread => "ack-without-reread",
      Flaw::RestoreFromLocal => "restore-from-local",
      Flaw::TakeoverIgnoresLease => "takeover-ignores-lease",
      Flaw::NoSelfFence => "no-self-fence",
      Flaw::RereadBeforeUpload => "reread-before-upload",
      Flaw::JudgeLeaseAtReply => "judge-lease-at-reply",
      Flaw::BlindRelease => "blind-release",
      Flaw::TrustAmbiguous => "trust-ambiguous",
      Flaw::ReuseEpoch => "reuse-epoch",
      Flaw::WakeOnlyAsWaker => "wake-only-as-waker",
      Flaw::AckPastFailedUpload => "ack-past-failed-upload",
      Flaw::SnapshotAtUpload => "snapshot-at-upload",
      Flaw::SnapshotBeforeCommit => "snapshot-before-commit",
      Flaw::GcWithoutGuards => "gc-without-guards",
      Flaw::PagedWithoutMarker => "paged-without-marker",
    }
  }

  pub fn parse(s: &str) -> Option<Flaw> {
    Flaw::ALL.into_iter().find(|f| f.name() == s)
  }
}

impl fmt::Display for Flaw {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(self.name())
  }
}

/// One run.
#[derive(Clone, Debug, Default)]
pub struct SimConfig {
  pub seed: u64,
  pub flaw: Option<Flaw>,
  /// Record a human-readable trace (slower; for replaying one seed).
  pub trace: bool,
}

/// What a run did, to show that the faults were exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
  pub events: u64,
  pub requests: u64,
  pub ambiguous: u64,
  pub writes: u64,
  pub commits: u64,
  pub acks: u64,
  pub activations: u64,
  pub takeovers: u64,
  pub releases: u64,
  pub broken_cells: u64,
  pub fences: u64,
  pub crashes: u64,
  pub pauses: u64,
  pub freezes: u64,
  pub stops: u64,
  /// Cells taken because of a due wake hint.
  pub wakes: u64,
  /// LTX uploads answered while one below them was still unsettled.
  pub uploads_out_of_order: u64,
  /// LTX uploads the shell gave up on after its retries (refused or lost).
  pub failed_uploads: u64,
  /// LTX uploads that landed above an object the store refuses, in the same
  /// epoch: a gap in the chain with a later transaction above it.
  pub landed_above_refused: u64,
  /// Snapshots uploaded within an epoch ([`crate::compact`]).
  pub snapshots: u64,
  /// Restores that started from such a snapshot.
  pub snapshot_restores: u64,
  /// Epochs deleted by epoch GC.
  pub gc_epochs: u64,
  /// Activations that paged in (an epoch opened by a marker).
  pub paged: u64,
}

impl Stats {
  pub fn add(&mut self, o: &Stats) {
    self.events += o.events;
    self.requests += o.requests;
    self.ambiguous += o.ambiguous;
    self.writes += o.writes;
    self.commits += o.commits;
    self.acks += o.acks;
    self.activations += o.activations;
    self.takeovers += o.takeovers;
    self.releases += o.releases;
    self.broken_cells += o.broken_cells;
    self.fences += o.fences;
    self.crashes += o.crashes;
    self.pauses += o.pauses;
    self.freezes += o.freezes;
    self.stops += o.stops;
    self.wakes += o.wakes;
    self.uploads_out_of_order += o.uploads_out_of_order;
    self.failed_uploads += o.failed_uploads;
    self.landed_above_refused += o.landed_above_refused;
    self.snapshots += o.snapshots;
    self.snapshot_restores += o.snapshot_restores;
    self.gc_epochs += o.gc_epochs;
    self.paged += o.paged;
  }
}

/// The outcome of one seed.
#[derive(Clone, Debug)]
pub struct Report {
  pub seed: u64,
  pub flaw: Option<Flaw>,
  pub profile: &'static str,
  pub violations: Vec<Violation>,
  pub stats: Stats,
  pub trace: Vec<String>,
}

impl Report {
  pub fn ok(&self) -> bool {
    self.violations.is_empty()
  }
}

impl fmt::Display for Report {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let flaw = self.flaw.map_or("none".to_string(), |x| x.to_string());
    write!(f, "seed={} flaw={flaw} profile={}", self.seed, self.profile)?;
    for v in &self.violations {
      write!(f, "\n  {v}")?;
    }
    Ok(())
  }
}

/// Runs one seed.
pub fn run(cfg: &SimConfig) -> Report {
  let mut w = World::new(cfg);
  w.main();
  w.quiet();
  w.finish();
  Report {
    seed: cfg.seed,
    flaw: cfg.flaw,
    profile: w.p.profile,
    violations: std::mem::take(&mut w.check.violations),
    stats: w.stats,
    trace: w.trace.unwrap_or_default(),
  }
}

#[derive(Clone, Debug)]
pub(crate) enum Ev {
  Apply(usize),
  Reply(usize),
  Tick {
    node: usize,
    inc: u32,
  },
  ReadRetry {
    node: usize,
    inc: u32,
    cell: usize,
    run: u64,
  },
  Write {
    cell: usize,
  },
  NodeWrite {
    node: usize,
    cell: usize,
    w: u64,
  },
  Crash(usize),
  Pause {
    node: usize,
    dur: u64,
    freeze: bool,
  },
  Resume {
    node: usize,
    inc: u32,
  },
  Stall {
    node: usize,
    dur: u64,
  },
  Unstall {
    node: usize,
    inc: u32,
  },
  Stop(usize),
  StopDeadline {
    node: usize,
    inc: u32,
  },
  Restart(usize),
  Evict(usize),
  WakePoll {
    node: usize,
    inc: u32,
  },
  Arm {
    cell: usize,
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
  // Reversed: BinaryHeap is a max-heap and we want the earliest event.
  fn cmp(&self, o: &Self) -> std::cmp::Ordering {
    (o.at, o.seq).cmp(&(self.at, self.seq))
  }
}

/// A request in flight.
struct OpSlot {
  from: Writer,
  purpose: Purpose,
  op: Op,
  answer: Option<Answer>,
  /// The caller gave up waiting (its answer was ambiguous); the request may
  /// still apply later.
  timed_out: bool,
  /// How long the answer takes to come back.
  back: u64,
}

pub(crate) struct World {
  p: Params,
  flaw: Option<Flaw>,
  rng: Rng,
  now: u64,
  seq: u64,
  queue: BinaryHeap<Item>,
  store: Store,
  /// Whether the store refuses each LTX object (cell, epoch, TXID) for good,
  /// drawn at its first upload.
  refused: BTreeMap<(usize, u64, u64), bool>,
  ops: Vec<OpSlot>,
  nodes: Vec<Node>,
  scopes: Vec<String>,
  /// Per cell: the node a client last heard an acknowledgement from.
  last_good: Vec<Option<usize>>,
  next_write: u64,
  next_run: u64,
  check: Checker,
  stats: Stats,
  trace: Option<Vec<String>>,
  finishing: bool,
  /// Objects between snapshots within an epoch (2..=5 by seed; drawn
  /// outside the random stream so older seeds replay their faults).
  snapshot_every: u64,
  /// Whether owners run epoch GC (odd seeds, with no retention).
  gc: bool,
  /// Whether activations with something to restore page in (every third
  /// seed, half the activations): the epoch opens with a marker linking it
  /// to the state it restored, and its own writes start at TXID 2.
  paged: bool,
}

impl World {
  fn new(cfg: &SimConfig) -> Self {
    let mut rng = Rng::new(cfg.seed);
    let (p, faults) = draw_params(&mut rng);
    let mut w = World {
      flaw: cfg.flaw,
      now: T0,
      seq: 0,
      queue: BinaryHeap::new(),
      store: Store::new(p.cells, p.nodes),
      refused: BTreeMap::new(),
      ops: Vec::new(),
      nodes: (0..p.nodes)
        .map(|i| Node::new(i, p.cells, clock::Clock::new(&mut rng, T0, p.skew)))
        .collect(),
      scopes: (0..p.cells).map(|c| format!("Cell:{c}")).collect(),
      last_good: vec![None; p.cells],
      next_write: 1,
      next_run: 1,
      check: Checker::new(p.cells, p.nodes, p.skew),
      stats: Stats::default(),
      trace: cfg.trace.then(Vec::new),
      finishing: false,
      snapshot_every: 2 + cfg.seed % 4,
      gc: !cfg.seed.is_multiple_of(2) || cfg.flaw == Some(Flaw::GcWithoutGuards),
      paged: cfg.seed % 3 == 1 || cfg.flaw == Some(Flaw::PagedWithoutMarker),
      rng,
      p,
    };
    let p = w.p.clone();
    w.tr(|| {
      format!(
        "profile={} nodes={} cells={} end={} ttl={} margin={} skew={} drop={} lost={} refuse={} outages={:?}",
        p.profile,
        p.nodes,
        p.cells,
        p.end - T0,
        p.lease.ttl_ms,
        p.lease.margin_ms,
        p.skew,
        p.drop,
        p.lost,
        p.refuse,
        p.outages
          .iter()
          .map(|(a, b)| (a - T0, b - T0))
          .collect::<Vec<_>>()
      )
    });
    for n in 0..w.p.nodes {
      w.start_node(n);
      w.schedule_faults(n, faults);
    }
    for c in 0..w.p.cells {
      let at = T0 + w.rng.range(0, 500);
      w.push(at, Ev::Write { cell: c });
      if w.rng.chance(600) {
        let at = w.rng.range(T0, w.p.end);
        w.push(at, Ev::Arm { cell: c });
      }
    }
    w
  }

  fn push(&mut self, at: u64, ev: Ev) {
    self.seq += 1;
    self.queue.push(Item {
      at,
      seq: self.seq,
      ev,
    });
  }

  /// Appends a trace line; the closure runs only when tracing.
  fn tr(&mut self, f: impl FnOnce() -> String) {
    if let Some(t) = &mut self.trace {
      t.push(format!("{:>6} {}", self.now - T0, f()));
    }
  }

  fn main(&mut self) {
    self.run_until(self.p.end);
  }

  /// Handles every event due by `end`, in order.
  fn run_until(&mut self, end: u64) {
    while let Some(item) = self.queue.pop() {
      if item.at > end {
        self.queue.push(item);
        break;
      }
      self.now = item.at;
      self.stats.events += 1;
      self.handle(item.ev);
    }
  }

  fn handle(&mut self, ev: Ev) {
    match ev {
      Ev::Apply(id) => self.apply(id),
      Ev::Reply(id) => self.reply(id),
      Ev::Tick { node, inc } => self.on_tick(node, inc),
      Ev::ReadRetry {
        node,
        inc,
        cell,
        run,
      } => self.on_read_retry(node, inc, cell, run),
      Ev::Write { cell } => self.on_client_write(cell),
      Ev::NodeWrite { node, cell, w } => self.on_node_write(node, cell, w),
      Ev::Crash(n) => self.on_crash(n),
      Ev::Pause { node, dur, freeze } => self.on_pause(node, dur, freeze),
      Ev::Resume { node, inc } => self.on_resume(node, inc),
      Ev::Stall { node, dur } => self.on_stall(node, dur),
      Ev::Unstall { node, inc } => self.on_unstall(node, inc),
      Ev::Stop(n) => self.on_stop(n),
      Ev::StopDeadline { node, inc } => self.on_stop_deadline(node, inc),
      Ev::Restart(n) => self.on_restart(n),
      Ev::Evict(n) => self.on_evict(n),
      Ev::WakePoll { node, inc } => self.on_wake_poll(node, inc),
      Ev::Arm { cell } => self.on_arm(cell),
    }
  }

  fn on_client_write(&mut self, c: usize) {
    let gap = self.rng.range(self.p.write_gap.0, self.p.write_gap.1);
    self.push(self.now + gap, Ev::Write { cell: c });
    let w = self.next_write;
    self.next_write += 1;
    self.stats.writes += 1;
    let n = match self.last_good[c] {
      Some(g) if self.rng.chance(700) => g,
      _ => self.rng.below(self.p.nodes as u64) as usize,
    };
    self.tr(|| format!("client: write w{w} to n{n} for cell {c}"));
    self.on_node_write(n, c, w);
  }

  fn latency(&mut self) -> u64 {
    if self.rng.chance(self.p.stuck) {
      self.rng.range(self.p.timeout + 1, self.p.stuck_max)
    } else if self.rng.chance(self.p.slow) {
      self.rng.range(20, self.p.slow_max)
    } else {
      self.rng.range(1, self.p.fast_max)
    }
  }

  /// Sends a request from node `n`: it applies after a random latency (or
  /// never), and its answer comes back after another, or is lost.
  fn send(&mut self, n: usize, purpose: Purpose, op: Op) {
    let id = self.ops.len();
    let from = (n, self.nodes[n].inc);
    self.stats.requests += 1;
    let out = self
      .p
      .outages
      .iter()
      .any(|&(a, b)| (a..b).contains(&self.now));
    let dropped = out || self.rng.chance(self.p.drop);
    let mut slot = OpSlot {
      from,
      purpose,
      op,
      answer: None,
      timed_out: false,
      back: 0,
    };
    self.tr(|| {
      format!(
        "n{n}.{} send #{id} {}{}",
        from.1,
        slot.op,
        if dropped { " (lost)" } else { "" }
      )
    });
    // A fault at this await point strikes once the current step is over.
    if self.rng.chance(self.p.await_pause) {
      let dur = self.rng.range(100, 3 * self.p.lease.ttl_ms);
      self.push(
        self.now,
        Ev::Pause {
          node: n,
          dur,
          freeze: false,
        },
      );
    }
    if self.rng.chance(self.p.await_crash) {
      self.push(self.now, Ev::Crash(n));
    }
    if self.refuses(&slot.op) {
      // Refused outright (a 4xx, a policy): it never applies, and the
      // client's own retries with backoff take a while to give up.
      let after = self.latency() + self.rng.range(50, 400);
      slot.answer = Some(Answer::Write(WriteAnswer::Rejected));
      self.ops.push(slot);
      self.push(self.now + after, Ev::Reply(id));
      return;
    }
    if dropped {
      // Never applies; the caller times out (or is refused at once).
      let after = if out {
        self.rng.range(1, self.p.timeout)
      } else {
        self.p.timeout
      };
      slot.timed_out = true;
      self.ops.push(slot);
      self.push(self.now + after, Ev::Reply(id));
      return;
    }
    // The request and its answer each take their own time; past the
    // caller's timeout it sees no answer, though the request still applies.
    let (there, back) = (self.latency(), self.latency());
    if there + back > self.p.timeout {
      slot.timed_out = true;
      self.push(self.now + self.p.timeout, Ev::Reply(id));
    }
    slot.back = back;
    self.ops.push(slot);
    self.push(self.now + there, Ev::Apply(id));
  }

  /// Whether the store refuses this request for good: only LTX uploads,
  /// each object drawn once, so retries meet the same refusal.
  fn refuses(&mut self, op: &Op) -> bool {
    let &Op::PutLtx {
      cell, epoch, txid, ..
    } = op
    else {
      return false;
    };
    if self.p.refuse == 0 {
      return false;
    }
    let key = (cell, epoch, txid);
    if let Some(&r) = self.refused.get(&key) {
      return r;
    }
    let r = self.rng.chance(self.p.refuse);
    self.refused.insert(key, r);
    r
  }

  fn apply(&mut self, id: usize) {
    let (from, timed_out) = (self.ops[id].from, self.ops[id].timed_out);
    if let Op::PutLtx {
      cell, epoch, txid, ..
    } = self.ops[id].op
      && (self.refused.range((cell, epoch, 0)..(cell, epoch, txid))).any(|(_, &r)| r)
    {
      self.stats.landed_above_refused += 1;
    }
    let (answer, change) = self.store.apply(&self.ops[id].op, from);
    self.tr(|| format!("store applies #{id}: {answer}"));
    if let Some(ch) = change {
      self.on_own_change(&ch, from);
    }
    if self.finishing || timed_out {
      return;
    }
    if !self.rng.chance(self.p.lost) {
      self.ops[id].answer = Some(answer);
    }
    let back = self.ops[id].back;
    self.push(self.now + back, Ev::Reply(id));
  }

  fn reply(&mut self, id: usize) {
    let (n, inc) = self.ops[id].from;
    if !self.node_ready(n, inc, Ev::Reply(id)) {
      return;
    }
    let answer = match self.ops[id].answer.take() {
      Some(a) => a,
      None => {
        self.stats.ambiguous += 1;
        self.ops[id].op.failed()
      }
    };
    let purpose = self.ops[id].purpose;
    self.tr(|| format!("n{n}.{inc} gets #{id}: {answer}"));
    if !self.watchdog(n) {
      return;
    }
    self.on_answer(n, purpose, answer);
  }

  /// Whether node `n` (at incarnation `inc`) can take a step now; a paused
  /// node gets the event again when it resumes.
  fn node_ready(&mut self, n: usize, inc: u32, ev: Ev) -> bool {
    let node = &self.nodes[n];
    if node.inc != inc || node.status == Status::Down {
      return false;
    }
    if node.paused_until > self.now {
      let at = node.paused_until;
      self.push(at, ev);
      return false;
    }
    true
  }

  /// After the main phase: every request already sent lands, nothing else
  /// runs, and then a fresh node takes each cell over and restores it.
  fn finish(&mut self) {
    self.finishing = true;
    self.check.lease_checks = false;
    while let Some(item) = self.queue.pop() {
      if let Ev::Apply(id) = item.ev {
        self.now = self.now.max(item.at);
        self.apply(id);
      }
    }
    for c in 0..self.p.cells {
      self.audit(c);
    }
  }

  fn audit(&mut self, c: usize) {
    use crate::own::AcquireStep as S;
    // Judged long after every lease expired.
    let far = u64::MAX / 4;
    let me: Writer = (self.p.nodes, 0);
    let (mut m, mut step) = Acquire::new(&self.scopes[c], "audit", far);
    let mut listing = None;
    for _ in 0..64 {
      step = match step {
        S::ReadOwn => m.on_own(Ok(self.store.own(c).cloned()), far),
        S::ReadLease { node } => {
          let lease = node::index_of(&node).and_then(|i| self.store.lease(i).cloned());
          m.on_lease(Ok(lease), far)
        }
        S::Recover { .. } => m.on_recovered(),
        S::ListLtx => {
          let l = self.store.list(c);
          let keys: Vec<_> = l.iter().map(|(k, _)| *k).collect();
          listing = Some(l);
          let markers = self.store.markers.get(&c).cloned().unwrap_or_default();
          m.on_listing(Ok((&keys, &markers)))
        }
        S::Create { record } => self.audit_write(Op::CreateOwn(c, record), me, &mut m),
        S::Cas { record, token } => self.audit_write(Op::CasOwn(c, record, token), me, &mut m),
        S::Acquired(a) => {
          let db = match (&a.restore, &listing) {
            (Some(chain), Some(l)) => store::materialize(l, chain),
            _ => Vec::new(),
          };
          self.tr(|| format!("audit: cell {c} taken at epoch {} restores {db:?}", a.epoch));
          self.check.on_final_restore(self.now, c, &db);
          return;
        }
        S::Failed(e) => {
          self.check.violation(
            Check::FinalTakeoverFailed,
            self.now,
            format!("cell {c}: {e}"),
          );
          return;
        }
      };
    }
    let msg = format!("cell {c}: the final takeover did not finish");
    self
      .check
      .violation(Check::FinalTakeoverFailed, self.now, msg);
  }

  fn audit_write(&mut self, op: Op, me: Writer, m: &mut Acquire) -> crate::own::AcquireStep {
    let (answer, change) = self.store.apply(&op, me);
    if let Some(ch) = change {
      self.on_own_change(&ch, me);
    }
    match answer {
      Answer::Write(w) => m.on_write(w),
      a => panic!("write answered {a:?}"),
    }
  }
}

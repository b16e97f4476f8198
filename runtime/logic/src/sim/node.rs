//! The I/O shell of a simulated node: it performs the steps the crate's
//! machines return and feeds them the answers. It decides nothing itself,
//! except where a [`Flaw`] makes it deviate, on purpose, the way a careless
//! shell could. This half holds the process: its lease, its clock faults,
//! crashes, stops and restarts; `cell.rs` holds the cells.

use std::rc::Rc;

use super::clock::Clock;
use super::store::{Listing, Op, Writer};
use super::wake::WakeStep;
use super::{Ev, Flaw, World};
use crate::ack::AckGate;
use crate::lease::{FenceReason, LeaseKeeper, LeaseStep};
use crate::own::{Acquire, OwnRecord, Release};
use crate::{ReadResult, Token};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
  Down,
  Starting,
  Serving,
  Stopping,
}

/// Which machine an answer goes to. `run` tells one activation of a cell on
/// a node from the next, so a late answer never reaches a newer one, and
/// `pass` one pass over the wake index from the next.
#[derive(Clone, Copy, Debug)]
pub(super) enum Purpose {
  Lease,
  Retire,
  Acquire { cell: usize, run: u64 },
  Upload { cell: usize, run: u64, txid: u64 },
  Snapshot { cell: usize, run: u64 },
  Gc { cell: usize, run: u64 },
  AckRead { cell: usize, run: u64 },
  EarlyRead { cell: usize, run: u64 },
  Release { cell: usize, run: u64 },
  Wake { pass: u64, step: WakeStep },
}

pub(super) struct Node {
  pub name: String,
  pub inc: u32,
  pub status: Status,
  pub clock: Clock,
  pub paused_until: u64,
  pub keeper: Option<LeaseKeeper>,
  pub cells: Vec<Slot>,
  /// The local database file of each cell: survives a crash unless wiped.
  pub disk: Vec<Vec<u64>>,
  tick_at: u64,
  /// The pass over the wake index in progress.
  pub wake: Option<super::wake::WakePass>,
}

pub(super) enum Slot {
  Idle,
  /// A lost ownership record: refused until this local time.
  Refused {
    until: u64,
  },
  Acquiring(Box<Acquiring>),
  Active(Box<Run>),
  /// `m` is `None` for a blind release.
  Releasing {
    run: u64,
    m: Option<Release>,
  },
}

pub(super) struct Acquiring {
  pub(super) run: u64,
  pub(super) m: Acquire,
  pub(super) queued: Vec<u64>,
  pub(super) listing: Option<Listing>,
  pub(super) lease_started: u64,
  /// The flawed re-activation at the current epoch.
  pub(super) reuse: Option<(u64, Token)>,
}

pub(super) struct Run {
  pub(super) run: u64,
  pub(super) epoch: u64,
  pub(super) token: Token,
  /// The state: the restored writes, then this epoch's commits.
  pub(super) db: Vec<u64>,
  pub(super) base: usize,
  /// What the gate's TXIDs are short of the objects': 1 for an epoch that
  /// paged in (its marker is TXID 1, its first commit TXID 2), else 0.
  pub(super) offset: u64,
  pub(super) gate: AckGate,
  /// Written, not yet acknowledged: (write, txid).
  pub(super) pending: Vec<(u64, u64)>,
  /// Retries so far of each upload in flight that failed at least once.
  pub(super) upload_tries: std::collections::BTreeMap<u64, u32>,
  /// [`Flaw::AckPastFailedUpload`]: reset the cell once every write committed
  /// when the upload failed is acknowledged: (that TXID, the failed one).
  pub(super) reset_after: Option<(u64, u64)>,
  pub(super) early_inflight: bool,
  pub(super) early: Option<ReadResult<OwnRecord>>,
  pub(super) early_wanted: bool,
  /// When to snapshot ([`crate::compact`]); positions are TXIDs.
  pub(super) compactor: crate::compact::Compactor,
  /// The snapshot taken, waiting for its TXID to be acknowledged.
  pub(super) snapshot: Option<Rc<Vec<u64>>>,
  /// The snapshot whose upload is in flight.
  pub(super) snapshot_up: Option<crate::compact::Pending>,
  /// An epoch GC pass in flight, and the epochs it will delete.
  pub(super) gc: Option<super::gc::Pass>,
}

impl Node {
  pub fn new(i: usize, cells: usize, clock: Clock) -> Self {
    Node {
      name: format!("n{i}"),
      inc: 0,
      status: Status::Down,
      clock,
      paused_until: 0,
      keeper: None,
      cells: (0..cells).map(|_| Slot::Idle).collect(),
      disk: vec![Vec::new(); cells],
      tick_at: u64::MAX,
      wake: None,
    }
  }
}

/// `n3` -> 3.
pub(super) fn index_of(name: &str) -> Option<usize> {
  name.strip_prefix('n')?.parse().ok()
}

impl World {
  pub(super) fn local(&self, n: usize) -> u64 {
    self.nodes[n].clock.local(self.now)
  }

  pub(super) fn writer(&self, n: usize) -> Writer {
    (n, self.nodes[n].inc)
  }

  /// The fence deadline the gate is given; a flawed shell passes none.
  pub(super) fn deadline(&self, n: usize) -> u64 {
    if self.flaw == Some(Flaw::NoSelfFence) {
      return u64::MAX;
    }
    self.nodes[n].keeper.as_ref().map_or(0, |k| k.deadline_ms())
  }

  pub(super) fn start_node(&mut self, n: usize) {
    let clock = Clock::new(&mut self.rng, self.now, self.p.skew);
    let addr = format!("10.0.0.{n}:9000");
    let node = &mut self.nodes[n];
    node.clock = clock;
    node.status = Status::Starting;
    node.paused_until = 0;
    node.tick_at = u64::MAX;
    let (k, step) = LeaseKeeper::start(self.p.lease, &node.name, &addr, 0);
    node.keeper = Some(k);
    let inc = node.inc;
    node.wake = None;
    self.tr(|| format!("n{n}.{inc}: starts"));
    // The first pass over the wake index once the lease is held.
    self.push(self.now + 1, Ev::WakePoll { node: n, inc });
    self.drive_lease(n, step);
  }

  pub(super) fn drive_lease(&mut self, n: usize, step: LeaseStep) {
    match step {
      LeaseStep::Wait { until_ms } => self.schedule_tick(n, until_ms),
      LeaseStep::Read => self.send(n, Purpose::Lease, Op::GetLease(n)),
      LeaseStep::Create(l) => self.send(n, Purpose::Lease, Op::CreateLease(n, l)),
      LeaseStep::Cas { lease, token } => {
        self.send(n, Purpose::Lease, Op::CasLease(n, lease, token))
      }
      LeaseStep::Retire { lease, token } => {
        self.send(n, Purpose::Retire, Op::CasLease(n, lease, token))
      }
      LeaseStep::Fence(r) => return self.fence(n, r),
    }
    let local = self.local(n);
    let node = &mut self.nodes[n];
    if node.status == Status::Starting && node.keeper.as_ref().is_some_and(|k| k.can_ack(local)) {
      node.status = Status::Serving;
      self.tr(|| format!("n{n}: serving"));
    }
  }

  fn schedule_tick(&mut self, n: usize, until: u64) {
    if until == u64::MAX {
      return;
    }
    let at = self.now + self.nodes[n].clock.delay_until(self.now, until);
    let node = &mut self.nodes[n];
    if node.tick_at > self.now && node.tick_at <= at {
      return; // an earlier tick is already on its way
    }
    node.tick_at = at;
    let inc = node.inc;
    self.push(at, Ev::Tick { node: n, inc });
  }

  pub(super) fn on_tick(&mut self, n: usize, inc: u32) {
    if !self.node_ready(n, inc, Ev::Tick { node: n, inc }) {
      return;
    }
    if self.nodes[n].tick_at <= self.now {
      self.nodes[n].tick_at = u64::MAX;
    }
    let local = self.local(n);
    if let Some(k) = self.nodes[n].keeper.as_mut() {
      let step = k.tick(local);
      self.drive_lease(n, step);
    }
  }

  /// Every step of a node starts here: once its deadline passed, it fences
  /// before doing anything else. Returns whether the node is still up.
  pub(super) fn watchdog(&mut self, n: usize) -> bool {
    let local = self.local(n);
    if let Some(k) = self.nodes[n].keeper.as_mut()
      && k.held().is_some()
      && !k.is_fenced()
      && local >= k.deadline_ms()
    {
      let step = k.tick(local);
      self.drive_lease(n, step);
    }
    self.nodes[n].status != Status::Down
  }

  fn fence(&mut self, n: usize, r: FenceReason) {
    if self.flaw == Some(Flaw::NoSelfFence) {
      self.tr(|| format!("n{n}: would fence ({r}); the flawed shell carries on"));
      return;
    }
    self.stats.fences += 1;
    let line = r.log_line(&self.nodes[n].name);
    self.tr(|| line);
    self.kill(n, false);
  }

  /// The process ends (crash, fence, stop): memory is gone, requests in
  /// flight may still land, and the supervisor restarts it later.
  fn kill(&mut self, n: usize, wipe: bool) {
    let ttl = self.p.lease.ttl_ms;
    let delay = self.rng.range(ttl, 2 * ttl);
    let node = &mut self.nodes[n];
    node.status = Status::Down;
    node.inc += 1;
    node.keeper = None;
    node.paused_until = 0;
    node.tick_at = u64::MAX;
    node.wake = None;
    for s in &mut node.cells {
      *s = Slot::Idle;
    }
    if wipe {
      node.disk.iter_mut().for_each(Vec::clear);
    }
    self.push(self.now + delay, Ev::Restart(n));
  }

  pub(super) fn on_restart(&mut self, n: usize) {
    if self.nodes[n].status == Status::Down {
      self.start_node(n);
    }
  }

  pub(super) fn on_crash(&mut self, n: usize) {
    if self.nodes[n].status == Status::Down {
      return;
    }
    self.stats.crashes += 1;
    let wipe = self.rng.chance(300);
    self.tr(|| format!("n{n}: CRASH{}", if wipe { " and disk wiped" } else { "" }));
    self.kill(n, wipe);
  }

  pub(super) fn on_pause(&mut self, n: usize, dur: u64, freeze: bool) {
    let node = &mut self.nodes[n];
    if node.status == Status::Down {
      return;
    }
    let until = node.paused_until.max(self.now + dur);
    node.paused_until = until;
    if freeze {
      node.clock.freeze(self.now);
      self.stats.freezes += 1;
    } else {
      self.stats.pauses += 1;
    }
    let inc = node.inc;
    let what = if freeze {
      "FREEZE (clock stops)"
    } else {
      "PAUSE"
    };
    self.tr(|| format!("n{n}: {what} for {dur} ms"));
    self.push(until, Ev::Resume { node: n, inc });
  }

  pub(super) fn on_resume(&mut self, n: usize, inc: u32) {
    let node = &mut self.nodes[n];
    if node.inc == inc && self.now >= node.paused_until {
      node.clock.thaw(self.now);
      let local = node.clock.local(self.now);
      self.tr(|| {
        format!(
          "n{n}: resumes, local clock {}",
          local as i64 - super::T0 as i64
        )
      });
    }
  }

  pub(super) fn on_stall(&mut self, n: usize, dur: u64) {
    let node = &mut self.nodes[n];
    if node.status == Status::Down {
      return;
    }
    node.clock.freeze(self.now);
    self.stats.freezes += 1;
    let inc = node.inc;
    self.tr(|| format!("n{n}: CLOCK STALL for {dur} ms (still running)"));
    self.push(self.now + dur, Ev::Unstall { node: n, inc });
  }

  pub(super) fn on_unstall(&mut self, n: usize, inc: u32) {
    let node = &mut self.nodes[n];
    if node.inc == inc && node.paused_until <= self.now {
      node.clock.thaw(self.now);
    }
  }

  pub(super) fn on_stop(&mut self, n: usize) {
    let inc = self.nodes[n].inc;
    if self.nodes[n].status != Status::Serving
      || !self.node_ready(n, inc, Ev::Stop(n))
      || !self.watchdog(n)
    {
      return;
    }
    self.stats.stops += 1;
    self.tr(|| format!("n{n}: graceful stop"));
    self.nodes[n].status = Status::Stopping;
    for c in 0..self.p.cells {
      match self.nodes[n].cells[c] {
        Slot::Active(_) => self.start_release(n, c),
        Slot::Releasing { .. } => {}
        _ => self.nodes[n].cells[c] = Slot::Idle,
      }
    }
    self.push(
      self.now + self.p.lease.ttl_ms,
      Ev::StopDeadline { node: n, inc },
    );
    self.maybe_finish_stop(n);
  }

  pub(super) fn on_stop_deadline(&mut self, n: usize, inc: u32) {
    if self.node_ready(n, inc, Ev::StopDeadline { node: n, inc })
      && self.nodes[n].status == Status::Stopping
    {
      self.finish_stop(n);
    }
  }

  pub(super) fn maybe_finish_stop(&mut self, n: usize) {
    let node = &self.nodes[n];
    if node.status == Status::Stopping
      && !node
        .cells
        .iter()
        .any(|s| matches!(s, Slot::Releasing { .. }))
    {
      self.finish_stop(n);
    }
  }

  /// Every cell released (or given up on): retire the lease and exit.
  fn finish_stop(&mut self, n: usize) {
    if let Some(k) = self.nodes[n].keeper.as_mut() {
      let step = k.release();
      self.drive_lease(n, step);
    }
    self.tr(|| format!("n{n}: stopped"));
    self.kill(n, false);
  }

  pub(super) fn on_evict(&mut self, n: usize) {
    let inc = self.nodes[n].inc;
    if self.nodes[n].status != Status::Serving
      || !self.node_ready(n, inc, Ev::Evict(n))
      || !self.watchdog(n)
    {
      return;
    }
    let idle: Vec<usize> = (0..self.p.cells)
      .filter(|&c| match &self.nodes[n].cells[c] {
        Slot::Active(r) => r.pending.is_empty(),
        _ => false,
      })
      .collect();
    if !idle.is_empty() {
      let c = idle[self.rng.below(idle.len() as u64) as usize];
      self.tr(|| format!("n{n}: releases idle cell {c}"));
      self.start_release(n, c);
    }
  }
}

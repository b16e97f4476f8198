//! A simulated node's passes over the wake index: the waker role, the due
//! hints, and for each one the ownership record and (for the waker) the
//! owner's lease; [`crate::wake`] decides, and a cell to wake is taken
//! through the same activation as a client write. Hints are placed by the
//! world (`Ev::Arm`); after the main phase a quiet phase checks that every
//! due hint's cell ends up held by a serving node.

use super::node::{Purpose, Slot, Status, index_of};
use super::store::{Answer, Hints, Op};
use super::{Ev, World};
use crate::WriteAnswer;
use crate::own::OwnRecord;
use crate::wake::{RoleStep, needs_lease, role_step, should_wake};

/// The requests of a pass, in order; `Own` and `Lease` repeat per hint.
#[derive(Clone, Copy, Debug)]
pub(super) enum WakeStep {
  Role,
  RoleWrite,
  List,
  Own,
  Lease,
}

/// The poll interval; the role is held for three of them.
pub(super) const POLL_MS: u64 = 1_000;

pub(super) struct WakePass {
  pass: u64,
  is_waker: bool,
  hints: Hints,
  /// The hint being judged.
  idx: usize,
  /// The local clock read before the hint's reads.
  judged_at: u64,
  own: Option<OwnRecord>,
}

impl World {
  pub(super) fn on_wake_poll(&mut self, n: usize, inc: u32) {
    if !self.node_ready(n, inc, Ev::WakePoll { node: n, inc }) || !self.watchdog(n) {
      return;
    }
    self.push(self.now + POLL_MS, Ev::WakePoll { node: n, inc });
    let local = self.local(n);
    let node = &self.nodes[n];
    let live = node.keeper.as_ref().is_some_and(|k| k.can_ack(local));
    if node.status != Status::Serving || !live || node.wake.is_some() {
      return;
    }
    let pass = self.next_run;
    self.next_run += 1;
    self.nodes[n].wake = Some(WakePass {
      pass,
      is_waker: false,
      hints: Default::default(),
      idx: 0,
      judged_at: 0,
      own: None,
    });
    self.wake_send(n, pass, WakeStep::Role, Op::GetWaker);
  }

  fn wake_send(&mut self, n: usize, pass: u64, step: WakeStep, op: Op) {
    self.send(n, Purpose::Wake { pass, step }, op);
  }

  /// The pass `pass` of node `n`, if it is the one in progress.
  fn current(&mut self, n: usize, pass: u64) -> Option<&mut WakePass> {
    self.nodes[n].wake.as_mut().filter(|w| w.pass == pass)
  }

  pub(super) fn on_wake_answer(&mut self, n: usize, pass: u64, step: WakeStep, answer: Answer) {
    use WakeStep as S;
    if self.current(n, pass).is_none() {
      return; // a late answer to an abandoned pass
    }
    match (step, answer) {
      (S::Role, Answer::Waker(read)) => {
        let Ok(current) = read else {
          return self.wake_list(n, pass);
        };
        let local = self.local(n);
        let name = self.nodes[n].name.clone();
        let cur = current.as_ref().map(|(r, t)| (r, t));
        let op = match role_step(cur, &name, local, 3 * POLL_MS) {
          RoleStep::Create(r) => Op::CreateWaker(r),
          RoleStep::Cas(r, t) => Op::CasWaker(r, t),
          RoleStep::Leave { .. } => return self.wake_list(n, pass),
        };
        self.wake_send(n, pass, S::RoleWrite, op);
      }
      (S::RoleWrite, Answer::Write(w)) => {
        let is_waker = matches!(w, WriteAnswer::Applied(_));
        if let Some(p) = self.current(n, pass) {
          p.is_waker = is_waker;
        }
        self.tr(|| {
          format!(
            "n{n}: waker role {}",
            if is_waker { "held" } else { "not held" }
          )
        });
        self.wake_list(n, pass);
      }
      (S::List, Answer::Hints(Ok(hints))) => {
        if let Some(p) = self.current(n, pass) {
          p.hints = hints;
          p.idx = 0;
        }
        self.next_hint(n, pass);
      }
      (S::Own, Answer::Own(Ok(own))) => {
        let own = own.map(|(r, _)| r);
        let name = self.nodes[n].name.clone();
        let Some(p) = self.current(n, pass) else {
          return;
        };
        let owner = needs_lease(own.as_ref(), &name, p.is_waker);
        p.own = own;
        match owner.and_then(|o| index_of(&o)) {
          Some(y) => self.wake_send(n, pass, S::Lease, Op::GetLease(y)),
          None => self.decide(n, pass, None),
        }
      }
      (S::Lease, Answer::Lease(Ok(lease))) => {
        self.decide(n, pass, lease.map(|(l, _)| l));
      }
      // A failed read: this hint waits for the next pass.
      (S::Own | S::Lease, _) => self.skip_hint(n, pass),
      // A failed listing, or an answer of the wrong kind: the pass ends.
      _ => self.nodes[n].wake = None,
    }
  }

  fn wake_list(&mut self, n: usize, pass: u64) {
    self.wake_send(n, pass, WakeStep::List, Op::ListHints);
  }

  fn skip_hint(&mut self, n: usize, pass: u64) {
    if let Some(p) = self.current(n, pass) {
      p.idx += 1;
    }
    self.next_hint(n, pass);
  }

  /// Reads the record of the next due hint, or ends the pass.
  fn next_hint(&mut self, n: usize, pass: u64) {
    let local = self.local(n);
    let Some(p) = self.current(n, pass) else {
      return;
    };
    while let Some(&(_, at)) = p.hints.get(p.idx) {
      if at <= local {
        let c = p.hints[p.idx].0;
        p.judged_at = local;
        return self.wake_send(n, pass, WakeStep::Own, Op::GetOwn(c));
      }
      p.idx += 1;
    }
    self.nodes[n].wake = None;
  }

  fn decide(&mut self, n: usize, pass: u64, lease: Option<crate::lease::NodeLease>) {
    let name = self.nodes[n].name.clone();
    let only_as_waker = self.flaw == Some(super::Flaw::WakeOnlyAsWaker);
    let Some(p) = self.current(n, pass) else {
      return;
    };
    let (c, at) = p.hints[p.idx];
    let wake = should_wake(
      at,
      p.judged_at,
      p.own.as_ref(),
      &name,
      p.is_waker,
      lease.as_ref(),
    );
    // The flawed shell leaves its own cells to the waker.
    if wake && (p.is_waker || !only_as_waker) {
      self.wake_cell(n, c);
    }
    self.skip_hint(n, pass);
  }

  /// Takes cell `c` on node `n` for its alarm, as a client write would,
  /// unless it is already held or on its way.
  fn wake_cell(&mut self, n: usize, c: usize) {
    let local = self.local(n);
    let idle = match &self.nodes[n].cells[c] {
      Slot::Idle => true,
      Slot::Refused { until } => local >= *until,
      _ => false,
    };
    if idle {
      self.stats.wakes += 1;
      self.tr(|| format!("n{n}: wakes cell {c} for its alarm"));
      self.start_acquire(n, c, Vec::new());
    }
  }

  /// A hint that is due at once or soon, on a cell nobody may hold.
  pub(super) fn on_arm(&mut self, c: usize) {
    let at = self.now + self.rng.range(0, 1_500);
    self.tr(|| format!("cell {c}: wake hint due at {}", at - super::T0));
    self.store.hints[c] = Some(at);
  }

  /// After the main phase: faults and clients stop, nodes come back, and
  /// the wake index alone must bring every cell with a due hint into the
  /// hands of a serving node.
  pub(super) fn quiet(&mut self) {
    let start = (self.p.outages.iter())
      .map(|&(_, b)| b)
      .fold(self.now.max(self.p.end), u64::max);
    (self.p.drop, self.p.lost, self.p.stuck, self.p.slow) = (0, 0, 0, 0);
    (self.p.await_pause, self.p.await_crash) = (0, 0);
    let kept: Vec<_> = std::mem::take(&mut self.queue)
      .into_iter()
      .filter(|i| {
        !matches!(
          i.ev,
          Ev::Write { .. }
            | Ev::Arm { .. }
            | Ev::Crash(_)
            | Ev::Pause { .. }
            | Ev::Stall { .. }
            | Ev::Stop(_)
            | Ev::Evict(_)
        )
      })
      .collect();
    self.queue.extend(kept);
    self.tr(|| "quiet: faults and clients stop".to_string());
    let until = start + QUIET_MS;
    self.run_until(until);
    self.now = self.now.max(until);
    for c in 0..self.p.cells {
      let Some(at) = self.store.hints[c] else {
        continue;
      };
      let held = self
        .nodes
        .iter()
        .any(|node| node.status == Status::Serving && matches!(&node.cells[c], Slot::Active(_)));
      if !held {
        let msg = format!(
          "cell {c}: its hint was due at {} and no serving node holds it {} ms into the quiet phase",
          at - super::T0,
          QUIET_MS
        );
        self
          .check
          .violation(super::Check::DueAlarmNotWoken, self.now, msg);
      }
    }
  }
}

/// Long enough for a paused node to resume, a dead owner's lease and a dead
/// waker's role to expire, and a node that fenced to restart.
const QUIET_MS: u64 = 25_000;

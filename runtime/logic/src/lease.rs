//! The node lease `nodes/<node>.json` and self-fencing.
//!
//! A node holds a lease with a published expiry `expires_ms` and renews it
//! (compare-and-swap) every `ttl/3`. It stops acknowledging writes once the
//! lease *could* have lapsed: at the fence deadline `expires_ms - margin` by
//! its own clock. Other nodes take its cells only when `expires_ms` has passed
//! by theirs, so the old owner has stopped first — provided that no two
//! clocks in the fleet disagree by `margin` or more. That is the only clock
//! assumption, and only the lease relies on it: the acknowledgement rule
//! ([`crate::ack`]) re-reads the ownership record, so a clock that breaks the
//! assumption (a frozen VM, a stepped clock) cannot make an acknowledged
//! write disappear; it can only make the node serve a little too long.
//!
//! A renewal that does not reach the bucket does not fence: the node retries
//! while the deadline has not passed. A renewal answer that arrives after
//! the deadline does not revive the node: fencing is terminal, and only a
//! restart returns it. A lease record that is missing, or no longer matches
//! what the node published, fences at once. A clean shutdown retires the
//! lease with a compare-and-swap to an expired record (see
//! [`LeaseKeeper::release`]).

use std::fmt;

use crate::{ReadResult, Token, WriteAnswer};

/// Exit status of a fenced process (celld's, for the supervisor's sake).
pub const FENCE_EXIT_CODE: i32 = 3;

/// Default lease lifetime (`CELLD_TTL_MS`).
pub const DEFAULT_TTL_MS: u64 = 10_000;

/// Default fence margin. It bounds the clock disagreement the fleet
/// tolerates, so it is generous next to NTP's milliseconds.
pub const DEFAULT_MARGIN_MS: u64 = 2_000;

/// Lease timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
  pub ttl_ms: u64,
  pub margin_ms: u64,
}

impl Default for LeaseConfig {
  fn default() -> Self {
    LeaseConfig {
      ttl_ms: DEFAULT_TTL_MS,
      margin_ms: DEFAULT_MARGIN_MS,
    }
  }
}

impl LeaseConfig {
  /// How often a renewal starts: a third of the lifetime.
  pub fn renew_every_ms(&self) -> u64 {
    self.ttl_ms / 3
  }

  /// The expiry a lease written at local time `now_ms` publishes.
  pub fn expiry(&self, now_ms: u64) -> u64 {
    now_ms + self.ttl_ms
  }

  /// The local time from which a node holding a lease that expires at
  /// `expires_ms` must not acknowledge: `expires_ms - margin`.
  pub fn fence_deadline(&self, expires_ms: u64) -> u64 {
    expires_ms.saturating_sub(self.margin_ms)
  }

  /// A renewal starts `ttl/3` after the previous one and must complete
  /// before `ttl - margin`; a margin that leaves no room for it, or none at
  /// all, fences a healthy node or tolerates no clock skew.
  pub fn check(&self) -> Result<(), String> {
    if self.margin_ms == 0 || self.margin_ms * 3 >= self.ttl_ms * 2 {
      return Err(format!(
        "lease margin {} ms must be above 0 and below two thirds of the ttl {} ms",
        self.margin_ms, self.ttl_ms
      ));
    }
    Ok(())
  }
}

/// Whether a node that may acknowledge until `deadline_ms` still may.
pub fn can_acknowledge(now_ms: u64, deadline_ms: u64) -> bool {
  now_ms < deadline_ms
}

/// The content of `nodes/<node>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeLease {
  pub node: String,
  pub expires_ms: u64,
  /// Where peers reach the node; always present.
  pub address: String,
  /// Placement weight; 0 means "never push cells here".
  pub load: u32,
}

#[cfg(test)]
impl NodeLease {
  /// A live lease for unit tests: `node` until `expires_ms`.
  pub(crate) fn for_test(node: &str, expires_ms: u64) -> Self {
    NodeLease {
      node: node.into(),
      expires_ms,
      address: "10.0.0.1:9000".into(),
      load: 0,
    }
  }
}

/// `nodes/<node>.json`.
pub fn lease_key(node: &str) -> String {
  format!("nodes/{node}.json")
}

/// Why a node fenced itself; each has celld's event name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceReason {
  /// The deadline passed without a completed renewal.
  Watchdog,
  /// The lease record is gone.
  RecordMissing,
  /// The lease record is not the one this node published. No author is
  /// named: the node cannot prove who wrote it.
  RecordMismatch,
}

impl FenceReason {
  pub fn event(&self) -> &'static str {
    match self {
      FenceReason::Watchdog => "node_lease_watchdog_fence",
      FenceReason::RecordMissing => "node_lease_record_missing_fence",
      FenceReason::RecordMismatch => "node_lease_record_mismatch_fence",
    }
  }

  /// The log line a fenced node prints before exiting with
  /// [`FENCE_EXIT_CODE`].
  pub fn log_line(&self, node: &str) -> String {
    let why = match self {
      FenceReason::Watchdog => "the node lease could have lapsed before a renewal completed",
      FenceReason::RecordMissing => "the node lease record is missing",
      FenceReason::RecordMismatch => "the node lease record no longer matches what this node wrote",
    };
    format!(
      "SELF-FENCE: {}: node {node}: {why}; exiting with code {FENCE_EXIT_CODE}",
      self.event()
    )
  }
}

impl fmt::Display for FenceReason {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(self.event())
  }
}

/// The next lease request, or what to wait for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseStep {
  /// Call [`LeaseKeeper::tick`] at this local time (or on any other event).
  Wait { until_ms: u64 },
  /// GET `nodes/<node>.json`; answer with [`LeaseKeeper::on_read`].
  Read,
  /// PUT with `If-None-Match: *`; answer with [`LeaseKeeper::on_write`].
  Create(NodeLease),
  /// PUT with `If-Match: token`; answer with [`LeaseKeeper::on_write`].
  Cas { lease: NodeLease, token: Token },
  /// Clean shutdown, after every cell was released: PUT this expired lease
  /// with `If-Match: token`, then close without waiting for more. Peers
  /// read it as a dead node and take its cells at once.
  Retire { lease: NodeLease, token: Token },
  /// Log [`FenceReason::log_line`], break every owned cell, exit with
  /// [`FENCE_EXIT_CODE`]. Terminal.
  Fence(FenceReason),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
  /// Before the first lease: read what a previous process left.
  Startup,
  Idle,
  /// A create or CAS of this lease is in flight.
  Writing(NodeLease),
  /// An ambiguous write: reading to learn whether it happened.
  Reconciling,
  /// A rejected renewal: reading to tell a missing record from a replaced one.
  Classifying,
  Released,
  Fenced(FenceReason),
}

/// Wait between reads after a read error, as a fraction of the ttl.
const READ_RETRY_DIVISOR: u64 = 20;

/// Startup attempts to write over a record that keeps changing.
const STARTUP_ROUNDS: u32 = 4;

/// Leases whose write was ambiguous are remembered (they may be in the
/// bucket); past this many the node gives up and fences.
const MAX_UNCONFIRMED: usize = 4;

/// The lease of one node process: a sans-IO state machine.
///
/// Drive it with [`tick`](Self::tick) whenever the local clock reaches the
/// time of a returned [`LeaseStep::Wait`], and with the answers of the
/// requests it returns. At most one request is in flight at a time.
#[derive(Clone, Debug)]
pub struct LeaseKeeper {
  cfg: LeaseConfig,
  node: String,
  address: String,
  load: u32,
  /// The lease this node knows is in the bucket, with its version.
  held: Option<(NodeLease, Token)>,
  deadline_ms: u64,
  next_renew_ms: u64,
  retry_at_ms: u64,
  busy: bool,
  phase: Phase,
  /// Written with an ambiguous answer: any of them may be in the bucket,
  /// and finding one there is finding our own lease, not a mismatch.
  unconfirmed: Vec<NodeLease>,
  last_expiry: u64,
  startup_rounds: u32,
}

impl LeaseKeeper {
  /// A new process's lease; the first step reads the record a previous
  /// process of this node may have left.
  pub fn start(cfg: LeaseConfig, node: &str, address: &str, load: u32) -> (Self, LeaseStep) {
    let k = LeaseKeeper {
      cfg,
      node: node.to_string(),
      address: address.to_string(),
      load,
      held: None,
      deadline_ms: 0,
      next_renew_ms: 0,
      retry_at_ms: 0,
      busy: true,
      phase: Phase::Startup,
      unconfirmed: Vec::new(),
      last_expiry: 0,
      startup_rounds: 0,
    };
    (k, LeaseStep::Read)
  }

  pub fn config(&self) -> LeaseConfig {
    self.cfg
  }

  /// The lease known to be in the bucket.
  pub fn held(&self) -> Option<&NodeLease> {
    self.held.as_ref().map(|(l, _)| l)
  }

  /// The local time from which this node must not acknowledge; 0 before the
  /// first lease.
  pub fn deadline_ms(&self) -> u64 {
    self.deadline_ms
  }

  /// Whether a write may be acknowledged (or a cell acquired) now.
  pub fn can_ack(&self, now_ms: u64) -> bool {
    self.held.is_some() && !self.is_fenced() && can_acknowledge(now_ms, self.deadline_ms)
  }

  pub fn is_fenced(&self) -> bool {
    matches!(self.phase, Phase::Fenced(_))
  }

  /// The earliest local time at which [`tick`](Self::tick) has work.
  pub fn next_wakeup(&self) -> u64 {
    let mut t = u64::MAX;
    if self.held.is_some() {
      t = t.min(self.deadline_ms);
    }
    match self.phase {
      Phase::Idle => t = t.min(self.next_renew_ms),
      Phase::Startup | Phase::Reconciling | Phase::Classifying if !self.busy => {
        t = t.min(self.retry_at_ms)
      }
      _ => {}
    }
    t
  }

  /// Time passed: fence at the deadline, renew when due, retry reads.
  pub fn tick(&mut self, now_ms: u64) -> LeaseStep {
    if let Phase::Fenced(r) = self.phase {
      return LeaseStep::Fence(r);
    }
    if self.phase == Phase::Released {
      return LeaseStep::Wait { until_ms: u64::MAX };
    }
    if self.held.is_some() && now_ms >= self.deadline_ms {
      // Even with a renewal in flight: its answer would come too late.
      return self.fence(FenceReason::Watchdog);
    }
    if !self.busy {
      match self.phase {
        Phase::Idle if now_ms >= self.next_renew_ms => {
          let lease = self.make(now_ms);
          let token = self.held.as_ref().expect("idle holds a lease").1.clone();
          return self.write(lease, Some(token));
        }
        Phase::Startup | Phase::Reconciling | Phase::Classifying if now_ms >= self.retry_at_ms => {
          self.busy = true;
          return LeaseStep::Read;
        }
        _ => {}
      }
    }
    LeaseStep::Wait {
      until_ms: self.next_wakeup(),
    }
  }

  /// The answer to [`LeaseStep::Read`].
  pub fn on_read(&mut self, read: ReadResult<NodeLease>, now_ms: u64) -> LeaseStep {
    self.busy = false;
    if self.phase == Phase::Released {
      return LeaseStep::Wait { until_ms: u64::MAX };
    }
    if let Some(step) = self.terminal(now_ms) {
      return step;
    }
    let read = match read {
      Ok(r) => r,
      Err(_) => {
        // A failed read proves nothing; try again while the deadline holds.
        self.retry_at_ms = now_ms + (self.cfg.ttl_ms / READ_RETRY_DIVISOR).max(1);
        return LeaseStep::Wait {
          until_ms: self.next_wakeup(),
        };
      }
    };
    if let Some((rec, token)) = &read
      && self.unconfirmed.contains(rec)
    {
      // One of our ambiguous writes happened.
      return self.adopt(rec.clone(), token.clone());
    }
    match (&self.phase, self.held.is_some()) {
      (Phase::Startup, _) | (_, false) => {
        // Startup (or a startup write that went astray): write over whatever
        // a previous process of this node left. The supervisor restarts a
        // node only after the previous process exited.
        self.startup_rounds += 1;
        if self.startup_rounds > STARTUP_ROUNDS {
          return self.fence(FenceReason::RecordMismatch);
        }
        self.phase = Phase::Startup;
        let lease = self.make(now_ms);
        self.write(lease, read.map(|(_, t)| t))
      }
      (Phase::Reconciling, true) => match read {
        None => self.fence(FenceReason::RecordMissing),
        Some((rec, token)) if Some((&rec, &token)) == self.held.as_ref().map(|(l, t)| (l, t)) => {
          // The renewal did not happen: renew again from the same version.
          let lease = self.make(now_ms);
          self.write(lease, Some(token))
        }
        Some(_) => self.fence(FenceReason::RecordMismatch),
      },
      (_, true) => match read {
        None => self.fence(FenceReason::RecordMissing),
        Some(_) => self.fence(FenceReason::RecordMismatch),
      },
    }
  }

  /// The answer to [`LeaseStep::Create`] or [`LeaseStep::Cas`].
  pub fn on_write(&mut self, answer: WriteAnswer, now_ms: u64) -> LeaseStep {
    self.busy = false;
    match self.phase {
      Phase::Fenced(r) => return LeaseStep::Fence(r),
      Phase::Released => return LeaseStep::Wait { until_ms: u64::MAX },
      _ => {}
    }
    let Phase::Writing(lease) = std::mem::replace(&mut self.phase, Phase::Idle) else {
      panic!("LeaseKeeper::on_write without a write in flight");
    };
    if let Some(step) = self.terminal(now_ms) {
      return step;
    }
    match answer {
      WriteAnswer::Applied(token) => self.adopt(lease, token),
      WriteAnswer::Rejected => {
        self.phase = if self.held.is_some() {
          Phase::Classifying
        } else {
          Phase::Startup
        };
        self.busy = true;
        LeaseStep::Read
      }
      WriteAnswer::Ambiguous => {
        if self.unconfirmed.len() >= MAX_UNCONFIRMED {
          return self.fence(FenceReason::RecordMismatch);
        }
        self.unconfirmed.push(lease);
        self.phase = Phase::Reconciling;
        self.busy = true;
        LeaseStep::Read
      }
    }
  }

  /// Clean shutdown, after every owned cell was released: stop renewing and
  /// retire the record so that peers need not wait for it to expire.
  ///
  /// Retiring is a compare-and-swap to an expired lease (`expires_ms: 0`),
  /// not the unconditional DELETE the seeds describe: a DELETE still in
  /// flight when the process exits can land after the next process of this
  /// node wrote its lease, and remove a live node's lease (the simulator
  /// found this). A stale compare-and-swap fails cleanly instead.
  pub fn release(&mut self) -> LeaseStep {
    self.phase = Phase::Released;
    self.deadline_ms = 0;
    match &self.held {
      Some((lease, token)) => LeaseStep::Retire {
        lease: NodeLease {
          expires_ms: 0,
          ..lease.clone()
        },
        token: token.clone(),
      },
      None => LeaseStep::Wait { until_ms: u64::MAX },
    }
  }

  /// Fenced stays fenced; a deadline that passed while a request was in
  /// flight fences before its answer is looked at.
  fn terminal(&mut self, now_ms: u64) -> Option<LeaseStep> {
    if let Phase::Fenced(r) = self.phase {
      return Some(LeaseStep::Fence(r));
    }
    if self.held.is_some() && now_ms >= self.deadline_ms {
      return Some(self.fence(FenceReason::Watchdog));
    }
    None
  }

  fn adopt(&mut self, lease: NodeLease, token: Token) -> LeaseStep {
    self.deadline_ms = self.cfg.fence_deadline(lease.expires_ms);
    // Renew a third of the lifetime after this lease was written.
    let written_at = lease.expires_ms.saturating_sub(self.cfg.ttl_ms);
    self.next_renew_ms = written_at + self.cfg.renew_every_ms();
    self.held = Some((lease, token));
    self.unconfirmed.clear();
    self.phase = Phase::Idle;
    LeaseStep::Wait {
      until_ms: self.next_wakeup(),
    }
  }

  fn write(&mut self, lease: NodeLease, token: Option<Token>) -> LeaseStep {
    self.phase = Phase::Writing(lease.clone());
    self.busy = true;
    match token {
      Some(token) => LeaseStep::Cas { lease, token },
      None => LeaseStep::Create(lease),
    }
  }

  fn fence(&mut self, r: FenceReason) -> LeaseStep {
    self.phase = Phase::Fenced(r);
    LeaseStep::Fence(r)
  }

  /// A lease written now; expiries strictly increase so that each write of
  /// this process is recognisable.
  fn make(&mut self, now_ms: u64) -> NodeLease {
    let expires_ms = self.cfg.expiry(now_ms).max(self.last_expiry + 1);
    self.last_expiry = expires_ms;
    NodeLease {
      node: self.node.clone(),
      expires_ms,
      address: self.address.clone(),
      load: self.load,
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const CFG: LeaseConfig = LeaseConfig {
    ttl_ms: 10_000,
    margin_ms: 2_000,
  };

  fn tok(s: &str) -> Token {
    Token::new(s)
  }

  /// A keeper that holds a lease written at local time 1000 as version "v1".
  fn serving() -> LeaseKeeper {
    let (mut k, s) = LeaseKeeper::start(CFG, "n1", "10.0.0.1:9000", 0);
    assert_eq!(s, LeaseStep::Read);
    let LeaseStep::Create(l) = k.on_read(Ok(None), 1_000) else {
      panic!()
    };
    assert_eq!(l.expires_ms, 11_000);
    assert_eq!(
      k.on_write(WriteAnswer::Applied(tok("v1")), 1_010),
      LeaseStep::Wait { until_ms: 4_333 }
    );
    k
  }

  #[test]
  fn timing() {
    let c = LeaseConfig::default();
    assert_eq!((c.ttl_ms, c.margin_ms), (10_000, 2_000));
    assert_eq!(c.renew_every_ms(), 3_333);
    assert_eq!(c.expiry(5_000), 15_000);
    assert_eq!(c.fence_deadline(15_000), 13_000);
    assert_eq!(c.fence_deadline(1_000), 0);
    assert!(c.check().is_ok());
    assert!(
      LeaseConfig {
        ttl_ms: 3_000,
        margin_ms: 2_000
      }
      .check()
      .is_err()
    );
    assert!(
      LeaseConfig {
        ttl_ms: 3_000,
        margin_ms: 0
      }
      .check()
      .is_err()
    );
    assert!(can_acknowledge(12_999, 13_000));
    assert!(!can_acknowledge(13_000, 13_000));
    assert_eq!(lease_key("n1"), "nodes/n1.json");
  }

  #[test]
  fn renews_every_third_and_fences_at_the_deadline() {
    let mut k = serving();
    assert!(k.can_ack(8_999));
    assert_eq!(k.deadline_ms(), 9_000);
    assert_eq!(k.tick(4_000), LeaseStep::Wait { until_ms: 4_333 });
    let LeaseStep::Cas { lease, token } = k.tick(4_333) else {
      panic!()
    };
    assert_eq!((lease.expires_ms, token), (14_333, tok("v1")));
    // No second request while one is in flight.
    assert_eq!(k.tick(5_000), LeaseStep::Wait { until_ms: 9_000 });
    assert_eq!(
      k.on_write(WriteAnswer::Applied(tok("v2")), 4_400),
      LeaseStep::Wait { until_ms: 7_666 }
    );
    assert_eq!(k.deadline_ms(), 12_333);
    // Renewals stop arriving: the watchdog fences at the deadline, terminally.
    let LeaseStep::Cas { .. } = k.tick(7_666) else {
      panic!()
    };
    assert!(k.can_ack(12_332));
    assert_eq!(k.tick(12_333), LeaseStep::Fence(FenceReason::Watchdog));
    assert!(!k.can_ack(12_333));
    assert!(k.is_fenced());
    // The late answer does not revive it.
    let s = k.on_write(WriteAnswer::Applied(tok("v3")), 12_400);
    assert_eq!(s, LeaseStep::Fence(FenceReason::Watchdog));
    assert!(!k.can_ack(12_400));
  }

  #[test]
  fn a_renewal_answered_after_the_deadline_fences() {
    let mut k = serving();
    let LeaseStep::Cas { .. } = k.tick(4_333) else {
      panic!()
    };
    let s = k.on_write(WriteAnswer::Applied(tok("v2")), 9_000);
    assert_eq!(s, LeaseStep::Fence(FenceReason::Watchdog));
  }

  #[test]
  fn ambiguous_renewal_reconciles_by_reading() {
    let mut k = serving();
    let LeaseStep::Cas { lease: l2, .. } = k.tick(4_333) else {
      panic!()
    };
    assert_eq!(k.on_write(WriteAnswer::Ambiguous, 4_500), LeaseStep::Read);
    // It happened: adopt it.
    assert_eq!(
      k.on_read(Ok(Some((l2.clone(), tok("v2")))), 4_600),
      LeaseStep::Wait { until_ms: 7_666 }
    );
    assert_eq!(k.held(), Some(&l2));

    // It did not happen: renew again from the version we hold.
    let mut k = serving();
    let LeaseStep::Cas { lease: l2, .. } = k.tick(4_333) else {
      panic!()
    };
    k.on_write(WriteAnswer::Ambiguous, 4_500);
    let held = k.held().unwrap().clone();
    let LeaseStep::Cas { lease: l3, token } = k.on_read(Ok(Some((held, tok("v1")))), 4_600) else {
      panic!()
    };
    assert_eq!(token, tok("v1"));
    assert!(l3.expires_ms > l2.expires_ms);
    // ... and the first write landed late: the retry is rejected, and the
    // record found is one of ours.
    assert_eq!(k.on_write(WriteAnswer::Rejected, 4_700), LeaseStep::Read);
    assert!(matches!(
      k.on_read(Ok(Some((l2.clone(), tok("v2")))), 4_800),
      LeaseStep::Wait { .. }
    ));
    assert_eq!(k.held(), Some(&l2));
    assert!(k.can_ack(4_800));
  }

  #[test]
  fn missing_or_foreign_record_fences_at_once() {
    let mut k = serving();
    let LeaseStep::Cas { .. } = k.tick(4_333) else {
      panic!()
    };
    assert_eq!(k.on_write(WriteAnswer::Rejected, 4_400), LeaseStep::Read);
    assert_eq!(
      k.on_read(Ok(None), 4_500),
      LeaseStep::Fence(FenceReason::RecordMissing)
    );

    let mut k = serving();
    let LeaseStep::Cas { .. } = k.tick(4_333) else {
      panic!()
    };
    k.on_write(WriteAnswer::Rejected, 4_400);
    let other = NodeLease {
      node: "n1".into(),
      expires_ms: 99_999,
      address: "x".into(),
      load: 0,
    };
    assert_eq!(
      k.on_read(Ok(Some((other.clone(), tok("vx")))), 4_500),
      LeaseStep::Fence(FenceReason::RecordMismatch)
    );

    let mut k = serving();
    let LeaseStep::Cas { .. } = k.tick(4_333) else {
      panic!()
    };
    k.on_write(WriteAnswer::Ambiguous, 4_400);
    assert_eq!(
      k.on_read(Ok(Some((other, tok("vx")))), 4_500),
      LeaseStep::Fence(FenceReason::RecordMismatch)
    );
  }

  #[test]
  fn read_errors_retry_until_the_deadline() {
    let mut k = serving();
    let LeaseStep::Cas { .. } = k.tick(4_333) else {
      panic!()
    };
    k.on_write(WriteAnswer::Ambiguous, 4_400);
    let e = Err(crate::StoreError("timeout".into()));
    assert_eq!(
      k.on_read(e.clone(), 4_500),
      LeaseStep::Wait { until_ms: 5_000 }
    );
    assert_eq!(k.tick(5_000), LeaseStep::Read);
    assert_eq!(k.on_read(e, 8_990), LeaseStep::Wait { until_ms: 9_000 });
    assert_eq!(k.tick(9_000), LeaseStep::Fence(FenceReason::Watchdog));
  }

  #[test]
  fn startup_writes_over_a_previous_process() {
    let (mut k, _) = LeaseKeeper::start(CFG, "n1", "a", 0);
    let old = NodeLease {
      node: "n1".into(),
      expires_ms: 500,
      address: "a".into(),
      load: 0,
    };
    let LeaseStep::Cas { token, .. } = k.on_read(Ok(Some((old, tok("old")))), 1_000) else {
      panic!()
    };
    assert_eq!(token, tok("old"));
    assert!(!k.can_ack(1_000));
    assert_eq!(k.on_write(WriteAnswer::Rejected, 1_100), LeaseStep::Read);
    assert!(matches!(k.on_read(Ok(None), 1_200), LeaseStep::Create(_)));
    assert!(matches!(
      k.on_write(WriteAnswer::Applied(tok("v")), 1_300),
      LeaseStep::Wait { .. }
    ));
    assert!(k.can_ack(1_300));
  }

  #[test]
  fn release_retires_the_lease_and_stops_acknowledging() {
    let mut k = serving();
    let LeaseStep::Retire { lease, token } = k.release() else {
      panic!()
    };
    assert_eq!(
      (lease.expires_ms, lease.node.as_str(), token),
      (0, "n1", tok("v1"))
    );
    assert!(!k.can_ack(1_500));
    assert_eq!(k.tick(50_000), LeaseStep::Wait { until_ms: u64::MAX });
  }

  #[test]
  fn fence_lines() {
    let line = FenceReason::RecordMismatch.log_line("n7");
    assert!(
      line.starts_with("SELF-FENCE: node_lease_record_mismatch_fence: node n7"),
      "{line}"
    );
    assert_eq!(FenceReason::Watchdog.event(), "node_lease_watchdog_fence");
    assert_eq!(
      FenceReason::RecordMissing.event(),
      "node_lease_record_missing_fence"
    );
    assert_eq!(FENCE_EXIT_CODE, 3);
  }
}

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
//! A renewal that does not reach the bucket does not fence: the node retries,
//! with growing, jittered pauses ([`Backoff`]), while the deadline has not
//! passed. A failed write, or an ambiguous one whose record reads back
//! unchanged, is such a renewal: nobody else wrote. A renewal answer that
//! arrives after the deadline does not revive the node: fencing is terminal,
//! and only a restart returns it. A lease record that is missing, or that
//! another writer replaced, fences at once. Every fence says what happened
//! ([`LeaseKeeper::fence_line`]). A clean shutdown retires the lease with a
//! compare-and-swap to an expired record (see [`LeaseKeeper::release`]).

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

  /// The first pause before a lease request is retried after a store
  /// failure: short, so that a blip costs little.
  pub fn retry_base_ms(&self) -> u64 {
    (self.ttl_ms / 200).max(1)
  }

  /// The longest pause between retries: a tenth of the lifetime, so that
  /// several retries fit between the renewal time and the fence deadline.
  pub fn retry_cap_ms(&self) -> u64 {
    (self.ttl_ms / 10).max(self.retry_base_ms())
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

/// Pauses between retries of a store request: exponential from `base_ms` up
/// to `cap_ms`, each drawn from the upper half of its step ("equal jitter"),
/// so that nodes that failed together do not retry in step. The randomness
/// is the caller's: a seed, stretched with splitmix64.
#[derive(Clone, Debug)]
pub struct Backoff {
  base_ms: u64,
  cap_ms: u64,
  state: u64,
}

impl Backoff {
  pub fn new(base_ms: u64, cap_ms: u64, seed: u64) -> Self {
    Backoff {
      base_ms: base_ms.max(1),
      cap_ms: cap_ms.max(base_ms).max(1),
      state: seed,
    }
  }

  pub fn reseed(&mut self, seed: u64) {
    self.state = seed;
  }

  /// The pause before retry number `attempt` (0: the first retry), in
  /// `[step/2, step]` where `step = min(base * 2^attempt, cap)`.
  pub fn delay_ms(&mut self, attempt: u32) -> u64 {
    let step = self
      .base_ms
      .saturating_mul(1 << attempt.min(40))
      .min(self.cap_ms);
    let half = step / 2;
    half + self.next_u64() % (step - half + 1)
  }

  fn next_u64(&mut self) -> u64 {
    self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = self.state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
  }
}

/// A jitter seed made from names (FNV-1a), for a machine whose caller
/// injects none: deterministic, but different per node and per cell.
pub fn name_seed(parts: &[&str]) -> u64 {
  let mut h: u64 = 0xcbf2_9ce4_8422_2325;
  for p in parts {
    for b in p.bytes().chain([0]) {
      h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
  }
  h
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
  /// The identity of the node's node log (its followers' copies): a node
  /// restarted without its disk has a new one, so a recovery never takes
  /// its empty log for a complete one. `""`: none.
  pub log: String,
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
      log: String::new(),
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
  /// The lease record is not one this node published: another writer
  /// replaced it (or, at startup, kept replacing it). No author is named:
  /// the node cannot prove who wrote it.
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

  /// A generic fence line, without the details only the keeper knows; a
  /// node prints [`LeaseKeeper::fence_line`] instead.
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
  /// Log [`LeaseKeeper::fence_line`], break every owned cell, exit with
  /// [`FENCE_EXIT_CODE`]. Terminal.
  Fence(FenceReason),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
  /// Before the first lease: read what a previous process left.
  Startup,
  /// Holding a lease; the next renewal (or retry) is due at `next_renew_ms`.
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

/// Startup writes that may meet a record another writer changed since it
/// was read, before the node gives up: another process of this node is
/// running.
const STARTUP_ROUNDS: u32 = 4;

/// Ambiguous writes remembered (any may be in the bucket). Before the
/// deadline the backoff allows far fewer; only a startup against a dead
/// store could reach this, and it forgets the oldest.
const MAX_UNCONFIRMED: usize = 64;

/// Store trouble since the last good answer, for the fence line.
#[derive(Clone, Debug, Default)]
struct Trouble {
  since_ms: Option<u64>,
  attempts: u32,
  last: String,
}

/// The lease of one node process: a sans-IO state machine.
///
/// Drive it with [`tick`](Self::tick) whenever the local clock reaches the
/// time of a returned [`LeaseStep::Wait`], and with the answers of the
/// requests it returns. At most one request is in flight at a time. Retry
/// pauses are jittered from a seed the caller injects with
/// [`set_jitter_seed`](Self::set_jitter_seed) (by default one derived from
/// the node's name).
#[derive(Clone, Debug)]
pub struct LeaseKeeper {
  cfg: LeaseConfig,
  node: String,
  address: String,
  load: u32,
  log: String,
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
  /// The version the last write was conditioned on (`None`: a create). A
  /// read that finds it again means nobody else wrote.
  based_on: Option<Token>,
  sent_at_ms: u64,
  trouble: Trouble,
  /// The store's words for the next `on_write` (see [`Self::note`]).
  words: Option<String>,
  backoff: Backoff,
  fence_detail: String,
}

impl LeaseKeeper {
  /// Names the node's node log in the leases it writes.
  pub fn set_log(&mut self, log: &str) {
    self.log = log.to_string();
  }

  /// A new process's lease; the first step reads the record a previous
  /// process of this node may have left.
  pub fn start(cfg: LeaseConfig, node: &str, address: &str, load: u32) -> (Self, LeaseStep) {
    let k = LeaseKeeper {
      cfg,
      node: node.to_string(),
      address: address.to_string(),
      load,
      log: String::new(),
      held: None,
      deadline_ms: 0,
      next_renew_ms: 0,
      retry_at_ms: 0,
      busy: true,
      phase: Phase::Startup,
      unconfirmed: Vec::new(),
      last_expiry: 0,
      startup_rounds: 0,
      based_on: None,
      sent_at_ms: 0,
      trouble: Trouble::default(),
      words: None,
      backoff: Backoff::new(
        cfg.retry_base_ms(),
        cfg.retry_cap_ms(),
        name_seed(&[node, address]),
      ),
      fence_detail: String::new(),
    };
    (k, LeaseStep::Read)
  }

  /// Seeds the jitter of the retry pauses (the core draws no random number
  /// itself): give each process a random seed, so that nodes that failed
  /// together do not retry together.
  pub fn set_jitter_seed(&mut self, seed: u64) {
    self.backoff.reseed(seed);
  }

  /// The store's own words for the answer about to be passed to
  /// [`on_write`](Self::on_write), e.g. an ambiguous write's error: the
  /// fence line quotes them.
  pub fn note(&mut self, words: &str) {
    self.words = Some(words.to_string());
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

  /// Once fenced: the line to log, with celld's event name and what
  /// actually happened (the store error, or the record found).
  pub fn fence_line(&self) -> Option<String> {
    let Phase::Fenced(r) = self.phase else {
      return None;
    };
    Some(format!(
      "SELF-FENCE: {}: node {}: {}; exiting with code {FENCE_EXIT_CODE}",
      r.event(),
      self.node,
      self.fence_detail
    ))
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
      return self.watchdog(now_ms, false);
    }
    if !self.busy {
      match self.phase {
        Phase::Idle if now_ms >= self.next_renew_ms => {
          let lease = self.make(now_ms);
          let token = self.held.as_ref().expect("idle holds a lease").1.clone();
          return self.write(lease, Some(token), now_ms);
        }
        Phase::Startup | Phase::Reconciling | Phase::Classifying if now_ms >= self.retry_at_ms => {
          return self.read(now_ms);
        }
        _ => {}
      }
    }
    self.wait()
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
      Err(e) => {
        // A failed read proves nothing; try again while the deadline holds.
        self.trouble(now_ms, format!("reading the lease record: {}", e.0));
        self.retry_at_ms = now_ms + self.pause();
        return self.wait();
      }
    };
    if let Some((rec, token)) = &read
      && self.unconfirmed.contains(rec)
    {
      // One of our ambiguous writes happened.
      return self.adopt(rec.clone(), token.clone());
    }
    // Nobody else wrote since our write's condition was read.
    let unchanged = read.as_ref().map(|(_, t)| t) == self.based_on.as_ref();
    if self.held.is_none() {
      return self.startup_read(read, unchanged, now_ms);
    }
    match read {
      _ if unchanged => {
        // Our renewal did not happen (or has not yet): the store failed,
        // nobody took the lease. Renew again after a pause.
        if self.phase == Phase::Classifying {
          self.trouble(
            now_ms,
            "a renewal was rejected, yet the record is unchanged".into(),
          );
        }
        self.phase = Phase::Idle;
        self.next_renew_ms = now_ms + self.pause();
        self.wait()
      }
      None => {
        let mine = self.held.as_ref().map_or(0, |(l, _)| l.expires_ms);
        let detail = format!(
          "the node lease record is missing (this node's record expires_ms {mine} was there); \
           someone deleted it"
        );
        self.fence(FenceReason::RecordMissing, detail)
      }
      Some((rec, token)) => {
        let detail = self.foreign(&rec, &token);
        self.fence(FenceReason::RecordMismatch, detail)
      }
    }
  }

  /// The answer to [`LeaseStep::Create`] or [`LeaseStep::Cas`].
  pub fn on_write(&mut self, answer: WriteAnswer, now_ms: u64) -> LeaseStep {
    self.busy = false;
    let words = self.words.take();
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
      WriteAnswer::Rejected if self.held.is_some() => {
        self.phase = Phase::Classifying;
        self.read(now_ms)
      }
      WriteAnswer::Rejected => {
        // A startup write met a record changed since it was read.
        self.startup_rounds += 1;
        if self.startup_rounds > STARTUP_ROUNDS {
          return self.startup_contention();
        }
        self.phase = Phase::Startup;
        self.read(now_ms)
      }
      WriteAnswer::Ambiguous => {
        let what = match words {
          Some(w) => format!("a lease write's answer was lost: {w}"),
          None => "a lease write's answer was lost (it may or may not have happened)".into(),
        };
        self.trouble(now_ms, what);
        if self.unconfirmed.len() >= MAX_UNCONFIRMED {
          self.unconfirmed.remove(0);
        }
        self.unconfirmed.push(lease);
        self.phase = Phase::Reconciling;
        self.read(now_ms)
      }
      WriteAnswer::Failed(e) => {
        // Nothing happened: write again after a pause.
        self.trouble(now_ms, e.0);
        let at = now_ms + self.pause();
        if self.held.is_some() {
          self.next_renew_ms = at;
        } else {
          self.phase = Phase::Startup;
          self.retry_at_ms = at;
        }
        self.wait()
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

  /// A read before the first lease is held: write over whatever a previous
  /// process of this node left (the supervisor restarts a node only after
  /// the previous process exited).
  fn startup_read(
    &mut self,
    read: Option<(NodeLease, Token)>,
    unchanged: bool,
    now_ms: u64,
  ) -> LeaseStep {
    if self.phase == Phase::Reconciling {
      if unchanged {
        // The ambiguous write did not happen: try again after a pause.
        self.phase = Phase::Startup;
        self.retry_at_ms = now_ms + self.pause();
        return self.wait();
      }
      // Another writer changed the record under our write.
      self.startup_rounds += 1;
      if self.startup_rounds > STARTUP_ROUNDS {
        return self.startup_contention();
      }
    }
    self.phase = Phase::Startup;
    let lease = self.make(now_ms);
    self.write(lease, read.map(|(_, t)| t), now_ms)
  }

  fn startup_contention(&mut self) -> LeaseStep {
    let detail = format!(
      "the node lease record changed under {} startup writes of this node; is another \
       process of node {} running?",
      self.startup_rounds, self.node
    );
    self.fence(FenceReason::RecordMismatch, detail)
  }

  /// Fenced stays fenced; a deadline that passed while a request was in
  /// flight fences before its answer is looked at.
  fn terminal(&mut self, now_ms: u64) -> Option<LeaseStep> {
    if let Phase::Fenced(r) = self.phase {
      return Some(LeaseStep::Fence(r));
    }
    if self.held.is_some() && now_ms >= self.deadline_ms {
      return Some(self.watchdog(now_ms, true));
    }
    None
  }

  /// The deadline passed: say why no renewal completed in time.
  fn watchdog(&mut self, now_ms: u64, answered: bool) -> LeaseStep {
    let ago = now_ms.saturating_sub(self.sent_at_ms);
    let detail = match self.trouble.since_ms {
      Some(since) => format!(
        "lease renewal failed for {} ms ({}; last: {}); the fence deadline passed",
        now_ms.saturating_sub(since),
        attempts(self.trouble.attempts),
        self.trouble.last
      ),
      None if answered => {
        format!("the answer to a lease request sent {ago} ms ago came after the fence deadline")
      }
      None if self.busy => {
        format!("a lease request sent {ago} ms ago is unanswered at the fence deadline")
      }
      None => "no renewal was attempted before the fence deadline: the process or its clock \
               stalled"
        .into(),
    };
    self.fence(FenceReason::Watchdog, detail)
  }

  /// What a replaced record holds; the author is not named, since the node
  /// cannot prove who wrote it.
  fn foreign(&self, rec: &NodeLease, token: &Token) -> String {
    let mine = self.held.as_ref().map_or(0, |(l, _)| l.expires_ms);
    format!(
      "the node lease record was replaced: it now holds expires_ms {} and address {} (version \
       {}), which this node did not write (its own record: expires_ms {mine})",
      rec.expires_ms,
      rec.address,
      token.0.trim().replace('\n', " ")
    )
  }

  fn trouble(&mut self, now_ms: u64, what: String) {
    self.trouble.since_ms.get_or_insert(now_ms);
    self.trouble.attempts += 1;
    self.trouble.last = what;
  }

  /// The pause before the next retry: grows with the failures in a row.
  fn pause(&mut self) -> u64 {
    let attempt = self.trouble.attempts.saturating_sub(1);
    self.backoff.delay_ms(attempt)
  }

  fn adopt(&mut self, lease: NodeLease, token: Token) -> LeaseStep {
    self.deadline_ms = self.cfg.fence_deadline(lease.expires_ms);
    // Renew a third of the lifetime after this lease was written.
    let written_at = lease.expires_ms.saturating_sub(self.cfg.ttl_ms);
    self.next_renew_ms = written_at + self.cfg.renew_every_ms();
    self.held = Some((lease, token));
    self.unconfirmed.clear();
    self.trouble = Trouble::default();
    self.phase = Phase::Idle;
    self.wait()
  }

  fn wait(&self) -> LeaseStep {
    LeaseStep::Wait {
      until_ms: self.next_wakeup(),
    }
  }

  fn read(&mut self, now_ms: u64) -> LeaseStep {
    self.busy = true;
    self.sent_at_ms = now_ms;
    LeaseStep::Read
  }

  fn write(&mut self, lease: NodeLease, token: Option<Token>, now_ms: u64) -> LeaseStep {
    self.phase = Phase::Writing(lease.clone());
    self.busy = true;
    self.sent_at_ms = now_ms;
    self.based_on = token.clone();
    match token {
      Some(token) => LeaseStep::Cas { lease, token },
      None => LeaseStep::Create(lease),
    }
  }

  fn fence(&mut self, r: FenceReason, detail: String) -> LeaseStep {
    self.phase = Phase::Fenced(r);
    self.fence_detail = detail;
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
      log: self.log.clone(),
    }
  }
}

/// "1 attempt", "3 attempts".
pub(crate) fn attempts(n: u32) -> String {
  if n == 1 {
    "1 attempt".into()
  } else {
    format!("{n} attempts")
  }
}

#[cfg(test)]
mod tests;

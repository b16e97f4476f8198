//! The fault lab: three `cellhost node`s serving `faultlab/worker` (a
//! counter per name, deployed with `cellhost deploy`) on one bucket, several clients incrementing and reading a few
//! counters through them, and now and then incrementing in a turn whose
//! commit fails (a *poisoned* increment, which must never succeed), and
//! faults injected from a seed, one at a time, until the time is up:
//! SIGKILL, SIGKILL with the data directory wiped, SIGSTOP past the lease
//! then SIGCONT, SIGTERM, a rolling restart (each node drained by SIGTERM
//! and started again, in turn), a deploy of a new version (each node
//! switches in process, its objects moving at their idle points), a store
//! outage, flaky uploads, a partition of one node from the store, and a
//! partition ended by SIGKILL (the node acknowledged on its followers' node
//! logs while its uploads failed). The clients spread their calls
//! over the nodes, so most reach their object through forwarding. Then the whole fleet is killed and
//! cold-started with empty data directories and must read the same counts.
//! Nodes run epoch GC with a one-second retention (`--ltx-retention-secs
//! 1`), so the epochs that takeovers leave behind are deleted under the
//! same faults, and counters that stay open long enough take snapshots.
//! The history is checked by `faultlab/check.rs` (no value acknowledged
//! twice, nothing acknowledged lost, real-time order, no acknowledgement
//! past the answering node's fence deadline) and every node exit must be 0
//! or 3 without a panic (a SIGKILL the lab sent aside).
//!
//! Two stores, one test each:
//! - `file://`: each node reaches the bucket through its own symlink, so one
//!   node can be cut off (its link points at a regular file: every operation
//!   fails with ENOTDIR) or all of them (an outage); flaky uploads swap the
//!   bucket's staging directory for a file in short random bursts, so a
//!   fraction of writes fail while reads work. A file system cannot hold a
//!   request, so a partition here fails fast instead of hanging.
//! - S3 through moto's server, each node behind its own fault proxy
//!   (`faultlab/proxy.rs`): a partition holds the node's requests until it
//!   heals (then delivers them, late), an outage answers 503, flaky uploads
//!   fail a fraction of PUTs (most not forwarded, some forwarded and then
//!   answered 500), and an upload gap fails one LTX upload for good while
//!   later ones land.
//!
//! CI runs a short seeded version (about a minute per store). A soak:
//! `bash bench/faultlab.sh SEED MINUTES [file|s3|both]`, or set
//! `FAULTLAB_SEED`, `FAULTLAB_SECS` (fault phase per store),
//! `FAULTLAB_STORE` (`file`, `s3`, `both`), `FAULTLAB_CLIENTS`,
//! `FAULTLAB_OBJECTS`, `FAULTLAB_POISON_PERMILLE` (of the increments; 0
//! for none), `FAULTLAB_FAULTS` (fault names, comma separated, e.g.
//! `deploy,kill`), `FAULTLAB_STRICT_READS=1` (stale reads fail the
//! lab), `FAULTLAB_KEEP=1` (keep the history and node logs of a passing
//! run too). A failing run keeps them and prints where, and prints the
//! faults and node-log lines around each value acknowledged twice.

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;
#[path = "faultlab/check.rs"]
mod check;
#[path = "faultlab/proxy.rs"]
mod proxy;
#[path = "faultlab/rng.rs"]
mod rng;
#[path = "faultlab/store.rs"]
mod store;
mod support;
#[path = "faultlab/traffic.rs"]
mod traffic;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use check::{Fault, Kind, Op, Outcome, Stop};
use proxy::{Mode, Proxy};
use rng::Rng;
use store::*;
use support::{Cellhost, cellhost_bin, copy_dir, parse_response, repo_root};
use traffic::*;

const TTL_MS: u64 = 3_000;
/// `cellhost run` fences a fifth of the lifetime before the lease expires.
const MARGIN_MS: u64 = TTL_MS / 5;
/// How much earlier than its deadline a fence may be noticed: the lease
/// poll's and the exit's timing.
const FENCE_SLACK_MS: u64 = 250;

struct Config {
  seed: u64,
  secs: u64,
  nodes: usize,
  clients: usize,
  objects: usize,
  strict_reads: bool,
  keep: bool,
  poison_permille: u64,
  /// The fault kinds injected, by name (`FAULTLAB_FAULTS`, comma
  /// separated; empty: every kind the store has).
  faults: Vec<String>,
  /// Tells this lab's directory apart from another of the same store.
  label: &'static str,
}

fn env_u64(name: &str, default: u64) -> u64 {
  std::env::var(name)
    .ok()
    .and_then(|v| v.trim().parse().ok())
    .unwrap_or(default)
}

fn config() -> Config {
  Config {
    seed: env_u64("FAULTLAB_SEED", 20_261_201),
    secs: env_u64("FAULTLAB_SECS", 40),
    nodes: 3,
    clients: env_u64("FAULTLAB_CLIENTS", 6) as usize,
    objects: env_u64("FAULTLAB_OBJECTS", 4) as usize,
    strict_reads: env_u64("FAULTLAB_STRICT_READS", 0) != 0,
    keep: env_u64("FAULTLAB_KEEP", 0) != 0,
    poison_permille: env_u64("FAULTLAB_POISON_PERMILLE", 25),
    faults: std::env::var("FAULTLAB_FAULTS")
      .unwrap_or_default()
      .split(',')
      .map(|f| f.trim().to_string())
      .filter(|f| !f.is_empty())
      .collect(),
    label: "",
  }
}

fn store_selected(store: &str) -> bool {
  match std::env::var("FAULTLAB_STORE").as_deref() {
    Ok("both") | Ok("") | Err(_) => true,
    Ok(s) => s == store,
  }
}

/// The two labs share the machine's cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn faultlab_file() {
  if !store_selected("file") {
    return;
  }
  let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
  run_lab(StoreKind::File, config());
}

/// Deploys, again and again, while objects keep resetting (a fifth of the
/// increments poisoned): an object reset just before its node switched
/// versions, with calls queued behind the failed turn, was built again in
/// the old version for those calls while the new version built it too —
/// two writers on one node, both acknowledging on the followers' logs (the
/// fault lab found it: values acknowledged twice during a deploy).
#[test]
fn faultlab_deploys_while_objects_reset() {
  if !store_selected("file") {
    return;
  }
  let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
  let cfg = config();
  run_lab(
    StoreKind::File,
    Config {
      secs: env_u64("FAULTLAB_SECS", 20),
      poison_permille: env_u64("FAULTLAB_POISON_PERMILLE", 200),
      faults: vec!["deploy".into()],
      label: "-deploy",
      ..cfg
    },
  );
}

#[test]
fn faultlab_s3() {
  if !store_selected("s3") {
    return;
  }
  let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
  run_lab(StoreKind::S3, config());
}

/// A failure's log excerpt reads the nodes' timestamps, coloured or not.
#[test]
fn faultlab_log_excerpt_reads_node_log_times() {
  let plain = "2026-12-06T17:45:01.123456Z  INFO cellhost::events: acquired";
  assert_eq!(line_time_ms(plain), Some(1_796_579_101_123));
  let coloured = "\u{1b}[2m2026-12-06T17:45:01.123456Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m x";
  assert_eq!(line_time_ms(coloured), Some(1_796_579_101_123));
  assert_eq!(line_time_ms("  at main.rs:3"), None);
  let logs = vec![(
    "n1-1".to_string(),
    format!(
      "{plain}\n2026-12-06T17:45:09.000000Z  INFO cellhost::events: later\n2026-12-06T17:45:01.2Z  INFO cellhost::server: quiet\n"
    ),
  )];
  let text = log_excerpt(&logs, 1_796_579_100_000_000, 1_796_579_102_000_000);
  assert!(
    text.contains("n1-1: 2026-12-06T17:45:01.123456Z  INFO cellhost::events: acquired"),
    "{text}"
  );
  assert!(!text.contains("later") && !text.contains("quiet"), "{text}");
}

/// The checker itself: each broken history is caught, a sound one passes.
#[test]
fn faultlab_checker_catches_broken_histories() {
  let nodes = vec!["n1".to_string()];
  let objects = vec!["o".to_string()];
  let op = |kind, t0: u64, t1: u64, outcome| Op {
    client: 0,
    object: 0,
    node: 0,
    kind,
    t0: t0 * 1000,
    t1: t1 * 1000,
    outcome,
  };
  // Lease written at 7 000 ms, expiring at 10 000 (deadline 9 400).
  let leases = vec![BTreeSet::from([10_000u64])];
  let run = |ops: &[Op], finals: &[u64]| {
    check::check(&check::Input {
      nodes: &nodes,
      objects: &objects,
      ops,
      faults: &[],
      stops: &[],
      leases: &leases,
      ttl_ms: TTL_MS,
      margin_ms: MARGIN_MS,
      finals,
      strict_reads: false,
    })
  };
  let sound = [
    op(Kind::Incr, 7_100, 7_200, Outcome::Ok(1)),
    op(Kind::Incr, 7_150, 7_300, Outcome::Error("timeout".into())),
    op(Kind::Incr, 7_400, 7_500, Outcome::Ok(3)),
    op(Kind::Read, 7_600, 7_700, Outcome::Ok(3)),
  ];
  let f = run(&sound, &[3]);
  assert!(f.violations.is_empty(), "{:?}", f.violations);
  let dup = [
    op(Kind::Incr, 7_100, 7_200, Outcome::Ok(1)),
    op(Kind::Incr, 7_150, 7_300, Outcome::Ok(1)),
  ];
  assert_eq!(run(&dup, &[2]).duplicated, 1);
  let lost = [op(Kind::Incr, 7_100, 7_200, Outcome::Ok(5))];
  assert_eq!(run(&lost, &[4]).lost, 1);
  let order = [
    op(Kind::Incr, 7_100, 7_200, Outcome::Ok(3)),
    op(Kind::Incr, 7_300, 7_400, Outcome::Ok(2)),
  ];
  assert_eq!(run(&order, &[3]).order, 1);
  // A read saw 3; an increment sent after it must return more.
  let read_then = [
    op(Kind::Read, 7_100, 7_200, Outcome::Ok(3)),
    op(Kind::Incr, 7_000, 7_050, Outcome::Ok(1)),
    op(Kind::Incr, 7_010, 7_060, Outcome::Ok(2)),
    op(Kind::Incr, 7_020, 7_070, Outcome::Error("reset".into())),
    op(Kind::Incr, 7_300, 7_400, Outcome::Ok(3)),
  ];
  assert_eq!(run(&read_then, &[4]).order, 1);
  let stale = [
    op(Kind::Incr, 7_100, 7_200, Outcome::Ok(1)),
    op(Kind::Read, 7_300, 7_400, Outcome::Ok(0)),
  ];
  let f = run(&stale, &[1]);
  assert_eq!((f.stale_reads, f.violations.len()), (1, 0));
  // Sent at 9 500 ms, past the deadline 9 400.
  let late = [op(Kind::Incr, 9_500, 9_510, Outcome::Ok(1))];
  assert_eq!(run(&late, &[1]).late_acks, 1);
  // Answered before any lease that could cover it was written.
  let early = [op(Kind::Incr, 6_000, 6_010, Outcome::Ok(1))];
  assert_eq!(run(&early, &[1]).late_acks, 1);
  let phantom = [op(Kind::Incr, 7_100, 7_200, Outcome::Ok(1))];
  assert_eq!(run(&phantom, &[2]).violations.len(), 1);
  // A poisoned increment answered 200; one that failed is fine, but it
  // must not have counted.
  let poisoned = [
    op(Kind::Incr, 7_100, 7_200, Outcome::Ok(1)),
    op(Kind::Poison, 7_300, 7_400, Outcome::Ok(2)),
  ];
  let f = run(&poisoned, &[1]);
  assert_eq!((f.poison_acks, f.violations.len()), (1, 1));
  let failed = [
    op(Kind::Incr, 7_100, 7_200, Outcome::Ok(1)),
    op(Kind::Poison, 7_300, 7_400, Outcome::Status(500)),
  ];
  assert!(run(&failed, &[1]).violations.is_empty());
  assert_eq!(run(&failed, &[2]).violations.len(), 1);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
  Kill,
  Term,
}

struct Slot {
  name: String,
  data: PathBuf,
  proc: Option<Cellhost>,
  expect: Option<Expect>,
  down_until: Option<Instant>,
  incarnation: u32,
}

struct Lab {
  cfg: Config,
  dir: PathBuf,
  worker: PathBuf,
  store: Store,
  slots: Vec<Slot>,
  shared: Arc<Shared>,
  rng: Rng,
  faults: Vec<Fault>,
  stops: Vec<Stop>,
  violations: Vec<String>,
  warnings: Vec<String>,
  exits: BTreeMap<String, usize>,
  fenced_with_valid_lease: usize,
  outage: bool,
  flaky: bool,
  partitioned: Option<usize>,
  logs: Vec<(String, String)>,
  /// Versions deployed so far.
  versions: u32,
}

impl Lab {
  fn new(kind: StoreKind, cfg: Config) -> Lab {
    let tag = match kind {
      StoreKind::File => "file",
      StoreKind::S3 => "s3",
    };
    let dir = std::env::temp_dir().join(format!(
      "cellhost-faultlab-{}-{tag}{}",
      std::process::id(),
      cfg.label
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(cfg.seed ^ if kind == StoreKind::S3 { 0x53 } else { 0 });
    let store = Store::new(kind, &dir, cfg.nodes, &mut rng);
    let names: Vec<String> = (1..=cfg.nodes).map(|i| format!("n{i}")).collect();
    let objects: Vec<String> = (0..cfg.objects).map(|i| format!("o{i}")).collect();
    let shared = Arc::new(Shared {
      addrs: Mutex::new(vec![None; cfg.nodes]),
      ops: Mutex::new(Vec::new()),
      last_ack: (0..cfg.objects).map(|_| AtomicU64::new(0)).collect(),
      stop_clients: AtomicBool::new(false),
      stop_poller: AtomicBool::new(false),
      leases: Mutex::new(vec![BTreeSet::new(); cfg.nodes]),
      lease_seen: Mutex::new(vec![Default::default(); cfg.nodes]),
      poll_gap_max_ms: AtomicU64::new(0),
      poison_permille: cfg.poison_permille,
      names: names.clone(),
      objects,
    });
    let slots = names
      .iter()
      .map(|n| Slot {
        name: n.clone(),
        data: dir.join(format!("data-{n}")),
        proc: None,
        expect: None,
        down_until: None,
        incarnation: 0,
      })
      .collect();
    Lab {
      cfg,
      worker: repo_root().join("tests/faultlab/worker"),
      dir,
      store,
      slots,
      shared,
      rng,
      faults: Vec::new(),
      stops: Vec::new(),
      violations: Vec::new(),
      warnings: Vec::new(),
      exits: BTreeMap::new(),
      fenced_with_valid_lease: 0,
      outage: false,
      flaky: false,
      partitioned: None,
      logs: Vec::new(),
      versions: 0,
    }
  }

  fn store_ok(&self, i: usize) -> bool {
    !self.outage && !self.flaky && self.partitioned != Some(i)
  }

  fn start(&mut self, i: usize) -> bool {
    let slot = &self.slots[i];
    let data = slot.data.to_str().unwrap().to_string();
    let ttl = TTL_MS.to_string();
    let mut args: Vec<String> = vec![
      "--data".into(),
      data,
      "--node".into(),
      slot.name.clone(),
      "--lease-ttl-ms".into(),
      ttl,
      "--isolates".into(),
      "1".into(),
      "--ltx-retention-secs".into(),
      "1".into(),
    ];
    args.extend(self.store.node_args(i));
    // Nodes serve what was deployed (see `deploy`).
    args.splice(
      0..0,
      ["node".into(), "--deploy-poll-ms".into(), "200".into()],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = self.store.env();
    match Cellhost::try_start_cmd(&args, &env) {
      Ok(ch) => {
        let slot = &mut self.slots[i];
        slot.incarnation += 1;
        self.shared.addrs.lock().unwrap()[i] = Some(ch.addr);
        slot.proc = Some(ch);
        slot.expect = None;
        slot.down_until = None;
        true
      }
      Err(e) => {
        // A start on a healthy store must succeed; the exit is not 0 or 3.
        let name = self.slots[i].name.clone();
        *self.exits.entry("start failed".into()).or_default() += 1;
        self.violations.push(format!(
          "node {name} failed to start on a healthy store: {e}"
        ));
        self.slots[i].down_until = Some(Instant::now() + Duration::from_secs(1));
        false
      }
    }
  }

  /// Notes exited nodes and restarts those that may run again.
  fn tick(&mut self) {
    for i in 0..self.slots.len() {
      let status = match self.slots[i].proc.as_mut().map(|p| p.child.try_wait()) {
        Some(Ok(Some(status))) => status,
        _ => continue,
      };
      self.reap(i, status);
    }
    for i in 0..self.slots.len() {
      let slot = &self.slots[i];
      if slot.proc.is_none()
        && slot.down_until.is_none_or(|t| Instant::now() >= t)
        && self.store_ok(i)
      {
        self.start(i);
      }
    }
  }

  /// Records a node's exit: anything but 0 or 3 (or the SIGKILL the lab
  /// sent), and any panic, is a violation.
  fn reap(&mut self, i: usize, status: std::process::ExitStatus) {
    self.shared.addrs.lock().unwrap()[i] = None;
    let slot = &mut self.slots[i];
    let proc = slot.proc.take().unwrap();
    // Let the log reader thread drain the pipe.
    std::thread::sleep(Duration::from_millis(30));
    let log = proc.log();
    let what = match (status.code(), status.signal(), slot.expect) {
      (None, Some(9), Some(Expect::Kill)) => "killed (SIGKILL)".to_string(),
      (Some(0), _, Some(Expect::Term)) => "exit 0 after SIGTERM".to_string(),
      (Some(0), _, _) => "exit 0".to_string(),
      (Some(3), _, _) => {
        if !log.contains("SELF-FENCE:") {
          self.violations.push(format!(
            "node {} exited with 3 without a SELF-FENCE line",
            slot.name
          ));
        }
        // Nobody else writes a node's lease record here, so a fence is
        // only right once the deadline of the newest record it wrote has
        // passed — counting only records that were in the store (seen by
        // the poller) at least the slack before the fence. A renewal that
        // landed later (held by a partition, or still in flight at the
        // deadline) could not have been known to the node. The fence time
        // is the SELF-FENCE line's; the exit is noticed late.
        // A record whose write answered ambiguously (it landed, but the
        // node was told it may not have) counts only once the node's
        // read-back confirmed it.
        let fence_ms = fence_time_ms(&log).unwrap_or(now_us() / 1000);
        let unknown = unconfirmed_leases(&log);
        let newest = self.shared.lease_seen.lock().unwrap()[i]
          .iter()
          .filter(|&(e, _)| !unknown.contains(e))
          .filter(|&(_, &seen)| seen + FENCE_SLACK_MS <= fence_ms)
          .map(|(&e, _)| e)
          .max();
        if let Some(expires) = newest
          && fence_ms + FENCE_SLACK_MS < expires.saturating_sub(MARGIN_MS)
        {
          self.fenced_with_valid_lease += 1;
          self.violations.push(format!(
            "node {} (incarnation {}) fenced with a valid lease, {} ms before its deadline; log tail:\n{}",
            slot.name,
            slot.incarnation,
            expires - MARGIN_MS - fence_ms,
            tail(&log, 12)
          ));
        }
        "exit 3 (fenced)".to_string()
      }
      (code, sig, _) => {
        self.violations.push(format!(
          "node {} (incarnation {}) ended with code {code:?} signal {sig:?}; log tail:\n{}",
          slot.name,
          slot.incarnation,
          tail(&log, 30)
        ));
        format!("code {code:?} signal {sig:?}")
      }
    };
    if log.contains("panicked at") {
      self.violations.push(format!(
        "node {} (incarnation {}) panicked:\n{}",
        slot.name,
        slot.incarnation,
        tail(&log, 30)
      ));
    }
    *self.exits.entry(what).or_default() += 1;
    self
      .logs
      .push((format!("{}-{}", slot.name, slot.incarnation), log));
    slot.expect = None;
    if slot.down_until.is_none() {
      // A supervisor restarts a fenced node after a moment.
      slot.down_until = Some(Instant::now() + Duration::from_millis(300));
    }
  }

  fn supervise_for(&mut self, d: Duration) {
    let end = Instant::now() + d;
    loop {
      self.tick();
      let left = end.saturating_duration_since(Instant::now());
      if left.is_zero() {
        return;
      }
      std::thread::sleep(left.min(Duration::from_millis(50)));
    }
  }

  /// Waits until every object acknowledged an increment sent at or after
  /// `since`.
  fn await_recovery(&mut self, since: u64, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
      if self
        .shared
        .last_ack
        .iter()
        .all(|t| t.load(Ordering::SeqCst) >= since)
      {
        return true;
      }
      self.supervise_for(Duration::from_millis(50));
    }
    false
  }

  fn signal(&self, i: usize, sig: &str) -> bool {
    let Some(p) = &self.slots[i].proc else {
      return false;
    };
    Command::new("kill")
      .args([sig, &p.child.id().to_string()])
      .stderr(Stdio::null())
      .status()
      .map(|s| s.success())
      .unwrap_or(false)
  }

  /// SIGKILLs node `i` and waits for it.
  fn kill(&mut self, i: usize) {
    if self.slots[i].proc.is_some() {
      self.slots[i].expect = Some(Expect::Kill);
      let p = self.slots[i].proc.as_mut().unwrap();
      let _ = p.child.kill();
      let status = p.child.wait().unwrap();
      self.reap(i, status);
    }
  }

  /// SIGTERMs node `i` and waits for its exit (a drain); one that takes
  /// more than 10 s is a violation, and is killed.
  fn terminate(&mut self, i: usize) {
    self.slots[i].expect = Some(Expect::Term);
    self.signal(i, "-TERM");
    if !self.wait_exit(i, Duration::from_secs(10)) {
      self.violations.push(format!(
        "node {} did not exit within 10 s of SIGTERM",
        self.slots[i].name
      ));
      self.kill(i);
    }
  }

  fn wait_exit(&mut self, i: usize, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
      let Some(p) = self.slots[i].proc.as_mut() else {
        return true;
      };
      if let Ok(Some(status)) = p.child.try_wait() {
        self.reap(i, status);
        return true;
      }
      std::thread::sleep(Duration::from_millis(20));
    }
    false
  }

  fn inject(&mut self, kind: FaultKind) {
    let running: Vec<usize> = (0..self.slots.len())
      .filter(|&i| self.slots[i].proc.is_some())
      .collect();
    let node = if kind.on_node() {
      if running.is_empty() {
        return;
      }
      Some(running[self.rng.below(running.len() as u64) as usize])
    } else {
      None
    };
    let start = now_us();
    let ttl = TTL_MS;
    match kind {
      FaultKind::Kill | FaultKind::KillWipe => {
        let i = node.unwrap();
        self.kill(i);
        if kind == FaultKind::KillWipe {
          std::fs::remove_dir_all(&self.slots[i].data).unwrap();
        }
        let delay = Duration::from_millis(self.rng.range(200, 2_000));
        self.slots[i].down_until = Some(Instant::now() + delay);
        self.supervise_for(delay);
      }
      FaultKind::Term => {
        let i = node.unwrap();
        self.terminate(i);
        let delay = Duration::from_millis(self.rng.range(200, 1_500));
        self.slots[i].down_until = Some(Instant::now() + delay);
        self.supervise_for(delay);
      }
      FaultKind::Rolling => {
        // An upgrade's restart: each node drains (SIGTERM) and is started
        // again at once, one after the other, under the clients' load.
        for i in 0..self.slots.len() {
          if self.slots[i].proc.is_none() {
            continue;
          }
          self.terminate(i);
          self.start(i);
          let settle = Duration::from_millis(self.rng.range(300, 1_000));
          self.supervise_for(settle);
        }
      }
      FaultKind::Deploy => {
        // Every node switches in process under the clients' load.
        self.deploy();
        let settle = Duration::from_millis(self.rng.range(1_500, 3_000));
        self.supervise_for(settle);
      }
      FaultKind::StopCont => {
        let i = node.unwrap();
        self.signal(i, "-STOP");
        let stop = now_us();
        let d = Duration::from_millis(ttl + self.rng.range(300, 1_500));
        self.supervise_for(d);
        self.signal(i, "-CONT");
        self.stops.push(Stop {
          node: i,
          stop,
          cont: now_us(),
        });
      }
      FaultKind::Outage => {
        self.outage = true;
        self.store.outage(true, self.slots.len());
        let d = Duration::from_millis(self.rng.range(500, ttl * 3 / 2));
        self.supervise_for(d);
        self.store.outage(false, self.slots.len());
        self.outage = false;
      }
      FaultKind::Flaky => {
        self.flaky = true;
        self.store.flaky(true, &mut self.rng);
        let d = Duration::from_millis(self.rng.range(2_000, 5_000));
        self.supervise_for(d);
        self.store.flaky(false, &mut self.rng);
        self.flaky = false;
      }
      FaultKind::Gap => {
        self.flaky = true;
        self.store.gap(true);
        let d = Duration::from_millis(self.rng.range(2_000, 5_000));
        self.supervise_for(d);
        self.store.gap(false);
        self.flaky = false;
      }
      FaultKind::PartitionKill => {
        let i = node.unwrap();
        self.partitioned = Some(i);
        self.store.partition(i, true);
        // Well before its fence deadline: it still acknowledges.
        let d = Duration::from_millis(self.rng.range(200, ttl / 2));
        self.supervise_for(d);
        self.kill(i);
        self.store.partition(i, false);
        self.partitioned = None;
        let delay = Duration::from_millis(self.rng.range(200, 2_000));
        self.slots[i].down_until = Some(Instant::now() + delay);
        self.supervise_for(delay);
      }
      FaultKind::Partition => {
        let i = node.unwrap();
        self.partitioned = Some(i);
        self.store.partition(i, true);
        let d = Duration::from_millis(self.rng.range(1_000, ttl * 3 / 2));
        self.supervise_for(d);
        self.store.partition(i, false);
        self.partitioned = None;
      }
    }
    // Healed: a killed or stopped node is back (or being restarted).
    self.tick();
    self.faults.push(Fault {
      kind: kind.name(),
      node,
      start,
      heal: now_us(),
    });
  }

  /// `cellhost deploy` of the lab's Worker as its next version (the same
  /// code, marked with the version number).
  fn deploy(&mut self) {
    self.versions += 1;
    let dir = self.dir.join(format!("src-v{}", self.versions));
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&self.worker, &dir);
    let js = dir.join("worker.js");
    let code = std::fs::read_to_string(&js).unwrap();
    std::fs::write(&js, format!("{code}\n// version {}\n", self.versions)).unwrap();
    let out = Command::new(cellhost_bin())
      .args(["deploy", dir.to_str().unwrap(), "--message"])
      .arg(format!("v{}", self.versions))
      .args(self.store.direct_args())
      .envs(self.store.env())
      .output()
      .unwrap();
    if !out.status.success() {
      self.violations.push(format!(
        "deploy of v{} failed: {}",
        self.versions,
        String::from_utf8_lossy(&out.stderr)
      ));
    }
  }

  /// Reads every object until some node answers, recording the reads.
  fn read_all(&mut self, client: usize, label: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for object in 0..self.shared.objects.len() {
      let end = Instant::now() + Duration::from_secs(30);
      let mut node = 0;
      let value = loop {
        self.tick();
        if let Some(op) =
          self
            .shared
            .call(client, object, node, Kind::Read, Duration::from_secs(10))
        {
          match op.outcome {
            Outcome::Ok(v) => break Some(v),
            Outcome::Refused(Some(owner)) => {
              if let Some(o) = self.shared.node_index(&owner) {
                node = o;
                continue;
              }
            }
            _ => {}
          }
        }
        if Instant::now() > end {
          break None;
        }
        node = (node + 1) % self.slots.len();
        std::thread::sleep(Duration::from_millis(100));
      };
      match value {
        Some(v) => out.push(v),
        None => {
          self.violations.push(format!(
            "{label}: {} was never served within 30 s",
            self.shared.objects[object]
          ));
          out.push(0);
        }
      }
    }
    out
  }
}

/// When a node logged its SELF-FENCE line (UTC, ms since the epoch), read
/// from the log's RFC 3339 timestamp (`2026-12-01T21:43:56.054309Z`).
/// The deadlines a node wrote ambiguously and never confirmed (by its log).
fn unconfirmed_leases(log: &str) -> Vec<u64> {
  let expires = |l: &str| {
    let rest = &l[l.find("(expires_ms ")? + 12..];
    rest[..rest.find(')')?].parse::<u64>().ok()
  };
  let mut out = Vec::new();
  for l in log.lines() {
    if l.contains("lease write may not have happened") {
      out.extend(expires(l));
    } else if l.contains("lease write confirmed by reading it back") {
      let e = expires(l);
      out.retain(|&x| Some(x) != e);
    }
  }
  out
}

fn fence_time_ms(log: &str) -> Option<u64> {
  log
    .lines()
    .filter(|l| l.contains("SELF-FENCE:"))
    .find_map(line_time_ms)
}

fn line_time_ms(line: &str) -> Option<u64> {
  // The first `YYYY-MM-DDT` (log lines may start with colour escapes).
  let at = (0..line.len()).find(|&i| {
    let b = line.as_bytes();
    b.len() > i + 10 && b[i].is_ascii_digit() && b[i + 4] == b'-' && b[i + 10] == b'T'
  })?;
  let ts = line.get(at..at + 23)?; // YYYY-MM-DDTHH:MM:SS.mmm
  let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
  let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
  let (h, mi, s, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
  // Days from the civil date (Howard Hinnant's algorithm).
  let y = if mo <= 2 { y - 1 } else { y };
  let era = y.div_euclid(400);
  let yoe = y - era * 400;
  let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
  let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  let days = era * 146_097 + doe - 719_468;
  u64::try_from(((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms).ok()
}

#[test]
fn fence_times_are_read_from_the_log() {
  let log = "x\n\u{1b}[2m2026-12-01T21:43:56.054309Z\u{1b}[0m ERROR SELF-FENCE: node_lease_watchdog_fence\n";
  assert_eq!(fence_time_ms(log), Some(1_796_161_436_054));
  assert_eq!(fence_time_ms("SELF-FENCE: no time\n"), None);
}

#[test]
fn ambiguous_lease_writes_count_once_confirmed() {
  let log = "WARN node n3: lease write may not have happened (expires_ms 7): fsync; reading it back\n\
             WARN node n3: lease write may not have happened (expires_ms 9): fsync; reading it back\n\
             INFO node n3: lease write confirmed by reading it back (expires_ms 7)\n";
  assert_eq!(unconfirmed_leases(log), vec![9]);
}

fn tail(log: &str, n: usize) -> String {
  let lines: Vec<&str> = log.lines().collect();
  lines[lines.len().saturating_sub(n)..].join("\n")
}

fn run_lab(kind: StoreKind, cfg: Config) {
  let began = Instant::now();
  let mut lab = Lab::new(kind, cfg);
  let store_name = match kind {
    StoreKind::File => "file",
    StoreKind::S3 => "s3 (moto)",
  };
  lab.deploy();
  for i in 0..lab.slots.len() {
    assert!(lab.start(i), "{}", lab.violations.join("\n"));
  }
  let poller = {
    let (shared, reader) = (lab.shared.clone(), lab.store.lease_reader());
    let every_ms = if kind == StoreKind::File { 50 } else { 100 };
    std::thread::spawn(move || lease_poller(shared, reader, every_ms))
  };
  let clients: Vec<JoinHandle<()>> = (0..lab.cfg.clients)
    .map(|c| {
      let (shared, rng) = (lab.shared.clone(), lab.rng.fork(1_000 + c as u64));
      std::thread::spawn(move || client(shared, c, rng))
    })
    .collect();
  let warm = lab.await_recovery(1, Duration::from_secs(30));
  assert!(
    warm,
    "the fleet never served every object: {:?}\n{}",
    lab.violations,
    lab
      .slots
      .iter()
      .filter_map(|s| s.proc.as_ref().map(|p| tail(&p.log(), 20)))
      .collect::<Vec<_>>()
      .join("\n---\n")
  );

  // The fault phase: every kind once in a seeded order, again and again.
  let end = Instant::now() + Duration::from_secs(lab.cfg.secs);
  let mut bag: Vec<FaultKind> = Vec::new();
  let mut bags = 0;
  // Until the time is up, and at least every kind once.
  while Instant::now() < end || (bags == 1 && !bag.is_empty()) {
    if bag.is_empty() {
      bags += 1;
      bag = lab.store.kinds();
      let only = &lab.cfg.faults;
      bag.retain(|k| only.is_empty() || only.iter().any(|f| f == k.name()));
      assert!(
        !bag.is_empty(),
        "FAULTLAB_FAULTS names no fault of this store: {only:?}"
      );
      lab.rng.shuffle(&mut bag);
    }
    let fault = bag.pop().unwrap();
    lab.inject(fault);
    let start = lab.faults.last().map(|f| f.start).unwrap_or(0);
    if !lab.await_recovery(start, Duration::from_secs(30)) {
      lab.warnings.push(format!(
        "not every object recovered within 30 s of the {} fault",
        fault.name()
      ));
    }
    let calm = Duration::from_millis(lab.rng.range(500, 1_500));
    lab.supervise_for(calm);
  }

  // Quiesce, then read the final counts.
  lab.supervise_for(Duration::from_millis(1_000));
  lab.shared.stop_clients.store(true, Ordering::SeqCst);
  for c in clients {
    c.join().unwrap();
  }
  lab.supervise_for(Duration::from_millis(2_000));
  let final_client = lab.cfg.clients;
  let finals = lab.read_all(final_client, "final read");

  // A cold restart of the whole fleet with empty data directories.
  for i in 0..lab.slots.len() {
    lab.kill(i);
    std::fs::remove_dir_all(&lab.slots[i].data).unwrap();
    lab.slots[i].down_until = None;
  }
  lab.tick();
  let cold = lab.read_all(final_client + 1, "cold restart");
  for (o, name) in lab.shared.objects.clone().iter().enumerate() {
    if cold[o] != finals[o] {
      lab.violations.push(format!(
        "{name}: the fleet read {} before and {} after a cold restart with empty data directories",
        finals[o], cold[o]
      ));
    }
  }
  // A clean stop: every node exits 0.
  for i in 0..lab.slots.len() {
    if lab.slots[i].proc.is_some() {
      lab.terminate(i);
    }
  }
  lab.shared.stop_poller.store(true, Ordering::SeqCst);
  poller.join().unwrap();

  let ops = std::mem::take(&mut *lab.shared.ops.lock().unwrap());
  let leases = lab.shared.leases.lock().unwrap().clone();
  let input = check::Input {
    nodes: &lab.shared.names,
    objects: &lab.shared.objects,
    ops: &ops,
    faults: &lab.faults,
    stops: &lab.stops,
    leases: &leases,
    ttl_ms: TTL_MS,
    margin_ms: MARGIN_MS,
    finals: &finals,
    strict_reads: lab.cfg.strict_reads,
  };
  let findings = check::check(&input);
  let extra = format!(
    "{}fences with a valid lease: {}\nnode exits: {}\nlease records seen: {} (largest gap between polls {} ms)\n",
    lab.store.summary(),
    lab.fenced_with_valid_lease,
    lab
      .exits
      .iter()
      .map(|(k, n)| format!("{k}: {n}"))
      .collect::<Vec<_>>()
      .join(", "),
    leases.iter().map(BTreeSet::len).sum::<usize>(),
    lab.shared.poll_gap_max_ms.load(Ordering::Relaxed),
  );
  let report = check::report(&input, &findings, &extra);
  let mut violations = lab.violations.clone();
  violations.extend(findings.violations.iter().cloned());
  let mut warnings = lab.warnings.clone();
  warnings.extend(findings.warnings.iter().cloned());
  let head = format!(
    "faultlab store={store_name}{} seed={} fault phase {} s, {} nodes, {} clients, {} objects, lease ttl {} ms; ran {:.0} s",
    lab.cfg.label,
    lab.cfg.seed,
    lab.cfg.secs,
    lab.slots.len(),
    lab.cfg.clients,
    lab.cfg.objects,
    TTL_MS,
    began.elapsed().as_secs_f64()
  );
  let mut text = format!("{head}\n{report}");
  for w in &warnings {
    text.push_str(&format!("warning: {w}\n"));
  }
  for v in &violations {
    text.push_str(&format!("VIOLATION: {v}\n"));
  }
  for &(from, to) in &findings.windows {
    text.push_str(&log_excerpt(
      &lab.logs,
      from.saturating_sub(5_000_000),
      to + 1_000_000,
    ));
  }
  println!("{text}");
  if !violations.is_empty() || lab.cfg.keep {
    let keep = lab.dir.join("report");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::write(keep.join("report.txt"), &text).unwrap();
    std::fs::write(keep.join("history.txt"), check::history_text(&input)).unwrap();
    for (name, log) in &lab.logs {
      std::fs::write(keep.join(format!("{name}.log")), log).unwrap();
    }
    println!("history, report and node logs kept in {}", keep.display());
  } else {
    let _ = std::fs::remove_dir_all(&lab.dir);
  }
  assert!(
    violations.is_empty(),
    "fault lab ({store_name}, seed {}): {} violation(s):\n{}",
    lab.cfg.seed,
    violations.len(),
    violations.join("\n")
  );
}

/// The node-log lines worth reading about a window (ownership events,
/// warnings and errors), so that a failure on CI, whose files are gone
/// with its machine, still shows what the nodes did then.
fn log_excerpt(logs: &[(String, String)], from_us: u64, to_us: u64) -> String {
  const PER_NODE: usize = 60;
  let mut out = format!("node logs from {from_us} to {to_us} (events, warnings, errors):\n");
  for (name, log) in logs {
    let lines: Vec<&str> = (log.lines())
      .filter(|l| l.contains("cellhost::events") || l.contains("WARN") || l.contains("ERROR"))
      .filter(|l| line_time_ms(l).is_some_and(|t| t >= from_us / 1000 && t <= to_us / 1000))
      .collect();
    let skip = lines.len().saturating_sub(PER_NODE);
    for l in &lines[skip..] {
      out.push_str(&format!("  {name}: {}\n", strip_ansi(l)));
    }
  }
  out
}

fn strip_ansi(s: &str) -> String {
  let mut out = String::with_capacity(s.len());
  let mut chars = s.chars();
  while let Some(c) = chars.next() {
    if c == '\u{1b}' {
      // ESC [ ... letter
      for c in chars.by_ref() {
        if c.is_ascii_alphabetic() {
          break;
        }
      }
    } else {
      out.push(c);
    }
  }
  out
}

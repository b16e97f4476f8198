//! Durable Objects on one node, beyond what the differential fixtures
//! compare: configuration errors, one instance per id across isolates,
//! eviction, persistence across restarts, and one process per data
//! directory.

mod support;

use std::path::Path;
use std::time::Duration;

use support::*;

const BINDING: &str = "[[durable_objects.bindings]]\nname = \"OBJ\"\nclass_name = \"Obj\"\n";

/// wrangler.toml for class `Obj`, bound as OBJ, with SQL storage.
fn sqlite_obj() -> String {
  format!("{BINDING}[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"Obj\"]\n")
}

fn data_arg(d: &Path) -> String {
  d.join(".data").to_string_lossy().into_owned()
}

#[test]
fn refused_migrations_and_bindings_are_named() {
  let w = "import { DurableObject } from 'cloudflare:workers'; export class Obj extends DurableObject {} export default { fetch() { return new Response('x') } }";
  for (what, toml) in [
    ("renamed_classes", format!("{BINDING}[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"Obj\"]\n[[migrations]]\ntag = \"v2\"\nrenamed_classes = [{{from = \"Obj\", to = \"Obj2\"}}]\n")),
    ("deleted_classes", format!("{BINDING}[[migrations]]\ntag = \"v1\"\ndeleted_classes = [\"Old\"]\n")),
    ("transferred_classes", format!("{BINDING}[[migrations]]\ntag = \"v1\"\ntransferred_classes = [{{from = \"A\", from_script = \"s\", to = \"B\"}}]\n")),
    ("script_name", "[[durable_objects.bindings]]\nname = \"OBJ\"\nclass_name = \"Obj\"\nscript_name = \"other\"\n".to_string()),
  ] {
    let d = project(what, w, &toml);
    let (code, out) = cellhost_fails(&d);
    assert_ne!(code, Some(0), "{what} accepted");
    assert!(out.contains(what), "{what}: {out}");
  }
  let d = project(
    "missingclass",
    "export default { fetch() { return new Response('x') } }",
    &sqlite_obj(),
  );
  let (code, out) = cellhost_fails(&d);
  assert_ne!(code, Some(0));
  assert!(
    out.contains("Durable Object class \"Obj\" (binding OBJ) is not exported"),
    "{out}"
  );
}

#[test]
fn kv_only_class_refuses_sql_with_workerds_message() {
  let w = "import { DurableObject } from 'cloudflare:workers'; export class Obj extends DurableObject { async t() { await this.ctx.storage.put('k', 1); try { this.ctx.storage.sql.exec('SELECT 1'); return 'sql available' } catch (e) { return (await this.ctx.storage.get('k')) + ' ' + e.message } } } export default { async fetch(r, env) { return new Response(await env.OBJ.getByName('x').t()) } }";
  let d = project(
    "kvonly",
    w,
    &format!("{BINDING}[[migrations]]\ntag = \"v1\"\nnew_classes = [\"Obj\"]\n"),
  );
  let ch = Cellhost::start(&d, &["--data", &data_arg(&d)]);
  let body = get(ch.addr, "/").text();
  assert!(
    body.starts_with("1 SQL is not enabled for this Durable Object class."),
    "{body}"
  );
}

const STATEFUL: &str = "import { DurableObject } from 'cloudflare:workers';
let constructions = 0;
export class Obj extends DurableObject {
  constructor(ctx, env) { super(ctx, env); constructions++; this.hits = 0; }
  hit() { this.hits++; return { hits: this.hits, constructions, stored: (this.ctx.storage.kv.get('n') ?? 0) }; }
  async store() { const n = (await this.ctx.storage.get('n') ?? 0) + 1; await this.ctx.storage.put('n', n); return n; }
}
export default { async fetch(r, env) {
  const u = new URL(r.url); const s = env.OBJ.getByName(u.searchParams.get('n') ?? 'x');
  return Response.json(u.pathname === '/store' ? await s.store() : await s.hit());
} }";

#[test]
fn one_instance_per_id_across_isolates_and_connections() {
  let d = project("oneinstance", STATEFUL, &sqlite_obj());
  let ch = Cellhost::start(&d, &["--isolates", "2", "--data", &data_arg(&d)]);
  // Fresh connections land on either isolate; the object is one instance.
  let mut last = 0;
  for i in 1..=30 {
    let v: serde_json::Value = serde_json::from_str(&get(ch.addr, "/hit?n=one").text()).unwrap();
    assert_eq!(v["hits"], i, "{v}");
    last = v["constructions"].as_u64().unwrap();
  }
  assert_eq!(last, 1);
}

// Each isolate evaluates the module once: `isolate` tells them apart.
const PLACED: &str = "import { DurableObject } from 'cloudflare:workers';
const isolate = crypto.randomUUID();
export class Obj extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.instance = crypto.randomUUID(); this.hits = 0; }
  async hit() {
    this.hits++;
    const n = (await this.ctx.storage.get('n') ?? 0) + 1;
    await this.ctx.storage.put('n', n);
    return { isolate, instance: this.instance, hits: this.hits, n };
  }
}
export default { async fetch(r, env) {
  const s = env.OBJ.getByName(new URL(r.url).searchParams.get('n'));
  return Response.json({ caller: isolate, ...(await s.hit()) });
} }";

// Each request is a caller that sends 40 numbered calls to one object
// (every third a stub.fetch(), the others RPC) without waiting for each,
// awaiting microtasks, timers and earlier answers in between: the object
// checks that every caller's calls arrive in order.
const ORDERED: &str = "import { DurableObject } from 'cloudflare:workers';
export class Obj extends DurableObject {
  constructor(ctx, env) { super(ctx, env); this.last = new Map(); this.bad = []; this.n = 0; }
  add(caller, i) {
    const last = this.last.get(caller) ?? -1;
    if (i !== last + 1) this.bad.push(`${caller}: ${i} after ${last}`);
    this.last.set(caller, i);
    this.ctx.storage.kv.put('n', ++this.n);
    return i;
  }
  report() { return { n: this.n, bad: this.bad }; }
  async fetch(r) {
    const u = new URL(r.url);
    return new Response(String(this.add(u.searchParams.get('c'), +u.searchParams.get('i'))));
  }
}
export default { async fetch(r, env) {
  const u = new URL(r.url); const s = env.OBJ.getByName('log');
  if (u.pathname === '/report') return Response.json(await s.report());
  const caller = u.searchParams.get('c'); const ps = [];
  for (let i = 0; i < 40; i++) {
    ps.push(i % 3 === 2
      ? s.fetch(`http://o/?c=${caller}&i=${i}`).then((r) => r.text()).then(Number)
      : s.add(caller, i));
    if (i % 3 === 1) await null;
    if (i % 7 === 3) await new Promise((r) => setTimeout(r, 0));
    if (i % 11 === 5) await ps[i];
  }
  const got = await Promise.all(ps);
  return Response.json(got.every((v, i) => v === i));
} }";

/// Calls to an object on the caller's own isolate are handed to it in
/// place once nothing for it is queued or taken and not yet dispatched
/// there; calls from both isolates, some in place and some through the
/// queue, RPC and fetch() mixed, still reach it in each caller's order,
/// each once.
#[test]
fn calls_in_place_and_through_the_queue_keep_each_callers_order() {
  let d = project("ordered", ORDERED, &sqlite_obj());
  let ch = Cellhost::start(&d, &["--isolates", "2", "--data", &data_arg(&d)]);
  let addr = ch.addr;
  let threads: Vec<_> = (0..6)
    .map(|t| {
      std::thread::spawn(move || {
        for r in 0..5 {
          let res = get(addr, &format!("/?c={t}-{r}"));
          assert_eq!(res.text(), "true", "caller {t}-{r}");
        }
      })
    })
    .collect();
  for t in threads {
    t.join().unwrap();
  }
  let v: serde_json::Value = serde_json::from_str(&get(addr, "/report").text()).unwrap();
  assert_eq!(v["bad"], serde_json::json!([]), "{v}");
  assert_eq!(v["n"], 6 * 5 * 40, "{v}");
}

/// Without a bucket an object is built on the isolate of its first caller;
/// later calls from the other isolate go to it there (one instance), and
/// once evicted its next first caller places it again, with its storage.
#[test]
fn an_object_lives_on_the_isolate_of_its_first_caller() {
  let d = project("placed", PLACED, &sqlite_obj());
  let ch = Cellhost::start(&d, &["--isolates", "2", "--data", &data_arg(&d)]);
  let hit = |name: &str| -> serde_json::Value {
    serde_json::from_str(&get(ch.addr, &format!("/?n={name}")).text()).unwrap()
  };
  let names: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
  let mut callers = std::collections::HashSet::new();
  for round in 0..2 {
    for name in &names {
      // Fresh connections land on either isolate.
      let first = hit(name);
      assert_eq!(first["isolate"], first["caller"], "{name}: {first}");
      assert_eq!(first["hits"], 1, "{name}: {first}");
      assert_eq!(first["n"], 5 * round + 1, "{name}: {first}");
      for i in 2..=5 {
        let v = hit(name);
        callers.insert(v["caller"].as_str().unwrap().to_string());
        assert_eq!(
          (&v["isolate"], &v["instance"], &v["hits"], &v["n"]),
          (
            &first["isolate"],
            &first["instance"],
            &i.into(),
            &(5 * round + i).into()
          ),
          "{name}: one instance"
        );
      }
    }
    if round == 0 {
      // 10 s without events: every object is evicted and released.
      std::thread::sleep(Duration::from_millis(12_500));
    }
  }
  assert_eq!(callers.len(), 2, "calls came from both isolates");
}

#[test]
fn idle_objects_are_evicted_and_storage_persists_across_restarts() {
  let d = project("evict", STATEFUL, &sqlite_obj());
  let data = data_arg(&d);
  {
    let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data]);
    assert_eq!(get(ch.addr, "/store?n=e").text(), "1");
    // Cells open their files without SQLite's locks: a second process on
    // the same data directory is refused at start.
    let second = Cellhost::try_start(&d, &["--isolates", "1", "--data", &data]);
    let err = second
      .err()
      .expect("a second process on one data directory");
    assert!(
      err.contains("is in use by another cellhost process"),
      "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&get(ch.addr, "/hit?n=e").text()).unwrap();
    assert_eq!(
      (v["hits"].as_u64(), v["constructions"].as_u64()),
      (Some(1), Some(1))
    );
    // 10 s without events: the instance is dropped; the next call builds a new one.
    std::thread::sleep(Duration::from_millis(11_500));
    let v: serde_json::Value = serde_json::from_str(&get(ch.addr, "/hit?n=e").text()).unwrap();
    assert_eq!(
      (
        v["hits"].as_u64(),
        v["constructions"].as_u64(),
        v["stored"].as_u64()
      ),
      (Some(1), Some(2), Some(1)),
      "{v}"
    );
  }
  let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data]);
  assert_eq!(get(ch.addr, "/store?n=e").text(), "2");
}

#[test]
fn block_concurrency_while_times_out_after_30s_and_resets() {
  let w = "import { DurableObject } from 'cloudflare:workers';
let builds = 0;
export class Obj extends DurableObject {
  constructor(ctx, env) { super(ctx, env); builds++; }
  async stuck() { await this.ctx.blockConcurrencyWhile(() => new Promise(() => {})); }
  builds() { return builds; }
}
export default { async fetch(r, env) {
  const s = env.OBJ.getByName('b');
  if (new URL(r.url).pathname === '/stuck') {
    try { await s.stuck(); return new Response('returned'); }
    catch (e) { return Response.json({ message: e.message, reset: e.durableObjectReset, overloaded: e.overloaded }); }
  }
  return Response.json(await s.builds());
} }";
  let d = project("bcwtimeout", w, &sqlite_obj());
  let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data_arg(&d)]);
  let started = std::time::Instant::now();
  let v: serde_json::Value = serde_json::from_str(&get(ch.addr, "/stuck").text()).unwrap();
  assert!(
    started.elapsed() >= Duration::from_secs(29),
    "gave up after {:?}",
    started.elapsed()
  );
  assert_eq!(
    v["message"],
    "A call to blockConcurrencyWhile() in a Durable Object waited for too long. The call was canceled and the Durable Object was reset."
  );
  assert_eq!(
    (v["reset"].as_bool(), v["overloaded"].as_bool()),
    (Some(true), Some(true)),
    "{v}"
  );
  // The next call reaches a fresh instance.
  assert_eq!(get(ch.addr, "/").text(), "2");
}

#[test]
fn effects_after_a_failed_commit_are_never_sent() {
  use std::io::{BufRead, BufReader, Write};
  let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
  let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
  let up = l.local_addr().unwrap();
  let s2 = seen.clone();
  std::thread::spawn(move || {
    for stream in l.incoming().map_while(Result::ok) {
      let mut r = BufReader::new(stream.try_clone().unwrap());
      let mut stream = stream;
      let mut first = String::new();
      let _ = r.read_line(&mut first);
      s2.lock()
        .unwrap()
        .push(first.split_whitespace().nth(1).unwrap_or("").to_string());
      loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
          break;
        }
      }
      let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
      );
    }
  });
  let w = format!(
    "import {{ DurableObject }} from 'cloudflare:workers';
export class Obj extends DurableObject {{
  constructor(ctx, env) {{
    super(ctx, env);
    ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS p (id INTEGER PRIMARY KEY)');
    ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, p INTEGER REFERENCES p(id))');
  }}
  async good() {{ this.ctx.storage.sql.exec('INSERT INTO p VALUES (1)'); await fetch('http://{up}/good'); return 'good'; }}
  async bad() {{
    this.ctx.storage.sql.exec('PRAGMA defer_foreign_keys = ON');
    this.ctx.storage.sql.exec('INSERT INTO c VALUES (2, 99)');
    await fetch('http://{up}/revealed-a-rolled-back-write');
    return 'bad';
  }}
}}
export default {{ async fetch(r, env) {{
  const s = env.OBJ.getByName('x');
  try {{ return new Response(new URL(r.url).pathname === '/bad' ? await s.bad() : await s.good()); }}
  catch (e) {{ return new Response(e.message, {{ status: 500 }}); }}
}} }};"
  );
  let d = project("brokengate", &w, &sqlite_obj());
  let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data_arg(&d)]);
  assert_eq!(get(ch.addr, "/good").text(), "good");
  let r = get(ch.addr, "/bad");
  assert_eq!(r.status, 500, "{}", r.text());
  assert!(
    r.text().contains("constraints were violated") || r.text().contains("commit failed"),
    "{}",
    r.text()
  );
  std::thread::sleep(Duration::from_millis(300));
  let seen = seen.lock().unwrap().clone();
  assert_eq!(
    seen,
    vec!["/good".to_string()],
    "an effect revealed a write that was rolled back"
  );
}

/// Peak resident memory of a process (VmHWM), in MiB.
fn peak_mib(pid: u32) -> f64 {
  let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
  let kb: f64 = status
    .lines()
    .find_map(|l| l.strip_prefix("VmHWM:"))
    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    .expect("VmHWM");
  kb / 1024.0
}

#[test]
fn a_cursor_scans_a_large_table_without_holding_it() {
  // 1,000,000 rows of ~100 bytes (about 110 MB of rows): read whole into
  // memory, the scan's result alone would take well over that.
  let w = r#"
    import { DurableObject } from "cloudflare:workers";
    export class Obj extends DurableObject {
      fill() {
        const sql = this.ctx.storage.sql;
        sql.exec("CREATE TABLE IF NOT EXISTS big (id INTEGER PRIMARY KEY, pad TEXT)");
        sql.exec("WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000000) INSERT INTO big SELECT n, printf('%096d', n) FROM s");
        return sql.exec("SELECT count(*) AS n FROM big").one().n;
      }
      scan() {
        let rows = 0, bytes = 0;
        const c = this.ctx.storage.sql.exec("SELECT id, pad FROM big");
        for (const row of c) { rows++; bytes += row.pad.length; }
        return `${rows} ${bytes} ${c.rowsRead}`;
      }
    }
    export default {
      async fetch(req, env) {
        const o = env.OBJ.getByName("big");
        return new Response(String(new URL(req.url).pathname === "/fill" ? await o.fill() : await o.scan()));
      },
    };
  "#;
  let d = project("cursorscan", w, OBJ_BINDING);
  let data = data_arg(&d);
  let ch = Cellhost::start(&d, &["--isolates", "1", "--data", &data]);
  assert_eq!(get(ch.addr, "/fill").text(), "1000000");
  let before = peak_mib(ch.child.id());
  assert_eq!(get(ch.addr, "/scan").text(), "1000000 96000000 1000000");
  let after = peak_mib(ch.child.id());
  eprintln!("peak RSS before the scan {before:.1} MiB, after {after:.1} MiB");
  assert!(
    after - before < 48.0,
    "the scan raised peak RSS from {before:.1} to {after:.1} MiB"
  );
}

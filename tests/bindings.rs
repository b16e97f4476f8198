//! Bindings with local data (KV, …) compared with `wrangler dev` 4.86: each
//! directory in tests/bindings/ is a Worker with its wrangler config; its
//! `// @request METHOD PATH [BODY]` lines (default `GET /`) are sent in
//! (`// @cellhost-args ARGS` adds arguments to `cellhost run`)
//! order to both, starting from empty data, and each answer (status,
//! content type, body) must be the same. Then what wrangler dev cannot
//! show: that acknowledged writes survive a SIGKILL of cellhost.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::*;

#[test]
fn bindings_match_wrangler_dev() {
  let root = repo_root().join("tests/bindings");
  let tmp = tempdir("bindings-diff");
  let only = std::env::var("BINDING_CASES").ok();
  let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
    .unwrap()
    .map(|e| e.unwrap().path())
    .filter(|p| p.join("wrangler.jsonc").exists())
    .filter(|p| {
      only
        .as_deref()
        .is_none_or(|o| p.to_string_lossy().contains(o))
    })
    .collect();
  cases.sort();
  let (mut compared, mut diffs) = (0, Vec::new());
  for src in &cases {
    let name = src.file_name().unwrap().to_string_lossy().to_string();
    let reqs = requests(&src.join("worker.js"));
    let theirs: Vec<String> = {
      let dir = tmp.join(format!("{name}-wrangler"));
      copy_dir(src, &dir);
      let (_dev, addr) = wrangler_dev(&dir, &[]);
      reqs.iter().map(|r| answer(addr, r)).collect()
    };
    let dir = tmp.join(format!("{name}-cellhost"));
    copy_dir(src, &dir);
    let src_text = std::fs::read_to_string(src.join("worker.js")).unwrap();
    let mut args = vec![
      "--data".to_string(),
      dir.join(".data").to_string_lossy().into_owned(),
    ];
    for l in src_text.lines() {
      if let Some(a) = l.trim().strip_prefix("// @cellhost-args ") {
        args.extend(a.split_whitespace().map(String::from));
      }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ch = Cellhost::start(&dir, &args);
    for (r, theirs) in reqs.iter().zip(&theirs) {
      compared += 1;
      let ours = answer(ch.addr, r);
      if &ours != theirs {
        diffs.push(format!(
          "{name}: {} {}\n--- wrangler dev\n{theirs}\n--- cellhost\n{ours}\n",
          r.0, r.1
        ));
      }
    }
  }
  eprintln!(
    "{} cases, {compared} requests compared, {} differ",
    cases.len(),
    diffs.len()
  );
  assert!(only.is_some() || cases.len() >= 2);
  assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Every KV write acknowledged before a SIGKILL is there after the restart.
#[test]
fn kv_writes_survive_sigkill() {
  let dir = project(
    "kv-kill",
    r#"export default {
      async fetch(req, env) {
        const u = new URL(req.url);
        const k = u.searchParams.get("k");
        if (req.method === "PUT") { await env.KV.put(k, await req.text(), { metadata: { k } }); return new Response("ok"); }
        if (req.method === "DELETE") { await env.KV.delete(k); return new Response("ok"); }
        const r = await env.KV.getWithMetadata(k);
        return Response.json(r);
      },
    };"#,
    "[[kv_namespaces]]\nbinding = \"KV\"\nid = \"kill-test\"\n",
  );
  let data = dir.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&dir, &args);
  let mut acked = Vec::new();
  for i in 0..200 {
    let r = request(
      ch.addr,
      "PUT",
      &format!("/?k=key{i}"),
      &[],
      format!("value {i}").as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 200);
    acked.push(i);
  }
  request(ch.addr, "DELETE", "/?k=key7", &[], b"").unwrap();
  // SIGKILL: no chance to flush anything.
  ch.child.kill().unwrap();
  ch.child.wait().unwrap();
  let ch = Cellhost::start(&dir, &args);
  for i in acked {
    let r = get(ch.addr, &format!("/?k=key{i}"));
    let expected = if i == 7 {
      r#"{"value":null,"metadata":null,"cacheStatus":null}"#.to_string()
    } else {
      format!(r#"{{"value":"value {i}","metadata":{{"k":"key{i}"}},"cacheStatus":null}}"#)
    };
    assert_eq!(r.text(), expected, "key{i}");
  }
  // The data is an ordinary SQLite file, as the README says.
  let out = Command::new("ls").arg(data.join("kv")).output().unwrap();
  assert!(String::from_utf8_lossy(&out.stdout).contains("kill-test.sqlite"));
}

/// A Cron Trigger fires on the clock: `* * * * *` runs the scheduled
/// handler at the next minute, with that minute as its scheduledTime.
#[test]
fn cron_fires_on_the_clock() {
  let dir = project(
    "cron-clock",
    r#"export default {
      async scheduled(controller, env) {
        await env.LOG.put("fired", JSON.stringify([controller.cron, controller.scheduledTime]));
      },
      async fetch(req, env) { return new Response((await env.LOG.get("fired")) ?? "not yet"); },
    };"#,
    "[triggers]\ncrons = [\"* * * * *\"]\n[[kv_namespaces]]\nbinding = \"LOG\"\nid = \"log\"\n",
  );
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  // Without --test-scheduled the path is the Worker's.
  assert_eq!(get(ch.addr, "/__scheduled").text(), "not yet");
  let deadline = std::time::Instant::now() + std::time::Duration::from_secs(75);
  let fired = loop {
    let t = get(ch.addr, "/").text();
    if t != "not yet" {
      break t;
    }
    assert!(
      std::time::Instant::now() < deadline,
      "the cron never fired: {}",
      ch.log()
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
  };
  let v: serde_json::Value = serde_json::from_str(&fired).unwrap();
  assert_eq!(v[0], "* * * * *");
  assert_eq!(v[1].as_u64().unwrap() % 60_000, 0, "{fired}");
  assert!(
    ch.wait_log("cron \"* * * * *\" at", std::time::Duration::from_secs(5)),
    "{}",
    ch.log()
  );
}

/// Every D1 write acknowledged before a SIGKILL is there after the restart,
/// and a batch that failed left nothing behind.
#[test]
fn d1_writes_survive_sigkill() {
  let dir = project(
    "d1-kill",
    r#"export default {
      async fetch(req, env) {
        const u = new URL(req.url);
        if (u.pathname === "/init") { await env.DB.exec("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)"); return new Response("ok"); }
        if (u.pathname === "/put") {
          await env.DB.prepare("INSERT INTO t (k, v) VALUES (?, ?)").bind(Number(u.searchParams.get("k")), "v" + u.searchParams.get("k")).run();
          return new Response("ok");
        }
        if (u.pathname === "/bad-batch") {
          try { await env.DB.batch([env.DB.prepare("INSERT INTO t (k, v) VALUES (100000, 'x')"), env.DB.prepare("INSERT INTO nope VALUES (1)")]); }
          catch (e) { return new Response(e.message); }
        }
        const r = await env.DB.prepare("SELECT count(*) AS n, sum(k) AS s FROM t").first();
        return Response.json(r);
      },
    };"#,
    "[[d1_databases]]\nbinding = \"DB\"\ndatabase_id = \"kill-db\"\n",
  );
  let data = dir.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&dir, &args);
  assert_eq!(get(ch.addr, "/init").text(), "ok");
  for k in 1..=150 {
    assert_eq!(get(ch.addr, &format!("/put?k={k}")).text(), "ok");
  }
  assert!(
    get(ch.addr, "/bad-batch")
      .text()
      .contains("no such table: nope")
  );
  ch.child.kill().unwrap();
  ch.child.wait().unwrap();
  let ch = Cellhost::start(&dir, &args);
  assert_eq!(get(ch.addr, "/").text(), r#"{"n":150,"s":11325}"#);
  assert!(data.join("d1/kill-db.sqlite").exists());
}

/// `cellhost d1 migrations apply`: the folder's migrations in name order,
/// each once, a failing one applied not at all; the Worker then sees them.
#[test]
fn d1_migrations_apply_in_order_once() {
  let dir = project(
    "d1-migrate",
    r#"export default {
      async fetch(req, env) {
        const { results } = await env.DB.prepare("SELECT name FROM d1_migrations ORDER BY id").all();
        const users = await env.DB.prepare("SELECT name, email FROM users ORDER BY id").raw();
        return Response.json({ applied: results.map((r) => r.name), users });
      },
    };"#,
    "[[d1_databases]]\nbinding = \"DB\"\ndatabase_name = \"app-db\"\ndatabase_id = \"mig\"\n",
  );
  let mig = dir.join("migrations");
  std::fs::create_dir_all(&mig).unwrap();
  std::fs::write(mig.join("0001_init.sql"), "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);\nINSERT INTO users (name) VALUES ('ann');\n").unwrap();
  std::fs::write(mig.join("0002_email.sql"), "-- add a column\nALTER TABLE users ADD COLUMN email TEXT;\nUPDATE users SET email = 'ann@example.com';\n").unwrap();
  let data = dir.join(".data");
  let apply = || {
    Command::new(cellhost_bin())
      .args(["d1", "migrations", "apply", "app-db", "--path"])
      .arg(&dir)
      .arg("--data")
      .arg(&data)
      .output()
      .unwrap()
  };
  let out = apply();
  let text =
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
  assert!(out.status.success(), "{text}");
  assert!(
    text.contains("applied 0001_init.sql\napplied 0002_email.sql"),
    "{text}"
  );
  let out = apply();
  assert!(String::from_utf8_lossy(&out.stdout).contains("No migrations to apply (2 in"));
  // A failing migration: refused, named, and none of it kept.
  std::fs::write(
    mig.join("0003_bad.sql"),
    "INSERT INTO users (name) VALUES ('bob');\nINSERT INTO nope VALUES (1);\n",
  )
  .unwrap();
  let out = apply();
  let err = String::from_utf8_lossy(&out.stderr).to_string();
  assert_eq!(out.status.code(), Some(1), "{err}");
  assert!(
    err.contains("migration 0003_bad.sql failed (nothing of it was applied): no such table: nope"),
    "{err}"
  );
  std::fs::remove_file(mig.join("0003_bad.sql")).unwrap();
  let ch = Cellhost::start(&dir, &["--data", data.to_str().unwrap()]);
  assert_eq!(
    get(ch.addr, "/").text(),
    r#"{"applied":["0001_init.sql","0002_email.sql"],"users":[["ann","ann@example.com"]]}"#
  );
}

/// Queue messages acknowledged by `send()` survive a SIGKILL that comes
/// before (or while) they are consumed: after the restart every one is
/// delivered (at least once).
#[test]
fn queue_messages_survive_sigkill() {
  let dir = project(
    "queue-kill",
    r#"export default {
      async fetch(req, env) {
        const u = new URL(req.url);
        if (u.pathname === "/send") {
          const base = Number(u.searchParams.get("from"));
          await env.Q.sendBatch(Array.from({ length: 10 }, (_, i) => ({ body: base + i })));
          return new Response("sent");
        }
        return new Response(String((await env.SEEN.list()).keys.length));
      },
      async queue(batch, env) {
        for (const m of batch.messages) await env.SEEN.put(`m${m.body}`, String(m.attempts));
      },
    };"#,
    "[[kv_namespaces]]\nbinding = \"SEEN\"\nid = \"seen\"\n\
     [[queues.producers]]\nbinding = \"Q\"\nqueue = \"q\"\n\
     [[queues.consumers]]\nqueue = \"q\"\nmax_batch_size = 3\nmax_batch_timeout = 0\n",
  );
  let data = dir.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&dir, &args);
  for from in (0..100).step_by(10) {
    assert_eq!(get(ch.addr, &format!("/send?from={from}")).text(), "sent");
  }
  ch.child.kill().unwrap();
  ch.child.wait().unwrap();
  let ch = Cellhost::start(&dir, &args);
  let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
  loop {
    let n: usize = get(ch.addr, "/count").text().parse().unwrap();
    if n == 100 {
      break;
    }
    assert!(
      std::time::Instant::now() < deadline,
      "only {n} of 100 delivered:\n{}",
      ch.log()
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
  }
}

//! Apps written the way published libraries' docs show (tests/apps: an
//! `agents` Agent, a `partyserver` chat room, a `hono` app routing to a
//! Durable Object, an `express` app on node:http's server through
//! `cloudflare:node`) and one in the shape of Cloudflare's chat demo (its page
//! a `Data` module by `rules`, a rate limiter awaiting `setTimeout(0)`,
//! rooms by `newUniqueId`/`idFromString`), bundled by wrangler 4.86 (`deploy --dry-run --outdir`)
//! and served unchanged, from their own wrangler config, by cellhost and by
//! `wrangler dev`. Each app's scenario (`scenario.mjs`, a Node.js client)
//! runs against both, then again after a restart on the same data; the
//! transcripts must be equal.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// A fresh copy of tests/apps/NAME (wrangler writes state beside its
/// config), its bundle built into `dist/`, and a folder serving that bundle
/// with the app's config; returns (copy, served folder).
fn build(name: &str) -> (PathBuf, PathBuf) {
  let src = repo_root().join("tests/apps").join(name);
  // Under tests/ so the bundler finds tests/node_modules.
  let build = repo_root()
    .join("tests/apps/.build")
    .join(format!("{}-{name}", std::process::id()));
  let _ = std::fs::remove_dir_all(&build);
  let copy = build.join("app");
  copy_dir(&src, &copy);
  let out = Command::new(repo_root().join("tests/node_modules/.bin/wrangler"))
    .args(["deploy", "--dry-run", "--outdir", "dist"])
    .current_dir(&copy)
    .env("WRANGLER_SEND_METRICS", "false")
    .output()
    .expect("running wrangler");
  assert!(
    out.status.success(),
    "wrangler deploy --dry-run {name}: {}{}",
    String::from_utf8_lossy(&out.stdout),
    String::from_utf8_lossy(&out.stderr)
  );
  // dist/ holds the bundle and the modules it imports by relative path
  // (`<sha1>-chat.html` for a Data rule): all of it is served.
  let served = build.join("served");
  std::fs::create_dir_all(&served).unwrap();
  let mut main = None;
  for e in std::fs::read_dir(copy.join("dist")).unwrap() {
    let p = e.unwrap().path();
    let file = p.file_name().unwrap().to_string_lossy().into_owned();
    if file.ends_with(".map") || file == "README.md" {
      continue;
    }
    if file.ends_with(".js") || file.ends_with(".mjs") {
      main = Some(file.clone());
    }
    std::fs::copy(&p, served.join(&file)).unwrap();
  }
  let main = main.expect("wrangler wrote a .js bundle");
  // Static assets are not part of the bundle: served from beside it.
  if copy.join("public").is_dir() {
    copy_dir(&copy.join("public"), &served.join("public"));
  }
  let config = std::fs::read_to_string(copy.join("wrangler.toml")).unwrap();
  let config: String = config
    .lines()
    .map(|l| {
      if l.starts_with("main = ") {
        format!("main = {main:?}")
      } else {
        l.to_string()
      }
    })
    .collect::<Vec<_>>()
    .join("\n");
  std::fs::write(served.join("wrangler.toml"), config).unwrap();
  (copy, served)
}

/// The scenario's transcript for one phase against `addr`.
fn scenario(app: &Path, addr: std::net::SocketAddr, phase: &str) -> String {
  let out = Command::new("node")
    .args(node_flags())
    .arg("scenario.mjs")
    .arg(format!("http://{addr}"))
    .arg(phase)
    .current_dir(app)
    .output()
    .expect("running node");
  let text = String::from_utf8_lossy(&out.stdout).into_owned();
  assert!(
    out.status.success(),
    "{} {phase} against {addr} failed: {text}{}",
    app.display(),
    String::from_utf8_lossy(&out.stderr)
  );
  text
}

/// Node.js 20 has its WebSocket client behind a flag that older releases
/// refuse; without it the scenarios use `ws` (tests/node_modules).
fn node_flags() -> &'static [&'static str] {
  static FLAGS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
  FLAGS.get_or_init(|| {
    let with_flag = ["--experimental-websocket", "--no-warnings"];
    let ok = Command::new("node")
      .args(with_flag)
      .args(["-e", "0"])
      .output()
      .is_ok_and(|o| o.status.success());
    if ok {
      &["--experimental-websocket", "--no-warnings"]
    } else {
      &["--no-warnings"]
    }
  })
}

/// Both phases on `wrangler dev`, restarted in between over its state.
fn on_wrangler_dev(app: &Path) -> (String, String) {
  let state = app.join(".wrangler-state");
  let args = ["--persist-to", state.to_str().unwrap()];
  let first = {
    let (_dev, addr) = wrangler_dev(app, &args);
    settle(addr);
    scenario(app, addr, "first")
  };
  let (_dev, addr) = wrangler_dev(app, &args);
  settle(addr);
  (first, scenario(app, addr, "restart"))
}

/// Both phases on cellhost, restarted in between over its data directory.
fn on_cellhost(served: &Path) -> (String, String) {
  let data = served.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let first = {
    let ch = Cellhost::start(served, &args);
    scenario(served, ch.addr, "first")
  };
  let ch = Cellhost::start(served, &args);
  (first, scenario(served, ch.addr, "restart"))
}

/// wrangler dev listens before its Worker is ready: wait for any answer.
fn settle(addr: std::net::SocketAddr) {
  let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
  while std::time::Instant::now() < deadline {
    if request(addr, "GET", "/__settle", &[], b"").is_ok() {
      return;
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
  }
}

fn same_on_both(name: &str) {
  // One app at a time: wrangler's bundler and `wrangler dev` (Node.js plus
  // workerd) are heavy, and the machines have two cores.
  static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
  let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
  let (app, served) = build(name);
  std::fs::copy(app.join("scenario.mjs"), served.join("scenario.mjs")).unwrap();
  let theirs = on_wrangler_dev(&app);
  let ours = on_cellhost(&served);
  // Shown with --nocapture: what was compared.
  println!(
    "{name}, first run:\n{}{name}, after restart:\n{}",
    ours.0, ours.1
  );
  assert_eq!(
    ours.0, theirs.0,
    "{name}: first run differs from wrangler dev"
  );
  assert_eq!(
    ours.1, theirs.1,
    "{name}: run after restart differs from wrangler dev"
  );
  let _ = std::fs::remove_dir_all(app.parent().unwrap());
}

#[test]
fn agents_agent_as_on_wrangler_dev() {
  same_on_both("agent");
}

#[test]
fn partyserver_chat_room_as_on_wrangler_dev() {
  same_on_both("party");
}

#[test]
fn hono_app_with_a_durable_object_as_on_wrangler_dev() {
  same_on_both("hono");
}

#[test]
fn spa_chat_with_static_assets_as_on_wrangler_dev() {
  same_on_both("spa-chat");
}

#[test]
fn chat_demo_as_on_wrangler_dev() {
  same_on_both("chat-demo");
}

#[test]
fn express_app_through_node_http_as_on_wrangler_dev() {
  same_on_both("express");
}

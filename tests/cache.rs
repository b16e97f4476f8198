//! The Cache API against `wrangler dev` (plain `workerd serve` has no cache
//! to compare with): tests/apps/cache runs one scenario — what is stored
//! and for how long, conditional and range lookups, named caches, delete —
//! on both, and the answers must be equal. Then what only cellhost has to
//! promise: the cache is the node's, kept under its data directory across
//! restarts.

mod support;

use std::time::{Duration, Instant};

use support::*;

/// A copy of tests/apps/cache in a fresh folder (wrangler writes its state
/// beside the config).
fn app_copy(tag: &str) -> std::path::PathBuf {
  let src = repo_root().join("tests/apps/cache");
  let d = std::env::temp_dir().join(format!("cellhost-cache-{}-{tag}", std::process::id()));
  let _ = std::fs::remove_dir_all(&d);
  std::fs::create_dir_all(&d).unwrap();
  for f in ["worker.js", "wrangler.toml"] {
    std::fs::copy(src.join(f), d.join(f)).unwrap();
  }
  d
}

/// The scenario's answer, retried while wrangler dev finishes starting.
fn scenario(addr: std::net::SocketAddr) -> serde_json::Value {
  let deadline = Instant::now() + Duration::from_secs(60);
  loop {
    if let Ok(r) = request(addr, "GET", "/", &[], b"")
      && r.status == 200
      && r.header("x-run") == Some("1")
    {
      return serde_json::from_str(&r.text()).expect("the scenario answers JSON");
    }
    assert!(
      Instant::now() < deadline,
      "the scenario never answered on {addr}"
    );
    std::thread::sleep(Duration::from_millis(200));
  }
}

#[test]
fn cache_api_answers_as_wrangler_dev() {
  let dir = app_copy("wrangler");
  let (dev, addr) = wrangler_dev(&dir, &[]);
  let expected = scenario(addr);
  drop(dev);
  let ours_dir = app_copy("cellhost");
  let data = ours_dir.join(".data");
  let ch = Cellhost::start(&ours_dir, &["--data", data.to_str().unwrap()]);
  let got = scenario(ch.addr);
  let (e, g) = (expected.as_array().unwrap(), got.as_array().unwrap());
  for (a, b) in e.iter().zip(g) {
    assert_eq!(a, b, "step {} differs from wrangler dev", a[0]);
  }
  assert_eq!(e.len(), g.len(), "{got}");
  let _ = std::fs::remove_dir_all(&dir);
  let _ = std::fs::remove_dir_all(&ours_dir);
}

const NODE_CACHE: &str = r#"
export default {
  async fetch(request) {
    const url = new URL(request.url);
    const key = "https://node.test/k";
    if (url.pathname === "/put") {
      await caches.default.put(key, new Response("kept", { headers: { "cache-control": "max-age=600" } }));
      return new Response("put");
    }
    const r = await caches.default.match(key);
    return new Response(r ? `hit ${await r.text()}` : "miss");
  },
};
"#;

#[test]
fn the_cache_is_the_nodes_and_survives_a_restart() {
  let d = project("node-cache", NODE_CACHE, "");
  let data = d.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let ch = Cellhost::start(&d, &args);
  assert_eq!(get(ch.addr, "/get").text(), "miss");
  assert_eq!(get(ch.addr, "/put").text(), "put");
  // Every isolate of the process sees it (several requests spread over them).
  for _ in 0..8 {
    assert_eq!(get(ch.addr, "/get").text(), "hit kept");
  }
  drop(ch);
  let ch = Cellhost::start(&d, &args);
  assert_eq!(get(ch.addr, "/get").text(), "hit kept", "after a restart");
  drop(ch);
  // Another data directory is another node's cache.
  let other = d.join(".other");
  let ch = Cellhost::start(&d, &["--data", other.to_str().unwrap()]);
  assert_eq!(get(ch.addr, "/get").text(), "miss");
  let _ = std::fs::remove_dir_all(&d);
}

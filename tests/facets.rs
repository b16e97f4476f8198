//! Durable Object facets beyond the `do_facets` fixture (which compares
//! with workerd): their databases survive a SIGKILL and the parent's
//! eviction, lie beside the parent's, go (with their children) when
//! deleted, and on a bucket they move with their parent between nodes.

mod support;

// The moto server the bucket crate's S3 tests start.
#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;

use std::time::Duration;

use support::*;

const WORKER: &str = r#"import { DurableObject } from "cloudflare:workers";
export default {
  fetch(req, env) { return env.OBJ.getByName("root").fetch(req); },
};
export class Obj extends DurableObject {
  starts = 0;
  async fetch(req) {
    const u = new URL(req.url);
    const path = (u.searchParams.get("f") ?? "").split("/");
    try {
      if (u.pathname === "/delete") {
        this.ctx.facets.delete(path[0]);
        return new Response("deleted");
      }
      const facet = this.ctx.facets.get(path[0], () => {
        this.starts++;
        return { class: this.ctx.exports.Counter };
      });
      const [value, calls] = await facet.inc(path.slice(1));
      return new Response(`${value} ${calls} ${this.starts}`);
    } catch (e) {
      return new Response(`${e.constructor.name}: ${e.message}`, { status: 500 });
    }
  }
}
export class Counter extends DurableObject {
  calls = 0;
  async inc(rest) {
    if (rest.length > 0) {
      const child = this.ctx.facets.get(rest[0], () => ({ class: this.ctx.exports.Counter }));
      return child.inc(rest.slice(1));
    }
    const v = this.ctx.storage.kv.get("n") ?? 0;
    this.ctx.storage.kv.put("n", v + 1);
    return [v, this.calls++];
  }
}
"#;

fn text(ch: &Cellhost, path: &str) -> String {
  get(ch.addr, path).text()
}

/// Files under `dir` whose path ends with `suffix`.
fn find(dir: &std::path::Path, suffix: &str) -> Vec<std::path::PathBuf> {
  let mut out = Vec::new();
  let Ok(rd) = std::fs::read_dir(dir) else {
    return out;
  };
  for e in rd.flatten() {
    let p = e.path();
    if p.to_string_lossy().ends_with(suffix) {
      out.push(p.clone());
    }
    if p.is_dir() {
      out.extend(find(&p, suffix));
    }
  }
  out
}

#[test]
fn facets_keep_their_storage_through_sigkill_and_eviction() {
  let dir = project(
    "facets",
    WORKER,
    OBJ_BINDING
      .replace("\"Obj\"]", "\"Obj\", \"Counter\"]")
      .as_str(),
  );
  let data = dir.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&dir, &args);
  // value, calls on this facet instance, callbacks run by this parent instance
  assert_eq!(text(&ch, "/?f=foo"), "0 0 1");
  assert_eq!(text(&ch, "/?f=foo"), "1 1 1");
  assert_eq!(text(&ch, "/?f=bar/baz"), "0 0 2");
  assert_eq!(text(&ch, "/?f=bar/baz"), "1 1 2");
  ch.child.kill().unwrap();
  ch.child.wait().unwrap();

  // Stored beside the parent's database, a nested facet under its parent's.
  assert_eq!(
    find(&data, ".facets/foo.sqlite").len(),
    1,
    "{:?}",
    find(&data, ".sqlite")
  );
  assert_eq!(find(&data, ".facets/bar.facets/baz.sqlite").len(), 1);

  let ch = Cellhost::start(&dir, &args);
  assert_eq!(text(&ch, "/?f=foo"), "2 0 1");
  assert_eq!(text(&ch, "/?f=bar/baz"), "2 0 2");
  // Idle, the parent is evicted with its facets; they start again from
  // their storage.
  std::thread::sleep(Duration::from_secs(13));
  assert_eq!(text(&ch, "/?f=foo"), "3 0 1");
  // Deleting a facet deletes its children's storage too.
  assert_eq!(text(&ch, "/delete?f=bar"), "deleted");
  assert!(find(&data, "bar.sqlite").is_empty());
  assert!(find(&data, "baz.sqlite").is_empty());
  assert_eq!(text(&ch, "/?f=bar/baz"), "0 0 2");
}

/// The first answer of `path` that is not a refusal (the cell may still be
/// held by a dead node's lease).
fn text_once_taken(ch: &Cellhost, path: &str) -> String {
  let until = std::time::Instant::now() + Duration::from_secs(15);
  loop {
    let r = get(ch.addr, path);
    if r.status == 200 || std::time::Instant::now() > until {
      return r.text();
    }
    std::thread::sleep(Duration::from_millis(200));
  }
}

/// Two nodes on one bucket: `url` with `extra` flags and `env`; `files`,
/// for a local bucket, is its directory (to look at what it holds).
fn facets_move_with_their_parent(
  tag: &str,
  url: &str,
  extra: &[&str],
  env: &[(&str, &str)],
  files: Option<&std::path::Path>,
) {
  let dir = project(
    tag,
    WORKER,
    OBJ_BINDING
      .replace("\"Obj\"]", "\"Obj\", \"Counter\"]")
      .as_str(),
  );
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
  let count = |suffix: &str| files.map(|b| find(b, suffix).len());
  let mut a = start("a");
  assert_eq!(text(&a, "/?f=foo"), "0 0 1");
  assert_eq!(text(&a, "/?f=foo"), "1 1 1");
  assert_eq!(text(&a, "/?f=bar/baz"), "0 0 2");
  assert_eq!(text(&a, "/?f=bar/baz"), "1 1 2");
  if files.is_some() {
    // Each facet is a cell of its own, recorded under its parent's.
    assert_eq!(count("/facets/foo"), Some(1));
    assert_eq!(count("$bar/facets/baz"), Some(1));
    assert_eq!(count("$bar$baz/own.json"), Some(1));
  }

  // The owner dies with its disk: the next node restores the facets with
  // their parent, from the bucket alone.
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  let mut b = start("b");
  assert_eq!(text_once_taken(&b, "/?f=foo"), "2 0 1", "{}", b.log());
  assert_eq!(text(&b, "/?f=bar/baz"), "2 0 2");

  // Deleting a facet empties it and its children in the bucket.
  assert_eq!(text(&b, "/delete?f=bar"), "deleted");
  if files.is_some() {
    assert_eq!(count("/facets/bar"), Some(0));
  }
  assert_eq!(text(&b, "/?f=foo"), "3 1 2");
  sigterm(&mut b);
  let a = start("a");
  assert_eq!(text_once_taken(&a, "/?f=bar/baz"), "0 0 1", "{}", a.log());
  // bar itself starts empty too (it never counted: its child did).
  assert_eq!(text(&a, "/?f=bar"), "0 0 1");
  assert_eq!(text(&a, "/?f=foo"), "4 0 2");
}

#[test]
fn facets_move_with_their_parent_between_nodes_on_a_bucket() {
  let bucket = std::env::temp_dir().join(format!("cellhost-facets-bucket-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&bucket);
  std::fs::create_dir_all(&bucket).unwrap();
  let url = format!("file://{}", bucket.display());
  facets_move_with_their_parent("facets-bucket", &url, &[], &[], Some(&bucket));
}

#[test]
fn facets_move_with_their_parent_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let url = format!("s3://{}", bucket_common::MOTO_BUCKET);
  let endpoint = moto.endpoint();
  let extra = ["--endpoint", &endpoint, "--region", "us-east-1"];
  let env = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
  ];
  facets_move_with_their_parent("facets-s3", &url, &extra, &env, None);
}

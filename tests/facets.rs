//! Durable Object facets beyond the `do_facets` fixture (which compares
//! with workerd): their databases survive a SIGKILL and the parent's
//! eviction, lie beside the parent's, go (with their children) when
//! deleted, and bucket mode refuses them by name.

mod support;

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

#[test]
fn bucket_mode_refuses_facets_by_name() {
  let dir = project(
    "facets-bucket",
    WORKER,
    OBJ_BINDING
      .replace("\"Obj\"]", "\"Obj\", \"Counter\"]")
      .as_str(),
  );
  let bucket = dir.join("bucket");
  std::fs::create_dir_all(&bucket).unwrap();
  let url = format!("file://{}", bucket.display());
  let data = dir.join(".data");
  let ch = Cellhost::start(
    &dir,
    &[
      "--data",
      data.to_str().unwrap(),
      "--bucket",
      &url,
      "--node",
      "a",
    ],
  );
  let r = get(ch.addr, "/?f=foo");
  assert_eq!(r.status, 500);
  assert!(
    r.text()
      .contains("Durable Object facets are not supported in bucket mode"),
    "{}",
    r.text()
  );
}

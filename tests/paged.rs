//! Paged restore across real processes on a file bucket: a node with
//! `--paged-min-mb 1` opens a 3 MB cell over the bucket's pages and writes
//! a marker for its epoch instead of a snapshot; a node that downloads the
//! chain whole restores through that link; a paged epoch gets a snapshot of
//! its own once its file is whole.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

/// The first call after the previous owner was killed: refused until its
/// lease lapses.
fn take(ch: &Cellhost, path: &str) -> String {
  let end = Instant::now() + Duration::from_secs(30);
  loop {
    match request(ch.addr, "GET", path, &[], b"") {
      Ok(r) if r.status == 200 => return r.text(),
      r => assert!(
        Instant::now() < end,
        "{path}: {:?}\n{}",
        r.map(|r| r.text()),
        ch.log()
      ),
    }
    std::thread::sleep(Duration::from_millis(200));
  }
}

fn get(ch: &Cellhost, method: &str, path: &str) -> String {
  let r = request(ch.addr, method, path, &[], b"")
    .unwrap_or_else(|e| panic!("{path}: {e}\n{}", ch.log()));
  assert_eq!(r.status, 200, "{path}: {}\n{}", r.text(), ch.log());
  r.text()
}

/// The LTX keys of the only cell in the bucket, relative to its `ltx/`.
fn ltx_keys(bucket: &Path) -> Vec<String> {
  let cells = std::fs::read_dir(bucket.join("cells")).unwrap();
  let cell = cells
    .flatten()
    .map(|e| e.path())
    .find(|p| p.join("ltx").exists())
    .unwrap();
  let mut out = Vec::new();
  let mut stack = vec![cell.join("ltx")];
  while let Some(d) = stack.pop() {
    for e in std::fs::read_dir(&d).unwrap().flatten() {
      if e.file_type().unwrap().is_dir() {
        stack.push(e.path());
      } else {
        out.push(
          e.path()
            .strip_prefix(cell.join("ltx"))
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        );
      }
    }
  }
  out.sort();
  out
}

/// A clean stop: the next node takes the cell at once and never picks
/// this one as a follower.
fn stop(mut ch: Cellhost) {
  sigterm(&mut ch);
}

fn wait_until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
  let end = Instant::now() + within;
  while !f() {
    assert!(Instant::now() < end, "{what}");
    std::thread::sleep(Duration::from_millis(100));
  }
}

#[test]
fn a_large_cell_pages_in_and_its_link_restores_whole() {
  let f = Bucketed::new("paged", repo_root().join("tests/apps/rows"));
  let bucket = f.dir.join("bucket");
  let node = |name: &str, paged_min_mb: &str| {
    let n = Bucketed {
      dir: f.dir.clone(),
      bucket: f.bucket.clone(),
      worker: f.worker.clone(),
      extra: vec!["--paged-min-mb".into(), paged_min_mb.into()],
      env: vec![],
    };
    n.run(name)
  };
  let a = node("a", "64");
  assert_eq!(get(&a, "POST", "/fill?n=3000"), "3000");
  stop(a);

  // b pages in: the cell serves before its 3 MB are here.
  let b = node("b", "1");
  assert_eq!(take(&b, "/row?id=1234"), "v1234");
  assert_eq!(get(&b, "POST", "/set?id=1234&v=b"), "b");
  assert!(
    b.wait_log("paged in from epoch 1", Duration::from_secs(5)),
    "{}",
    b.log()
  );
  let keys = ltx_keys(&bucket);
  let marker = keys
    .iter()
    .find(|k| k.contains("/paged/e1-"))
    .unwrap_or_else(|| panic!("{keys:?}"));
  let paged_epoch = marker.split('/').next().unwrap().to_string();
  assert!(
    !keys
      .iter()
      .any(|k| k.starts_with(&format!("{paged_epoch}/0000/0000000000000001-"))),
    "a paged epoch opens without a snapshot: {keys:?}"
  );
  stop(b);

  // c downloads the chain whole: through the link.
  let c = node("c", "64");
  assert_eq!(take(&c, "/row?id=1234"), "b");
  assert_eq!(get(&c, "GET", "/count"), "3000");
  assert_eq!(get(&c, "POST", "/set?id=7&v=c"), "c");
  stop(c);

  // d pages in again, then its file fills, and its next commit takes the
  // snapshot that lets the epoch stand alone.
  let d = node("d", "1");
  assert_eq!(take(&d, "/row?id=7"), "c");
  assert_eq!(get(&d, "GET", "/row?id=1234"), "b");
  assert!(
    d.wait_log("every page is local now", Duration::from_secs(30)),
    "{}",
    d.log()
  );
  let marker = ltx_keys(&bucket)
    .into_iter()
    .filter(|k| k.contains("/paged/"))
    .max()
    .unwrap();
  let paged_epoch = marker.split('/').next().unwrap().to_string();
  assert_eq!(get(&d, "POST", "/set?id=8&v=d"), "d");
  wait_until(
    "the paged epoch never got a snapshot",
    Duration::from_secs(20),
    || {
      ltx_keys(&bucket)
        .iter()
        .any(|k| k.starts_with(&format!("{paged_epoch}/0009/0000000000000001-")))
    },
  );
  assert_eq!(get(&d, "GET", "/count"), "3000");
  stop(d);

  let e = node("e", "64");
  assert_eq!(take(&e, "/row?id=8"), "d");
  for (id, v) in [(7, "c"), (1234, "b"), (2999, "v2999")] {
    assert_eq!(get(&e, "GET", &format!("/row?id={id}")), v);
  }
}

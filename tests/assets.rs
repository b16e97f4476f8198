//! Static assets (`assets` in wrangler's config), compared with `wrangler dev`
//! 4.86: every case in tests/assets/* (one config each over the shared
//! tests/assets/site and tests/assets/worker.js) answers every request of
//! tests/assets/requests.txt as wrangler dev does: status, headers (ETag
//! values aside: they hash different things) and body. Then what wrangler dev
//! does not do but Cloudflare's edge does (byte ranges), and config errors.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use support::*;

/// Headers that describe the connection or the server, not the Worker.
const SKIP: [&str; 6] = [
  "date",
  "server",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
];

struct Line {
  method: String,
  path: String,
  headers: Vec<(String, String)>,
}

fn requests(root: &Path) -> Vec<Line> {
  std::fs::read_to_string(root.join("requests.txt"))
    .unwrap()
    .lines()
    .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    .map(|l| {
      let mut parts = l.split(" | ");
      let (method, path) = parts.next().unwrap().split_once(' ').unwrap();
      let headers = parts
        .map(|h| {
          let (k, v) = h.split_once(": ").unwrap();
          (k.to_string(), v.to_string())
        })
        .collect();
      Line {
        method: method.into(),
        path: path.into(),
        headers,
      }
    })
    .collect()
}

/// One request's answer, as comparable text.
fn answer(addr: SocketAddr, line: &Line) -> String {
  let mut headers = line.headers.clone();
  for (_, v) in headers.iter_mut() {
    if v.contains("{etag}") {
      let etag = get(addr, &line.path)
        .header("etag")
        .unwrap_or("")
        .to_string();
      *v = v.replace("{etag}", &etag);
    }
  }
  let h: Vec<(&str, &str)> = headers
    .iter()
    .map(|(k, v)| (k.as_str(), v.as_str()))
    .collect();
  let r = match request(addr, &line.method, &line.path, &h, b"") {
    Ok(r) => r,
    Err(e) => return format!("error: {e}"),
  };
  let mut hs: Vec<String> = r
    .headers
    .iter()
    .filter(|(k, _)| !SKIP.contains(&k.as_str()))
    .map(|(k, v)| {
      let v = if k == "etag" {
        if v.starts_with("W/") {
          "W/\"<etag>\""
        } else {
          "\"<etag>\""
        }
        .to_string()
      } else {
        v.clone()
      };
      format!("{k}: {v}")
    })
    .collect();
  hs.sort();
  format!("{}\n{}\n{:?}", r.status, hs.join("\n"), r.text())
}

/// Waits until wrangler dev answers (its port can listen a moment before
/// its first reload settles); a server that never answers fails the test.
fn settle(addr: SocketAddr) {
  let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
  while request(addr, "GET", "/", &[], b"").is_err() {
    assert!(
      std::time::Instant::now() < deadline,
      "wrangler dev at {addr} never answered"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
  }
}

#[test]
fn assets_match_wrangler_dev() {
  let root = repo_root().join("tests/assets");
  let tmp = tempdir("assets-diff");
  copy_dir(&root, &tmp);
  let lines = requests(&root);
  let only = std::env::var("ASSET_CASES").ok();
  let mut cases: Vec<PathBuf> = std::fs::read_dir(&tmp)
    .unwrap()
    .map(|e| e.unwrap().path())
    .filter(|p| p.join("wrangler.jsonc").exists())
    .filter(|p| only.as_deref().is_none_or(|o| p.ends_with(o)))
    .collect();
  cases.sort();
  assert!(only.is_some() || cases.len() >= 7, "{cases:?}");
  let (mut compared, mut diffs) = (0, Vec::new());
  for case in &cases {
    let name = case.file_name().unwrap().to_string_lossy().to_string();
    // Cellhost's data lives outside the case: wrangler dev watches the case
    // directory and may reload (closing its port a moment) when files change.
    let data = tmp.with_extension(format!("{name}.data"));
    let ours = Cellhost::start(case, &["--data", data.to_str().unwrap()]);
    let (dev, theirs) = wrangler_dev(case, &[]);
    settle(theirs);
    for line in &lines {
      let a = answer(theirs, line);
      let b = answer(ours.addr, line);
      compared += 1;
      if a != b {
        diffs.push(format!(
          "{name}: {} {} {:?}\n--- wrangler dev\n{a}\n--- cellhost\n{b}\n",
          line.method, line.path, line.headers
        ));
      }
    }
    drop(dev);
  }
  eprintln!(
    "{} cases, {compared} requests compared, {} differ",
    cases.len(),
    diffs.len()
  );
  assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// A directory of its own with a config over a fresh copy of the site.
fn project_with(name: &str, config: &str) -> PathBuf {
  let tmp = tempdir(name);
  copy_dir(&repo_root().join("tests/assets/site"), &tmp.join("site"));
  std::fs::copy(
    repo_root().join("tests/assets/worker.js"),
    tmp.join("worker.js"),
  )
  .unwrap();
  std::fs::write(tmp.join("wrangler.jsonc"), config).unwrap();
  tmp
}

/// Byte ranges, as Cloudflare's edge answers them for assets (wrangler dev
/// serves the whole file): one range is 206 with Content-Range, past the
/// end is 416, several ranges or another unit get the whole file.
#[test]
fn byte_ranges() {
  let dir = project_with(
    "assets-ranges",
    r#"{ "name": "r", "main": "worker.js", "compatibility_date": "2025-06-01", "assets": { "directory": "site", "binding": "ASSETS" } }"#,
  );
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  let whole = std::fs::read(dir.join("site/notes.txt")).unwrap();
  let range = |r: &str| request(ch.addr, "GET", "/notes.txt", &[("Range", r)], b"").unwrap();
  let r = range("bytes=0-9");
  assert_eq!(r.status, 206);
  assert_eq!(r.body, &whole[..10]);
  assert_eq!(
    r.header("content-range"),
    Some(format!("bytes 0-9/{}", whole.len()).as_str())
  );
  assert_eq!(r.header("cache-control"), None, "a range is not cacheable");
  let r = range("bytes=-5");
  assert_eq!(
    (r.status, r.body.as_slice()),
    (206, &whole[whole.len() - 5..])
  );
  let r = range("bytes=10-");
  assert_eq!((r.status, r.body.as_slice()), (206, &whole[10..]));
  let r = range(&format!("bytes={}-", whole.len()));
  assert_eq!(r.status, 416);
  assert_eq!(
    r.header("content-range"),
    Some(format!("bytes */{}", whole.len()).as_str())
  );
  let r = range("bytes=0-1,4-5");
  assert_eq!((r.status, r.body.as_slice()), (200, whole.as_slice()));
  // A large file (read from disk, not the in-memory set) ranges the same.
  let big: Vec<u8> = (0..(600u32 << 10)).map(|i| (i % 251) as u8).collect();
  std::fs::write(dir.join("site/big.bin"), &big).unwrap();
  drop(ch);
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  let r = request(
    ch.addr,
    "GET",
    "/big.bin",
    &[("Range", "bytes=300000-300099")],
    b"",
  )
  .unwrap();
  assert_eq!((r.status, r.body.as_slice()), (206, &big[300000..300100]));
  let r = get(ch.addr, "/big.bin");
  assert_eq!(r.body, big);
}

/// Bad `assets` settings stop the start with a message naming them.
#[test]
fn bad_assets_config_is_refused() {
  let cases = [
    (
      r#""assets": { "directory": "site", "html_handling": "sometimes" }"#,
      "assets.html_handling = \"sometimes\"",
    ),
    (
      r#""assets": { "directory": "site", "not_found_handling": "spa" }"#,
      "assets.not_found_handling = \"spa\"",
    ),
    (
      r#""assets": { "directory": "site", "serve_directly": true }"#,
      "unknown field `serve_directly`",
    ),
    (
      r#""assets": { "binding": "ASSETS" }"#,
      "assets.directory is missing",
    ),
    (r#""assets": { "directory": "nowhere" }"#, "nowhere"),
    (
      r#""assets": { "directory": "site", "run_worker_first": ["api/*"] }"#,
      "rules must start with '/' or '!/'",
    ),
    (
      r#""assets": { "directory": "site", "run_worker_first": ["!/api/*"] }"#,
      "Only negative `run_worker_first` rules",
    ),
    (
      r#""assets": { "directory": "site", "run_worker_first": "yes" }"#,
      "expected a boolean or an array",
    ),
  ];
  for (i, (assets, expected)) in cases.iter().enumerate() {
    let dir = project_with(
      &format!("assets-bad-{i}"),
      &format!(
        r#"{{ "name": "b", "main": "worker.js", "compatibility_date": "2025-06-01", {assets} }}"#
      ),
    );
    let (code, out) = cellhost_fails(&dir);
    assert_eq!(code, Some(1), "{assets}: {out}");
    assert!(
      out.contains(expected),
      "{assets}: expected {expected:?} in {out}"
    );
  }
}

/// What the files are at start is what is served: a file added later is not
/// an asset (as on Cloudflare, where assets are uploaded with the version),
/// and one changed later keeps its start-time ETag out of date no more than
/// its content: both come from the manifest.
#[test]
fn manifest_is_read_at_start() {
  let dir = project_with(
    "assets-manifest",
    r#"{ "name": "m", "main": "worker.js", "compatibility_date": "2025-06-01", "assets": { "directory": "site" } }"#,
  );
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  assert!(
    ch.wait_log("assets: 14 files", std::time::Duration::from_secs(5)),
    "{}",
    ch.log()
  );
  std::fs::write(dir.join("site/late.txt"), "late").unwrap();
  let r = get(ch.addr, "/late.txt");
  assert_eq!(r.text(), "worker fallback GET /late.txt");
  let e1 = get(ch.addr, "/about").header("etag").unwrap().to_string();
  drop(ch);
  std::fs::write(dir.join("site/about.html"), "<p>changed</p>").unwrap();
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  let r = get(ch.addr, "/about");
  assert_eq!(r.text(), "<p>changed</p>");
  assert_ne!(
    r.header("etag").unwrap(),
    e1,
    "a changed file has a new ETag"
  );
  assert_eq!(get(ch.addr, "/late.txt").text(), "late");
}

//! `cellhost diagnose`: the storage test as an operator runs it, against a directory
//! bucket, a real S3-API server (moto; it must be installed) and a fake S3 that ignores
//! conditional headers (as s3rver does), which must be named as the fault.

mod support;

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const OK_LINE: &str = "ok bucket conditional write (create, reject-create, update, reject-stale)";
const LIST_OK_LINE: &str = "ok bucket list-after-write (needed by --ltx-retention-secs)";

/// Runs `cellhost diagnose ARGS` with dummy AWS keys and nothing else from AWS_*.
fn diagnose(args: &[&str]) -> (Option<i32>, String, String) {
  let mut cmd = Command::new(support::cellhost_bin());
  cmd.arg("diagnose").args(args);
  for (k, _) in std::env::vars() {
    if k.starts_with("AWS_") {
      cmd.env_remove(k);
    }
  }
  let Output {
    status,
    stdout,
    stderr,
  } = cmd
    .env("AWS_ACCESS_KEY_ID", "testing")
    .env("AWS_SECRET_ACCESS_KEY", "testing")
    .output()
    .unwrap();
  let (out, err) = (
    String::from_utf8_lossy(&stdout).into_owned(),
    String::from_utf8_lossy(&stderr).into_owned(),
  );
  (status.code(), out, err)
}

#[test]
fn diagnose_directory_bucket() {
  let dir = common::TempDir::new("diagnose");
  let (code, out, err) = diagnose(&["--bucket", &dir.url()]);
  assert_eq!(code, Some(0), "stdout: {out}\nstderr: {err}");
  assert_eq!(out.lines().next(), Some(OK_LINE), "{out}");
  // The fifth property, which only epoch GC needs.
  assert!(out.contains(LIST_OK_LINE), "{out}");
}

#[test]
fn diagnose_moto() {
  let moto = common::Moto::start();
  let endpoint = moto.endpoint();
  let bucket = format!("s3://{}", common::MOTO_BUCKET);
  let base = [
    "--bucket",
    &bucket,
    "--endpoint",
    &endpoint,
    "--region",
    "us-east-1",
  ];
  let (code, out, err) = diagnose(&base);
  assert_eq!(code, Some(0), "stdout: {out}\nstderr: {err}");
  assert_eq!(out.lines().next(), Some(OK_LINE), "{out}");
  assert!(out.contains(LIST_OK_LINE), "{out}");

  let mut ro = base.to_vec();
  ro.push("--read-only");
  let (code, out, err) = diagnose(&ro);
  assert_eq!(code, Some(0), "stdout: {out}\nstderr: {err}");
  assert!(out.contains("not tested (--read-only)"), "{out}");
  assert!(!out.contains(OK_LINE), "{out}");
  assert!(!out.contains(LIST_OK_LINE), "{out}");
}

#[test]
fn diagnose_names_a_store_that_ignores_conditions() {
  let port = fake_s3(false);
  let endpoint = format!("http://127.0.0.1:{port}");
  let (code, out, err) = diagnose(&[
    "--bucket",
    "s3://lax",
    "--endpoint",
    &endpoint,
    "--region",
    "us-east-1",
  ]);
  assert_eq!(code, Some(2), "stdout: {out}\nstderr: {err}");
  assert!(!out.contains(OK_LINE), "{out}");
  assert!(err.contains("step 2: reject-create"), "{err}");
  assert!(err.contains("ignores If-None-Match"), "{err}");
  assert!(err.contains("s3://lax"), "{err}");
}

#[test]
fn diagnose_names_a_store_that_ignores_ranges() {
  // Conditions honoured, but every GET returns the whole object with 200.
  let port = fake_s3(true);
  let endpoint = format!("http://127.0.0.1:{port}");
  let (code, out, err) = diagnose(&[
    "--bucket",
    "s3://norange",
    "--endpoint",
    &endpoint,
    "--region",
    "us-east-1",
  ]);
  assert_eq!(code, Some(2), "stdout: {out}\nstderr: {err}");
  assert!(err.contains("step 5: ranged read"), "{err}");
  assert!(err.contains("does not honour ranged reads"), "{err}");
  assert!(err.contains("s3://norange"), "{err}");
}

#[test]
fn diagnose_refuses_a_bad_url() {
  let (code, _, err) = diagnose(&["--bucket", "ftp://nope"]);
  assert_eq!(code, Some(1), "{err}");
  assert!(err.contains("file://, s3://"), "{err}");
}

/// Object bodies and their write counters (the etag), by request path.
type Objects = Mutex<HashMap<String, (Vec<u8>, u32)>>;

/// Whether a PUT's `If-Match` / `If-None-Match: *` allows it.
fn condition_holds(
  map: &HashMap<String, (Vec<u8>, u32)>,
  path: &str,
  if_match: Option<String>,
  if_none_match: Option<String>,
) -> bool {
  let current = map.get(path).map(|(_, v)| format!("\"e{v}\""));
  match (if_match, if_none_match) {
    (Some(want), _) => current.is_some_and(|c| c == want || c.trim_matches('"') == want),
    (None, Some(_)) => current.is_none(),
    (None, None) => true,
  }
}

/// A minimal S3 (PUT, GET, DELETE) that ignores `Range`, and ignores the conditional
/// headers too (overwriting, like s3rver) unless `conditions` is set.
fn fake_s3(conditions: bool) -> u16 {
  let l = TcpListener::bind("127.0.0.1:0").unwrap();
  let port = l.local_addr().unwrap().port();
  let objects: Arc<Objects> = Arc::default();
  std::thread::spawn(move || {
    for s in l.incoming().map_while(Result::ok) {
      let objects = objects.clone();
      std::thread::spawn(move || {
        let _ = serve(s, &objects, conditions);
      });
    }
  });
  port
}

fn serve(s: TcpStream, objects: &Objects, conditions: bool) -> std::io::Result<()> {
  let mut r = BufReader::new(s.try_clone()?);
  let mut w = s;
  loop {
    let mut first = String::new();
    if r.read_line(&mut first)? == 0 {
      return Ok(());
    }
    let mut parts = first.split_whitespace();
    let (method, path) = (
      parts.next().unwrap_or("").to_string(),
      parts.next().unwrap_or("").to_string(),
    );
    let mut len = 0;
    let (mut if_match, mut if_none_match) = (None, None);
    loop {
      let mut l = String::new();
      r.read_line(&mut l)?;
      if l.trim_end().is_empty() {
        break;
      }
      if let Some((k, v)) = l.split_once(':') {
        let (k, v) = (k.to_ascii_lowercase(), v.trim().to_string());
        match k.as_str() {
          "content-length" => len = v.parse().unwrap_or(0),
          "if-match" => if_match = Some(v),
          "if-none-match" => if_none_match = Some(v),
          _ => {}
        }
      }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    let path = path.split('?').next().unwrap_or("").to_string();
    let mut map = objects.lock().unwrap();
    let date = "Sun, 29 Nov 2026 21:00:00 GMT";
    let resp = match method.as_str() {
      "PUT" if conditions && !condition_holds(&map, &path, if_match, if_none_match) => {
        b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n".to_vec()
      }
      "PUT" => {
        let version = map.get(&path).map(|(_, g)| g + 1).unwrap_or(1);
        map.insert(path, (body, version));
        format!("HTTP/1.1 200 OK\r\nETag: \"e{version}\"\r\nContent-Length: 0\r\n\r\n").into_bytes()
      }
      "GET" => match map.get(&path) {
        Some((data, version)) => {
          let mut v = format!(
            "HTTP/1.1 200 OK\r\nETag: \"e{version}\"\r\nLast-Modified: {date}\r\nContent-Length: {}\r\n\r\n",
            data.len()
          )
          .into_bytes();
          v.extend_from_slice(data);
          v
        }
        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
      },
      "DELETE" => {
        map.remove(&path);
        b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()
      }
      _ => b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n".to_vec(),
    };
    w.write_all(&resp)?;
  }
}

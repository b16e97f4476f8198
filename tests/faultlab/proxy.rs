//! The fault proxy: a small HTTP/1.1 reverse proxy on loopback in front of
//! an S3 server (moto), one per node, whose mode the lab switches at run
//! time:
//!
//! - `Pass`: every request is forwarded.
//! - `Hold` (a partition): requests wait in the proxy until the mode
//!   changes, then go on (a request delivered late, perhaps after its
//!   sender gave up on it, as after a real partition heals).
//! - `Outage`: every request is answered `503 ServiceUnavailable` without
//!   being forwarded.
//! - `Gap`: one LTX upload fails every time, later ones land.
//! - `Flaky`: a fraction of `PUT`s (all, or only LTX uploads) fail, each
//!   answered late: most are answered `503` without being forwarded
//!   (provably not applied), some are forwarded and then answered `500`
//!   (applied, but the sender is told it failed: an ambiguous outcome it
//!   must reconcile).
//!
//! Each request goes upstream on its own connection (`Connection: close`);
//! the node's side keeps its connections alive. Writes (anything but GET and
//! HEAD) are forwarded one at a time across all proxies of one server:
//! moto's conditional writes are not atomic under races, and the lab must
//! not blame cellhost for moto's check-then-write.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
  Pass,
  Hold,
  Outage,
  Flaky {
    /// PUTs answered 503 without being forwarded, per mille.
    fail_permille: u64,
    /// PUTs forwarded, then answered 500, per mille.
    ambiguous_permille: u64,
    /// Only PUTs of LTX files (transactions), not lease or ownership
    /// records: uploads fail while the node keeps its lease and its cells.
    ltx_only: bool,
    /// Each affected PUT is answered this much later (the next turns of the
    /// object commit while its upload is still out).
    delay_ms: u64,
  },
  /// The first LTX upload (`PUT …/ltx/…`) after the mode is set fails
  /// every time it is tried, so it fails for good past the client's
  /// retries; every other request goes through: a gap in a cell's chain
  /// with later transactions landing above it.
  Gap,
}

#[derive(Default, Debug)]
pub struct Stats {
  pub requests: AtomicU64,
  pub held: AtomicU64,
  pub refused: AtomicU64,
  pub failed_puts: AtomicU64,
  pub ambiguous_puts: AtomicU64,
}

struct Shared {
  mode: Mutex<Mode>,
  changed: Condvar,
  upstream: SocketAddr,
  serial: Arc<Mutex<()>>,
  rng: Mutex<Rng>,
  stats: Stats,
  /// `Gap`: the upload that fails.
  gap: Mutex<Option<String>>,
}

pub struct Proxy {
  pub addr: SocketAddr,
  shared: Arc<Shared>,
}

impl Proxy {
  /// A proxy to `upstream`; `serial` is shared by every proxy of one server.
  pub fn start(upstream: SocketAddr, serial: Arc<Mutex<()>>, rng: Rng) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let shared = Arc::new(Shared {
      mode: Mutex::new(Mode::Pass),
      changed: Condvar::new(),
      upstream,
      serial,
      rng: Mutex::new(rng),
      stats: Stats::default(),
      gap: Mutex::new(None),
    });
    let s = shared.clone();
    std::thread::spawn(move || {
      for conn in listener.incoming().map_while(Result::ok) {
        let s = s.clone();
        std::thread::spawn(move || {
          let _ = serve(&s, conn);
        });
      }
    });
    Proxy { addr, shared }
  }

  pub fn set(&self, mode: Mode) {
    *self.shared.gap.lock().unwrap() = None;
    *self.shared.mode.lock().unwrap() = mode;
    self.shared.changed.notify_all();
  }

  pub fn stats(&self) -> &Stats {
    &self.shared.stats
  }

  pub fn endpoint(&self) -> String {
    format!("http://{}", self.addr)
  }
}

enum Action {
  Forward,
  Refuse(&'static str),
  ForwardThenFail,
}

struct Request {
  method: String,
  target: String,
  headers: Vec<(String, String)>,
  body: Vec<u8>,
}

fn serve(s: &Shared, conn: TcpStream) -> std::io::Result<()> {
  conn.set_nodelay(true)?;
  let mut out = conn.try_clone()?;
  let mut r = BufReader::new(conn);
  while let Some(req) = read_request(&mut r, &mut out)? {
    s.stats.requests.fetch_add(1, Ordering::Relaxed);
    let (action, delay) = decide(s, &req.method, &req.target);
    std::thread::sleep(delay);
    let resp = match action {
      Action::Refuse(why) => error_response(503, "ServiceUnavailable", why),
      Action::Forward => forward(s, &req),
      Action::ForwardThenFail => {
        let _ = forward(s, &req);
        error_response(
          500,
          "InternalError",
          "fault lab: applied, answered as failed",
        )
      }
    };
    out.write_all(&resp)?;
  }
  Ok(())
}

fn decide(s: &Shared, method: &str, target: &str) -> (Action, Duration) {
  let none = Duration::ZERO;
  let mut mode = s.mode.lock().unwrap();
  let mut counted = false;
  loop {
    match *mode {
      Mode::Hold => {
        if !counted {
          s.stats.held.fetch_add(1, Ordering::Relaxed);
          counted = true;
        }
        mode = s.changed.wait(mode).unwrap();
      }
      Mode::Pass => return (Action::Forward, none),
      Mode::Gap => {
        if method != "PUT" || !target.contains("/ltx/") {
          return (Action::Forward, none);
        }
        let mut gap = s.gap.lock().unwrap();
        if gap.get_or_insert_with(|| target.to_string()) == target {
          s.stats.failed_puts.fetch_add(1, Ordering::Relaxed);
          return (Action::Refuse("fault lab: this upload always fails"), none);
        }
        return (Action::Forward, none);
      }
      Mode::Outage => {
        s.stats.refused.fetch_add(1, Ordering::Relaxed);
        return (Action::Refuse("fault lab: store outage"), none);
      }
      Mode::Flaky {
        fail_permille,
        ambiguous_permille,
        ltx_only,
        delay_ms,
      } => {
        if method != "PUT" || (ltx_only && !target.contains("/ltx/")) {
          return (Action::Forward, none);
        }
        let roll = s.rng.lock().unwrap().below(1000);
        let delay = Duration::from_millis(delay_ms);
        if roll < fail_permille {
          s.stats.failed_puts.fetch_add(1, Ordering::Relaxed);
          return (Action::Refuse("fault lab: flaky upload"), delay);
        }
        if roll < fail_permille + ambiguous_permille {
          s.stats.ambiguous_puts.fetch_add(1, Ordering::Relaxed);
          return (Action::ForwardThenFail, delay);
        }
        return (Action::Forward, delay);
      }
    }
  }
}

fn read_request(
  r: &mut BufReader<TcpStream>,
  out: &mut TcpStream,
) -> std::io::Result<Option<Request>> {
  let mut line = String::new();
  if r.read_line(&mut line)? == 0 {
    return Ok(None);
  }
  let mut parts = line.split_whitespace();
  let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
    return Ok(None);
  };
  let (method, target) = (method.to_string(), target.to_string());
  let mut headers = Vec::new();
  loop {
    let mut l = String::new();
    if r.read_line(&mut l)? == 0 {
      return Ok(None);
    }
    let l = l.trim_end();
    if l.is_empty() {
      break;
    }
    if let Some((k, v)) = l.split_once(':') {
      headers.push((k.trim().to_string(), v.trim().to_string()));
    }
  }
  let has = |name: &str, val: &str| {
    headers
      .iter()
      .any(|(k, v)| k.eq_ignore_ascii_case(name) && v.to_ascii_lowercase().contains(val))
  };
  if has("expect", "100-continue") {
    out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
  }
  let body = if has("transfer-encoding", "chunked") {
    let mut body = Vec::new();
    loop {
      let mut size = String::new();
      r.read_line(&mut size)?;
      let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
        .map_err(std::io::Error::other)?;
      if n == 0 {
        // Trailers, then the empty line.
        loop {
          let mut t = String::new();
          if r.read_line(&mut t)? == 0 || t.trim().is_empty() {
            break;
          }
        }
        break;
      }
      let mut chunk = vec![0; n + 2];
      r.read_exact(&mut chunk)?;
      body.extend_from_slice(&chunk[..n]);
    }
    body
  } else {
    let len = headers
      .iter()
      .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
      .and_then(|(_, v)| v.parse().ok())
      .unwrap_or(0usize);
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    body
  };
  Ok(Some(Request {
    method,
    target,
    headers,
    body,
  }))
}

const HOP: [&str; 5] = [
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "expect",
];

fn forward(s: &Shared, req: &Request) -> Vec<u8> {
  let _serial = (req.method != "GET" && req.method != "HEAD").then(|| s.serial.lock().unwrap());
  match forward_once(s.upstream, req) {
    Ok(resp) => resp,
    Err(e) => error_response(502, "BadGateway", &format!("fault lab proxy: {e}")),
  }
}

fn forward_once(upstream: SocketAddr, req: &Request) -> std::io::Result<Vec<u8>> {
  let mut up = TcpStream::connect_timeout(&upstream, Duration::from_secs(5))?;
  up.set_read_timeout(Some(Duration::from_secs(60)))?;
  let mut head = format!("{} {} HTTP/1.1\r\n", req.method, req.target);
  for (k, v) in &req.headers {
    if !HOP.iter().any(|h| k.eq_ignore_ascii_case(h)) {
      head.push_str(&format!("{k}: {v}\r\n"));
    }
  }
  head.push_str(&format!(
    "Content-Length: {}\r\nConnection: close\r\n\r\n",
    req.body.len()
  ));
  up.write_all(head.as_bytes())?;
  up.write_all(&req.body)?;
  let mut raw = Vec::new();
  up.read_to_end(&mut raw)?;
  // Skip any interim (1xx) responses.
  let mut raw = &raw[..];
  loop {
    let end = raw
      .windows(4)
      .position(|w| w == b"\r\n\r\n")
      .ok_or_else(|| std::io::Error::other("truncated response"))?;
    let status: u16 = std::str::from_utf8(&raw[..end])
      .ok()
      .and_then(|h| h.split(' ').nth(1))
      .and_then(|c| c.parse().ok())
      .ok_or_else(|| std::io::Error::other("bad status line"))?;
    if (100..200).contains(&status) {
      raw = &raw[end + 4..];
      continue;
    }
    break;
  }
  let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
  let head = std::str::from_utf8(&raw[..end]).map_err(std::io::Error::other)?;
  let mut lines = head.split("\r\n");
  let status_line = lines.next().unwrap_or_default();
  let rest = status_line.split_once(' ').map(|x| x.1).unwrap_or("502");
  let status: u16 = rest
    .split(' ')
    .next()
    .unwrap_or("502")
    .parse()
    .unwrap_or(502);
  let headers: Vec<(&str, &str)> = lines
    .filter_map(|l| l.split_once(':'))
    .map(|(k, v)| (k.trim(), v.trim()))
    .collect();
  let chunked = headers
    .iter()
    .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
  let mut body = raw[end + 4..].to_vec();
  if chunked {
    body = dechunk(&body).ok_or_else(|| std::io::Error::other("bad chunked body"))?;
  }
  let no_body = req.method == "HEAD" || status == 204 || status == 304;
  let mut out = format!("HTTP/1.1 {rest}\r\n");
  for (k, v) in &headers {
    let keep_length = no_body && k.eq_ignore_ascii_case("content-length");
    if keep_length || !HOP.iter().any(|h| k.eq_ignore_ascii_case(h)) {
      out.push_str(&format!("{k}: {v}\r\n"));
    }
  }
  if no_body {
    out.push_str("\r\n");
    return Ok(out.into_bytes());
  }
  out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
  let mut out = out.into_bytes();
  out.extend_from_slice(&body);
  Ok(out)
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
  let mut out = Vec::new();
  loop {
    let line_end = data.windows(2).position(|w| w == b"\r\n")?;
    let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
    let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
    data = &data[line_end + 2..];
    if size == 0 {
      return Some(out);
    }
    out.extend_from_slice(data.get(..size)?);
    data = data.get(size + 2..)?;
  }
}

fn error_response(status: u16, code: &str, message: &str) -> Vec<u8> {
  let body = format!(
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"
  );
  let reason = match status {
    500 => "Internal Server Error",
    502 => "Bad Gateway",
    _ => "Service Unavailable",
  };
  format!(
    "HTTP/1.1 {status} {reason}\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{body}",
    body.len()
  )
  .into_bytes()
}

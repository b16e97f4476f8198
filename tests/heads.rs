//! Malformed request heads over TCP against a running `cellhost run`: whatever bytes a client
//! sends, the server answers with a well-formed response or closes the connection, never
//! hangs, never hands the Worker a URL it cannot parse (that would be a 500), and keeps
//! serving. A property test over raw bytes built from HTTP/1 pieces and then mutated; CI runs
//! the default case count, `PROPTEST_CASES=N` more (scripts/fuzz.sh heads). The
//! `http_head` cargo-fuzz target (fuzz/) covers hyper's parser and head.rs in-process.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use support::*;

/// Touches everything a request brings: the URL (must parse), method, headers, body.
const WORKER: &str = r#"export default {
  async fetch(request) {
    const url = new URL(request.url);
    let n = 0;
    for (const [k, v] of request.headers) n += k.length + v.length;
    let body = -1;
    try { body = (await request.arrayBuffer()).byteLength; } catch {}
    return new Response(`${request.method} ${url.host} ${url.pathname}${url.search} ${n} ${body}\n`);
  },
};
"#;

fn server() -> &'static Cellhost {
  static SERVER: OnceLock<Cellhost> = OnceLock::new();
  SERVER.get_or_init(|| {
    let d = std::env::temp_dir().join(format!("cellhost-heads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let main: PathBuf = d.join("worker.js");
    std::fs::write(&main, WORKER).unwrap();
    let data = d.join(".data");
    let ch = Cellhost::start(
      &main,
      &["--isolates", "2", "--data", data.to_str().unwrap()],
    );
    // A static is never dropped: stop the server when the test process exits.
    SERVER_PID.store(ch.child.id(), std::sync::atomic::Ordering::SeqCst);
    // SAFETY: registers a plain C callback that only sends a signal.
    unsafe { libc::atexit(stop_server) };
    ch
  })
}

static SERVER_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn stop_server() {
  let pid = SERVER_PID.load(std::sync::atomic::Ordering::SeqCst);
  if pid != 0 {
    // SAFETY: signals the child this process started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
  }
}

/// Sends `raw` and reads what comes back. hyper closes a connection when its client
/// half-closes (dropping a response still being made), so the write side is only shut once
/// the server has gone quiet: 300 ms with nothing read (a head or body it still waits for), or
/// 50 ms after an answer on a connection kept alive. `None`: the server did not close within
/// 20 s after that (it hung).
fn exchange(addr: SocketAddr, raw: &[u8]) -> Option<Vec<u8>> {
  let mut s = TcpStream::connect(addr).unwrap();
  // The server may close before reading everything (a 400): that is an answer.
  let _ = s.write_all(raw);
  let mut out = Vec::new();
  let mut buf = [0u8; 64 << 10];
  let mut shut = false;
  let deadline = std::time::Instant::now() + Duration::from_secs(20);
  loop {
    let quiet = if shut {
      Duration::from_secs(20)
    } else if out.is_empty() {
      Duration::from_millis(300)
    } else {
      Duration::from_millis(50)
    };
    s.set_read_timeout(Some(quiet)).unwrap();
    match s.read(&mut buf) {
      Ok(0) => return Some(out),
      Ok(n) => out.extend_from_slice(&buf[..n]),
      Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
        if shut {
          return None;
        }
        let _ = s.shutdown(Shutdown::Write);
        shut = true;
      }
      Err(_) => return Some(out), // reset: the server closed first
    }
    if std::time::Instant::now() > deadline {
      return None;
    }
  }
}

/// Status codes of the responses in `raw` (interim 1xx included), as far as they parse.
fn statuses(raw: &[u8]) -> Vec<u16> {
  let text = String::from_utf8_lossy(raw);
  text
    .match_indices("HTTP/1.")
    .filter(|(i, _)| *i == 0 || text[..*i].ends_with('\n'))
    .filter_map(|(i, _)| text[i..].split(' ').nth(1)?.get(..3)?.parse().ok())
    .collect()
}

fn get_ok(addr: SocketAddr) {
  let r = request(addr, "GET", "/alive?x=1", &[], b"").expect("the server stopped serving");
  assert_eq!(r.status, 200, "{}", r.text());
  assert!(r.text().starts_with("GET "), "{}", r.text());
  assert!(r.text().contains(" /alive?x=1 "), "{}", r.text());
}

/// Requests built from HTTP/1 pieces, mostly valid (so most reach the Worker), then a few
/// byte edits in some of them.
fn head() -> impl Strategy<Value = Vec<u8>> {
  fn pick(items: &[&'static str]) -> BoxedStrategy<Vec<u8>> {
    prop::sample::select(items.to_vec())
      .prop_map(|s| s.as_bytes().to_vec())
      .boxed()
  }
  let bytes = |n| prop::collection::vec(any::<u8>(), 0..n);
  let method = prop_oneof![
    8 => pick(&["GET", "POST", "PUT", "HEAD", "OPTIONS", "DELETE", "PATCH", "CONNECT", "TRACE"]),
    1 => pick(&["", "get", "G ET", "GET\0", "\u{ff}", "X-CUSTOM"]),
    1 => bytes(8),
  ];
  let target = prop_oneof![
    6 => "/[a-zA-Z0-9/?%.:@!$&'()*+,;=~-]{0,24}".prop_map(String::into_bytes),
    1 => "/[a-zA-Z0-9/?#%.:@!$&'()*+,;=~\\[\\]{}|\\\\^`\"-]{0,24}".prop_map(String::into_bytes),
    2 => pick(&["*", "http://other/abs?q", "h:443", "//x/y", "/%", "/%zz", "/a/../../b", ""]),
    1 => bytes(16),
  ];
  let version = prop_oneof![
    6 => pick(&["HTTP/1.1"]),
    1 => pick(&["HTTP/1.0", "HTTP/2.0", "http/1.1", "HTTP/1.1 ", "", "HTTP/1.10"]),
  ];
  let host = prop_oneof![
    6 => pick(&["h", "example.com:8787", "[::1]", "127.0.0.1:80", "xn--bcher-kva.example", "h:"]),
    2 => pick(&[
      "", "a/b?", "x y", "evil@good", "a#b", "a:99999", "a\\b", "\u{e9}", "h, h", "[::1", "xn--a",
    ]),
    1 => bytes(12),
  ];
  let name = prop_oneof![
    6 => pick(&[
      "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Sec-WebSocket-Key",
      "Expect", "X-A", "Cookie", "Accept",
    ]),
    1 => pick(&["Host", "", " X", "X ", "a b", "a:b", "\u{e9}"]),
    1 => "[!-~]{1,12}".prop_map(String::into_bytes),
  ];
  let value = prop_oneof![
    6 => pick(&[
      "", "h", "0", "3", "-1", "18446744073709551616", "1, 2", "3, 3", "chunked",
      "gzip, chunked", "chunked, gzip", "close", "keep-alive", "upgrade", "websocket",
      "dGhlIHNhbXBsZSBub25jZQ==", "100-continue", "\u{e9}", "\u{0}", "\t", "a\r\n b",
    ]),
    2 => bytes(24),
    1 => (1usize..20_000).prop_map(|n| vec![b'a'; n]),
  ];
  let eol = prop_oneof![6 => pick(&["\r\n"]), 1 => pick(&["\n", "\r"])];
  let body = prop_oneof![
    pick(&["", "abc", "3\r\nabc\r\n0\r\n\r\n", "zz\r\n", "0\r\n\r\n"]),
    bytes(32),
  ];
  let edit = (any::<prop::sample::Index>(), 0u8..3, any::<u8>());
  (
    (method, target, version),
    prop::option::weighted(0.9, host),
    prop::collection::vec(
      prop_oneof![
        3 => (
          pick(&["X-A", "Accept", "Cookie", "User-Agent", "Content-Type"]),
          "[ -~]{0,20}".prop_map(String::into_bytes),
        ),
        1 => (name, value),
      ],
      0..5,
    ),
    eol,
    body,
    prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(edit, 1..4)],
  )
    .prop_map(
      |((method, target, version), host, headers, eol, body, edits)| {
        let mut raw = Vec::new();
        raw.extend(&method);
        raw.push(b' ');
        raw.extend(&target);
        raw.push(b' ');
        raw.extend(&version);
        raw.extend(&eol);
        let host = host.map(|h| (b"Host".to_vec(), h));
        for (k, v) in host.into_iter().chain(headers) {
          raw.extend(k);
          raw.extend(b": ");
          raw.extend(v);
          raw.extend(&eol);
        }
        raw.extend(&eol);
        raw.extend(body);
        // Byte edits anywhere: replace, insert, delete.
        for (at, op, b) in edits {
          let i = at.index(raw.len() + 1);
          match op {
            0 if i < raw.len() => raw[i] = b,
            1 => raw.insert(i, b),
            _ if i < raw.len() => {
              raw.remove(i);
            }
            _ => {}
          }
        }
        raw
      },
    )
}

/// Cases: `PROPTEST_CASES`, else 64 (each case is a connection or two; a case the server
/// waits on costs 300 ms).
fn config() -> ProptestConfig {
  let cases = std::env::var("PROPTEST_CASES")
    .ok()
    .and_then(|c| c.parse().ok());
  ProptestConfig::with_cases(cases.unwrap_or(64))
}

proptest! {
  #![proptest_config(config())]

  #[test]
  fn malformed_heads_never_crash_hang_or_reach_the_worker_unparsed(raw in head()) {
    let ch = server();
    let Some(answer) = exchange(ch.addr, &raw) else {
      return Err(TestCaseError::fail(format!(
        "no answer within 20 s to {:?}", String::from_utf8_lossy(&raw)
      )));
    };
    let codes = statuses(&answer);
    prop_assert!(
      !codes.contains(&500),
      "500 for {:?}:\n{}\nlog:\n{}",
      String::from_utf8_lossy(&raw),
      String::from_utf8_lossy(&answer),
      ch.log()
    );
    prop_assert!(codes.iter().all(|c| (100..600).contains(c)), "{codes:?}");
    prop_assert!(ch.log().lines().all(|l| !l.contains("panicked")), "{}", ch.log());
    if std::env::var_os("HEADS_VERBOSE").is_some() {
      eprintln!("{codes:?} {:?}", String::from_utf8_lossy(&raw[..raw.len().min(60)]));
    }
    get_ok(ch.addr);
  }
}

/// Found by the property above (examples/hello answered 500 to `Host: x y`) and by the
/// `http_head` properties: the Host header was pasted into the URL as it came, so it could
/// move the Worker's path (`Host: a/b?` made the path `/b`; an empty Host made the first path
/// segment the host) or make a URL `new URL` refuses. Such a Host is refused with 400 (RFC
/// 9112 §3.2); a request without one (HTTP/1.0) is served as `localhost`.
#[test]
fn hosts_that_are_not_an_authority_are_refused_with_400() {
  let ch = server();
  for host in ["a/b?", "", "x y", "a:99999", "evil@good", "a#b", "a\\b"] {
    let raw = format!("GET /p/q?x=1 HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let answer = exchange(ch.addr, raw.as_bytes()).unwrap();
    assert_eq!(statuses(&answer), vec![400], "Host: {host:?}");
  }
  let two = b"GET /p HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
  assert_eq!(statuses(&exchange(ch.addr, two).unwrap()), vec![400]);
  let ok = exchange(
    ch.addr,
    b"GET /p/q?x=1 HTTP/1.1\r\nHost: example.com:81\r\n\r\n",
  )
  .unwrap();
  let r = parse_response(&ok).unwrap();
  assert!(
    r.text().starts_with("GET example.com:81 /p/q?x=1 "),
    "{}",
    r.text()
  );
  let old = parse_response(&exchange(ch.addr, b"GET /p HTTP/1.0\r\n\r\n").unwrap()).unwrap();
  assert!(
    old.text().starts_with("GET localhost /p "),
    "{}",
    old.text()
  );
}

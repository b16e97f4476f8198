//! What a host needs against code it did not write: request and response
//! size limits, the subrequest budget of one event, and the egress policy
//! (`--egress all|public|none`). CPU and heap limits are in tests/run.rs.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

const WORKER: &str = r#"
import { connect } from "cloudflare:sockets";
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const up = env.UPSTREAM;
    const attempt = async (f) => {
      try { return `ok ${await f()}`; } catch (e) {
        return `${e.name}: ${e.message}${e.cause ? ` (${e.cause.message ?? e.cause})` : ""}`;
      }
    };
    switch (url.pathname) {
      case "/echo-size":
        return attempt(async () => (await request.arrayBuffer()).byteLength).then((t) => new Response(t));
      case "/big-headers": {
        const h = new Headers();
        for (let i = 0; i < 200; i++) h.set(`x-h${i}`, "v".repeat(1000));
        return new Response("many headers", { headers: h });
      }
      case "/subrequests": {
        const n = Number(url.searchParams.get("n"));
        const out = [];
        for (let i = 0; i < n; i++) {
          out.push(await attempt(async () => (await fetch(`${up}/s${i}`)).status));
        }
        // The budget follows the event into later tasks too.
        await new Promise((r) => setTimeout(r, 10));
        out.push(await attempt(async () => (await fetch(`${up}/late`)).status));
        return new Response(out.join("\n"));
      }
      case "/fan-out": {
        const to = url.searchParams.get("to");
        const all = await Promise.all(Array.from({ length: 20 }, (_, i) => fetch(`${to}/f${i}`).then((r) => r.text())));
        return new Response(`${all.length} answered`);
      }
      case "/fetch":
        return attempt(async () => (await fetch(url.searchParams.get("to"))).status).then((t) => new Response(t));
      case "/connect":
        return attempt(async () => {
          const s = connect(url.searchParams.get("to"));
          await s.opened;
          await s.close();
          return "open";
        }).then((t) => new Response(t));
      case "/connect-budget": {
        const out = [];
        for (let i = 0; i < 4; i++) {
          out.push(await attempt(async () => {
            const s = connect(url.searchParams.get("to"));
            await s.opened;
            await s.close();
            return "open";
          }));
        }
        return new Response(out.join("\n"));
      }
      case "/connect-slots": {
        // Eight sockets at once: six open, the rest wait for a slot.
        const socks = Array.from({ length: 8 }, () => connect(url.searchParams.get("to")));
        let opened = 0;
        for (const s of socks) s.opened.then(() => opened++);
        await new Promise((r) => setTimeout(r, 300));
        const first = opened;
        await Promise.all(socks.slice(0, 2).map((s) => s.close()));
        await new Promise((r) => setTimeout(r, 300));
        const then = opened;
        await Promise.all(socks.map((s) => s.close()));
        return new Response(`${first} then ${then}`);
      }
      case "/ws":
        return attempt(() => new Promise((resolve, reject) => {
          const ws = new WebSocket(url.searchParams.get("to"));
          ws.addEventListener("open", () => { ws.close(); resolve("open"); });
          ws.addEventListener("error", (e) => reject(new Error(e.message ?? "error")));
        })).then((t) => new Response(t));
    }
    return new Response("?", { status: 404 });
  },
};
"#;

fn start(tag: &str, extra: &[&str]) -> (Cellhost, std::net::SocketAddr) {
  let up = upstream();
  let d = project(
    tag,
    WORKER,
    &format!("[vars]\nUPSTREAM = \"http://{up}\"\n"),
  );
  let data = d.join(".data");
  let mut args = vec!["--data", data.to_str().unwrap()];
  args.extend_from_slice(extra);
  (Cellhost::start(&d, &args), up)
}

/// Sends raw bytes and returns the status line's code.
fn raw_status(addr: std::net::SocketAddr, bytes: &[u8]) -> u16 {
  let mut s = TcpStream::connect(addr).unwrap();
  s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
  let _ = s.write_all(bytes);
  let mut out = Vec::new();
  let _ = s.read_to_end(&mut out);
  let text = String::from_utf8_lossy(&out);
  text
    .split(' ')
    .nth(1)
    .and_then(|c| c.parse().ok())
    .unwrap_or_else(|| panic!("no status in {text:?}"))
}

#[test]
fn request_and_response_sizes_are_bounded() {
  let (ch, _) = start("sizes", &["--max-body-mb", "1"]);
  // A head over 128 KiB is refused before the Worker runs.
  let big = format!(
    "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
    "a".repeat(140 << 10)
  );
  assert_eq!(raw_status(ch.addr, big.as_bytes()), 431);
  // A declared body over the limit: 413, without reading it.
  let declared =
    b"POST /echo-size HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\nConnection: close\r\n\r\n";
  assert_eq!(raw_status(ch.addr, declared), 413);
  // Within the limit it reaches the Worker whole.
  let body = vec![b'x'; 512 << 10];
  let r = request(ch.addr, "POST", "/echo-size", &[], &body).unwrap();
  assert_eq!(r.text(), format!("ok {}", 512 << 10));
  // A chunked body is cut off where it passes the limit: the read fails.
  let mut chunked =
    b"POST /echo-size HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      .to_vec();
  for _ in 0..24 {
    chunked.extend_from_slice(format!("{:x}\r\n", 100 << 10).as_bytes());
    chunked.extend_from_slice(&vec![b'y'; 100 << 10]);
    chunked.extend_from_slice(b"\r\n");
  }
  chunked.extend_from_slice(b"0\r\n\r\n");
  let mut s = TcpStream::connect(ch.addr).unwrap();
  s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
  let _ = s.write_all(&chunked);
  let mut out = Vec::new();
  let _ = s.read_to_end(&mut out);
  let r = parse_response(&out).expect("a response");
  assert!(
    !r.text().starts_with("ok "),
    "a body over the limit was read whole: {}",
    r.text()
  );
  // Response headers over 128 KiB turn into a 500.
  let r = get(ch.addr, "/big-headers");
  assert_eq!(r.status, 500);
}

#[test]
fn an_event_has_a_subrequest_budget() {
  let (ch, up) = start("subrequests", &["--max-subrequests", "3"]);
  let r = get(ch.addr, "/subrequests?n=3");
  assert_eq!(
    r.text(),
    "ok 200\nok 200\nok 200\nError: Too many subrequests.",
    "the fourth, in a later task, is over the budget"
  );
  // connect() spends from the same budget.
  let r = get(ch.addr, &format!("/connect-budget?to={up}"));
  assert_eq!(
    r.text(),
    "ok open\nok open\nok open\nError: Too many subrequests."
  );
  // Each request has its own budget.
  let r = get(ch.addr, "/subrequests?n=2");
  assert_eq!(r.text(), "ok 200\nok 200\nok 200");
}

/// This machine's host name, which resolves to a loopback or private
/// address (as /etc/hosts has it on the machines the tests run on).
fn local_name() -> String {
  use std::net::ToSocketAddrs;
  let out = std::process::Command::new("hostname").output().unwrap();
  let name = String::from_utf8(out.stdout).unwrap().trim().to_string();
  let addrs: Vec<_> = (name.as_str(), 80).to_socket_addrs().unwrap().collect();
  assert!(
    addrs.iter().all(|a| match a.ip() {
      std::net::IpAddr::V4(v) => v.is_loopback() || v.is_private(),
      std::net::IpAddr::V6(v) => v.is_loopback(),
    }),
    "{name} resolves to {addrs:?}"
  );
  name
}

#[test]
fn egress_policy_none_and_public() {
  let (ch, up) = start("egress-none", &["--egress", "none"]);
  let t = get(ch.addr, &format!("/fetch?to=http://{up}/")).text();
  assert!(t.contains("egress") && t.contains("refused"), "{t}");
  let t = get(ch.addr, &format!("/connect?to={up}")).text();
  assert!(
    t.contains("egress") && t.contains("refused"),
    "connect(): {t}"
  );
  drop(ch);
  let (ch, up) = start("egress-public", &["--egress", "public"]);
  let port = up.port();
  for to in [
    format!("http://{up}/"),
    format!("http://localhost:{port}/"),
    format!("http://[::1]:{port}/"),
    format!("http://169.254.169.254:{port}/"),
    format!("http://10.0.0.1:{port}/"),
    // A name only the resolver knows to be loopback (this machine's name).
    format!("http://{}:{port}/", local_name()),
  ] {
    let t = get(ch.addr, &format!("/fetch?to={to}")).text();
    assert!(t.contains("egress") && t.contains("refused"), "{to}: {t}");
  }
  let t = get(ch.addr, &format!("/ws?to=ws://{up}/")).text();
  assert!(t.contains("refused"), "WebSocket client: {t}");
  for to in [
    format!("{up}"),
    format!("localhost:{port}"),
    format!("[::1]:{port}"),
  ] {
    let t = get(ch.addr, &format!("/connect?to={to}")).text();
    assert!(
      t.contains("egress") && t.contains("refused"),
      "connect({to}): {t}"
    );
  }
  drop(ch);
  // The default reaches loopback, as wrangler dev does.
  let (ch, up) = start("egress-all", &[]);
  assert_eq!(
    get(ch.addr, &format!("/fetch?to=http://{up}/")).text(),
    "ok 200"
  );
  assert_eq!(get(ch.addr, &format!("/connect?to={up}")).text(), "ok open");
  // Sockets hold one of the event's six connection slots until they close.
  assert_eq!(
    get(ch.addr, &format!("/connect-slots?to={up}")).text(),
    "6 then 8"
  );
}

/// A loopback server that holds each request 100 ms and records how many
/// it held at once.
fn slow_upstream() -> (
  std::net::SocketAddr,
  std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
  use std::io::BufRead;
  use std::sync::Arc;
  use std::sync::atomic::{AtomicUsize, Ordering};
  let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
  let addr = l.local_addr().unwrap();
  let (now, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
  let seen = max.clone();
  std::thread::spawn(move || {
    for s in l.incoming().map_while(Result::ok) {
      let (now, max) = (now.clone(), max.clone());
      std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut s = s;
        loop {
          let mut line = String::new();
          if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
          }
          if line == "\r\n" {
            break;
          }
        }
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        now.fetch_sub(1, Ordering::SeqCst);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
      });
    }
  });
  (addr, seen)
}

#[test]
fn an_event_keeps_at_most_six_connections_open_and_queues_the_rest() {
  let (ch, _) = start("fan-out", &[]);
  let (slow, max) = slow_upstream();
  let t = std::time::Instant::now();
  let r = get(ch.addr, &format!("/fan-out?to=http://{slow}"));
  assert_eq!(r.text(), "20 answered");
  let most = max.load(std::sync::atomic::Ordering::SeqCst);
  assert!((2..=6).contains(&most), "{most} requests were open at once");
  // Twenty requests, six at a time, 100 ms each: at least four rounds.
  assert!(
    t.elapsed() >= Duration::from_millis(350),
    "{:?}",
    t.elapsed()
  );
}

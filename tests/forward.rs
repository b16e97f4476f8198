//! Forwarding between fleet nodes, as real processes on one bucket: a
//! `stub.fetch()` (streaming bodies both ways), an RPC call and a WebSocket
//! upgrade for a cell another node owns are served by that owner; stubs
//! and RpcTargets refuse to cross nodes by name; the internal listener
//! refuses calls without the fleet secret; a forwarded call whose owner
//! dies mid-call is answered 503 with Retry-After and is not replayed; and
//! the same on S3 through moto.

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;
mod support;

use std::time::{Duration, Instant};

use support::*;
use tokio_tungstenite::tungstenite::{Message, connect};

const WORKER: &str = r#"
import { DurableObject, RpcTarget } from "cloudflare:workers";
class Target extends RpcTarget { hello() { return "hi"; } }
export class Obj extends DurableObject {
  bump() {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS c (n INTEGER)");
    sql.exec("INSERT INTO c VALUES (1)");
    return sql.exec("SELECT count(*) AS n FROM c").one().n;
  }
  count() {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS c (n INTEGER)");
    sql.exec("CREATE TABLE IF NOT EXISTS attempts (n INTEGER)");
    return `${sql.exec("SELECT count(*) AS n FROM c").one().n}/${sql.exec("SELECT count(*) AS n FROM attempts").one().n}`;
  }
  async slow() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS attempts (n INTEGER)");
    this.ctx.storage.sql.exec("INSERT INTO attempts VALUES (1)");
    await new Promise((r) => setTimeout(r, 3000));
    return "slow done";
  }
  target() { return new Target(); }
  callMe(f) { return typeof f; }
  async fetch(req) {
    if (req.headers.get("upgrade") === "websocket") {
      const [client, server] = Object.values(new WebSocketPair());
      server.accept();
      server.addEventListener("message", (e) => server.send(`pong:${e.data}:${this.bump()}`));
      return new Response(null, { status: 101, webSocket: client });
    }
    const body = await req.text();
    return new Response(`${req.method} ${new URL(req.url).pathname} x=${req.headers.get("x-test")} len=${body.length} n=${this.bump()}`, {
      status: 201,
      headers: { "x-from-object": "yes" },
    });
  }
}
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const stub = env.OBJ.getByName(u.searchParams.get("name") ?? "x");
    switch (u.pathname) {
      case "/bump": return new Response(String(await stub.bump()));
      case "/count": return new Response(await stub.count());
      case "/slow": return new Response(await stub.slow());
      case "/slowcaught":
        try { return new Response(await stub.slow()); }
        catch (e) { return new Response(`retryable=${e.retryable} overloaded=${e.overloaded} reset=${e.durableObjectReset ?? false}`); }
      case "/target":
        try { return new Response(await (await stub.target()).hello()); }
        catch (e) { return new Response(`${e.name}: ${e.message}`); }
      case "/callback":
        try { return new Response(await stub.callMe(() => 1)); }
        catch (e) { return new Response(`${e.name}: ${e.message}`); }
      default: return stub.fetch(req);
    }
  },
};
"#;

/// Nodes of `WORKER` on one bucket.
type Nodes = Bucketed;

fn nodes(tag: &str) -> Nodes {
  let tag = format!("forward-{tag}");
  let worker = project(&tag, WORKER, OBJ_BINDING);
  Bucketed::new(&tag, worker)
}

/// The internal address a node advertised (from its log line).
fn internal_address(ch: &Cellhost) -> String {
  assert!(ch.wait_log("forwarded calls are taken on ", Duration::from_secs(5)));
  let log = ch.log();
  let at =
    log.find("forwarded calls are taken on ").unwrap() + "forwarded calls are taken on ".len();
  log[at..].split_whitespace().next().unwrap().to_string()
}

fn text(ch: &Cellhost, path: &str) -> String {
  let r = get(ch.addr, path);
  assert_eq!(r.status, 200, "{path}: {} {}", r.text(), ch.log());
  r.text()
}

/// The calls of the first test, on any bucket.
fn forwards_every_kind_of_call(a: &Cellhost, b: &Cellhost) {
  // a takes the cell; b forwards to it, and the count goes on as one.
  assert_eq!(text(a, "/bump"), "1");
  assert_eq!(text(b, "/bump"), "2", "{}", b.log());
  assert_eq!(text(a, "/bump"), "3");
  assert_eq!(text(b, "/bump"), "4");
  // stub.fetch(): method, path, headers and a body there; status, headers
  // and a body back.
  let r = request(
    b.addr,
    "POST",
    "/echo?name=x",
    &[("x-test", "t1")],
    b"abcdef",
  )
  .unwrap();
  assert_eq!(r.status, 201, "{}", r.text());
  assert_eq!(r.header("x-from-object"), Some("yes"));
  assert_eq!(r.text(), "POST /echo x=t1 len=6 n=5");
  // A 2 MiB body streams through.
  let big = vec![b'z'; 2 << 20];
  let r = request(b.addr, "PUT", "/big?name=x", &[], &big).unwrap();
  assert_eq!(r.text(), format!("PUT /big x=null len={} n=6", 2 << 20));
  // Stubs and RpcTargets do not cross nodes, and say so.
  for path in ["/target", "/callback"] {
    let t = text(b, path);
    assert!(
      t.starts_with(
        "DataCloneError: An RPC stub or RpcTarget cannot be passed between cellhost fleet nodes"
      ),
      "{path}: {t}"
    );
  }
  // On the owner itself they work.
  assert_eq!(text(a, "/target"), "hi");
  assert_eq!(text(a, "/callback"), "function");
  // A WebSocket upgrade through b is proxied frame by frame to a.
  let (mut ws, resp) = connect(format!("ws://{}/ws?name=x", b.addr)).expect("connect");
  assert_eq!(resp.status(), 101);
  for i in 0..3 {
    ws.send(Message::text(format!("m{i}"))).unwrap();
    let got = ws.read().unwrap();
    assert_eq!(got.to_text().unwrap(), format!("pong:m{i}:{}", 7 + i));
  }
  ws.close(None).unwrap();
  assert_eq!(text(a, "/bump"), "10");
}

#[test]
fn calls_for_a_cell_owned_elsewhere_are_served_by_its_owner() {
  let n = nodes("file");
  let a = n.run("a");
  let b = n.run("b");
  forwards_every_kind_of_call(&a, &b);
  // The internal listener takes calls with the fleet secret only.
  let addr = internal_address(&b);
  assert_eq!(h2_status(&addr, None), 403);
  assert_eq!(h2_status(&addr, Some(&"0".repeat(64))), 403);
  // The file bucket keeps a version line before the object's bytes.
  let secret = std::fs::read_to_string(n.dir.join("bucket/fleet/secret.json")).unwrap();
  let secret: serde_json::Value =
    serde_json::from_str(&secret[secret.find('{').unwrap()..]).unwrap();
  // With it, a malformed call is a 400, not a 403.
  assert_eq!(h2_status(&addr, secret["secret"].as_str()), 400);
}

#[test]
fn calls_are_forwarded_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let mut n = nodes("s3");
  (n.bucket, n.extra, n.env) = moto.cellhost_args();
  let a = n.run("a");
  let b = n.run("b");
  forwards_every_kind_of_call(&a, &b);
}

#[test]
fn a_forwarded_call_whose_owner_dies_is_refused_with_503_and_not_replayed() {
  let n = nodes("death");
  let mut a = n.run("a");
  let b = n.run("b");
  assert_eq!(text(&a, "/bump"), "1");
  let addr = b.addr;
  let slow = std::thread::spawn(move || request(addr, "GET", "/slow?name=x", &[], b"").unwrap());
  let caught =
    std::thread::spawn(move || request(addr, "GET", "/slowcaught?name=x", &[], b"").unwrap());
  // The call reached a (its attempt is committed) before a dies.
  std::thread::sleep(Duration::from_millis(1500));
  a.child.kill().unwrap();
  a.child.wait().unwrap();
  let r = slow.join().unwrap();
  assert_eq!(r.status, 503, "{} {}", r.text(), b.log());
  assert_eq!(r.header("retry-after"), Some("1"));
  // Not `x-cellhost-owner`: that one says nothing happened.
  assert_eq!(r.header("x-cellhost-owner"), None);
  assert_eq!(r.header("x-cellhost-unreachable-owner"), Some("a"));
  assert!(r.text().contains("it was not retried"), "{}", r.text());
  // Caught, it is a retryable refusal: not overload, not a reset.
  let r = caught.join().unwrap();
  assert_eq!(r.text(), "retryable=true overloaded=false reset=false");
  // Once a's lease lapsed, b takes the cell: the slow call ran once (its
  // attempt row), and was not run again by b.
  let end = Instant::now() + Duration::from_secs(20);
  let counts = loop {
    let r = get(b.addr, "/count");
    if r.status == 200 {
      break r.text();
    }
    assert!(Instant::now() < end, "b never took the cell: {}", r.text());
    std::thread::sleep(Duration::from_millis(200));
  };
  // Each slow call ran at most once: its attempt row, if committed before
  // a died, is there once.
  assert!(["1/0", "1/1", "1/2"].contains(&counts.as_str()), "{counts}");
  assert_eq!(text(&b, "/bump"), "2");
}

#[test]
fn sigterm_drains_the_calls_in_flight_then_hands_the_cells_over() {
  drains(&nodes("drain"));
}

#[test]
fn sigterm_drains_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let mut n = nodes("drain-s3");
  (n.bucket, n.extra, n.env) = moto.cellhost_args();
  drains(&n);
}

fn drains(n: &Nodes) {
  let a = n.run("a");
  let b = n.run("b");
  assert_eq!(text(&a, "/bump"), "1");
  assert_eq!(text(&b, "/bump"), "2"); // b's route to a is cached
  // A WebSocket on a, open across the drain.
  let (mut ws, _) = connect(format!("ws://{}/ws?name=x", a.addr)).expect("connect");
  ws.send(Message::text("hi")).unwrap();
  assert_eq!(ws.read().unwrap().to_text().unwrap(), "pong:hi:3");
  let addr = a.addr;
  let slow = std::thread::spawn(move || request(addr, "GET", "/slow?name=x", &[], b"").unwrap());
  std::thread::sleep(Duration::from_millis(500));
  let term = std::process::Command::new("kill")
    .args(["-TERM", &a.child.id().to_string()])
    .status()
    .unwrap();
  assert!(term.success());
  // The socket is closed at once with 1012 (Service Restart): its client
  // reconnects, through another node.
  match ws.read() {
    Ok(Message::Close(Some(f))) => {
      assert_eq!(u16::from(f.code), 1012);
      assert_eq!(f.reason.as_str(), "cellhost node restarting");
    }
    other => panic!("{other:?}"),
  }
  std::thread::sleep(Duration::from_millis(300));
  // Draining: a takes no new calls; b's forwarded one is refused (nothing
  // ran, so it names the owner), and a's port is closed.
  let r = get(b.addr, "/bump");
  assert_eq!(r.status, 503, "{}", r.text());
  assert_eq!(r.header("x-cellhost-owner"), Some("a"), "{}", r.text());
  assert!(r.text().contains("is shutting down"), "{}", r.text());
  assert!(request(a.addr, "GET", "/bump", &[], b"").is_err());
  // The call in flight finishes on a, acknowledged.
  let r = slow.join().unwrap();
  assert_eq!((r.status, r.text().as_str()), (200, "slow done"));
  let mut a = a;
  let status = a.child.wait().unwrap();
  assert_eq!(status.code(), Some(0), "{}", a.log());
  assert!(a.log().contains("drained in"), "{}", a.log());
  // The cell was released: b takes it at once, with every write.
  let t = Instant::now();
  assert_eq!(text(&b, "/count"), "3/1");
  assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
  assert_eq!(text(&b, "/bump"), "4");
}

/// The status the internal listener at `addr` answers a POST to the
/// forwarding path with (an empty body), presenting `secret`.
fn h2_status(addr: &str, secret: Option<&str>) -> u16 {
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  rt.block_on(async {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
      hyper_util::rt::TokioExecutor::new(),
      hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::post(format!("http://{addr}/_cellhost/forward"));
    if let Some(s) = secret {
      req = req.header("x-cellhost-fleet-secret", s);
    }
    let req = req
      .body(http_body_util::Empty::<bytes::Bytes>::new())
      .unwrap();
    send.send_request(req).await.unwrap().status().as_u16()
  })
}

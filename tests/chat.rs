//! The chat example driven by several WebSocket clients, and hibernation:
//! an object whose only sockets are hibernatable is evicted while they stay
//! connected, and the next frame constructs it again.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use tokio_tungstenite::tungstenite::stream::MaybeTlsStream;
use tokio_tungstenite::tungstenite::{Message, WebSocket, connect};

use support::*;

type Client = WebSocket<MaybeTlsStream<TcpStream>>;

fn join(addr: SocketAddr, path: &str) -> Client {
  let (mut ws, resp) = connect(format!("ws://{addr}{path}")).expect("connect");
  assert_eq!(resp.status().as_u16(), 101);
  if let MaybeTlsStream::Plain(s) = ws.get_mut() {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
  }
  ws
}

fn next_text(ws: &mut Client) -> String {
  loop {
    match ws.read().expect("read") {
      Message::Text(t) => return t.to_string(),
      Message::Close(f) => panic!("closed: {f:?}"),
      _ => {}
    }
  }
}

fn next_json(ws: &mut Client) -> serde_json::Value {
  serde_json::from_str(&next_text(ws)).unwrap()
}

fn send(ws: &mut Client, text: &str) {
  ws.send(Message::text(text)).unwrap();
}

fn chat_dir() -> PathBuf {
  repo_root().join("examples/chat")
}

#[test]
fn chat_room_with_several_clients() {
  let data = std::env::temp_dir().join(format!("cellhost-chat-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&data);
  let args = ["--data", data.to_str().unwrap()];
  let ch = Cellhost::start(&chat_dir(), &args);
  let path = |u: &str| format!("/room/lobby/websocket?user={u}");
  let mut ann = join(ch.addr, &path("ann"));
  assert_eq!(next_json(&mut ann)["messages"], serde_json::json!([]));
  assert_eq!(next_json(&mut ann)["users"], serde_json::json!(["ann"]));
  let mut bob = join(ch.addr, &path("bob"));
  next_json(&mut bob); // history
  assert_eq!(
    next_json(&mut bob)["users"],
    serde_json::json!(["ann", "bob"])
  );
  assert_eq!(
    next_json(&mut ann),
    serde_json::json!({"type": "joined", "user": "bob"})
  );
  let mut cy = join(ch.addr, &path("cy"));
  next_json(&mut cy);
  assert_eq!(
    next_json(&mut cy)["users"],
    serde_json::json!(["ann", "bob", "cy"])
  );
  for ws in [&mut ann, &mut bob] {
    assert_eq!(next_json(ws)["type"], "joined");
  }

  // Everyone sends at once; everyone sees all messages in one order.
  send(&mut ann, "a1");
  send(&mut bob, "b1");
  send(&mut cy, "c1");
  send(&mut ann, "a2");
  let mut seen = Vec::new();
  for ws in [&mut ann, &mut bob, &mut cy] {
    let got: Vec<(u64, String)> = (0..4)
      .map(|_| {
        let m = next_json(ws);
        assert_eq!(m["type"], "message", "{m}");
        (
          m["id"].as_u64().unwrap(),
          m["text"].as_str().unwrap().to_string(),
        )
      })
      .collect();
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{got:?}");
    seen.push(got);
  }
  assert!(seen.iter().all(|s| *s == seen[0]), "{seen:?}");
  let pos = |t: &str| seen[0].iter().position(|(_, x)| x == t).unwrap();
  assert!(
    pos("a1") < pos("a2"),
    "one sender's messages keep their order"
  );

  // Auto-response: answered without the handler (no message broadcast).
  send(&mut bob, "ping");
  assert_eq!(next_text(&mut bob), r#"{"type":"pong"}"#);

  // Leaving: the others hear of it; presence drops the name.
  cy.close(None).unwrap();
  for ws in [&mut ann, &mut bob] {
    assert_eq!(
      next_json(ws),
      serde_json::json!({"type": "quit", "user": "cy"})
    );
  }
  let mut dan = join(ch.addr, &path("dan"));
  let history = next_json(&mut dan);
  assert_eq!(history["messages"].as_array().unwrap().len(), 4);
  assert_eq!(
    next_json(&mut dan)["users"],
    serde_json::json!(["ann", "bob", "dan"])
  );
  drop((ann, bob, dan));
  drop(ch);

  // The history is durable: a restarted node serves it.
  let ch = Cellhost::start(&chat_dir(), &args);
  let mut eve = join(ch.addr, &path("eve"));
  let texts: Vec<String> = next_json(&mut eve)["messages"]
    .as_array()
    .unwrap()
    .iter()
    .map(|m| m["text"].as_str().unwrap().to_string())
    .collect();
  assert_eq!(texts.len(), 4);
  assert_eq!(
    texts,
    seen[0].iter().map(|(_, t)| t.clone()).collect::<Vec<_>>()
  );
}

const HIBERNATING: &str = r#"
import { DurableObject } from "cloudflare:workers";
let constructed = 0;
export class Obj extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    constructed++;
  }
  async fetch() {
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server, ["t"]);
    server.serializeAttachment({ since: constructed });
    this.inMemory = "set";
    return new Response(null, { status: 101, webSocket: client });
  }
  webSocketMessage(ws, msg) {
    ws.send(`${msg} constructed=${constructed} memory=${this.inMemory ?? "gone"} tags=${this.ctx.getTags(ws)} attachment=${ws.deserializeAttachment().since} sockets=${this.ctx.getWebSockets().length}`);
  }
}
export default { fetch(request, env) { return env.OBJ.getByName("h").fetch(request); } };
"#;

#[test]
fn hibernated_sockets_outlive_eviction() {
  let d = project("hib", HIBERNATING, OBJ_BINDING);
  let ch = Cellhost::start(
    &d,
    &[
      "--isolates",
      "1",
      "--data",
      d.join(".data").to_str().unwrap(),
    ],
  );
  let mut a = join(ch.addr, "/");
  let mut b = join(ch.addr, "/");
  send(&mut a, "one");
  assert_eq!(
    next_text(&mut a),
    "one constructed=1 memory=set tags=t attachment=1 sockets=2"
  );
  // Idle past the eviction delay: the instance goes, the sockets stay.
  std::thread::sleep(Duration::from_secs(12));
  send(&mut b, "two");
  assert_eq!(
    next_text(&mut b),
    "two constructed=2 memory=gone tags=t attachment=1 sockets=2"
  );
  send(&mut a, "three");
  assert_eq!(
    next_text(&mut a),
    "three constructed=2 memory=gone tags=t attachment=1 sockets=2"
  );
}

const ERRORS: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Obj extends DurableObject {
  async fetch(request) {
    if (new URL(request.url).pathname === "/seen") {
      return new Response(this.ctx.storage.kv.get("seen") ?? "nothing");
    }
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server);
    return new Response(null, { status: 101, webSocket: client });
  }
  webSocketMessage(ws, msg) { ws.send(`ok ${msg}`); }
  webSocketError(ws, error) {
    this.ctx.storage.kv.put("seen", `${error.message} sockets=${this.ctx.getWebSockets().length}`);
  }
  webSocketClose() { this.ctx.storage.kv.put("seen", "close instead of error"); }
}
export default { fetch(request, env) { return env.OBJ.getByName("e").fetch(request); } };
"#;

/// A peer that breaks the protocol (a text frame that is not UTF-8) reaches
/// `webSocketError`, not `webSocketClose`.
#[test]
fn protocol_errors_reach_web_socket_error() {
  use tokio_tungstenite::tungstenite::protocol::frame::Frame;
  use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
  let d = project("wserr", ERRORS, OBJ_BINDING);
  let ch = Cellhost::start(&d, &["--data", d.join(".data").to_str().unwrap()]);
  let mut ws = join(ch.addr, "/");
  send(&mut ws, "fine");
  assert_eq!(next_text(&mut ws), "ok fine");
  let bad = Frame::message(vec![0xff, 0xfe], OpCode::Data(Data::Text), true);
  ws.send(Message::Frame(bad)).unwrap();
  let end = std::time::Instant::now() + Duration::from_secs(5);
  loop {
    let seen = String::from_utf8_lossy(&get(ch.addr, "/seen").body).into_owned();
    if seen != "nothing" {
      assert_eq!(seen, "Invalid UTF-8 sockets=1");
      break;
    }
    assert!(std::time::Instant::now() < end, "no event: {}", ch.log());
    std::thread::sleep(Duration::from_millis(50));
  }
}

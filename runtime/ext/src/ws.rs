//! WebSockets. Every socket is two endpoints joined by channels: a
//! `WebSocketPair` is one such pair, and a real connection (an upgraded
//! request, or an outbound client) is a pair whose far endpoint is driven by
//! the wire protocol (fastwebsockets on upgraded server connections,
//! tokio-tungstenite for outbound clients). An endpoint is a
//! resource in the isolate that holds it, and can leave it: in a 101
//! response, or in a `stub.fetch()` reply to another isolate, so a socket an
//! object accepted can be served through the Worker that called it.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;
use deno_core::convert::{ByteString, Uint8Array};
use deno_core::{OpState, Resource, ResourceId, ToV8, op2};
use deno_error::JsErrorBox;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;

use crate::http::{ReplyBody, inbox, respond};

#[derive(Debug)]
pub enum WsMsg {
  Text(String),
  Binary(Bytes),
  Close(u16, String),
  /// The peer broke the protocol (bad UTF-8, a malformed frame): the
  /// socket is dead; JavaScript sees an error event (`webSocketError`).
  Error(String),
}

/// One end of a socket: what it sends reaches the other end's `rx`.
pub struct Endpoint {
  tx: UnboundedSender<WsMsg>,
  rx: UnboundedReceiver<WsMsg>,
}

impl Endpoint {
  /// What this end sends with, and what it receives on (to relay it).
  pub fn split(self) -> (UnboundedSender<WsMsg>, UnboundedReceiver<WsMsg>) {
    (self.tx, self.rx)
  }
}

pub fn pair() -> (Endpoint, Endpoint) {
  let (a_tx, b_rx) = unbounded_channel();
  let (b_tx, a_rx) = unbounded_channel();
  (
    Endpoint { tx: a_tx, rx: a_rx },
    Endpoint { tx: b_tx, rx: b_rx },
  )
}

/// `Sec-WebSocket-Accept` for a request's `Sec-WebSocket-Key`.
pub fn accept_key(key: &[u8]) -> String {
  tokio_tungstenite::tungstenite::handshake::derive_accept_key(key)
}

/// What a client hears when its node drains (SIGTERM, an upgrade).
pub const RESTART_REASON: &str = "cellhost node restarting";

/// Serves endpoint `ep` on an upgraded server connection. A peer's Close
/// goes to JavaScript like any frame; the runtime's answer to it is sent
/// from there (after the frames sent before it), not by the protocol layer.
/// When `stop` turns true (the node drains), the client gets a Close 1012
/// (Service Restart) and JavaScript the same close, as if the client had
/// sent it, so the object's handler runs while this node still owns it.
pub async fn serve_upgraded<S>(
  io: S,
  ep: Endpoint,
  stop: Option<tokio::sync::watch::Receiver<bool>>,
) where
  S: AsyncRead + AsyncWrite + Unpin,
{
  use fastwebsockets::{FragmentCollectorRead, Frame, OpCode, Payload, WebSocket};
  let mut ws = WebSocket::after_handshake(io, fastwebsockets::Role::Server);
  ws.set_auto_close(false);
  ws.set_auto_pong(true);
  let (read, write) = ws.split(tokio::io::split);
  let mut read = FragmentCollectorRead::new(read);
  let write = Rc::new(tokio::sync::Mutex::new(write));
  let Endpoint { tx, mut rx } = ep;
  let (stop_tx, closer) = (tx.clone(), write.clone());
  let pongs = write.clone();
  let inbound = async move {
    loop {
      let mut obligated = |f: Frame<'static>| {
        let w = pongs.clone();
        async move { w.lock().await.write_frame(f).await }
      };
      let frame = match read.read_frame(&mut obligated).await {
        Ok(frame) => frame,
        // Gone without a Close: the JavaScript side sees 1006.
        Err(
          fastwebsockets::WebSocketError::UnexpectedEOF
          | fastwebsockets::WebSocketError::ConnectionClosed
          | fastwebsockets::WebSocketError::IoError(_),
        ) => break,
        Err(e) => {
          let _ = tx.send(WsMsg::Error(e.to_string()));
          break;
        }
      };
      let msg = match frame.opcode {
        OpCode::Text => match String::from_utf8(frame.payload.to_vec()) {
          Ok(t) => WsMsg::Text(t),
          Err(_) => {
            let _ = tx.send(WsMsg::Error("Invalid UTF-8".into()));
            break;
          }
        },
        OpCode::Binary => WsMsg::Binary(Bytes::copy_from_slice(&frame.payload)),
        OpCode::Close => {
          let p = &frame.payload[..];
          let (code, reason) = match p.len() {
            0 | 1 => (1005, String::new()),
            _ => (
              u16::from_be_bytes([p[0], p[1]]),
              String::from_utf8_lossy(&p[2..]).into_owned(),
            ),
          };
          let _ = tx.send(WsMsg::Close(code, reason));
          break;
        }
        _ => continue,
      };
      if tx.send(msg).is_err() {
        break;
      }
    }
  };
  let outbound = async move {
    loop {
      let (frame, last) = match rx.recv().await {
        Some(WsMsg::Text(t)) => (Frame::text(Payload::Owned(t.into_bytes())), false),
        Some(WsMsg::Binary(b)) => (Frame::binary(Payload::Owned(b.to_vec())), false),
        Some(WsMsg::Close(1005, _)) => (Frame::close_raw(Payload::Owned(Vec::new())), true),
        Some(WsMsg::Close(code, reason)) => (Frame::close(code, reason.as_bytes()), true),
        Some(WsMsg::Error(_)) => continue,
        // The socket's holder went away (object reset, isolate recycled).
        None => (Frame::close(1011, b""), true),
      };
      if write.lock().await.write_frame(frame).await.is_err() || last {
        break;
      }
    }
  };
  let stopped = async move {
    let drained = match stop {
      Some(mut s) => s.wait_for(|d| *d).await.is_ok(),
      None => false,
    };
    // A dropped sender is no drain.
    if !drained {
      std::future::pending::<()>().await;
    }
  };
  tokio::select! {
    _ = async { tokio::join!(inbound, outbound) } => {}
    _ = stopped => {
      let _ = stop_tx.send(WsMsg::Close(1012, RESTART_REASON.into()));
      let _ = closer.lock().await.write_frame(fastwebsockets::Frame::close(1012, RESTART_REASON.as_bytes())).await;
    }
  }
}

/// Runs the client side of the wire protocol for `ep` until both
/// directions end. A peer that goes away without a Close frame drops `ep`'s
/// sender: the JavaScript side sees the disconnect (1006).
async fn bridge<S>(ws: WebSocketStream<S>, ep: Endpoint)
where
  S: AsyncRead + AsyncWrite + Unpin,
{
  let (mut sink, mut stream) = ws.split();
  let Endpoint { tx, mut rx } = ep;
  let inbound = async move {
    while let Some(msg) = stream.next().await {
      let msg = match msg {
        Ok(Message::Text(t)) => WsMsg::Text(t.as_str().to_owned()),
        Ok(Message::Binary(b)) => WsMsg::Binary(b),
        Ok(Message::Close(f)) => {
          let (code, reason) = f
            .map(|f| (u16::from(f.code), f.reason.as_str().to_owned()))
            .unwrap_or((1005, String::new()));
          let _ = tx.send(WsMsg::Close(code, reason));
          break;
        }
        Ok(_) => continue, // ping/pong: tungstenite answers pings itself
        Err(
          tokio_tungstenite::tungstenite::Error::ConnectionClosed
          | tokio_tungstenite::tungstenite::Error::AlreadyClosed
          | tokio_tungstenite::tungstenite::Error::Io(_),
        ) => break,
        Err(e) => {
          let _ = tx.send(WsMsg::Error(e.to_string()));
          break;
        }
      };
      if tx.send(msg).is_err() {
        break;
      }
    }
  };
  let outbound = async move {
    while let Some(msg) = rx.recv().await {
      let (m, last) = match msg {
        WsMsg::Text(t) => (Message::text(t), false),
        WsMsg::Binary(b) => (Message::binary(b), false),
        WsMsg::Close(code, reason) => (
          Message::Close(Some(CloseFrame {
            code: code.into(),
            reason: reason.into(),
          })),
          true,
        ),
        WsMsg::Error(_) => continue,
      };
      if sink.send(m).await.is_err() || last {
        break;
      }
    }
    let _ = sink.close().await;
  };
  tokio::join!(inbound, outbound);
}

/// An endpoint held by JavaScript.
pub(crate) struct WsResource {
  tx: RefCell<Option<UnboundedSender<WsMsg>>>,
  rx: RefCell<Option<UnboundedReceiver<WsMsg>>>,
  /// The commit round the latest held frame waits for: frames leave in
  /// send order, so a later frame never overtakes a held one.
  last_round: Cell<u64>,
  /// Ends a pending read (the socket moves to another isolate).
  cancel: Rc<deno_core::CancelHandle>,
}

impl WsResource {
  pub(crate) fn new(ep: Endpoint) -> Self {
    WsResource {
      tx: RefCell::new(Some(ep.tx)),
      rx: RefCell::new(Some(ep.rx)),
      last_round: Cell::new(0),
      cancel: deno_core::CancelHandle::new_rc(),
    }
  }

  /// Takes the endpoint out (it leaves this isolate); fails once the
  /// socket is being read here (accepted).
  pub(crate) fn take(&self) -> Result<Endpoint, JsErrorBox> {
    match (self.tx.borrow_mut().take(), self.rx.borrow_mut().take()) {
      (Some(tx), Some(rx)) => Ok(Endpoint { tx, rx }),
      _ => Err(JsErrorBox::type_error(
        "This WebSocket has already been accepted or used and cannot be returned in a Response.",
      )),
    }
  }
}

impl Resource for WsResource {
  fn name(&self) -> Cow<'_, str> {
    "cellhostWebSocket".into()
  }
}

#[op2]
pub fn op_ws_pair(state: &mut OpState) -> (u32, u32) {
  let (a, b) = pair();
  let a = state.resource_table.add(WsResource::new(a));
  let b = state.resource_table.add(WsResource::new(b));
  (a, b)
}

/// Sends a frame; it waits for the output gate: every write made on this
/// isolate before it must be durable first.
fn send(state: &mut OpState, rid: ResourceId, msg: WsMsg) -> Result<(), JsErrorBox> {
  let res = state
    .resource_table
    .get::<WsResource>(rid)
    .map_err(JsErrorBox::from_err)?;
  let Some(tx) = res.tx.borrow().clone() else {
    return Ok(()); // the socket left or closed: nothing to send to
  };
  let (gate, durable) = match state.try_borrow::<crate::cell::Cells>() {
    Some(c) => (c.gate_round(), c.durable()),
    None => (0, 0),
  };
  let mut round = gate;
  if res.last_round.get() > durable {
    round = round.max(res.last_round.get());
  }
  if round == 0 {
    let _ = tx.send(msg);
  } else {
    res.last_round.set(round);
    inbox(state).hold_frame(round, tx, msg);
  }
  Ok(())
}

#[op2(fast)]
pub fn op_ws_send_text(
  state: &mut OpState,
  #[smi] rid: ResourceId,
  #[string] text: String,
) -> Result<(), JsErrorBox> {
  send(state, rid, WsMsg::Text(text))
}

#[op2(fast)]
pub fn op_ws_send_binary(
  state: &mut OpState,
  #[smi] rid: ResourceId,
  #[buffer] data: &[u8],
) -> Result<(), JsErrorBox> {
  send(state, rid, WsMsg::Binary(Bytes::copy_from_slice(data)))
}

#[op2(fast)]
pub fn op_ws_close(
  state: &mut OpState,
  #[smi] rid: ResourceId,
  #[smi] code: u32,
  #[string] reason: String,
) -> Result<(), JsErrorBox> {
  send(state, rid, WsMsg::Close(code as u16, reason))
}

/// Closes every socket this isolate still holds with `code` (the isolate
/// stops: its version was replaced and the object could not be handed
/// over in time).
pub fn close_all(state: &mut OpState, code: u16, reason: &str) {
  let rids: Vec<ResourceId> = state
    .resource_table
    .names()
    .filter(|(_, n)| n == "cellhostWebSocket")
    .map(|(rid, _)| rid)
    .collect();
  for rid in rids {
    if let Ok(res) = state.resource_table.take::<WsResource>(rid)
      && let Some(tx) = res.tx.borrow_mut().take()
    {
      let _ = tx.send(WsMsg::Close(code, reason.into()));
    }
  }
}

/// Ends the socket's pending read here (it is handed over: `op_gen_pack`).
#[op2(fast)]
pub fn op_ws_cancel(state: &mut OpState, #[smi] rid: ResourceId) {
  if let Ok(res) = state.resource_table.get::<WsResource>(rid) {
    res.cancel.cancel();
  }
}

/// Releases the endpoint (the socket is closed on this side).
#[op2(fast)]
pub fn op_ws_drop(state: &mut OpState, #[smi] rid: ResourceId) {
  if let Ok(res) = state.resource_table.take::<WsResource>(rid) {
    res.tx.borrow_mut().take();
    res.rx.borrow_mut().take();
  }
}

#[derive(ToV8)]
pub struct WsEvent {
  /// "text", "binary", "close", "error" (the peer broke the protocol), or
  /// "gone" (the peer vanished).
  kind: &'static str,
  text: Option<String>,
  data: Option<Uint8Array>,
  code: u32,
}

/// The next frame from the other end.
#[op2]
pub async fn op_ws_next(
  state: Rc<RefCell<OpState>>,
  #[smi] rid: ResourceId,
) -> Result<WsEvent, JsErrorBox> {
  let res = state
    .borrow()
    .resource_table
    .get::<WsResource>(rid)
    .map_err(JsErrorBox::from_err)?;
  let Some(mut rx) = res.rx.borrow_mut().take() else {
    return Err(JsErrorBox::generic("WebSocket is already being read"));
  };
  use deno_core::CancelFuture;
  let cancel = res.cancel.clone();
  let msg = rx.recv().or_cancel(cancel).await;
  *res.rx.borrow_mut() = Some(rx);
  let Ok(msg) = msg else {
    return Err(JsErrorBox::generic(
      "the WebSocket moved to another isolate",
    ));
  };
  let ev = |kind, text, data, code| WsEvent {
    kind,
    text,
    data,
    code,
  };
  Ok(match msg {
    Some(WsMsg::Text(t)) => ev("text", Some(t), None, 0),
    Some(WsMsg::Binary(b)) => ev("binary", None, Some(b.to_vec().into()), 0),
    Some(WsMsg::Close(code, reason)) => ev("close", Some(reason), None, code as u32),
    Some(WsMsg::Error(e)) => ev("error", Some(e), None, 1006),
    None => ev("gone", None, None, 1006),
  })
}

/// Answers request `id` with a 101 that hands the endpoint `rid` over to
/// the connection (or to the `stub.fetch()` caller).
#[op2]
pub fn op_cellhost_respond_ws(
  state: &mut OpState,
  #[smi] id: u32,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[smi] rid: ResourceId,
) -> Result<(), JsErrorBox> {
  let res = state
    .resource_table
    .take::<WsResource>(rid)
    .map_err(JsErrorBox::from_err)?;
  let ep = res.take()?;
  respond(state, id, 101, headers, ReplyBody::WebSocket(ep));
  Ok(())
}

#[derive(ToV8)]
pub struct Connected {
  rid: ResourceId,
  protocol: String,
  extensions: String,
}

/// `new WebSocket(url)` and `fetch()` with `Upgrade: websocket`: connects
/// and returns the local endpoint.
#[op2]
pub async fn op_ws_connect(
  state: Rc<RefCell<OpState>>,
  #[string] url: String,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
) -> Result<Connected, JsErrorBox> {
  use tokio_tungstenite::tungstenite::client::IntoClientRequest;
  let mut req = url
    .as_str()
    .into_client_request()
    .map_err(|e| JsErrorBox::type_error(format!("WebSocket: {e}")))?;
  for (k, v) in headers {
    if let (Ok(k), Ok(v)) = (
      http::HeaderName::from_bytes(&k),
      http::HeaderValue::from_bytes(&v),
    ) {
      req.headers_mut().insert(k, v);
    }
  }
  // The egress policy decides on the resolved address, and the connection
  // goes to that address (a second lookup could answer differently).
  let host = req.uri().host().unwrap_or("").to_string();
  let tls = req.uri().scheme_str() == Some("wss");
  let port = req.uri().port_u16().unwrap_or(if tls { 443 } else { 80 });
  let failed =
    |e: String| JsErrorBox::generic(format!("WebSocket connection to {url} failed: {e}"));
  let addrs = crate::egress::resolve(&host, port).await.map_err(failed)?;
  let stream = tokio::net::TcpStream::connect(&addrs[..])
    .await
    .map_err(|e| failed(e.to_string()))?;
  let (ws, res) = tokio_tungstenite::client_async_tls(req, stream)
    .await
    .map_err(|e| failed(e.to_string()))?;
  let header = |n: &str| {
    res
      .headers()
      .get(n)
      .and_then(|v| v.to_str().ok())
      .unwrap_or("")
      .to_string()
  };
  let (protocol, extensions) = (
    header("sec-websocket-protocol"),
    header("sec-websocket-extensions"),
  );
  let (near, far) = pair();
  deno_core::unsync::spawn(bridge(ws, far));
  let rid = state.borrow_mut().resource_table.add(WsResource::new(near));
  Ok(Connected {
    rid,
    protocol,
    extensions,
  })
}

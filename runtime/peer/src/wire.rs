//! What a forwarded call looks like on the HTTP/2 stream. Both directions
//! start with a head (a 4-byte big-endian length and JSON), so the user's
//! headers travel as data, never as HTTP/2 header fields (which refuse
//! some names and values a Worker may send). After the head: the request
//! or response body, the RPC arguments or result, or WebSocket frames.

use bytes::{Buf, Bytes, BytesMut};
use cellhost_ext::ws::WsMsg;
use cellhost_ext::{Body, BoxError};
use deno_core::convert::ByteString;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::{Deserialize, Serialize};

/// The largest head accepted (headers of a request are at most 128 KiB).
const MAX_HEAD: usize = 1 << 20;
/// The largest WebSocket message proxied (workerd's limit is 1 MiB).
const MAX_WS_FRAME: usize = 32 << 20;

pub const FORWARD_PATH: &str = "/_cellhost/forward";
/// The node a forwarded call comes from.
pub const FROM_HEADER: &str = "x-cellhost-from";

#[derive(Serialize, Deserialize, Debug)]
pub struct CallHead {
  /// "fetch" or "call".
  pub kind: String,
  /// The namespace's unique key (`<script>-<Class>`).
  pub ns: String,
  pub id: String,
  pub name: Option<String>,
  /// The HTTP method, or the RPC method name.
  pub method: String,
  #[serde(default)]
  pub url: String,
  #[serde(default)]
  pub headers: Vec<(String, String)>,
  /// A request body follows the head.
  #[serde(default)]
  pub body: bool,
  /// A WebSocket upgrade: frames follow in both directions.
  #[serde(default)]
  pub ws: bool,
}

#[derive(Serialize, Deserialize, Debug, Default)]
pub struct ReplyHead {
  /// For fetch: the status, headers, and either a body or WebSocket
  /// frames after the head (`ws`), or `error` (the error's JSON, as a
  /// local object's).
  #[serde(default)]
  pub status: u16,
  #[serde(default)]
  pub headers: Vec<(String, String)>,
  #[serde(default)]
  pub ws: bool,
  pub error: Option<String>,
  /// For call: whether the payload after the head is the value (or the
  /// error's JSON).
  #[serde(default)]
  pub ok: bool,
}

/// Header bytes as a JSON string: each byte one char (Latin-1), so any
/// value a Worker could set survives.
pub fn header_pairs(h: &[(ByteString, ByteString)]) -> Vec<(String, String)> {
  let s = |b: &[u8]| b.iter().map(|&c| c as char).collect::<String>();
  h.iter().map(|(k, v)| (s(k), s(v))).collect()
}

pub fn byte_pairs(h: Vec<(String, String)>) -> Vec<(ByteString, ByteString)> {
  let b = |s: String| ByteString::from(s.chars().map(|c| c as u32 as u8).collect::<Vec<u8>>());
  h.into_iter().map(|(k, v)| (b(k), b(v))).collect()
}

pub fn frame_head<T: Serialize>(head: &T) -> Bytes {
  let json = serde_json::to_vec(head).expect("a head serializes");
  let mut out = BytesMut::with_capacity(4 + json.len());
  out.extend_from_slice(&(json.len() as u32).to_be_bytes());
  out.extend_from_slice(&json);
  out.freeze()
}

/// Reads an incoming stream: a head, then bytes or WebSocket frames.
pub struct Reader {
  body: Incoming,
  buf: BytesMut,
  done: bool,
}

impl Reader {
  pub fn new(body: Incoming) -> Self {
    Reader {
      body,
      buf: BytesMut::new(),
      done: false,
    }
  }

  async fn fill(&mut self, n: usize) -> Result<bool, String> {
    while self.buf.len() < n {
      if self.done {
        return Ok(false);
      }
      match self.body.frame().await {
        Some(Ok(f)) => {
          if let Ok(d) = f.into_data() {
            self.buf.extend_from_slice(&d);
          }
        }
        Some(Err(e)) => return Err(e.to_string()),
        None => self.done = true,
      }
    }
    Ok(true)
  }

  pub async fn head<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
    if !self.fill(4).await? {
      return Err("the stream ended before its head".into());
    }
    let n = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
    if n > MAX_HEAD {
      return Err(format!("a head of {n} bytes is over the limit"));
    }
    if !self.fill(4 + n).await? {
      return Err("the stream ended inside its head".into());
    }
    self.buf.advance(4);
    let json = self.buf.split_to(n);
    serde_json::from_slice(&json).map_err(|e| format!("a malformed head: {e}"))
  }

  /// Everything after the head, read whole.
  pub async fn rest(mut self) -> Result<Vec<u8>, String> {
    while self.fill(self.buf.len() + 1).await? {}
    Ok(self.buf.to_vec())
  }

  /// Everything after the head, as a body that streams.
  pub fn into_body(self) -> Body {
    let Reader { body, buf, .. } = self;
    let first = (!buf.is_empty()).then(|| buf.freeze());
    let rest = body.map_err(|e| -> BoxError { e.into() });
    let stream = futures::stream::iter(first.map(|b| Ok(hyper::body::Frame::data(b))))
      .chain(http_body_util::BodyStream::new(rest));
    use futures::StreamExt;
    http_body_util::StreamBody::new(stream).boxed_unsync()
  }

  /// The next WebSocket message; `None` when the stream ended.
  pub async fn ws(&mut self) -> Option<Result<WsMsg, String>> {
    match self.fill(5).await {
      Ok(true) => {}
      Ok(false) if self.buf.is_empty() => return None,
      Ok(false) => return Some(Err("a WebSocket frame was cut off".into())),
      Err(e) => return Some(Err(e)),
    }
    let n = u32::from_be_bytes(self.buf[1..5].try_into().unwrap()) as usize;
    if n > MAX_WS_FRAME {
      return Some(Err(format!(
        "a WebSocket message of {n} bytes is over the limit"
      )));
    }
    match self.fill(5 + n).await {
      Ok(true) => {}
      Ok(false) => return Some(Err("a WebSocket frame was cut off".into())),
      Err(e) => return Some(Err(e)),
    }
    let tag = self.buf[0];
    self.buf.advance(5);
    let payload = self.buf.split_to(n).freeze();
    Some(ws_decode(tag, payload))
  }
}

pub fn ws_encode(m: &WsMsg) -> Bytes {
  let (tag, payload): (u8, Vec<u8>) = match m {
    WsMsg::Text(t) => (1, t.as_bytes().to_vec()),
    WsMsg::Binary(b) => (2, b.to_vec()),
    WsMsg::Close(code, reason) => {
      let mut p = code.to_be_bytes().to_vec();
      p.extend_from_slice(reason.as_bytes());
      (3, p)
    }
    WsMsg::Error(e) => (4, e.as_bytes().to_vec()),
  };
  let mut out = BytesMut::with_capacity(5 + payload.len());
  out.extend_from_slice(&[tag]);
  out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
  out.extend_from_slice(&payload);
  out.freeze()
}

fn ws_decode(tag: u8, p: Bytes) -> Result<WsMsg, String> {
  let text =
    |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "a text frame is not UTF-8".to_string());
  match tag {
    1 => Ok(WsMsg::Text(text(&p)?)),
    2 => Ok(WsMsg::Binary(p)),
    3 if p.len() >= 2 => Ok(WsMsg::Close(
      u16::from_be_bytes([p[0], p[1]]),
      text(&p[2..])?,
    )),
    4 => Ok(WsMsg::Error(text(&p)?)),
    _ => Err(format!("an unknown WebSocket frame (tag {tag})")),
  }
}

/// A body made of a head and then whatever `rest` yields.
pub fn head_then<S>(head: Bytes, rest: S) -> Body
where
  S: futures::Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
  use futures::StreamExt;
  let s = futures::stream::iter([Ok::<_, BoxError>(head)])
    .chain(rest)
    .map(|r| r.map(hyper::body::Frame::data));
  http_body_util::StreamBody::new(s).boxed_unsync()
}

/// The frames a WebSocket endpoint's receiver yields, encoded.
pub fn ws_stream(
  rx: tokio::sync::mpsc::UnboundedReceiver<WsMsg>,
) -> impl futures::Stream<Item = Result<Bytes, BoxError>> + Send + 'static {
  futures::stream::unfold(rx, |mut rx| async move {
    let m = rx.recv().await?;
    Some((Ok(ws_encode(&m)), rx))
  })
}

/// A finished byte body as a stream of one chunk.
pub fn once(b: Vec<u8>) -> impl futures::Stream<Item = Result<Bytes, BoxError>> + Send + 'static {
  futures::stream::iter((!b.is_empty()).then(|| Ok(Bytes::from(b))))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn websocket_messages_survive_the_frame_codec() {
    for m in [
      WsMsg::Text("héllo".into()),
      WsMsg::Binary(Bytes::from_static(&[0, 1, 255])),
      WsMsg::Close(4001, "bye".into()),
      WsMsg::Error("bad".into()),
    ] {
      let b = ws_encode(&m);
      let back = ws_decode(b[0], b.slice(5..)).unwrap();
      assert_eq!(format!("{back:?}"), format!("{m:?}"));
    }
    assert!(ws_decode(9, Bytes::new()).is_err());
  }

  #[test]
  fn header_bytes_round_trip_through_json() {
    let h = vec![(
      ByteString::from("x-a"),
      ByteString::from(vec![0xe9u8, b'z']),
    )];
    let back = byte_pairs(header_pairs(&h));
    assert_eq!(back[0].1.to_vec(), vec![0xe9u8, b'z']);
  }
}

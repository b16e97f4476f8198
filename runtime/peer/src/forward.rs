//! The caller's side: a stub's call for a cell owned elsewhere goes to the
//! owner's internal listener, and its answer comes back as a local one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use cellhost_ext::ws::{WsMsg, pair};
use cellhost_ext::{
  ActorTarget, Body, BoxError, Forward, HttpJob, HttpReply, Job, Namespace, ReplyBody, RpcJob,
  RpcReply,
};
use cellhost_fleet::{Route, cell_scope};
use http_body_util::BodyExt;
use hyper::Request;
use tokio::sync::mpsc;

use crate::wire::*;
use crate::{Inner, Peer};

impl Forward for Peer {
  fn forward(
    &self,
    ns: &Namespace,
    target: &ActorTarget,
    job: Job,
  ) -> Pin<Box<dyn Future<Output = Option<Job>>>> {
    let scope = cell_scope(&ns.class_name, &target.id);
    // The hot path: a cell held here is served here, with no await.
    if self.inner.fleet.holds(&scope) {
      return Box::pin(std::future::ready(Some(job)));
    }
    let inner = self.inner.clone();
    let (ns_key, target) = (ns.unique_key.clone(), target.clone());
    Box::pin(async move {
      let (node, address) = match inner.fleet.route(&scope).await {
        Route::Here => return Some(job),
        Route::There { node, address, .. } => (node, address),
      };
      let to = Owner {
        node,
        address,
        scope,
        ns_key,
      };
      let i = inner.clone();
      inner.rt.spawn(async move { i.send(to, target, job).await });
      None
    })
  }
}

/// Where a forwarded call goes.
struct Owner {
  node: String,
  address: String,
  scope: String,
  ns_key: String,
}

impl Owner {
  /// The caller's error when the owner could not answer: retryable, naming
  /// the owner, and never replayed here (the call may have run there).
  fn unreachable(&self, why: &str) -> String {
    serde_json::json!({
      "name": "Error",
      "message": format!(
        "Durable Object {} is owned by node {}, which could not be reached ({why}); the call may or may not have run there, so it was not retried",
        self.scope, self.node
      ),
      "unreachableOwner": self.node,
      "retryable": true,
    })
    .to_string()
  }
}

/// Whether an error's JSON names an owner (the cell moved, or its owner was
/// unreachable): the cached route is stale.
fn names_owner(json: &[u8]) -> bool {
  serde_json::from_slice::<serde_json::Value>(json)
    .ok()
    .is_some_and(|v| v.get("owner").is_some() || v.get("unreachableOwner").is_some())
}

fn is_upgrade(
  headers: &[(
    deno_core::convert::ByteString,
    deno_core::convert::ByteString,
  )],
) -> bool {
  headers
    .iter()
    .any(|(k, v)| k.eq_ignore_ascii_case(b"upgrade") && v.eq_ignore_ascii_case(b"websocket"))
}

impl Inner {
  async fn send(self: Arc<Self>, to: Owner, target: ActorTarget, job: Job) {
    match job {
      Job::Http(j) => {
        let HttpJob {
          method,
          url,
          headers,
          body,
          reply,
          ..
        } = j;
        let r = self.fetch(&to, &target, method, url, headers, body).await;
        let r = r.unwrap_or_else(|e| HttpReply {
          status: 500,
          headers: vec![],
          body: ReplyBody::Error(to.unreachable(&e)),
        });
        if let ReplyBody::Error(e) = &r.body
          && names_owner(e.as_bytes())
        {
          self.fleet.forget_route(&to.scope);
        }
        let _ = reply.send(r);
      }
      Job::Rpc(RpcJob {
        method,
        args,
        reply,
        ..
      }) => {
        let r = self.call(&to, &target, method, args).await;
        let r = r.unwrap_or_else(|e| RpcReply {
          ok: false,
          payload: to.unreachable(&e).into_bytes(),
        });
        if !r.ok && names_owner(&r.payload) {
          self.fleet.forget_route(&to.scope);
        }
        let _ = reply.send(r);
      }
      _ => unreachable!("only stub calls are forwarded"),
    }
  }

  fn request(&self, to: &Owner, body: Body) -> Request<Body> {
    Request::post(format!("http://{}{FORWARD_PATH}", to.address))
      .header(crate::SECRET_HEADER, self.secret.header_value())
      .header(FROM_HEADER, self.fleet.node())
      .body(body)
      .expect("a valid request")
  }

  async fn open(&self, to: &Owner, body: Body) -> Result<Reader, String> {
    let resp = self
      .client
      .send(&to.address, self.request(to, body))
      .await?;
    if resp.status() != hyper::StatusCode::OK {
      let status = resp.status();
      let text = resp.into_body().collect().await.map(|b| b.to_bytes());
      let text = text
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
      return Err(format!("it answered {status}: {}", text.trim()));
    }
    Ok(Reader::new(resp.into_body()))
  }

  async fn call(
    &self,
    to: &Owner,
    target: &ActorTarget,
    method: String,
    args: Vec<u8>,
  ) -> Result<RpcReply, String> {
    let head = CallHead {
      kind: "call".into(),
      ns: to.ns_key.clone(),
      id: target.id.clone(),
      name: target.name.clone(),
      method,
      url: String::new(),
      headers: vec![],
      body: true,
      ws: false,
    };
    let mut r = self
      .open(to, head_then(frame_head(&head), once(args)))
      .await?;
    let reply: ReplyHead = r.head().await?;
    let payload = r.rest().await?;
    Ok(RpcReply {
      ok: reply.ok,
      payload,
    })
  }

  async fn fetch(
    &self,
    to: &Owner,
    target: &ActorTarget,
    method: String,
    url: String,
    headers: Vec<(
      deno_core::convert::ByteString,
      deno_core::convert::ByteString,
    )>,
    body: Option<Body>,
  ) -> Result<HttpReply, String> {
    let ws = is_upgrade(&headers);
    let head = CallHead {
      kind: "fetch".into(),
      ns: to.ns_key.clone(),
      id: target.id.clone(),
      name: target.name.clone(),
      method,
      url,
      headers: header_pairs(&headers),
      body: body.is_some() && !ws,
      ws,
    };
    let head = frame_head(&head);
    // A WebSocket upgrade keeps the request stream open for the frames the
    // caller sends; its body (an upgrade has none) is not sent.
    // The caller's end of the socket, the sender of what the owner sends,
    // and the receiver of what the caller sends.
    let (socket, sent) = match ws.then(pair) {
      Some((mine, relay)) => {
        let (tx, rx) = relay.split();
        (Some((mine, tx)), Some(rx))
      }
      None => (None, None),
    };
    let stream: Body = match (sent, body) {
      (Some(rx), _) => head_then(head, ws_stream(rx)),
      (None, Some(b)) => head_then(head, http_body_util::BodyDataStream::new(b)),
      (None, None) => head_then(head, once(Vec::new())),
    };
    let mut r = self.open(to, stream).await?;
    let reply: ReplyHead = r.head().await?;
    if let Some(e) = reply.error {
      return Ok(HttpReply {
        status: 500,
        headers: vec![],
        body: ReplyBody::Error(e),
      });
    }
    let headers = byte_pairs(reply.headers);
    if reply.ws {
      let Some((local, tx)) = socket else {
        return Err("it answered a request that was no upgrade with a WebSocket".into());
      };
      tokio::spawn(async move {
        while let Some(m) = r.ws().await {
          let m = m.unwrap_or_else(WsMsg::Error);
          if tx.send(m).is_err() {
            break;
          }
        }
      });
      return Ok(HttpReply {
        status: reply.status,
        headers,
        body: ReplyBody::WebSocket(local),
      });
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, BoxError>>(4);
    let mut body = r.into_body();
    tokio::spawn(async move {
      while let Some(f) = body.frame().await {
        let item = match f {
          Ok(f) => match f.into_data() {
            Ok(d) => Ok(d),
            Err(_) => continue,
          },
          Err(e) => Err(e),
        };
        let stop = item.is_err();
        if tx.send(item).await.is_err() || stop {
          break;
        }
      }
    });
    Ok(HttpReply {
      status: reply.status,
      headers,
      body: ReplyBody::Stream(rx),
    })
  }
}

//! The owner's side: the internal listener. A forwarded call is checked
//! (fleet secret), turned into the job a local stub would have sent, and
//! queued on this node's isolate for the object; its answer goes back on
//! the same HTTP/2 stream. A forwarded call is never forwarded again: if
//! this node no longer owns the cell, its activation refuses the call
//! (retryably, naming the owner) before any user code runs.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use cellhost_ext::{
  ActorTarget, Body, BoxError, HttpJob, HttpReply, Job, ReplyBody, Router, RpcJob, RpcReply,
};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::oneshot;

use crate::Inner;
use crate::wire::*;

pub(crate) fn spawn(
  inner: Arc<Inner>,
  listener: std::net::TcpListener,
  page: Arc<crate::operator::Page>,
) -> Result<(), String> {
  listener.set_nonblocking(true).map_err(|e| e.to_string())?;
  let rt = inner.rt.handle().clone();
  let listener = {
    let _enter = rt.enter();
    tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?
  };
  rt.spawn(async move {
    loop {
      let Ok((stream, _)) = listener.accept().await else {
        continue;
      };
      let _ = stream.set_nodelay(true);
      let (inner, page) = (inner.clone(), page.clone());
      tokio::spawn(async move {
        let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
          let (inner, page) = (inner.clone(), page.clone());
          let router = inner
            .router
            .lock()
            .unwrap()
            .clone()
            .expect("set by serve()");
          async move {
            let path = req.uri().path();
            if path.starts_with(crate::log::LOG_PREFIX) {
              let log = inner.nodelog.get().cloned();
              return Ok::<_, Infallible>(crate::log::handle(log, &inner.secret, req).await);
            }
            if path == "/_cellhost" || (path.starts_with("/_cellhost/") && path != FORWARD_PATH) {
              return Ok::<_, Infallible>(crate::operator::handle(&inner, &page, &req).await);
            }
            Ok::<_, Infallible>(handle(inner, router, req).await)
          }
        });
        // HTTP/2 from peers, HTTP/1.1 from an operator's browser.
        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
          .serve_connection(TokioIo::new(stream), svc)
          .await;
      });
    }
  });
  Ok(())
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
  let body = http_body_util::Full::new(Bytes::from(format!("{text}\n")))
    .map_err(|e| -> BoxError { match e {} })
    .boxed_unsync();
  Response::builder()
    .status(status)
    .header("content-type", "text/plain;charset=UTF-8")
    .body(body)
    .expect("a valid response")
}

fn framed<S>(head: &ReplyHead, rest: S) -> Response<Body>
where
  S: futures::Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
  Response::new(head_then(frame_head(head), rest))
}

fn error_json(message: &str) -> String {
  serde_json::json!({ "name": "Error", "message": message }).to_string()
}

async fn handle(inner: Arc<Inner>, router: Router, req: Request<Incoming>) -> Response<Body> {
  if req.uri().path() != FORWARD_PATH {
    return plain(StatusCode::NOT_FOUND, "not found");
  }
  if !inner.secret.admits(
    req
      .headers()
      .get(crate::SECRET_HEADER)
      .map(|v| v.as_bytes()),
  ) {
    return plain(
      StatusCode::FORBIDDEN,
      "this is a cellhost fleet's internal listener: calls need the fleet secret",
    );
  }
  let from = req
    .headers()
    .get(FROM_HEADER)
    .and_then(|v| v.to_str().ok())
    .unwrap_or("?")
    .to_string();
  let mut reader = Reader::new(req.into_body());
  let head: CallHead = match reader.head().await {
    Ok(h) => h,
    Err(e) => return plain(StatusCode::BAD_REQUEST, &e),
  };
  let Some(ns) = router
    .namespaces
    .iter()
    .position(|n| n.unique_key == head.ns)
  else {
    return plain(
      StatusCode::BAD_REQUEST,
      &format!("this node serves no Durable Object namespace {:?}", head.ns),
    );
  };
  if head.id.len() != 64 || !head.id.bytes().all(|b| b.is_ascii_hexdigit()) {
    return plain(
      StatusCode::BAD_REQUEST,
      "a Durable Object id is 64 hex digits",
    );
  }
  let target = ActorTarget {
    ns: ns as u32,
    id: head.id.clone(),
    name: head.name.clone(),
    from: Some(from),
  };
  if inner.fleet.draining() {
    // Shutting down: a refusal before anything ran, so the caller may
    // retry; the cell is released in a moment and taken elsewhere.
    let node = inner.fleet.node();
    let e = serde_json::json!({
      "name": "Error",
      "message": format!("node {node} is shutting down and takes no new calls; retry (another node takes its cells at once)"),
      "owner": node,
    })
    .to_string();
    let h = match head.kind.as_str() {
      "call" => ReplyHead::default(),
      _ => ReplyHead {
        error: Some(e.clone()),
        ..Default::default()
      },
    };
    let payload = if head.kind == "call" {
      e.into_bytes()
    } else {
      Vec::new()
    };
    return framed(&h, once(payload));
  }
  inner
    .inflight
    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
  let res = match head.kind.as_str() {
    "call" => call(&inner, &router, target, head, reader).await,
    "fetch" => fetch(&inner, &router, target, head, reader).await,
    k => plain(StatusCode::BAD_REQUEST, &format!("unknown call kind {k:?}")),
  };
  inner
    .inflight
    .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
  res
}

/// Queues `job` on this node's isolate for `target` and waits for the
/// answer `rx` carries (`None`: the isolate is gone).
async fn here<T>(
  router: &Router,
  target: &ActorTarget,
  job: Job,
  rx: oneshot::Receiver<T>,
) -> Option<T> {
  router.send(target, job).ok()?;
  rx.await.ok()
}

/// A reply ready only after this node's fence deadline must not leave:
/// the write it could reveal is in the bucket, the outcome unknown.
fn lapsed(inner: &Inner) -> bool {
  !inner.fleet.can_ack()
}

async fn call(
  inner: &Inner,
  router: &Router,
  target: ActorTarget,
  head: CallHead,
  reader: Reader,
) -> Response<Body> {
  let args = match reader.rest().await {
    Ok(a) => a,
    Err(e) => return plain(StatusCode::BAD_REQUEST, &e),
  };
  let (tx, rx) = oneshot::channel();
  let job = Job::Rpc(RpcJob {
    target: target.clone(),
    method: head.method,
    args,
    reply: tx,
  });
  let reply = here(router, &target, job, rx).await;
  let mut reply = reply.unwrap_or_else(|| RpcReply {
    ok: false,
    payload: error_json("Network connection lost.").into_bytes(),
  });
  if lapsed(inner) {
    reply = RpcReply {
      ok: false,
      payload: error_json(&cellhost_fleet::lease_lapsed_reply()).into_bytes(),
    };
  }
  let h = ReplyHead {
    ok: reply.ok,
    ..Default::default()
  };
  framed(&h, once(reply.payload))
}

async fn fetch(
  inner: &Inner,
  router: &Router,
  target: ActorTarget,
  head: CallHead,
  reader: Reader,
) -> Response<Body> {
  let (body, reader) = match (head.ws, head.body) {
    (true, _) => (None, Some(reader)),
    (false, true) => (Some(reader.into_body()), None),
    (false, false) => (None, None),
  };
  let (tx, rx) = oneshot::channel();
  let job = Job::Http(HttpJob {
    actor: Some(target.clone()),
    service: None,
    method: head.method,
    url: head.url,
    headers: byte_pairs(head.headers),
    body,
    reply: tx,
  });
  let reply = here(router, &target, job, rx).await;
  let reply = reply.unwrap_or_else(|| HttpReply {
    status: 500,
    headers: vec![],
    body: ReplyBody::Error(error_json("Network connection lost.")),
  });
  if lapsed(inner) {
    let h = ReplyHead {
      error: Some(error_json(&cellhost_fleet::lease_lapsed_reply())),
      ..Default::default()
    };
    return framed(&h, once(Vec::new()));
  }
  let mut h = ReplyHead {
    status: reply.status,
    headers: header_pairs(&reply.headers),
    ..Default::default()
  };
  match reply.body {
    ReplyBody::Error(e) => {
      h.error = Some(e);
      framed(&h, once(Vec::new()))
    }
    ReplyBody::Full(b) => framed(&h, once(b.to_vec())),
    ReplyBody::Stream(rx) => framed(
      &h,
      futures::stream::unfold(rx, |mut rx| async move { Some((rx.recv().await?, rx)) }),
    ),
    ReplyBody::WebSocket(ep) => {
      let Some(mut reader) = reader else {
        h.error = Some(error_json(
          "the Durable Object answered a request that was no WebSocket upgrade with a WebSocket",
        ));
        return framed(&h, once(Vec::new()));
      };
      h.ws = true;
      let (ep_tx, ep_rx) = ep.split();
      // The caller's frames reach the object; when the caller's stream
      // ends, the sender drops and the object sees the socket go.
      tokio::spawn(async move {
        while let Some(Ok(m)) = reader.ws().await {
          if ep_tx.send(m).is_err() {
            break;
          }
        }
      });
      framed(&h, ws_stream(ep_rx))
    }
  }
}

//! HTTP ingress. Every isolate thread accepts on its own `SO_REUSEPORT`
//! listener, so the kernel spreads connections over the threads and a
//! request is parsed, run and answered on one thread with no hand-off.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cellhost_host::{HttpJob, HttpReply, IsolatePool, Job, ReplyBody, ThreadHook};
use deno_core::convert::ByteString;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::TokioIo;
use socket2::{Domain, Socket, Type};
use tokio::sync::oneshot;

use cellhost_ext::ReplyStream;

/// Listeners bound before the isolates start, so a busy port fails the
/// start-up instead of a thread.
pub struct Listeners {
  pub addr: SocketAddr,
  sockets: Mutex<Vec<Option<TcpListener>>>,
}

impl Listeners {
  /// Binds `n` listeners on `addr` with SO_REUSEPORT. Port 0 picks one port
  /// for all of them.
  pub fn bind(mut addr: SocketAddr, n: usize) -> anyhow::Result<Arc<Self>> {
    let mut sockets = Vec::new();
    for _ in 0..n.max(1) {
      let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
      s.set_reuse_address(true)?;
      s.set_reuse_port(true)?;
      s.bind(&addr.into())
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
      s.listen(1024)?;
      s.set_nonblocking(true)?;
      let l: TcpListener = s.into();
      addr = l.local_addr()?;
      sockets.push(Some(l));
    }
    Ok(Arc::new(Listeners {
      addr,
      sockets: Mutex::new(sockets),
    }))
  }

  /// The per-thread hook that serves HTTP on isolate thread `index`.
  pub fn hook(self: &Arc<Self>) -> ThreadHook {
    let this = self.clone();
    Arc::new(move |index, pool| {
      let std = this
        .sockets
        .lock()
        .unwrap()
        .get_mut(index)
        .and_then(Option::take);
      Box::pin(async move {
        let Some(std) = std else { return };
        let listener = tokio::net::TcpListener::from_std(std).expect("registering the listener");
        accept_loop(listener, index, pool).await
      })
    })
  }
}

async fn accept_loop(listener: tokio::net::TcpListener, index: usize, pool: IsolatePool) {
  loop {
    let stream = match listener.accept().await {
      Ok((stream, _)) => stream,
      Err(e) => {
        tracing::warn!("accept: {e}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        continue;
      }
    };
    let _ = stream.set_nodelay(true);
    let pool = pool.clone();
    tokio::task::spawn_local(async move {
      let svc = hyper::service::service_fn(move |req| handle(req, index, pool.clone()));
      let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
      if let Err(e) = conn.await {
        tracing::debug!("connection: {e}");
      }
    });
  }
}

async fn handle(
  req: Request<Incoming>,
  index: usize,
  pool: IsolatePool,
) -> Result<Response<ReplyStream>, Infallible> {
  let (parts, body) = req.into_parts();
  let host = parts
    .headers
    .get(http::header::HOST)
    .and_then(|h| h.to_str().ok())
    .unwrap_or("localhost");
  let path = parts
    .uri
    .path_and_query()
    .map(|p| p.as_str())
    .unwrap_or("/");
  let url = format!("http://{host}{path}");
  let headers = parts
    .headers
    .iter()
    .map(|(k, v)| (ByteString::from(k.as_str()), ByteString::from(v.as_bytes())))
    .collect();
  let body = (!body.is_end_stream()).then(|| body.map_err(|e| e.into()).boxed_unsync());
  let (tx, rx) = oneshot::channel();
  let job = HttpJob {
    actor: None,
    method: parts.method.to_string(),
    url,
    headers,
    body,
    reply: tx,
  };
  if !pool.dispatch(index, Job::Http(job)) {
    return Ok(error_response("the isolate thread is gone"));
  }
  let reply = match rx.await {
    Ok(reply) => reply,
    Err(_) => return Ok(error_response("the isolate dropped the request")),
  };
  Ok(to_response(reply))
}

fn to_response(reply: HttpReply) -> Response<ReplyStream> {
  let body = match reply.body {
    ReplyBody::Full(b) => ReplyStream::full(b),
    ReplyBody::Stream(rx) => ReplyStream::stream(rx),
    ReplyBody::Error(reason) => return error_response(&reason),
  };
  let mut res = Response::new(body);
  *res.status_mut() =
    StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
  let headers = res.headers_mut();
  for (k, v) in reply.headers {
    if let (Ok(k), Ok(v)) = (HeaderName::from_bytes(&k), HeaderValue::from_bytes(&v)) {
      headers.append(k, v);
    }
  }
  res
}

/// An uncaught exception or a recycled isolate: the plain 500 workerd
/// answers; the reason is in the log, not in the response.
fn error_response(reason: &str) -> Response<ReplyStream> {
  tracing::debug!("500: {reason}");
  let mut res = Response::new(ReplyStream::full(Bytes::from_static(
    b"Internal Server Error",
  )));
  *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
  res
}

//! HTTP ingress. Every isolate thread accepts on its own `SO_REUSEPORT`
//! listener, so the kernel spreads connections over the threads and a
//! request is parsed, run and answered on one thread with no hand-off.

use std::cell::RefCell;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
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

use cellhost_assets::Assets;
use cellhost_ext::ReplyStream;

mod gate;
mod head;

/// What one request may bring and one response may carry. Cloudflare's
/// edge enforces these before a Worker runs; a host running code it did
/// not write needs them too.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
  /// A request body larger than this is refused with 413 (by its
  /// `Content-Length`) or cut off with an error while it streams in.
  pub max_body_bytes: u64,
  /// `/__scheduled` and `/cdn-cgi/handler/scheduled` fire the scheduled
  /// handler (`--test-scheduled`).
  pub test_scheduled: bool,
}

/// The request line and headers together: Cloudflare's 128 KB. A larger
/// head is answered 431 without reaching the Worker.
pub const MAX_REQUEST_HEAD_BYTES: usize = 128 << 10;
/// A response's headers together; a Worker that sets more gets a 500.
pub const MAX_RESPONSE_HEADER_BYTES: usize = 128 << 10;

/// Listeners bound before the isolates start, so a busy port fails the
/// start-up instead of a thread.
pub struct Listeners {
  pub addr: SocketAddr,
  sockets: Mutex<Vec<Option<TcpListener>>>,
  limits: Limits,
  assets: Option<Arc<Assets>>,
  gate: Option<AnswerGate>,
  drain: Arc<Drain>,
  /// One per pool that served from these listeners (`cellhost node`
  /// switching versions in process); the last one accepts.
  eras: Mutex<Vec<Arc<Era>>>,
}

/// The connections one pool's threads accepted. Once retired, its accept
/// loops hand their sockets back (to the next pool's threads: nothing
/// queued in the kernel is lost) and its connections close after their
/// answers in flight.
struct Era {
  retired: tokio::sync::watch::Sender<bool>,
  inflight: std::sync::atomic::AtomicUsize,
}

/// A node's drain (SIGTERM on a fleet): the listeners stop accepting, each
/// connection closes after its next answer, and the requests in flight are
/// counted so the node can wait for them before it hands its cells over.
struct Drain {
  draining: std::sync::atomic::AtomicBool,
  inflight: std::sync::atomic::AtomicUsize,
  started: tokio::sync::watch::Sender<bool>,
}

impl Default for Drain {
  fn default() -> Self {
    Drain {
      draining: Default::default(),
      inflight: Default::default(),
      started: tokio::sync::watch::channel(false).0,
    }
  }
}

/// Counts one request in flight (node-wide and in its era) until dropped.
struct InFlight<'a>(&'a Drain, &'a Era);

impl<'a> InFlight<'a> {
  fn new(d: &'a Drain, era: &'a Era) -> Self {
    d.inflight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    era
      .inflight
      .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    InFlight(d, era)
  }
}

/// A connection of `Era` accepted but not yet asked anything: a retired
/// pool still counts it (its request may be on the way), until its first
/// request starts or it closes.
struct Unasked(Arc<Era>);

impl Unasked {
  fn new(era: &Arc<Era>) -> Self {
    era
      .inflight
      .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Unasked(era.clone())
  }
}

impl Drop for Unasked {
  fn drop(&mut self) {
    (self.0.inflight).fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
  }
}

/// How long a connection accepted just before its pool retired may take
/// to send its first request, which is then answered (and the connection
/// closed) rather than the connection dropped unanswered.
const UNASKED_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

impl Drop for InFlight<'_> {
  fn drop(&mut self) {
    use std::sync::atomic::Ordering::SeqCst;
    self.0.inflight.fetch_sub(1, SeqCst);
    self.1.inflight.fetch_sub(1, SeqCst);
  }
}

/// Whether this node may answer at all now (a fleet node: while its lease
/// is live). Asked as the answer is handed to the connection, and again at
/// every write to the socket (`gate`): a node frozen after its durability
/// round acknowledged a write must not send that acknowledgement once past
/// its fence deadline.
pub type AnswerGate = Arc<dyn Fn() -> bool + Send + Sync>;

impl Listeners {
  /// Binds `n` listeners on `addr` with SO_REUSEPORT. Port 0 picks one port
  /// for all of them.
  pub fn bind(
    mut addr: SocketAddr,
    n: usize,
    limits: Limits,
    assets: Option<Arc<Assets>>,
    gate: Option<AnswerGate>,
  ) -> anyhow::Result<Arc<Self>> {
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
      limits,
      assets,
      gate,
      drain: Default::default(),
      eras: Default::default(),
    }))
  }

  /// Retires the accept loops of every pool but the newest: they hand
  /// their sockets to the newest pool's threads, and their connections
  /// close once answered. Returns the requests those pools still answer.
  pub fn retire_older(&self) -> usize {
    let eras = self.eras.lock().unwrap();
    let Some((_, older)) = eras.split_last() else {
      return 0;
    };
    for e in older {
      e.retired.send_replace(true);
    }
    self.older_inflight_in(&eras)
  }

  /// Requests still answered by retired pools' connections.
  pub fn older_inflight(&self) -> usize {
    self.older_inflight_in(&self.eras.lock().unwrap())
  }

  fn older_inflight_in(&self, eras: &[Arc<Era>]) -> usize {
    let n = eras.len().saturating_sub(1);
    eras[..n]
      .iter()
      .map(|e| e.inflight.load(std::sync::atomic::Ordering::SeqCst))
      .sum()
  }

  /// Starts draining: no new connections; open ones close after their next
  /// answer.
  pub fn drain(&self) {
    self
      .drain
      .draining
      .store(true, std::sync::atomic::Ordering::SeqCst);
    self.drain.started.send_replace(true);
  }

  /// Requests being answered now.
  pub fn inflight(&self) -> usize {
    self
      .drain
      .inflight
      .load(std::sync::atomic::Ordering::SeqCst)
  }

  /// The per-thread hook that serves HTTP on isolate thread `index` (of a
  /// new pool: it takes each socket once the older pool's thread gave it
  /// back, see `retire_older`).
  pub fn hook(self: &Arc<Self>) -> ThreadHook {
    let this = self.clone();
    let era = Arc::new(Era {
      retired: tokio::sync::watch::channel(false).0,
      inflight: Default::default(),
    });
    self.eras.lock().unwrap().push(era.clone());
    Arc::new(move |index, pool| {
      let (this, era) = (this.clone(), era.clone());
      Box::pin(async move {
        let listener = loop {
          if this
            .drain
            .draining
            .load(std::sync::atomic::Ordering::SeqCst)
          {
            return;
          }
          // Only the newest pool takes a socket (a pool that failed to
          // start may have some threads up).
          let newest = this.eras.lock().unwrap().last().cloned();
          let std = match newest {
            Some(n) if Arc::ptr_eq(&n, &era) => this
              .sockets
              .lock()
              .unwrap()
              .get_mut(index)
              .and_then(Option::take),
            _ => None,
          };
          match std {
            Some(std) => break std,
            None => tokio::time::sleep(std::time::Duration::from_millis(2)).await,
          }
        };
        let listener =
          tokio::net::TcpListener::from_std(listener).expect("registering the listener");
        let back = accept_loop(listener, index, pool, &this, era).await;
        if let Some(l) = back.and_then(|l| l.into_std().ok()) {
          this.sockets.lock().unwrap()[index] = Some(l);
        }
      })
    })
  }
}

/// Serves connections until the node drains (the listener closes) or the
/// pool retires (the listener is handed back).
async fn accept_loop(
  listener: tokio::net::TcpListener,
  index: usize,
  pool: IsolatePool,
  on: &Listeners,
  era: Arc<Era>,
) -> Option<tokio::net::TcpListener> {
  use std::sync::atomic::Ordering;
  let (limits, drain) = (on.limits, on.drain.clone());
  let mut started = drain.started.subscribe();
  let mut retired = era.retired.subscribe();
  loop {
    let accepted = tokio::select! {
      a = listener.accept() => a,
      _ = started.wait_for(|d| *d) => return None,
      _ = retired.wait_for(|r| *r) => return Some(listener),
    };
    if drain.draining.load(Ordering::SeqCst) {
      return None; // the listener closes: new connections go to other nodes
    }
    let stream = match accepted {
      Ok((stream, _)) => stream,
      Err(e) => {
        tracing::warn!("accept: {e}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        continue;
      }
    };
    let _ = stream.set_nodelay(true);
    let refusing = gate::Refusing::default();
    let write_gate = on.gate.clone();
    let conn = Rc::new(Conn {
      index,
      pool: pool.clone(),
      limits,
      assets: on.assets.clone(),
      gate: on.gate.clone(),
      drain: drain.clone(),
      era: era.clone(),
      refused: refusing.clone(),
      unasked: RefCell::new(Some(Unasked::new(&era))),
    });
    tokio::task::spawn_local(async move {
      let mut retiring = conn.era.retired.subscribe();
      let shared = conn.clone();
      let svc = hyper::service::service_fn(move |req| {
        let conn = conn.clone();
        async move {
          let counted = InFlight::new(&conn.drain, &conn.era);
          conn.unasked.borrow_mut().take();
          let mut res = handle(req, &conn).await?;
          drop(counted);
          // Draining or retired: this connection's client comes back on a
          // new one (to another node, or to the new version's threads).
          if (conn.drain.draining.load(Ordering::SeqCst) || *conn.era.retired.borrow())
            && res.status() != StatusCode::SWITCHING_PROTOCOLS
          {
            res
              .headers_mut()
              .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
          }
          Ok::<_, Infallible>(match &conn.gate {
            Some(may) if !may() => {
              conn.refused.set();
              plain(StatusCode::SERVICE_UNAVAILABLE, FENCED)
            }
            _ => res,
          })
        }
      });
      let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .max_buf_size(MAX_REQUEST_HEAD_BYTES)
        .serve_connection(
          TokioIo::new(gate::GatedIo::new(stream, write_gate, refusing)),
          svc,
        )
        .with_upgrades();
      tokio::pin!(conn);
      // When the pool retires an idle connection closes at once, a busy
      // one after its answer: its thread's isolate is about to stop. One
      // that was never asked anything may have its request on the way (it
      // connected just before the switch): it gets a moment to send it.
      let ended = tokio::select! {
        r = conn.as_mut() => Some(r),
        _ = retiring.wait_for(|r| *r) => None,
      };
      let ended = match ended {
        Some(r) => r,
        None => {
          let early = if shared.unasked.borrow().is_some() {
            tokio::select! {
              r = conn.as_mut() => Some(r),
              _ = tokio::time::sleep(UNASKED_GRACE) => None,
            }
          } else {
            None
          };
          match early {
            Some(r) => r,
            None => {
              conn.as_mut().graceful_shutdown();
              conn.await
            }
          }
        }
      };
      drop(shared);
      if let Err(e) = ended {
        tracing::debug!("connection: {e}");
      }
    });
  }
}

/// What a node past its fence deadline answers instead (the outcome of the
/// request is unknown to the client: it may have been written).
const FENCED: &str = "this node's lease could have lapsed: it answers nothing more\n";

/// What the requests of one connection share. Each request takes an `Rc`
/// of it rather than clones of the pool's and the node's `Arc`s, whose
/// reference counts every isolate thread would otherwise bump per request.
struct Conn {
  index: usize,
  pool: IsolatePool,
  limits: Limits,
  assets: Option<Arc<Assets>>,
  gate: Option<AnswerGate>,
  drain: Arc<Drain>,
  era: Arc<Era>,
  refused: gate::Refusing,
  /// Until the connection's first request starts.
  unasked: RefCell<Option<Unasked>>,
}

async fn handle(
  mut req: Request<Incoming>,
  conn: &Conn,
) -> Result<Response<ReplyStream>, Infallible> {
  let Conn {
    index,
    ref pool,
    limits,
    ref assets,
    ..
  } = *conn;
  let head = req.uri().to_string().len()
    + req
      .headers()
      .iter()
      .map(|(k, v)| k.as_str().len() + v.len() + 4)
      .sum::<usize>();
  if head > MAX_REQUEST_HEAD_BYTES {
    return Ok(plain(
      StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
      "Request Header Fields Too Large\n",
    ));
  }
  let declared = req
    .headers()
    .get(http::header::CONTENT_LENGTH)
    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
  if declared.is_some_and(|n| n > limits.max_body_bytes) {
    return Ok(plain(
      StatusCode::PAYLOAD_TOO_LARGE,
      "Payload Too Large: the request body exceeds this host's limit\n",
    ));
  }
  // A WebSocket handshake: the connection is upgraded if the Worker
  // answers 101 with a WebSocket.
  let upgrade = websocket_key(&req).map(|key| (key, hyper::upgrade::on(&mut req)));
  let (parts, body) = req.into_parts();
  let Some(url) = head::request_url(&parts.uri, &parts.headers) else {
    return Ok(plain(StatusCode::BAD_REQUEST, head::BAD_HOST));
  };
  if limits.test_scheduled
    && (parts.uri.path() == "/__scheduled" || parts.uri.path() == "/cdn-cgi/handler/scheduled")
  {
    return Ok(fire_scheduled(&parts.uri, index, pool).await);
  }
  // Static assets are answered here, before any isolate, unless the
  // router sends the request to the Worker.
  if let Some(assets) = &assets
    && let Ok(u) = url::Url::parse(&url)
  {
    let header = |n: &str| {
      parts
        .headers
        .get(n)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    };
    let req = cellhost_assets::Req {
      method: parts.method.as_str(),
      url: &u,
      header: &header,
    };
    if let Some(reply) = assets.answer(&req) {
      return Ok(asset_response(reply).await);
    }
  }
  let headers = parts
    .headers
    .iter()
    .map(|(k, v)| (ByteString::from(k.as_str()), ByteString::from(v.as_bytes())))
    .collect();
  // A body without a length is cut off where it passes the limit: the
  // Worker's read of it fails.
  let max = usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX);
  let body =
    (!body.is_end_stream()).then(|| http_body_util::Limited::new(body, max).boxed_unsync());
  let (tx, rx) = oneshot::channel();
  let job = HttpJob {
    actor: None,
    service: None,
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
  if let ReplyBody::WebSocket(_) = &reply.body {
    return Ok(upgrade_response(
      reply,
      upgrade,
      conn.drain.started.subscribe(),
    ));
  }
  Ok(to_response(reply))
}

/// Fires the scheduled handler by hand: `cron` and `time` (ms) from the
/// query, as wrangler reads them; the answer is the outcome.
async fn fire_scheduled(
  uri: &http::Uri,
  index: usize,
  pool: &IsolatePool,
) -> Response<ReplyStream> {
  let query: Vec<(String, String)> =
    url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
      .into_owned()
      .collect();
  let param = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
  let now = std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0);
  let (tx, rx) = oneshot::channel();
  let job = cellhost_host::ScheduledJob {
    cron: param("cron").unwrap_or_default(),
    scheduled_time_ms: param("time").and_then(|t| t.parse().ok()).unwrap_or(now),
    reply: tx,
  };
  if !pool.dispatch(index, Job::Scheduled(job)) {
    return error_response("the isolate thread is gone");
  }
  match rx.await {
    Ok(reply) => to_response(reply),
    Err(_) => error_response("the isolate dropped the scheduled event"),
  }
}

async fn asset_response(reply: cellhost_assets::Reply) -> Response<ReplyStream> {
  let body = match &reply.body {
    Some(b) => match b.read().await {
      Ok(bytes) => bytes,
      Err(e) => return error_response(&format!("reading {}: {e}", b.path.display())),
    },
    None => Bytes::new(),
  };
  let mut res = Response::new(ReplyStream::full(body));
  *res.status_mut() =
    StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
  let headers = res.headers_mut();
  for (k, v) in reply.headers {
    if let (Ok(k), Ok(v)) = (
      HeaderName::from_bytes(k.as_bytes()),
      HeaderValue::from_str(&v),
    ) {
      headers.append(k, v);
    }
  }
  res
}

fn websocket_key(req: &Request<Incoming>) -> Option<String> {
  let h = req.headers();
  let upgrade = h.get(http::header::UPGRADE)?.to_str().ok()?;
  if !upgrade.eq_ignore_ascii_case("websocket") {
    return None;
  }
  Some(
    h.get(http::header::SEC_WEBSOCKET_KEY)?
      .to_str()
      .ok()?
      .to_string(),
  )
}

/// Answers the handshake and serves the socket on the upgraded connection.
fn upgrade_response(
  reply: HttpReply,
  upgrade: Option<(String, hyper::upgrade::OnUpgrade)>,
  stop: tokio::sync::watch::Receiver<bool>,
) -> Response<ReplyStream> {
  let ReplyBody::WebSocket(ep) = reply.body else {
    unreachable!("checked by the caller")
  };
  let Some((key, on_upgrade)) = upgrade else {
    return error_response(
      "the Worker answered 101 to a request that is not a WebSocket handshake",
    );
  };
  let mut res = Response::new(ReplyStream::full(Bytes::new()));
  *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
  let headers = res.headers_mut();
  for (k, v) in reply.headers {
    if let (Ok(k), Ok(v)) = (HeaderName::from_bytes(&k), HeaderValue::from_bytes(&v)) {
      headers.append(k, v);
    }
  }
  headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
  headers.insert(
    http::header::CONNECTION,
    HeaderValue::from_static("Upgrade"),
  );
  if let Ok(v) = HeaderValue::from_str(&cellhost_ext::ws::accept_key(key.as_bytes())) {
    headers.insert(http::header::SEC_WEBSOCKET_ACCEPT, v);
  }
  tokio::task::spawn_local(async move {
    match on_upgrade.await {
      Ok(io) => cellhost_ext::ws::serve_upgraded(TokioIo::new(io), ep, Some(stop)).await,
      Err(e) => tracing::debug!("websocket upgrade: {e}"),
    }
  });
  res
}

fn to_response(reply: HttpReply) -> Response<ReplyStream> {
  let body = match reply.body {
    ReplyBody::Full(b) => ReplyStream::full(b),
    ReplyBody::Stream(rx) => ReplyStream::stream(rx),
    ReplyBody::Error(reason) => return error_response(&reason),
    ReplyBody::WebSocket(_) => return error_response("a WebSocket reply without a status of 101"),
  };
  if header_bytes(&reply.headers) > MAX_RESPONSE_HEADER_BYTES {
    return error_response("the response's headers exceed 128 KiB");
  }
  let mut res = Response::new(body);
  *res.status_mut() =
    StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
  let headers = res.headers_mut();
  for (k, v) in reply.headers {
    if let (Ok(k), Ok(v)) = (HeaderName::from_bytes(&k), HeaderValue::from_bytes(&v))
      && !is_connection_header(&k)
    {
      headers.append(k, v);
    }
  }
  res
}

/// Headers of the connection rather than of the response: the server sets
/// them, as workerd's does (kj drops a Worker's), so a Worker cannot close
/// the client's connection or reframe the body.
fn is_connection_header(name: &HeaderName) -> bool {
  use http::header::{CONNECTION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE};
  [CONNECTION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE].contains(name) || name == "keep-alive"
}

fn header_bytes(headers: &[(ByteString, ByteString)]) -> usize {
  headers.iter().map(|(k, v)| k.len() + v.len() + 4).sum()
}

fn plain(status: StatusCode, text: &'static str) -> Response<ReplyStream> {
  let mut res = Response::new(ReplyStream::full(Bytes::from_static(text.as_bytes())));
  *res.status_mut() = status;
  res.headers_mut().insert(
    http::header::CONTENT_TYPE,
    HeaderValue::from_static("text/plain;charset=UTF-8"),
  );
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

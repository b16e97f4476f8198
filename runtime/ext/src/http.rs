//! HTTP requests into an isolate and responses out of it.
//!
//! The server hands an [`HttpJob`] to an isolate's [`Inbox`]; JavaScript pulls
//! batches of jobs with `op_cellhost_next`, and answers each one with one of
//! the `op_cellhost_respond_*` ops, which complete the job's reply channel.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use deno_core::convert::ByteString;
use deno_core::{
  AsyncRefCell, AsyncResult, BufView, OpState, RcRef, Resource, ResourceId, ToV8, op2,
};
use deno_error::JsErrorBox;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::{mpsc, oneshot};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A request body as it reaches an isolate.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// One HTTP request for an isolate to answer.
pub struct HttpJob {
  pub method: String,
  pub url: String,
  pub headers: Vec<(ByteString, ByteString)>,
  /// `None` when the request has no body (GET, HEAD, empty POST).
  pub body: Option<Body>,
  pub reply: oneshot::Sender<HttpReply>,
}

pub struct HttpReply {
  pub status: u16,
  pub headers: Vec<(ByteString, ByteString)>,
  pub body: ReplyBody,
}

pub enum ReplyBody {
  Full(Bytes),
  /// Chunks as JavaScript produces them; an `Err` aborts the response.
  Stream(mpsc::Receiver<Result<Bytes, BoxError>>),
  /// The handler failed; the message is the logged reason.
  Error(String),
}

/// Per-isolate request queue and the reply channels of requests in flight.
/// Lives in the isolate's `OpState`; dropping it (isolate recycled) drops the
/// reply senders, which the server turns into 500s.
pub struct Inbox {
  rx: RefCell<mpsc::UnboundedReceiver<HttpJob>>,
  pending: RefCell<HashMap<u32, oneshot::Sender<HttpReply>>>,
  next_id: Cell<u32>,
}

impl Inbox {
  pub fn new(rx: mpsc::UnboundedReceiver<HttpJob>) -> Self {
    Inbox {
      rx: RefCell::new(rx),
      pending: Default::default(),
      next_id: Cell::new(1),
    }
  }

  /// Requests handed to JavaScript and not yet answered.
  pub fn in_flight(&self) -> usize {
    self.pending.borrow().len()
  }

  /// Fails every request handed to JavaScript and not yet answered (the
  /// isolate is being recycled).
  pub fn fail_in_flight(&self, reason: &str) {
    for (_, tx) in self.pending.borrow_mut().drain() {
      let body = ReplyBody::Error(reason.to_string());
      let _ = tx.send(HttpReply {
        status: 500,
        headers: Vec::new(),
        body,
      });
    }
  }

  fn complete(&self, id: u32, reply: HttpReply) {
    if let Some(tx) = self.pending.borrow_mut().remove(&id) {
      // The client may have gone away; nothing to do then.
      let _ = tx.send(reply);
    }
  }
}

#[derive(ToV8)]
pub struct JsJob {
  id: u32,
  method: String,
  url: String,
  headers: Vec<(ByteString, ByteString)>,
  body_rid: Option<ResourceId>,
}

fn inbox(state: &OpState) -> Rc<Inbox> {
  state.borrow::<Rc<Inbox>>().clone()
}

/// Waits for the next requests; returns every queued one at once so a busy
/// isolate pays one promise resolution per batch, not per request.
#[op2]
pub async fn op_cellhost_next(state: Rc<RefCell<OpState>>) -> Option<Vec<JsJob>> {
  let inbox = inbox(&state.borrow());
  let mut buf = Vec::new();
  let n = std::future::poll_fn(|cx| inbox.rx.borrow_mut().poll_recv_many(cx, &mut buf, 128)).await;
  if n == 0 {
    return None;
  }
  let mut state = state.borrow_mut();
  let jobs = buf
    .into_iter()
    .map(|job| {
      let id = inbox.next_id.get();
      inbox.next_id.set(id.wrapping_add(1));
      inbox.pending.borrow_mut().insert(id, job.reply);
      let body_rid = job
        .body
        .map(|b| state.resource_table.add(RequestBody::new(b)));
      JsJob {
        id,
        method: job.method,
        url: job.url,
        headers: job.headers,
        body_rid,
      }
    })
    .collect();
  Some(jobs)
}

#[op2]
pub fn op_cellhost_respond_text(
  state: &mut OpState,
  #[smi] id: u32,
  #[smi] status: u32,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[string] body: String,
) {
  let reply = HttpReply {
    status: status as u16,
    headers,
    body: ReplyBody::Full(body.into()),
  };
  inbox(state).complete(id, reply);
}

#[op2]
pub fn op_cellhost_respond_bytes(
  state: &mut OpState,
  #[smi] id: u32,
  #[smi] status: u32,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[buffer(copy)] body: Bytes,
) {
  let body = ReplyBody::Full(body);
  inbox(state).complete(
    id,
    HttpReply {
      status: status as u16,
      headers,
      body,
    },
  );
}

#[op2(fast)]
pub fn op_cellhost_respond_error(state: &mut OpState, #[smi] id: u32, #[string] message: String) {
  let reply = HttpReply {
    status: 500,
    headers: Vec::new(),
    body: ReplyBody::Error(message),
  };
  inbox(state).complete(id, reply);
}

/// Streams a JavaScript ReadableStream (as a resource) into the response.
#[op2]
pub fn op_cellhost_respond_stream(
  state: &mut OpState,
  #[smi] id: u32,
  #[smi] status: u32,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[smi] rid: ResourceId,
) -> Result<(), deno_core::error::ResourceError> {
  let resource = state.resource_table.take_any(rid)?;
  let (tx, rx) = mpsc::channel(4);
  inbox(state).complete(
    id,
    HttpReply {
      status: status as u16,
      headers,
      body: ReplyBody::Stream(rx),
    },
  );
  deno_core::unsync::spawn(async move {
    loop {
      match resource.clone().read(64 * 1024).await {
        Ok(buf) if buf.is_empty() => break,
        Ok(buf) => {
          if tx.send(Ok(Bytes::copy_from_slice(&buf))).await.is_err() {
            break; // client went away
          }
        }
        Err(e) => {
          let _ = tx.send(Err(e.to_string().into())).await;
          break;
        }
      }
    }
    resource.close();
  });
  Ok(())
}

/// A request body exposed to JavaScript as a readable resource.
struct RequestBody {
  body: AsyncRefCell<Body>,
  leftover: RefCell<Option<Bytes>>,
}

impl RequestBody {
  fn new(body: Body) -> Self {
    RequestBody {
      body: AsyncRefCell::new(body),
      leftover: RefCell::new(None),
    }
  }
}

impl Resource for RequestBody {
  fn name(&self) -> Cow<'_, str> {
    "cellhostRequestBody".into()
  }

  fn read(self: Rc<Self>, limit: usize) -> AsyncResult<BufView> {
    Box::pin(async move {
      let take = |mut data: Bytes, this: &Self| {
        if data.len() > limit {
          let rest = data.split_off(limit);
          *this.leftover.borrow_mut() = Some(rest);
        }
        BufView::from(data)
      };
      let leftover = self.leftover.borrow_mut().take();
      if let Some(data) = leftover {
        return Ok(take(data, &self));
      }
      let mut body = RcRef::map(&self, |r| &r.body).borrow_mut().await;
      loop {
        match body.frame().await {
          None => return Ok(BufView::empty()),
          Some(Err(e)) => return Err(JsErrorBox::generic(format!("request body: {e}"))),
          Some(Ok(frame)) => {
            if let Ok(data) = frame.into_data()
              && !data.is_empty()
            {
              return Ok(take(data, &self));
            }
          }
        }
      }
    })
  }
}

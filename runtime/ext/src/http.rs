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
use deno_core::convert::{ByteString, Uint8Array};
use deno_core::{
  AsyncRefCell, AsyncResult, BufView, OpState, RcRef, Resource, ResourceId, ToV8, op2,
};
use deno_error::JsErrorBox;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::{mpsc, oneshot};

use crate::gate::{Gate, Held, error_json, gate_for, gated};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A request body as it reaches an isolate.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// Work for an isolate: an HTTP request (to the Worker or to a Durable
/// Object it hosts) or an RPC call to a Durable Object.
pub enum Job {
  Http(HttpJob),
  Rpc(RpcJob),
  Export(ExportJob),
  /// The object's alarm may be due (see `wake`); nobody waits for a reply.
  Alarm(AlarmJob),
  /// A Cron Trigger fired (or was fired by hand): the Worker's
  /// `scheduled()` handler runs; the reply's body is the outcome.
  Scheduled(ScheduledJob),
  /// A batch of queue messages for the consumer.
  Queue(QueueJob),
  /// JS RPC from another Worker of the process, through a service binding.
  Service(ServiceJob),
  /// This isolate's version was replaced (see `generation`): its cells are
  /// handed over to the new isolates at their idle points.
  Retire,
  /// A cell handed over from a retiring isolate: its hibernatable sockets
  /// are read here from now on.
  Adopt(ActorTarget),
}

impl Job {
  /// The Durable Object this job is for, if any.
  pub fn target(&self) -> Option<&ActorTarget> {
    match self {
      Job::Http(j) => j.actor.as_ref(),
      Job::Rpc(j) => Some(&j.target),
      Job::Alarm(j) => Some(&j.target),
      Job::Adopt(t) => Some(t),
      _ => None,
    }
  }

  /// The Durable Object this job is for, if any.
  pub fn target_mut(&mut self) -> Option<&mut ActorTarget> {
    match self {
      Job::Http(j) => j.actor.as_mut(),
      Job::Rpc(j) => Some(&mut j.target),
      Job::Alarm(j) => Some(&mut j.target),
      Job::Adopt(t) => Some(t),
      _ => None,
    }
  }
}

/// The entrypoint of this Worker another Worker's service binding calls.
#[derive(Clone, Debug)]
pub struct ServiceTarget {
  /// `{ "entrypoint": name or null, "props": {...} }`.
  pub json: String,
}

/// `env.SERVICE.method(...args)` from another Worker: arguments and result
/// in V8 serialization (plain values: nothing passes by reference).
pub struct ServiceJob {
  pub target: ServiceTarget,
  pub method: String,
  pub args: Vec<u8>,
  pub reply: oneshot::Sender<RpcReply>,
}

/// A batch for the Worker's `queue()` handler; the reply's body is the
/// outcome as JSON (see cellhost-queues' `Outcome`).
pub struct QueueJob {
  pub queue: String,
  /// The batch as JSON (`cellhost_queues::batch_json`).
  pub batch: String,
  pub reply: oneshot::Sender<HttpReply>,
}

pub struct ScheduledJob {
  /// The cron expression that fired ("" when fired by hand without one).
  pub cron: String,
  /// When it was due, in ms since the epoch.
  pub scheduled_time_ms: u64,
  /// 200 "ok" or 500 "exception".
  pub reply: oneshot::Sender<HttpReply>,
}

pub struct AlarmJob {
  pub target: ActorTarget,
}

/// A call to a function or `RpcTarget` this isolate passed over RPC (the
/// other side holds a stub for it).
pub struct ExportJob {
  pub export: u32,
  /// The method of an `RpcTarget`; empty to call a function itself.
  pub method: String,
  pub args: Vec<u8>,
  pub reply: oneshot::Sender<RpcReply>,
}

/// A Durable Object a job is for.
#[derive(Clone, Debug)]
pub struct ActorTarget {
  pub ns: u32,
  pub id: String,
  pub name: Option<String>,
  /// The fleet node a forwarded call came from (`None`: this node). Stubs
  /// and `RpcTarget`s cannot cross nodes, so such a call refuses them.
  pub from: Option<String>,
}

/// `stub.method(...args)`: arguments and result in V8 serialization.
pub struct RpcJob {
  pub target: ActorTarget,
  pub method: String,
  pub args: Vec<u8>,
  pub reply: oneshot::Sender<RpcReply>,
}

/// An RPC result: the serialized value, or (not ok) the error as JSON.
pub struct RpcReply {
  pub ok: bool,
  pub payload: Vec<u8>,
}

/// One HTTP request for an isolate to answer.
pub struct HttpJob {
  /// Set when the request is `stub.fetch()` to a Durable Object.
  pub actor: Option<ActorTarget>,
  /// Set when the request is another Worker's `env.SERVICE.fetch()`.
  pub service: Option<ServiceTarget>,
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
  /// A 101 that hands over one end of a WebSocket.
  WebSocket(crate::ws::Endpoint),
}

/// Per-isolate request queue and the reply channels of requests in flight.
/// Lives in the isolate's `OpState`; dropping it (isolate recycled) drops the
/// reply senders, which the server turns into 500s.
pub struct Inbox {
  rx: RefCell<mpsc::UnboundedReceiver<Job>>,
  /// Jobs taken from `rx` out of turn (a cell handed over took its own
  /// calls out): served before `rx`, in order.
  front: RefCell<std::collections::VecDeque<Job>>,
  pub(crate) pending: RefCell<HashMap<u32, oneshot::Sender<HttpReply>>>,
  pub(crate) pending_rpc: RefCell<HashMap<u32, oneshot::Sender<RpcReply>>>,
  /// Which output gate each pending job's reply passes (see `Gate`).
  pub(crate) gates: RefCell<HashMap<u32, Gate>>,
  /// Replies waiting for the end-of-turn commit (the output gate), with the
  /// commit round they wait for and the cell whose writes they could reveal
  /// (`None`: any cell of the isolate).
  pub(crate) held: RefCell<Vec<(u64, Option<String>, Held)>>,
  /// Jobs in flight whose object was reset (its writes were lost): whatever
  /// they answer later goes out as this error (message, `durableObjectReset`).
  pub(crate) doomed: RefCell<HashMap<u32, (String, bool)>>,
  next_id: Cell<u32>,
  /// JavaScript holds a batch of object jobs it has not begun to dispatch:
  /// no call may skip the queue meanwhile (see `local`).
  pub(crate) in_hand: Cell<bool>,
  /// Answers to calls made in place (`local`), until their caller awaits.
  pub(crate) local_answers: RefCell<HashMap<u32, oneshot::Receiver<RpcReply>>>,
  /// The queue closed: no job will come again.
  closed: Cell<bool>,
}

impl Inbox {
  pub fn new(rx: mpsc::UnboundedReceiver<Job>) -> Self {
    Inbox {
      rx: RefCell::new(rx),
      front: Default::default(),
      pending: Default::default(),
      pending_rpc: Default::default(),
      gates: Default::default(),
      held: Default::default(),
      doomed: Default::default(),
      next_id: Cell::new(1),
      in_hand: Cell::new(false),
      local_answers: Default::default(),
      closed: Cell::new(false),
    }
  }

  /// How many jobs JavaScript has picked up so far (wrapping): it moves
  /// whenever the isolate is given work.
  pub fn taken(&self) -> u32 {
    self.next_id.get()
  }

  /// A call JavaScript answers with `op_do_reply`, made without the queue
  /// (`local`): its new job id.
  pub(crate) fn register_rpc(&self, reply: oneshot::Sender<RpcReply>, gate: Gate) -> u32 {
    let id = self.new_job_id();
    self.expect_rpc(id, reply, gate);
    id
  }

  /// The id of a job JavaScript is given now.
  fn new_job_id(&self) -> u32 {
    let id = self.next_id.get();
    self.next_id.set(id.wrapping_add(1));
    id
  }

  /// Job `id` is a call JavaScript answers with `op_do_reply`: its reply
  /// channel, and the output gate its answer passes.
  fn expect_rpc(&self, id: u32, reply: oneshot::Sender<RpcReply>, gate: Gate) {
    self.pending_rpc.borrow_mut().insert(id, reply);
    self.gates.borrow_mut().insert(id, gate);
  }

  /// Whether the queue closed (the pool stopped): no job comes again.
  pub fn closed(&self) -> bool {
    self.closed.get()
  }

  /// Whether work is waiting that JavaScript has not picked up yet.
  pub fn has_queued(&self) -> bool {
    !self.rx.borrow().is_empty() || !self.front.borrow().is_empty()
  }

  /// The next queued job, without waiting.
  pub(crate) fn try_next(&self) -> Option<Job> {
    if let Some(j) = self.front.borrow_mut().pop_front() {
      return Some(j);
    }
    self.rx.borrow_mut().try_recv().ok()
  }

  /// Puts `jobs` back, ahead of everything still queued.
  pub(crate) fn push_front(&self, jobs: Vec<Job>) {
    let mut f = self.front.borrow_mut();
    for j in jobs.into_iter().rev() {
      f.push_front(j);
    }
  }

  /// Fails every request handed to JavaScript and not yet answered (the
  /// isolate is being recycled).
  pub fn fail_in_flight(&self, reason: &str) {
    self.held.borrow_mut().clear();
    self.gates.borrow_mut().clear();
    self.doomed.borrow_mut().clear();
    // The objects on this isolate are gone with it: callers see a reset.
    let error = error_json(reason, true);
    for (_, tx) in self.pending.borrow_mut().drain() {
      let body = ReplyBody::Error(String::from_utf8_lossy(&error).into());
      let _ = tx.send(HttpReply {
        status: 500,
        headers: Vec::new(),
        body,
      });
    }
    for (_, tx) in self.pending_rpc.borrow_mut().drain() {
      let _ = tx.send(RpcReply {
        ok: false,
        payload: error.clone(),
      });
    }
  }
}

#[derive(ToV8)]
pub struct JsJob {
  id: u32,
  /// "http", "rpc", "export", "alarm" or "scheduled" (cron in `method`,
  /// the scheduled time in ms in `url`).
  kind: &'static str,
  /// The HTTP method, or the RPC method name.
  method: String,
  url: Option<String>,
  headers: Option<Vec<(ByteString, ByteString)>>,
  body_rid: Option<ResourceId>,
  args: Option<Uint8Array>,
  actor: Option<JsActor>,
  export: Option<u32>,
  /// For a call from another Worker: `{ entrypoint, props }` as JSON.
  service: Option<String>,
}

#[derive(ToV8)]
pub struct JsActor {
  ns: u32,
  id: String,
  name: Option<String>,
  remote: Option<String>,
}

impl From<ActorTarget> for JsActor {
  fn from(t: ActorTarget) -> Self {
    JsActor {
      ns: t.ns,
      id: t.id,
      name: t.name,
      remote: t.from,
    }
  }
}

pub(crate) fn inbox(state: &OpState) -> Rc<Inbox> {
  state.borrow::<Rc<Inbox>>().clone()
}

/// Waits for the next requests; returns every queued one at once so a busy
/// isolate pays one promise resolution per batch, not per request.
#[op2]
pub async fn op_cellhost_next(state: Rc<RefCell<OpState>>) -> Option<Vec<JsJob>> {
  let inbox = inbox(&state.borrow());
  let mut buf = Vec::new();
  loop {
    buf.extend(inbox.front.borrow_mut().drain(..));
    if buf.is_empty() {
      let n =
        std::future::poll_fn(|cx| inbox.rx.borrow_mut().poll_recv_many(cx, &mut buf, 128)).await;
      if n == 0 {
        inbox.closed.set(true);
        return None;
      }
    }
    let retire = crate::generation::sort_batch(&state.borrow(), &inbox, &mut buf);
    if retire {
      buf.push(Job::Retire);
    }
    if !buf.is_empty() {
      break;
    }
  }
  let mut state = state.borrow_mut();
  {
    let router = state.borrow::<crate::actor::Router>();
    for job in &buf {
      router.taken(job);
    }
  }
  inbox.in_hand.set(buf.iter().any(|j| j.target().is_some()));
  let jobs = buf
    .into_iter()
    .map(|job| {
      let id = inbox.new_job_id();
      match job {
        Job::Http(job) => {
          inbox.pending.borrow_mut().insert(id, job.reply);
          if let Some(actor) = &job.actor {
            inbox
              .gates
              .borrow_mut()
              .insert(id, gate_for(&state, actor.ns, &actor.id));
          }
          let body_rid = job
            .body
            .map(|b| state.resource_table.add(RequestBody::new(b)));
          JsJob {
            id,
            kind: "http",
            method: job.method,
            url: Some(job.url),
            headers: Some(job.headers),
            body_rid,
            args: None,
            actor: job.actor.map(JsActor::from),
            export: None,
            service: job.service.map(|s| s.json),
          }
        }
        Job::Rpc(job) => {
          inbox.expect_rpc(
            id,
            job.reply,
            gate_for(&state, job.target.ns, &job.target.id),
          );
          JsJob {
            id,
            kind: "rpc",
            method: job.method,
            url: None,
            headers: None,
            body_rid: None,
            args: Some(job.args.into()),
            actor: Some(job.target.into()),
            export: None,
            service: None,
          }
        }
        Job::Export(job) => {
          inbox.expect_rpc(id, job.reply, Gate::Isolate);
          JsJob {
            id,
            kind: "export",
            method: job.method,
            url: None,
            headers: None,
            body_rid: None,
            args: Some(job.args.into()),
            actor: None,
            export: Some(job.export),
            service: None,
          }
        }
        Job::Scheduled(job) => {
          inbox.pending.borrow_mut().insert(id, job.reply);
          JsJob {
            id,
            kind: "scheduled",
            method: job.cron,
            url: Some(job.scheduled_time_ms.to_string()),
            headers: None,
            body_rid: None,
            args: None,
            actor: None,
            export: None,
            service: None,
          }
        }
        Job::Queue(job) => {
          inbox.pending.borrow_mut().insert(id, job.reply);
          JsJob {
            id,
            kind: "queue",
            method: job.queue,
            url: Some(job.batch),
            headers: None,
            body_rid: None,
            args: None,
            actor: None,
            export: None,
            service: None,
          }
        }
        Job::Service(job) => {
          inbox.expect_rpc(id, job.reply, Gate::Isolate);
          JsJob {
            id,
            kind: "service",
            method: job.method,
            url: None,
            headers: None,
            body_rid: None,
            args: Some(job.args.into()),
            actor: None,
            export: None,
            service: Some(job.target.json),
          }
        }
        Job::Retire => JsJob {
          id,
          kind: "retire",
          method: String::new(),
          url: None,
          headers: None,
          body_rid: None,
          args: None,
          actor: None,
          export: None,
          service: None,
        },
        Job::Adopt(target) => JsJob {
          id,
          kind: "adopt",
          method: String::new(),
          url: None,
          headers: None,
          body_rid: None,
          args: None,
          actor: Some(target.into()),
          export: None,
          service: None,
        },
        Job::Alarm(job) => JsJob {
          id,
          kind: "alarm",
          method: String::new(),
          url: None,
          headers: None,
          body_rid: None,
          args: None,
          actor: Some(job.target.into()),
          export: None,
          service: None,
        },
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
  respond(state, id, status, headers, ReplyBody::Full(body.into()));
}

#[op2]
pub fn op_cellhost_respond_bytes(
  state: &mut OpState,
  #[smi] id: u32,
  #[smi] status: u32,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[buffer(copy)] body: Bytes,
) {
  respond(state, id, status, headers, ReplyBody::Full(body));
}

/// The handler threw: a 500 for a client, the error itself (as JSON) for a
/// `stub.fetch()` caller.
#[op2(fast)]
pub fn op_cellhost_respond_error(state: &mut OpState, #[smi] id: u32, #[string] message: String) {
  respond(state, id, 500, Vec::new(), ReplyBody::Error(message));
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
  respond(
    state,
    id,
    status,
    headers,
    ReplyBody::Stream(pump(resource)),
  );
  Ok(())
}

pub(crate) fn respond(
  state: &mut OpState,
  id: u32,
  status: u32,
  headers: Vec<(ByteString, ByteString)>,
  body: ReplyBody,
) {
  let reply = HttpReply {
    status: status as u16,
    headers,
    body,
  };
  let gate = gated(state, id);
  inbox(state).complete(id, reply, gate);
}

/// Reads a readable resource (a JavaScript stream) into a channel, so the
/// bytes can leave the isolate thread.
pub(crate) fn pump(resource: Rc<dyn Resource>) -> mpsc::Receiver<Result<Bytes, BoxError>> {
  let (tx, rx) = mpsc::channel(4);
  deno_core::unsync::spawn(async move {
    loop {
      match resource.clone().read(64 * 1024).await {
        Ok(buf) if buf.is_empty() => break,
        Ok(buf) => {
          if tx.send(Ok(Bytes::copy_from_slice(&buf))).await.is_err() {
            break; // the reader went away
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
  rx
}

/// A request body exposed to JavaScript as a readable resource.
pub(crate) struct RequestBody {
  body: AsyncRefCell<Body>,
  leftover: RefCell<Option<Bytes>>,
}

impl RequestBody {
  pub(crate) fn new(body: Body) -> Self {
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

//! Durable Object namespaces and stubs: ids, placement of each object on one
//! isolate thread, and the calls (`stub.fetch()`, RPC) that travel there.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use deno_core::convert::{ByteString, Uint8Array};
use deno_core::{OpState, ResourceId, ToV8, op2};
use deno_error::JsErrorBox;
use http_body_util::BodyExt;
use tokio::sync::{mpsc, oneshot};

use crate::body::ReplyStream;
use crate::http::{
  ActorTarget, ExportJob, HttpJob, HttpReply, Job, ReplyBody, RequestBody, RpcJob, RpcReply, gated,
  inbox, pump,
};
use crate::id;

/// One `durable_objects.bindings` entry.
#[derive(Clone, Debug)]
pub struct Namespace {
  pub binding: String,
  pub class_name: String,
  /// `<script name>-<ClassName>`: the input of id derivation and the folder
  /// of the objects' databases.
  pub unique_key: String,
  pub key: [u8; 32],
  /// Declared by `new_sqlite_classes` (the SQL API is available).
  pub sqlite: bool,
}

impl Namespace {
  pub fn new(binding: &str, class_name: &str, script: &str, sqlite: bool) -> Self {
    let unique_key = format!("{script}-{class_name}");
    Namespace {
      binding: binding.into(),
      class_name: class_name.into(),
      key: id::namespace_key(&unique_key),
      unique_key,
      sqlite,
    }
  }
}

/// Every isolate's queue and the namespaces, shared by all isolates.
#[derive(Clone)]
pub struct Router {
  pub isolates: Arc<Vec<mpsc::UnboundedSender<Job>>>,
  pub namespaces: Arc<Vec<Namespace>>,
  /// On a fleet: takes calls for cells another node owns to that node.
  pub forward: Option<Arc<dyn Forward>>,
  /// `cellhost node`: the pools of every version this process serves;
  /// calls go where their cell lives (see `generation`).
  pub gens: Option<Arc<crate::generation::Generations>>,
}

/// The fleet's forwarding, as the stubs see it (implemented by the peer
/// crate, so this crate needs no network client).
pub trait Forward: Send + Sync + std::fmt::Debug {
  /// Takes `job` (`stub.fetch()` or an RPC call for an object of `ns`) to
  /// the node that owns its cell and answers the job's reply channel there,
  /// or hands the job back: the cell is this node's to serve (held here, by
  /// nobody, or by a node whose lease lapsed).
  fn forward(
    &self,
    ns: &Namespace,
    target: &ActorTarget,
    job: Job,
  ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Job>>>>;
}

/// Which of `n` isolates an object lives on, for its whole life there.
pub(crate) fn place(id_hex: &str, n: usize) -> usize {
  let h = u32::from_str_radix(id_hex.get(..8).unwrap_or("0"), 16).unwrap_or(0);
  h as usize % n.max(1)
}

impl Router {
  /// The isolate an object lives on, for its whole life in this process.
  pub fn place(&self, id_hex: &str) -> usize {
    place(id_hex, self.isolates.len())
  }

  /// Queues `job` on the isolate of `target`, on this node.
  pub fn send(&self, target: &ActorTarget, job: Job) -> Result<(), JsErrorBox> {
    if let Some(g) = &self.gens {
      return g.send(&self.namespaces, job);
    }
    self.isolates[self.place(&target.id)]
      .send(job)
      .map_err(|_| JsErrorBox::generic("Network connection lost."))
  }

  /// Sends a stub's `job` where its object lives: here, or (on a fleet)
  /// forwarded to the node that owns it.
  async fn dispatch(&self, target: &ActorTarget, job: Job) -> Result<(), JsErrorBox> {
    let job = match (&self.forward, self.namespaces.get(target.ns as usize)) {
      (Some(f), Some(ns)) => match f.forward(ns, target, job).await {
        Some(job) => job,
        None => return Ok(()),
      },
      _ => job,
    };
    self.send(target, job)
  }

  fn ns(&self, ns: u32) -> Result<&Namespace, JsErrorBox> {
    self
      .namespaces
      .get(ns as usize)
      .ok_or_else(|| JsErrorBox::type_error("unknown namespace"))
  }
}

fn router(state: &OpState) -> Router {
  state.borrow::<Router>().clone()
}

#[op2]
#[string]
pub fn op_do_id_from_name(
  state: &mut OpState,
  #[smi] ns: u32,
  #[string] name: &str,
) -> Result<String, JsErrorBox> {
  let r = router(state);
  Ok(id::to_hex(&id::from_name(&r.ns(ns)?.key, name)))
}

#[op2]
#[string]
pub fn op_do_unique_id(state: &mut OpState, #[smi] ns: u32) -> Result<String, JsErrorBox> {
  let r = router(state);
  let mut random = [0u8; 16];
  getrandom(&mut random);
  Ok(id::to_hex(&id::unique(&r.ns(ns)?.key, random)))
}

pub(crate) fn getrandom(buf: &mut [u8]) {
  use std::io::Read;
  if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
    let _ = f.read_exact(buf);
  }
}

#[op2]
#[string]
pub fn op_do_id_from_string(
  state: &mut OpState,
  #[smi] ns: u32,
  #[string] s: &str,
) -> Result<String, JsErrorBox> {
  let r = router(state);
  let id = id::from_string(&r.ns(ns)?.key, s).map_err(JsErrorBox::type_error)?;
  Ok(id::to_hex(&id))
}

/// The response to `stub.fetch()`, or the error the object threw (as JSON).
#[derive(ToV8)]
pub struct ActorResponse {
  status: u16,
  headers: Vec<(ByteString, ByteString)>,
  body_rid: Option<ResourceId>,
  /// The object answered 101 with one end of a WebSocket.
  ws_rid: Option<ResourceId>,
  error: Option<String>,
}

#[op2]
#[allow(clippy::too_many_arguments)]
pub async fn op_do_fetch(
  state: Rc<RefCell<OpState>>,
  #[smi] ns: u32,
  #[string] id: String,
  #[string] name: Option<String>,
  #[string] method: String,
  #[string] url: String,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[smi] body_rid: Option<ResourceId>,
) -> Result<ActorResponse, JsErrorBox> {
  let router = router(&state.borrow());
  let target = ActorTarget {
    ns,
    id,
    name,
    from: None,
  };
  fetch_through(state, body_rid, |body, reply| {
    let job = HttpJob {
      actor: Some(target.clone()),
      service: None,
      method,
      url,
      headers,
      body,
      reply,
    };
    async move { router.dispatch(&target, Job::Http(job)).await }
  })
  .await
}

/// Sends a request (its body taken from `body_rid`) with `send` and turns
/// the answer into what the caller's JS reads: `stub.fetch()` to an object,
/// or a service binding's `fetch()` to another Worker.
pub(crate) async fn fetch_through<F>(
  state: Rc<RefCell<OpState>>,
  body_rid: Option<ResourceId>,
  send: impl FnOnce(Option<crate::http::Body>, oneshot::Sender<HttpReply>) -> F,
) -> Result<ActorResponse, JsErrorBox>
where
  F: std::future::Future<Output = Result<(), JsErrorBox>>,
{
  let body = match body_rid {
    Some(rid) => {
      let res = state
        .borrow_mut()
        .resource_table
        .take_any(rid)
        .map_err(JsErrorBox::from_err)?;
      Some(ReplyStream::stream(pump(res)).boxed_unsync())
    }
    None => None,
  };
  let (tx, rx) = oneshot::channel();
  send(body, tx).await?;
  let reply: HttpReply = rx
    .await
    .map_err(|_| JsErrorBox::generic("Network connection lost."))?;
  let body = match reply.body {
    ReplyBody::Error(e) => {
      return Ok(ActorResponse {
        status: 500,
        headers: vec![],
        body_rid: None,
        ws_rid: None,
        error: Some(e),
      });
    }
    ReplyBody::WebSocket(ep) => {
      let rid = state
        .borrow_mut()
        .resource_table
        .add(crate::ws::WsResource::new(ep));
      return Ok(ActorResponse {
        status: reply.status,
        headers: reply.headers,
        body_rid: None,
        ws_rid: Some(rid),
        error: None,
      });
    }
    ReplyBody::Full(b) if b.is_empty() => None,
    ReplyBody::Full(b) => Some(ReplyStream::full(b)),
    ReplyBody::Stream(rx) => Some(ReplyStream::stream(rx)),
  };
  let body_rid = body.map(|b| {
    state
      .borrow_mut()
      .resource_table
      .add(RequestBody::new(b.boxed_unsync()))
  });
  Ok(ActorResponse {
    status: reply.status,
    headers: reply.headers,
    body_rid,
    ws_rid: None,
    error: None,
  })
}

/// `stub.method(...args)`: returns `[ok, payload]` (value bytes, or error JSON).
#[op2]
pub async fn op_do_call(
  state: Rc<RefCell<OpState>>,
  #[smi] ns: u32,
  #[string] id: String,
  #[string] name: Option<String>,
  #[string] method: String,
  #[buffer(copy)] args: Vec<u8>,
) -> Result<(bool, Uint8Array), JsErrorBox> {
  let router = router(&state.borrow());
  let target = ActorTarget {
    ns,
    id,
    name,
    from: None,
  };
  let (tx, rx) = oneshot::channel();
  router
    .dispatch(
      &target,
      Job::Rpc(RpcJob {
        target: target.clone(),
        method,
        args,
        reply: tx,
      }),
    )
    .await?;
  rpc_answer(rx).await
}

/// The answer to an RPC job as `[ok, payload]` (the other side gone:
/// "Network connection lost.").
pub(crate) async fn rpc_answer(
  rx: oneshot::Receiver<RpcReply>,
) -> Result<(bool, Uint8Array), JsErrorBox> {
  let reply = rx
    .await
    .map_err(|_| JsErrorBox::generic("Network connection lost."))?;
  Ok((reply.ok, reply.payload.into()))
}

/// A call through a stub for a function or `RpcTarget` that isolate
/// `isolate` passed over RPC: `[ok, payload]` as for `op_do_call`.
#[op2]
pub async fn op_do_call_export(
  state: Rc<RefCell<OpState>>,
  #[smi] isolate: u32,
  #[smi] export: u32,
  #[string] method: String,
  #[buffer(copy)] args: Vec<u8>,
) -> Result<(bool, Uint8Array), JsErrorBox> {
  let router = router(&state.borrow());
  let (tx, rx) = oneshot::channel();
  let queue = router
    .isolates
    .get(isolate as usize)
    .ok_or_else(|| JsErrorBox::type_error("unknown isolate"))?;
  queue
    .send(Job::Export(ExportJob {
      export,
      method,
      args,
      reply: tx,
    }))
    .map_err(|_| JsErrorBox::generic("Network connection lost."))?;
  rpc_answer(rx).await
}

/// The object's answer to an RPC call; waits for the output gate.
#[op2(fast)]
pub fn op_do_reply(state: &mut OpState, #[smi] id: u32, ok: bool, #[buffer] payload: &[u8]) {
  let gate = gated(state, id);
  inbox(state).complete_rpc(
    id,
    RpcReply {
      ok,
      payload: payload.to_vec(),
    },
    gate,
  );
}

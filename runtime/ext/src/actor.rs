//! Durable Object namespaces and stubs: ids, placement of each object on one
//! isolate thread, and the calls (`stub.fetch()`, RPC) that travel there.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use cellhost_logic::place::Placement;

use deno_core::convert::{ByteString, Uint8Array};
use deno_core::{OpState, ResourceId, ToV8, op2};
use deno_error::JsErrorBox;
use http_body_util::BodyExt;
use tokio::sync::{mpsc, oneshot};

use crate::body::ReplyStream;
use crate::gate::gated;
use crate::http::{
  ActorTarget, ExportJob, HttpJob, HttpReply, Job, ReplyBody, RequestBody, RpcJob, RpcReply, inbox,
  pump,
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
  /// Without generations or a fleet: an object lives on the isolate that
  /// called it first (see `cellhost_logic::place`).
  pub placement: Option<Arc<Mutex<Placement>>>,
  /// The isolate this router's calls are made on (none: the wake schedule,
  /// the pool).
  pub here: Option<usize>,
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

  /// Placement by first caller, where it applies: a pool serving without
  /// generations or a fleet. One isolate keeps it too: its counts of queued
  /// jobs tell when a call may be answered in place (see `local`).
  pub fn placement_for(gens: bool, fleet: bool) -> Option<Arc<Mutex<Placement>>> {
    (!gens && !fleet).then(Default::default)
  }

  /// Queues `job` on the isolate of `target`, on this node.
  pub fn send(&self, target: &ActorTarget, job: Job) -> Result<(), JsErrorBox> {
    if let Some(g) = &self.gens {
      return g.send(&self.namespaces, job);
    }
    let i = match &self.placement {
      Some(p) => {
        let first = self.here.unwrap_or_else(|| self.place(&target.id));
        lock(p).send(&placement_key(target.ns, &target.id), first)
      }
      None => self.place(&target.id),
    };
    self.isolates[i]
      .send(job)
      .map_err(|_| JsErrorBox::generic("Network connection lost."))
  }

  /// This isolate took `job` from its queue.
  pub fn taken(&self, job: &Job) {
    if let (Some(p), Some(t)) = (&self.placement, job.target()) {
      lock(p).taken(&placement_key(t.ns, &t.id));
    }
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

pub(crate) fn placement_key(ns: u32, id: &str) -> String {
  format!("{ns}:{id}")
}

pub(crate) fn lock(p: &Mutex<Placement>) -> std::sync::MutexGuard<'_, Placement> {
  p.lock().unwrap_or_else(|e| e.into_inner())
}

/// Object `id` has nothing left on this isolate (no instance, no sockets):
/// its placement is forgotten once this isolate's writes are all durable
/// and no call for it is queued here or taken and not yet dispatched.
/// False: not yet, ask again later.
#[op2(fast)]
pub fn op_do_unplace(state: &mut OpState, #[smi] ns: u32, #[string] id: &str) -> bool {
  let r = state.borrow::<Router>();
  let (Some(p), Some(here)) = (&r.placement, r.here) else {
    return true;
  };
  // A job for it may be among those JavaScript took and has not begun to
  // dispatch (see `local`).
  if inbox(state).in_hand.get() {
    return false;
  }
  // A write of it may still be on its way to the disk.
  if state
    .try_borrow::<crate::cell::Cells>()
    .is_some_and(|c| !c.all_durable())
  {
    return false;
  }
  lock(p).release(&placement_key(ns, id), here)
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

#[cfg(test)]
mod tests {
  use super::*;
  use crate::http::AlarmJob;

  fn alarm(id: &str) -> Job {
    Job::Alarm(AlarmJob {
      target: ActorTarget {
        ns: 0,
        id: id.into(),
        name: None,
        from: None,
      },
    })
  }

  /// An object goes to the isolate of its first caller, later calls from
  /// anywhere follow it there, and it moves only once released there with
  /// nothing queued.
  #[test]
  fn an_object_lives_on_the_isolate_that_called_it_first() {
    let (txs, mut rxs): (Vec<_>, Vec<_>) = (0..2).map(|_| mpsc::unbounded_channel()).unzip();
    let pool = Router {
      isolates: Arc::new(txs),
      namespaces: Arc::new(vec![Namespace::new("B", "C", "w", true)]),
      forward: None,
      gens: None,
      placement: Router::placement_for(false, false),
      here: None,
    };
    let on = |i| Router {
      here: Some(i),
      ..pool.clone()
    };
    // Its hash would place it on isolate 0.
    let id = "00000000aa";
    assert_eq!(pool.place(id), 0);
    let Job::Alarm(first) = alarm(id) else {
      unreachable!()
    };
    on(1).send(&first.target, alarm(id)).unwrap();
    on(0).send(&first.target, alarm(id)).unwrap();
    assert!(rxs[0].try_recv().is_err());
    for _ in 0..2 {
      let job = rxs[1].try_recv().expect("queued on isolate 1");
      on(1).taken(&job);
    }
    let p = pool.placement.as_ref().unwrap();
    assert!(
      !lock(p).release("0:00000000aa", 0),
      "only its isolate releases it"
    );
    assert!(lock(p).release("0:00000000aa", 1));
    // Released: the wake schedule (no caller) places it by its hash.
    pool.send(&first.target, alarm(id)).unwrap();
    assert!(rxs[0].try_recv().is_ok());
    // No placement for a fleet or generations.
    assert!(Router::placement_for(true, false).is_none());
    assert!(Router::placement_for(false, true).is_none());
  }
}

//! Service bindings between Workers of one process (`cellhost run A B`):
//! every Worker's isolate queues by name, so a binding of A reaches B's
//! isolates (round robin) with a request (`fetch()`) or a JS RPC call.
//! Calls to the Worker itself stay in its isolate (js/25_services.js).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use deno_core::convert::{ByteString, Uint8Array};
use deno_core::{OpState, ResourceId, op2};
use deno_error::JsErrorBox;
use tokio::sync::{mpsc, oneshot};

use crate::actor::{ActorResponse, fetch_through, rpc_answer};
use crate::http::{HttpJob, Job, ServiceJob, ServiceTarget};

struct Peer {
  isolates: Arc<Vec<mpsc::UnboundedSender<Job>>>,
  next: AtomicUsize,
}

/// The Workers of this process by name; filled as their pools start.
#[derive(Clone, Default)]
pub struct Peers(Arc<RwLock<HashMap<String, Peer>>>);

impl std::fmt::Debug for Peers {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    let names: Vec<String> = self.0.read().unwrap().keys().cloned().collect();
    write!(f, "Peers({names:?})")
  }
}

impl Peers {
  pub fn register(&self, worker: &str, isolates: Arc<Vec<mpsc::UnboundedSender<Job>>>) {
    self.0.write().unwrap().insert(
      worker.to_string(),
      Peer {
        isolates,
        next: AtomicUsize::new(0),
      },
    );
  }

  fn send(&self, worker: &str, job: Job) -> Result<(), JsErrorBox> {
    let peers = self.0.read().unwrap();
    let peer = peers.get(worker).ok_or_else(|| {
      JsErrorBox::generic(format!("Worker {worker:?} is not running in this process"))
    })?;
    let i = peer.next.fetch_add(1, Ordering::Relaxed) % peer.isolates.len();
    peer.isolates[i]
      .send(job)
      .map_err(|_| JsErrorBox::generic("Network connection lost."))
  }
}

fn peers(state: &Rc<RefCell<OpState>>) -> Result<Peers, JsErrorBox> {
  state
    .borrow()
    .try_borrow::<Peers>()
    .cloned()
    .ok_or_else(|| JsErrorBox::generic("no other Workers run in this process"))
}

/// `env.SERVICE.fetch()` to Worker `worker`'s `target` (`{ entrypoint, props }`).
#[op2]
#[allow(clippy::too_many_arguments)]
pub async fn op_service_fetch(
  state: Rc<RefCell<OpState>>,
  #[string] worker: String,
  #[string] target: String,
  #[string] method: String,
  #[string] url: String,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
  #[smi] body_rid: Option<ResourceId>,
) -> Result<ActorResponse, JsErrorBox> {
  let peers = peers(&state)?;
  fetch_through(state, body_rid, |body, reply| {
    let job = HttpJob {
      actor: None,
      service: Some(ServiceTarget { json: target }),
      method,
      url,
      headers,
      body,
      reply,
    };
    std::future::ready(peers.send(&worker, Job::Http(job)))
  })
  .await
}

/// `env.SERVICE.method(...args)` to Worker `worker`: `[ok, payload]` (the
/// value's bytes, or the error as JSON).
#[op2]
pub async fn op_service_call(
  state: Rc<RefCell<OpState>>,
  #[string] worker: String,
  #[string] target: String,
  #[string] method: String,
  #[buffer(copy)] args: Vec<u8>,
) -> Result<(bool, Uint8Array), JsErrorBox> {
  let peers = peers(&state)?;
  let (tx, rx) = oneshot::channel();
  peers.send(
    &worker,
    Job::Service(ServiceJob {
      target: ServiceTarget { json: target },
      method,
      args,
      reply: tx,
    }),
  )?;
  rpc_answer(rx).await
}

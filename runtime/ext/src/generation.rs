//! Generations of a node's isolates: `cellhost node` switches to a new
//! version in the same process. New isolates load it and take every new
//! request; each cell the old isolates hold stays with them until its next
//! idle point (nothing running or queued, its writes durable), then moves,
//! with its hibernatable WebSockets, to the new isolates. One writer per
//! cell at any time: a call for a cell goes where the cell lives.
//!
//! The rules are `cellhost_logic::handover`'s (checked by its simulator);
//! this is their I/O shell: one `Routing` under a lock, one `Slot` per
//! isolate, the isolates' queues, and the sockets' parcels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cellhost_logic::handover::{Routing, Slot, Sort};
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;
use tokio::sync::mpsc;

use crate::actor::{Namespace, place};
use crate::http::{ActorTarget, Inbox, Job};
use crate::ws::{Endpoint, WsResource};

/// Every pool of this process and where each cell lives.
pub struct Generations {
  state: Mutex<State>,
}

struct State {
  routing: Routing<PoolRef>,
  /// Hibernatable WebSockets on their way to the current pool, by cell.
  parcels: HashMap<String, Parcel>,
}

/// A pool as the routing table names it (the same pool: the same `Arc`).
#[derive(Clone)]
struct PoolRef(Arc<GenPool>);

impl PartialEq for PoolRef {
  fn eq(&self, other: &Self) -> bool {
    Arc::ptr_eq(&self.0, &other.0)
  }
}

/// One pool's isolates, as routing sees them.
pub struct GenPool {
  pub version: String,
  isolates: Arc<Vec<mpsc::UnboundedSender<Job>>>,
  namespaces: Arc<Vec<Namespace>>,
  slots: Vec<Mutex<Slot<Job>>>,
}

/// A cell's hibernatable sockets and its hibernation settings, moving.
pub(crate) struct Parcel {
  meta: String,
  sockets: Vec<(Endpoint, String)>,
}

/// The pool and isolate an isolate thread belongs to (in its `OpState`).
#[derive(Clone)]
pub struct Placed {
  pub gens: Arc<Generations>,
  pub pool: Arc<GenPool>,
  pub index: usize,
}

/// Packed sockets of cells being handed over, by cell (in `OpState`).
#[derive(Default)]
struct Packing(HashMap<String, Vec<(Endpoint, String)>>);

impl std::fmt::Debug for Generations {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str("Generations")
  }
}

impl GenPool {
  pub fn new(
    version: &str,
    isolates: Arc<Vec<mpsc::UnboundedSender<Job>>>,
    namespaces: Arc<Vec<Namespace>>,
  ) -> Arc<Self> {
    Arc::new(GenPool {
      version: version.into(),
      slots: (0..isolates.len()).map(|_| Mutex::default()).collect(),
      isolates,
      namespaces,
    })
  }

  fn slot(&self, i: usize) -> MutexGuard<'_, Slot<Job>> {
    self.slots[i].lock().unwrap()
  }

  fn key(&self, t: &ActorTarget) -> Option<String> {
    let ns = self.namespaces.get(t.ns as usize)?;
    Some(format!("{}/{}", ns.unique_key, t.id))
  }
}

impl Generations {
  pub fn new(first: Arc<GenPool>) -> Arc<Self> {
    Arc::new(Generations {
      state: Mutex::new(State {
        routing: Routing::new(PoolRef(first)),
        parcels: HashMap::new(),
      }),
    })
  }

  fn lock(&self) -> MutexGuard<'_, State> {
    self.state.lock().unwrap()
  }

  /// Sends a job for a Durable Object where its cell lives; `from` is the
  /// namespace table the job's `ns` index refers to.
  pub fn send(&self, from: &[Namespace], job: Job) -> Result<(), JsErrorBox> {
    self.lock().send(from, job)
  }

  /// Makes `next` the pool new cells go to and retires the current one.
  /// Refused while an earlier switch still hands cells over.
  pub fn switch(&self, next: Arc<GenPool>) -> Result<Arc<GenPool>, String> {
    let mut st = self.lock();
    let slots = st.routing.current().0.slots.len();
    let old = st.routing.switch(PoolRef(next), slots).map_err(|e| {
      format!(
        "the previous version still hands {} objects over",
        e.objects
      )
    })?;
    for tx in old.0.isolates.iter() {
      let _ = tx.send(Job::Retire);
    }
    Ok(old.0)
  }

  /// What the retiring pool still holds (objects, and isolates that have
  /// not taken their `Retire` yet); `None`: nothing retires.
  pub fn retiring_cells(&self) -> Option<usize> {
    self.lock().routing.retiring_left()
  }

  /// The retiring pool is done (or out of time, its isolates stopped):
  /// every call goes to the current pool from now on.
  pub fn finish_retire(&self) {
    if let Some(old) = self.lock().routing.finish() {
      for s in &old.0.slots {
        s.lock().unwrap().close();
      }
    }
  }
}

impl State {
  fn send(&self, from: &[Namespace], mut job: Job) -> Result<(), JsErrorBox> {
    let Some(t) = job.target_mut() else {
      return Err(JsErrorBox::type_error("not a Durable Object call"));
    };
    let ns = from
      .get(t.ns as usize)
      .ok_or_else(|| JsErrorBox::type_error("unknown namespace"))?;
    let n = self.routing.current().0.isolates.len();
    let pool = match self.routing.retiring_left() {
      // No switch under way (nearly always): no key to build.
      None => &self.routing.current().0,
      Some(_) => {
        let key = format!("{}/{}", ns.unique_key, t.id);
        &self.routing.route(&key, place(&t.id, n)).0
      }
    };
    if !std::ptr::eq(from.as_ptr(), pool.namespaces.as_ptr()) {
      t.ns = pool
        .namespaces
        .iter()
        .position(|n| n.unique_key == ns.unique_key)
        .ok_or_else(|| {
          JsErrorBox::generic(format!(
            "Durable Object class {} is not in version {} of this Worker",
            ns.class_name, pool.version
          ))
        })? as u32;
    }
    let i = place(&t.id, pool.isolates.len());
    pool.isolates[i]
      .send(job)
      .map_err(|_| JsErrorBox::generic("Network connection lost."))
  }

  /// Moves cell `key` of `from` (slot `i`) to the current pool: the parcel
  /// first, then the calls held while packing, then its calls still queued
  /// on the isolate (`inbox`; the others stay, in order, at its front).
  fn hand_over(
    &mut self,
    from: &GenPool,
    held: Vec<Job>,
    key: &str,
    parcel: Option<Parcel>,
    inbox: &Inbox,
  ) {
    let target = |job: &mut Job| {
      job
        .target_mut()
        .and_then(|t| from.key(t))
        .filter(|k| k == key)
    };
    let mut queued = Vec::new();
    let mut others = Vec::new();
    while let Some(mut job) = inbox.try_next() {
      if target(&mut job).is_some() {
        queued.push(job);
      } else {
        others.push(job);
      }
    }
    inbox.push_front(others);
    self.routing.left(key);
    let mut out = Vec::new();
    if let Some(p) = parcel {
      let (ns, id) = split_key(from, key);
      self.parcels.insert(key.to_string(), p);
      out.push(Job::Adopt(ActorTarget {
        ns,
        id,
        name: None,
        from: None,
      }));
    }
    out.extend(held);
    out.extend(queued);
    for job in out {
      if let Err(e) = self.send(&from.namespaces, job) {
        tracing::warn!("handing {key} over: {e}");
      }
    }
  }
}

fn split_key(pool: &GenPool, key: &str) -> (u32, String) {
  let (uk, id) = key.rsplit_once('/').unwrap_or((key, ""));
  let ns = pool
    .namespaces
    .iter()
    .position(|n| n.unique_key == uk)
    .unwrap_or(0);
  (ns as u32, id.to_string())
}

/// Sorts a batch the isolate took from its queue (`Slot::sort`): jobs to
/// run here stay in `batch`; on a retiring isolate others go to the current
/// pool or wait for their cell's handover. Returns whether `Retire` was
/// among them.
pub(crate) fn sort_batch(state: &OpState, inbox: &Inbox, batch: &mut Vec<Job>) -> bool {
  let Some(p) = state.try_borrow::<Placed>() else {
    return false;
  };
  let retire = batch.iter().any(|j| matches!(j, Job::Retire));
  if !retire && !p.pool.slot(p.index).decided() {
    let mut s = p.pool.slot(p.index);
    for job in batch.iter_mut() {
      if let Some(key) = job.target_mut().and_then(|t| p.pool.key(t)) {
        s.serving(&key);
      }
    }
    return false;
  }
  let mut st = p.gens.lock();
  let mut jobs = std::mem::take(batch);
  if retire {
    // Everything queued behind `Retire` is sorted now, under the lock, so
    // no call sent to the current pool later overtakes it.
    while let Some(job) = inbox.try_next() {
      jobs.push(job);
    }
  }
  let me = PoolRef(p.pool.clone());
  for mut job in jobs {
    if matches!(job, Job::Retire) {
      let live = p.pool.slot(p.index).retire();
      st.routing.retire_processed(&me, p.index, live);
      continue;
    }
    let Some(key) = job.target_mut().and_then(|t| p.pool.key(t)) else {
      batch.push(job);
      continue;
    };
    let sorted = p.pool.slot(p.index).sort(&key, job);
    match sorted {
      (Sort::Run, Some(job)) => batch.push(job),
      (Sort::Pass, Some(job)) => {
        if let Err(e) = st.send(&p.pool.namespaces, job) {
          tracing::warn!("passing a call for {key} on: {e}");
        }
      }
      _ => {}
    }
  }
  retire
}

/// The isolate was recycled or stopped: its cells are gone with it; calls
/// still queued for them go to the current pool.
pub fn isolate_gone(state: &OpState, inbox: &Inbox) {
  let Some(p) = state.try_borrow::<Placed>() else {
    return;
  };
  let mut st = p.gens.lock();
  let (keys, decided) = {
    let mut s = p.pool.slot(p.index);
    (s.clear(), s.decided())
  };
  if !decided {
    return;
  }
  for k in &keys {
    st.routing.left(k);
  }
  let mut keep = Vec::new();
  while let Some(mut job) = inbox.try_next() {
    if job.target_mut().is_some() {
      if let Err(e) = st.send(&p.pool.namespaces, job) {
        tracing::warn!("passing a call on: {e}");
      }
    } else {
      keep.push(job);
    }
  }
  inbox.push_front(keep);
}

fn cell_key(state: &OpState, ns: u32, id: &str) -> Option<(Placed, String)> {
  let p = state.try_borrow::<Placed>()?.clone();
  let ns = p.pool.namespaces.get(ns as usize)?;
  let key = format!("{}/{id}", ns.unique_key);
  Some((p, key))
}

/// The cell `ns`/`id` has neither an instance nor hibernated sockets here
/// any more; `meta` (with sockets packed by `op_gen_pack`) when it is
/// handed over with its hibernation state.
#[op2]
pub fn op_gen_release(
  state: &mut OpState,
  #[smi] ns: u32,
  #[string] id: &str,
  #[string] meta: Option<String>,
) {
  let Some((p, key)) = cell_key(state, ns, id) else {
    return;
  };
  let sockets = state
    .try_borrow_mut::<Packing>()
    .and_then(|k| k.0.remove(&key))
    .unwrap_or_default();
  let mut st = p.gens.lock();
  // A serving isolate forgets the cell; a retiring one hands it over.
  let Some(held) = p.pool.slot(p.index).gone(&key) else {
    return;
  };
  let parcel = meta.map(|meta| Parcel { meta, sockets });
  let inbox = crate::http::inbox(state);
  st.hand_over(&p.pool, held, &key, parcel, &inbox);
}

/// The cell's sockets are being packed: its calls wait until it is handed
/// over.
#[op2(fast)]
pub fn op_gen_moving(state: &mut OpState, #[smi] ns: u32, #[string] id: &str) {
  if let Some((p, key)) = cell_key(state, ns, id) {
    p.pool.slot(p.index).packing(&key);
  }
}

/// Packs one hibernatable socket of a cell being handed over (its read was
/// cancelled and has ended): the endpoint leaves this isolate.
#[op2(fast)]
pub fn op_gen_pack(
  state: &mut OpState,
  #[smi] ns: u32,
  #[string] id: &str,
  #[smi] rid: u32,
  #[string] info: String,
) -> Result<(), JsErrorBox> {
  let Some((_, key)) = cell_key(state, ns, id) else {
    return Err(JsErrorBox::generic("not a retiring isolate"));
  };
  let res = state
    .resource_table
    .take::<WsResource>(rid)
    .map_err(JsErrorBox::from_err)?;
  let ep = res.take()?;
  if !state.has::<Packing>() {
    state.put(Packing::default());
  }
  state
    .borrow_mut::<Packing>()
    .0
    .entry(key)
    .or_default()
    .push((ep, info));
  Ok(())
}

/// The hibernation state of a cell handed over to this isolate:
/// `{ meta, sockets: [{ rid, info }] }` as JSON, its endpoints now here.
#[op2]
#[string]
pub fn op_gen_adopt(state: &mut OpState, #[smi] ns: u32, #[string] id: &str) -> Option<String> {
  let (p, key) = cell_key(state, ns, id)?;
  let parcel = p.gens.lock().parcels.remove(&key)?;
  let sockets: Vec<String> = parcel
    .sockets
    .into_iter()
    .map(|(ep, info)| {
      let rid = state.resource_table.add(WsResource::new(ep));
      format!("{{\"rid\":{rid},\"info\":{info}}}")
    })
    .collect();
  Some(format!(
    "{{\"meta\":{},\"sockets\":[{}]}}",
    parcel.meta,
    sockets.join(",")
  ))
}

/// Whether a new instance of cell `ns`/`id` may be built on this isolate
/// by something other than a call from its queue (calls re-sent after a
/// reset, an alarm's follow-up): always outside `cellhost node`. On a
/// serving isolate the cell lives here from now on (a later `Retire` keeps
/// it here until its idle point); on a retiring one only a cell not yet
/// handed over may, or a second instance would run in the new version.
#[op2(fast)]
pub fn op_gen_local(state: &mut OpState, #[smi] ns: u32, #[string] id: &str) -> bool {
  match cell_key(state, ns, id) {
    Some((p, key)) => p.pool.slot(p.index).may_build(&key),
    None => true,
  }
}

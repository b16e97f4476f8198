//! Calls answered in place: a stub's call to an object that lives on the
//! caller's own isolate, with nothing queued for it, skips the isolate's
//! queue. JavaScript hands the call to the object's cell directly; the call
//! is registered here as a job taken from the queue would be, so its answer
//! passes the same output gate (`op_do_reply`) and fails the same way.

use std::cell::RefCell;
use std::rc::Rc;

use deno_core::convert::Uint8Array;
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;
use tokio::sync::oneshot;

use crate::actor::{Router, lock, placement_key, rpc_answer};
use crate::gate::gate_for;
use crate::http::inbox;

/// A call to object `id` of namespace `ns` made on this isolate: its job id
/// when it may be handed to the object in place, 0 when it must go through
/// the queue (`op_do_call`). In place only where objects are placed by
/// first caller, the object is placed here, no job for it is queued here,
/// and JavaScript holds no batch it has not begun to dispatch: otherwise a
/// call sent earlier could still be on its way, and this one would pass it.
#[op2(fast)]
#[smi]
pub fn op_do_local_call(state: &mut OpState, #[smi] ns: u32, #[string] id: &str) -> u32 {
  let inbox = inbox(state);
  if inbox.in_hand.get() {
    return 0;
  }
  let r = state.borrow::<Router>();
  let (Some(p), Some(here)) = (&r.placement, r.here) else {
    return 0;
  };
  if !lock(p).quiet_at(&placement_key(ns, id), here) {
    return 0;
  }
  let (tx, rx) = oneshot::channel();
  let job = inbox.register_rpc(tx, gate_for(state, ns, id));
  inbox.local_answers.borrow_mut().insert(job, rx);
  job
}

/// The answer to a call made in place, `[ok, payload]` as `op_do_call`'s.
#[op2]
pub async fn op_do_local_answer(
  state: Rc<RefCell<OpState>>,
  #[smi] job: u32,
) -> Result<(bool, Uint8Array), JsErrorBox> {
  let rx = (inbox(&state.borrow()).local_answers.borrow_mut())
    .remove(&job)
    .ok_or_else(|| JsErrorBox::generic("Network connection lost."))?;
  rpc_answer(rx).await
}

/// JavaScript began to dispatch the batch it took: from here on it knows
/// which of its jobs are still to be dispatched.
#[op2(fast)]
pub fn op_cellhost_took(state: &mut OpState) {
  inbox(state).in_hand.set(false);
}

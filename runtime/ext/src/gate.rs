//! The output gate: replies that could reveal writes not yet durable wait
//! for the commit round that makes them durable, and go out as the error
//! when that round (or an earlier one) failed.

use std::collections::HashMap;

use deno_core::OpState;

use crate::http::{HttpReply, Inbox, ReplyBody, RpcReply, inbox};

/// A Worker's own response reveals storage only through replies that were
/// already gated; an object's reply waits for its own writes; a call into an
/// exported function or RpcTarget may touch any cell here, so it waits for
/// all of them.
pub(crate) enum Gate {
  Cell(String),
  Isolate,
}

pub(crate) enum Held {
  Http(u32, HttpReply),
  Rpc(u32, RpcReply),
  Frame(
    tokio::sync::mpsc::UnboundedSender<crate::ws::WsMsg>,
    crate::ws::WsMsg,
  ),
}

impl Inbox {
  /// Sends the replies the output gate held for commit rounds up to
  /// `round`, now durable; `failed` turns them into errors instead.
  /// `failed` is the error message and whether it carries
  /// `durableObjectReset`.
  pub fn release_held(&self, round: u64, failed: Option<(&str, bool)>) {
    let ready: Vec<Held> = {
      let mut held = self.held.borrow_mut();
      if held.is_empty() {
        return;
      }
      let (ready, wait): (Vec<_>, Vec<_>) = held.drain(..).partition(|(r, _, _)| *r <= round);
      *held = wait;
      ready.into_iter().map(|(_, _, h)| h).collect()
    };
    for h in ready {
      self.deliver(h, failed);
    }
  }

  /// Objects whose writes were lost (a failed commit, a durability round
  /// that failed, or one after such a round): each is reset. Every reply of
  /// theirs the gate holds, and every reply their events in flight give
  /// later, goes out as the error; output gated on the whole isolate up to
  /// `round` (calls into exported functions, WebSocket frames) could reveal
  /// the lost writes too, so it fails (frames are dropped).
  pub fn fail_cells(&self, failed: &HashMap<String, (String, bool)>, round: u64) {
    if failed.is_empty() {
      return;
    }
    let any = failed.values().next().map(|(m, r)| (m.as_str(), *r));
    let doomed: Vec<(Held, (String, bool))> = {
      let mut held = self.held.borrow_mut();
      let mut out = Vec::new();
      let mut keep = Vec::new();
      for (r, key, h) in held.drain(..) {
        match key.as_ref().and_then(|k| failed.get(k)) {
          Some(why) => out.push((h, why.clone())),
          None if key.is_none() && r <= round => {
            let (m, reset) = any.expect("failed is not empty");
            out.push((h, (m.to_string(), reset)));
          }
          None => keep.push((r, key, h)),
        }
      }
      *held = keep;
      out
    };
    for (h, (m, reset)) in doomed {
      self.deliver(h, Some((&m, reset)));
    }
    let gates = self.gates.borrow();
    let mut dm = self.doomed.borrow_mut();
    for (id, gate) in gates.iter() {
      if let Gate::Cell(key) = gate
        && let Some(why) = failed.get(key)
      {
        dm.insert(*id, why.clone());
      }
    }
  }

  pub(crate) fn deliver(&self, h: Held, failed: Option<(&str, bool)>) {
    match (h, failed) {
      (Held::Frame(tx, msg), None) => {
        let _ = tx.send(msg);
      }
      // The writes before it were lost: the frame must not leave.
      (Held::Frame(..), Some(_)) => {}
      (Held::Http(id, reply), None) => self.send_http(id, reply),
      (Held::Rpc(id, reply), None) => self.send_rpc(id, reply),
      (Held::Http(id, _), Some((reason, reset))) => self.send_http(id, http_error(reason, reset)),
      (Held::Rpc(id, _), Some((reason, reset))) => self.send_rpc(
        id,
        RpcReply {
          ok: false,
          payload: error_json(reason, reset),
        },
      ),
    }
  }

  pub(crate) fn send_http(&self, id: u32, reply: HttpReply) {
    if let Some(tx) = self.pending.borrow_mut().remove(&id) {
      // The client may have gone away; nothing to do then.
      let _ = tx.send(reply);
    }
  }

  pub(crate) fn send_rpc(&self, id: u32, reply: RpcReply) {
    if let Some(tx) = self.pending_rpc.borrow_mut().remove(&id) {
      let _ = tx.send(reply);
    }
  }

  pub(crate) fn complete(&self, id: u32, reply: HttpReply, gate: (u64, Option<String>)) {
    self.pass(id, Held::Http(id, reply), gate);
  }

  pub(crate) fn hold_frame(
    &self,
    round: u64,
    tx: tokio::sync::mpsc::UnboundedSender<crate::ws::WsMsg>,
    msg: crate::ws::WsMsg,
  ) {
    self
      .held
      .borrow_mut()
      .push((round, None, Held::Frame(tx, msg)));
  }

  pub(crate) fn complete_rpc(&self, id: u32, reply: RpcReply, gate: (u64, Option<String>)) {
    self.pass(id, Held::Rpc(id, reply), gate);
  }

  /// Job `id`'s answer `h` passes the gate: it leaves now, waits for its
  /// commit round, or (its object was reset meanwhile) leaves as the error.
  fn pass(&self, id: u32, h: Held, gate: (u64, Option<String>)) {
    let doomed = self.doomed.borrow_mut().remove(&id);
    if let Some((m, reset)) = doomed {
      return self.deliver(h, Some((&m, reset)));
    }
    match gate {
      (0, _) => self.deliver(h, None),
      (round, key) => self.held.borrow_mut().push((round, key, h)),
    }
  }
}

/// A failed reply to an HTTP job: JSON, so a `stub.fetch()` caller rebuilds
/// the error (see js/).
pub(crate) fn http_error(reason: &str, reset: bool) -> HttpReply {
  HttpReply {
    status: 500,
    headers: Vec::new(),
    body: ReplyBody::Error(String::from_utf8_lossy(&error_json(reason, reset)).into()),
  }
}

/// An error as it crosses to an RPC caller (see js/30_durable_objects.js).
/// These come from the runtime (the object was reset or its isolate is
/// gone), so the caller's stub breaks: its later calls get the same error,
/// as on workerd, and a new stub reaches the rebuilt object.
pub(crate) fn error_json(message: &str, reset: bool) -> Vec<u8> {
  let mut v = serde_json::json!({"name": "Error", "message": message, "brokenStub": true});
  if reset {
    v["durableObjectReset"] = true.into();
  }
  v.to_string().into_bytes()
}

/// The output gate: the commit round the reply to job `id` must wait for
/// (0: none), and the object whose writes it could reveal (`None`: any).
pub(crate) fn gated(state: &OpState, id: u32) -> (u64, Option<String>) {
  let gate = inbox(state).gates.borrow_mut().remove(&id);
  let Some(cells) = state.try_borrow::<crate::cell::Cells>() else {
    return (0, None);
  };
  match gate {
    None => (0, None),
    Some(Gate::Cell(key)) => (cells.gate_round_for(&key), Some(key)),
    Some(Gate::Isolate) => (cells.gate_round(), None),
  }
}

/// The gate of a reply from object `id` of namespace `ns`.
pub(crate) fn gate_for(state: &OpState, ns: u32, id: &str) -> Gate {
  let router = state.borrow::<crate::actor::Router>();
  match router.namespaces.get(ns as usize) {
    Some(n) => Gate::Cell(format!("{}/{id}", n.unique_key)),
    None => Gate::Isolate,
  }
}

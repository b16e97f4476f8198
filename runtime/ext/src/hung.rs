//! Hang detection: a request nothing can ever answer is cancelled, as
//! workerd cancels it, instead of holding its connection forever.

use std::collections::HashSet;

use crate::gate::{Gate, Held};
use crate::http::{HttpReply, Inbox, ReplyBody, RpcReply};

/// workerd's message for a request whose code hung.
pub const HUNG: &str = "The Workers runtime canceled this request because it detected that your \
  Worker's code had hung and would never generate a response. Refer to: \
  https://developers.cloudflare.com/workers/observability/errors/";

impl Inbox {
  /// The isolate has nothing left to do (no I/O, timer or task pending),
  /// yet requests are unanswered: nothing can ever answer them. workerd
  /// cancels such a request with `HUNG`; so do we, for the requests no
  /// object serves (fetch, scheduled, queue, calls into entrypoints). An
  /// object's request may wait for a later request of its own (a long
  /// poll), and workerd leaves those waiting too. Replies the output gate
  /// holds were given already.
  ///
  /// One at a time, the newest first: a request that waits on a call it
  /// made is not hung itself (workerd counts the call as pending I/O), so
  /// the innermost call is cancelled and its caller carries on with the
  /// error. Returns whether one was.
  pub fn cancel_hung(&self) -> bool {
    let given: HashSet<u32> = (self.held.borrow().iter())
      .filter_map(|(_, _, h)| match h {
        Held::Http(id, _) | Held::Rpc(id, _) => Some(*id),
        Held::Frame(..) => None,
      })
      .collect();
    let (http, rpc) = {
      let gates = self.gates.borrow();
      let newest =
        |ids: &mut dyn Iterator<Item = &u32>| ids.filter(|id| !given.contains(id)).copied().max();
      (
        newest(
          &mut self
            .pending
            .borrow()
            .keys()
            .filter(|id| !gates.contains_key(id)),
        ),
        newest(
          &mut (self.pending_rpc.borrow().keys())
            .filter(|id| matches!(gates.get(id), Some(Gate::Isolate))),
        ),
      )
    };
    match (http, rpc) {
      (None, None) => return false,
      (Some(h), r) if r.is_none_or(|r| h > r) => {
        let reply = HttpReply {
          status: 500,
          headers: Vec::new(),
          body: ReplyBody::Error(HUNG.into()),
        };
        self.send_http(h, reply);
      }
      (_, r) => {
        let r = r.expect("the newest is a call");
        self.gates.borrow_mut().remove(&r);
        let payload = serde_json::json!({"name": "Error", "message": HUNG});
        let reply = RpcReply {
          ok: false,
          payload: payload.to_string().into_bytes(),
        };
        self.send_rpc(r, reply);
      }
    }
    true
  }
}

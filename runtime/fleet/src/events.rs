//! The fleet's structured events: one `tracing` event per ownership change,
//! takeover, restore, release, lost cell and fence, under the target
//! `cellhost::events` with a stable `event` name and stable field names
//! (`--log-format json` prints them one JSON object per line).

use std::collections::VecDeque;
use std::sync::Mutex;

/// One event as the operator page shows it.
#[derive(Clone, Debug)]
pub struct Recent {
  pub at_ms: u64,
  pub event: &'static str,
  pub scope: String,
  pub detail: String,
}

/// The last events of this process, newest last (the operator page's).
static RECENT: Mutex<VecDeque<Recent>> = Mutex::new(VecDeque::new());
const KEEP: usize = 200;

fn remember(event: &'static str, scope: &str, detail: String) {
  let mut r = RECENT.lock().unwrap();
  if r.len() >= KEEP {
    r.pop_front();
  }
  r.push_back(Recent {
    at_ms: crate::now_ms(),
    event,
    scope: scope.to_string(),
    detail,
  });
}

/// This process's recent ownership events, oldest first.
pub fn recent() -> Vec<Recent> {
  RECENT.lock().unwrap().iter().cloned().collect()
}

/// A cell taken by this node: `previous` names the node it was taken from
/// (a takeover); `restored` the LTX objects its database was rebuilt from,
/// and the keys listed to choose them.
pub(crate) fn acquired(
  node: &str,
  scope: &str,
  epoch: u64,
  previous: Option<&str>,
  (restored, listed): (usize, usize),
) {
  tracing::info!(
    target: "cellhost::events",
    event = if previous.is_some() { "cell.takeover" } else { "cell.acquired" },
    node,
    scope,
    epoch,
    previous_owner = previous.unwrap_or(""),
    restored_objects = restored,
    listed_keys = listed,
    "took {scope} at epoch {epoch}"
  );
  match previous {
    Some(p) => remember(
      "cell.takeover",
      scope,
      format!("epoch {epoch}, from node {p}, {restored} LTX objects restored"),
    ),
    None => remember("cell.acquired", scope, format!("epoch {epoch}")),
  }
}

/// A cell this node released (clean shutdown).
pub(crate) fn released(node: &str, scope: &str, epoch: u64) {
  tracing::info!(target: "cellhost::events", event = "cell.released", node, scope, epoch, "released {scope}");
  remember("cell.released", scope, format!("epoch {epoch}"));
}

/// A cell whose writes this node may no longer acknowledge.
pub(crate) fn lost(node: &str, scope: &str, reason: &str) {
  tracing::warn!(target: "cellhost::events", event = "cell.lost", node, scope, reason, "lost {scope}: {reason}");
  remember("cell.lost", scope, reason.to_string());
}

/// This node fences itself (the process exits next).
pub(crate) fn fenced(node: &str, reason: &str) {
  tracing::error!(target: "cellhost::events", event = "node.fenced", node, reason, "{reason}");
}

/// A snapshot within an epoch reached the bucket: restores of the cell
/// start from it (not kept in the operator page's list: it is routine).
pub(crate) fn snapshot(node: &str, scope: &str, epoch: u64, txid: u64, bytes: usize) {
  tracing::info!(target: "cellhost::events", event = "cell.snapshot", node, scope, epoch, txid, bytes, "{scope}: snapshot through TXID {txid} ({bytes} bytes)");
}

/// Epoch GC deleted epochs of a cell this node owns at `epoch`.
pub(crate) fn collected(node: &str, scope: &str, epoch: u64, epochs: &[u64], objects: usize) {
  let list = format!("{epochs:?}");
  tracing::info!(target: "cellhost::events", event = "cell.gc", node, scope, epoch, epochs = %list, objects, "{scope}: epochs {list} deleted ({objects} objects)");
  remember(
    "cell.gc",
    scope,
    format!("epochs {list} deleted below epoch {epoch}"),
  );
}

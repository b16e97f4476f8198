//! The fleet's structured events: one `tracing` event per ownership change,
//! takeover, restore, release, lost cell and fence, under the target
//! `cellhost::events` with a stable `event` name and stable field names
//! (`--log-format json` prints them one JSON object per line).

/// A cell taken by this node: `previous` names the node it was taken from
/// (a takeover), `restored` the LTX objects its database was rebuilt from.
pub(crate) fn acquired(
  node: &str,
  scope: &str,
  epoch: u64,
  previous: Option<&str>,
  restored: usize,
) {
  tracing::info!(
    target: "cellhost::events",
    event = if previous.is_some() { "cell.takeover" } else { "cell.acquired" },
    node,
    scope,
    epoch,
    previous_owner = previous.unwrap_or(""),
    restored_objects = restored,
    "took {scope} at epoch {epoch}"
  );
}

/// A cell this node released (clean shutdown).
pub(crate) fn released(node: &str, scope: &str, epoch: u64) {
  tracing::info!(target: "cellhost::events", event = "cell.released", node, scope, epoch, "released {scope}");
}

/// A cell whose writes this node may no longer acknowledge.
pub(crate) fn lost(node: &str, scope: &str, reason: &str) {
  tracing::warn!(target: "cellhost::events", event = "cell.lost", node, scope, reason, "lost {scope}: {reason}");
}

/// This node fences itself (the process exits next).
pub(crate) fn fenced(node: &str, reason: &str) {
  tracing::error!(target: "cellhost::events", event = "node.fenced", node, reason, "{reason}");
}

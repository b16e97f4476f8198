//! The fleet's wake index against the bucket: publishing a cell's hint,
//! dropping it, and each node's pass over the hints, with the waker role
//! (`cellhost_logic::wake` decides).

use cellhost_bucket::Bucket;
use cellhost_logic::WriteAnswer;
use cellhost_logic::wake::{
  ENTRIES_PREFIX, Hint, RoleStep, WAKER_KEY, entry_key, entry_scope, needs_lease, role_step,
  should_wake,
};

use crate::codec::*;
use crate::now_ms;
use crate::own::{read_lease, read_own};

pub async fn publish(bucket: &Bucket, scope: &str, hint: &Hint) -> Result<(), String> {
  bucket
    .put(&entry_key(scope), hint_json(hint))
    .await
    .map(|_| ())
    .map_err(|e| format!("publishing the wake entry of {scope}: {e}"))
}

pub async fn drop(bucket: &Bucket, scope: &str) {
  if let Err(e) = bucket.delete(&entry_key(scope)).await {
    tracing::warn!("dropping the wake entry of {scope}: {e}");
  }
}

/// One pass of node `me`: takes or renews the waker role (for `hold_ms`)
/// if it can, then returns the due hints of cells it should wake.
pub async fn pass(bucket: &Bucket, me: &str, hold_ms: u64) -> Result<Vec<(String, Hint)>, String> {
  let current = match bucket.get(WAKER_KEY).await.map_err(|e| e.to_string())? {
    None => None,
    Some((b, v)) => Some((parse_waker(&b).map_err(|e| e.to_string())?, token(&v))),
  };
  let step = role_step(current.as_ref().map(|(r, t)| (r, t)), me, now_ms(), hold_ms);
  let written = match step {
    RoleStep::Create(r) => Some(bucket.create(WAKER_KEY, waker_json(&r)).await),
    RoleStep::Cas(r, t) => Some(bucket.cas(WAKER_KEY, waker_json(&r), &version(&t)).await),
    RoleStep::Leave { .. } => None,
  };
  // A race for the role lost, or an unknown outcome: not the waker this
  // time; the next pass reads the role again.
  let is_waker = match written {
    Some(w) => matches!(answer(w)?, WriteAnswer::Applied(_)),
    None => false,
  };
  let mut due = Vec::new();
  for o in bucket
    .list(ENTRIES_PREFIX)
    .await
    .map_err(|e| e.to_string())?
  {
    let Some(scope) = entry_scope(&o.key) else {
      continue;
    };
    match judge(bucket, me, scope, &o.key, is_waker).await {
      Ok(Some(hint)) => due.push((scope.to_string(), hint)),
      Ok(None) => {}
      Err(e) => tracing::warn!("waker: {scope}: {e}"),
    }
  }
  Ok(due)
}

async fn judge(
  bucket: &Bucket,
  me: &str,
  scope: &str,
  key: &str,
  is_waker: bool,
) -> Result<Option<Hint>, String> {
  let Some((b, _)) = bucket.get(key).await.map_err(|e| e.to_string())? else {
    return Ok(None);
  };
  let hint = parse_hint(&b).map_err(|e| e.to_string())?;
  // The clock before the reads: a lease judged on an older reading never
  // looks expired too early.
  let now = now_ms();
  if hint.at_ms > now {
    return Ok(None);
  }
  let own = read_own(bucket, scope)
    .await
    .map_err(|e| e.to_string())?
    .map(|(r, _)| r);
  let lease = match needs_lease(own.as_ref(), me, is_waker) {
    Some(node) => read_lease(bucket, &node)
      .await
      .map_err(|e| e.to_string())?
      .map(|(l, _)| l),
    None => None,
  };
  let wake = should_wake(hint.at_ms, now, own.as_ref(), me, is_waker, lease.as_ref());
  Ok(wake.then_some(hint))
}

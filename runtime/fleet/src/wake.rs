//! The fleet's wake index against the bucket: publishing a cell's hint,
//! dropping it, and the waker's pass (`cellhost_logic::wake` decides).

use std::collections::HashSet;

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

/// One pass of the waker `me`: takes or renews the role (for `hold_ms`),
/// then returns the hints of cells it should wake. Empty when another node
/// holds the role.
pub async fn pass(
  bucket: &Bucket,
  me: &str,
  held: &HashSet<String>,
  hold_ms: u64,
) -> Result<Vec<(String, Hint)>, String> {
  let current = match bucket.get(WAKER_KEY).await.map_err(|e| e.to_string())? {
    None => None,
    Some((b, v)) => Some((parse_waker(&b).map_err(|e| e.to_string())?, token(&v))),
  };
  let step = role_step(current.as_ref().map(|(r, t)| (r, t)), me, now_ms(), hold_ms);
  let written = match step {
    RoleStep::Create(r) => bucket.create(WAKER_KEY, waker_json(&r)).await,
    RoleStep::Cas(r, t) => bucket.cas(WAKER_KEY, waker_json(&r), &version(&t)).await,
    RoleStep::Leave { .. } => return Ok(Vec::new()),
  };
  // Lost a race for the role, or unknown: the next pass reads it again.
  if !matches!(answer(written)?, WriteAnswer::Applied(_)) {
    return Ok(Vec::new());
  }
  let mut due = Vec::new();
  for o in bucket
    .list(ENTRIES_PREFIX)
    .await
    .map_err(|e| e.to_string())?
  {
    let Some(scope) = entry_scope(&o.key) else {
      continue;
    };
    match judge(bucket, me, scope, &o.key, held.contains(scope)).await {
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
  held_here: bool,
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
  let lease = match needs_lease(own.as_ref(), me) {
    Some(node) => read_lease(bucket, &node)
      .await
      .map_err(|e| e.to_string())?
      .map(|(l, _)| l),
    None => None,
  };
  let wake = should_wake(hint.at_ms, now, own.as_ref(), me, held_here, lease.as_ref());
  Ok(wake.then_some(hint))
}

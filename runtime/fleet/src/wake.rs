//! The fleet's wake index against the bucket: publishing a cell's hint,
//! dropping it, and each node's pass over the hints, with the waker role
//! (`cellhost_logic::wake` decides).

use cellhost_bucket::Bucket;
use std::collections::HashMap;

use cellhost_logic::wake::{
  ENTRIES_PREFIX, Hint, RoleStep, WAKER_KEY, entry_key, entry_scope, needs_lease, role_step,
  should_wake,
};
use cellhost_logic::{Token, WriteAnswer};

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

/// The hints read by earlier passes, by key, with the version they were
/// read at: a pass GETs only the hints that changed since.
pub type HintCache = HashMap<String, (Token, Hint)>;

/// One pass of node `me`: takes or renews the waker role (for `hold_ms`)
/// if it can, then returns the due hints of cells it should wake.
pub async fn pass(
  bucket: &Bucket,
  me: &str,
  hold_ms: u64,
  cache: &mut HintCache,
) -> Result<Vec<(String, Hint)>, String> {
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
  // The cache is rebuilt from this listing: hints gone from it drop out.
  let mut known = std::mem::take(cache);
  let mut due = Vec::new();
  for o in bucket
    .list(ENTRIES_PREFIX)
    .await
    .map_err(|e| e.to_string())?
  {
    let Some(scope) = entry_scope(&o.key) else {
      continue;
    };
    let read = match known.remove(&o.key) {
      Some((t, hint)) if t == token(&o.version) => Ok(Some((t, hint))),
      _ => read_hint(bucket, &o.key).await,
    };
    let judged = match read {
      Ok(Some((t, hint))) => {
        cache.insert(o.key.clone(), (t, hint.clone()));
        judge(bucket, me, scope, hint, is_waker).await
      }
      Ok(None) => Ok(None), // deleted since the listing
      Err(e) => Err(e),
    };
    match judged {
      Ok(Some(hint)) => due.push((scope.to_string(), hint)),
      Ok(None) => {}
      Err(e) => tracing::warn!("waker: {scope}: {e}"),
    }
  }
  Ok(due)
}

async fn read_hint(bucket: &Bucket, key: &str) -> Result<Option<(Token, Hint)>, String> {
  let Some((b, v)) = bucket.get(key).await.map_err(|e| e.to_string())? else {
    return Ok(None);
  };
  Ok(Some((
    token(&v),
    parse_hint(&b).map_err(|e| e.to_string())?,
  )))
}

async fn judge(
  bucket: &Bucket,
  me: &str,
  scope: &str,
  hint: Hint,
  is_waker: bool,
) -> Result<Option<Hint>, String> {
  // The clock before the reads: a lease judged on an older reading never
  // looks expired too early.
  let now = now_ms();
  if hint.at_ms > now {
    return Ok(None); // not due: no reads (should_wake would say no)
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

#[cfg(test)]
mod tests {
  use super::*;

  fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
      .enable_all()
      .build()
      .unwrap()
      .block_on(f)
  }

  #[test]
  fn a_pass_reads_only_changed_hints_and_sees_each_change() {
    block_on(async {
      let bucket = Bucket::memory();
      let mut cache = HintCache::new();
      let scope = "Obj:ab";
      let due = Hint {
        at_ms: 1,
        name: Some("x".into()),
      };
      publish(&bucket, scope, &due).await.unwrap();
      // Nobody holds the cell and this node takes the free role: wake it.
      let woken = pass(&bucket, "a", 60_000, &mut cache).await.unwrap();
      assert_eq!(woken, vec![(scope.to_string(), due)]);
      assert_eq!(cache.len(), 1);
      // Moved into the future: the new version is read, nothing is due.
      let later = Hint {
        at_ms: now_ms() + 60_000,
        name: None,
      };
      publish(&bucket, scope, &later).await.unwrap();
      assert!(
        pass(&bucket, "a", 60_000, &mut cache)
          .await
          .unwrap()
          .is_empty()
      );
      assert_eq!(cache[&entry_key(scope)].1, later);
      // Dropped: forgotten by the cache too.
      drop(&bucket, scope).await;
      assert!(
        pass(&bucket, "a", 60_000, &mut cache)
          .await
          .unwrap()
          .is_empty()
      );
      assert!(cache.is_empty());
      // Another node holds the role and sees the same hints, but an
      // unowned cell is not its to wake.
      publish(
        &bucket,
        scope,
        &Hint {
          at_ms: 1,
          name: None,
        },
      )
      .await
      .unwrap();
      assert!(
        pass(&bucket, "b", 60_000, &mut HintCache::new())
          .await
          .unwrap()
          .is_empty()
      );
    });
  }
}

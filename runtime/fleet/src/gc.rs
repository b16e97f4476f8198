//! Epoch GC (`--ltx-retention-secs`): the I/O shell of
//! `cellhost_logic::gc`. Every few minutes (a quarter of the retention,
//! at least a second, at most ten minutes) the node passes over the cells
//! it owns, one at a time, in the seeds' order: list, (ages), read the
//! record, write `retired.json`, delete.

use std::time::Duration;

use cellhost_bucket::Bucket;
use cellhost_logic::gc::{self, Skip};

use crate::{Fleet, now_ms};

/// What one pass over one cell did.
#[derive(Debug, PartialEq, Eq)]
pub enum Collected {
  Skipped(Skip),
  /// Epochs deleted, with their object count.
  Deleted {
    epochs: Vec<u64>,
    objects: usize,
  },
}

/// One pass over `scope`, owned by `node` at `epoch`.
pub(crate) async fn pass(
  bucket: &Bucket,
  node: &str,
  scope: &str,
  epoch: u64,
  retention_ms: u64,
) -> Result<Collected, String> {
  let (keys, markers) = (crate::own::list_ltx(bucket, scope).await).map_err(|e| e.to_string())?;
  let cands = match gc::candidates(&keys, &markers, epoch) {
    Ok(c) => c,
    Err(skip) => return Ok(Collected::Skipped(skip)),
  };
  let mut times = Vec::with_capacity(cands.older.len());
  for (_, newest) in &cands.older {
    times.push(crate::pitr::time_of(bucket, scope, newest).await?);
  }
  let epochs = gc::expired(&cands, &times, now_ms(), retention_ms);
  if epochs.is_empty() {
    return Ok(Collected::Skipped(Skip::Nothing));
  }
  // After the listing, never before it (see the seeds).
  let record = (crate::own::read_own(bucket, scope).await).map_err(|e| e.to_string())?;
  if !gc::still_owner(record.as_ref().map(|(r, _)| r), node, epoch) {
    return Ok(Collected::Skipped(Skip::NotOwner));
  }
  let retired = serde_json::json!({
    "base": cands.base,
    "node": node,
    "epochs": epochs,
    "at_ms": now_ms(),
  });
  bucket
    .put(&gc::retired_key(scope), retired.to_string())
    .await
    .map_err(|e| format!("writing retired.json: {e}"))?;
  let doomed = gc::doomed(&keys, &epochs);
  let links = (markers.iter()).filter(|m| epochs.contains(&m.epoch));
  for key in (doomed.iter().map(|k| k.object_key(scope))).chain(links.map(|m| m.object_key(scope)))
  {
    bucket
      .delete(&key)
      .await
      .map_err(|e| format!("deleting {key}: {e}"))?;
  }
  Ok(Collected::Deleted {
    epochs,
    objects: doomed.len(),
  })
}

impl Fleet {
  /// Turns epoch GC on: checks the bucket's list-after-write consistency
  /// (the argument for the late delete needs it; a bucket shown to lack it
  /// refuses the start, one that cannot be asked now is asked again before
  /// the first pass), then passes over the owned cells every quarter of
  /// `retention_ms` (1 s to 10 min).
  pub fn collect_epochs(&self, retention_ms: u64) -> Result<(), String> {
    let bucket = self.bucket.clone();
    let refusal = move |b: &Bucket| {
      format!(
        "--ltx-retention-secs needs a bucket whose listings include an object just written; a listing of {} missed one",
        b.describe()
      )
    };
    let mut checked = match self.rt.block_on(cellhost_bucket::list_after_write(&bucket)) {
      Ok(true) => true,
      Ok(false) => return Err(refusal(&bucket)),
      Err(e) => {
        tracing::warn!("epoch GC waits: list-after-write not tested yet: {e}");
        false
      }
    };
    let every = Duration::from_millis((retention_ms / 4).clamp(1_000, 600_000));
    // Not the Fleet itself: its runtime must not be dropped from a task.
    let (owned, lease, node) = (self.owned.clone(), self.lease.clone(), self.node.clone());
    self.rt.spawn(async move {
      loop {
        tokio::time::sleep(every).await;
        if !checked {
          match cellhost_bucket::list_after_write(&bucket).await {
            Ok(true) => checked = true,
            Ok(false) => {
              tracing::error!("epoch GC off: {}", refusal(&bucket));
              return;
            }
            Err(_) => continue,
          }
        }
        for (scope, epoch) in crate::held(&owned) {
          if !lease.can_ack(now_ms()) {
            break;
          }
          match pass(&bucket, &node, &scope, epoch, retention_ms).await {
            Ok(Collected::Deleted { epochs, objects }) => {
              crate::events::collected(&node, &scope, epoch, &epochs, objects);
            }
            Ok(Collected::Skipped(_)) => {}
            // The next pass tries again.
            Err(e) => tracing::warn!("epoch GC of {scope}: {e}"),
          }
        }
      }
    });
    tracing::info!(
      "node {}: epoch GC on, keeping epochs for {} s",
      self.node,
      retention_ms / 1000
    );
    Ok(())
  }
}

//! Point-in-time recovery on a bucket: the cell's LTX chains are its
//! history. Epoch `e`'s chain opens with a snapshot at TXID 1 and goes on
//! one commit per object, so state `(e, t)` is that snapshot plus the
//! deltas up to `t`, and each object's header carries its commit time.
//! A state is rebuilt from the newest snapshot within the epoch that does
//! not pass it, when there is one, and the deltas after it.
//! Nothing here writes: a restore is carried out by the next activation,
//! which uploads the restored image as its epoch's opening snapshot.

use cellhost_bucket::Bucket;
use cellhost_logic::restore::{LtxKey, Marker};

use crate::Fleet;

/// One state of a cell's history on the bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketPoint {
  pub epoch: u64,
  pub txid: u64,
  pub time_ms: u64,
}

async fn keys(bucket: &Bucket, scope: &str) -> Result<(Vec<LtxKey>, Vec<Marker>), String> {
  (crate::own::list_ltx(bucket, scope).await)
    .map_err(|e| format!("listing the history of {scope}: {}", e.0))
}

/// The commit time an object's header records.
pub(crate) async fn time_of(bucket: &Bucket, scope: &str, k: &LtxKey) -> Result<u64, String> {
  let key = k.object_key(scope);
  let head = bucket
    .get_range(&key, 0..cellhost_ltx::HEADER_SIZE as u64)
    .await
    .map_err(|e| format!("reading {key}: {e}"))?;
  let h = cellhost_ltx::Header::decode(&head).map_err(|e| format!("{key}: {e}"))?;
  Ok(h.timestamp_ms.max(0) as u64)
}

async fn point_at_time(
  bucket: &Bucket,
  scope: &str,
  time_ms: u64,
) -> Result<Option<BucketPoint>, String> {
  let (keys, markers) = keys(bucket, scope).await?;
  let mut epochs: Vec<u64> = keys.iter().map(|k| k.epoch).collect();
  epochs.sort_unstable();
  epochs.dedup();
  for &epoch in epochs.iter().rev() {
    let c = cellhost_logic::restore::history(&keys, &markers, epoch);
    let Some(first) = c.first() else { continue };
    if time_of(bucket, scope, first).await? > time_ms {
      continue;
    }
    // Commit times only grow along a chain: the last one not after
    // `time_ms`, by bisection (c[lo] qualifies, c[hi] does not).
    let (mut lo, mut hi) = (0usize, c.len());
    while hi - lo > 1 {
      let mid = (lo + hi) / 2;
      if time_of(bucket, scope, &c[mid]).await? <= time_ms {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    return Ok(Some(BucketPoint {
      epoch,
      txid: c[lo].max_txid,
      time_ms: time_of(bucket, scope, &c[lo]).await?,
    }));
  }
  Ok(None)
}

async fn point(
  bucket: &Bucket,
  scope: &str,
  epoch: u64,
  txid: u64,
) -> Result<Option<BucketPoint>, String> {
  let (keys, markers) = keys(bucket, scope).await?;
  let c = cellhost_logic::restore::history(&keys, &markers, epoch);
  let Some(k) = c.iter().find(|k| k.max_txid == txid) else {
    return Ok(None);
  };
  Ok(Some(BucketPoint {
    epoch,
    txid,
    time_ms: time_of(bucket, scope, k).await?,
  }))
}

/// State `txid` of `epoch`: from the snapshot below it, when the epoch
/// took one (`cellhost_logic::compact`), else from TXID 1.
async fn image(bucket: &Bucket, scope: &str, epoch: u64, txid: u64) -> Result<Vec<u8>, String> {
  let (keys, markers) = keys(bucket, scope).await?;
  let Some(c) = cellhost_logic::restore::chain_to(&keys, &markers, epoch, txid) else {
    return Err(format!(
      "restoring {scope}: the bucket holds no state {txid} of epoch {epoch}"
    ));
  };
  crate::own::apply_chain(bucket, scope, &c).await
}

impl Fleet {
  /// The newest state of `scope` committed at or before `time_ms`.
  pub async fn point_at_time(
    &self,
    scope: &str,
    time_ms: u64,
  ) -> Result<Option<BucketPoint>, String> {
    let (bucket, scope) = (self.bucket.clone(), scope.to_string());
    self
      .spawn(async move { point_at_time(&bucket, &scope, time_ms).await })
      .await
  }

  /// State `txid` of epoch `epoch`, if the bucket holds it.
  pub async fn point(
    &self,
    scope: &str,
    epoch: u64,
    txid: u64,
  ) -> Result<Option<BucketPoint>, String> {
    let (bucket, scope) = (self.bucket.clone(), scope.to_string());
    self
      .spawn(async move { point(&bucket, &scope, epoch, txid).await })
      .await
  }

  /// The database image of state `txid` of epoch `epoch`.
  pub async fn image_at(&self, scope: &str, epoch: u64, txid: u64) -> Result<Vec<u8>, String> {
    let (bucket, scope) = (self.bucket.clone(), scope.to_string());
    self
      .spawn(async move { image(&bucket, &scope, epoch, txid).await })
      .await
  }
}

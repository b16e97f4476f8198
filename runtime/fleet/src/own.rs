//! Cell ownership against the bucket: the acquisition (with "the bucket
//! wins" restore), the acknowledgement rule of a group commit, and release.

use cellhost_bucket::Bucket;
use cellhost_logic::ack::{AckDecision, Broken, ack_decision};
use cellhost_logic::lease::NodeLease;
use cellhost_logic::own::{
  Acquire, AcquireError, AcquireStep, Acquired, OwnRecord, Release, ReleaseOutcome, ReleaseStep,
  own_key,
};
use cellhost_logic::restore::{LtxKey, Marker, ltx_prefix};
use cellhost_logic::{ReadResult, StoreError, Token};

use crate::codec::*;
use crate::paged::{PagedRestore, Restored};
use crate::{Upload, now_ms};

pub async fn read_own(bucket: &Bucket, scope: &str) -> ReadResult<OwnRecord> {
  match bucket.get(&own_key(scope)).await.map_err(store_err)? {
    None => Ok(None),
    Some((b, v)) => Ok(Some((parse_own(&b)?, token(&v)))),
  }
}

pub async fn read_lease(bucket: &Bucket, node: &str) -> ReadResult<NodeLease> {
  match bucket
    .get(&cellhost_logic::lease::lease_key(node))
    .await
    .map_err(store_err)?
  {
    None => Ok(None),
    Some((b, v)) => Ok(Some((parse_lease(&b)?, token(&v)))),
  }
}

pub(crate) async fn list_ltx(
  bucket: &Bucket,
  scope: &str,
) -> Result<(Vec<LtxKey>, Vec<Marker>), StoreError> {
  let keys = (bucket.list_keys(&ltx_prefix(scope)).await).map_err(store_err)?;
  Ok((
    keys
      .iter()
      .filter_map(|k| LtxKey::parse(scope, k))
      .collect(),
    keys
      .iter()
      .filter_map(|k| Marker::parse(scope, k))
      .collect(),
  ))
}

/// The keys a restore decides from, listed step by step
/// (`logic::restore::listing`): a long-lived epoch's snapshots and what
/// follows the newest, not its whole history.
/// Also returns how many keys its listings returned.
async fn list_for_restore(
  bucket: &Bucket,
  scope: &str,
) -> Result<(Vec<LtxKey>, Vec<Marker>, usize), StoreError> {
  use cellhost_logic::restore::{ListStep, RestoreListing};
  let (mut listing, mut step) = RestoreListing::new(scope);
  let mut listed = 0;
  loop {
    step = match step {
      ListStep::Hint { key } => {
        // Only a shortcut: unreadable is the same as absent.
        let hint = bucket.get(&key).await.ok().flatten();
        listing.on_hint(hint.as_ref().and_then(|(b, _)| std::str::from_utf8(b).ok()))
      }
      ListStep::Dirs { prefix } => {
        let names = bucket.list_dirs(&prefix).await.map_err(store_err)?;
        listing.on_dirs(&names)
      }
      ListStep::Keys { prefix, after } => {
        let keys = match after {
          None => bucket.list_keys(&prefix).await,
          Some(after) => bucket.list_keys_after(&prefix, &after).await,
        };
        let keys = keys.map_err(store_err)?;
        listed += keys.len();
        listing.on_keys(&keys)
      }
      ListStep::Done(keys, markers) => return Ok((keys, markers, listed)),
    };
  }
}

async fn pause(ms: u64) {
  if ms > 0 {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
  }
}

/// Takes `scope` for `node`: the record with a new epoch, what the cell
/// starts from (nothing, the newest chain applied, or, for a database of
/// at least `paged_min` bytes, its pages on demand), and how many keys the
/// restore listed.
pub(crate) async fn acquire(
  bucket: &Bucket,
  node: &str,
  scope: &str,
  session: &str,
  ens: &crate::ensemble::Ensemble,
  paged_min: u64,
) -> Result<(Acquired, Restored, usize), crate::ActivateError> {
  let (mut acq, mut step) = Acquire::new(scope, node, now_ms());
  acq.set_jitter_seed(crate::jitter_seed());
  acq.set_session(session);
  let mut listed = 0;
  loop {
    // After a store failure or a lost race: a jittered pause, not a burst.
    pause(acq.backoff_ms()).await;
    step = match step {
      AcquireStep::ReadOwn => {
        let r = read_own(bucket, scope).await;
        acq.on_own(r, now_ms())
      }
      AcquireStep::ReadLease { node: owner } => {
        // The clock before the read: a lease judged on an older reading
        // never looks expired too early.
        let started = now_ms();
        let r = read_lease(bucket, &owner).await;
        acq.on_lease(r, started)
      }
      AcquireStep::Recover {
        node: prior,
        session: prior_session,
      } => {
        ens
          .recover(bucket, node, &prior, &prior_session)
          .await
          .map_err(|e| format!("{scope}: {e}"))?;
        acq.on_recovered()
      }
      AcquireStep::ListLtx => {
        let keys = list_for_restore(bucket, scope).await;
        listed = keys.as_ref().map_or(listed, |(_, _, n)| *n);
        acq.on_listing(
          keys
            .as_ref()
            .map(|(k, m, _)| (&k[..], &m[..]))
            .map_err(Clone::clone),
        )
      }
      AcquireStep::Create { record } => {
        let w = bucket.create(&own_key(scope), own_json(&record)).await;
        let a = answer_noting(w, |m| acq.note(m))?;
        acq.on_write(a)
      }
      AcquireStep::Cas { record, token } => {
        let w = bucket
          .cas(&own_key(scope), own_json(&record), &version(&token))
          .await;
        let a = answer_noting(w, |m| acq.note(m))?;
        acq.on_write(a)
      }
      AcquireStep::Acquired(a) => {
        let restored = match &a.restore {
          None => Restored::Empty,
          Some(chain) if crate::paged::size_of(bucket, scope, chain).await? >= paged_min => {
            Restored::Paged(PagedRestore {
              chain: std::sync::Arc::new(crate::paged::open(bucket, scope, chain).await?),
              marker: Marker {
                epoch: a.epoch,
                from: chain.epoch,
                cut: chain.txid,
              },
            })
          }
          Some(chain) => Restored::Image(apply_chain(bucket, scope, &chain.keys).await?),
        };
        return Ok((a, restored, listed));
      }
      AcquireStep::Failed(AcquireError::OwnedElsewhere(e)) => {
        return Err(crate::ActivateError {
          message: e.to_string(),
          owner: Some(e.owner),
        });
      }
      AcquireStep::Failed(e) => return Err(e.to_string().into()),
    };
  }
}

/// Objects of a chain fetched at once: a long tail costs its bytes, not
/// one round trip per object.
const RESTORE_FETCHES: usize = 16;

/// Applies a chain: the snapshot and the deltas after it (fetched
/// `RESTORE_FETCHES` at a time).
pub(crate) async fn apply_chain(
  bucket: &Bucket,
  scope: &str,
  chain: &[LtxKey],
) -> Result<Vec<u8>, String> {
  use futures::{StreamExt, TryStreamExt};
  let fetch = |k: LtxKey| async move {
    let key = k.object_key(scope);
    let (bytes, _) = bucket
      .get(&key)
      .await
      .map_err(|e| format!("restoring {scope}: {e}"))?
      .ok_or_else(|| format!("restoring {scope}: {key} vanished"))?;
    cellhost_ltx::decode(&bytes).map_err(|e| format!("restoring {scope}: {key}: {e}"))
  };
  let files: Vec<_> = futures::stream::iter(chain.iter().copied())
    .map(fetch)
    .buffered(RESTORE_FETCHES)
    .try_collect()
    .await?;
  // One run per epoch: a paged epoch's run goes on from TXID 2 of the image
  // the runs before it made (its state 1).
  let mut image: Option<Vec<u8>> = None;
  let mut at = 0;
  while at < files.len() {
    let epoch = chain[at].epoch;
    let run = chain[at..].iter().take_while(|k| k.epoch == epoch).count();
    let files = &files[at..at + run];
    image = Some(
      match image {
        None => cellhost_ltx::apply(files),
        Some(image) => cellhost_ltx::apply_onto(image, 1, files),
      }
      .map_err(|e| format!("restoring {scope}: {e}"))?,
    );
    at += run;
  }
  image.ok_or_else(|| format!("restoring {scope}: an empty chain"))
}

/// The acknowledgement rule for one group commit: every upload first, then
/// one read of each cell's record, started after all uploads completed.
/// Returns the cells that must not acknowledge, with the reason.
pub async fn publish(bucket: &Bucket, node: &str, uploads: Vec<Upload>) -> Vec<(String, String)> {
  let cell = |s: &str| format!("Durable Object {}", s.replace(':', "/"));
  let puts = uploads.iter().map(|u| {
    let key = LtxKey::l0(u.epoch, u.txid).object_key(&u.scope);
    let bytes = u.bytes.clone();
    async move { bucket.put(&key, bytes).await }
  });
  let results = futures::future::join_all(puts).await;
  let mut failed = Vec::new();
  let mut cells: Vec<(String, u64)> = Vec::new();
  for (u, r) in uploads.iter().zip(results) {
    if r.is_err() {
      let msg = Broken::UploadFailed { txid: u.txid }.message(&cell(&u.scope));
      failed.push((u.scope.clone(), msg));
    } else if !cells.iter().any(|(s, _)| *s == u.scope) {
      cells.push((u.scope.clone(), u.epoch));
    }
  }
  failed.extend(check_owners(bucket, node, cells).await);
  failed
}

/// The second half of the acknowledgement rule: one read of each cell's
/// record, which must still name this node at the cell's epoch. Returns the
/// cells that must not acknowledge, with the reason.
pub async fn check_owners(
  bucket: &Bucket,
  node: &str,
  cells: Vec<(String, u64)>,
) -> Vec<(String, String)> {
  let cell = |s: &str| format!("Durable Object {}", s.replace(':', "/"));
  let mut failed = Vec::new();
  let reads = cells.iter().map(|(s, _)| read_own(bucket, s));
  let records = futures::future::join_all(reads).await;
  for ((scope, epoch), read) in cells.into_iter().zip(records) {
    let record = match read {
      Ok(r) => r.map(|(r, _)| r),
      Err(e) => {
        failed.push((
          scope.clone(),
          format!("{}: reading its ownership record failed: {e}", cell(&scope)),
        ));
        continue;
      }
    };
    // The lease deadline is checked by the caller, on its own clock.
    match ack_decision(record.as_ref(), node, epoch, 0, u64::MAX) {
      AckDecision::Ack => {}
      _ => {
        let msg = Broken::OwnershipLost { record }.message(&cell(&scope));
        failed.push((scope, msg));
      }
    }
  }
  failed
}

/// Releases `scope` (only over our own record at `epoch`).
pub async fn release(bucket: &Bucket, node: &str, scope: String, epoch: u64, token: Token) {
  let (mut rel, mut step) = Release::new(node, epoch, token);
  rel.set_jitter_seed(crate::jitter_seed());
  loop {
    pause(rel.backoff_ms()).await;
    step = match step {
      ReleaseStep::Cas { record, token } => {
        let w = bucket
          .cas(&own_key(&scope), own_json(&record), &version(&token))
          .await;
        match answer_noting(w, |m| rel.note(m)) {
          Ok(a) => rel.on_write(a),
          Err(e) => {
            tracing::warn!("releasing {scope}: {e}");
            return;
          }
        }
      }
      ReleaseStep::ReadOwn => {
        let r = read_own(bucket, &scope).await;
        rel.on_own(r)
      }
      ReleaseStep::Done(ReleaseOutcome::Failed(e)) => {
        tracing::warn!("releasing {scope}: {e}; its record frees when this node's lease expires");
        return;
      }
      ReleaseStep::Done(outcome) => {
        tracing::debug!("released {scope}: {outcome:?}");
        crate::events::released(node, &scope, epoch);
        return;
      }
    };
  }
}

//! The node lease (`nodes/<node>.json`): `LeaseKeeper` from the logic core,
//! driven against the bucket on the fleet runtime. The isolate threads only
//! read the shared deadline: past it nothing is acknowledged, and when the
//! keeper fences, the process logs `SELF-FENCE:` and exits with code 3.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cellhost_bucket::{Bucket, WriteOutcome};
use cellhost_logic::lease::{LeaseConfig, LeaseKeeper, LeaseStep, can_acknowledge, lease_key};
use tokio::sync::{Notify, oneshot};

use crate::codec::*;
use crate::now_ms;

pub struct LeaseState {
  deadline_ms: AtomicU64,
  held: AtomicBool,
  closing: AtomicBool,
  close: Notify,
  retired: Notify,
  done: AtomicBool,
  /// The fence line, where a unit test keeps its process.
  #[cfg(test)]
  fenced: std::sync::Mutex<Option<String>>,
}

impl LeaseState {
  pub fn new() -> Arc<Self> {
    Arc::new(LeaseState {
      deadline_ms: AtomicU64::new(0),
      held: AtomicBool::new(false),
      closing: AtomicBool::new(false),
      close: Notify::new(),
      retired: Notify::new(),
      done: AtomicBool::new(false),
      #[cfg(test)]
      fenced: Default::default(),
    })
  }

  pub fn can_ack(&self, now: u64) -> bool {
    self.held.load(Ordering::SeqCst)
      && !self.closing.load(Ordering::SeqCst)
      && can_acknowledge(now, self.deadline_ms.load(Ordering::SeqCst))
  }

  /// Stops acknowledging at once; the lease is retired by `retire`.
  pub fn close(&self) {
    self.closing.store(true, Ordering::SeqCst);
  }
}

/// Where a fence is recorded for the operator pages of the other nodes.
pub(crate) const FENCES: &str = "telemetry/fences";

/// Stops acknowledging, logs the fence line, records it in the bucket (best
/// effort, at most 300 ms: the store may be why the node fences) and exits
/// with code 3. The crate's unit tests keep their process: they record the
/// line, and the keeper stops.
async fn fence(state: &LeaseState, bucket: &Bucket, node: &str, line: &str) {
  state.close();
  crate::events::fenced(node, line);
  eprintln!("{line}");
  let at = now_ms();
  let record = serde_json::json!({ "node": node, "at_ms": at, "reason": line }).to_string();
  let key = format!("{FENCES}/{node}-{at}.json");
  let _ = tokio::time::timeout(
    Duration::from_millis(300),
    bucket.put(&key, record.into_bytes()),
  )
  .await;
  #[cfg(test)]
  {
    *state.fenced.lock().unwrap() = Some(line.to_string());
  }
  #[cfg(not(test))]
  {
    let _ = state;
    std::process::exit(cellhost_logic::lease::FENCE_EXIT_CODE);
  }
}

/// Starts the keeper; the receiver answers once the first lease is held.
pub fn spawn(
  rt: &tokio::runtime::Runtime,
  bucket: Bucket,
  node: &str,
  address: &str,
  log: &str,
  cfg: LeaseConfig,
  state: Arc<LeaseState>,
) -> oneshot::Receiver<Result<(), String>> {
  let (tx, rx) = oneshot::channel();
  let (node, address, log) = (node.to_string(), address.to_string(), log.to_string());
  rt.spawn(async move {
    let key = lease_key(&node);
    let (mut k, mut step) = LeaseKeeper::start(cfg, &node, &address, 1);
    k.set_log(&log);
    k.set_jitter_seed(crate::jitter_seed());
    let mut first = Some(tx);
    loop {
      state.deadline_ms.store(k.deadline_ms(), Ordering::SeqCst);
      state.held.store(k.held().is_some(), Ordering::SeqCst);
      if k.held().is_some()
        && let Some(tx) = first.take()
      {
        let _ = tx.send(Ok(()));
      }
      step = match step {
        LeaseStep::Wait { until_ms } => {
          if state.closing.load(Ordering::SeqCst) {
            k.release()
          } else {
            let wait = until_ms.saturating_sub(now_ms()).min(3_600_000);
            tokio::select! {
              _ = tokio::time::sleep(Duration::from_millis(wait)) => k.tick(now_ms()),
              _ = state.close.notified() => k.release(),
            }
          }
        }
        LeaseStep::Read => {
          let r = crate::own::read_lease(&bucket, &node).await;
          if let Err(e) = &r {
            tracing::warn!("node {node}: reading its lease record failed: {}", e.0);
          }
          let before = k.held().map(|h| h.expires_ms);
          let next = k.on_read(r, now_ms());
          // A read adopts a record only after a write whose answer was lost:
          // say which deadline it confirmed (the fault lab reads it).
          if let Some(h) = k.held()
            && Some(h.expires_ms) != before
          {
            tracing::info!(
              "node {node}: lease write confirmed by reading it back (expires_ms {})",
              h.expires_ms
            );
          }
          next
        }
        LeaseStep::Create(lease) => {
          let w = bucket.create(&key, lease_json(&lease)).await;
          match write_answer(&mut k, &node, lease.expires_ms, w) {
            Ok(a) => k.on_write(a, now_ms()),
            Err(e) => {
              fence(
                &state,
                &bucket,
                &node,
                &format!("SELF-FENCE: node {node}: {e}"),
              )
              .await;
              break;
            }
          }
        }
        LeaseStep::Cas { lease, token } => {
          let w = bucket.cas(&key, lease_json(&lease), &version(&token)).await;
          match write_answer(&mut k, &node, lease.expires_ms, w) {
            Ok(a) => k.on_write(a, now_ms()),
            Err(e) => {
              fence(
                &state,
                &bucket,
                &node,
                &format!("SELF-FENCE: node {node}: {e}"),
              )
              .await;
              break;
            }
          }
        }
        LeaseStep::Retire { lease, token } => {
          let _ = bucket.cas(&key, lease_json(&lease), &version(&token)).await;
          break;
        }
        LeaseStep::Fence(reason) => {
          if state.closing.load(Ordering::SeqCst) {
            break; // shutting down: nothing is acknowledged any more anyway
          }
          let line = k.fence_line().unwrap_or_else(|| reason.log_line(&node));
          fence(&state, &bucket, &node, &line).await;
          break;
        }
      };
    }
    state.held.store(false, Ordering::SeqCst);
    state.done.store(true, Ordering::SeqCst);
    state.retired.notify_waiters();
  });
  rx
}

/// The keeper's answer to a lease write; a store failure is logged (the
/// keeper retries it), and an ambiguous one's words go to the keeper for
/// the fence line. The ambiguous line names the deadline written: until a
/// read confirms it the node cannot count on it (the fault lab reads it).
fn write_answer(
  k: &mut LeaseKeeper,
  node: &str,
  expires_ms: u64,
  w: WriteOutcome,
) -> Result<cellhost_logic::WriteAnswer, String> {
  match &w {
    WriteOutcome::Ambiguous(m) => {
      tracing::warn!(
        "node {node}: lease write may not have happened (expires_ms {expires_ms}): {m}; reading it back"
      );
      k.note(m);
    }
    WriteOutcome::Failed(m) => tracing::warn!("node {node}: lease write failed: {m}; retrying"),
    _ => {}
  }
  answer(w)
}

/// Retires the lease (after the cells were released) and waits for it.
pub async fn retire(state: &LeaseState) {
  let retired = state.retired.notified();
  state.close();
  state.close.notify_one();
  if !state.done.load(Ordering::SeqCst) {
    let _ = tokio::time::timeout(Duration::from_secs(10), retired).await;
  }
}

#[cfg(test)]
mod tests {
  use std::time::{Duration, Instant};

  use cellhost_bucket::{Bucket, BucketOptions};

  use crate::{Fleet, LeaseConfig, Upload, now_ms};

  /// Issue 10: every write to a `file://` bucket fails for about a second
  /// (its staging directory is gone) while a renewal falls due. The lease
  /// is valid for seconds more, so the node must not fence; once the store
  /// is back, the renewal goes through and the node acknowledges again.
  #[test]
  fn a_store_outage_shorter_than_the_lease_does_not_fence() {
    let dir = std::env::temp_dir().join(format!("cellhost-fleet-outage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("file://{}", dir.display());
    let bucket = Bucket::open(&url, &BucketOptions::default()).unwrap();
    // Renewals every 2 s, the fence deadline 4.5 s after each.
    let cfg = LeaseConfig {
      ttl_ms: 6_000,
      margin_ms: 1_500,
    };
    let fleet = Fleet::start(
      bucket.clone(),
      "n1",
      "127.0.0.1:1",
      cfg,
      1_000,
      crate::DurabilityMode::Bucket,
      "",
    )
    .unwrap();
    let expiry = || {
      let r = fleet.rt.block_on(crate::own::read_lease(&bucket, "n1"));
      r.unwrap().unwrap().0.expires_ms
    };
    let upload = |epoch, txid| Upload {
      scope: "Counter:aa".into(),
      epoch,
      txid,
      bytes: vec![txid as u8],
    };
    let epoch = futures::executor::block_on(fleet.activate("Counter:aa".into()))
      .unwrap()
      .epoch;
    fleet.publish_blocking(vec![upload(epoch, 1)]).unwrap();

    // The outage: from 1.5 s to 2.7 s after the lease was written, so the
    // renewal due at 2 s meets it.
    let written = expiry() - cfg.ttl_ms;
    std::thread::sleep(Duration::from_millis(
      (written + 1_500).saturating_sub(now_ms()),
    ));
    let before = expiry();
    let staging = dir.join(".cellhost-bucket").join("tmp");
    std::fs::remove_dir_all(&staging).unwrap();
    std::fs::write(&staging, "not a directory").unwrap();
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(expiry(), before, "no renewal can have reached the store");
    assert_eq!(*fleet.lease.fenced.lock().unwrap(), None);
    assert!(fleet.can_ack(), "the lease is still valid");
    std::fs::remove_file(&staging).unwrap();
    std::fs::create_dir(&staging).unwrap();

    // The renewal goes through once the store is back, well before the
    // fence deadline, and the node acknowledges again.
    let start = Instant::now();
    while expiry() == before {
      assert!(
        start.elapsed() < Duration::from_secs(5),
        "no renewal after the outage"
      );
      std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(*fleet.lease.fenced.lock().unwrap(), None);
    assert!(fleet.can_ack());
    fleet.publish_blocking(vec![upload(epoch, 2)]).unwrap();
    fleet.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
  }
}

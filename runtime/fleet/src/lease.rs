//! The node lease (`nodes/<node>.json`): `LeaseKeeper` from the logic core,
//! driven against the bucket on the fleet runtime. The isolate threads only
//! read the shared deadline: past it nothing is acknowledged, and when the
//! keeper fences, the process logs `SELF-FENCE:` and exits with code 3.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cellhost_bucket::Bucket;
use cellhost_logic::lease::{
  FENCE_EXIT_CODE, LeaseConfig, LeaseKeeper, LeaseStep, can_acknowledge, lease_key,
};
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

fn fence(line: &str) -> ! {
  tracing::error!("{line}");
  eprintln!("{line}");
  std::process::exit(FENCE_EXIT_CODE);
}

/// Starts the keeper; the receiver answers once the first lease is held.
pub fn spawn(
  rt: &tokio::runtime::Runtime,
  bucket: Bucket,
  node: &str,
  address: &str,
  cfg: LeaseConfig,
  state: Arc<LeaseState>,
) -> oneshot::Receiver<Result<(), String>> {
  let (tx, rx) = oneshot::channel();
  let (node, address) = (node.to_string(), address.to_string());
  rt.spawn(async move {
    let key = lease_key(&node);
    let (mut k, mut step) = LeaseKeeper::start(cfg, &node, &address, 1);
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
          k.on_read(r, now_ms())
        }
        LeaseStep::Create(lease) => {
          let w = bucket.create(&key, lease_json(&lease)).await;
          match answer(w) {
            Ok(a) => k.on_write(a, now_ms()),
            Err(e) => fence(&format!("SELF-FENCE: node {node}: {e}")),
          }
        }
        LeaseStep::Cas { lease, token } => {
          let w = bucket.cas(&key, lease_json(&lease), &version(&token)).await;
          match answer(w) {
            Ok(a) => k.on_write(a, now_ms()),
            Err(e) => fence(&format!("SELF-FENCE: node {node}: {e}")),
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
          fence(&reason.log_line(&node))
        }
      };
    }
    state.held.store(false, Ordering::SeqCst);
    state.done.store(true, Ordering::SeqCst);
    state.retired.notify_waiters();
  });
  rx
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

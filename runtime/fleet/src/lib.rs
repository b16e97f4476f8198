//! A node on a shared bucket. The decisions are `cellhost-logic`'s (pure
//! state machines); this crate performs their requests against a real
//! `cellhost-bucket` store on its own tokio runtime, and offers the
//! blocking calls the isolate threads need:
//!
//! * [`Fleet::activate`]: take a cell (ownership record with a new epoch,
//!   "the bucket wins" restore);
//! * [`Fleet::publish`]: the acknowledgement rule for a group commit: upload
//!   every LTX object of the round, *then* re-read each cell's record, and
//!   only if each still names this node at its epoch (and the node lease is
//!   live) may the round be acknowledged;
//! * the node lease, renewed every ttl/3; a node that cannot renew fences
//!   itself (`SELF-FENCE:` and exit code 3);
//! * the wake index: [`Fleet::publish_hint`] before a commit that moves a
//!   cell's alarm earlier, and [`Fleet::wake_pass`], which finds this
//!   node's due cells and, with the waker role, those nobody live holds;
//! * [`Fleet::shutdown`]: release every owned cell, then retire the lease.

mod codec;
mod ensemble;
mod events;
mod facets;
mod gc;
mod lease;
mod own;
mod paged;
mod pitr;
mod records;
mod route;
mod wake;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

pub use cellhost_bucket::{Bucket, BucketOptions};
use cellhost_logic::Token;
pub use cellhost_logic::ensemble::owner::Durability;
pub use cellhost_logic::ensemble::recovery::{RECOVERY_RETRIES, RECOVERY_RETRY_MS};
pub use cellhost_logic::lease::LeaseConfig;
pub use cellhost_logic::own::{cell_scope, split_scope};
use cellhost_logic::restore::LtxKey;
pub use cellhost_logic::wake::Hint;
pub use ensemble::{
  BoxFuture, DurabilityMode, Entry, Hold, LogTransport, decode_entry, encode_entry,
};
pub use events::{Recent, recent};
pub use own::{read_lease, read_own};
pub use paged::{PagedChain, PagedRestore, Restored};
pub use pitr::BucketPoint;
pub use route::Route;

/// A cell this node took.
pub struct Activation {
  pub epoch: u64,
  /// What the database starts from: nothing (the bucket holds nothing),
  /// the newest chain in the bucket applied, or its pages on demand.
  pub restored: Restored,
}

/// Why a cell could not be taken. `owner` is set when another live node
/// holds it: a refusal a client can retry there, not an unknown outcome.
#[derive(Debug)]
pub struct ActivateError {
  pub message: String,
  pub owner: Option<String>,
}

impl From<String> for ActivateError {
  fn from(message: String) -> Self {
    ActivateError {
      message,
      owner: None,
    }
  }
}

impl std::fmt::Display for ActivateError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.message)
  }
}

/// One LTX object of a group commit.
#[derive(Clone)]
pub struct Upload {
  pub scope: String,
  pub epoch: u64,
  pub txid: u64,
  pub bytes: Vec<u8>,
}

pub struct Fleet {
  bucket: Bucket,
  node: String,
  rt: tokio::runtime::Runtime,
  lease: Arc<lease::LeaseState>,
  /// Cells whose record names this node, with the record's version.
  owned: Arc<Mutex<HashMap<String, (u64, Token)>>>,
  /// How often the waker reads the wake index.
  wake_poll_ms: u64,
  hints: Arc<tokio::sync::Mutex<wake::HintCache>>,
  /// The lease margin: a route to another owner is trusted until that
  /// owner's deadline less this.
  margin_ms: u64,
  routes: route::Routes,
  /// SIGTERM: no more cells are taken; the node hands its own over.
  draining: std::sync::atomic::AtomicBool,
  /// This process's node-log session (named in the records it writes).
  session: String,
  ens: Arc<ensemble::Ensemble>,
  /// A restore of a database at least this large (bytes) pages in.
  paged_min: std::sync::atomic::AtomicU64,
}

/// `--paged-min-mb`'s default.
pub const PAGED_MIN_MB: u64 = 64;

type Owned = Mutex<HashMap<String, (u64, Token)>>;

fn held(owned: &Owned) -> Vec<(String, u64)> {
  let owned = owned.lock().unwrap();
  let mut v: Vec<(String, u64)> = owned.iter().map(|(s, (e, _))| (s.clone(), *e)).collect();
  v.sort();
  v
}

/// A random seed for the logic core's retry jitter (it draws none itself):
/// std's hasher keys are random per process and differ per call.
pub(crate) fn jitter_seed() -> u64 {
  use std::hash::BuildHasher;
  let nanos = SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map_or(0, |d| d.as_nanos());
  std::collections::hash_map::RandomState::new().hash_one(nanos)
}

/// What a caller sees when its reply was ready only after this node's fence
/// deadline (the write itself is in the bucket; the outcome is unknown).
pub fn lease_lapsed_reply() -> String {
  cellhost_logic::broken_object_message("this node's lease could have lapsed before the reply left")
}

pub fn now_ms() -> u64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

impl std::fmt::Debug for Fleet {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(f, "Fleet({} on {})", self.node, self.bucket.describe())
  }
}

impl Fleet {
  /// Runs the storage test, takes the node lease and starts renewing it.
  pub fn start(
    bucket: Bucket,
    node: &str,
    address: &str,
    cfg: LeaseConfig,
    wake_poll_ms: u64,
    durability: DurabilityMode,
    log_id: &str,
  ) -> Result<Arc<Fleet>, String> {
    if wake_poll_ms == 0 {
      return Err("the wake poll interval must be above 0 ms".into());
    }
    cfg.check()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
      .worker_threads(2)
      .thread_name("cellhost-fleet")
      .enable_all()
      .build()
      .map_err(|e| e.to_string())?;
    match rt.block_on(cellhost_bucket::storage_test(&bucket, false)) {
      Ok(report) => {
        for line in &report.lines {
          tracing::info!("{line}");
        }
        if let cellhost_bucket::ProbeOutcome::Inconclusive(why) = &report.outcome {
          tracing::warn!(
            "the storage test of {} did not finish: {why}; starting anyway",
            bucket.describe()
          );
        }
      }
      Err(fault) => return Err(format!("{}: {fault}", bucket.describe())),
    }
    let lease = lease::LeaseState::new();
    let first = lease::spawn(
      &rt,
      bucket.clone(),
      node,
      address,
      log_id,
      cfg,
      lease.clone(),
    );
    rt.block_on(first)
      .map_err(|_| "the node lease task ended".to_string())??;
    // Unique per process: the start time and a random part.
    let session = format!("{:x}-{:08x}", now_ms(), jitter_seed() as u32);
    let ens = ensemble::Ensemble::new(bucket.clone(), node, &session, durability);
    if durability == DurabilityMode::Fleet {
      // The followers to pick from: the live nodes, read every renewal.
      let (b, e, every) = (bucket.clone(), ens.clone(), cfg.renew_every_ms());
      rt.spawn(async move {
        loop {
          e.set_live(ensemble::live_nodes(&b, now_ms()).await);
          tokio::time::sleep(std::time::Duration::from_millis(every)).await;
        }
      });
    }
    Ok(Arc::new(Fleet {
      bucket,
      node: node.to_string(),
      rt,
      lease,
      owned: Default::default(),
      wake_poll_ms,
      hints: Default::default(),
      margin_ms: cfg.margin_ms,
      routes: Default::default(),
      draining: Default::default(),
      session: if durability == DurabilityMode::Fleet {
        session
      } else {
        String::new()
      },
      ens,
      paged_min: (PAGED_MIN_MB << 20).into(),
    }))
  }

  /// Restores of a database of at least `mb` MiB page in (0: every one).
  pub fn set_paged_min_mb(&self, mb: u64) {
    (self.paged_min).store(
      mb.saturating_mul(1 << 20),
      std::sync::atomic::Ordering::Relaxed,
    );
  }

  /// Writes a paged epoch's marker: its restores link through it from
  /// now on. Must land before the cell serves.
  pub async fn put_marker(
    &self,
    scope: &str,
    marker: cellhost_logic::restore::Marker,
  ) -> Result<(), String> {
    let (bucket, key) = (self.bucket.clone(), marker.object_key(scope));
    self
      .spawn(async move { bucket.put(&key, Vec::new()).await })
      .await
      .map(|_| ())
      .map_err(|e| format!("{scope}: writing its paged-in marker: {e}"))
  }

  /// How a node reaches its followers (the peer channel); without one,
  /// every round takes the bucket proof.
  pub fn set_log_transport(&self, t: Arc<dyn LogTransport>) {
    self.ens.set_transport(t);
  }

  /// The takeover recovery gate's budget: a failed attempt is retried
  /// after `retry_ms`, and the cells waiting on it fail only after
  /// `retries` attempts.
  pub fn set_recovery_budget(&self, retry_ms: u64, retries: u32) -> Result<(), String> {
    if retry_ms == 0 || retries == 0 {
      return Err("the recovery retry pause and the number of attempts must be above 0".into());
    }
    self.ens.set_recovery_budget(retry_ms, retries);
    Ok(())
  }

  /// How this node proves writes durable now.
  pub fn durability(&self) -> Durability {
    self.ens.durability()
  }

  pub fn node(&self) -> &str {
    &self.node
  }

  /// Whether `node`'s log session `session` is sealed in the bucket: its
  /// recovery uploaded what the followers held, so their copies may go.
  pub async fn log_session_sealed(&self, node: &str, session: &str) -> Result<bool, String> {
    let key = cellhost_logic::ensemble::record::log_record_key(node, session);
    match self.bucket.get(&key).await {
      Ok(Some((b, _))) => Ok(
        codec::parse_log(&b).map_err(|e| e.0)?.state
          == cellhost_logic::ensemble::record::LogState::Sealed,
      ),
      Ok(None) => Ok(false),
      Err(e) => Err(e.to_string()),
    }
  }

  pub fn bucket(&self) -> &Bucket {
    &self.bucket
  }

  /// The cells this node holds, with their epochs.
  pub fn held(&self) -> Vec<(String, u64)> {
    held(&self.owned)
  }

  /// How many cells this node holds.
  pub fn held_count(&self) -> usize {
    self.owned.lock().unwrap().len()
  }

  /// Whether this node holds `scope` now (no store access).
  pub fn holds(&self, scope: &str) -> bool {
    self.owned.lock().unwrap().contains_key(scope)
  }

  /// Where a call for `scope` goes: here (held here, held by nobody, or its
  /// owner's lease lapsed) or to its live owner. Cached per cell until the
  /// owner's deadline; one or two bucket reads otherwise.
  pub async fn route(&self, scope: &str) -> Route {
    if self.holds(scope) {
      return Route::Here;
    }
    if let Some(r) = self.routes.cached(scope, now_ms()) {
      return r;
    }
    let (bucket, node, s, margin) = (
      self.bucket.clone(),
      self.node.clone(),
      scope.to_string(),
      self.margin_ms,
    );
    let r = self
      .spawn(async move { route::probe(&bucket, &node, &s, margin).await })
      .await;
    self.routes.remember(scope, &r);
    r
  }

  /// Drops the cached route of `scope` (its owner failed or refused).
  pub fn forget_route(&self, scope: &str) {
    self.routes.forget(scope);
  }

  /// Whether this node may acknowledge (or take cells) now.
  pub fn can_ack(&self) -> bool {
    self.lease.can_ack(now_ms())
  }

  /// Runs `fut` on the fleet runtime; the returned future can be awaited
  /// on any runtime (an isolate's event loop keeps serving meanwhile).
  pub fn spawn<T, F>(&self, fut: F) -> impl Future<Output = T> + use<T, F>
  where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
  {
    let (tx, rx) = tokio::sync::oneshot::channel();
    self.rt.spawn(async move {
      let _ = tx.send(fut.await);
    });
    async move { rx.await.expect("the fleet runtime is running") }
  }

  /// `spawn`, waited for by a thread that may block.
  fn run_blocking<T, F>(&self, fut: F) -> T
  where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
  {
    futures::executor::block_on(self.spawn(fut))
  }

  /// Starts a drain: from now on no cell is taken (a refusal the caller
  /// may retry; the cells go to other nodes once released).
  pub fn drain(&self) {
    self
      .draining
      .store(true, std::sync::atomic::Ordering::SeqCst);
  }

  pub fn draining(&self) -> bool {
    self.draining.load(std::sync::atomic::Ordering::SeqCst)
  }

  /// Takes the cell `scope` (`Class:id`) for this node.
  pub async fn activate(&self, scope: String) -> Result<Activation, ActivateError> {
    self.activate_after(scope, true).await
  }

  /// `activate`; `held`: first wait for every commit of the cell captured
  /// here to be through its round (see [`Hold`]).
  pub(crate) async fn activate_after(
    &self,
    scope: String,
    held: bool,
  ) -> Result<Activation, ActivateError> {
    if self.draining() {
      return Err(ActivateError {
        message: format!(
          "node {} is shutting down and takes no cells; retry (another node takes {scope} at once)",
          self.node
        ),
        owner: Some(self.node.clone()),
      });
    }
    if !self.can_ack() {
      return Err(
        format!(
          "node {} cannot take cells: its lease is not live",
          self.node
        )
        .into(),
      );
    }
    // The bucket wins at every activation: this session's own uploads of
    // the cell land first.
    let ens = self.ens.clone();
    let s = scope.clone();
    self.spawn(async move { ens.drained(&s, held).await }).await;
    let (bucket, node, s) = (self.bucket.clone(), self.node.clone(), scope.clone());
    let (session, ens) = (self.session.clone(), self.ens.clone());
    let paged_min = self.paged_min.load(std::sync::atomic::Ordering::Relaxed);
    let (acq, restored, listed) = self
      .spawn(async move { own::acquire(&bucket, &node, &s, &session, &ens, paged_min).await })
      .await?;
    let read = acq.restore.as_ref().map_or(0, |c| c.keys.len());
    events::acquired(
      &self.node,
      &scope,
      acq.epoch,
      acq.previous.as_deref(),
      (read, listed),
    );
    self
      .owned
      .lock()
      .unwrap()
      .insert(scope, (acq.epoch, acq.token));
    Ok(Activation {
      epoch: acq.epoch,
      restored,
    })
  }

  /// Counts a commit of `scope` just captured here until its durability
  /// round is done with it (see [`Hold`]): `activate` waits for it.
  pub fn hold(&self, scope: &str) -> Hold {
    self.ens.hold(scope)
  }

  /// The acknowledgement rule for one group commit. `Err` lists the cells
  /// that must not acknowledge, with the reason (a cell named `""`: the
  /// node lease is not live, so none may).
  pub async fn publish(&self, uploads: Vec<Upload>) -> Result<(), Vec<(String, String)>> {
    if uploads.is_empty() {
      return Ok(());
    }
    let epochs: Vec<(String, u64)> = uploads.iter().map(|u| (u.scope.clone(), u.epoch)).collect();
    let (bucket, node) = (self.bucket.clone(), self.node.clone());
    let mut failed = if self.ens.active() {
      let ens = self.ens.clone();
      self
        .spawn(async move { ens.publish(uploads).await })
        .await
        .err()
        .unwrap_or_default()
    } else {
      self
        .spawn(async move { own::publish(&bucket, &node, uploads).await })
        .await
    };
    if !self.can_ack() {
      failed.push((String::new(), format!("node {} lost its lease", self.node)));
    }
    if failed.is_empty() {
      return Ok(());
    }
    for (scope, reason) in &failed {
      events::lost(&self.node, scope, reason);
    }
    let mut owned = self.owned.lock().unwrap();
    for (scope, _) in &failed {
      // Only the epoch that failed: a later one taken meanwhile (a deleted
      // facet starts over) is still held.
      let failed_epoch = |(held, _): &(u64, Token)| epochs.contains(&(scope.clone(), *held));
      if owned.get(scope).is_some_and(failed_epoch) {
        owned.remove(scope);
      }
    }
    Err(failed)
  }

  /// `publish` for a thread that may block (a durability round).
  pub fn publish_blocking(&self, uploads: Vec<Upload>) -> Result<(), Vec<(String, String)>> {
    futures::executor::block_on(self.publish(uploads))
  }

  pub fn wake_poll_ms(&self) -> u64 {
    self.wake_poll_ms
  }

  /// Publishes the wake hint of `scope` and waits for it: the commit that
  /// stores an earlier alarm follows it, so the index is never later than
  /// the cell.
  pub fn publish_hint(&self, scope: &str, hint: Hint) -> Result<(), String> {
    let (bucket, s) = (self.bucket.clone(), scope.to_string());
    self.run_blocking(async move { wake::publish(&bucket, &s, &hint).await })
  }

  /// Drops the hint of a cell held here that has no alarm. Blocking, so a
  /// later `publish_hint` for the cell cannot be overtaken by this DELETE.
  pub fn drop_hint(&self, scope: &str) {
    if !self.can_ack() || !self.owned.lock().unwrap().contains_key(scope) {
      return;
    }
    let (bucket, s) = (self.bucket.clone(), scope.to_string());
    self.run_blocking(async move { wake::drop(&bucket, &s).await });
  }

  /// One pass over the wake index (blocking): the cells to wake, with
  /// their hints; the waker role is taken or renewed here when free.
  pub fn wake_pass(&self) -> Result<Vec<(String, Hint)>, String> {
    if !self.can_ack() {
      return Ok(Vec::new());
    }
    let (bucket, node) = (self.bucket.clone(), self.node.clone());
    // Held for three passes: one missed pass does not hand the role over.
    let hold_ms = self.wake_poll_ms.saturating_mul(3);
    let hints = self.hints.clone();
    self.run_blocking(
      async move { wake::pass(&bucket, &node, hold_ms, &mut *hints.lock().await).await },
    )
  }

  /// Uploads a snapshot of the cell (its whole database as of TXID
  /// `u.txid`, an object covering `1..=u.txid` at the snapshot level) in
  /// the background, and calls `done` with the outcome. Only a restore's
  /// cost depends on it: the caller has made that TXID durable already
  /// (see `cellhost_logic::compact`).
  pub fn put_snapshot(&self, u: Upload, done: impl FnOnce(bool) + Send + 'static) {
    let (bucket, node) = (self.bucket.clone(), self.node.clone());
    self.rt.spawn(async move {
      let size = u.bytes.len();
      let key = LtxKey {
        epoch: u.epoch,
        level: cellhost_logic::compact::SNAPSHOT_LEVEL,
        min_txid: 1,
        max_txid: u.txid,
      };
      let object = key.object_key(&u.scope);
      let r = bucket.put(&object, u.bytes).await;
      if r.is_ok() {
        // Where the next restore starts listing snapshots (best effort: a
        // stale hint only lists more).
        let hint = cellhost_logic::restore::snapshot_hint_key(&u.scope);
        if let Err(e) = bucket.put(&hint, object.into_bytes()).await {
          tracing::warn!("{}: snapshot hint not written: {e}", u.scope);
        }
      }
      match &r {
        Ok(_) => events::snapshot(&node, &u.scope, u.epoch, u.txid, size),
        Err(e) => tracing::warn!(
          "{}: snapshot through TXID {} not uploaded: {e}",
          u.scope,
          u.txid
        ),
      }
      done(r.is_ok());
    });
  }

  /// Clean shutdown: nothing more is acknowledged; every owned cell is
  /// released (its record keeps the epoch, names no node); the lease is
  /// retired so peers take over at once.
  pub fn shutdown(&self) {
    self.lease.close();
    let owned: Vec<(String, (u64, Token))> = self.owned.lock().unwrap().drain().collect();
    let (bucket, node) = (self.bucket.clone(), self.node.clone());
    let n = owned.len();
    let lease = self.lease.clone();
    let ens = self.ens.clone();
    self.run_blocking(async move {
      // A cell is released only once its uploads landed; one whose
      // uploads cannot land keeps its record, and the next owner recovers
      // it from this session's followers.
      let jobs = owned.into_iter().map(|(scope, (epoch, token))| {
        let (bucket, node, ens) = (bucket.clone(), node.clone(), ens.clone());
        async move {
          let wait = std::time::Duration::from_secs(10);
          if tokio::time::timeout(wait, ens.drained(&scope, true))
            .await
            .is_ok()
          {
            own::release(&bucket, &node, scope, epoch, token).await
          } else {
            tracing::warn!("{scope}: its uploads did not land; not released");
          }
        }
      });
      futures::future::join_all(jobs).await;
      lease::retire(&lease).await;
    });
    tracing::info!(
      "node {}: released {n} cells and retired its lease",
      self.node
    );
  }
}

/// Encodes one LTX object covering TXIDs `min..=max` (every page when
/// `min` is 1: a snapshot), as the NoChecksum files Litestream also writes.
pub fn encode_ltx(
  page_size: u32,
  commit: u32,
  pages: &std::collections::BTreeMap<u32, Vec<u8>>,
  min: u64,
  max: u64,
) -> Result<Vec<u8>, String> {
  let header = cellhost_ltx::Header::delta(page_size, commit, min, max, now_ms() as i64);
  let lock = cellhost_ltx::lock_pgno(page_size);
  let pages = pages
    .iter()
    .filter(|(p, _)| **p != lock && **p <= commit)
    .map(|(p, d)| (*p, d.as_slice()));
  cellhost_ltx::encode(&header, pages).map_err(|e| e.to_string())
}

//! The fleet proof and the takeover recovery gate at run time: the I/O
//! shell around `cellhost_logic::ensemble`. The peer channel carries the
//! node-log requests ([`LogTransport`]); this module keeps the session's
//! [`FleetGate`], its record in the bucket, the ordered queue of appends to
//! each follower, and the background uploads that drain the node logs.
//!
//! Each durability round is one batch. Its objects go to the followers
//! and, at the same time, to the bucket in the background; the round is
//! acknowledged once the gate settles it (every member fsynced it, or its
//! bucket proof passed). A cell is taken again (or released) only once its
//! uploads are all in the bucket ([`Ensemble::drained`]), since the bucket
//! wins at every activation.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cellhost_bucket::Bucket;
use cellhost_logic::ensemble::follower::{AppendAnswer, Batch, Tail};
use cellhost_logic::ensemble::owner::{Durability, FleetGate, GateOut};
use cellhost_logic::ensemble::record::{LogRecord, log_record_key, loss_record_key};
use cellhost_logic::ensemble::recovery::{
  MemberAnswer, RECOVERY_RETRIES, RECOVERY_RETRY_MS, Recovery, RecoveryStep,
};
use cellhost_logic::restore::LtxKey;
use futures::StreamExt;
use futures::future::{FutureExt, Shared};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::codec::{answer, log_json, parse_log, store_err, token, version};
use crate::{Upload, own};

/// One node-log entry: an LTX object with its cell, epoch and TXID.
pub type Entry = Vec<u8>;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How a node reaches a follower's node log (the peer channel: an
/// authenticated HTTP/2 call to its internal listener).
/// Each call names the follower's node log (`log`, from its lease): a node
/// restarted without its disk refuses calls meant for the log it lost.
pub trait LogTransport: Send + Sync + 'static {
  /// Appends `batch` of `owner`'s `session` on the node at `address`.
  fn append(
    &self,
    address: &str,
    log: &str,
    owner: &str,
    session: &str,
    batch: Batch<Entry>,
  ) -> BoxFuture<Result<AppendAnswer, String>>;
  /// Seals `owner`'s `session` there and reads its tail (`CLT2`); `None`
  /// when the node's log is not `log` (that one went with its disk).
  fn seal_tail(
    &self,
    address: &str,
    log: &str,
    owner: &str,
    session: &str,
  ) -> BoxFuture<Result<Option<Tail<Entry>>, String>>;
  /// Batches of `epoch` up to `through` are in the bucket.
  fn prune(
    &self,
    address: &str,
    log: &str,
    owner: &str,
    session: &str,
    epoch: u32,
    through: u64,
  ) -> BoxFuture<Result<(), String>>;
}

pub use cellhost_logic::ensemble::{member_name, split_member};

/// `--durability`: how a node proves a write durable before acknowledging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurabilityMode {
  /// Followers' fsyncs (the bucket proof when none is available).
  Fleet,
  /// Always the bucket proof (upload, then the ownership read).
  Bucket,
}

impl std::str::FromStr for DurabilityMode {
  type Err = String;
  fn from_str(s: &str) -> Result<Self, String> {
    match s {
      "fleet" => Ok(DurabilityMode::Fleet),
      "bucket" => Ok(DurabilityMode::Bucket),
      _ => Err(format!("unknown durability {s:?} (fleet or bucket)")),
    }
  }
}

/// An entry's bytes: u16 scope length, scope, u64 epoch, u64 TXID, LTX.
pub fn encode_entry(u: &Upload) -> Entry {
  let mut out = Vec::with_capacity(u.bytes.len() + u.scope.len() + 18);
  out.extend_from_slice(&(u.scope.len() as u16).to_be_bytes());
  out.extend_from_slice(u.scope.as_bytes());
  out.extend_from_slice(&u.epoch.to_be_bytes());
  out.extend_from_slice(&u.txid.to_be_bytes());
  out.extend_from_slice(&u.bytes);
  out
}

pub fn decode_entry(e: &[u8]) -> Result<Upload, String> {
  let bad = || "a malformed node-log entry".to_string();
  let n = u16::from_be_bytes(e.get(..2).ok_or_else(bad)?.try_into().unwrap()) as usize;
  let scope = std::str::from_utf8(e.get(2..2 + n).ok_or_else(bad)?).map_err(|_| bad())?;
  cellhost_logic::own::validate_scope(scope)?;
  let num = |at: usize| {
    e.get(at..at + 8)
      .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
      .ok_or_else(bad)
  };
  Ok(Upload {
    scope: scope.to_string(),
    epoch: num(2 + n)?,
    txid: num(10 + n)?,
    bytes: e[18 + n..].to_vec(),
  })
}

/// How long a node-log call may take: a follower that does not answer by
/// then fails (its log epoch closes), as one that refused would.
const LOG_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Appends to one follower in flight at once: the durability rounds of a
/// busy node overlap, and each waits for its own append only.
const APPENDS_IN_FLIGHT: usize = 4;

/// Rounds uploading at once: a slow bucket gets a queue, not a request per
/// round.
const UPLOADS_IN_FLIGHT: usize = 16;

/// The most bytes of proven rounds not yet in the bucket. A round waits
/// for room before it goes to the followers, so a bucket slower than the
/// writes slows acknowledgements down instead of growing this node's
/// memory and its followers' logs without end: a recovery never gathers
/// more than about this (plus the rounds not yet pruned), well within the
/// seeds' 512 MiB window.
const BACKLOG_BYTES: u64 = 128 << 20;

/// How long a round waits for room before it fails (not acknowledged).
const BACKLOG_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

type Waiter = oneshot::Sender<Result<(), Vec<(String, String)>>>;

/// A member's queue of appends: (log epoch, batch number, batch id).
type Queue = mpsc::UnboundedSender<(u32, u64, u64)>;

struct Pending {
  waiter: Option<Waiter>,
  /// The round's cells and their epochs (for an ownership read).
  cells: Vec<(String, u64)>,
  /// Cells the bucket proof refused, with the reason.
  failures: Vec<(String, String)>,
}

/// The session's side of the fleet proof.
pub(crate) struct Ensemble {
  bucket: Bucket,
  node: String,
  session: String,
  mode: DurabilityMode,
  transport: OnceLock<Arc<dyn LogTransport>>,
  gate: Mutex<FleetGate>,
  next_id: AtomicU64,
  pending: Mutex<HashMap<u64, Pending>>,
  entries: Mutex<HashMap<u64, Arc<Vec<Entry>>>>,
  uploads: Mutex<HashMap<u64, Arc<Vec<Upload>>>>,
  queues: Mutex<HashMap<String, Queue>>,
  /// Live followers (member names) and their addresses, from their leases.
  live: Mutex<Vec<(String, String)>>,
  /// Uploads not yet in the bucket, per cell.
  unuploaded: Mutex<HashMap<String, usize>>,
  /// Commits captured and not yet through their durability round, per
  /// cell ([`Hold`]).
  held: Mutex<HashMap<String, usize>>,
  uploaded: Notify,
  /// Recoveries in progress, by `node/session`: a dead session's cells are
  /// taken at once, and one recovery serves them all.
  recoveries: Mutex<HashMap<String, RecoveryRun>>,
  /// A recovery's pause between attempts (ms) and its attempts
  /// (`--recovery-retry-ms`, `--recovery-retries`).
  recovery_budget: Mutex<(u64, u32)>,
  /// Bytes of proven or proving rounds not yet uploaded, and the most
  /// allowed ([`BACKLOG_BYTES`]).
  backlog: Mutex<u64>,
  backlog_limit: u64,
  upload_slots: Arc<tokio::sync::Semaphore>,
}

/// A commit of a cell captured on this node, from the capture until its
/// durability round published it (then the upload queue, if the round
/// left the upload to the background, counts it until it lands) or failed.
/// While one is held the cell is not taken again on this node: the round
/// may still acknowledge the commit, and a restore would not see it (a
/// second instance of an object, or its next one after a reset, on
/// another isolate or version of this node).
pub struct Hold {
  ens: Arc<Ensemble>,
  scope: String,
}

impl Drop for Hold {
  fn drop(&mut self) {
    uncount(&self.ens.held, &self.scope);
    self.ens.uploaded.notify_waiters();
  }
}

fn uncount(counts: &Mutex<HashMap<String, usize>>, scope: &str) {
  let mut counts = counts.lock().unwrap();
  if let Some(n) = counts.get_mut(scope) {
    *n -= 1;
    if *n == 0 {
      counts.remove(scope);
    }
  }
}

/// One recovery, awaited by every cell of the session it recovers.
type RecoveryRun = Shared<BoxFuture<Result<(), String>>>;

impl Ensemble {
  pub(crate) fn new(bucket: Bucket, node: &str, session: &str, mode: DurabilityMode) -> Arc<Self> {
    Arc::new(Ensemble {
      bucket,
      node: node.into(),
      session: session.into(),
      mode,
      transport: OnceLock::new(),
      gate: Mutex::new(FleetGate::new(node, session)),
      next_id: AtomicU64::new(1),
      pending: Default::default(),
      entries: Default::default(),
      uploads: Default::default(),
      queues: Default::default(),
      live: Default::default(),
      unuploaded: Default::default(),
      held: Default::default(),
      uploaded: Notify::new(),
      recoveries: Default::default(),
      recovery_budget: Mutex::new((RECOVERY_RETRY_MS, RECOVERY_RETRIES)),
      backlog: Mutex::new(0),
      backlog_limit: BACKLOG_BYTES,
      upload_slots: Arc::new(tokio::sync::Semaphore::new(UPLOADS_IN_FLIGHT)),
    })
  }

  pub(crate) fn set_recovery_budget(&self, retry_ms: u64, retries: u32) {
    *self.recovery_budget.lock().unwrap() = (retry_ms, retries);
  }

  pub(crate) fn set_transport(&self, t: Arc<dyn LogTransport>) {
    let _ = self.transport.set(t);
  }

  pub(crate) fn transport(&self) -> Option<Arc<dyn LogTransport>> {
    self.transport.get().cloned()
  }

  /// Whether rounds go through the gate (fleet mode with a peer channel).
  pub(crate) fn active(&self) -> bool {
    self.mode == DurabilityMode::Fleet && self.transport.get().is_some()
  }

  pub(crate) fn durability(&self) -> Durability {
    if !self.active() {
      return Durability::Bucket;
    }
    self.gate.lock().unwrap().durability()
  }

  /// The live nodes' leases: every other node may follow.
  pub(crate) fn set_live(&self, leases: Vec<cellhost_logic::lease::NodeLease>) {
    *self.live.lock().unwrap() = (leases.into_iter())
      .filter(|l| l.node != self.node)
      .map(|l| (member_name(&l.node, &l.log), l.address))
      .collect();
  }

  fn address(&self, member: &str) -> Option<String> {
    let live = self.live.lock().unwrap();
    live
      .iter()
      .find(|(m, _)| m == member)
      .map(|(_, a)| a.clone())
  }

  /// Proves one round durable (see the module doc).
  pub(crate) async fn publish(
    self: &Arc<Self>,
    uploads: Vec<Upload>,
  ) -> Result<(), Vec<(String, String)>> {
    let live: Vec<String> = (self.live.lock().unwrap().iter())
      .map(|(n, _)| n.clone())
      .collect();
    let fleet = {
      let mut g = self.gate.lock().unwrap();
      g.set_live(&live);
      g.wants_fleet()
    };
    if !fleet {
      // No follower to try: the bucket proof, with no background upload.
      let failed = own::publish(&self.bucket, &self.node, uploads).await;
      return if failed.is_empty() {
        Ok(())
      } else {
        Err(failed)
      };
    }
    let size: u64 = uploads.iter().map(|u| u.bytes.len() as u64).sum();
    if tokio::time::timeout(BACKLOG_WAIT, self.room_for(size))
      .await
      .is_err()
    {
      let behind = *self.backlog.lock().unwrap() >> 20;
      let why =
        format!("the bucket is too far behind: {behind} MiB of proven writes are not uploaded yet");
      let mut scopes: Vec<String> = uploads.iter().map(|u| u.scope.clone()).collect();
      scopes.dedup();
      return Err(scopes.into_iter().map(|s| (s, why.clone())).collect());
    }
    let id = self.next_id.fetch_add(1, Ordering::SeqCst);
    let (tx, rx) = oneshot::channel();
    let mut cells: Vec<(String, u64)> = Vec::new();
    for u in &uploads {
      if !cells.iter().any(|(s, _)| *s == u.scope) {
        cells.push((u.scope.clone(), u.epoch));
      }
    }
    {
      let mut un = self.unuploaded.lock().unwrap();
      for u in &uploads {
        *un.entry(u.scope.clone()).or_default() += 1;
      }
    }
    self
      .entries
      .lock()
      .unwrap()
      .insert(id, Arc::new(uploads.iter().map(encode_entry).collect()));
    let uploads = Arc::new(uploads);
    self.uploads.lock().unwrap().insert(id, uploads.clone());
    self.pending.lock().unwrap().insert(
      id,
      Pending {
        waiter: Some(tx),
        cells,
        failures: Vec::new(),
      },
    );
    let out = self.gate.lock().unwrap().on_commit(id);
    let me = self.clone();
    tokio::spawn(async move { me.upload(id, uploads).await });
    self.perform(out);
    rx.await.unwrap_or_else(|_| {
      Err(vec![(
        String::new(),
        "the durability round was dropped".into(),
      )])
    })
  }

  /// Waits until the backlog has room for `size` more bytes, then takes
  /// it. A round larger than the whole allowance goes alone.
  async fn room_for(&self, size: u64) {
    loop {
      let wait = self.uploaded.notified();
      {
        let mut b = self.backlog.lock().unwrap();
        if *b == 0 || *b + size <= self.backlog_limit {
          *b += size;
          return;
        }
      }
      wait.await;
    }
  }

  /// The round's objects to the bucket, retried until they land: once the
  /// fleet proved them, the node logs hold them only until then.
  async fn upload(self: Arc<Self>, id: u64, uploads: Arc<Vec<Upload>>) {
    let size: u64 = uploads.iter().map(|u| u.bytes.len() as u64).sum();
    let _slot = self.upload_slots.clone().acquire_owned().await;
    let mut pause = 100;
    loop {
      let puts = uploads.iter().map(|u| {
        let key = LtxKey::l0(u.epoch, u.txid).object_key(&u.scope);
        let bytes = u.bytes.clone();
        let bucket = self.bucket.clone();
        async move { bucket.put(&key, bytes).await }
      });
      let results = futures::future::join_all(puts).await;
      if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
        tracing::warn!(
          "uploading round {id} of log session {}: {e}; retrying",
          self.session
        );
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        pause = (pause * 2).min(1_000);
        continue;
      }
      break;
    }
    *self.backlog.lock().unwrap() -= size;
    for u in uploads.iter() {
      uncount(&self.unuploaded, &u.scope);
    }
    self.uploaded.notify_waiters();
    self.uploads.lock().unwrap().remove(&id);
    let out = self.gate.lock().unwrap().on_uploaded(id);
    self.perform(out);
  }

  /// The takeover recovery gate for `node`'s session `session` ([`recover`]),
  /// run by `me` once however many of the session's cells wait for it.
  pub(crate) async fn recover(
    &self,
    bucket: &Bucket,
    me: &str,
    node: &str,
    session: &str,
  ) -> Result<(), String> {
    let key = format!("{node}/{session}");
    let run = {
      let mut running = self.recoveries.lock().unwrap();
      let start = || {
        let (bucket, t) = (bucket.clone(), self.transport());
        let (me, node, session) = (me.to_string(), node.to_string(), session.to_string());
        let budget = *self.recovery_budget.lock().unwrap();
        let f: BoxFuture<Result<(), String>> =
          Box::pin(async move { recover(&bucket, t, &me, &node, &session, budget).await });
        f.shared()
      };
      running.entry(key.clone()).or_insert_with(start).clone()
    };
    let r = run.clone().await;
    let mut running = self.recoveries.lock().unwrap();
    if running.get(&key).is_some_and(|f| f.ptr_eq(&run)) {
      running.remove(&key);
    }
    r
  }

  /// Counts a commit of `scope` just captured until the guard goes.
  pub(crate) fn hold(self: &Arc<Self>, scope: &str) -> Hold {
    *(self.held.lock().unwrap())
      .entry(scope.to_string())
      .or_default() += 1;
    Hold {
      ens: self.clone(),
      scope: scope.to_string(),
    }
  }

  /// Waits until every upload of `scope` is in the bucket and (`held`)
  /// every commit of it captured here has been through its round.
  pub(crate) async fn drained(&self, scope: &str, held: bool) {
    loop {
      let wait = self.uploaded.notified();
      let busy = self.unuploaded.lock().unwrap().contains_key(scope)
        || (held && self.held.lock().unwrap().contains_key(scope));
      if !busy {
        return;
      }
      wait.await;
    }
  }

  fn perform(self: &Arc<Self>, mut out: GateOut) {
    if let Some(w) = out.write_record.take() {
      let me = self.clone();
      tokio::spawn(async move { me.write_record(w.record, w.token).await });
    }
    if out.read_record {
      let me = self.clone();
      tokio::spawn(async move { me.read_record_back().await });
    }
    for s in out.sends {
      self.enqueue(&s.member, s.epoch, s.seq, s.id);
    }
    for id in out.bucket {
      let me = self.clone();
      tokio::spawn(async move { me.bucket_proof(id).await });
    }
    for (id, ok) in out.settled {
      self.entries.lock().unwrap().remove(&id);
      let Some(p) = self.pending.lock().unwrap().remove(&id) else {
        continue;
      };
      let r = if !ok {
        Err(vec![(
          String::new(),
          "the durability round was refused".into(),
        )])
      } else if !p.failures.is_empty() {
        Err(p.failures)
      } else {
        Ok(())
      };
      if let Some(w) = p.waiter {
        let _ = w.send(r);
      }
    }
    for (member, epoch, through) in out.prune {
      let (Some(t), Some(address)) = (self.transport.get().cloned(), self.address(&member)) else {
        continue;
      };
      let (node, session) = (self.node.clone(), self.session.clone());
      tokio::spawn(async move {
        // Best effort: a later prune covers this one.
        let log = split_member(&member).1;
        let prune = t.prune(&address, log, &node, &session, epoch, through);
        let _ = tokio::time::timeout(LOG_CALL_TIMEOUT, prune).await;
      });
    }
  }

  async fn write_record(
    self: Arc<Self>,
    record: LogRecord,
    based_on: Option<cellhost_logic::Token>,
  ) {
    let key = log_record_key(&self.node, &self.session);
    let w = match &based_on {
      None => self.bucket.create(&key, log_json(&record)).await,
      Some(t) => self.bucket.cas(&key, log_json(&record), &version(t)).await,
    };
    let a = answer(w).unwrap_or_else(|e| cellhost_logic::WriteAnswer::Failed(store_err(e)));
    let out = self.gate.lock().unwrap().on_record_write(a);
    self.perform(out);
  }

  async fn read_record_back(self: Arc<Self>) {
    let key = log_record_key(&self.node, &self.session);
    let r = match self.bucket.get(&key).await {
      Ok(Some((b, v))) => parse_log(&b).map(|r| Some((r, token(&v)))),
      Ok(None) => Ok(None),
      Err(e) => Err(store_err(e)),
    };
    if r.is_err() {
      tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = self.gate.lock().unwrap().on_record_read(r);
    self.perform(out);
  }

  /// Upload (unless the background upload landed already), then the
  /// ownership read.
  async fn bucket_proof(self: Arc<Self>, id: u64) {
    let uploads = self.uploads.lock().unwrap().get(&id).cloned();
    let cells = (self.pending.lock().unwrap().get(&id)).map_or_else(Vec::new, |p| p.cells.clone());
    let failed = match uploads {
      Some(u) => own::publish(&self.bucket, &self.node, u.as_ref().clone()).await,
      None => own::check_owners(&self.bucket, &self.node, cells).await,
    };
    if let Some(p) = self.pending.lock().unwrap().get_mut(&id) {
      p.failures = failed;
    }
    let out = self.gate.lock().unwrap().on_bucket_proof(id, true);
    self.perform(out);
  }

  /// Appends go to each member in order, one at a time: a follower stores
  /// batch `s` only after `s - 1`.
  fn enqueue(self: &Arc<Self>, member: &str, epoch: u32, seq: u64, id: u64) {
    let mut queues = self.queues.lock().unwrap();
    if let Some(q) = queues.get(member)
      && q.send((epoch, seq, id)).is_ok()
    {
      return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _ = tx.send((epoch, seq, id));
    queues.insert(member.to_string(), tx);
    let (me, member) = (self.clone(), member.to_string());
    let slots = Arc::new(tokio::sync::Semaphore::new(APPENDS_IN_FLIGHT));
    tokio::spawn(async move {
      while let Some((epoch, seq, id)) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
          return;
        };
        let (me, member) = (me.clone(), member.clone());
        // Sent in order, answered in any: the follower holds a batch that
        // overtook its predecessor for a moment.
        tokio::spawn(async move {
          me.append(&member, epoch, seq, id).await;
          drop(slot);
        });
      }
    });
  }

  /// One append to one member, and what its answer settles.
  async fn append(self: &Arc<Self>, member: &str, epoch: u32, seq: u64, id: u64) {
    let entries = self.entries.lock().unwrap().get(&id).cloned();
    let answer = match (entries, self.address(member), self.transport.get().cloned()) {
      (Some(entries), Some(address), Some(t)) => {
        let batch = Batch {
          epoch,
          seq,
          entries: entries.as_ref().clone(),
        };
        let log = split_member(member).1;
        let append = t.append(&address, log, &self.node, &self.session, batch);
        (tokio::time::timeout(LOG_CALL_TIMEOUT, append).await)
          .unwrap_or_else(|_| Err("no answer in time".into()))
      }
      // Settled meanwhile (through the bucket): nothing to send.
      (None, ..) => return,
      (_, None, _) => Err(format!("node {member} is not live")),
      (.., None) => Err("no peer channel".into()),
    };
    let out = {
      let mut g = self.gate.lock().unwrap();
      match answer {
        Ok(a) => g.on_append(member, epoch, a),
        Err(e) => {
          tracing::info!("follower {member} failed: {e}; its log epoch {epoch} closes");
          g.on_member_error(member, epoch)
        }
      }
    };
    self.perform(out);
  }
}

/// The leases of the live nodes (not expired by `now_ms`).
pub(crate) async fn live_nodes(
  bucket: &Bucket,
  now_ms: u64,
) -> Vec<cellhost_logic::lease::NodeLease> {
  let Ok(keys) = bucket.list_keys("nodes/").await else {
    return Vec::new();
  };
  let mut out = Vec::new();
  for k in keys {
    let Some(name) = k
      .strip_prefix("nodes/")
      .and_then(|k| k.strip_suffix(".json"))
    else {
      continue;
    };
    if let Ok(Some((l, _))) = own::read_lease(bucket, name).await
      && l.expires_ms > now_ms
      && !l.address.is_empty()
    {
      out.push(l);
    }
  }
  out
}

/// The takeover recovery gate for `node`'s session `session`, run by `me`,
/// with `(retry_ms, retries)` as its budget.
pub(crate) async fn recover(
  bucket: &Bucket,
  transport: Option<Arc<dyn LogTransport>>,
  me: &str,
  node: &str,
  session: &str,
  (retry_ms, retries): (u64, u32),
) -> Result<(), String> {
  let key = log_record_key(node, session);
  let started = std::time::Instant::now();
  let (mut m, mut step) = Recovery::<Entry>::new(node, session, me, retry_ms, retries);
  loop {
    step = match step {
      RecoveryStep::ReadRecord => {
        let r = match bucket.get(&key).await {
          Ok(Some((b, v))) => parse_log(&b).map(|r| Some((r, token(&v)))),
          Ok(None) => Ok(None),
          Err(e) => Err(store_err(e)),
        };
        m.on_record(r)
      }
      RecoveryStep::Create { record } => {
        m.on_write(answer(bucket.create(&key, log_json(&record)).await)?)
      }
      RecoveryStep::Cas { record, token } => m.on_write(answer(
        bucket.cas(&key, log_json(&record), &version(&token)).await,
      )?),
      RecoveryStep::SealTails { members } => {
        // All members at once: a dead one costs one timeout, not one each.
        let ask = |member: String| {
          let transport = transport.clone();
          async move {
            let (at, log) = split_member(&member);
            let a = match (&transport, own::read_lease(bucket, at).await) {
              (Some(t), Ok(Some((l, _)))) if !l.address.is_empty() => match tokio::time::timeout(
                LOG_CALL_TIMEOUT,
                t.seal_tail(&l.address, log, node, session),
              )
              .await
              .unwrap_or_else(|_| Err("no answer in time".into()))
              {
                Ok(Some(tail)) => MemberAnswer::Tail(tail),
                Ok(None) => MemberAnswer::Gone,
                Err(e) => {
                  tracing::info!(
                    "recovering {node}'s log session {session}: follower {member}: {e}"
                  );
                  MemberAnswer::Failed
                }
              },
              _ => MemberAnswer::Failed,
            };
            (member, a)
          }
        };
        let answers = futures::future::join_all(members.into_iter().map(ask)).await;
        m.on_tails(&answers.into_iter().collect())
      }
      RecoveryStep::Upload { entries } => {
        // Eight PUTs in flight: nothing reads these objects before the
        // record is sealed, so their order does not matter.
        let put = |e: &Entry| {
          let u = decode_entry(e);
          async move {
            match u {
              Ok(u) => {
                let k = LtxKey::l0(u.epoch, u.txid).object_key(&u.scope);
                bucket.put(&k, u.bytes).await.is_ok()
              }
              Err(e) => {
                tracing::warn!("recovering {node}'s log session {session}: {e}; skipped");
                true
              }
            }
          }
        };
        let done: Vec<bool> = futures::stream::iter(entries.iter().map(put))
          .buffer_unordered(8)
          .collect()
          .await;
        m.on_uploaded(done.into_iter().all(|ok| ok))
      }
      RecoveryStep::WriteLoss { loss } => {
        let body = serde_json::json!({
          "node": node,
          "session": session,
          "uncertified": loss.iter().map(|(e, from)| serde_json::json!({"log_epoch": e, "from_batch": from})).collect::<Vec<_>>(),
          "at_ms": crate::now_ms(),
        });
        tracing::error!(
          "recovering {node}'s log session {session}: batches nobody could certify: {body}"
        );
        m.on_uploaded(
          bucket
            .put(
              &loss_record_key(node, session),
              body.to_string().into_bytes(),
            )
            .await
            .is_ok(),
        )
      }
      RecoveryStep::Retry { after_ms, then } => {
        tokio::time::sleep(std::time::Duration::from_millis(after_ms)).await;
        *then
      }
      RecoveryStep::Done { recovered, loss } => {
        let took = started.elapsed();
        if recovered > 0 || !loss.is_empty() || took.as_secs() > 0 {
          tracing::info!(
            "recovered {recovered} entries of {node}'s log session {session} in {} ms",
            took.as_millis()
          );
        }
        return Ok(());
      }
      RecoveryStep::Failed(e) => return Err(e),
    };
  }
}

#[cfg(test)]
#[path = "ensemble_backlog_tests.rs"]
mod backlog_tests;

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn entries_round_trip_and_refuse_garbage() {
    let u = Upload {
      scope: "Counter:abc".into(),
      epoch: 3,
      txid: 9,
      bytes: vec![1, 2, 3],
    };
    let d = decode_entry(&encode_entry(&u)).unwrap();
    assert_eq!(
      (d.scope, d.epoch, d.txid, d.bytes),
      (u.scope.clone(), 3, 9, vec![1, 2, 3])
    );
    assert!(decode_entry(&[0, 9, b'a']).is_err());
    let bad = encode_entry(&Upload {
      scope: "../x".into(),
      ..u
    });
    assert!(decode_entry(&bad).is_err(), "a scope is a path component");
  }
}

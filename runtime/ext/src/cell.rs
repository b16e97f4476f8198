//! The cells (Durable Object instances) of one isolate: their databases, the
//! ops the storage API calls, and the end-of-turn group commit.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use cellhost_storage::{CellDb, StorageError};

use crate::sync::note_unsynced;
pub use crate::sync::{SyncBatch, SyncFailure, Unsynced};
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;

/// Open cell databases of this isolate, which have uncommitted writes, and
/// how far their commits are durable.
///
/// Commits happen once per turn for all cells (`commit_all`); each such
/// round that wrote something gets a number. A round is durable once the
/// WAL files it appended to are fsynced (`take_unsynced` hands them to the
/// host, `mark_durable` records the result); the output gate holds a reply
/// until the round it depends on is durable.
pub struct Cells {
  pub(crate) data_dir: PathBuf,
  dbs: HashMap<u32, CellDb>,
  next: u32,
  dirty: HashSet<u32>,
  committed: u64,
  durable: u64,
  /// Files appended to since the last durability round started.
  unsynced: HashMap<PathBuf, Unsynced>,
  /// Handles whose WAL's directory entry is already durable.
  dir_synced: HashSet<u32>,
  /// Cells whose commit failed, with the reason; the object is reset on its
  /// next event.
  failed: HashMap<u32, String>,
  /// Open cells by `<unique key>/<id hex>`, so a reply finds its cell.
  by_key: HashMap<String, u32>,
  /// The reverse of `by_key`, so closing a cell does not scan every key.
  key_of: HashMap<u32, String>,
  /// The round of each cell's latest commit.
  last_round: HashMap<u32, u64>,
  /// `storage.sync()` calls waiting for a round to become durable.
  sync_waiters: Vec<(u64, tokio::sync::oneshot::Sender<bool>)>,
  /// The latest round in which some commit failed: effects waiting for it
  /// are dropped, not sent (the output gate is broken).
  failed_round: u64,
  /// Set with `--bucket`: cells are taken and replicated (see `replica`).
  pub(crate) fleet: Option<std::sync::Arc<cellhost_fleet::Fleet>>,
  repl: HashMap<u32, crate::replica::Repl>,
  /// LTX objects of commits not yet handed to a durability round.
  uploads: Vec<crate::sync::Captured>,
  /// Cells that committed since the last durability round started, with
  /// their keys: the cells the next round makes durable.
  since_batch: HashMap<u32, String>,
  /// Rounds settle in order; once one failed for a cell, later rounds do
  /// not acknowledge it (the logic core's gap rule).
  latch: cellhost_logic::ack::RoundLatch<u32>,
  /// How long local histories keep states (`--pitr-days`; 0: no history).
  pub(crate) pitr_retention_ms: u64,
  /// The local history of each cell without a bucket (see `pitr`).
  history: HashMap<u32, crate::pitr::Local>,
  /// Durability rounds handed out by `take_unsynced` and not yet settled.
  rounds_out: usize,
}

impl Cells {
  pub fn new(data_dir: PathBuf, fleet: Option<std::sync::Arc<cellhost_fleet::Fleet>>) -> Self {
    Cells {
      fleet,
      repl: HashMap::new(),
      uploads: Vec::new(),
      data_dir,
      dbs: HashMap::new(),
      next: 1,
      dirty: HashSet::new(),
      committed: 0,
      durable: 0,
      unsynced: HashMap::new(),
      dir_synced: HashSet::new(),
      sync_waiters: Vec::new(),
      failed_round: 0,
      failed: HashMap::new(),
      by_key: HashMap::new(),
      key_of: HashMap::new(),
      last_round: HashMap::new(),
      since_batch: HashMap::new(),
      latch: Default::default(),
      pitr_retention_ms: crate::pitr::DEFAULT_RETENTION_DAYS * cellhost_pitr::DAY_MS,
      history: HashMap::new(),
      rounds_out: 0,
    }
  }

  /// Sets how long local histories keep states (0: keep none).
  pub fn set_pitr_days(&mut self, days: f64) {
    self.pitr_retention_ms = (days * cellhost_pitr::DAY_MS as f64) as u64;
  }

  /// The name of an open cell in its bookmarks.
  pub(crate) fn key_of_handle(&self, h: u32) -> String {
    self.key_of.get(&h).cloned().unwrap_or_default()
  }

  pub(crate) fn repl_of(&self, h: u32) -> Option<&crate::replica::Repl> {
    self.repl.get(&h)
  }

  /// An open cell's database with its local history.
  pub(crate) fn local_history(
    &mut self,
    h: u32,
  ) -> Result<(&mut CellDb, &mut crate::pitr::Local), JsErrorBox> {
    match (self.dbs.get_mut(&h), self.history.get_mut(&h)) {
      (Some(db), Some(l)) => Ok((db, l)),
      _ => Err(JsErrorBox::generic(
        "this Durable Object has no point-in-time history this session: it could not be opened (the node's log says why)",
      )),
    }
  }

  /// Opens a cell's database without a bucket, with its local history
  /// (which may first restore it), and registers it.
  pub(crate) fn open_local(
    &mut self,
    unique_key: &str,
    id_hex: &str,
    path: &std::path::Path,
  ) -> Result<u32, JsErrorBox> {
    let db = CellDb::open(path).map_err(err)?;
    if self.pitr_retention_ms == 0 {
      return Ok(self.insert(unique_key, id_hex, db, None));
    }
    let key = format!("{unique_key}/{id_hex}");
    match crate::pitr::open_local(db, &key, self.pitr_retention_ms) {
      Ok((db, local)) => {
        let h = self.insert(unique_key, id_hex, db, None);
        self.history.insert(h, local);
        Ok(h)
      }
      Err(e) => {
        // A history that cannot go on (a full disk, say) must not keep the
        // object from serving: it runs without one this session (SQLite
        // checkpoints as usual), its bookmark calls fail, and the next
        // session starts a new generation.
        tracing::error!("{key}: no point-in-time history this session: {e}");
        let db = CellDb::open(path).map_err(err)?;
        Ok(self.insert(unique_key, id_hex, db, None))
      }
    }
  }

  /// The round output of the cell `key` (`<unique key>/<id hex>`) must wait
  /// for: its own uncommitted or not yet durable writes only, so a
  /// read-only event of an object is not delayed by its neighbours.
  pub fn gate_round_for(&self, key: &str) -> u64 {
    let Some(&h) = self.by_key.get(key) else {
      return 0;
    };
    if self.dirty.contains(&h) {
      self.committed + 1
    } else {
      self
        .last_round
        .get(&h)
        .copied()
        .filter(|r| *r > self.durable)
        .unwrap_or(0)
    }
  }

  /// The commit round that output produced now could reveal, or 0 when
  /// everything written so far is durable (the output gate lets it pass).
  pub fn gate_round(&self) -> u64 {
    if !self.dirty.is_empty() {
      self.committed + 1
    } else if self.committed > self.durable {
      self.committed
    } else {
      0
    }
  }

  /// Commits every open implicit transaction (the end-of-turn group
  /// commit). Returns the handles whose commit failed, with the reason.
  pub fn commit_all(&mut self) -> Vec<(u32, String)> {
    let mut failed = Vec::new();
    // An async transaction() still open commits in a later turn: its cell
    // stays dirty (its output keeps waiting) and takes no round number.
    let dbs = &self.dbs;
    let (open, ready): (Vec<u32>, Vec<u32>) =
      (self.dirty.drain()).partition(|h| dbs.get(h).is_some_and(CellDb::in_explicit_transaction));
    self.dirty.extend(open);
    if ready.is_empty() {
      return failed;
    }
    self.committed += 1;
    let round = self.committed;
    for h in ready {
      let Some(db) = self.dbs.get_mut(&h) else {
        continue;
      };
      let committed = db.commit().and_then(|()| match self.repl.get_mut(&h) {
        None => {
          if let Some(local) = self.history.get_mut(&h)
            && let Err(e) = local.after_commit(db)
          {
            // The commit stands; its pages stay in the WAL, which is not
            // folded while the log is behind.
            tracing::error!("{}: history log: {e}", db.path().display());
          }
          Ok(())
        }
        Some(repl) => match crate::replica::capture(db, repl, Some(round)) {
          Ok(upload) => {
            queue_upload(&mut self.uploads, self.fleet.as_deref(), h, upload);
            Ok(())
          }
          Err(e) => Err(StorageError(e)),
        },
      });
      match committed {
        Ok(()) => {
          self.last_round.insert(h, self.committed);
          if let Some(key) = self.key_of.get(&h) {
            self.since_batch.insert(h, key.clone());
          }
          let first = self.dir_synced.insert(h);
          note_unsynced(&mut self.unsynced, db, first);
          if first {
            // A new database file's header (WAL mode) must be on disk too,
            // or a crash could leave a WAL that SQLite would not replay.
            (self.unsynced)
              .entry(db.path().to_path_buf())
              .or_insert(Unsynced {
                dir: true,
                file: None,
              });
          }
        }
        Err(e) => {
          self.failed_round = self.committed;
          self.failed.insert(h, e.0.clone());
          failed.push((h, e.0));
        }
      }
    }
    failed
  }

  /// What callers see when a commit failed, and whether the error carries
  /// `durableObjectReset` (workerd's wording and flags: a constraint the
  /// application left violated is its own doing, so not flagged).
  pub fn commit_failure(reason: &str) -> (String, bool) {
    if reason.contains("SQLITE_CONSTRAINT") {
      let msg = format!(
        "Durable Object was reset and rolled back to its last known good state because the application left the database in a state where constraints were violated: {reason}"
      );
      (msg, false)
    } else {
      (
        format!("Durable Object reset because its storage commit failed: {reason}"),
        true,
      )
    }
  }

  /// The end-of-turn commit: every open implicit transaction commits. A
  /// cell whose commit failed is reset at once: its database rolled back,
  /// its storage refuses further use, and the returned map (key: the
  /// error) tells the output gate which replies must fail.
  pub fn commit_turn(&mut self) -> HashMap<String, (String, bool)> {
    let mut out = HashMap::new();
    for (h, reason) in self.commit_all() {
      let (msg, reset) = Self::commit_failure(&reason);
      self.failed.insert(h, msg.clone());
      if let Some(key) = self.key_of.get(&h) {
        out.insert(key.clone(), (msg, reset));
      }
    }
    out
  }

  /// A durability round settled (in round order): the cells whose writes
  /// must not be acknowledged — those the round failed for, and, by the
  /// gap rule, those an earlier round failed for — are reset; the map
  /// (key: the error) tells the output gate which replies must fail.
  pub fn settle_round(
    &mut self,
    round: u64,
    covered: &[(u32, String)],
    result: Result<(), SyncFailure>,
  ) -> HashMap<String, (String, bool)> {
    self.rounds_out = self.rounds_out.saturating_sub(1);
    let handles: Vec<u32> = covered.iter().map(|(h, _)| *h).collect();
    let (failed, message) = match result {
      Ok(()) => (Vec::new(), None),
      // A round that failed as a whole (its task died) fails every cell.
      Err(f) if f.cells.is_empty() => (handles.clone(), Some(f.message)),
      Err(f) => (f.cells, Some(f.message)),
    };
    if message.is_some() {
      // storage.sync() calls this round covers learn that it failed.
      for (_, tx) in self.sync_waiters.extract_if(.., |(r, _)| *r <= round) {
        let _ = tx.send(false);
      }
    }
    self.mark_durable(round);
    let mut out = HashMap::new();
    let broken = self.latch.settle(&handles, &failed);
    if let Some(fleet) = &self.fleet {
      for h in &handles {
        let Some(repl) = self.repl.get_mut(h) else {
          continue;
        };
        if broken.contains(h) {
          repl.on_broken();
        } else {
          repl.on_durable(fleet, round);
        }
      }
    }
    for h in broken {
      let msg = message.clone().unwrap_or_else(|| {
        "Durable Object reset because an earlier write of it could not be made durable".into()
      });
      let msg = self.failed.get(&h).cloned().unwrap_or(msg);
      let key = (covered.iter())
        .find(|(c, _)| *c == h)
        .map(|(_, k)| k.clone())
        .or_else(|| self.key_of.get(&h).cloned());
      if self.dbs.contains_key(&h) {
        self.failed.insert(h, msg.clone());
      }
      if let Some(key) = key {
        out.insert(key, (msg, true));
      }
    }
    out
  }

  /// The WAL files the next durability round must fsync, if any.
  pub fn take_unsynced(&mut self) -> Option<SyncBatch> {
    if self.unsynced.is_empty() && self.uploads.is_empty() {
      return None;
    }
    let files = self.unsynced.drain().collect();
    self.rounds_out += 1;
    Some(SyncBatch {
      round: self.committed,
      cells: self.since_batch.drain().collect(),
      files,
      uploads: std::mem::take(&mut self.uploads),
      fleet: self.fleet.clone(),
    })
  }

  /// Whether every write made on this isolate is durable: nothing to
  /// commit, nothing waiting for a round (a closing cell's last commit
  /// included), no round on its way.
  pub fn all_durable(&self) -> bool {
    self.dirty.is_empty()
      && self.unsynced.is_empty()
      && self.uploads.is_empty()
      && self.rounds_out == 0
      && self.committed <= self.durable
  }

  /// Whether this node may acknowledge now (always, without a bucket).
  pub fn can_ack(&self) -> bool {
    self.fleet.as_ref().is_none_or(|f| f.can_ack())
  }

  pub fn committed(&self) -> u64 {
    self.committed
  }

  pub fn durable(&self) -> u64 {
    self.durable
  }

  pub fn mark_durable(&mut self, round: u64) {
    self.durable = self.durable.max(round);
    let durable = self.durable;
    let failed_round = self.failed_round;
    for (r, tx) in self.sync_waiters.extract_if(.., |(r, _)| *r <= durable) {
      let _ = tx.send(r != failed_round);
    }
  }

  pub(crate) fn db(&mut self, h: u32) -> Result<&mut CellDb, JsErrorBox> {
    // A reset object's storage answers with the reason of the reset until
    // the object is rebuilt on its next event.
    if let Some(why) = self.failed.get(&h) {
      return Err(JsErrorBox::generic(why.clone()));
    }
    self
      .dbs
      .get_mut(&h)
      .ok_or_else(|| JsErrorBox::generic("Durable Object storage is no longer accessible."))
  }

  /// After an operation that may have written: if it opened the implicit
  /// transaction, the cell joins this turn's commit.
  pub(crate) fn note_write(&mut self, h: u32) {
    if self.dbs.get(&h).is_some_and(CellDb::has_open_transaction) {
      self.dirty.insert(h);
    }
  }

  /// A write: the cell joins this turn's commit.
  pub(crate) fn db_w(&mut self, h: u32) -> Result<&mut CellDb, JsErrorBox> {
    self.dirty.insert(h);
    self.db(h)
  }
}

impl Drop for Cells {
  /// The isolate is going away: what the cells committed goes into their
  /// logs, so their next session resumes them without a new generation.
  fn drop(&mut self) {
    for (h, local) in &mut self.history {
      if let Some(db) = self.dbs.get_mut(h)
        && !db.has_open_transaction()
      {
        let _ = local.take(db);
      }
    }
  }
}

/// A captured commit of cell `h` joins the next durability round, held
/// from now on (see `cellhost_fleet::Hold`).
fn queue_upload(
  uploads: &mut Vec<crate::sync::Captured>,
  fleet: Option<&cellhost_fleet::Fleet>,
  h: u32,
  upload: Option<cellhost_fleet::Upload>,
) {
  if let (Some(fleet), Some(u)) = (fleet, upload) {
    let hold = fleet.hold(&u.scope);
    uploads.push((h, u, hold));
  }
}

pub(crate) fn err(e: StorageError) -> JsErrorBox {
  JsErrorBox::generic(e.0)
}

pub(crate) fn cells(state: &mut OpState) -> &mut Cells {
  state.borrow_mut::<Cells>()
}

/// Opens `<data>/<unique key>/<id hex>.sqlite`, as workerd lays files out.
#[op2(fast)]
#[smi]
pub fn op_cell_open(
  state: &mut OpState,
  #[string] unique_key: &str,
  #[string] id_hex: &str,
) -> Result<u32, JsErrorBox> {
  let c = cells(state);
  if c.fleet.is_some() {
    // Opening without taking the cell would bypass its ownership record.
    return Err(JsErrorBox::generic(
      "a cell on a bucket is opened with op_cell_activate",
    ));
  }
  let path = c.data_dir.join(unique_key).join(format!("{id_hex}.sqlite"));
  c.open_local(unique_key, id_hex, &path)
}

pub(crate) fn class_of(state: &OpState, unique_key: &str) -> Option<String> {
  state
    .try_borrow::<crate::actor::Router>()
    .and_then(|r| r.namespaces.iter().find(|n| n.unique_key == unique_key))
    .map(|n| n.class_name.clone())
}

/// Whether cells live on a bucket (they are then taken with
/// `op_cell_activate`, which does not block the isolate).
#[op2(fast)]
pub fn op_cell_bucket_mode(state: &mut OpState) -> bool {
  cells(state).fleet.is_some()
}

/// Takes a cell on the bucket and opens its database; resolves to its
/// handle.
#[op2]
pub async fn op_cell_activate(
  state: std::rc::Rc<std::cell::RefCell<OpState>>,
  #[string] unique_key: String,
  #[string] id_hex: String,
) -> Result<u32, JsErrorBox> {
  let (fleet, path, scope) = {
    let mut st = state.borrow_mut();
    let class = class_of(&st, &unique_key)
      .ok_or_else(|| JsErrorBox::type_error("unknown Durable Object namespace"))?;
    let c = cells(&mut st);
    let fleet = c
      .fleet
      .clone()
      .ok_or_else(|| JsErrorBox::generic("cells are not on a bucket"))?;
    let path = c
      .data_dir
      .join(&unique_key)
      .join(format!("{id_hex}.sqlite"));
    (fleet, path, cellhost_fleet::cell_scope(&class, &id_hex))
  };
  let key = format!("{unique_key}/{id_hex}");
  let (db, repl) = crate::replica::open(fleet, path, scope, key)
    .await
    .map_err(activate_error)?;
  let mut st = state.borrow_mut();
  Ok(cells(&mut st).insert(&unique_key, &id_hex, db, Some(repl)))
}

/// Why a cell could not be taken, as the glue expects it.
pub(crate) fn activate_error(e: cellhost_fleet::ActivateError) -> JsErrorBox {
  match e.owner {
    // The glue turns it into a retryable error naming the owner (a 503 at
    // the edge), see js/40_cell.js.
    Some(owner) => JsErrorBox::new(
      "CellOwnedElsewhere",
      serde_json::json!({"message": e.message, "owner": owner}).to_string(),
    ),
    None => JsErrorBox::generic(e.message),
  }
}

impl Cells {
  pub(crate) fn insert(
    &mut self,
    unique_key: &str,
    id_hex: &str,
    db: CellDb,
    repl: Option<crate::replica::Repl>,
  ) -> u32 {
    let h = self.next;
    self.next += 1;
    self.dbs.insert(h, db);
    if let Some(repl) = repl {
      self.repl.insert(h, repl);
    }
    let key = format!("{unique_key}/{id_hex}");
    self.by_key.insert(key.clone(), h);
    self.key_of.insert(h, key);
    h
  }
}

#[cfg(test)]
impl Cells {
  fn insert_for_test(&mut self, h: u32, name: &str, db: CellDb) {
    self.dbs.insert(h, db);
    self.key_of.insert(h, format!("ns/{name}"));
    self.by_key.insert(format!("ns/{name}"), h);
  }
}

impl Cells {
  fn forget(&mut self, h: u32) {
    if let Some(key) = self.key_of.remove(&h)
      && self.by_key.get(&key) == Some(&h)
    {
      self.by_key.remove(&key);
    }
    self.last_round.remove(&h);
    self.dir_synced.remove(&h);
    // The latch keeps the handle: a round still in flight may cover it.
    self.failed.remove(&h);
  }
}

/// A WAL an evicted cell keeps as it is; a larger one is folded into the
/// database first (two fsyncs), so disk use stays bounded.
const CLOSE_WAL_BYTES: u64 = 256 << 10;

/// Evicts a cell's database (after committing what it wrote). Its WAL stays
/// in place: deleting files slows creating new ones (see `CellDb::open`).
#[op2(fast)]
pub fn op_cell_close(state: &mut OpState, #[smi] h: u32) {
  let c = cells(state);
  c.forget(h);
  let repl = c.repl.remove(&h);
  let history = c.history.remove(&h);
  let Some(mut db) = c.dbs.remove(&h) else {
    return;
  };
  let mut taken = true;
  if let Some(mut local) = history {
    if c.dirty.remove(&h) && db.commit().is_ok() {
      note_unsynced(&mut c.unsynced, &mut db, true);
      local.note_commit();
    }
    // The WAL stays (closing never checkpoints with history on); a large
    // one is folded once the log holds its commits.
    let wal = std::fs::metadata(db.wal_path()).map_or(0, |m| m.len());
    let done = if wal > CLOSE_WAL_BYTES {
      local.fold(&mut db, true)
    } else {
      local.take(&mut db)
    };
    if let Err(e) = done {
      tracing::error!("{}: history log: {e}", db.path().display());
    }
    return;
  }
  if c.dirty.remove(&h) && db.commit().is_ok() {
    // The last commit joins the next durability round.
    note_unsynced(&mut c.unsynced, &mut db, true);
    if let Some(mut repl) = repl {
      match crate::replica::capture(&mut db, &mut repl, None) {
        Ok(upload) => queue_upload(&mut c.uploads, c.fleet.as_deref(), h, upload),
        Err(_) => taken = false,
      }
    }
  }
  // With a bucket, only frames already captured may be checkpointed.
  if taken {
    let _ = db.shrink_wal_if_large(CLOSE_WAL_BYTES);
  }
}

/// Whether everything the cell committed is durable (it may be handed
/// over to another isolate without a write in flight).
#[op2(fast)]
pub fn op_cell_settled(state: &mut OpState, #[smi] h: u32) -> bool {
  let c = cells(state);
  !c.dirty.contains(&h) && c.last_round.get(&h).is_none_or(|r| *r <= c.durable)
}

/// The object is reset: its uncommitted writes are dropped.
#[op2(fast)]
pub fn op_cell_abort(state: &mut OpState, #[smi] h: u32) {
  let c = cells(state);
  c.forget(h);
  c.dirty.remove(&h);
  c.repl.remove(&h);
  let history = c.history.remove(&h);
  if let Some(mut db) = c.dbs.remove(&h) {
    db.rollback();
    // What it committed before stays bookmarkable.
    if let Some(mut local) = history
      && let Err(e) = local.take(&mut db)
    {
      tracing::error!("{}: history log: {e}", db.path().display());
    }
  }
}

/// The reason this cell's last commit failed, once; the object resets.
#[op2]
#[string]
pub fn op_cell_take_failure(state: &mut OpState, #[smi] h: u32) -> Option<String> {
  cells(state).failed.remove(&h)
}

/// Whether writes on this isolate are not yet durable: outbound effects
/// (fetch, calls to other objects) then wait for them first.
#[op2(fast)]
pub fn op_cell_gate_pending(state: &mut OpState) -> bool {
  state
    .try_borrow::<Cells>()
    .is_some_and(|c| c.gate_round() > 0)
}

/// `storage.sync()`: resolves once every write made so far is durable.
#[op2]
pub async fn op_cell_sync(
  state: std::rc::Rc<std::cell::RefCell<OpState>>,
) -> Result<(), JsErrorBox> {
  let rx = {
    let mut st = state.borrow_mut();
    let c = st.borrow_mut::<Cells>();
    let round = c.gate_round();
    if round == 0 {
      return Ok(());
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    c.sync_waiters.push((round, tx));
    rx
  };
  match rx.await {
    Ok(true) => Ok(()),
    _ => Err(JsErrorBox::generic(
      "Durable Object reset because its storage commit failed; the output that depended on it was not sent",
    )),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::sync::syncfs_reports_errors;

  #[test]
  fn output_waits_until_its_commit_round_is_fsynced() {
    let dir = std::env::temp_dir().join(format!("cellhost-cells-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = Cells::new(dir.clone(), None);
    c.dbs
      .insert(1, CellDb::open(&dir.join("a.sqlite")).unwrap());
    assert_eq!(c.gate_round(), 0, "nothing written: output passes");
    c.db_w(1).unwrap().kv_put("k", b"v").unwrap();
    assert_eq!(
      c.gate_round(),
      1,
      "an uncommitted write holds output for the next round"
    );
    assert!(c.commit_all().is_empty());
    assert_eq!(
      c.gate_round(),
      1,
      "committed but not fsynced still holds output"
    );
    let batch = c.take_unsynced().unwrap();
    assert_eq!(batch.round, 1);
    let mut files = batch.files.clone();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(files.len(), 2, "the new database file and its WAL");
    assert!(files[0].0.to_string_lossy().ends_with("a.sqlite"));
    assert!(files[1].0.to_string_lossy().ends_with("a.sqlite-wal"));
    assert!(files[1].1.dir, "a new WAL's directory entry is synced too");
    assert!(c.take_unsynced().is_none());
    let round = batch.round;
    batch.run().unwrap();
    c.mark_durable(round);
    assert_eq!(c.gate_round(), 0);
    // Two turns of writes before the next fsync share one round's batch.
    c.db_w(1).unwrap().kv_put("k", b"2").unwrap();
    c.commit_all();
    c.db_w(1).unwrap().kv_put("k", b"3").unwrap();
    c.commit_all();
    let batch = c.take_unsynced().unwrap();
    assert_eq!(
      (batch.round, batch.files.len(), batch.files[0].1.dir),
      (3, 1, false)
    );
    let _ = std::fs::remove_dir_all(dir);
  }

  #[test]
  fn a_round_of_many_new_cells_syncs_the_file_system_once() {
    let dir = std::env::temp_dir().join(format!("cellhost-cells-fs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = Cells::new(dir.clone(), None);
    for h in 1..=2 {
      c.dbs
        .insert(h, CellDb::open(&dir.join(format!("{h}.sqlite"))).unwrap());
      c.db_w(h).unwrap().kv_put("k", b"v").unwrap();
    }
    assert!(c.commit_all().is_empty());
    let batch = c.take_unsynced().unwrap();
    // Two databases, two WALs and their directory: five fsyncs; two more
    // new cells make a round worth a single syncfs.
    assert!(!batch.syncs_file_system());
    batch.run().unwrap();
    for h in 1..=4 {
      if h > 2 {
        c.dbs
          .insert(h, CellDb::open(&dir.join(format!("{h}.sqlite"))).unwrap());
      }
      c.db_w(h).unwrap().kv_put("k", b"w").unwrap();
    }
    assert!(c.commit_all().is_empty());
    let batch = c.take_unsynced().unwrap();
    assert_eq!(batch.files.len(), 6, "four WALs and two new databases");
    assert_eq!(batch.syncs_file_system(), syncfs_reports_errors());
    batch.run().unwrap();
    let _ = std::fs::remove_dir_all(dir);
  }

  #[test]
  fn a_round_after_a_failed_round_acknowledges_nothing_of_that_cell() {
    let dir = std::env::temp_dir().join(format!("cellhost-cells-gap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = Cells::new(dir.clone(), None);
    for (h, name) in [(1, "a"), (2, "b")] {
      let db = CellDb::open(&dir.join(format!("{name}.sqlite"))).unwrap();
      c.insert_for_test(h, name, db);
    }
    // Two rounds in flight: the first fails for cell 1 (its upload), the
    // second succeeded on its own for both cells.
    let first = [(1, "ns/a".to_string()), (2, "ns/b".to_string())];
    let failed = c.settle_round(
      1,
      &first,
      Err(SyncFailure {
        message: "the upload of transaction 61 failed".into(),
        cells: vec![1],
      }),
    );
    assert_eq!(failed.keys().collect::<Vec<_>>(), vec!["ns/a"]);
    let second = c.settle_round(2, &first, Ok(()));
    assert_eq!(
      second.get("ns/a").map(|(m, reset)| (m.as_str(), *reset)),
      Some(("the upload of transaction 61 failed", true)),
      "above the gap: not acknowledged"
    );
    assert!(
      !second.contains_key("ns/b"),
      "its neighbour is acknowledged"
    );
    // The reset cell refuses further use until it is rebuilt.
    assert!(c.db(1).is_err() && c.db(2).is_ok());
    let _ = std::fs::remove_dir_all(dir);
  }
}

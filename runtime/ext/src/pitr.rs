//! Point-in-time recovery for the storage API: `getCurrentBookmark()`,
//! `getBookmarkForTime()` and `onNextSessionRestoreBookmark()`.
//!
//! Without a bucket, each cell keeps a local history log next to its
//! database (`cellhost_pitr::History`), fed from the WAL: commits are noted
//! as they happen and their pages taken in batches, before the WAL is ever
//! checkpointed. On a bucket, the LTX chains are the history. Either way a
//! restore is a marker in the database (`_cf_METADATA`) that the cell's next
//! session carries out when it opens: locally by rebuilding the file from
//! the log, on a bucket by opening the new epoch from the rebuilt image.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use cellhost_pitr::{Bookmark, DAY_MS, History, Resume, WalMark};
use cellhost_storage::{CellDb, WalPosition};
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;

use crate::cell::{Cells, cells};

/// Without `--pitr-days 0`: the window Cloudflare keeps.
pub const DEFAULT_RETENTION_DAYS: u64 = 30;

/// Commits noted but not yet taken into the log are taken once this many
/// have gathered (their pages are in the WAL meanwhile).
const BATCH: usize = 256;

/// The WAL is folded into the database (after the log is fsynced) past this.
const FOLD_BYTES: u64 = 4 << 20;

fn now_ms() -> u64 {
  cellhost_fleet::now_ms()
}

/// One cell's local history and the commit times not yet in it.
pub(crate) struct Local {
  log: History,
  times: VecDeque<u64>,
  retention_ms: u64,
}

fn history_dir(db: &Path) -> PathBuf {
  let mut p = db.as_os_str().to_owned();
  p.push(".history");
  PathBuf::from(p)
}

fn mark(p: WalPosition) -> WalMark {
  WalMark {
    salts: p.salts,
    offset: p.offset,
  }
}

impl Local {
  /// A commit of this cell happened now.
  pub(crate) fn note_commit(&mut self) {
    self.times.push_back(now_ms());
  }

  /// Takes the noted commits into the log (not fsynced: their frames are
  /// still in the WAL).
  pub(crate) fn take(&mut self, db: &mut CellDb) -> Result<(), String> {
    for (c, at) in db.take_commits().map_err(|e| e.0)? {
      // A commit the cell did not note (none should be) gets the time now.
      let t = self.times.pop_front().unwrap_or_else(now_ms);
      let pages = c.pages.iter().map(|(p, d)| (*p, d.as_slice()));
      self.log.append(c.page_size, c.commit, pages, t, mark(at))?;
    }
    self.times.clear();
    Ok(())
  }

  /// After a commit: takes a full batch, and folds a large WAL.
  pub(crate) fn after_commit(&mut self, db: &mut CellDb) -> Result<(), String> {
    self.note_commit();
    if self.times.len() >= BATCH {
      self.take(db)?;
    }
    if db.wal_used() > FOLD_BYTES {
      self.fold(db, false)?;
      self.roll(db)?;
    }
    Ok(())
  }

  /// Folds the WAL into the database (`shrink`: and truncates it): the log
  /// first becomes durable, since after the checkpoint it alone holds those
  /// commits' pages.
  pub(crate) fn fold(&mut self, db: &mut CellDb, shrink: bool) -> Result<(), String> {
    self.take(db)?;
    self.log.sync()?;
    if shrink {
      db.checkpoint_and_shrink().map_err(|e| e.0)?;
    } else {
      db.checkpoint().map_err(|e| e.0)?;
    }
    self.log.checkpointed(db.folded_salts())
  }

  /// Retention drops whole generations, so a generation older than an
  /// eighth of the window is closed and a new one started from a snapshot:
  /// history then holds at most the window and one eighth more.
  fn roll(&mut self, db: &mut CellDb) -> Result<(), String> {
    let now = now_ms();
    if self
      .log
      .newest_generation_start()
      .is_some_and(|t| t + self.retention_ms / 8 < now)
    {
      self.take(db)?;
      new_generation(&mut self.log, db)?;
    }
    self.log.prune(now.saturating_sub(self.retention_ms))
  }

  fn current(&mut self, db: &mut CellDb) -> Result<u64, String> {
    self.take(db)?;
    Ok(self.log.last().map_or(0, |p| p.txid))
  }
}

/// Starts a new generation from the database as it is now.
fn new_generation(log: &mut History, db: &mut CellDb) -> Result<(), String> {
  db.resume_capture(None, None).map_err(|e| e.0)?;
  let snap = db.snapshot().map_err(|e| e.0)?;
  let pages = snap.pages.iter().map(|(p, d)| (*p, d.as_slice()));
  log.begin(
    snap.page_size,
    snap.commit,
    pages,
    now_ms(),
    db.folded_salts(),
  )?;
  Ok(())
}

/// Opens the history of a cell just opened without a bucket, and carries
/// out a restore its last session scheduled. `key` names the object in its
/// bookmarks.
pub(crate) fn open_local(
  mut db: CellDb,
  key: &str,
  retention_ms: u64,
) -> Result<(CellDb, Local), String> {
  let path = db.path().to_path_buf();
  let mut log = History::open(&history_dir(&path))?;
  let wal = db.wal_state().map_err(|e| e.0)?;
  let resumed = match log.resume(wal.map(|w| (w.salts, w.offset))) {
    Resume::At(m) => Some((
      Some(WalPosition {
        salts: m.salts,
        offset: m.offset,
      }),
      None,
    )),
    Resume::Empty => Some((None, None)),
    Resume::Folded(salts) => Some((None, Some(salts))),
    Resume::NewGeneration => None,
  };
  // Frames past the log's end that hold no commit (a transaction that
  // failed) are harmless; commits it missed (a crash) are not taken from
  // a WAL that was never fsynced past them: a new generation starts from
  // what SQLite itself recovers.
  let covered = match resumed {
    Some((at, folded)) => {
      db.resume_capture(at, folded).map_err(|e| e.0)?;
      db.take_commits().map_err(|e| e.0)?.is_empty()
    }
    None => false,
  };
  if !covered {
    if log.last().is_some() {
      tracing::info!(
        "{}: the history log does not cover the WAL (a crash?); a new generation starts",
        path.display()
      );
    }
    new_generation(&mut log, &mut db)?;
  }
  let mut local = Local {
    log,
    times: VecDeque::new(),
    retention_ms,
  };
  if let Some(b) = db.pending_restore().map_err(|e| e.0)? {
    db = restore_local(db, &mut local, key, &b)?;
  }
  local.roll(&mut db)?;
  Ok((db, local))
}

/// Replaces the database with the state `bookmark` names; that state then
/// becomes the newest one, so the one before the restore stays reachable.
fn restore_local(
  mut db: CellDb,
  local: &mut Local,
  key: &str,
  bookmark: &str,
) -> Result<CellDb, String> {
  let path = db.path().to_path_buf();
  let b = Bookmark::parse(key, bookmark)?;
  // Everything so far is in the log and the database file, the WAL empty.
  local.fold(&mut db, true)?;
  let image = local.log.image(b.txid)?;
  drop(db);
  // Built aside and renamed over the file: a crash leaves either state,
  // and the restored one carries no marker of its own.
  let mut tmp = path.as_os_str().to_owned();
  tmp.push(".restore");
  let tmp = PathBuf::from(tmp);
  crate::replica::remove_files(&tmp)?;
  std::fs::write(&tmp, &image).map_err(|e| format!("{}: {e}", tmp.display()))?;
  {
    let mut t = CellDb::open(&tmp).map_err(|e| e.0)?;
    t.clear_pending_restore().map_err(|e| e.0)?;
    t.checkpoint().map_err(|e| e.0)?;
  }
  std::fs::File::open(&tmp)
    .and_then(|f| f.sync_all())
    .map_err(|e| format!("{}: {e}", tmp.display()))?;
  crate::replica::remove_files(&path)?;
  std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
  crate::replica::remove_files(&tmp)?;
  if let Some(dir) = path.parent() {
    let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
  }
  let mut db = CellDb::open(&path).map_err(|e| e.0)?;
  new_generation(&mut local.log, &mut db)?;
  tracing::info!(
    "{}: restored to bookmark {bookmark} (TXID {})",
    path.display(),
    b.txid
  );
  Ok(db)
}

fn too_old(retention_ms: u64) -> JsErrorBox {
  let days = retention_ms as f64 / DAY_MS as f64;
  JsErrorBox::range_error(format!(
    "The requested point in time is older than the point-in-time recovery window ({days} days)."
  ))
}

fn no_history() -> JsErrorBox {
  JsErrorBox::generic(
    "point-in-time recovery is off for this node (--pitr-days 0): no history is kept",
  )
}

/// What a bookmark op needs of a cell.
enum Where {
  Local,
  Bucket(std::sync::Arc<cellhost_fleet::Fleet>, String, u64, u64),
}

fn locate(c: &mut Cells, h: u32) -> Result<(Where, String), JsErrorBox> {
  c.db(h)?;
  if c.pitr_retention_ms == 0 {
    return Err(no_history());
  }
  let key = c.key_of_handle(h);
  if let Some(repl) = c.repl_of(h) {
    let fleet = c.fleet.clone().expect("a replicated cell has a fleet");
    return Ok((
      Where::Bucket(fleet, repl.scope.clone(), repl.epoch, repl.txid),
      key,
    ));
  }
  Ok((Where::Local, key))
}

/// The bookmark of the cell's newest committed state (the glue awaits the
/// commit of earlier writes first).
#[op2]
#[string]
pub fn op_pitr_current(state: &mut OpState, #[smi] h: u32) -> Result<String, JsErrorBox> {
  let c = cells(state);
  let (at, key) = locate(c, h)?;
  let b = match at {
    Where::Bucket(_, _, epoch, txid) => Bookmark { epoch, txid },
    Where::Local => {
      let (db, local) = c.local_history(h)?;
      Bookmark {
        epoch: 0,
        txid: local.current(db).map_err(JsErrorBox::generic)?,
      }
    }
  };
  Ok(b.encode(&key))
}

/// `getBookmarkForTime()`: the newest state committed at or before `ms`.
#[op2]
#[string]
pub async fn op_pitr_for_time(
  state: std::rc::Rc<std::cell::RefCell<OpState>>,
  #[smi] h: u32,
  ms: f64,
) -> Result<String, JsErrorBox> {
  let (at, key, retention) = {
    let mut st = state.borrow_mut();
    let c = cells(&mut st);
    let (at, key) = locate(c, h)?;
    (at, key, c.pitr_retention_ms)
  };
  let t = if ms.is_finite() {
    ms.max(0.0) as u64
  } else {
    0
  };
  if t < now_ms().saturating_sub(retention) {
    return Err(too_old(retention));
  }
  let found = match at {
    Where::Bucket(fleet, scope, _, _) => fleet
      .point_at_time(&scope, t)
      .await
      .map_err(JsErrorBox::generic)?
      .map(|p| Bookmark {
        epoch: p.epoch,
        txid: p.txid,
      }),
    Where::Local => {
      let mut st = state.borrow_mut();
      let (db, local) = cells(&mut st).local_history(h)?;
      local.take(db).map_err(JsErrorBox::generic)?;
      (local.log.point_at_time(t).map_err(JsErrorBox::generic)?).map(|p| Bookmark {
        epoch: 0,
        txid: p.txid,
      })
    }
  };
  found.map(|b| b.encode(&key)).ok_or_else(|| {
    JsErrorBox::range_error(
      "The requested point in time is before this Durable Object's recorded history.",
    )
  })
}

/// Checks that `bookmark` names a state the cell can go back to, then
/// records it as the restore its next session carries out.
#[op2]
pub async fn op_pitr_schedule(
  state: std::rc::Rc<std::cell::RefCell<OpState>>,
  #[smi] h: u32,
  #[string] bookmark: String,
) -> Result<(), JsErrorBox> {
  let (at, key, retention) = {
    let mut st = state.borrow_mut();
    let c = cells(&mut st);
    let (at, key) = locate(c, h)?;
    (at, key, c.pitr_retention_ms)
  };
  let b = Bookmark::parse(&key, &bookmark).map_err(JsErrorBox::type_error)?;
  let point = match at {
    Where::Bucket(fleet, scope, _, _) => fleet
      .point(&scope, b.epoch, b.txid)
      .await
      .map_err(JsErrorBox::generic)?
      .map(|p| p.time_ms),
    Where::Local => {
      let mut st = state.borrow_mut();
      let (db, local) = cells(&mut st).local_history(h)?;
      local.take(db).map_err(JsErrorBox::generic)?;
      if b.epoch != 0 {
        None
      } else {
        (local.log.point(b.txid).map_err(JsErrorBox::generic)?).map(|p| p.time_ms)
      }
    }
  };
  let Some(time_ms) = point else {
    return Err(JsErrorBox::range_error(format!(
      "The bookmark {bookmark} names a state this Durable Object's history no longer holds."
    )));
  };
  if time_ms < now_ms().saturating_sub(retention) {
    return Err(too_old(retention));
  }
  let mut st = state.borrow_mut();
  let c = cells(&mut st);
  c.db_w(h)?
    .set_pending_restore(&bookmark)
    .map_err(crate::cell::err)?;
  c.note_write(h);
  Ok(())
}

//! A cell's database: one SQLite file per Durable Object (rusqlite, bundled
//! SQLite). The KV API lives in the `_cf_KV` table as workerd keeps it; user
//! SQL runs on the same connection. Writes join an implicit transaction that
//! the isolate commits at the end of its turn, for all its cells together.

mod alarm;
mod auth;
mod capture;
mod cursor;
mod file;
mod kv;
mod metadata;
pub mod paged;
mod sql;
mod wake;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;

pub use capture::{Captured, WalPosition};
pub use cellhost_logic::alarm::{AlarmOutcome, AlarmRow, set_alarm};
pub use cursor::{Batch, Counts};
pub use file::lock_data_dir;
pub use kv::ListOptions;
pub use sql::{CURSOR_BATCH, SqlResult, SqlValue};
pub use wake::{WakeDb, WakeEntry};

/// A failed storage operation; the message is what JavaScript sees.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageError(pub String);

impl std::fmt::Display for StorageError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

impl std::error::Error for StorageError {}

/// SQLite's message in workerd's shape: `<msg>: SQLITE_<CODE>`.
pub(crate) fn sqlite_error(e: rusqlite::Error) -> StorageError {
  match &e {
    rusqlite::Error::SqliteFailure(err, msg) => {
      let msg = msg.clone().unwrap_or_else(|| err.to_string());
      StorageError(format!("{msg}: {}", codes(err.extended_code)))
    }
    rusqlite::Error::SqlInputError {
      error, msg, offset, ..
    } => StorageError(format!(
      "{msg} at offset {offset}: {}",
      codes(error.extended_code)
    )),
    other => StorageError(other.to_string()),
  }
}

/// `SQLITE_<CODE>`, plus ` (extended: SQLITE_<EXT>)` when the extended code
/// says more, as workerd prints them.
fn codes(extended: i32) -> String {
  let primary = code_name(extended & 0xff);
  match extended_name(extended) {
    Some(ext) => format!("{primary} (extended: {ext})"),
    None => primary.to_string(),
  }
}

fn extended_name(code: i32) -> Option<&'static str> {
  use rusqlite::ffi;
  Some(match code {
    ffi::SQLITE_CONSTRAINT_CHECK => "SQLITE_CONSTRAINT_CHECK",
    ffi::SQLITE_CONSTRAINT_FOREIGNKEY => "SQLITE_CONSTRAINT_FOREIGNKEY",
    ffi::SQLITE_CONSTRAINT_NOTNULL => "SQLITE_CONSTRAINT_NOTNULL",
    ffi::SQLITE_CONSTRAINT_PRIMARYKEY => "SQLITE_CONSTRAINT_PRIMARYKEY",
    ffi::SQLITE_CONSTRAINT_TRIGGER => "SQLITE_CONSTRAINT_TRIGGER",
    ffi::SQLITE_CONSTRAINT_UNIQUE => "SQLITE_CONSTRAINT_UNIQUE",
    ffi::SQLITE_CONSTRAINT_DATATYPE => "SQLITE_CONSTRAINT_DATATYPE",
    ffi::SQLITE_IOERR_WRITE => "SQLITE_IOERR_WRITE",
    ffi::SQLITE_IOERR_FSYNC => "SQLITE_IOERR_FSYNC",
    ffi::SQLITE_IOERR_READ => "SQLITE_IOERR_READ",
    _ => return None,
  })
}

fn code_name(primary: i32) -> &'static str {
  use rusqlite::ffi;
  match primary {
    ffi::SQLITE_ERROR => "SQLITE_ERROR",
    ffi::SQLITE_INTERNAL => "SQLITE_INTERNAL",
    ffi::SQLITE_PERM => "SQLITE_PERM",
    ffi::SQLITE_ABORT => "SQLITE_ABORT",
    ffi::SQLITE_BUSY => "SQLITE_BUSY",
    ffi::SQLITE_LOCKED => "SQLITE_LOCKED",
    ffi::SQLITE_NOMEM => "SQLITE_NOMEM",
    ffi::SQLITE_READONLY => "SQLITE_READONLY",
    ffi::SQLITE_INTERRUPT => "SQLITE_INTERRUPT",
    ffi::SQLITE_IOERR => "SQLITE_IOERR",
    ffi::SQLITE_CORRUPT => "SQLITE_CORRUPT",
    ffi::SQLITE_FULL => "SQLITE_FULL",
    ffi::SQLITE_CANTOPEN => "SQLITE_CANTOPEN",
    ffi::SQLITE_CONSTRAINT => "SQLITE_CONSTRAINT",
    ffi::SQLITE_MISMATCH => "SQLITE_MISMATCH",
    ffi::SQLITE_MISUSE => "SQLITE_MISUSE",
    ffi::SQLITE_AUTH => "SQLITE_AUTH",
    ffi::SQLITE_RANGE => "SQLITE_RANGE",
    ffi::SQLITE_TOOBIG => "SQLITE_TOOBIG",
    _ => "SQLITE_ERROR",
  }
}

/// One cell's database.
pub struct CellDb {
  /// Lazy `sql.exec()` cursors by id. Declared before `conn`: their
  /// statements are finalized before the connection closes.
  cursors: std::collections::BTreeMap<u32, cursor::Cursor>,
  /// Reset user statements kept to run again (`cursor::StmtCache`); also
  /// before `conn`.
  stmt_cache: cursor::StmtCache,
  conn: Connection,
  path: PathBuf,
  /// An implicit transaction is open (a write happened this turn).
  in_txn: bool,
  /// Depth of transactionSync()/transaction() savepoints.
  savepoints: u32,
  /// Set while the storage runs its own statements (see `auth`).
  internal: Arc<AtomicBool>,
  /// Where page capture (replication) has read the WAL up to.
  capture: Option<capture::WalCursor>,
  /// The WAL, held open once it exists, for the durability rounds.
  wal: Option<Arc<std::fs::File>>,
  /// The WAL has no header yet: the next commit writes one, and SQLite
  /// would fsync it (and, on a new file, its directory) on the isolate
  /// thread. That commit's durability round fsyncs the WAL, the database
  /// and the directory of a new cell anyway, so it runs unsynced.
  fresh_wal: bool,
  /// Where pages not yet in the local file come from (a paged restore).
  paged: Option<Arc<paged::Paged>>,
}

/// BEGIN of the implicit transaction, on the connection alone so that a
/// statement prepared from it may stay alive meanwhile (`sql_exec`).
pub(crate) fn begin_implicit(
  conn: &Connection,
  internal: &AtomicBool,
  fresh_wal: bool,
) -> Result<(), StorageError> {
  if fresh_wal {
    // The first transaction writes the WAL header: no SQLite syncs
    // (`fresh_wal`), and no checkpoint inside it without them.
    let outer = internal.swap(true, Ordering::Relaxed);
    let r = conn.execute_batch("PRAGMA synchronous=OFF; PRAGMA wal_autocheckpoint=0");
    internal.store(outer, Ordering::Relaxed);
    r.map_err(sqlite_error)?;
  }
  run_cached(conn, "BEGIN").map_err(sqlite_error)
}

/// Runs `sql` kept prepared (rusqlite's per-connection cache): BEGIN and
/// COMMIT run once per write turn, and parsing them anew costs more than
/// running them. The authorizer allows transaction statements, so keeping
/// them skips no check.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
  conn.prepare_cached(sql)?.execute([]).map(drop)
}

impl CellDb {
  pub fn open(path: &Path) -> Result<CellDb, StorageError> {
    Self::open_with(path, None)
  }

  /// Opens the paged database [`paged::prepare`] made at `path`: pages
  /// not yet local are fetched on first use.
  pub fn open_paged(path: &Path, paged: Arc<paged::Paged>) -> Result<CellDb, StorageError> {
    Self::open_with(path, Some(paged))
  }

  /// Whether the database is wholly in its local file (always, unless it
  /// was opened paged and the fill is still going).
  pub fn local_complete(&self) -> bool {
    self.paged.as_ref().is_none_or(|p| p.complete())
  }

  fn open_with(path: &Path, paged: Option<Arc<paged::Paged>>) -> Result<CellDb, StorageError> {
    if let Some(dir) = path.parent() {
      std::fs::create_dir_all(dir).map_err(|e| StorageError(format!("{}: {e}", dir.display())))?;
    }
    if let Some(p) = &paged {
      let uri = paged::uri(path, p)?;
      let conn = file::connect_uri(&uri, paged::VFS);
      if conn.is_err() {
        paged::forget(&uri);
      }
      return Self::with_conn(path, conn.map_err(sqlite_error)?, paged);
    }
    let conn = match file::connect(path) {
      Err(_) if file::never_written(path) => {
        // A crash before the first durability round can leave a new file
        // without its header; it never held an acknowledged write.
        for suffix in ["", "-wal"] {
          let mut p = path.as_os_str().to_owned();
          p.push(suffix);
          let _ = std::fs::remove_file(p);
        }
        file::connect(path)
      }
      r => r,
    };
    Self::with_conn(path, conn.map_err(sqlite_error)?, None)
  }

  fn with_conn(
    path: &Path,
    mut conn: Connection,
    paged: Option<Arc<paged::Paged>>,
  ) -> Result<CellDb, StorageError> {
    let internal = auth::install(&mut conn).map_err(sqlite_error)?;
    // workerd's limit on a compound SELECT's terms.
    conn
      .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_COMPOUND_SELECT, 5)
      .map_err(sqlite_error)?;
    let mut db = CellDb {
      cursors: Default::default(),
      stmt_cache: Default::default(),
      conn,
      path: path.to_path_buf(),
      in_txn: false,
      savepoints: 0,
      internal,
      capture: None,
      wal: None,
      fresh_wal: true,
      paged,
    };
    db.fresh_wal = std::fs::metadata(db.wal_path()).map_or(true, |m| m.len() < 32);
    Ok(db)
  }

  /// Runs the storage's own statements past the user-SQL authorizer.
  pub(crate) fn internal<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
    // Nested calls keep the outer call's state.
    let outer = self.internal.swap(true, Ordering::Relaxed);
    let r = f(self);
    self.internal.store(outer, Ordering::Relaxed);
    r
  }

  pub fn path(&self) -> &Path {
    &self.path
  }

  /// The write-ahead log, whose fsync makes this cell's commits durable.
  pub fn wal_path(&self) -> PathBuf {
    let mut p = self.path.clone().into_os_string();
    p.push("-wal");
    PathBuf::from(p)
  }

  /// The WAL file, held open so each durability round need not open it
  /// again (SQLite truncates it in place, never replaces it, while open).
  pub fn wal_file(&mut self) -> Option<Arc<std::fs::File>> {
    if self.wal.is_none() {
      self.wal = std::fs::File::open(self.wal_path()).ok().map(Arc::new);
    }
    self.wal.clone()
  }

  /// Opens the implicit transaction if none is open; every write calls it.
  pub(crate) fn begin_write(&mut self) -> Result<(), StorageError> {
    if !self.in_txn {
      begin_implicit(&self.conn, &self.internal, self.fresh_wal)?;
      self.in_txn = true;
    }
    Ok(())
  }

  pub fn has_open_transaction(&self) -> bool {
    self.in_txn
  }

  /// Commits the implicit transaction; durable (fsynced) when it returns.
  pub fn commit(&mut self) -> Result<(), StorageError> {
    if !self.in_txn {
      return Ok(());
    }
    self.in_txn = false;
    self.savepoints = 0;
    let committed = match run_cached(&self.conn, "COMMIT") {
      Ok(()) => Ok(()),
      Err(e) => {
        let _ = self.conn.execute_batch("ROLLBACK");
        Err(sqlite_error(e))
      }
    };
    if self.fresh_wal {
      self.fresh_wal = false;
      self.synced_again()?;
    }
    committed
  }

  /// Back to SQLite's own syncs after a first transaction that ran without.
  fn synced_again(&mut self) -> Result<(), StorageError> {
    // Capture (replication) checkpoints by itself only.
    let ckpt = if self.capture.is_some() { 0 } else { 1000 };
    self
      .pragmas(&format!(
        "PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint={ckpt}"
      ))
      .map_err(sqlite_error)
  }

  /// The storage's own pragmas, past the user-SQL authorizer.
  fn pragmas(&mut self, sql: &str) -> rusqlite::Result<()> {
    self.internal(|db| db.conn.execute_batch(sql))
  }

  /// Drops the uncommitted writes (the object is being reset).
  pub fn rollback(&mut self) {
    if self.in_txn {
      // What open cursors read so far stays theirs, as it was when every
      // cursor was read whole at once.
      self.drain_cursors();
      let _ = self.conn.execute_batch("ROLLBACK");
      self.in_txn = false;
      self.savepoints = 0;
      if self.fresh_wal {
        let _ = self.synced_again();
      }
    }
  }

  /// Whether a transaction()/transactionSync() is open: an async
  /// transaction() that awaits spans turns, and the end-of-turn commit
  /// waits for it (committing would release its savepoints).
  pub fn in_explicit_transaction(&self) -> bool {
    self.savepoints > 0
  }

  /// transactionSync()/transaction(): a savepoint inside the implicit one.
  pub fn savepoint(&mut self) -> Result<u32, StorageError> {
    self.begin_write()?;
    let depth = self.savepoints;
    self
      .conn
      .execute_batch(&format!("SAVEPOINT _cf_savepoint_{depth}"))
      .map_err(sqlite_error)?;
    self.savepoints += 1;
    Ok(depth)
  }

  pub fn release(&mut self, depth: u32) -> Result<(), StorageError> {
    self
      .conn
      .execute_batch(&format!("RELEASE _cf_savepoint_{depth}"))
      .map_err(sqlite_error)?;
    self.savepoints = depth;
    Ok(())
  }

  pub fn rollback_to(&mut self, depth: u32) -> Result<(), StorageError> {
    // Open cursors keep the rows of the state they were opened on.
    self.drain_cursors();
    self
      .conn
      .execute_batch(&format!(
        "ROLLBACK TO _cf_savepoint_{depth}; RELEASE _cf_savepoint_{depth}"
      ))
      .map_err(sqlite_error)?;
    self.savepoints = depth;
    Ok(())
  }

  /// deleteAll(): drops every table, index, view and trigger, as workerd
  /// recreates the database file.
  pub fn delete_all(&mut self) -> Result<(), StorageError> {
    self.internal(Self::delete_all_inner)
  }

  fn delete_all_inner(&mut self) -> Result<(), StorageError> {
    self.drain_cursors();
    self.rollback();
    self.begin_write()?;
    let objects: Vec<(String, String)> = {
      let mut st = self
        .conn
        .prepare("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND type IN ('table','view','trigger')")
        .map_err(sqlite_error)?;
      st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sqlite_error)?
        .collect::<Result<_, _>>()
        .map_err(sqlite_error)?
    };
    self
      .conn
      .execute_batch("PRAGMA defer_foreign_keys=ON")
      .map_err(sqlite_error)?;
    for (ty, name) in objects {
      let sql = format!(
        "DROP {} IF EXISTS \"{}\"",
        ty.to_uppercase(),
        name.replace('"', "\"\"")
      );
      self.conn.execute_batch(&sql).map_err(sqlite_error)?;
    }
    Ok(())
  }

  /// (total_changes(), last_insert_rowid()) of the connection: D1's
  /// `changes` and `last_row_id` are their moves across a query.
  pub fn change_counts(&self) -> (u64, i64) {
    (self.conn.total_changes(), self.conn.last_insert_rowid())
  }

  /// `databaseSize`: (page_count - freelist_count) * page_size.
  pub fn database_size(&mut self) -> Result<f64, StorageError> {
    self.internal(|db| {
      let q = |p: &str| -> Result<i64, StorageError> {
        db.conn
          .query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
          .map_err(sqlite_error)
      };
      Ok(((q("page_count")? - q("freelist_count")?) * q("page_size")?) as f64)
    })
  }
}

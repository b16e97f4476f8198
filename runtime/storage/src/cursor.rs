//! A user statement on the cell's connection, stepped through SQLite's C API
//! so that a read-only one can stay open between calls: `sql.exec()` returns
//! a cursor whose rows come out as JavaScript asks for them, and a scan of a
//! large table is never held in memory whole.
//!
//! An open statement keeps a read transaction, and SQLite refuses a
//! checkpoint or a `DROP` on that connection meanwhile ("database table is
//! locked"). Before those, the open cursors are drained: their remaining
//! rows are read into memory and the statements finalized, which is what
//! every cursor was before cursors were lazy.

use std::collections::VecDeque;
use std::ffi::CStr;
use std::ptr::NonNull;

use rusqlite::ffi;

use crate::StorageError;
use crate::sql::SqlValue;

/// A prepared user statement, finalized when dropped.
pub(crate) struct Stmt {
  raw: NonNull<ffi::sqlite3_stmt>,
  db: *mut ffi::sqlite3,
}

// SAFETY: a Stmt lives in its CellDb beside the connection and is used only
// through `&mut CellDb`, so it moves between threads with the connection
// (itself Send) and is never used from two threads at once, which SQLite's
// multi-thread mode allows.
unsafe impl Send for Stmt {}

impl Drop for Stmt {
  fn drop(&mut self) {
    // SAFETY: `raw` came from sqlite3_prepare_v2 and is finalized once.
    unsafe { ffi::sqlite3_finalize(self.raw.as_ptr()) };
  }
}

/// What one step gave.
pub(crate) enum Step {
  Row(Vec<SqlValue>),
  Done,
}

/// A statement's rows read and written so far, as workerd's SQLite counts
/// them (see vendor/README.md): `[read, written]`.
pub type Counts = [u64; 2];

// The counters our SQLite keeps beside its own (vendor/libsqlite3-sys).
const ROWS_READ: i32 = 1025;
const ROWS_WRITTEN: i32 = 1026;

impl Stmt {
  /// Prepares the first statement of `sql`; `None` for SQL with no
  /// statement in it (empty, or comments only). An error is SQLite's code,
  /// for the caller to describe.
  ///
  /// SAFETY (for callers): `db` is an open connection that outlives the
  /// statement.
  pub(crate) unsafe fn prepare(db: *mut ffi::sqlite3, sql: &str) -> Result<Option<Stmt>, i32> {
    let mut raw = std::ptr::null_mut();
    let len = i32::try_from(sql.len()).map_err(|_| ffi::SQLITE_TOOBIG)?;
    // SAFETY: `sql` is valid for `len` bytes; SQLite copies what it keeps.
    let rc = unsafe {
      ffi::sqlite3_prepare_v2(db, sql.as_ptr().cast(), len, &mut raw, std::ptr::null_mut())
    };
    if rc != ffi::SQLITE_OK {
      return Err(rc);
    }
    Ok(NonNull::new(raw).map(|raw| Stmt { raw, db }))
  }

  /// Back to its start with no bindings and no rows counted, to run again.
  pub(crate) fn reset(&mut self) {
    // SAFETY: a live statement. reset's code repeats the last step's
    // error, already reported.
    unsafe {
      ffi::sqlite3_reset(self.raw());
      ffi::sqlite3_clear_bindings(self.raw());
      ffi::sqlite3_stmt_status(self.raw(), ROWS_READ, 1);
      ffi::sqlite3_stmt_status(self.raw(), ROWS_WRITTEN, 1);
    }
  }

  /// Rows read and written since it was prepared or reset.
  pub(crate) fn counts(&self) -> Counts {
    // SAFETY: a live statement; reading a counter changes nothing.
    unsafe {
      [
        ffi::sqlite3_stmt_status(self.raw(), ROWS_READ, 0) as u32 as u64,
        ffi::sqlite3_stmt_status(self.raw(), ROWS_WRITTEN, 0) as u32 as u64,
      ]
    }
  }

  fn raw(&self) -> *mut ffi::sqlite3_stmt {
    self.raw.as_ptr()
  }

  pub(crate) fn parameter_count(&self) -> usize {
    // SAFETY: a live statement.
    unsafe { ffi::sqlite3_bind_parameter_count(self.raw()) as usize }
  }

  pub(crate) fn readonly(&self) -> bool {
    // SAFETY: a live statement.
    unsafe { ffi::sqlite3_stmt_readonly(self.raw()) != 0 }
  }

  pub(crate) fn columns(&self) -> Vec<String> {
    // SAFETY: a live statement; names are valid until it is finalized, and
    // copied here.
    unsafe {
      (0..ffi::sqlite3_column_count(self.raw()))
        .map(|i| {
          let p = ffi::sqlite3_column_name(self.raw(), i);
          if p.is_null() {
            String::new()
          } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
          }
        })
        .collect()
    }
  }

  pub(crate) fn bind(&mut self, bindings: &[SqlValue]) -> Result<(), StorageError> {
    for (i, b) in bindings.iter().enumerate() {
      let at = i as i32 + 1;
      // SAFETY: a live statement; SQLITE_TRANSIENT makes SQLite copy.
      let rc = unsafe {
        match b {
          SqlValue::Null => ffi::sqlite3_bind_null(self.raw(), at),
          SqlValue::Number(n) => ffi::sqlite3_bind_double(self.raw(), at, *n),
          SqlValue::Text(s) => ffi::sqlite3_bind_text64(
            self.raw(),
            at,
            s.as_ptr().cast(),
            s.len() as u64,
            ffi::SQLITE_TRANSIENT(),
            ffi::SQLITE_UTF8 as u8,
          ),
          SqlValue::Blob(v) => ffi::sqlite3_bind_blob64(
            self.raw(),
            at,
            v.as_ptr().cast(),
            v.len() as u64,
            ffi::SQLITE_TRANSIENT(),
          ),
        }
      };
      if rc != ffi::SQLITE_OK {
        return Err(self.error(rc));
      }
    }
    Ok(())
  }

  /// One step: a row (integers as doubles, as workerd gives them), or done.
  pub(crate) fn step(&mut self) -> Result<Step, StorageError> {
    // SAFETY: a live statement.
    let rc = unsafe { ffi::sqlite3_step(self.raw()) };
    match rc {
      ffi::SQLITE_ROW => Ok(Step::Row(self.row())),
      ffi::SQLITE_DONE => Ok(Step::Done),
      rc => Err(self.error(rc)),
    }
  }

  fn row(&self) -> Vec<SqlValue> {
    let s = self.raw();
    // SAFETY: the statement is on a row; each pointer is read before the
    // next column call and copied.
    unsafe {
      (0..ffi::sqlite3_column_count(s))
        .map(|i| match ffi::sqlite3_column_type(s, i) {
          ffi::SQLITE_INTEGER => SqlValue::Number(ffi::sqlite3_column_int64(s, i) as f64),
          ffi::SQLITE_FLOAT => SqlValue::Number(ffi::sqlite3_column_double(s, i)),
          ffi::SQLITE_TEXT => {
            let p = ffi::sqlite3_column_text(s, i);
            let n = ffi::sqlite3_column_bytes(s, i) as usize;
            let bytes = if p.is_null() {
              &[][..]
            } else {
              std::slice::from_raw_parts(p, n)
            };
            SqlValue::Text(String::from_utf8_lossy(bytes).into_owned())
          }
          ffi::SQLITE_BLOB => {
            let p = ffi::sqlite3_column_blob(s, i) as *const u8;
            let n = ffi::sqlite3_column_bytes(s, i) as usize;
            SqlValue::Blob(if p.is_null() {
              Vec::new()
            } else {
              std::slice::from_raw_parts(p, n).to_vec()
            })
          }
          _ => SqlValue::Null,
        })
        .collect()
    }
  }

  /// SQLite's message for `rc`, in workerd's shape (`crate::sqlite_error`).
  fn error(&self, rc: i32) -> StorageError {
    // SAFETY: the connection is open; the message is copied at once.
    let (msg, extended) = unsafe {
      let p = ffi::sqlite3_errmsg(self.db);
      let msg = if p.is_null() {
        None
      } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
      };
      (msg, ffi::sqlite3_extended_errcode(self.db))
    };
    let code = if extended & 0xff == rc & 0xff {
      extended
    } else {
      rc
    };
    crate::sqlite_error(rusqlite::Error::SqliteFailure(ffi::Error::new(code), msg))
  }
}

/// The last few user statements that ran to their end, reset, by their SQL
/// text: a Durable Object runs the same few statements over and over, and
/// parsing, authorizing and planning one costs more than running it.
/// Statements that change the schema are not kept (they rarely repeat).
#[derive(Default)]
pub(crate) struct StmtCache(Vec<(String, Stmt)>);

/// Statements kept per object: enough for a hot path's handful, small next
/// to a page cache when thousands of objects are open.
const CACHED: usize = 4;

impl StmtCache {
  pub(crate) fn take(&mut self, sql: &str) -> Option<Stmt> {
    let i = self.0.iter().position(|(k, _)| k == sql)?;
    Some(self.0.remove(i).1)
  }

  pub(crate) fn put(&mut self, sql: &str, mut st: Stmt) {
    let head = sql.get(..8).unwrap_or(sql).to_ascii_uppercase();
    if ["CREATE", "DROP", "ALTER"]
      .iter()
      .any(|k| head.starts_with(k))
    {
      return;
    }
    st.reset();
    if self.0.len() >= CACHED {
      self.0.remove(0);
    }
    self.0.push((sql.to_owned(), st));
  }
}

/// An open cursor: its statement while it has rows left in SQLite, or the
/// rows a drain read out of it; each row with the statement's counts just
/// after the step that gave it.
pub(crate) struct Cursor {
  stmt: Option<Stmt>,
  drained: VecDeque<(Vec<SqlValue>, Counts)>,
  /// The counts once the statement was done.
  end: Option<Counts>,
  /// The error a drain met, given after the rows read before it.
  failed: Option<StorageError>,
}

/// Rows taken from a cursor: each with its counts, and the final counts
/// once there are no more.
pub struct Batch {
  pub rows: Vec<Vec<SqlValue>>,
  pub counts: Vec<Counts>,
  pub end: Option<Counts>,
}

impl Cursor {
  pub(crate) fn new(stmt: Stmt) -> Cursor {
    Cursor {
      stmt: Some(stmt),
      drained: VecDeque::new(),
      end: None,
      failed: None,
    }
  }

  /// One step of the open statement into `drained`/`end`; `false` when
  /// there is nothing left to step.
  fn step(&mut self) -> bool {
    let Some(st) = self.stmt.as_mut() else {
      return false;
    };
    match st.step() {
      Ok(Step::Row(r)) => self.drained.push_back((r, st.counts())),
      Ok(Step::Done) => {
        self.end = Some(st.counts());
        self.stmt = None;
      }
      Err(e) => {
        self.stmt = None;
        self.failed = Some(e);
      }
    }
    true
  }

  /// Up to `max` rows.
  pub(crate) fn take(&mut self, max: usize) -> Result<Batch, StorageError> {
    let mut b = Batch {
      rows: Vec::new(),
      counts: Vec::new(),
      end: None,
    };
    while b.rows.len() < max {
      if let Some((r, c)) = self.drained.pop_front() {
        b.rows.push(r);
        b.counts.push(c);
      } else if !self.step() {
        break;
      }
    }
    if self.drained.is_empty() && self.stmt.is_none() {
      if let Some(e) = self.failed.take() {
        if b.rows.is_empty() {
          return Err(e);
        }
        self.failed = Some(e);
      } else {
        b.end = self.end;
      }
    }
    Ok(b)
  }

  /// Reads every remaining row out of SQLite and finalizes the statement;
  /// an error is kept for the reader to meet after those rows.
  pub(crate) fn drain(&mut self) {
    while self.step() {}
  }
}

#[cfg(test)]
mod tests {
  use crate::sql::{CURSOR_BATCH, SqlValue};
  use crate::{CellDb, StorageError};

  fn db(name: &str) -> CellDb {
    let dir = std::env::temp_dir().join(format!("cellhost-cursor-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut db = CellDb::open(&dir.join("c.sqlite")).unwrap();
    db.sql_exec("CREATE TABLE t (id INTEGER PRIMARY KEY)", &[])
      .unwrap();
    db.sql_exec(
      "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000) INSERT INTO t SELECT n FROM s",
      &[],
    )
    .unwrap();
    db.commit().unwrap();
    db
  }

  fn ids(rows: &[Vec<SqlValue>]) -> Vec<f64> {
    rows
      .iter()
      .map(|r| match r[0] {
        SqlValue::Number(n) => n,
        ref v => panic!("{v:?}"),
      })
      .collect()
  }

  /// Every row, in order: the first batch from exec, the rest by cursor.
  fn read_all(
    db: &mut CellDb,
    first: Vec<Vec<SqlValue>>,
    id: u32,
  ) -> Result<Vec<f64>, StorageError> {
    let mut out = ids(&first);
    loop {
      let b = db.cursor_next(id, CURSOR_BATCH)?;
      out.extend(ids(&b.rows));
      if b.end.is_some() {
        return Ok(out);
      }
    }
  }

  #[test]
  fn a_read_gives_one_batch_and_the_rest_on_demand() {
    let mut db = db("batches");
    let r = db
      .sql_exec_lazy("SELECT id FROM t ORDER BY id", &[])
      .unwrap();
    assert_eq!(r.rows.len(), CURSOR_BATCH);
    let id = r.cursor.expect("rows left");
    let all = read_all(&mut db, r.rows, id).unwrap();
    assert_eq!(all, (1..=1000).map(f64::from).collect::<Vec<_>>());
    // Closed at its end.
    assert!(db.cursors.is_empty());
    // Eager for D1, and for writes.
    assert_eq!(
      db.sql_exec("SELECT id FROM t", &[]).unwrap().rows.len(),
      1000
    );
    let w = db
      .sql_exec_lazy("UPDATE t SET id = id + 0 RETURNING id", &[])
      .unwrap();
    assert_eq!((w.rows.len(), w.cursor), (1000, None));
  }

  #[test]
  fn rows_are_counted_per_step_across_batches_drains_and_cached_runs() {
    let mut db = db("counts");
    // 1,000 rows: a rewind and a move per row after the first.
    let r = db.sql_exec_lazy("SELECT id FROM t", &[]).unwrap();
    assert_eq!(r.counts[0], [1, 0]);
    assert_eq!(r.counts[CURSOR_BATCH - 1], [CURSOR_BATCH as u64, 0]);
    assert_eq!(r.end, None);
    let id = r.cursor.unwrap();
    let b = db.cursor_next(id, 10).unwrap();
    assert_eq!(b.counts[0], [CURSOR_BATCH as u64 + 1, 0]);
    // A drain keeps each row's counts, and the end's.
    db.drain_cursors();
    let b = db.cursor_next(id, 10_000).unwrap();
    assert_eq!(b.counts.last(), Some(&[1000, 0]));
    assert_eq!(b.end, Some([1000, 0]));
    // A cached statement counts from zero each run; writes count rows
    // written, count(*) its entries.
    for _ in 0..2 {
      let r = db.sql_exec("SELECT * FROM t WHERE id = 7", &[]).unwrap();
      assert_eq!(r.totals(), [1, 0]);
    }
    let r = db
      .sql_exec("UPDATE t SET id = id + 1000 WHERE id <= 3", &[])
      .unwrap();
    assert_eq!(r.totals()[1], 3);
    assert_eq!(
      db.sql_exec("SELECT count(*) FROM t", &[]).unwrap().totals(),
      [1000, 0]
    );
  }

  #[test]
  fn a_checkpoint_drains_open_cursors_and_they_read_on() {
    let mut db = db("checkpoint");
    let r = db
      .sql_exec_lazy("SELECT id FROM t ORDER BY id", &[])
      .unwrap();
    let id = r.cursor.unwrap();
    // A write on the same connection after the cursor opened, committed and
    // folded into the file: without the drain SQLite refuses the checkpoint
    // ("locked"). The cursor sees the delete (one connection, as in SQLite
    // and on workerd) and reads on after the checkpoint.
    db.sql_exec("DELETE FROM t WHERE id > 500", &[]).unwrap();
    db.commit().unwrap();
    db.checkpoint().unwrap();
    let all = read_all(&mut db, r.rows, id).unwrap();
    assert_eq!(all, (1..=500).map(f64::from).collect::<Vec<_>>());
    assert!(db.cursors.is_empty());
  }

  #[test]
  fn a_drop_under_an_open_cursor_is_refused_as_workerd_does() {
    let mut db = db("drop");
    let r = db.sql_exec_lazy("SELECT id FROM t", &[]).unwrap();
    let id = r.cursor.unwrap();
    let e = db.sql_exec_lazy("DROP TABLE t", &[]).unwrap_err();
    assert_eq!(e.0, "database table is locked: SQLITE_LOCKED");
    db.cursor_close(id);
    db.sql_exec_lazy("DROP TABLE t", &[]).unwrap();
  }

  #[test]
  fn a_rollback_and_delete_all_leave_cursors_their_rows() {
    let mut db = db("rollback");
    db.sql_exec("INSERT INTO t VALUES (5000)", &[]).unwrap();
    let r = db
      .sql_exec_lazy("SELECT id FROM t ORDER BY id", &[])
      .unwrap();
    let id = r.cursor.unwrap();
    db.rollback();
    let all = read_all(&mut db, r.rows, id).unwrap();
    assert_eq!(all.len(), 1001);
    let r = db
      .sql_exec_lazy("SELECT id FROM t ORDER BY id", &[])
      .unwrap();
    let id = r.cursor.unwrap();
    db.delete_all().unwrap();
    assert_eq!(read_all(&mut db, r.rows, id).unwrap().len(), 1000);
  }

  #[test]
  fn cached_statements_run_again_with_new_bindings_and_follow_schema_and_pragmas() {
    let mut db = db("cache");
    let q = "SELECT * FROM t WHERE id = ?";
    for n in [3.0, 7.0] {
      let r = db.sql_exec(q, &[SqlValue::Number(n)]).unwrap();
      assert_eq!(ids(&r.rows), vec![n]);
    }
    let kept = db.stmt_cache.0.iter().filter(|(k, _)| k == q).count();
    assert_eq!(kept, 1, "one statement, kept once");
    // A schema change: the kept statement is prepared again by SQLite.
    db.sql_exec("ALTER TABLE t ADD COLUMN v TEXT DEFAULT 'x'", &[])
      .unwrap();
    let r = db.sql_exec(q, &[SqlValue::Number(3.0)]).unwrap();
    assert_eq!(r.columns, vec!["id", "v"]);
    // A pragma that changes generated code (foreign keys) expires it too.
    db.sql_exec("CREATE TABLE p (id INTEGER PRIMARY KEY)", &[])
      .unwrap();
    db.sql_exec("CREATE TABLE c (p INTEGER REFERENCES p(id))", &[])
      .unwrap();
    db.commit().unwrap();
    let ins = "INSERT INTO c VALUES (?)";
    db.sql_exec("PRAGMA foreign_keys = ON", &[]).unwrap();
    let e = db.sql_exec(ins, &[SqlValue::Number(1.0)]).unwrap_err();
    assert!(e.0.contains("FOREIGN KEY"), "{e}");
    db.rollback();
    db.sql_exec("PRAGMA foreign_keys = OFF", &[]).unwrap();
    db.sql_exec(ins, &[SqlValue::Number(1.0)]).unwrap();
  }
}

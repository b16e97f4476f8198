//! `sql.exec()`: user SQL on the cell's connection with workerd's value
//! mapping (numbers bind as REAL, integers come back as doubles, BLOBs as
//! bytes) and its refusals (transaction statements, `_cf_` names).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::cursor::{Batch, Counts, Cursor, Step, Stmt};
use crate::{CellDb, StorageError, sqlite_error};

#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
  Null,
  Number(f64),
  Text(String),
  Blob(Vec<u8>),
}

/// The last statement's columns and rows. `counts[i]` is what it had read
/// and written just after the step that gave row `i`, `end` what it had at
/// its end (absent while a lazy read has rows left): workerd's cursor steps
/// one row ahead of what it has handed out, and its `rowsRead` is the count
/// of that step.
#[derive(Debug, Default)]
pub struct SqlResult {
  pub columns: Vec<String>,
  pub rows: Vec<Vec<SqlValue>>,
  pub counts: Vec<Counts>,
  pub end: Option<Counts>,
  /// A lazy read left open with more rows to give (`cursor_next`).
  pub cursor: Option<u32>,
}

impl SqlResult {
  /// Rows read and written by the whole statement (it ran to its end).
  pub fn totals(&self) -> Counts {
    self.end.or(self.counts.last().copied()).unwrap_or_default()
  }
}

/// Rows a lazy cursor hands out per call: a scan holds at most this many in
/// memory at once.
pub const CURSOR_BATCH: usize = 256;

const TXN_MESSAGE: &str = "To execute a transaction, please use the state.storage.transaction() or state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT statements. The JavaScript API is safer because it will automatically roll back on exceptions, and because it interacts correctly with Durable Objects' automatic atomic write coalescing.";

impl CellDb {
  /// Runs every statement in `sql`; the result holds the last one's rows,
  /// all of them.
  pub fn sql_exec(&mut self, sql: &str, bindings: &[SqlValue]) -> Result<SqlResult, StorageError> {
    self.sql_exec_with(sql, bindings, false)
  }

  /// `sql_exec`, but when the last statement only reads, its rows beyond
  /// the first `CURSOR_BATCH` stay in SQLite behind `SqlResult::cursor`.
  pub fn sql_exec_lazy(
    &mut self,
    sql: &str,
    bindings: &[SqlValue],
  ) -> Result<SqlResult, StorageError> {
    self.sql_exec_with(sql, bindings, true)
  }

  fn sql_exec_with(
    &mut self,
    sql: &str,
    bindings: &[SqlValue],
    lazy: bool,
  ) -> Result<SqlResult, StorageError> {
    let mut rest = sql;
    loop {
      // One statement at a time (through its `;`), as SQLite's prepare-tail
      // loop would; only the last one may take parameters.
      let trimmed = rest.trim_start();
      let end = statement_end(trimmed);
      let (stmt, tail) = trimmed.split_at(end);
      rest = tail;
      let is_last = rest.trim().is_empty();
      if is_last {
        return self.exec_one(stmt, bindings, true, lazy);
      }
      self.exec_one(stmt, &[], false, false)?;
    }
  }

  /// The next rows of an open cursor; its `end` once it has no more (it
  /// is then closed).
  pub fn cursor_next(&mut self, id: u32, max: usize) -> Result<Batch, StorageError> {
    let Some(c) = self.cursors.get_mut(&id) else {
      return Ok(Batch {
        rows: Vec::new(),
        counts: Vec::new(),
        end: Some([0, 0]),
      });
    };
    let r = c.take(max);
    if !matches!(r, Ok(Batch { end: None, .. })) {
      self.cursors.remove(&id);
    }
    r
  }

  /// Closes a cursor JavaScript no longer holds.
  pub fn cursor_close(&mut self, id: u32) {
    self.cursors.remove(&id);
  }

  /// Open cursors read out into memory and their statements finalized
  /// (see `cursor`): before a checkpoint, a deleteAll or a rollback.
  pub(crate) fn drain_cursors(&mut self) {
    for c in self.cursors.values_mut() {
      c.drain();
    }
  }

  /// One statement. A schema change of a table an open cursor still reads
  /// fails with SQLite's "database table is locked", as on workerd, whose
  /// cursors are lazy too.
  fn exec_one(
    &mut self,
    sql: &str,
    bindings: &[SqlValue],
    is_last: bool,
    lazy: bool,
  ) -> Result<SqlResult, StorageError> {
    const NO_STATEMENT: &str = "SQL code did not contain a statement.";
    let head = sql
      .trim_start()
      .get(..24)
      .unwrap_or(sql.trim_start())
      .to_ascii_uppercase();
    if ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"]
      .iter()
      .any(|k| head.starts_with(k))
    {
      return Err(StorageError(TXN_MESSAGE.into()));
    }
    // SQLite ignores `PRAGMA foreign_keys` inside a transaction; workerd's
    // implicit transaction has already committed by the time a later step
    // of the same turn runs it (blockConcurrencyWhile's callback), so it
    // applies there. Commit the implicit transaction first (the cell stays
    // dirty: the end-of-turn round still makes it durable before replies).
    let sets_foreign_keys = {
      let head = sql
        .trim_start()
        .get(..64)
        .unwrap_or(sql.trim_start())
        .to_ascii_uppercase();
      let compact: String = head.split_whitespace().collect::<Vec<_>>().join(" ");
      compact.starts_with("PRAGMA FOREIGN_KEYS") && (compact.contains('=') || compact.contains('('))
    };
    if sets_foreign_keys && self.in_txn && self.savepoints == 0 {
      self.commit()?;
    }
    // SAFETY: the connection outlives the statement: cursors and cached
    // statements are dropped before it (`CellDb`'s field order), all others
    // within this call.
    let prepared = match self.stmt_cache.take(sql) {
      Some(st) => Ok(Some(st)),
      None => unsafe { Stmt::prepare(self.conn.handle(), sql) },
    };
    let mut st = match prepared {
      Ok(Some(st)) => st,
      // Empty or comment-only SQL has no statement at all.
      Ok(None) => return Err(StorageError(NO_STATEMENT.into())),
      // rusqlite words the error (with the offset SQLite points at).
      Err(rc) => {
        let e = match self.conn.prepare(sql) {
          Err(e) => sqlite_error(e),
          Ok(_) => StorageError(format!("preparing the statement failed (SQLite code {rc})")),
        };
        return Err(e);
      }
    };
    if !is_last && st.parameter_count() > 0 {
      return Err(StorageError(
        "When executing multiple SQL statements in a single call, only the last statement can have parameters.".into(),
      ));
    }
    let readonly = st.readonly();
    if !readonly && !sets_foreign_keys && !self.in_txn {
      crate::begin_implicit(&self.conn, &self.internal, self.fresh_wal)?;
      self.in_txn = true;
    }
    if st.parameter_count() != bindings.len() {
      return Err(StorageError(
        "Wrong number of parameter bindings for SQL query.".into(),
      ));
    }
    st.bind(bindings)?;
    let mut rows = Vec::new();
    let mut counts = Vec::new();
    // A write runs to its end now (its changes join this turn's commit); a
    // read gives its first batch, and the rest on demand.
    let batch = if lazy && readonly {
      CURSOR_BATCH
    } else {
      usize::MAX
    };
    let mut end = None;
    while rows.len() < batch {
      match st.step()? {
        Step::Row(r) => {
          rows.push(r);
          counts.push(st.counts());
        }
        Step::Done => {
          end = Some(st.counts());
          break;
        }
      }
    }
    // Named after stepping: a kept statement that SQLite prepared again
    // for a changed schema (`SELECT *` after ALTER TABLE) has new columns.
    let columns = st.columns();
    let cursor = if end.is_some() {
      self.stmt_cache.put(sql, st);
      None
    } else {
      // Ids are unique in the process: a stale cursor of a reset object
      // cannot reach a new one's rows.
      static NEXT: AtomicU32 = AtomicU32::new(1);
      let id = NEXT.fetch_add(1, Ordering::Relaxed).max(1);
      self.cursors.insert(id, Cursor::new(st));
      Some(id)
    };
    Ok(SqlResult {
      columns,
      rows,
      counts,
      end,
      cursor,
    })
  }
}

/// Byte length of the first complete statement in `sql` (through its `;`).
fn statement_end(sql: &str) -> usize {
  // SQLite's own notion of a complete statement: a `;` inside a trigger's
  // BEGIN ... END, a string or a comment does not end one.
  for (i, _) in sql.match_indices(';') {
    let Ok(prefix) = std::ffi::CString::new(&sql[..=i]) else {
      break; // a NUL byte: SQLite stops there anyway
    };
    // SAFETY: a valid NUL-terminated string for the duration of the call.
    if unsafe { rusqlite::ffi::sqlite3_complete(prefix.as_ptr()) } != 0 {
      return i + 1;
    }
  }
  sql.len()
}

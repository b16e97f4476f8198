//! `sql.exec()`: user SQL on the cell's connection with workerd's value
//! mapping (numbers bind as REAL, integers come back as doubles, BLOBs as
//! bytes) and its refusals (transaction statements, `_cf_` names).

use rusqlite::types::{Value, ValueRef};

use crate::{CellDb, StorageError, sqlite_error};

#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
  Null,
  Number(f64),
  Text(String),
  Blob(Vec<u8>),
}

#[derive(Debug, Default)]
pub struct SqlResult {
  pub columns: Vec<String>,
  pub rows: Vec<Vec<SqlValue>>,
  pub rows_read: u64,
  pub rows_written: u64,
}

const TXN_MESSAGE: &str = "To execute a transaction, please use the state.storage.transaction() or state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT statements. The JavaScript API is safer because it will automatically roll back on exceptions, and because it interacts correctly with Durable Objects' automatic atomic write coalescing.";

impl CellDb {
  /// Runs every statement in `sql`; the result holds the last one's rows.
  pub fn sql_exec(&mut self, sql: &str, bindings: &[SqlValue]) -> Result<SqlResult, StorageError> {
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
        return self.exec_one(stmt, bindings, true);
      }
      self.exec_one(stmt, &[], false)?;
    }
  }

  fn exec_one(
    &mut self,
    sql: &str,
    bindings: &[SqlValue],
    is_last: bool,
  ) -> Result<SqlResult, StorageError> {
    const NO_STATEMENT: &str = "SQL code did not contain a statement.";
    let head = sql.trim_start().to_ascii_uppercase();
    if ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"]
      .iter()
      .any(|k| head.starts_with(k))
    {
      return Err(StorageError(TXN_MESSAGE.into()));
    }
    let prepare_error = |e: rusqlite::Error| match e {
      rusqlite::Error::SqlInputError { .. } | rusqlite::Error::SqliteFailure(..) => sqlite_error(e),
      // "SQL is empty or comment only"
      _ => StorageError(NO_STATEMENT.into()),
    };
    // SQLite ignores `PRAGMA foreign_keys` inside a transaction; workerd's
    // implicit transaction has already committed by the time a later step
    // of the same turn runs it (blockConcurrencyWhile's callback), so it
    // applies there. Commit the implicit transaction first (the cell stays
    // dirty: the end-of-turn round still makes it durable before replies).
    let sets_foreign_keys = {
      let compact: String = head.split_whitespace().collect::<Vec<_>>().join(" ");
      compact.starts_with("PRAGMA FOREIGN_KEYS") && (compact.contains('=') || compact.contains('('))
    };
    if sets_foreign_keys && self.in_txn && self.savepoints == 0 {
      self.commit()?;
    }
    // Prepared once: the implicit transaction opens between preparing and
    // stepping, which SQLite allows (a statement takes its locks when it
    // first steps).
    let mut st = self.conn.prepare(sql).map_err(prepare_error)?;
    // Empty or comment-only SQL prepares to no statement at all (it has no
    // text to expand).
    if st.expanded_sql().is_none() {
      return Err(StorageError(NO_STATEMENT.into()));
    }
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
    for (i, b) in bindings.iter().enumerate() {
      let v = match b {
        SqlValue::Null => Value::Null,
        SqlValue::Number(n) => Value::Real(*n),
        SqlValue::Text(s) => Value::Text(s.clone()),
        SqlValue::Blob(b) => Value::Blob(b.clone()),
      };
      st.raw_bind_parameter(i + 1, v).map_err(sqlite_error)?;
    }
    let columns: Vec<String> = st.column_names().map(String::from).collect();
    let n = columns.len();
    let changes_before = self.conn.total_changes();
    let mut rows = Vec::new();
    {
      let mut it = st.raw_query();
      while let Some(row) = it.next().map_err(sqlite_error)? {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
          out.push(match row.get_ref(i).map_err(sqlite_error)? {
            ValueRef::Null => SqlValue::Null,
            ValueRef::Integer(i) => SqlValue::Number(i as f64),
            ValueRef::Real(f) => SqlValue::Number(f),
            ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
          });
        }
        rows.push(out);
      }
    }
    drop(st);
    let rows_written = if readonly {
      0
    } else {
      self.conn.total_changes().saturating_sub(changes_before)
    };
    let rows_read = rows.len() as u64;
    Ok(SqlResult {
      columns,
      rows,
      rows_read,
      rows_written,
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

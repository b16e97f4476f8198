//! `_cf_METADATA`, workerd's table of a cell's own settings. cellhost keeps
//! one entry there: the bookmark a pending point-in-time restore goes back
//! to. It lives in the database, not beside it, so it is replicated and
//! restored with the cell and survives a takeover by another node.

use rusqlite::OptionalExtension;

use crate::{CellDb, StorageError, sqlite_error};

const CREATE: &str =
  "CREATE TABLE IF NOT EXISTS _cf_METADATA (key INTEGER PRIMARY KEY, value BLOB)";
/// workerd uses keys 1 (alarm) and 2 (dev bookmark counter).
const RESTORE_KEY: i64 = 3;

impl CellDb {
  /// Records (in this turn's transaction) the bookmark the next session
  /// restores to.
  pub fn set_pending_restore(&mut self, bookmark: &str) -> Result<(), StorageError> {
    self.internal(|db| {
      db.begin_write()?;
      db.conn.execute_batch(CREATE).map_err(sqlite_error)?;
      db.conn
        .execute(
          "INSERT OR REPLACE INTO _cf_METADATA (key, value) VALUES (?1, ?2)",
          (RESTORE_KEY, bookmark.as_bytes()),
        )
        .map_err(sqlite_error)?;
      Ok(())
    })
  }

  /// The bookmark of a pending restore, if one was scheduled.
  pub fn pending_restore(&mut self) -> Result<Option<String>, StorageError> {
    self.internal(|db| {
      let exists: bool = db
        .conn
        .query_row(
          "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_cf_METADATA'",
          [],
          |_| Ok(true),
        )
        .optional()
        .map_err(sqlite_error)?
        .unwrap_or(false);
      if !exists {
        return Ok(None);
      }
      let v: Option<Vec<u8>> = db
        .conn
        .query_row(
          "SELECT value FROM _cf_METADATA WHERE key = ?1",
          [RESTORE_KEY],
          |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
      Ok(v.map(|b| String::from_utf8_lossy(&b).into_owned()))
    })
  }

  /// Drops a pending restore (it was carried out) and commits.
  pub fn clear_pending_restore(&mut self) -> Result<(), StorageError> {
    if self.pending_restore()?.is_none() {
      return Ok(());
    }
    self.internal(|db| {
      db.begin_write()?;
      db.conn
        .execute("DELETE FROM _cf_METADATA WHERE key = ?1", [RESTORE_KEY])
        .map_err(sqlite_error)?;
      Ok(())
    })?;
    self.commit()
  }
}

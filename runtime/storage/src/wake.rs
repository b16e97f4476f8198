//! The node's local wake index (`<data>/wake.sqlite`): which cells have an
//! alarm and no later than when. It is only a hint, read at start so alarms
//! survive a restart without scanning every cell; the cell's own `_cf_ALARM`
//! row decides whether anything runs.

use std::path::Path;

use rusqlite::Connection;

use crate::{StorageError, sqlite_error};

/// One hint: the cell `<unique_key>/<id>` has an alarm due at or after `at_ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct WakeEntry {
  pub unique_key: String,
  pub id: String,
  /// `id.name`, restored when the alarm wakes an evicted object.
  pub name: Option<String>,
  pub at_ms: u64,
}

pub struct WakeDb {
  conn: Connection,
  /// The data directory's lock: the index lives as long as the node.
  _lock: std::fs::File,
}

impl WakeDb {
  pub fn open(path: &Path) -> Result<WakeDb, StorageError> {
    let lock = crate::lock_data_dir(path.parent().unwrap_or(Path::new(".")))?;
    let conn = Connection::open(path).map_err(sqlite_error)?;
    // FULL: a hint is durable before the cell commit that sets its alarm.
    conn
      .execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000;
         CREATE TABLE IF NOT EXISTS wake (unique_key TEXT NOT NULL, id TEXT NOT NULL,
           name TEXT, at_ms INTEGER NOT NULL, PRIMARY KEY (unique_key, id));",
      )
      .map_err(sqlite_error)?;
    Ok(WakeDb { conn, _lock: lock })
  }

  pub fn load(&self) -> Result<Vec<WakeEntry>, StorageError> {
    let mut st = self
      .conn
      .prepare("SELECT unique_key, id, name, at_ms FROM wake")
      .map_err(sqlite_error)?;
    st.query_map([], |r| {
      Ok(WakeEntry {
        unique_key: r.get(0)?,
        id: r.get(1)?,
        name: r.get(2)?,
        at_ms: r.get::<_, i64>(3)? as u64,
      })
    })
    .map_err(sqlite_error)?
    .collect::<Result<_, _>>()
    .map_err(sqlite_error)
  }

  /// Records (durably) that the cell's alarm is due no earlier than `at_ms`.
  pub fn put(&self, e: &WakeEntry) -> Result<(), StorageError> {
    self
      .conn
      .execute(
        "INSERT OR REPLACE INTO wake (unique_key, id, name, at_ms) VALUES (?1, ?2, ?3, ?4)",
        (&e.unique_key, &e.id, &e.name, e.at_ms as i64),
      )
      .map(|_| ())
      .map_err(sqlite_error)
  }

  /// The cell has no alarm any more (a stale hint costs one wasted wake).
  pub fn remove(&self, unique_key: &str, id: &str) -> Result<(), StorageError> {
    self
      .conn
      .execute(
        "DELETE FROM wake WHERE unique_key = ?1 AND id = ?2",
        (unique_key, id),
      )
      .map(|_| ())
      .map_err(sqlite_error)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn entries_survive_reopen() {
    let dir = std::env::temp_dir().join(format!("cellhost-wake-{}", std::process::id()));
    let path = dir.join("wake.sqlite");
    let e = WakeEntry {
      unique_key: "s-C".into(),
      id: "ab".into(),
      name: Some("n".into()),
      at_ms: 42,
    };
    {
      let db = WakeDb::open(&path).unwrap();
      db.put(&e).unwrap();
      db.put(&WakeEntry {
        id: "cd".into(),
        name: None,
        ..e.clone()
      })
      .unwrap();
      db.remove("s-C", "cd").unwrap();
    }
    let db = WakeDb::open(&path).unwrap();
    assert_eq!(db.load().unwrap(), vec![e]);
    std::fs::remove_dir_all(dir).unwrap();
  }
}

//! The KV API on `_cf_KV(key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID`,
//! created by the first write (and forgotten again if that write rolls back).
//! Values are opaque bytes here (V8 serialization, done in JavaScript).

use rusqlite::{OptionalExtension, params};

use crate::{CellDb, StorageError, sqlite_error};

const CREATE: &str =
  "CREATE TABLE IF NOT EXISTS _cf_KV (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID";

/// A compiled `list()` range: keys in `[start, end)` as UTF-8 bytes.
#[derive(Debug, Default, Clone)]
pub struct ListOptions {
  pub start: Option<Vec<u8>>,
  pub end: Option<Vec<u8>>,
  pub reverse: bool,
  pub limit: Option<u64>,
}

impl ListOptions {
  /// Compiles workerd's options: `startAfter` becomes `startAfter + "\0"`,
  /// and `prefix` clamps the range to keys that start with it.
  pub fn compile(
    start: Option<&str>,
    start_after: Option<&str>,
    end: Option<&str>,
    prefix: Option<&str>,
    reverse: bool,
    limit: Option<u64>,
  ) -> ListOptions {
    let mut lo = start.map(|s| s.as_bytes().to_vec());
    if let Some(a) = start_after {
      let mut v = a.as_bytes().to_vec();
      v.push(0);
      lo = Some(v);
    }
    let mut hi = end.map(|s| s.as_bytes().to_vec());
    if let Some(p) = prefix.filter(|p| !p.is_empty()) {
      let p = p.as_bytes().to_vec();
      if lo.as_ref().is_none_or(|l| *l < p) {
        lo = Some(p.clone());
      }
      let mut upper = p;
      while upper.last() == Some(&0xff) {
        upper.pop();
      }
      if let Some(last) = upper.last_mut() {
        *last += 1;
        if hi.as_ref().is_none_or(|h| *h > upper) {
          hi = Some(upper);
        }
      }
    }
    ListOptions {
      start: lo,
      end: hi,
      reverse,
      limit,
    }
  }

  pub fn is_empty_range(&self) -> bool {
    matches!((&self.start, &self.end), (Some(s), Some(e)) if e <= s)
  }
}

fn missing_table(e: &rusqlite::Error) -> bool {
  e.to_string().contains("no such table: _cf_KV")
}

impl CellDb {
  pub fn kv_get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
    self.internal(|db| db.kv_get_inner(key))
  }

  fn kv_get_inner(&mut self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
    let r = self
      .conn
      .prepare_cached("SELECT value FROM _cf_KV WHERE key = ?")
      .and_then(|mut st| st.query_row([key], |r| r.get::<_, Vec<u8>>(0)).optional());
    match r {
      Ok(v) => Ok(v),
      Err(e) if missing_table(&e) => Ok(None),
      Err(e) => Err(sqlite_error(e)),
    }
  }

  pub fn kv_put(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
    self.internal(|db| db.kv_put_inner(key, value))
  }

  fn kv_put_inner(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
    self.begin_write()?;
    self.conn.execute_batch(CREATE).map_err(sqlite_error)?;
    self
      .conn
      .prepare_cached("INSERT OR REPLACE INTO _cf_KV (key, value) VALUES (?, ?)")
      .and_then(|mut st| st.execute(params![key, value]))
      .map_err(sqlite_error)?;
    Ok(())
  }

  /// put(entries): all or nothing, in its own savepoint.
  pub fn kv_put_many(&mut self, entries: &[(String, Vec<u8>)]) -> Result<(), StorageError> {
    self.internal(|db| db.kv_put_many_inner(entries))
  }

  fn kv_put_many_inner(&mut self, entries: &[(String, Vec<u8>)]) -> Result<(), StorageError> {
    self.begin_write()?;
    self
      .conn
      .execute_batch("SAVEPOINT _cf_put_multiple_savepoint")
      .map_err(sqlite_error)?;
    let r = entries
      .iter()
      .try_for_each(|(k, v)| self.kv_put_inner(k, v));
    let end = if r.is_ok() {
      "RELEASE _cf_put_multiple_savepoint"
    } else {
      "ROLLBACK TO _cf_put_multiple_savepoint; RELEASE _cf_put_multiple_savepoint"
    };
    self.conn.execute_batch(end).map_err(sqlite_error)?;
    r
  }

  pub fn kv_delete(&mut self, key: &str) -> Result<bool, StorageError> {
    self.internal(|db| db.kv_delete_inner(key))
  }

  fn kv_delete_inner(&mut self, key: &str) -> Result<bool, StorageError> {
    self.begin_write()?;
    let r = self
      .conn
      .prepare_cached("DELETE FROM _cf_KV WHERE key = ?")
      .and_then(|mut st| st.execute([key]));
    match r {
      Ok(n) => Ok(n > 0),
      Err(e) if missing_table(&e) => Ok(false),
      Err(e) => Err(sqlite_error(e)),
    }
  }

  pub fn kv_list(&mut self, opts: &ListOptions) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    self.internal(|db| db.kv_list_inner(opts))
  }

  fn kv_list_inner(&mut self, opts: &ListOptions) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    if opts.is_empty_range() {
      return Ok(Vec::new());
    }
    // Bounds are compared as bytes (CAST to BLOB): a prefix's upper bound
    // may not be valid UTF-8, and BINARY text order is byte order anyway.
    let mut sql = String::from("SELECT key, value FROM _cf_KV WHERE 1");
    let mut args: Vec<Vec<u8>> = Vec::new();
    if let Some(s) = &opts.start {
      sql.push_str(" AND CAST(key AS BLOB) >= ?");
      args.push(s.clone());
    }
    if let Some(e) = &opts.end {
      sql.push_str(" AND CAST(key AS BLOB) < ?");
      args.push(e.clone());
    }
    sql.push_str(if opts.reverse {
      " ORDER BY key DESC"
    } else {
      " ORDER BY key"
    });
    if let Some(l) = opts.limit {
      sql.push_str(&format!(" LIMIT {l}"));
    }
    let r = self.conn.prepare_cached(&sql).and_then(|mut st| {
      st.query_map(rusqlite::params_from_iter(args.iter()), |r| {
        Ok((r.get(0)?, r.get(1)?))
      })?
      .collect::<Result<Vec<_>, _>>()
    });
    match r {
      Ok(v) => Ok(v),
      Err(e) if missing_table(&e) => Ok(Vec::new()),
      Err(e) => Err(sqlite_error(e)),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn db() -> (CellDb, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
      "cellhost-kv-{}-{:?}",
      std::process::id(),
      std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("c.sqlite");
    (CellDb::open(&path).unwrap(), dir)
  }

  #[test]
  fn list_options_follow_workerd() {
    let (mut db, dir) = db();
    for k in ["a", "ab", "abc", "b", "c"] {
      db.kv_put(k, k.as_bytes()).unwrap();
    }
    db.commit().unwrap();
    let keys = |o: ListOptions, db: &mut CellDb| {
      db.kv_list(&o)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect::<Vec<_>>()
        .join(",")
    };
    assert_eq!(
      keys(
        ListOptions::compile(None, None, None, Some("ab"), false, None),
        &mut db
      ),
      "ab,abc"
    );
    assert_eq!(
      keys(
        ListOptions::compile(None, Some("ab"), None, None, false, None),
        &mut db
      ),
      "abc,b,c"
    );
    assert_eq!(
      keys(
        ListOptions::compile(None, None, None, None, true, Some(2)),
        &mut db
      ),
      "c,b"
    );
    assert_eq!(
      keys(
        ListOptions::compile(Some("b"), None, Some("b"), None, false, None),
        &mut db
      ),
      ""
    );
    let _ = std::fs::remove_dir_all(dir);
  }

  #[test]
  fn rollback_forgets_writes_and_commit_keeps_them() {
    let (mut db, dir) = db();
    db.kv_put("k", b"1").unwrap();
    db.commit().unwrap();
    db.kv_put("k", b"2").unwrap();
    assert_eq!(db.kv_get("k").unwrap(), Some(b"2".to_vec()));
    db.rollback();
    assert_eq!(db.kv_get("k").unwrap(), Some(b"1".to_vec()));
    let _ = std::fs::remove_dir_all(dir);
  }
}

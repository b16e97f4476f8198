//! Workers KV namespaces on this node: one SQLite database per namespace
//! (`<data>/kv/<id>.sqlite`), shared by the process's isolates and opened
//! on first use. A put is acknowledged once SQLite has committed it to its
//! write-ahead log with a sync (`synchronous = FULL`), so neither a crash
//! of the process nor of the machine loses it. Expired keys read as absent
//! and are dropped when met. Validation and the API's shape live in
//! `js/kv.js`, as workerd and miniflare split them.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use deno_core::convert::Uint8Array;
use deno_core::{OpState, ToV8, op2};
use deno_error::JsErrorBox;
use rusqlite::{Connection, OptionalExtension, params};

deno_core::extension!(
  cellhost_kv,
  deps = [deno_web, deno_fetch],
  ops = [op_kvns_get, op_kvns_put, op_kvns_delete, op_kvns_list],
  esm = [dir "js", "kv.js"],
);

/// The namespaces of one data directory.
pub struct KvStore {
  dir: PathBuf,
  open: Mutex<HashMap<String, Arc<Mutex<Connection>>>>,
}

impl KvStore {
  /// The store of `data_dir`, one per directory in the process.
  pub fn for_dir(data_dir: &Path) -> Arc<KvStore> {
    static STORES: OnceLock<Mutex<HashMap<PathBuf, Arc<KvStore>>>> = OnceLock::new();
    let mut stores = STORES.get_or_init(Default::default).lock().unwrap();
    stores
      .entry(data_dir.to_path_buf())
      .or_insert_with(|| {
        Arc::new(KvStore {
          dir: data_dir.join("kv"),
          open: Mutex::new(HashMap::new()),
        })
      })
      .clone()
  }

  fn namespace(&self, id: &str) -> Result<Arc<Mutex<Connection>>, JsErrorBox> {
    let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = open.get(id) {
      return Ok(c.clone());
    }
    let path = self.dir.join(format!("{}.sqlite", file_name(id)));
    let conn = open_db(&path).map_err(|e| failure(&path, e))?;
    let conn = Arc::new(Mutex::new(conn));
    open.insert(id.to_string(), conn.clone());
    Ok(conn)
  }

  fn with<T>(
    &self,
    id: &str,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
  ) -> Result<T, JsErrorBox> {
    let db = self.namespace(id)?;
    let db = db.lock().unwrap_or_else(|p| p.into_inner());
    f(&db).map_err(|e| JsErrorBox::generic(format!("KV namespace {id} failed: {e}")))
  }
}

/// A namespace id as a file name: ids are wrangler's hex strings, but any
/// text is accepted; what a path cannot hold is escaped.
fn file_name(id: &str) -> String {
  id.chars()
    .map(|c| {
      if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
        c.to_string()
      } else {
        format!("%{:02x}", c as u32)
      }
    })
    .collect()
}

fn failure(path: &Path, e: impl std::fmt::Display) -> JsErrorBox {
  JsErrorBox::generic(format!(
    "the KV namespace at {} failed: {e}",
    path.display()
  ))
}

fn open_db(path: &Path) -> rusqlite::Result<Connection> {
  if let Some(dir) = path.parent() {
    let _ = std::fs::create_dir_all(dir);
  }
  let db = Connection::open(path)?;
  db.execute_batch(
    "PRAGMA journal_mode = WAL;
     PRAGMA synchronous = FULL;
     CREATE TABLE IF NOT EXISTS kv (
       key TEXT PRIMARY KEY,
       value BLOB NOT NULL,
       metadata TEXT,
       expiration INTEGER
     ) WITHOUT ROWID;",
  )?;
  Ok(db)
}

fn now_s() -> i64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_secs() as i64)
    .unwrap_or(0)
}

fn store(state: &OpState) -> Result<Arc<KvStore>, JsErrorBox> {
  state
    .try_borrow::<Arc<KvStore>>()
    .cloned()
    .ok_or_else(|| JsErrorBox::generic("KV namespaces are not available here"))
}

#[derive(ToV8)]
pub struct Entry {
  value: Uint8Array,
  metadata: Option<String>,
  expiration: Option<f64>,
}

/// The live entry for `key`, if any (an expired one is dropped).
#[op2]
fn op_kvns_get(
  state: &mut OpState,
  #[string] ns: String,
  #[string] key: String,
) -> Result<Option<Entry>, JsErrorBox> {
  let now = now_s();
  store(state)?.with(&ns, |db| {
    let row = db
      .query_row(
        "SELECT value, metadata, expiration FROM kv WHERE key = ?1",
        params![key],
        |r| {
          Ok((
            r.get::<_, Vec<u8>>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, Option<i64>>(2)?,
          ))
        },
      )
      .optional()?;
    match row {
      Some((_, _, Some(exp))) if exp <= now => {
        db.execute("DELETE FROM kv WHERE key = ?1", params![key])?;
        Ok(None)
      }
      Some((value, metadata, expiration)) => Ok(Some(Entry {
        value: value.into(),
        metadata,
        expiration: expiration.map(|e| e as f64),
      })),
      None => Ok(None),
    }
  })
}

/// Runs a write on the blocking pool: its fsync must not stall the
/// isolate's other events.
async fn write(
  state: Rc<RefCell<OpState>>,
  f: impl FnOnce(&KvStore) -> Result<(), JsErrorBox> + Send + 'static,
) -> Result<(), JsErrorBox> {
  let store = store(&state.borrow())?;
  tokio::task::spawn_blocking(move || f(&store))
    .await
    .map_err(|e| JsErrorBox::generic(format!("KV write: {e}")))?
}

/// Stores `value` (with metadata JSON and an absolute expiration in
/// seconds); resolves once it is durable.
#[op2]
async fn op_kvns_put(
  state: Rc<RefCell<OpState>>,
  #[string] ns: String,
  #[string] key: String,
  #[buffer(copy)] value: Vec<u8>,
  #[string] metadata: String,
  #[number] expiration: i64,
) -> Result<(), JsErrorBox> {
  write(state, move |store| {
    let metadata = (!metadata.is_empty()).then_some(metadata);
    let expiration = (expiration > 0).then_some(expiration);
    store.with(&ns, |db| {
      db.execute(
        "INSERT OR REPLACE INTO kv (key, value, metadata, expiration) VALUES (?1, ?2, ?3, ?4)",
        params![key, value, metadata, expiration],
      )
      .map(|_| ())
    })
  })
  .await
}

#[op2]
async fn op_kvns_delete(
  state: Rc<RefCell<OpState>>,
  #[string] ns: String,
  #[string] key: String,
) -> Result<(), JsErrorBox> {
  write(state, move |store| {
    store.with(&ns, |db| {
      db.execute("DELETE FROM kv WHERE key = ?1", params![key])
        .map(|_| ())
    })
  })
  .await
}

/// Up to `limit` live keys after `cursor` starting with `prefix`, as JSON:
/// `{ keys: [{ name, expiration?, metadata? }], cursor? }` (a cursor when
/// more keys follow). The cursor is the last key returned, hex-encoded.
#[op2]
#[string]
fn op_kvns_list(
  state: &mut OpState,
  #[string] ns: String,
  #[string] prefix: String,
  #[smi] limit: u32,
  #[string] cursor: String,
) -> Result<String, JsErrorBox> {
  let now = now_s();
  let after = match unhex(&cursor) {
    Some(k) => k,
    None if cursor.is_empty() => String::new(),
    None => return Err(JsErrorBox::generic("KV GET failed: 400 Invalid cursor")),
  };
  store(state)?.with(&ns, |db| {
    // Keys in byte order after the cursor, from the prefix on; the prefix
    // test is on the bytes (LIKE would fold case and read `%`/`_`).
    let mut stmt = db.prepare_cached(
      "SELECT key, metadata, expiration FROM kv WHERE key > ?1 AND key >= ?2 ORDER BY key",
    )?;
    let mut rows = stmt.query(params![after, prefix])?;
    let mut keys = Vec::new();
    let mut more = false;
    while let Some(r) = rows.next()? {
      let key: String = r.get(0)?;
      if !key.starts_with(&prefix) {
        break;
      }
      let expiration: Option<i64> = r.get(2)?;
      if expiration.is_some_and(|e| e <= now) {
        continue;
      }
      if keys.len() == limit as usize {
        more = true;
        break;
      }
      let mut k = serde_json::Map::new();
      k.insert("name".into(), key.into());
      if let Some(e) = expiration {
        k.insert("expiration".into(), e.into());
      }
      if let Some(m) = r.get::<_, Option<String>>(1)? {
        k.insert("metadata".into(), m.into());
      }
      keys.push(serde_json::Value::Object(k));
    }
    let mut out = serde_json::Map::new();
    let last = keys
      .last()
      .and_then(|k| k["name"].as_str())
      .map(|n| n.to_string());
    out.insert("keys".into(), keys.into());
    if more && let Some(last) = last {
      out.insert("cursor".into(), hex(&last).into());
    }
    Ok(serde_json::Value::Object(out).to_string())
  })
}

fn hex(s: &str) -> String {
  s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
  if s.is_empty() || !s.len().is_multiple_of(2) {
    return None;
  }
  let bytes: Option<Vec<u8>> = (0..s.len())
    .step_by(2)
    .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
    .collect();
  String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn cursors_round_trip() {
    for k in ["a", "ключ", "x y/z"] {
      assert_eq!(unhex(&hex(k)).as_deref(), Some(k));
    }
    assert_eq!(unhex("zz"), None);
    assert_eq!(unhex("abc"), None);
  }

  #[test]
  fn file_names_are_safe() {
    assert_eq!(file_name("0f2ac74b"), "0f2ac74b");
    assert_eq!(file_name("../x"), "%2e%2e%2fx");
  }
}

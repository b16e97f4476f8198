//! The Cache API's storage: one SQLite database per data directory
//! (`cache.sqlite`), shared by the process's isolates, created on first
//! use. Entries are keyed by cache name and URL (as Cloudflare's cache,
//! Vary is not part of the key); what may be stored and for how long is
//! `policy`'s call, and how a lookup answers (conditional and range
//! requests) the JS glue's (`js/cache.js`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use deno_core::convert::Uint8Array;
use deno_core::{OpState, ToV8, op2};
use deno_error::JsErrorBox;
use rusqlite::{Connection, OptionalExtension, params};

pub mod policy;

deno_core::extension!(
  cellhost_cache,
  deps = [deno_web, deno_fetch],
  ops = [op_cache_put, op_cache_get, op_cache_delete, op_cache_ttl],
  esm = [dir "js", "cache.js"],
);

/// The node's cache store: where it lives; opened on first use.
pub struct CacheStore {
  path: PathBuf,
  db: Mutex<Option<Connection>>,
}

impl CacheStore {
  /// The store of `data_dir`, one per directory in the process.
  pub fn for_dir(data_dir: &Path) -> Arc<CacheStore> {
    static STORES: OnceLock<Mutex<HashMap<PathBuf, Arc<CacheStore>>>> = OnceLock::new();
    let mut stores = STORES.get_or_init(Default::default).lock().unwrap();
    stores
      .entry(data_dir.to_path_buf())
      .or_insert_with(|| {
        Arc::new(CacheStore {
          path: data_dir.join("cache.sqlite"),
          db: Mutex::new(None),
        })
      })
      .clone()
  }

  fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, JsErrorBox> {
    let mut db = self.db.lock().unwrap_or_else(|p| p.into_inner());
    if db.is_none() {
      *db = Some(open(&self.path).map_err(|e| failure(&self.path, e))?);
    }
    f(db.as_ref().expect("opened above")).map_err(|e| failure(&self.path, e))
  }
}

fn failure(path: &Path, e: impl std::fmt::Display) -> JsErrorBox {
  JsErrorBox::generic(format!("the cache at {} failed: {e}", path.display()))
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
  if let Some(dir) = path.parent() {
    let _ = std::fs::create_dir_all(dir);
  }
  let db = Connection::open(path)?;
  db.execute_batch(
    "PRAGMA journal_mode = WAL;
     PRAGMA synchronous = NORMAL;
     CREATE TABLE IF NOT EXISTS entries (
       cache TEXT NOT NULL,
       url TEXT NOT NULL,
       status INTEGER NOT NULL,
       headers TEXT NOT NULL,
       body BLOB NOT NULL,
       expires INTEGER NOT NULL,
       PRIMARY KEY (cache, url)
     ) WITHOUT ROWID;",
  )?;
  Ok(db)
}

fn now_ms() -> i64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as i64)
    .unwrap_or(0)
}

fn store(state: &OpState) -> Result<Arc<CacheStore>, JsErrorBox> {
  state
    .try_borrow::<Arc<CacheStore>>()
    .cloned()
    .ok_or_else(|| JsErrorBox::generic("the Cache API has no store in this isolate"))
}

/// Stores a response for `ttl_ms`; `headers` is JSON (`[[name, value], …]`).
#[op2(fast)]
fn op_cache_put(
  state: &mut OpState,
  #[string] cache: String,
  #[string] url: String,
  #[smi] status: u32,
  #[string] headers: String,
  #[buffer] body: &[u8],
  #[number] ttl_ms: i64,
) -> Result<(), JsErrorBox> {
  let expires = now_ms().saturating_add(ttl_ms);
  store(state)?.with(|db| {
    db.execute(
      "INSERT OR REPLACE INTO entries (cache, url, status, headers, body, expires)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
      params![cache, url, status, headers, body, expires],
    )
    .map(|_| ())
  })
}

#[derive(ToV8)]
pub struct Entry {
  status: u32,
  headers: String,
  body: Uint8Array,
}

/// The fresh entry for `url`, if any (an expired one is dropped).
#[op2]
fn op_cache_get(
  state: &mut OpState,
  #[string] cache: String,
  #[string] url: String,
) -> Result<Option<Entry>, JsErrorBox> {
  let now = now_ms();
  store(state)?.with(|db| {
    let row = db
      .query_row(
        "SELECT status, headers, body, expires FROM entries WHERE cache = ?1 AND url = ?2",
        params![cache, url],
        |r| {
          Ok((
            r.get::<_, u32>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, Vec<u8>>(2)?,
            r.get::<_, i64>(3)?,
          ))
        },
      )
      .optional()?;
    match row {
      Some((_, _, _, expires)) if expires <= now => {
        db.execute(
          "DELETE FROM entries WHERE cache = ?1 AND url = ?2",
          params![cache, url],
        )?;
        Ok(None)
      }
      Some((status, headers, body, _)) => Ok(Some(Entry {
        status,
        headers,
        body: body.into(),
      })),
      None => Ok(None),
    }
  })
}

/// Removes the entry for `url`; whether there was a fresh one.
#[op2(fast)]
fn op_cache_delete(
  state: &mut OpState,
  #[string] cache: &str,
  #[string] url: &str,
) -> Result<bool, JsErrorBox> {
  let now = now_ms();
  store(state)?.with(|db| {
    let fresh: Option<i64> = db
      .query_row(
        "DELETE FROM entries WHERE cache = ?1 AND url = ?2 RETURNING expires",
        params![cache, url],
        |r| r.get(0),
      )
      .optional()?;
    Ok(fresh.is_some_and(|e| e > now))
  })
}

/// How long a response may be stored (ms; 0: not at all), from its status
/// and headers (JSON `[[name, value], …]`).
#[op2(fast)]
#[number]
fn op_cache_ttl(#[smi] status: u32, #[string] headers: &str) -> i64 {
  let headers: Vec<(String, String)> = serde_json::from_str(headers).unwrap_or_default();
  policy::ttl_ms(status as u16, &headers, now_ms())
}

//! D1 databases on this node: one SQLite file per database
//! (`<data>/d1/<id>.sqlite`), run by the same engine as Durable Objects'
//! SQL (workerd's authorizer, value mapping and messages), as `wrangler dev`
//! runs D1 on a Durable Object's SQL storage. Each call (one statement, a
//! batch, an exec) is one transaction: all of it or none, durable (WAL
//! fsynced) before the answer. The D1 API's shape is `js/d1.js`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cellhost_storage::{CellDb, SqlValue};
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;
use serde::Deserialize;
use serde_json::{Value, json};

deno_core::extension!(
  cellhost_d1,
  deps = [deno_web],
  ops = [op_d1_query],
  esm = [dir "js", "d1.js"],
);

struct Database {
  db: CellDb,
  /// Commits so far: the session bookmark (as D1's, it only grows).
  commits: u64,
  /// The file and its directory are synced once, after the first commit.
  synced_once: bool,
}

/// The databases of one data directory.
pub struct D1Store {
  dir: PathBuf,
  open: Mutex<HashMap<String, Arc<Mutex<Database>>>>,
}

impl D1Store {
  pub fn for_dir(data_dir: &Path) -> Arc<D1Store> {
    static STORES: OnceLock<Mutex<HashMap<PathBuf, Arc<D1Store>>>> = OnceLock::new();
    let mut stores = STORES.get_or_init(Default::default).lock().unwrap();
    stores
      .entry(data_dir.to_path_buf())
      .or_insert_with(|| {
        Arc::new(D1Store {
          dir: data_dir.join("d1"),
          open: Mutex::new(HashMap::new()),
        })
      })
      .clone()
  }

  fn database(&self, id: &str) -> Result<Arc<Mutex<Database>>, String> {
    let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = open.get(id) {
      return Ok(d.clone());
    }
    let path = self.dir.join(format!("{}.sqlite", file_name(id)));
    let db = CellDb::open(&path).map_err(|e| format!("D1 database {id}: {}", e.0))?;
    let d = Arc::new(Mutex::new(Database {
      db,
      commits: 0,
      synced_once: false,
    }));
    open.insert(id.to_string(), d.clone());
    Ok(d)
  }
}

/// A database id as a file name (ids are UUIDs; anything else is escaped).
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

#[derive(Deserialize)]
struct Query {
  sql: String,
  #[serde(default)]
  params: Vec<Value>,
}

fn to_sql(v: &Value) -> Result<SqlValue, String> {
  Ok(match v {
    Value::Null => SqlValue::Null,
    Value::Number(n) => SqlValue::Number(n.as_f64().unwrap_or(f64::NAN)),
    Value::String(s) => SqlValue::Text(s.clone()),
    Value::Bool(b) => SqlValue::Number(if *b { 1.0 } else { 0.0 }),
    // D1 sends a blob as an array of byte values.
    Value::Array(a) => SqlValue::Blob(
      a.iter()
        .map(|b| b.as_u64().filter(|b| *b < 256).map(|b| b as u8))
        .collect::<Option<Vec<u8>>>()
        .ok_or("a blob parameter must be an array of byte values")?,
    ),
    Value::Object(_) => return Err("an object is not a valid D1 parameter".into()),
  })
}

fn to_json(v: &SqlValue) -> Value {
  match v {
    SqlValue::Null => Value::Null,
    SqlValue::Number(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, |n| {
      // Integral values print as integers, as JavaScript would.
      if n
        .as_f64()
        .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
      {
        Value::from(n.as_f64().unwrap() as i64)
      } else {
        Value::Number(n)
      }
    }),
    SqlValue::Text(s) => Value::String(s.clone()),
    SqlValue::Blob(b) => Value::Array(b.iter().map(|x| Value::from(*x)).collect()),
  }
}

/// Runs `queries` (JSON: `[{ sql, params }]`) as one transaction. Answers
/// JSON: `{ results: [{ columns, rows, meta }], bookmark }`, or `{ error }`
/// (nothing of the call was kept).
/// Runs on the blocking pool: the commit's fsync must not stall the
/// isolate's other events.
#[op2]
#[string]
async fn op_d1_query(
  state: Rc<RefCell<OpState>>,
  #[string] id: String,
  #[string] queries: String,
) -> Result<String, JsErrorBox> {
  let store = state
    .borrow()
    .try_borrow::<Arc<D1Store>>()
    .cloned()
    .ok_or_else(|| JsErrorBox::generic("D1 databases are not available here"))?;
  let queries: Vec<Query> =
    serde_json::from_str(&queries).map_err(|e| JsErrorBox::type_error(e.to_string()))?;
  let answer = tokio::task::spawn_blocking(move || {
    let d = store.database(&id)?;
    let mut d = d.lock().unwrap_or_else(|p| p.into_inner());
    run(&mut d, &queries)
  })
  .await
  .map_err(|e| JsErrorBox::generic(format!("D1: {e}")))?;
  Ok(
    match answer {
      Ok(v) => v,
      Err(e) => json!({ "error": e }),
    }
    .to_string(),
  )
}

fn run(d: &mut Database, queries: &[Query]) -> Result<Value, String> {
  let queries: Vec<&Query> = queries
    .iter()
    .filter(|q| !strip_comments(&q.sql).trim().is_empty())
    .collect();
  if queries.is_empty() {
    return Err("No SQL statements detected.".into());
  }
  let depth = d.db.savepoint().map_err(|e| e.0)?;
  let mut results = Vec::new();
  for q in &queries {
    match one(d, q) {
      Ok(r) => results.push(r),
      Err(e) => {
        let _ = d.db.rollback_to(depth);
        d.db.rollback();
        return Err(e);
      }
    }
  }
  d.db.release(depth).map_err(|e| e.0)?;
  d.db.commit().map_err(|e| e.0)?;
  sync(d).map_err(|e| format!("D1 database: {e}"))?;
  d.commits += 1;
  Ok(json!({ "results": results, "bookmark": format!("{:016x}-{:08x}", d.commits, 0) }))
}

/// The WAL (and, the first time, the file and its folder) to disk.
fn sync(d: &mut Database) -> std::io::Result<()> {
  if let Some(wal) = d.db.wal_file() {
    wal.sync_data()?;
  }
  if !d.synced_once {
    std::fs::File::open(d.db.path())?.sync_all()?;
    if let Some(dir) = d.db.path().parent() {
      std::fs::File::open(dir)?.sync_all()?;
    }
    d.synced_once = true;
  }
  Ok(())
}

/// Indented `--` comment lines do not count as statements (D1's local
/// service drops `^\s+--.*`; a comment at the very start of a line stays
/// and SQLite finds no statement in it).
fn strip_comments(sql: &str) -> String {
  sql
    .lines()
    .filter(|l| !(l.starts_with(char::is_whitespace) && l.trim_start().starts_with("--")))
    .collect::<Vec<_>>()
    .join("\n")
}

fn one(d: &mut Database, q: &Query) -> Result<Value, String> {
  let params = q.params.iter().map(to_sql).collect::<Result<Vec<_>, _>>()?;
  let start = Instant::now();
  let size_before = d.db.database_size().map_err(|e| e.0)?;
  let (changes_before, rowid_before) = d.db.change_counts();
  let r = d.db.sql_exec(&q.sql, &params).map_err(|e| e.0)?;
  let (changes_after, rowid_after) = d.db.change_counts();
  let size_after = d.db.database_size().map_err(|e| e.0)?;
  let changes = changes_after - changes_before;
  let changed = changes != 0 || rowid_after != rowid_before || size_after != size_before;
  Ok(json!({
    "columns": r.columns,
    "rows": r.rows.iter().map(|row| row.iter().map(to_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
    "meta": {
      "served_by": "cellhost.db",
      "duration": start.elapsed().as_secs_f64() * 1000.0,
      "changes": changes,
      "last_row_id": rowid_after,
      "changed_db": changed,
      "size_after": size_after,
      "rows_read": r.totals()[0],
      "rows_written": r.totals()[1],
    },
  }))
}

/// `cellhost d1 migrations apply`: runs each migration (name, SQL) not yet
/// recorded in `table`, each in one transaction with its record, in order;
/// returns the names applied. Stops at the first that fails, naming it.
pub fn apply_migrations(
  data_dir: &Path,
  id: &str,
  table: &str,
  migrations: &[(String, String)],
) -> Result<Vec<String>, String> {
  let store = D1Store::for_dir(data_dir);
  let d = store.database(id)?;
  let mut d = d.lock().unwrap_or_else(|p| p.into_inner());
  let quoted = format!("\"{}\"", table.replace('"', "\"\""));
  let create = Query {
    sql: format!(
      "CREATE TABLE IF NOT EXISTS {quoted} (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    ),
    params: vec![],
  };
  run(&mut d, &[create])?;
  let applied = run(
    &mut d,
    &[Query {
      sql: format!("SELECT name FROM {quoted}"),
      params: vec![],
    }],
  )?;
  let done: Vec<String> = applied["results"][0]["rows"]
    .as_array()
    .into_iter()
    .flatten()
    .filter_map(|r| r[0].as_str().map(String::from))
    .collect();
  let mut out = Vec::new();
  for (name, sql) in migrations {
    if done.contains(name) {
      continue;
    }
    run(
      &mut d,
      &[
        Query {
          sql: sql.clone(),
          params: vec![],
        },
        Query {
          sql: format!("INSERT INTO {quoted} (name) VALUES (?)"),
          params: vec![Value::from(name.as_str())],
        },
      ],
    )
    .map_err(|e| format!("migration {name} failed (nothing of it was applied): {e}"))?;
    out.push(name.clone());
  }
  Ok(out)
}

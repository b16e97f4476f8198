//! The storage API's ops on an open cell: KV (`get`/`put`/`list`/…),
//! `deleteAll`, SQL (`exec`, `databaseSize`) and the savepoints of
//! `transaction()`/`transactionSync()`. Each write joins the turn's commit
//! (`Cells::db_w`, `note_write`).

use cellhost_storage::{ListOptions, SqlValue};
use deno_core::convert::Uint8Array;
use deno_core::{OpState, op2, v8};
use deno_error::JsErrorBox;

use crate::cell::{cells, err};

#[op2]
pub fn op_kv_get(
  state: &mut OpState,
  #[smi] h: u32,
  #[string] key: &str,
) -> Result<Option<Uint8Array>, JsErrorBox> {
  Ok(
    cells(state)
      .db(h)?
      .kv_get(key)
      .map_err(err)?
      .map(Uint8Array::from),
  )
}

#[op2(fast)]
pub fn op_kv_put(
  state: &mut OpState,
  #[smi] h: u32,
  #[string] key: &str,
  #[buffer] value: &[u8],
) -> Result<(), JsErrorBox> {
  cells(state).db_w(h)?.kv_put(key, value).map_err(err)
}

#[op2]
pub fn op_kv_put_many(
  state: &mut OpState,
  #[smi] h: u32,
  #[scoped] entries: Vec<(String, Uint8Array)>,
) -> Result<(), JsErrorBox> {
  let entries: Vec<(String, Vec<u8>)> = entries
    .into_iter()
    .map(|(k, v)| (k, v.0.to_vec()))
    .collect();
  cells(state).db_w(h)?.kv_put_many(&entries).map_err(err)
}

#[op2(fast)]
pub fn op_kv_delete(
  state: &mut OpState,
  #[smi] h: u32,
  #[string] key: &str,
) -> Result<bool, JsErrorBox> {
  cells(state).db_w(h)?.kv_delete(key).map_err(err)
}

#[op2]
#[allow(clippy::too_many_arguments)]
pub fn op_kv_list(
  state: &mut OpState,
  #[smi] h: u32,
  #[string] start: Option<String>,
  #[string] start_after: Option<String>,
  #[string] end: Option<String>,
  #[string] prefix: Option<String>,
  reverse: bool,
  limit: Option<f64>,
) -> Result<Vec<(String, Uint8Array)>, JsErrorBox> {
  let opts = ListOptions::compile(
    start.as_deref(),
    start_after.as_deref(),
    end.as_deref(),
    prefix.as_deref(),
    reverse,
    limit.map(|l| l as u64),
  );
  let rows = cells(state).db(h)?.kv_list(&opts).map_err(err)?;
  Ok(
    rows
      .into_iter()
      .map(|(k, v)| (k, Uint8Array::from(v)))
      .collect(),
  )
}

#[op2(fast)]
pub fn op_kv_delete_all(state: &mut OpState, #[smi] h: u32) -> Result<(), JsErrorBox> {
  cells(state).db_w(h)?.delete_all().map_err(err)
}

#[op2(fast)]
pub fn op_sql_database_size(state: &mut OpState, #[smi] h: u32) -> Result<f64, JsErrorBox> {
  cells(state).db(h)?.database_size().map_err(err)
}

/// transactionSync()/transaction(): open a savepoint, returns its depth.
#[op2(fast)]
#[smi]
pub fn op_txn_savepoint(state: &mut OpState, #[smi] h: u32) -> Result<u32, JsErrorBox> {
  cells(state).db_w(h)?.savepoint().map_err(err)
}

#[op2(fast)]
pub fn op_txn_finish(
  state: &mut OpState,
  #[smi] h: u32,
  #[smi] depth: u32,
  commit: bool,
) -> Result<(), JsErrorBox> {
  let db = cells(state).db_w(h)?;
  if commit {
    db.release(depth)
  } else {
    db.rollback_to(depth)
  }
  .map_err(err)
}

/// sql.exec(): returns `[columns, rows, counts, end, cursor]` (`counts`
/// and `end` as `counts_to_v8` gives them); `cursor` (non-zero) names the
/// rest of a read's rows, for `op_sql_cursor_next`.
#[op2(reentrant)]
pub fn op_sql_exec<'a>(
  scope: &mut v8::PinScope<'a, '_>,
  state: &mut OpState,
  #[smi] h: u32,
  #[string] sql: &str,
  bindings: v8::Local<'a, v8::Array>,
) -> Result<v8::Local<'a, v8::Value>, JsErrorBox> {
  let mut args = Vec::with_capacity(bindings.length() as usize);
  for i in 0..bindings.length() {
    let v = bindings.get_index(scope, i).unwrap();
    args.push(if v.is_null_or_undefined() {
      SqlValue::Null
    } else if v.is_number() {
      SqlValue::Number(v.number_value(scope).unwrap_or(f64::NAN))
    } else if let Ok(view) = v8::Local::<v8::ArrayBufferView>::try_from(v) {
      let mut buf = vec![0u8; view.byte_length()];
      view.copy_contents(&mut buf);
      SqlValue::Blob(buf)
    } else if let Ok(ab) = v8::Local::<v8::ArrayBuffer>::try_from(v) {
      let len = ab.byte_length();
      let bytes = match ab.data() {
        // SAFETY: the backing store holds `len` bytes while `ab` is alive.
        Some(p) if len > 0 => {
          unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u8, len) }.to_vec()
        }
        _ => Vec::new(),
      };
      SqlValue::Blob(bytes)
    } else {
      SqlValue::Text(v.to_rust_string_lossy(scope))
    });
  }
  let result = cells(state).db(h)?.sql_exec_lazy(sql, &args);
  // A statement that opened the implicit transaction joins the commit.
  cells(state).note_write(h);
  let result = result.map_err(err)?;
  let columns: Vec<v8::Local<v8::Value>> = result
    .columns
    .iter()
    .map(|c| v8::String::new(scope, c).unwrap().into())
    .collect();
  let out = [
    v8::Array::new_with_elements(scope, &columns).into(),
    rows_to_v8(scope, &result.rows),
    counts_to_v8(scope, &result.counts),
    end_to_v8(scope, result.end),
    v8::Integer::new_from_unsigned(scope, result.cursor.unwrap_or(0)).into(),
  ];
  Ok(v8::Array::new_with_elements(scope, &out).into())
}

/// The next rows of a lazy cursor: `[rows, counts, end]`, `end` null while
/// rows are left.
#[op2]
pub fn op_sql_cursor_next<'a>(
  scope: &mut v8::PinScope<'a, '_>,
  state: &mut OpState,
  #[smi] h: u32,
  #[smi] id: u32,
) -> Result<v8::Local<'a, v8::Value>, JsErrorBox> {
  let b = cells(state)
    .db(h)?
    .cursor_next(id, cellhost_storage::CURSOR_BATCH)
    .map_err(err)?;
  let out = [
    rows_to_v8(scope, &b.rows),
    counts_to_v8(scope, &b.counts),
    end_to_v8(scope, b.end),
  ];
  Ok(v8::Array::new_with_elements(scope, &out).into())
}

/// A cursor JavaScript dropped before its end (its statement is finalized).
#[op2(fast)]
pub fn op_sql_cursor_close(state: &mut OpState, #[smi] h: u32, #[smi] id: u32) {
  if let Ok(db) = cells(state).db(h) {
    db.cursor_close(id);
  }
}

/// Rows read and written after each row's step, flat: `[read0, written0,
/// read1, written1, ...]`.
fn counts_to_v8<'a>(
  scope: &mut v8::PinScope<'a, '_>,
  counts: &[cellhost_storage::Counts],
) -> v8::Local<'a, v8::Value> {
  let flat: Vec<v8::Local<v8::Value>> = counts
    .iter()
    .flatten()
    .map(|&n| v8::Number::new(scope, n as f64).into())
    .collect();
  v8::Array::new_with_elements(scope, &flat).into()
}

/// A statement's final `[read, written]`, or null while it has rows left.
fn end_to_v8<'a>(
  scope: &mut v8::PinScope<'a, '_>,
  end: Option<cellhost_storage::Counts>,
) -> v8::Local<'a, v8::Value> {
  match end {
    Some(c) => counts_to_v8(scope, &[c]),
    None => v8::null(scope).into(),
  }
}

fn rows_to_v8<'a>(
  scope: &mut v8::PinScope<'a, '_>,
  rows: &[Vec<SqlValue>],
) -> v8::Local<'a, v8::Value> {
  let mut out = Vec::with_capacity(rows.len());
  for row in rows {
    let cells: Vec<v8::Local<v8::Value>> = row
      .iter()
      .map(|v| match v {
        SqlValue::Null => v8::null(scope).into(),
        SqlValue::Number(n) => v8::Number::new(scope, *n).into(),
        SqlValue::Text(s) => v8::String::new(scope, s).unwrap().into(),
        SqlValue::Blob(b) => {
          let store = v8::ArrayBuffer::new_backing_store_from_vec(b.clone()).make_shared();
          v8::ArrayBuffer::with_backing_store(scope, &store).into()
        }
      })
      .collect();
    out.push(v8::Array::new_with_elements(scope, &cells).into());
  }
  v8::Array::new_with_elements(scope, &out).into()
}

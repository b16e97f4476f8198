//! R2 bucket bindings (`r2_buckets`): each binding an R2 bucket kept in a
//! cellhost bucket — by default a directory under the data directory
//! (`<data>/r2/<bucket_name>`), or any bucket URL cellhost opens (`file://`,
//! `s3://`, `gs://`, `az://`), so a fleet can share one. The API's shape and
//! workerd's own checks live in `js/r2.js`; what R2 itself decides (and the
//! stored form) in `store.rs` and `object.rs`.

mod cond;
mod object;
mod store;
mod upload;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use deno_core::convert::Uint8Array;
use deno_core::{OpState, ToV8, op2};
use deno_error::JsErrorBox;
use serde::Deserialize;
use serde_json::{Map, Value};

pub use store::R2Bucket;
use store::{Failure, Got, ListOptions, PartRef, PutOptions};

deno_core::extension!(
  cellhost_r2,
  deps = [deno_web, deno_fetch],
  ops = [
    op_r2_head,
    op_r2_get,
    op_r2_put,
    op_r2_delete,
    op_r2_list,
    op_r2_upload_create,
    op_r2_upload_part,
    op_r2_upload_complete,
    op_r2_upload_abort,
  ],
  esm = [dir "js", "r2.js"],
);

/// The R2 bindings of a Worker, by binding name.
#[derive(Debug, Default)]
pub struct R2Buckets(pub HashMap<String, R2Bucket>);

fn bucket(state: &Rc<RefCell<OpState>>, binding: &str) -> Result<R2Bucket, JsErrorBox> {
  state
    .borrow()
    .try_borrow::<Arc<R2Buckets>>()
    .and_then(|b| b.0.get(binding).cloned())
    .ok_or_else(|| JsErrorBox::generic(format!("no R2 bucket is bound to {binding}")))
}

/// R2's error as the binding reports it after the action's name.
fn failure(f: Failure) -> JsErrorBox {
  JsErrorBox::generic(format!("{} ({})", f.message, f.code))
}

fn parse<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T, JsErrorBox> {
  serde_json::from_str(json).map_err(|e| JsErrorBox::type_error(e.to_string()))
}

fn json(v: &impl serde::Serialize) -> String {
  serde_json::to_string(v).expect("serializes")
}

#[op2]
#[string]
async fn op_r2_head(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
) -> Result<Option<String>, JsErrorBox> {
  let b = bucket(&state, &binding)?;
  Ok(b.head(&key).await.map_err(failure)?.map(|m| json(&m)))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct GetOptions {
  only_if: Option<cond::Conditional>,
  range: cond::RangeRequest,
}

/// What a get answers: `kind` 0 no object, 1 precondition failed (metadata
/// only), 2 the object with `body` (`offset`/`length` of it).
#[derive(ToV8)]
pub struct GetReply {
  kind: u32,
  meta: Option<String>,
  body: Option<Uint8Array>,
  offset: f64,
  length: f64,
}

#[op2]
async fn op_r2_get(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
  #[string] options: String,
) -> Result<GetReply, JsErrorBox> {
  let b = bucket(&state, &binding)?;
  let o: GetOptions = parse(&options)?;
  let got = b
    .get(&key, o.only_if.as_ref(), &o.range)
    .await
    .map_err(failure)?;
  Ok(match got {
    Got::Missing => GetReply {
      kind: 0,
      meta: None,
      body: None,
      offset: 0.0,
      length: 0.0,
    },
    Got::Precondition(meta) => GetReply {
      kind: 1,
      meta: Some(json(&meta)),
      body: None,
      offset: 0.0,
      length: 0.0,
    },
    Got::Body { meta, range, body } => GetReply {
      kind: 2,
      meta: Some(json(&meta)),
      body: Some(body.to_vec().into()),
      offset: range.0 as f64,
      length: range.1 as f64,
    },
  })
}

/// The stored object's metadata, or `None` when `onlyIf` did not hold.
#[op2]
#[string]
async fn op_r2_put(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
  #[buffer(copy)] body: Vec<u8>,
  #[string] options: String,
) -> Result<Option<String>, JsErrorBox> {
  let b = bucket(&state, &binding)?;
  let o: PutOptions = parse(&options)?;
  Ok(
    b.put(&key, body, o)
      .await
      .map_err(failure)?
      .map(|m| json(&m)),
  )
}

#[op2]
async fn op_r2_delete(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[serde] keys: Vec<String>,
) -> Result<(), JsErrorBox> {
  let b = bucket(&state, &binding)?;
  b.delete(&keys).await.map_err(failure)
}

#[op2]
#[string]
async fn op_r2_list(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] options: String,
) -> Result<String, JsErrorBox> {
  let b = bucket(&state, &binding)?;
  let o: ListOptions = parse(&options)?;
  Ok(json(&b.list(&o).await.map_err(failure)?))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct UploadOptions {
  http_metadata: Map<String, Value>,
  custom_metadata: Map<String, Value>,
}

#[op2]
async fn op_r2_upload_create(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
  #[string] id: String,
  #[string] options: String,
) -> Result<(), JsErrorBox> {
  let b = bucket(&state, &binding)?;
  let o: UploadOptions = parse(&options)?;
  b.create_upload(&key, &id, o.http_metadata, o.custom_metadata)
    .await
    .map_err(failure)
}

#[op2]
async fn op_r2_upload_part(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
  #[string] id: String,
  #[smi] part: u32,
  #[string] etag: String,
  #[buffer(copy)] body: Vec<u8>,
) -> Result<(), JsErrorBox> {
  let b = bucket(&state, &binding)?;
  b.upload_part(&key, &id, part, &etag, body)
    .await
    .map_err(failure)
}

#[op2]
#[string]
async fn op_r2_upload_complete(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
  #[string] id: String,
  #[string] version: String,
  #[serde] parts: Vec<PartRef>,
) -> Result<String, JsErrorBox> {
  let b = bucket(&state, &binding)?;
  let meta = b
    .complete_upload(&key, &id, version, &parts)
    .await
    .map_err(failure)?;
  Ok(json(&meta))
}

#[op2]
async fn op_r2_upload_abort(
  state: Rc<RefCell<OpState>>,
  #[string] binding: String,
  #[string] key: String,
  #[string] id: String,
) -> Result<(), JsErrorBox> {
  let b = bucket(&state, &binding)?;
  b.abort_upload(&key, &id).await.map_err(failure)
}

//! `env.ASSETS`: the Worker's Fetcher for its own assets. The request is
//! resolved by the same code the server runs before the Worker
//! (`Assets::respond`), so the binding and direct requests agree.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use deno_core::convert::{ByteString, Uint8Array};
use deno_core::{OpState, ToV8, op2};
use deno_error::JsErrorBox;

use crate::{Assets, Req};

deno_core::extension!(
  cellhost_assets,
  deps = [deno_web, deno_fetch],
  ops = [op_assets_fetch],
  esm = [dir "js", "assets.js"],
);

#[derive(ToV8)]
pub struct AssetReply {
  status: u32,
  headers: Vec<(String, String)>,
  body: Option<Uint8Array>,
}

#[op2]
pub async fn op_assets_fetch(
  state: Rc<RefCell<OpState>>,
  #[string] method: String,
  #[string] url: String,
  #[scoped] headers: Vec<(ByteString, ByteString)>,
) -> Result<AssetReply, JsErrorBox> {
  let assets = state
    .borrow()
    .try_borrow::<Arc<Assets>>()
    .cloned()
    .ok_or_else(|| JsErrorBox::type_error("this Worker has no assets"))?;
  let url =
    url::Url::parse(&url).map_err(|_| JsErrorBox::type_error(format!("Invalid URL: {url}")))?;
  let header = |name: &str| {
    headers
      .iter()
      .find(|(k, _)| k.eq_ignore_ascii_case(name.as_bytes()))
      .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
  };
  let reply = assets.respond(&Req {
    method: &method,
    url: &url,
    header: &header,
  });
  let body = match &reply.body {
    Some(b) => Some(
      b.read()
        .await
        .map_err(|e| JsErrorBox::generic(format!("reading asset {}: {e}", b.path.display())))?
        .to_vec()
        .into(),
    ),
    None => None,
  };
  Ok(AssetReply {
    status: reply.status as u32,
    headers: reply.headers,
    body,
  })
}

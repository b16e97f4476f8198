//! The node-log endpoints of the internal listener (`/peer/log/append`,
//! `/peer/log/seal`, `/peer/log/tail`, `/peer/log/prune`, all behind the
//! fleet secret), and the owner's side of them ([`LogClient`], the fleet's
//! `LogTransport`). The node log itself is `<data>/nodelog`
//! (`cellhost_nodelog`); its fsyncs run on the blocking pool.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cellhost_ext::{Body, BoxError};
use cellhost_fleet::{BoxFuture, Entry, LogTransport};
use cellhost_logic::ensemble::follower::{AppendAnswer, Batch, Tail, tail_format};
use cellhost_nodelog::NodeLog;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use crate::client::Client;
use crate::secret::Secret;

pub const LOG_PREFIX: &str = "/peer/log/";

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
  let body = http_body_util::Full::new(body.into())
    .map_err(|e| -> BoxError { match e {} })
    .boxed_unsync();
  Response::builder()
    .status(status)
    .body(body)
    .expect("a valid response")
}

#[derive(serde::Deserialize)]
struct Ask {
  node: String,
  session: String,
  tail_format: Option<serde_json::Value>,
  #[serde(default)]
  epoch: u32,
  #[serde(default)]
  through: u64,
  /// The follower's log identity the caller knows (`""`: not checked).
  #[serde(default)]
  log: String,
}

/// A call meant for this node's log as it was before its disk was lost is
/// refused: answering from the new, empty log would pass for a complete one.
fn identity(log: &NodeLog, expected: &str) -> Result<(), (StatusCode, Vec<u8>)> {
  if expected.is_empty() || expected == log.id() {
    return Ok(());
  }
  let msg = format!(
    "this node's log is {}, not {expected}: the disk that held that log is gone",
    log.id()
  );
  Err((StatusCode::CONFLICT, msg.into_bytes()))
}

/// Serves one node-log request.
pub(crate) async fn handle(
  log: Option<Arc<Mutex<NodeLog>>>,
  secret: &Secret,
  req: Request<Incoming>,
) -> Response<Body> {
  if !secret.admits(
    req
      .headers()
      .get(crate::SECRET_HEADER)
      .map(|v| v.as_bytes()),
  ) {
    return reply(
      StatusCode::FORBIDDEN,
      "node-log calls need the fleet secret",
    );
  }
  let Some(log) = log else {
    return reply(
      StatusCode::SERVICE_UNAVAILABLE,
      "this node's log is not open yet",
    );
  };
  let path = req.uri().path().to_string();
  let body = match req.into_body().collect().await {
    Ok(b) => b.to_bytes(),
    Err(e) => return reply(StatusCode::BAD_REQUEST, e.to_string()),
  };
  let op = path.strip_prefix(LOG_PREFIX).unwrap_or("").to_string();
  // Every operation may fsync: the blocking pool, one at a time.
  let r = tokio::task::spawn_blocking(move || run(&log, &op, &body)).await;
  match r {
    Ok(Ok((status, body))) => reply(status, body),
    Ok(Err(e)) => reply(StatusCode::INTERNAL_SERVER_ERROR, e),
    Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
  }
}

/// How many 2 ms waits an append that overtook its predecessor gets.
const GAP_WAIT_POLLS: u32 = 50;

fn run(log_mutex: &Mutex<NodeLog>, op: &str, body: &[u8]) -> Result<(StatusCode, Vec<u8>), String> {
  let mut log = log_mutex.lock().unwrap();
  if op == "append" {
    let (owner, session, expected, batch) = match cellhost_nodelog::decode_append(body) {
      Ok(a) => a,
      Err(e) => return Ok((StatusCode::BAD_REQUEST, e.into_bytes())),
    };
    if let Err(refusal) = identity(&log, &expected) {
      return Ok(refusal);
    }
    // The owner sends a follower several batches at once: one that overtook
    // its predecessor on the way waits for it a moment before it is refused.
    let mut waited = 0;
    let a = loop {
      let a = log
        .append(&owner, &session, batch.clone())
        .map_err(|e| format!("the node log: {e}"))?;
      if !matches!(a, AppendAnswer::Gap { .. }) || waited >= GAP_WAIT_POLLS {
        break a;
      }
      drop(log);
      std::thread::sleep(std::time::Duration::from_millis(2));
      waited += 1;
      log = log_mutex.lock().unwrap();
    };
    let json = match a {
      AppendAnswer::Stored { through } => serde_json::json!({ "stored": through }),
      AppendAnswer::Sealed => serde_json::json!({ "sealed": true }),
      AppendAnswer::Gap { through } => serde_json::json!({ "gap": through }),
    };
    return Ok((StatusCode::OK, json.to_string().into_bytes()));
  }
  let ask: Ask = match serde_json::from_slice(body) {
    Ok(a) => a,
    Err(e) => return Ok((StatusCode::BAD_REQUEST, e.to_string().into_bytes())),
  };
  if let Err(refusal) = identity(&log, &ask.log) {
    return Ok(refusal);
  }
  let io = |e: std::io::Error| format!("the node log: {e}");
  match op {
    "seal" => {
      log.seal(&ask.node, &ask.session).map_err(io)?;
      Ok((StatusCode::NO_CONTENT, Vec::new()))
    }
    "prune" => {
      log
        .prune(&ask.node, &ask.session, ask.epoch, ask.through)
        .map_err(io)?;
      Ok((StatusCode::NO_CONTENT, Vec::new()))
    }
    "tail" => {
      let field = ask.tail_format.as_ref().map(|v| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
      });
      let format = match tail_format(field.as_deref()) {
        Ok(f) => f,
        Err(e) => return Ok((StatusCode::BAD_REQUEST, e.into_bytes())),
      };
      match log.tail(&ask.node, &ask.session, format) {
        Ok(t) => Ok((StatusCode::OK, cellhost_nodelog::encode_tail(&t))),
        // An entries-only caller never gets an incomplete tail as a success.
        Err(e) => Ok((StatusCode::CONFLICT, e.into_bytes())),
      }
    }
    _ => Ok((
      StatusCode::NOT_FOUND,
      b"no such node-log operation".to_vec(),
    )),
  }
}

/// The owner's side: node-log requests to followers.
pub struct LogClient {
  pub(crate) client: Arc<Client>,
  pub(crate) secret: Secret,
  pub(crate) node: String,
}

impl LogClient {
  async fn call(
    client: Arc<Client>,
    secret: Secret,
    from: String,
    address: String,
    op: &str,
    body: Vec<u8>,
  ) -> Result<(StatusCode, Bytes), String> {
    let req = Request::post(format!("http://{address}{LOG_PREFIX}{op}"))
      .header(crate::SECRET_HEADER, secret.header_value())
      .header(crate::wire::FROM_HEADER, from)
      .body(
        http_body_util::Full::new(Bytes::from(body))
          .map_err(|e| -> BoxError { match e {} })
          .boxed_unsync(),
      )
      .map_err(|e| e.to_string())?;
    let resp = client.send(&address, req).await?;
    let status = resp.status();
    let bytes = resp
      .into_body()
      .collect()
      .await
      .map_err(|e| e.to_string())?
      .to_bytes();
    Ok((status, bytes))
  }

  fn ask(
    &self,
    address: &str,
    op: &'static str,
    body: Vec<u8>,
  ) -> BoxFuture<Result<(StatusCode, Bytes), String>> {
    let (c, s, from, a) = (
      self.client.clone(),
      self.secret.clone(),
      self.node.clone(),
      address.to_string(),
    );
    Box::pin(async move { LogClient::call(c, s, from, a, op, body).await })
  }
}

fn failed(status: StatusCode, body: &[u8]) -> String {
  format!("{status}: {}", String::from_utf8_lossy(body).trim())
}

impl LogTransport for LogClient {
  fn append(
    &self,
    address: &str,
    log: &str,
    owner: &str,
    session: &str,
    batch: Batch<Entry>,
  ) -> BoxFuture<Result<AppendAnswer, String>> {
    let f = self.ask(
      address,
      "append",
      cellhost_nodelog::encode_append(owner, session, log, &batch),
    );
    Box::pin(async move {
      let (status, body) = f.await?;
      if status != StatusCode::OK {
        return Err(failed(status, &body));
      }
      let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
      if let Some(t) = v["stored"].as_u64() {
        Ok(AppendAnswer::Stored { through: t })
      } else if v["sealed"].as_bool() == Some(true) {
        Ok(AppendAnswer::Sealed)
      } else if let Some(t) = v["gap"].as_u64() {
        Ok(AppendAnswer::Gap { through: t })
      } else {
        Err(format!("an unknown append answer {v}"))
      }
    })
  }

  fn seal_tail(
    &self,
    address: &str,
    log: &str,
    owner: &str,
    session: &str,
  ) -> BoxFuture<Result<Option<Tail<Entry>>, String>> {
    let ask =
      serde_json::json!({ "node": owner, "session": session, "tail_format": "2", "log": log })
        .to_string();
    let seal = self.ask(address, "seal", ask.clone().into_bytes());
    let tail = self.ask(address, "tail", ask.into_bytes());
    Box::pin(async move {
      let (status, body) = seal.await?;
      if status == StatusCode::CONFLICT {
        // Another log than the one named: the disk that held it is gone.
        return Ok(None);
      }
      if status != StatusCode::NO_CONTENT {
        return Err(failed(status, &body));
      }
      let (status, body) = tail.await?;
      if status != StatusCode::OK {
        return Err(failed(status, &body));
      }
      cellhost_nodelog::decode_tail(&body).map(Some)
    })
  }

  fn prune(
    &self,
    address: &str,
    log: &str,
    owner: &str,
    session: &str,
    epoch: u32,
    through: u64,
  ) -> BoxFuture<Result<(), String>> {
    let ask = serde_json::json!({
      "node": owner, "session": session, "epoch": epoch, "through": through, "log": log
    });
    let f = self.ask(address, "prune", ask.to_string().into_bytes());
    Box::pin(async move {
      let (status, body) = f.await?;
      if status != StatusCode::NO_CONTENT {
        return Err(failed(status, &body));
      }
      Ok(())
    })
  }
}

//! The bucket's JSON records (`own.json`, `nodes/<node>.json`, `log/<node>/<session>.json`,
//! wake entries, `waker.json`):
//! bytes another writer may have put there, so parsing never panics and refuses what is not
//! a record with an error. Only `serde_json` and the logic core's types: the `records`
//! cargo-fuzz target (`fuzz/`) compiles this file on its own, without the bucket client.

use cellhost_logic::StoreError;
use cellhost_logic::ensemble::record::{LogEpoch, LogRecord, LogState};
use cellhost_logic::lease::NodeLease;
use cellhost_logic::own::OwnRecord;
use cellhost_logic::wake::{Hint, WakerRecord};

pub fn store_err(e: impl std::fmt::Display) -> StoreError {
  StoreError(e.to_string())
}

pub fn own_json(r: &OwnRecord) -> String {
  r.to_json()
}

pub fn parse_own(b: &[u8]) -> Result<OwnRecord, StoreError> {
  let v: serde_json::Value = serde_json::from_slice(b).map_err(store_err)?;
  Ok(OwnRecord {
    node: v["node"]
      .as_str()
      .ok_or_else(|| store_err("own.json: no node"))?
      .to_string(),
    epoch: v["epoch"]
      .as_u64()
      .ok_or_else(|| store_err("own.json: no epoch"))?,
    // Records of nodes without node-log sessions have none.
    session: v["session"].as_str().unwrap_or_default().to_string(),
  })
}

pub fn lease_json(l: &NodeLease) -> String {
  serde_json::json!({
    "node": l.node,
    "expires_ms": l.expires_ms,
    "address": l.address,
    "load": l.load,
    "log": l.log,
  })
  .to_string()
}

pub fn parse_lease(b: &[u8]) -> Result<NodeLease, StoreError> {
  let v: serde_json::Value = serde_json::from_slice(b).map_err(store_err)?;
  Ok(NodeLease {
    node: v["node"].as_str().unwrap_or_default().to_string(),
    expires_ms: v["expires_ms"]
      .as_u64()
      .ok_or_else(|| store_err("lease: no expires_ms"))?,
    address: v["address"].as_str().unwrap_or_default().to_string(),
    // A load beyond u32 is as loaded as a node can say, not `as u32`'s wrap to 0
    // ("never push cells here").
    load: v["load"]
      .as_u64()
      .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
    log: v["log"].as_str().unwrap_or_default().to_string(),
  })
}

pub fn hint_json(h: &Hint) -> String {
  serde_json::json!({ "at_ms": h.at_ms, "name": h.name }).to_string()
}

pub fn parse_hint(b: &[u8]) -> Result<Hint, StoreError> {
  let v: serde_json::Value = serde_json::from_slice(b).map_err(store_err)?;
  Ok(Hint {
    at_ms: v["at_ms"]
      .as_u64()
      .ok_or_else(|| store_err("wake entry: no at_ms"))?,
    name: v["name"].as_str().map(str::to_string),
  })
}

pub fn waker_json(r: &WakerRecord) -> String {
  serde_json::json!({ "node": r.node, "expires_ms": r.expires_ms }).to_string()
}

pub fn parse_waker(b: &[u8]) -> Result<WakerRecord, StoreError> {
  let v: serde_json::Value = serde_json::from_slice(b).map_err(store_err)?;
  Ok(WakerRecord {
    node: v["node"].as_str().unwrap_or_default().to_string(),
    expires_ms: v["expires_ms"]
      .as_u64()
      .ok_or_else(|| store_err("waker.json: no expires_ms"))?,
  })
}

pub fn log_json(r: &LogRecord) -> String {
  let (state, by) = match &r.state {
    LogState::Open => ("open", None),
    LogState::Recovering { by } => ("recovering", Some(by.as_str())),
    LogState::Sealed => ("sealed", None),
  };
  let epochs: Vec<serde_json::Value> = (r.epochs.iter())
    .map(|e| serde_json::json!({ "n": e.n, "members": e.members, "drained": e.drained, "active": e.active }))
    .collect();
  serde_json::json!({
    "node": r.node,
    "session": r.session,
    "state": state,
    "by": by,
    "epochs": epochs,
  })
  .to_string()
}

pub fn parse_log(b: &[u8]) -> Result<LogRecord, StoreError> {
  let v: serde_json::Value = serde_json::from_slice(b).map_err(store_err)?;
  let text = |k: &str| {
    v[k]
      .as_str()
      .map(str::to_string)
      .ok_or_else(|| store_err(format!("node-log record: no {k}")))
  };
  let state = match v["state"].as_str() {
    Some("open") => LogState::Open,
    Some("recovering") => LogState::Recovering { by: text("by")? },
    Some("sealed") => LogState::Sealed,
    s => return Err(store_err(format!("node-log record: unknown state {s:?}"))),
  };
  let mut epochs = Vec::new();
  for e in v["epochs"]
    .as_array()
    .ok_or_else(|| store_err("node-log record: no epochs"))?
  {
    let n = e["n"].as_u64().and_then(|n| u32::try_from(n).ok());
    let members = e["members"].as_array().map(|m| {
      m.iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect::<Vec<_>>()
    });
    let (Some(n), Some(members)) = (n, members) else {
      return Err(store_err("node-log record: a malformed log epoch"));
    };
    epochs.push(LogEpoch {
      n,
      members,
      drained: e["drained"].as_bool().unwrap_or(false),
      // Written before the field existed: any epoch may have proven.
      active: e["active"].as_bool().unwrap_or(true),
    });
  }
  Ok(LogRecord {
    node: text("node")?,
    session: text("session")?,
    state,
    epochs,
  })
}

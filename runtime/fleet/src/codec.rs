//! The bucket's JSON records and versions as the logic core names them.

use cellhost_bucket::{Version, WriteOutcome};
use cellhost_logic::lease::NodeLease;
use cellhost_logic::own::OwnRecord;
use cellhost_logic::wake::{Hint, WakerRecord};
use cellhost_logic::{StoreError, Token, WriteAnswer};

/// A version as an opaque token (and back): the e-tag and the generation.
pub fn token(v: &Version) -> Token {
  Token(format!(
    "{}\n{}",
    v.e_tag.as_deref().unwrap_or(""),
    v.version.as_deref().unwrap_or("")
  ))
}

pub fn version(t: &Token) -> Version {
  let (e, v) = t.0.split_once('\n').unwrap_or((&t.0, ""));
  let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
  Version {
    e_tag: some(e),
    version: some(v),
  }
}

pub fn answer(w: WriteOutcome) -> Result<WriteAnswer, String> {
  match w {
    WriteOutcome::Applied(v) => Ok(WriteAnswer::Applied(token(&v))),
    WriteOutcome::Rejected => Ok(WriteAnswer::Rejected),
    WriteOutcome::Ambiguous(_) => Ok(WriteAnswer::Ambiguous),
    WriteOutcome::Failed(m) => Ok(WriteAnswer::Failed(StoreError(m))),
    // Without conditional writes nothing can be fenced: never go on.
    WriteOutcome::Unsupported(m) => Err(format!("the bucket cannot do conditional writes: {m}")),
  }
}

/// [`answer`], handing an ambiguous write's words to `note` (the machine
/// quotes them when it gives up).
pub fn answer_noting(w: WriteOutcome, note: impl FnOnce(&str)) -> Result<WriteAnswer, String> {
  if let WriteOutcome::Ambiguous(m) = &w {
    note(m);
  }
  answer(w)
}

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
  })
}

pub fn lease_json(l: &NodeLease) -> String {
  serde_json::json!({
    "node": l.node,
    "expires_ms": l.expires_ms,
    "address": l.address,
    "load": l.load,
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
    load: v["load"].as_u64().unwrap_or(0) as u32,
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

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn records_and_tokens_round_trip() {
    let v = Version {
      e_tag: Some("\"abc\"".into()),
      version: None,
    };
    assert_eq!(version(&token(&v)), v);
    let r = OwnRecord::owned("n1", 7);
    assert_eq!(parse_own(own_json(&r).as_bytes()).unwrap(), r);
    let l = NodeLease {
      node: "n1".into(),
      expires_ms: 5,
      address: "127.0.0.1:1".into(),
      load: 2,
    };
    assert_eq!(parse_lease(lease_json(&l).as_bytes()).unwrap(), l);
    for name in [None, Some("room \"1\"".to_string())] {
      let h = Hint { at_ms: 9, name };
      assert_eq!(parse_hint(hint_json(&h).as_bytes()).unwrap(), h);
    }
    let w = WakerRecord {
      node: "n1".into(),
      expires_ms: 7,
    };
    assert_eq!(parse_waker(waker_json(&w).as_bytes()).unwrap(), w);
  }
}

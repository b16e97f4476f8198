//! Versions and write outcomes as the logic core names them, and the bucket's JSON records
//! (`records.rs`, re-exported here).

use cellhost_bucket::{Version, WriteOutcome};
use cellhost_logic::{StoreError, Token, WriteAnswer};

pub use crate::records::*;

/// A version as an opaque token (and back): the e-tag and the generation as a JSON pair, so
/// every version makes the trip intact (an empty e-tag is not a missing one, and an e-tag may
/// hold any character).
pub fn token(v: &Version) -> Token {
  Token(serde_json::json!([v.e_tag, v.version]).to_string())
}

/// The version of a [`token`]. Tokens are only ever made by `token`; anything else reads as
/// no version, which a conditional write refuses.
pub fn version(t: &Token) -> Version {
  let (e_tag, version) = serde_json::from_str(&t.0).unwrap_or_default();
  Version { e_tag, version }
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

#[cfg(test)]
mod tests {
  use super::*;
  use cellhost_logic::lease::NodeLease;
  use cellhost_logic::own::OwnRecord;
  use cellhost_logic::wake::{Hint, WakerRecord};

  #[test]
  fn records_and_tokens_round_trip() {
    let v = Version {
      e_tag: Some("\"abc\"".into()),
      version: None,
    };
    assert_eq!(version(&token(&v)), v);
    for r in [
      OwnRecord::owned("n1", 7),
      OwnRecord::owned("n1", 7).in_session("s-1"),
    ] {
      assert_eq!(parse_own(own_json(&r).as_bytes()).unwrap(), r);
    }
    use cellhost_logic::ensemble::record::{LogRecord, LogState};
    let mut log = LogRecord::open("n1", "s-1").with_epoch(vec!["n2".into(), "n3".into()]);
    assert_eq!(parse_log(log_json(&log).as_bytes()).unwrap(), log);
    log.state = LogState::Recovering { by: "n2".into() };
    assert_eq!(parse_log(log_json(&log).as_bytes()).unwrap(), log);
    assert!(parse_log(br#"{"node":"n1","session":"s","state":"odd","epochs":[]}"#).is_err());
    let l = NodeLease {
      node: "n1".into(),
      expires_ms: 5,
      address: "127.0.0.1:1".into(),
      load: 2,
      log: "0a1b".into(),
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

  /// Found by the `version_token_round_trip` property: the old `"<e-tag>\n<version>"`
  /// token lost an empty e-tag (it came back as none) and split an e-tag holding a newline.
  #[test]
  fn every_version_survives_its_token() {
    for (e_tag, v) in [
      (Some(""), None),
      (None, Some("")),
      (Some("a\nb"), None),
      (Some("a"), Some("b\nc")),
      (None, None),
    ] {
      let v = Version {
        e_tag: e_tag.map(str::to_string),
        version: v.map(str::to_string),
      };
      assert_eq!(version(&token(&v)), v);
    }
    assert_eq!(version(&Token::new("not a token")), Version::default());
  }

  /// Found reviewing the parsers for the `records` fuzz target (no property catches it: the
  /// wrapped value round-trips): a load above u32 wrapped (`as u32`), so 2^32 read as 0,
  /// which means "never push cells here".
  #[test]
  fn a_load_beyond_u32_saturates() {
    let l = parse_lease(br#"{"expires_ms": 1, "load": 4294967296}"#).unwrap();
    assert_eq!(l.load, u32::MAX);
  }

  /// Property tests: CI runs the default case count, `PROPTEST_CASES=N` more
  /// (scripts/fuzz.sh); the `records` cargo-fuzz target checks the same with coverage.
  mod props {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// Any JSON value, shallow: records are flat, so depth 3 reaches every branch.
    fn json() -> impl Strategy<Value = Value> {
      let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![0u64, 1, u64::from(u32::MAX), 1 << 32, u64::MAX])
          .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
      ];
      leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
          prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
          prop::collection::btree_map(field(), inner, 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
      })
    }

    /// The records' own field names, mostly, so objects reach the typed branches.
    fn field() -> impl Strategy<Value = String> {
      prop_oneof![
        4 => prop::sample::select(vec!["node", "epoch", "expires_ms", "address", "load", "at_ms", "name"])
          .prop_map(str::to_string),
        1 => ".{0,6}",
      ]
    }

    fn record_bytes() -> impl Strategy<Value = Vec<u8>> {
      prop_oneof![
        json().prop_map(|v| v.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..64),
      ]
    }

    /// Any string: control characters, quotes, backslashes and non-ASCII included.
    fn text() -> impl Strategy<Value = String> {
      prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\"\\\\a\u{7f}\u{2028}é😀]{0,8}"
      ]
    }

    proptest! {
      /// Whatever the bucket holds, parsing answers; what parses re-serializes to itself.
      #[test]
      fn parsing_never_panics_and_is_idempotent(b in record_bytes()) {
        if let Ok(r) = parse_own(&b) {
          prop_assert_eq!(parse_own(own_json(&r).as_bytes()).unwrap(), r);
        }
        if let Ok(l) = parse_lease(&b) {
          prop_assert_eq!(parse_lease(lease_json(&l).as_bytes()).unwrap(), l);
        }
        if let Ok(h) = parse_hint(&b) {
          prop_assert_eq!(parse_hint(hint_json(&h).as_bytes()).unwrap(), h);
        }
        if let Ok(w) = parse_waker(&b) {
          prop_assert_eq!(parse_waker(waker_json(&w).as_bytes()).unwrap(), w);
        }
      }

      #[test]
      fn records_round_trip(
        node in text(), address in text(), name in prop::option::of(text()),
        a in any::<u64>(), b in any::<u64>(), load in any::<u32>(),
      ) {
        let own = OwnRecord::owned(node.clone(), a);
        // The hand-written `to_json` is the JSON serde_json would write.
        let as_value: Value = serde_json::from_str(&own_json(&own)).unwrap();
        prop_assert_eq!(as_value, serde_json::json!({ "node": node, "epoch": a }));
        prop_assert_eq!(parse_own(own_json(&own).as_bytes()).unwrap(), own);
        let lease = NodeLease { node: node.clone(), expires_ms: a, address, load, log: format!("{b:x}") };
        prop_assert_eq!(parse_lease(lease_json(&lease).as_bytes()).unwrap(), lease);
        let hint = Hint { at_ms: b, name };
        prop_assert_eq!(parse_hint(hint_json(&hint).as_bytes()).unwrap(), hint);
        let waker = WakerRecord { node, expires_ms: b };
        prop_assert_eq!(parse_waker(waker_json(&waker).as_bytes()).unwrap(), waker);
      }

      #[test]
      fn version_token_round_trip(e_tag in prop::option::of(text()), v in prop::option::of(text())) {
        let v = Version { e_tag, version: v };
        prop_assert_eq!(version(&token(&v)), v);
      }
    }
  }
}

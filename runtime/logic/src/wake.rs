//! The fleet's wake index and the waker role.
//!
//! A cell's alarm lives in the cell; on a bucket the owner also publishes a
//! hint, `wake/entries/<scope>.json`, no later than the stored alarm, before
//! the commit that stores it. Every node reads the hints at start and every
//! poll interval, and wakes the due ones of cells recorded for it (a node
//! restarted without its data directory has no other way to learn of
//! them). One node at a time, the one holding the advisory role record
//! `wake/waker.json`, also wakes a cell whose hint is due and that no live
//! node holds: a released cell, or one whose owner's lease expired. Waking
//! takes the cell, and the stored alarm decides whether anything runs: a
//! hint never runs a handler on its own.

use crate::Token;
use crate::lease::NodeLease;
use crate::own::{OwnRecord, owner_lease_expired};

pub const WAKER_KEY: &str = "wake/waker.json";
pub const ENTRIES_PREFIX: &str = "wake/entries/";

/// The hint of the cell `scope` (`Class:id`).
pub fn entry_key(scope: &str) -> String {
  format!("{ENTRIES_PREFIX}{scope}.json")
}

/// The scope a hint's key names, if it is one.
pub fn entry_scope(key: &str) -> Option<&str> {
  key.strip_prefix(ENTRIES_PREFIX)?.strip_suffix(".json")
}

/// The content of a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hint {
  pub at_ms: u64,
  /// The object's `idFromName` name, if it has one (`ctx.id.name` when
  /// the alarm wakes it).
  pub name: Option<String>,
}

/// The content of `wake/waker.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WakerRecord {
  pub node: String,
  pub expires_ms: u64,
}

/// What a node does with the waker role before a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleStep {
  /// Nobody ever held it: create the record (if absent).
  Create(WakerRecord),
  /// Ours, or expired: replace it over this version.
  Cas(WakerRecord, Token),
  /// Another node holds it: no pass this time.
  Leave { holder: String },
}

/// The role step for `me` at `now_ms`, holding it `hold_ms` when taken.
/// A holder that stops renewing loses the role once its record expires.
pub fn role_step(
  current: Option<(&WakerRecord, &Token)>,
  me: &str,
  now_ms: u64,
  hold_ms: u64,
) -> RoleStep {
  let record = WakerRecord {
    node: me.to_string(),
    expires_ms: now_ms + hold_ms,
  };
  match current {
    None => RoleStep::Create(record),
    Some((r, token)) if r.node == me || r.expires_ms <= now_ms => {
      RoleStep::Cas(record, token.clone())
    }
    Some((r, _)) => RoleStep::Leave {
      holder: r.node.clone(),
    },
  }
}

/// Whether node `me` wakes the cell of a hint due at `hint_ms`. Every
/// node reads the hints; the waker (`is_waker`) also wakes other nodes'.
///
/// * not due yet: no;
/// * recorded for `me`: yes. Held by this process, the wake only has the
///   stored alarm checked (a hint the alarm no longer needs is dropped);
///   not held (an earlier run of this node, whose schedule may be gone with
///   its data directory), it takes the cell back;
/// * no record, or released: only the waker;
/// * another node: only the waker, and only once that node's lease has
///   expired, judged as a takeover is ([`owner_lease_expired`]: `now_ms`
///   read before the lease was).
pub fn should_wake(
  hint_ms: u64,
  now_ms: u64,
  own: Option<&OwnRecord>,
  me: &str,
  is_waker: bool,
  lease: Option<&NodeLease>,
) -> bool {
  if hint_ms > now_ms {
    return false;
  }
  match own {
    Some(r) if r.node == me => true,
    None => is_waker,
    Some(r) if r.node.is_empty() => is_waker,
    Some(_) => is_waker && owner_lease_expired(lease, now_ms),
  }
}

/// Whether the decision needs the owner's lease (another node's cell, seen
/// by the waker).
pub fn needs_lease(own: Option<&OwnRecord>, me: &str, is_waker: bool) -> Option<String> {
  match own {
    Some(r) if is_waker && !r.node.is_empty() && r.node != me => Some(r.node.clone()),
    _ => None,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn entry_keys_round_trip() {
    let k = entry_key("Counter:ab12");
    assert_eq!(k, "wake/entries/Counter:ab12.json");
    assert_eq!(entry_scope(&k), Some("Counter:ab12"));
    assert_eq!(entry_scope("wake/waker.json"), None);
    assert_eq!(entry_scope("wake/entries/x.txt"), None);
  }

  #[test]
  fn the_role_is_taken_renewed_and_left() {
    let t = Token::new("v1");
    let mine = WakerRecord {
      node: "a".into(),
      expires_ms: 500,
    };
    let want = WakerRecord {
      node: "a".into(),
      expires_ms: 1_100,
    };
    assert_eq!(
      role_step(None, "a", 100, 1_000),
      RoleStep::Create(want.clone())
    );
    // Renewed while ours, even late.
    assert_eq!(
      role_step(Some((&mine, &t)), "a", 100, 1_000),
      RoleStep::Cas(want, t.clone())
    );
    // Another node's live role is left alone until it expires.
    assert_eq!(
      role_step(Some((&mine, &t)), "b", 499, 1_000),
      RoleStep::Leave { holder: "a".into() }
    );
    assert_eq!(
      role_step(Some((&mine, &t)), "b", 500, 1_000),
      RoleStep::Cas(
        WakerRecord {
          node: "b".into(),
          expires_ms: 1_500
        },
        t
      )
    );
  }

  #[test]
  fn a_cell_is_woken_when_due_by_its_node_or_by_the_waker() {
    let other = OwnRecord::owned("b", 3);
    let live = NodeLease::for_test("b", 2_000);
    let dead = NodeLease::for_test("b", 1_000);
    let released = OwnRecord::owned("", 3);
    let mine = OwnRecord::owned("a", 2);
    // Not due.
    assert!(!should_wake(1_001, 1_000, Some(&mine), "a", true, None));
    // Due, nobody holds it: the waker only.
    assert!(should_wake(1_000, 1_000, None, "a", true, None));
    assert!(!should_wake(1_000, 1_000, None, "a", false, None));
    assert!(should_wake(900, 1_000, Some(&released), "a", true, None));
    assert!(!should_wake(900, 1_000, Some(&released), "a", false, None));
    // Another node's: the waker, once that node's lease expired or is gone.
    assert!(!should_wake(
      900,
      1_000,
      Some(&other),
      "a",
      true,
      Some(&live)
    ));
    assert!(should_wake(
      900,
      1_000,
      Some(&other),
      "a",
      true,
      Some(&dead)
    ));
    assert!(should_wake(900, 1_000, Some(&other), "a", true, None));
    assert!(!should_wake(900, 1_000, Some(&other), "a", false, None));
    // Recorded for this node: always, waker or not.
    assert!(should_wake(900, 1_000, Some(&mine), "a", false, None));
    assert_eq!(needs_lease(Some(&other), "a", true), Some("b".into()));
    assert_eq!(needs_lease(Some(&other), "a", false), None);
    assert_eq!(needs_lease(Some(&mine), "a", true), None);
    assert_eq!(needs_lease(Some(&released), "a", true), None);
  }
}

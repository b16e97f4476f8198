//! Where a call for a cell goes: here, or forwarded to the node that owns
//! it. The answer is a hint, not a lock: the owner's activation decides
//! (a forwarded call for a cell its receiver no longer owns is refused
//! there, retryably, before any user code runs), so a stale route costs a
//! refusal, never a second writer.

use super::{OwnRecord, owner_lease_expired};
use crate::lease::NodeLease;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
  /// Serve it here: this node holds it, nobody does, or its owner's lease
  /// has lapsed (the activation here takes it over).
  Here,
  /// Forward to `node` at `address`; trust this route until `until_ms`.
  There {
    node: String,
    address: String,
    until_ms: u64,
  },
}

/// The node whose lease decides where a cell with record `own` is served:
/// `None` when it is served here whatever a lease says (no record, a
/// released one, or this node's own), so no lease needs reading.
pub fn owner_to_check<'a>(self_node: &str, own: Option<&'a OwnRecord>) -> Option<&'a str> {
  own
    .map(|o| o.node.as_str())
    .filter(|n| !n.is_empty() && *n != self_node)
}

/// The route for a cell whose record is `own`, with its owner's lease
/// `lease` (read after `own`; `None`: no lease record), judged at
/// `judged_at_ms` (the clock before the reads). A route is trusted only
/// until the owner stops acknowledging (its deadline less `margin_ms`):
/// past it the owner may be gone and the record must be read again.
pub fn route(
  self_node: &str,
  own: Option<&OwnRecord>,
  lease: Option<&NodeLease>,
  judged_at_ms: u64,
  margin_ms: u64,
) -> Route {
  let Some(owner) = owner_to_check(self_node, own) else {
    return Route::Here;
  };
  // A lease of another node than the record names cannot vouch for it.
  let lease = lease.filter(|l| l.node == owner);
  if owner_lease_expired(lease, judged_at_ms) {
    return Route::Here;
  }
  let lease = lease.expect("a live lease");
  let until_ms = lease.expires_ms.saturating_sub(margin_ms);
  if until_ms <= judged_at_ms || lease.address.is_empty() {
    // Inside the owner's margin (it no longer acknowledges), or it cannot
    // be reached: the call here is refused by the activation, retryably,
    // until the lease lapses.
    return Route::Here;
  }
  Route::There {
    node: owner.to_string(),
    address: lease.address.clone(),
    until_ms,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn lease(node: &str, expires_ms: u64, address: &str) -> NodeLease {
    NodeLease {
      address: address.into(),
      ..NodeLease::for_test(node, expires_ms)
    }
  }

  #[test]
  fn a_cell_nobody_holds_or_this_node_holds_is_served_here() {
    assert_eq!(route("a", None, None, 100, 10), Route::Here);
    let released = OwnRecord::owned("", 3);
    assert_eq!(route("a", Some(&released), None, 100, 10), Route::Here);
    let mine = OwnRecord::owned("a", 3);
    let l = lease("a", 1000, "x:1");
    assert_eq!(route("a", Some(&mine), Some(&l), 100, 10), Route::Here);
  }

  #[test]
  fn a_live_owner_gets_the_call_until_its_deadline_less_the_margin() {
    let own = OwnRecord::owned("b", 3);
    let l = lease("b", 1000, "10.0.0.2:9000");
    assert_eq!(
      route("a", Some(&own), Some(&l), 100, 200),
      Route::There {
        node: "b".into(),
        address: "10.0.0.2:9000".into(),
        until_ms: 800
      }
    );
  }

  #[test]
  fn a_lapsed_missing_or_foreign_lease_means_take_it_here() {
    let own = OwnRecord::owned("b", 3);
    assert_eq!(route("a", Some(&own), None, 100, 10), Route::Here);
    let lapsed = lease("b", 100, "x:1");
    assert_eq!(route("a", Some(&own), Some(&lapsed), 100, 10), Route::Here);
    let other = lease("c", 1000, "x:1");
    assert_eq!(route("a", Some(&own), Some(&other), 100, 10), Route::Here);
  }

  #[test]
  fn an_owner_inside_its_margin_or_without_address_is_not_forwarded_to() {
    let own = OwnRecord::owned("b", 3);
    let closing = lease("b", 150, "x:1");
    assert_eq!(route("a", Some(&own), Some(&closing), 100, 60), Route::Here);
    let mute = lease("b", 1000, "");
    assert_eq!(route("a", Some(&own), Some(&mute), 100, 10), Route::Here);
  }
}

//! Routes to the owners of cells held elsewhere: read from the bucket
//! (ownership record, then the owner's lease) and cached only until the
//! owner's acknowledgement deadline, as `cellhost_logic::own::route` rules.

use std::collections::HashMap;
use std::sync::Mutex;

use cellhost_bucket::Bucket;
pub use cellhost_logic::own::Route;

use crate::now_ms;

#[derive(Default)]
pub(crate) struct Routes {
  cached: Mutex<HashMap<String, Route>>,
}

impl Routes {
  /// A cached route still to be trusted at `now`.
  pub(crate) fn cached(&self, scope: &str, now: u64) -> Option<Route> {
    let mut map = self.cached.lock().unwrap();
    match map.get(scope) {
      Some(r @ Route::There { until_ms, .. }) if *until_ms > now => Some(r.clone()),
      Some(_) => {
        map.remove(scope);
        None
      }
      None => None,
    }
  }

  pub(crate) fn remember(&self, scope: &str, route: &Route) {
    if let Route::There { .. } = route {
      let mut map = self.cached.lock().unwrap();
      // Bounded: a flood of distinct ids must not grow it without end.
      if map.len() >= 65_536 {
        let now = now_ms();
        map.retain(|_, r| matches!(r, Route::There { until_ms, .. } if *until_ms > now));
        if map.len() >= 65_536 {
          map.clear();
        }
      }
      map.insert(scope.to_string(), route.clone());
    }
  }

  pub(crate) fn forget(&self, scope: &str) {
    self.cached.lock().unwrap().remove(scope);
  }
}

/// Reads the route of `scope` from the bucket. A store error routes here:
/// the activation then meets the same store and says what failed.
pub(crate) async fn probe(bucket: &Bucket, node: &str, scope: &str, margin_ms: u64) -> Route {
  let started = now_ms();
  let Ok(own) = crate::own::read_own(bucket, scope).await else {
    return Route::Here;
  };
  let own = own.map(|(o, _)| o);
  let Some(owner) = cellhost_logic::own::owner_to_check(node, own.as_ref()) else {
    return Route::Here;
  };
  let Ok(lease) = crate::own::read_lease(bucket, owner).await else {
    return Route::Here;
  };
  let lease = lease.map(|(l, _)| l);
  cellhost_logic::own::route(node, own.as_ref(), lease.as_ref(), started, margin_ms)
}

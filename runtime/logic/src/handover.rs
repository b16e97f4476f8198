//! A node switching versions in process (`cellhost node`): where a call for
//! a Durable Object goes while the old version's isolates hand their objects
//! over to the new version's, one by one at each object's idle point.
//!
//! The rules, which [`crate::sim::handover`] checks (one live instance per
//! object at a time; the calls of one sender to one object run in the order
//! sent; none lost or run twice):
//! - A call for object K goes to the retiring pool while K lives there, and
//!   while K's isolate there has not yet processed its `Retire` marker (it
//!   may hold K without anyone knowing yet); otherwise to the current pool.
//! - An isolate processing `Retire` makes its live objects resident (they
//!   stay) and sorts everything queued behind the marker at once, under the
//!   routing lock, so no call sent later to the current pool overtakes one
//!   it still holds.
//! - A retiring isolate runs calls for its resident objects, holds calls
//!   for an object whose sockets are being packed, and passes every other
//!   call to the current pool.
//! - Handing K over sends, in this order, the socket parcel, the calls held
//!   while packing and the calls for K still queued on the isolate; only
//!   then does K stop being resident.
//!
//! The I/O shell (`cellhost_ext::generation`) keeps one [`Routing`] under a
//! lock and one [`Slot`] per isolate.

use std::collections::{HashMap, HashSet};

/// Which pool serves each object, for one process.
#[derive(Debug)]
pub struct Routing<P> {
  current: P,
  retiring: Option<Retiring<P>>,
}

#[derive(Debug)]
struct Retiring<P> {
  pool: P,
  /// Isolates of the retiring pool that have not processed `Retire`.
  undecided: HashSet<usize>,
  /// Objects still living in the retiring pool.
  resident: HashSet<String>,
}

/// A switch refused: an earlier one still hands objects over.
#[derive(Debug, PartialEq, Eq)]
pub struct StillRetiring {
  pub objects: usize,
}

impl<P: Clone + PartialEq> Routing<P> {
  pub fn new(first: P) -> Self {
    Routing {
      current: first,
      retiring: None,
    }
  }

  pub fn current(&self) -> &P {
    &self.current
  }

  /// The pool a call for `key` goes to; `slot` is the isolate the key is
  /// placed on in the retiring pool.
  pub fn route(&self, key: &str, slot: usize) -> &P {
    match &self.retiring {
      Some(r) if r.resident.contains(key) || r.undecided.contains(&slot) => &r.pool,
      _ => &self.current,
    }
  }

  /// Makes `next` current; the current pool (with `slots` isolates, each
  /// to be sent a `Retire` marker) retires.
  pub fn switch(&mut self, next: P, slots: usize) -> Result<P, StillRetiring> {
    if let Some(r) = &self.retiring {
      return Err(StillRetiring {
        objects: r.resident.len() + r.undecided.len(),
      });
    }
    let old = std::mem::replace(&mut self.current, next);
    self.retiring = Some(Retiring {
      pool: old.clone(),
      undecided: (0..slots).collect(),
      resident: HashSet::new(),
    });
    Ok(old)
  }

  /// Isolate `slot` of `pool` processed its `Retire`: its live objects
  /// stay resident until handed over.
  pub fn retire_processed(
    &mut self,
    pool: &P,
    slot: usize,
    live: impl IntoIterator<Item = String>,
  ) {
    if let Some(r) = &mut self.retiring
      && &r.pool == pool
      && r.undecided.remove(&slot)
    {
      r.resident.extend(live);
    }
  }

  /// Object `key` left the retiring pool (handed over, or gone with its
  /// isolate): calls for it go to the current pool from now on.
  pub fn left(&mut self, key: &str) {
    if let Some(r) = &mut self.retiring {
      r.resident.remove(key);
    }
  }

  /// What the retiring pool still holds: objects, plus one for each
  /// isolate that has not processed `Retire` (`None`: nothing retires).
  pub fn retiring_left(&self) -> Option<usize> {
    let r = self.retiring.as_ref()?;
    Some(r.resident.len() + r.undecided.len())
  }

  /// Ends the retirement (done, or out of time: the retiring isolates are
  /// stopped and pass on what they still queue).
  pub fn finish(&mut self) -> Option<P> {
    self.retiring.take().map(|r| r.pool)
  }
}

/// What an isolate does with a call it took from its queue.
#[derive(Debug, PartialEq, Eq)]
pub enum Sort {
  /// Run it here.
  Run,
  /// Keep it until the object is handed over (its sockets are packed).
  Hold,
  /// Send it to the pool the routing names now.
  Pass,
}

/// One isolate's objects, as routing needs them. `J` is a queued call.
#[derive(Debug)]
pub struct Slot<J> {
  /// `Retire` processed: no new object starts here.
  decided: bool,
  /// Objects with an instance or hibernated sockets here.
  cells: HashSet<String>,
  /// Objects being packed, with the calls held for them.
  moving: HashMap<String, Vec<J>>,
}

impl<J> Default for Slot<J> {
  fn default() -> Self {
    Slot {
      decided: false,
      cells: HashSet::new(),
      moving: HashMap::new(),
    }
  }
}

impl<J> Slot<J> {
  pub fn decided(&self) -> bool {
    self.decided
  }

  /// On a serving isolate every call runs, and its object lives here from
  /// now on: true. False on a retiring one (see `sort`).
  pub fn serving(&mut self, key: &str) -> bool {
    if self.decided {
      return false;
    }
    if !self.cells.contains(key) {
      self.cells.insert(key.to_string());
    }
    true
  }

  /// Sorts call `job` for object `key` (in queue order).
  pub fn sort(&mut self, key: &str, job: J) -> (Sort, Option<J>) {
    if self.serving(key) {
      return (Sort::Run, Some(job));
    }
    if let Some(held) = self.moving.get_mut(key) {
      held.push(job);
      return (Sort::Hold, None);
    }
    if self.cells.contains(key) {
      (Sort::Run, Some(job))
    } else {
      (Sort::Pass, Some(job))
    }
  }

  /// An instance of `key` is to be built here without a call from the
  /// queue (calls re-sent after a reset, say): on a serving isolate the
  /// object lives here from now on, as in `sort`; on a retiring one it may
  /// only while it was not handed over.
  pub fn may_build(&mut self, key: &str) -> bool {
    self.serving(key) || self.cells.contains(key)
  }

  /// Processes `Retire`: returns the objects that stay resident.
  pub fn retire(&mut self) -> Vec<String> {
    self.decided = true;
    self.cells.iter().cloned().collect()
  }

  /// The object's sockets are being packed: its calls are held.
  pub fn packing(&mut self, key: &str) {
    self.moving.entry(key.to_string()).or_default();
  }

  /// The object has neither an instance nor sockets here any more. On a
  /// retiring isolate it is handed over: returns the calls held for it,
  /// to be sent (after the parcel) before its calls still queued.
  pub fn gone(&mut self, key: &str) -> Option<Vec<J>> {
    self.cells.remove(key);
    let held = self.moving.remove(key);
    self.decided.then(|| held.unwrap_or_default())
  }

  /// The isolate stopped or was recycled: every object here is gone.
  pub fn clear(&mut self) -> Vec<String> {
    self.moving.clear();
    self.cells.drain().collect()
  }

  /// The pool stopped: whatever reaches it passes on.
  pub fn close(&mut self) {
    self.decided = true;
    self.cells.clear();
    self.moving.clear();
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn calls_follow_the_object_until_it_is_handed_over() {
    let mut r = Routing::new("old");
    let mut slot: Slot<u32> = Slot::default();
    assert_eq!(slot.sort("a", 1).0, Sort::Run);
    r.switch("new", 1).unwrap();
    // Before its isolate processed Retire, every call goes to the old pool.
    assert_eq!(*r.route("b", 0), "old");
    r.retire_processed(&"old", 0, slot.retire());
    assert_eq!(*r.route("a", 0), "old");
    assert_eq!(*r.route("b", 0), "new");
    assert_eq!(slot.sort("b", 2).0, Sort::Pass);
    slot.packing("a");
    assert_eq!(slot.sort("a", 3), (Sort::Hold, None));
    assert_eq!(slot.gone("a"), Some(vec![3]));
    r.left("a");
    assert_eq!(*r.route("a", 0), "new");
    assert_eq!(r.retiring_left(), Some(0));
    assert_eq!(r.switch("newer", 1), Err(StillRetiring { objects: 0 }));
    assert_eq!(r.finish(), Some("old"));
    assert!(r.switch("newer", 1).is_ok());
  }

  #[test]
  fn an_object_gone_from_a_serving_isolate_hands_nothing_over() {
    let mut slot: Slot<u32> = Slot::default();
    slot.sort("a", 1);
    assert_eq!(slot.gone("a"), None);
  }

  #[test]
  fn an_instance_rebuilt_after_a_reset_stays_with_its_isolate_across_a_retire() {
    // Reset on a serving isolate: forgotten, then rebuilt from calls the
    // isolate already held (not from its queue). Retire must keep it here,
    // or the new version would build a second instance beside it.
    let mut r = Routing::new("old");
    let mut slot: Slot<u32> = Slot::default();
    assert_eq!(slot.sort("a", 1).0, Sort::Run);
    assert_eq!(slot.gone("a"), None);
    assert!(slot.may_build("a"));
    r.switch("new", 1).unwrap();
    r.retire_processed(&"old", 0, slot.retire());
    assert_eq!(*r.route("a", 0), "old", "rebuilt here: it stays here");
    assert_eq!(slot.sort("a", 2).0, Sort::Run);
    // Handed over: nothing more of it is built here.
    assert_eq!(slot.gone("a"), Some(vec![]));
    r.left("a");
    assert!(!slot.may_build("a"));
    assert!(!slot.may_build("b"), "never here: it is the new version's");
    assert_eq!(*r.route("a", 0), "new");
  }
}

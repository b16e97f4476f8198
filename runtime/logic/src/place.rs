//! Where a Durable Object lives inside one process (`cellhost run`): on the
//! isolate whose call reached it first, so that a Worker and the objects it
//! calls share a thread and a request pays no hop between threads.
//!
//! One instance per object still holds by construction, as it did when the
//! id's hash chose the isolate: an object is placed on one isolate at a
//! time, every job for it goes there, and the placement is forgotten only
//! by that isolate, once nothing of the object is left there (no instance,
//! no sockets, no write that is not yet durable: the shell's part) and no
//! job sent to it is still in its queue (counted here). Only then may the
//! object's next call start it elsewhere.

use std::collections::HashMap;

/// The placements of one pool of isolates.
#[derive(Debug, Default)]
pub struct Placement {
  cells: HashMap<String, Placed>,
}

#[derive(Debug)]
struct Placed {
  isolate: usize,
  /// Jobs sent to `isolate` for the object and not yet taken from its queue.
  queued: u32,
}

impl Placement {
  /// A job for `key` is about to be queued: returns the isolate to queue it
  /// on (`first`, where nothing of the object is anywhere).
  pub fn send(&mut self, key: &str, first: usize) -> usize {
    let placed = match self.cells.get_mut(key) {
      Some(p) => p,
      None => self.cells.entry(key.to_string()).or_insert(Placed {
        isolate: first,
        queued: 0,
      }),
    };
    placed.queued += 1;
    placed.isolate
  }

  /// The object's isolate took a job for it from its queue.
  pub fn taken(&mut self, key: &str) {
    if let Some(p) = self.cells.get_mut(key) {
      p.queued = p.queued.saturating_sub(1);
    }
  }

  /// Isolate `at` holds nothing of `key` any more: the placement is
  /// forgotten unless a job for it is still queued there (that job starts
  /// the object there again). Returns whether it was forgotten.
  pub fn release(&mut self, key: &str, at: usize) -> bool {
    match self.cells.get(key) {
      Some(p) if p.isolate == at && p.queued == 0 => {
        self.cells.remove(key);
        true
      }
      Some(_) => false,
      None => true,
    }
  }

  /// Whether `key` is placed on isolate `at` with no job for it queued
  /// there: a call made on `at` may then be handed to the object in place,
  /// without the queue, and still arrive after every call sent before it.
  pub fn quiet_at(&self, key: &str, at: usize) -> bool {
    self
      .cells
      .get(key)
      .is_some_and(|p| p.isolate == at && p.queued == 0)
  }

  /// The isolate `key` is placed on, if it is placed.
  pub fn isolate_of(&self, key: &str) -> Option<usize> {
    self.cells.get(key).map(|p| p.isolate)
  }

  /// Objects placed.
  pub fn len(&self) -> usize {
    self.cells.len()
  }

  pub fn is_empty(&self) -> bool {
    self.cells.is_empty()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn an_object_stays_where_it_was_placed_until_its_isolate_releases_it() {
    let mut p = Placement::default();
    assert_eq!(p.send("a", 1), 1);
    // Another caller's job follows it to isolate 1.
    assert_eq!(p.send("a", 0), 1);
    // A release by another isolate, or with jobs queued, forgets nothing.
    assert!(!p.release("a", 0));
    assert!(!p.release("a", 1));
    p.taken("a");
    assert!(!p.release("a", 1));
    p.taken("a");
    assert!(p.release("a", 1));
    assert!(p.is_empty());
    // Next time the first caller places it again.
    assert_eq!(p.send("a", 0), 0);
  }
}

//! A seeded simulator of objects placed on the isolate of their first
//! caller ([`crate::place`]). Callers on random isolates send numbered
//! calls to a few objects; isolates (each a FIFO queue) take them in random
//! interleavings and build the object where it has no instance; objects are
//! busy for a while after each call, and isolates evict idle ones, which
//! then stay closing (writes not yet durable) for a while before the shell
//! releases them. An isolate takes a batch of calls from its queue into
//! its hand before it dispatches them one by one; a caller whose object is
//! live on its own isolate with nothing queued or in hand for it there
//! hands its call to the object in place, without the queue
//! ([`Placement::quiet_at`]).
//!
//! Checked: an object never has an instance on two isolates at once; the
//! calls of one caller to one object run in the order sent, each exactly
//! once. The shell's possible mistakes ([`PlaceFlaw`]) must be caught.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::rng::Rng;
use crate::place::Placement;

/// Mistakes the I/O shell around [`crate::place`] could make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceFlaw {
  /// Forgets the placement although calls for the object are still queued
  /// on its isolate.
  ReleaseWhileQueued,
  /// Releases the object when it is evicted, before its last writes are
  /// durable (the instance is still closing there).
  ReleaseWhileClosing,
  /// Forgets the placement although the isolate holds a call for the
  /// object that it took from its queue and has not dispatched yet.
  ReleaseWhileInHand,
  /// Calls in place whenever the object is live on the caller's isolate,
  /// although calls for it are still queued there.
  InPlaceWhileQueued,
  /// Calls in place although the isolate holds calls for the object that
  /// it took from its queue and has not dispatched yet.
  InPlacePastHand,
}

impl PlaceFlaw {
  pub const ALL: [PlaceFlaw; 5] = [
    PlaceFlaw::ReleaseWhileQueued,
    PlaceFlaw::ReleaseWhileClosing,
    PlaceFlaw::ReleaseWhileInHand,
    PlaceFlaw::InPlaceWhileQueued,
    PlaceFlaw::InPlacePastHand,
  ];
}

#[derive(Clone, Copy, Debug)]
struct Call {
  caller: usize,
  key: usize,
  seq: u64,
}

#[derive(Default)]
struct Isolate {
  queue: VecDeque<Call>,
  /// Taken from the queue, not dispatched yet.
  hand: VecDeque<Call>,
  /// Objects with an instance here: turns left busy.
  live: BTreeMap<usize, u32>,
  /// Evicted objects whose writes are not durable yet: turns left.
  closing: BTreeMap<usize, u32>,
}

/// What a run did, for the test's sanity checks.
#[derive(Debug, Default)]
pub struct PlaceStats {
  pub calls: u64,
  pub builds: u64,
  pub releases: u64,
  /// Calls handed to their object in place.
  pub in_place: u64,
  /// Objects built on an isolate other than the one they were last on.
  pub moves: u64,
}

const ISOLATES: usize = 3;
const KEYS: usize = 4;

pub fn run_place(seed: u64, flaw: Option<PlaceFlaw>) -> Result<PlaceStats, String> {
  let mut rng = Rng::new(seed);
  let mut placement = Placement::default();
  let mut isos: Vec<Isolate> = (0..ISOLATES).map(|_| Isolate::default()).collect();
  let mut next_seq: HashMap<(usize, usize), u64> = HashMap::new();
  let mut ran: HashMap<(usize, usize), u64> = HashMap::new();
  let mut last_on: HashMap<usize, usize> = HashMap::new();
  let mut stats = PlaceStats::default();
  let steps = 1200 + rng.below(1200);
  let name = |k: usize| format!("k{k}");
  for step in 0..steps + 2000 {
    let sending = step < steps;
    match rng.below(10) {
      0 if sending => {
        let (caller, key) = (
          rng.below(ISOLATES as u64) as usize,
          rng.below(KEYS as u64) as usize,
        );
        let seq = next_seq.entry((caller, key)).or_default();
        *seq += 1;
        let call = Call {
          caller,
          key,
          seq: *seq,
        };
        stats.calls += 1;
        let here = &isos[caller];
        let quiet = match flaw {
          Some(PlaceFlaw::InPlaceWhileQueued) => placement.isolate_of(&name(key)) == Some(caller),
          _ => placement.quiet_at(&name(key), caller),
        };
        let in_hand =
          flaw != Some(PlaceFlaw::InPlacePastHand) && here.hand.iter().any(|c| c.key == key);
        if here.live.contains_key(&key) && quiet && !in_hand {
          stats.in_place += 1;
          isos[caller].live.insert(key, 1 + rng.below(3) as u32);
          ran_in_order(&mut ran, call, seed)?;
          continue;
        }
        let i = placement.send(&name(key), caller);
        isos[i].queue.push_back(call);
      }
      1..=2 => {
        // The isolate takes what its queue holds into its hand.
        let i = rng.below(ISOLATES as u64) as usize;
        let iso = &mut isos[i];
        for c in iso.queue.drain(..) {
          placement.taken(&name(c.key));
          iso.hand.push_back(c);
        }
      }
      0..=6 => {
        let i = rng.below(ISOLATES as u64) as usize;
        let Some(c) = isos[i].hand.pop_front() else {
          continue;
        };
        if !isos[i].live.contains_key(&c.key) {
          for (j, other) in isos.iter().enumerate() {
            if j != i && (other.live.contains_key(&c.key) || other.closing.contains_key(&c.key)) {
              return Err(format!(
                "seed {seed}: object k{} built on isolate {i} while isolate {j} still has it",
                c.key
              ));
            }
          }
          stats.builds += 1;
          if last_on.insert(c.key, i).is_some_and(|l| l != i) {
            stats.moves += 1;
          }
          isos[i].closing.remove(&c.key);
        }
        isos[i].live.insert(c.key, 1 + rng.below(3) as u32);
        ran_in_order(&mut ran, c, seed)?;
      }
      _ => {
        // A turn passes on one isolate: busy objects calm down, closing
        // ones become durable (released), an idle one may be evicted.
        let i = rng.below(ISOLATES as u64) as usize;
        let iso = &mut isos[i];
        for t in iso.live.values_mut().chain(iso.closing.values_mut()) {
          *t = t.saturating_sub(1);
        }
        let durable: Vec<usize> = (iso.closing.iter())
          .filter(|(_, t)| **t == 0)
          .map(|(k, _)| *k)
          .collect();
        for k in durable {
          iso.closing.remove(&k);
          if flaw != Some(PlaceFlaw::ReleaseWhileClosing)
            && release(&mut placement, &name(k), i, iso, flaw)
          {
            stats.releases += 1;
          }
        }
        let idle: Vec<usize> = (iso.live.iter())
          .filter(|(_, t)| **t == 0)
          .map(|(k, _)| *k)
          .collect();
        // Evictions are rarer than turns, so objects stay live for calls
        // made in place.
        let evict = rng.below(2) == 0;
        if let Some(&k) = idle
          .get(rng.below(idle.len() as u64 + 1) as usize)
          .filter(|_| evict)
        {
          iso.live.remove(&k);
          iso.closing.insert(k, 1 + rng.below(4) as u32);
          if flaw == Some(PlaceFlaw::ReleaseWhileClosing)
            && release(&mut placement, &name(k), i, iso, flaw)
          {
            stats.releases += 1;
          }
        }
      }
    }
  }
  // Everything sent ran.
  for ((caller, key), n) in &next_seq {
    let done = ran.get(&(*caller, *key)).copied().unwrap_or(0);
    if done != *n && isos.iter().all(|i| i.queue.is_empty() && i.hand.is_empty()) {
      return Err(format!(
        "seed {seed}: caller {caller} sent {n} calls to k{key}, {done} ran"
      ));
    }
  }
  Ok(stats)
}

/// Call `c` runs: it must be its caller's next call to its object.
fn ran_in_order(ran: &mut HashMap<(usize, usize), u64>, c: Call, seed: u64) -> Result<(), String> {
  let last = ran.entry((c.caller, c.key)).or_default();
  if c.seq != *last + 1 {
    return Err(format!(
      "seed {seed}: call {} of caller {} to k{} ran after call {}",
      c.seq, c.caller, c.key, last
    ));
  }
  *last = c.seq;
  Ok(())
}

/// Isolate `at` (`iso`) holds nothing of `key` any more: the shell asks to
/// forget its placement, unless a call for it is in the isolate's hand (that
/// call starts it there again).
fn release(
  p: &mut Placement,
  key: &str,
  at: usize,
  iso: &Isolate,
  flaw: Option<PlaceFlaw>,
) -> bool {
  if flaw != Some(PlaceFlaw::ReleaseWhileInHand)
    && iso.hand.iter().any(|c| format!("k{}", c.key) == key)
  {
    return false;
  }
  if flaw == Some(PlaceFlaw::ReleaseWhileQueued) && p.isolate_of(key) == Some(at) {
    // The mistake: the queue is not consulted.
    while p.isolate_of(key) == Some(at) && !p.release(key, at) {
      p.taken(key);
    }
    return true;
  }
  p.release(key, at)
}

//! A seeded simulator of one process switching versions while calls arrive
//! ([`crate::handover`]). Senders send numbered calls to a few objects;
//! pools of isolates (each a FIFO queue and a [`Slot`]) take them in random
//! interleavings; a switch makes a new pool current and queues `Retire` on
//! the old one's isolates; retiring isolates hand idle objects over (some
//! with sockets to pack first, which takes a while); objects are busy for a
//! while after each call, and serving isolates evict idle ones. Objects
//! also reset (a commit failed): the calls they had taken rebuild them at
//! once where they are. Switches follow one another until the run ends,
//! then everything drains.
//!
//! Checked: an object never has a live instance in two pools at once; the
//! calls of one sender to one object run in the order sent, each exactly
//! once. The shell's possible mistakes ([`HandoverFlaw`]) must be caught.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::rng::Rng;
use crate::handover::{Routing, Slot, Sort};

/// Mistakes the I/O shell around [`crate::handover`] could make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverFlaw {
  /// Learns the retiring pool's live objects at the switch instead of when
  /// each isolate processes `Retire` (calls queued before the marker start
  /// objects nobody counts).
  SnapshotAtSwitch,
  /// Leaves the calls queued behind `Retire` in the queue instead of
  /// sorting them at once.
  NoSortBehindRetire,
  /// Leaves an object's queued calls in the queue when handing it over.
  NoDrainAtHandover,
  /// Sends the queued calls before the ones held while packing.
  QueuedBeforeHeld,
  /// Drops the calls held while packing.
  ForgetHeld,
  /// Hands an object over without closing its instance in the old pool.
  KeepInstance,
  /// Releases a reset object although the calls it had taken rebuild it
  /// in the same isolate (the slot no longer counts it there).
  ReleaseOnReset,
}

impl HandoverFlaw {
  pub const ALL: [HandoverFlaw; 7] = [
    HandoverFlaw::SnapshotAtSwitch,
    HandoverFlaw::NoSortBehindRetire,
    HandoverFlaw::NoDrainAtHandover,
    HandoverFlaw::QueuedBeforeHeld,
    HandoverFlaw::ForgetHeld,
    HandoverFlaw::KeepInstance,
    HandoverFlaw::ReleaseOnReset,
  ];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
  sender: usize,
  key: usize,
  seq: u64,
}

enum Msg {
  Call(Call),
  Retire,
}

struct Isolate {
  queue: VecDeque<Msg>,
  slot: Slot<Call>,
  /// Live objects: the step until which each is busy, and whether it has
  /// sockets to pack (`Some(step)`: packing, done at that step).
  live: BTreeMap<usize, (u64, bool, Option<u64>)>,
}

struct Pool {
  isolates: Vec<Isolate>,
  stopped: bool,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct HandoverStats {
  pub calls: u64,
  pub switches: u64,
  pub handed_over: u64,
}

struct World {
  rng: Rng,
  flaw: Option<HandoverFlaw>,
  step: u64,
  pools: Vec<Pool>,
  routing: Routing<usize>,
  /// The next sequence number per (sender, object), and the last run.
  sent: HashMap<(usize, usize), u64>,
  ran: HashMap<(usize, usize), u64>,
  stats: HandoverStats,
  trace: Vec<String>,
}

const SLOTS: usize = 2;
const KEYS: usize = 5;
const SENDERS: usize = 3;

fn key_name(k: usize) -> String {
  format!("k{k}")
}

fn place(key: usize) -> usize {
  key % SLOTS
}

impl World {
  fn new_pool(&mut self) -> usize {
    self.pools.push(Pool {
      isolates: (0..SLOTS)
        .map(|_| Isolate {
          queue: VecDeque::new(),
          slot: Slot::default(),
          live: BTreeMap::new(),
        })
        .collect(),
      stopped: false,
    });
    self.pools.len() - 1
  }

  fn send(&mut self, c: Call) {
    let p = *self.routing.route(&key_name(c.key), place(c.key));
    self.pools[p].isolates[place(c.key)]
      .queue
      .push_back(Msg::Call(c));
  }

  fn run_call(&mut self, p: usize, i: usize, c: Call) -> Result<(), String> {
    for (q, pool) in self.pools.iter().enumerate() {
      if q != p
        && pool
          .isolates
          .iter()
          .any(|iso| iso.live.contains_key(&c.key))
      {
        return Err(format!(
          "object k{} live in pool {q} while pool {p} runs {c:?}",
          c.key
        ));
      }
    }
    let last = self.ran.entry((c.sender, c.key)).or_insert(0);
    if c.seq != *last + 1 {
      return Err(format!("{c:?} ran after call {} of that sender", *last));
    }
    *last = c.seq;
    self.stats.calls += 1;
    let busy = self.step + self.rng.range(0, 20);
    let sockets = self.rng.chance(300);
    let iso = &mut self.pools[p].isolates[i];
    let e = iso.live.entry(c.key).or_insert((0, false, None));
    e.0 = e.0.max(busy);
    e.1 |= sockets;
    self
      .trace
      .push(format!("{}: pool {p} runs {c:?}", self.step));
    Ok(())
  }

  /// Sorts one call taken from isolate `i` of pool `p`.
  fn sort(&mut self, p: usize, i: usize, c: Call) -> Result<(), String> {
    let (what, job) = self.pools[p].isolates[i].slot.sort(&key_name(c.key), c);
    match (what, job) {
      (Sort::Run, Some(c)) => self.run_call(p, i, c),
      (Sort::Pass, Some(c)) => {
        self.send(c);
        Ok(())
      }
      _ => Ok(()),
    }
  }

  fn pump(&mut self, p: usize, i: usize) -> Result<(), String> {
    let Some(msg) = self.pools[p].isolates[i].queue.pop_front() else {
      return Ok(());
    };
    match msg {
      Msg::Call(c) => self.sort(p, i, c),
      Msg::Retire => {
        let live = self.pools[p].isolates[i].slot.retire();
        if self.flaw != Some(HandoverFlaw::SnapshotAtSwitch) {
          self.routing.retire_processed(&p, i, live);
        }
        if self.flaw == Some(HandoverFlaw::NoSortBehindRetire) {
          return Ok(());
        }
        let rest: Vec<Msg> = self.pools[p].isolates[i].queue.drain(..).collect();
        for m in rest {
          if let Msg::Call(c) = m {
            self.sort(p, i, c)?;
          }
        }
        Ok(())
      }
    }
  }

  /// Hands object `key` of isolate `i` of retiring pool `p` over.
  fn hand_over(&mut self, p: usize, i: usize, key: usize) {
    let keep = self.flaw == Some(HandoverFlaw::KeepInstance);
    let iso = &mut self.pools[p].isolates[i];
    if keep {
      // The instance stays (never idle again, so it is not handed twice).
      iso.live.get_mut(&key).unwrap().0 = u64::MAX;
    } else {
      iso.live.remove(&key);
    }
    let mut held = iso.slot.gone(&key_name(key)).unwrap_or_default();
    let mut queued = Vec::new();
    if self.flaw != Some(HandoverFlaw::NoDrainAtHandover) {
      let mut keep = VecDeque::new();
      for m in iso.queue.drain(..) {
        match m {
          Msg::Call(c) if c.key == key => queued.push(c),
          m => keep.push_back(m),
        }
      }
      iso.queue = keep;
    }
    self.routing.left(&key_name(key));
    self.stats.handed_over += 1;
    self
      .trace
      .push(format!("{}: pool {p} hands k{key} over", self.step));
    if self.flaw == Some(HandoverFlaw::ForgetHeld) {
      held.clear();
    }
    let order = if self.flaw == Some(HandoverFlaw::QueuedBeforeHeld) {
      [queued, held]
    } else {
      [held, queued]
    };
    for c in order.into_iter().flatten() {
      self.send(c);
    }
  }

  /// One retiring isolate looks at its idle objects.
  fn retire_step(&mut self, p: usize, i: usize) {
    let step = self.step;
    let iso = &mut self.pools[p].isolates[i];
    if !iso.slot.decided() {
      return;
    }
    let idle: Vec<(usize, bool, Option<u64>)> = iso
      .live
      .iter()
      .filter(|(_, (busy, _, _))| *busy <= step)
      .map(|(k, (_, s, packing))| (*k, *s, *packing))
      .collect();
    for (key, sockets, packing) in idle {
      match (sockets, packing) {
        (true, None) => {
          let done = step + self.rng.range(1, 10);
          let iso = &mut self.pools[p].isolates[i];
          iso.slot.packing(&key_name(key));
          iso.live.get_mut(&key).unwrap().2 = Some(done);
        }
        (true, Some(done)) if done > step => {}
        _ => self.hand_over(p, i, key),
      }
    }
  }

  /// A serving isolate evicts an idle object without sockets.
  fn evict(&mut self, p: usize, i: usize) {
    let step = self.step;
    let iso = &mut self.pools[p].isolates[i];
    if iso.slot.decided() {
      return;
    }
    let idle = iso
      .live
      .iter()
      .find(|(_, (busy, s, _))| *busy <= step && !*s)
      .map(|(k, _)| *k);
    if let Some(k) = idle {
      iso.live.remove(&k);
      iso.slot.gone(&key_name(k));
    }
  }

  /// An object of isolate `i` of pool `p` resets: the calls it had taken
  /// build its next instance at once, in the same isolate.
  fn reset(&mut self, p: usize, i: usize) -> Result<(), String> {
    let iso = &mut self.pools[p].isolates[i];
    let keys: Vec<usize> = iso.live.keys().copied().collect();
    if keys.is_empty() {
      return Ok(());
    }
    let key = keys[self.rng.below(keys.len() as u64) as usize];
    let name = key_name(key);
    let iso = &mut self.pools[p].isolates[i];
    if self.flaw == Some(HandoverFlaw::ReleaseOnReset) {
      // Released as if gone (a retiring isolate hands it over)...
      if let Some(held) = iso.slot.gone(&name) {
        self.routing.left(&name);
        for c in held {
          self.send(c);
        }
      }
    } else if !iso.slot.may_build(&name) {
      return Err(format!(
        "k{key} rebuilt in pool {p} after it was handed over"
      ));
    }
    // ...and rebuilt here all the same.
    self
      .trace
      .push(format!("{}: pool {p} resets k{key}", self.step));
    Ok(())
  }

  fn switch(&mut self) {
    let next = self.new_pool();
    let old = self
      .routing
      .switch(next, SLOTS)
      .expect("one retirement at a time");
    for (i, iso) in self.pools[old].isolates.iter_mut().enumerate() {
      iso.queue.push_back(Msg::Retire);
      if self.flaw == Some(HandoverFlaw::SnapshotAtSwitch) {
        let live: Vec<String> = iso.live.keys().map(|k| key_name(*k)).collect();
        self.routing.retire_processed(&old, i, live);
      }
    }
    self.stats.switches += 1;
    self
      .trace
      .push(format!("{}: switch to pool {next}", self.step));
  }

  /// The retirement ends once the old pool holds nothing; its isolates
  /// stop and pass on what they still queue.
  fn maybe_finish(&mut self) {
    if self.routing.retiring_left() != Some(0) {
      return;
    }
    let old = self.routing.finish().unwrap();
    let pool = &mut self.pools[old];
    pool.stopped = true;
    let mut rest = Vec::new();
    for iso in &mut pool.isolates {
      iso.slot.close();
      iso.live.clear();
      rest.extend(iso.queue.drain(..));
    }
    for m in rest {
      if let Msg::Call(c) = m {
        self.send(c);
      }
    }
  }

  fn busy(&self) -> bool {
    self.routing.retiring_left().is_some()
      || self
        .pools
        .iter()
        .any(|p| !p.stopped && p.isolates.iter().any(|i| !i.queue.is_empty()))
  }

  fn act(&mut self, sending: bool) -> Result<(), String> {
    self.step += 1;
    let live: Vec<usize> = (0..self.pools.len())
      .filter(|&p| !self.pools[p].stopped)
      .collect();
    let p = live[self.rng.below(live.len() as u64) as usize];
    let i = self.rng.below(SLOTS as u64) as usize;
    match self.rng.below(100) {
      0..=34 if sending => {
        let (sender, key) = (
          self.rng.below(SENDERS as u64) as usize,
          self.rng.below(KEYS as u64) as usize,
        );
        let seq = self.sent.entry((sender, key)).or_insert(0);
        *seq += 1;
        let c = Call {
          sender,
          key,
          seq: *seq,
        };
        self.send(c);
      }
      0..=69 => self.pump(p, i)?,
      70..=84 => self.retire_step(p, i),
      85..=92 => self.evict(p, i),
      93..=96 => self.reset(p, i)?,
      _ => {
        if sending && self.routing.retiring_left().is_none() {
          self.switch();
        }
      }
    }
    self.maybe_finish();
    Ok(())
  }
}

/// Runs one seed; `Err` names the violation and ends with the trace.
pub fn run_handover(seed: u64, flaw: Option<HandoverFlaw>) -> Result<HandoverStats, String> {
  let mut w = World {
    rng: Rng::new(seed),
    flaw,
    step: 0,
    pools: Vec::new(),
    routing: Routing::new(0),
    sent: HashMap::new(),
    ran: HashMap::new(),
    stats: HandoverStats::default(),
    trace: Vec::new(),
  };
  w.new_pool();
  let fail = |w: &World, e: String| {
    let tail = w.trace.len().saturating_sub(40);
    Err(format!("seed {seed}: {e}\n{}", w.trace[tail..].join("\n")))
  };
  for _ in 0..2_000 {
    if let Err(e) = w.act(true) {
      return fail(&w, e);
    }
  }
  // Quiet: no new calls or switches; everything queued runs.
  let mut left = 200_000;
  while w.busy() && left > 0 {
    left -= 1;
    if let Err(e) = w.act(false) {
      return fail(&w, e);
    }
  }
  if w.busy() {
    return fail(&w, "the process never settled".into());
  }
  for (k, n) in &w.sent {
    let ran = w.ran.get(k).copied().unwrap_or(0);
    if ran != *n {
      return fail(
        &w,
        format!("sender {} sent {n} calls to k{}, {ran} ran", k.0, k.1),
      );
    }
  }
  Ok(w.stats)
}

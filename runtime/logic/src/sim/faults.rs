//! Fault profiles: each seed draws a world (2-3 nodes, 1-2 cells, 6-12 s)
//! and one profile that sets how often each fault strikes.
//!
//! | profile | share | what it stresses |
//! |---|---|---|
//! | calm | 10% | latency only, evictions and graceful stops |
//! | lossy | 20% | lost requests and answers, stuck requests, outages |
//! | pauses | 20% | SIGSTOP-like pauses, also right after a request is sent |
//! | crashes | 20% | crashes, also right after a request is sent; disks wiped at times |
//! | frozen | 15% | frozen VMs and stalled clocks: the clock bound is broken |
//! | chaos | 15% | a little of everything |
//!
//! Across every profile, 30% of seeds have the store refuse 1-6% of LTX
//! objects for good (every retry), each refusal answered after 50-400 ms
//! (the client's own retries).
//!
//! Timing: ttl 3 s, margin 600 ms, clocks within ±300 ms of true time (so
//! two healthy clocks disagree by at most the margin), rates within ±5%.
//! Requests take 1-15 ms each way, some 20-900 ms, a few are stuck past the
//! 1 s timeout and apply up to 6 s later.

use super::rng::Rng;
use super::{Ev, T0, World};
use crate::lease::LeaseConfig;

/// The shape of one seed's world and faults.
#[derive(Clone, Debug)]
pub(super) struct Params {
  pub(super) profile: &'static str,
  pub(super) nodes: usize,
  pub(super) cells: usize,
  pub(super) end: u64,
  pub(super) lease: LeaseConfig,
  /// Clock bound: healthy clocks stay within this of true time.
  pub(super) skew: u64,
  pub(super) fast_max: u64,
  pub(super) slow: u32,
  pub(super) slow_max: u64,
  pub(super) stuck: u32,
  pub(super) stuck_max: u64,
  pub(super) timeout: u64,
  /// Per mille of requests lost before they apply.
  pub(super) drop: u32,
  /// Per mille of answers lost after the request applied.
  pub(super) lost: u32,
  /// Per mille of LTX objects the store refuses for good (every retry).
  pub(super) refuse: u32,
  pub(super) outages: Vec<(u64, u64)>,
  pub(super) write_gap: (u64, u64),
  /// Per mille of requests right after which the sender pauses.
  pub(super) await_pause: u32,
  /// Per mille of requests right after which the sender crashes.
  pub(super) await_crash: u32,
}

/// Counts of each node fault, drawn per node from `0..=max`.
#[derive(Clone, Copy, Default)]
pub(super) struct FaultMax {
  pub(super) crash: u64,
  pub(super) pause: u64,
  pub(super) freeze: u64,
  pub(super) stall: u64,
  pub(super) stop: u64,
  pub(super) evict: u64,
}

/// Draws the world and fault profile of a seed.
pub(super) fn draw_params(rng: &mut Rng) -> (Params, FaultMax) {
  let lease = LeaseConfig {
    ttl_ms: 3_000,
    margin_ms: 600,
  };
  let mut p = Params {
    profile: "calm",
    nodes: rng.range(2, 3) as usize,
    cells: rng.range(1, 2) as usize,
    end: T0 + rng.range(6_000, 12_000),
    lease,
    // Two healthy clocks disagree by at most 2 * skew = margin.
    skew: lease.margin_ms / 2,
    fast_max: 15,
    slow: 20,
    slow_max: 900,
    stuck: 0,
    stuck_max: 2 * lease.ttl_ms,
    timeout: 1_000,
    drop: 0,
    lost: 0,
    refuse: 0,
    outages: Vec::new(),
    write_gap: (100, 600),
    await_pause: 0,
    await_crash: 0,
  };
  let mut f = FaultMax {
    evict: 2,
    stop: 1,
    ..FaultMax::default()
  };
  let profile = rng.below(100);
  let (drop, lost, slow, stuck);
  match profile {
    0..10 => {
      (drop, lost, slow, stuck) = (0, 0, 20, 0);
    }
    10..30 => {
      p.profile = "lossy";
      (drop, lost, slow, stuck) = (40, 60, 80, 15);
      for _ in 0..rng.range(0, 2) {
        let a = rng.range(T0, p.end);
        p.outages.push((a, a + rng.range(200, 2 * lease.ttl_ms)));
      }
    }
    30..50 => {
      p.profile = "pauses";
      (drop, lost, slow, stuck) = (10, 10, 40, 5);
      f.pause = 3;
      p.await_pause = 8;
    }
    50..70 => {
      p.profile = "crashes";
      (drop, lost, slow, stuck) = (10, 10, 40, 5);
      f.crash = 2;
      p.await_crash = 3;
    }
    70..85 => {
      p.profile = "frozen";
      (drop, lost, slow, stuck) = (10, 10, 60, 10);
      f.freeze = 2;
      f.stall = 2;
      f.pause = 1;
    }
    _ => {
      p.profile = "chaos";
      (drop, lost, slow, stuck) = (30, 40, 80, 15);
      if rng.chance(500) {
        let a = rng.range(T0, p.end);
        p.outages.push((a, a + rng.range(200, 2 * lease.ttl_ms)));
      }
      f = FaultMax {
        crash: 1,
        pause: 2,
        freeze: 1,
        stall: 1,
        stop: 1,
        evict: 2,
      };
      (p.await_pause, p.await_crash) = (4, 1);
    }
  }
  (p.drop, p.lost, p.slow, p.stuck) = (drop, lost, slow, stuck);
  if rng.chance(300) {
    p.refuse = rng.range(10, 60) as u32;
  }
  (p, f)
}

impl World {
  pub(super) fn schedule_faults(&mut self, n: usize, m: FaultMax) {
    let ttl = self.p.lease.ttl_ms;
    let span = (T0 + 300, self.p.end);
    for _ in 0..self.rng.range(0, m.crash) {
      let at = self.rng.range(span.0, span.1);
      self.push(at, Ev::Crash(n));
    }
    for _ in 0..self.rng.range(0, m.pause) {
      let at = self.rng.range(span.0, span.1);
      let dur = self.rng.range(100, 3 * ttl);
      self.push(
        at,
        Ev::Pause {
          node: n,
          dur,
          freeze: false,
        },
      );
    }
    for _ in 0..self.rng.range(0, m.freeze) {
      let at = self.rng.range(span.0, span.1);
      let dur = self.rng.range(ttl / 2, 4 * ttl);
      self.push(
        at,
        Ev::Pause {
          node: n,
          dur,
          freeze: true,
        },
      );
    }
    for _ in 0..self.rng.range(0, m.stall) {
      let at = self.rng.range(span.0, span.1);
      let dur = self.rng.range(ttl / 2, 3 * ttl);
      self.push(at, Ev::Stall { node: n, dur });
    }
    for _ in 0..self.rng.range(0, m.stop) {
      let at = self.rng.range(span.0, span.1);
      self.push(at, Ev::Stop(n));
    }
    for _ in 0..self.rng.range(0, m.evict) {
      let at = self.rng.range(span.0, span.1);
      self.push(at, Ev::Evict(n));
    }
  }
}

//! A node's local clock, as a function of the simulator's true time.
//!
//! Model: `local(t) = clamp(offset + t * rate, t - bound, t + bound)`, with a
//! rate within ±5% and an initial offset within the bound. The clamp stands
//! for clock discipline (NTP): a clock drifts at its own rate but never more
//! than `bound` from true time, so any two healthy clocks disagree by less
//! than `2 * bound`, which the protocol tolerates while `2 * bound <=
//! margin`. The clamp keeps the clock monotonic.
//!
//! A *freeze* (a suspended VM) stops the clock while the process is stopped;
//! afterwards it runs on from where it stopped, behind true time by the
//! length of the freeze. That breaks the bound, which is the point: the
//! acknowledgement rule must still hold, since it reads the ownership record
//! instead of trusting a clock. Only the lease-timing checkers, whose
//! premise is the bound, skip a node whose clock was frozen.

use super::rng::Rng;

#[derive(Clone, Debug)]
pub struct Clock {
  start_true: u64,
  start_local: u64,
  /// Rate deviation in parts per million.
  rate_ppm: i64,
  bound: u64,
  /// How far behind the disciplined clock a freeze left this one.
  lag: u64,
  frozen_at: Option<u64>,
  /// False once frozen: the bound no longer holds for this clock.
  pub trusted: bool,
}

impl Clock {
  pub fn new(rng: &mut Rng, now: u64, bound: u64) -> Self {
    let offset = rng.range(0, 2 * bound) as i64 - bound as i64;
    Clock {
      start_true: now,
      start_local: (now as i64 + offset) as u64,
      rate_ppm: rng.range(0, 100_000) as i64 - 50_000,
      bound,
      lag: 0,
      frozen_at: None,
      trusted: true,
    }
  }

  /// The disciplined reading at true time `t`.
  fn raw(&self, t: u64) -> u64 {
    let dt = t.saturating_sub(self.start_true) as i128;
    let lin = self.start_local as i128 + dt + dt * self.rate_ppm as i128 / 1_000_000;
    lin.clamp(
      t.saturating_sub(self.bound) as i128,
      (t + self.bound) as i128,
    ) as u64
  }

  /// The local reading at true time `t`.
  pub fn local(&self, t: u64) -> u64 {
    self.raw(self.frozen_at.unwrap_or(t)) - self.lag
  }

  /// Converts a local deadline into a true-time delay from `now`; at least
  /// 1 ms, and callers re-check on arrival (the conversion assumes rate 1).
  pub fn delay_until(&self, now: u64, local_deadline: u64) -> u64 {
    local_deadline.saturating_sub(self.local(now)).max(1)
  }

  pub fn freeze(&mut self, t: u64) {
    if self.frozen_at.is_none() {
      self.frozen_at = Some(t);
      self.trusted = false;
    }
  }

  pub fn thaw(&mut self, t: u64) {
    if let Some(f) = self.frozen_at.take() {
      // Resume exactly where it stopped.
      self.lag += self.raw(t) - self.raw(f);
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn bounded_monotonic_and_freezable() {
    let mut rng = Rng::new(3);
    for _ in 0..50 {
      let mut c = Clock::new(&mut rng, 1_000_000, 200);
      let mut last = 0;
      for t in (1_000_000..1_100_000).step_by(97) {
        let l = c.local(t);
        assert!(l >= last && l + 200 >= t && l <= t + 200);
        last = l;
      }
      c.freeze(1_100_000);
      assert_eq!(c.local(1_105_000), last.max(c.local(1_100_000)));
      let before = c.local(1_100_000);
      c.thaw(1_105_000);
      assert_eq!(c.local(1_105_000), before);
      assert!(!c.trusted);
    }
  }
}

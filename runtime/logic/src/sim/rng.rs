//! splitmix64: small, fast, and every seed gives its own stream. The
//! simulator's only source of randomness, so a seed replays exactly.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
  pub fn new(seed: u64) -> Self {
    // Mix the seed once so neighbouring seeds start far apart.
    let mut r = Rng(seed ^ 0x6a09_e667_f3bc_c908);
    r.next_u64();
    r
  }

  pub fn next_u64(&mut self) -> u64 {
    self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
  }

  /// Uniform in `0..n` (`n > 0`); the modulo bias is irrelevant here.
  pub fn below(&mut self, n: u64) -> u64 {
    self.next_u64() % n
  }

  /// Uniform in `lo..=hi`.
  pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
    lo + self.below(hi - lo + 1)
  }

  /// True with probability `per_mille / 1000`.
  pub fn chance(&mut self, per_mille: u32) -> bool {
    per_mille > 0 && self.below(1000) < u64::from(per_mille)
  }

  /// An independent stream, so that one consumer's draws do not shift
  /// another's.
  pub fn fork(&mut self) -> Rng {
    Rng::new(self.next_u64())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn deterministic_and_in_range() {
    let (mut a, mut b) = (Rng::new(7), Rng::new(7));
    for _ in 0..100 {
      assert_eq!(a.next_u64(), b.next_u64());
      let x = a.range(3, 5);
      assert!((3..=5).contains(&x));
      b.range(3, 5);
    }
    assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
  }
}

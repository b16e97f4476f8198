//! The fault lab's only source of randomness: splitmix64 from a seed.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
  pub fn new(seed: u64) -> Rng {
    Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
  }

  /// An independent stream for a named part of the lab (a client, a proxy).
  pub fn fork(&mut self, tag: u64) -> Rng {
    Rng(self.next_u64() ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15))
  }

  pub fn next_u64(&mut self) -> u64 {
    self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
  }

  /// Uniform in `0..n` (`n > 0`).
  pub fn below(&mut self, n: u64) -> u64 {
    self.next_u64() % n.max(1)
  }

  /// Uniform in `lo..=hi`.
  pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
    lo + self.below(hi.saturating_sub(lo) + 1)
  }

  /// True with probability `permille / 1000`.
  pub fn chance(&mut self, permille: u64) -> bool {
    self.below(1000) < permille
  }

  pub fn shuffle<T>(&mut self, v: &mut [T]) {
    for i in (1..v.len()).rev() {
      let j = self.below(i as u64 + 1) as usize;
      v.swap(i, j);
    }
  }
}

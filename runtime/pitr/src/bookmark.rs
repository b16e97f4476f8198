//! Bookmarks: opaque strings that sort as the states they name (epoch, then
//! TXID), in the four-group shape Cloudflare's take. The last group is a
//! check value over the object's scope, so a bookmark of another object (or
//! a typo) is refused instead of restoring something unrelated.

use sha2::{Digest, Sha256};

pub const DAY_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bookmark {
  /// The chain: a bucket epoch, or 0 for a local history.
  pub epoch: u64,
  /// The state after this transaction of the chain.
  pub txid: u64,
}

fn check(scope: &str, epoch: u64, txid: u64) -> String {
  let mut h = Sha256::new();
  h.update(scope.as_bytes());
  h.update([0]);
  h.update(epoch.to_be_bytes());
  h.update(txid.to_be_bytes());
  let d = h.finalize();
  d[..16].iter().map(|b| format!("{b:02x}")).collect()
}

impl Bookmark {
  /// `EEEEEEEE-TTTTTTTT-TTTTTTTT-<check>`: fixed width, so string order is
  /// state order (epochs past 2^32 would widen the first group; the store
  /// never gets there).
  pub fn encode(&self, scope: &str) -> String {
    format!(
      "{:08x}-{:08x}-{:08x}-{}",
      self.epoch,
      self.txid >> 32,
      self.txid & 0xffff_ffff,
      check(scope, self.epoch, self.txid)
    )
  }

  pub fn parse(scope: &str, s: &str) -> Result<Bookmark, String> {
    let bad = || format!("Invalid bookmark: {s:?} is not a bookmark of this Durable Object.");
    let parts: Vec<&str> = s.split('-').collect();
    let [e, hi, lo, c] = parts[..] else {
      return Err(bad());
    };
    let hex = |p: &str, lens: std::ops::RangeInclusive<usize>| {
      (lens.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(p, 16).ok())
        .flatten()
    };
    let (Some(epoch), Some(hi), Some(lo)) = (hex(e, 8..=16), hex(hi, 8..=8), hex(lo, 8..=8)) else {
      return Err(bad());
    };
    let b = Bookmark {
      epoch,
      txid: hi << 32 | lo,
    };
    if c != check(scope, b.epoch, b.txid) || b.txid == 0 {
      return Err(bad());
    }
    Ok(b)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn bookmarks_round_trip_and_sort_as_their_states() {
    let states = [(0, 1), (0, 2), (0, 0x1_0000_0000), (3, 1), (3, 17), (12, 1)];
    let marks: Vec<String> = states
      .iter()
      .map(|&(epoch, txid)| Bookmark { epoch, txid }.encode("A:1"))
      .collect();
    let mut sorted = marks.clone();
    sorted.sort();
    assert_eq!(sorted, marks);
    for (m, &(epoch, txid)) in marks.iter().zip(&states) {
      assert_eq!(Bookmark::parse("A:1", m), Ok(Bookmark { epoch, txid }));
      assert!(Bookmark::parse("A:2", m).is_err(), "another object's");
    }
    for junk in [
      "",
      "junk",
      "00000000-00000000-00000000-00000000000000000000000000000000",
    ] {
      assert!(Bookmark::parse("A:1", junk).is_err(), "{junk}");
    }
  }
}

//! Unsigned LEB128 varints, as Go's `binary.AppendUvarint` / `ReadUvarint` write and read them.

use crate::error::{Result, bail};

pub(crate) fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
  while v >= 0x80 {
    out.push(v as u8 | 0x80);
    v >>= 7;
  }
  out.push(v as u8);
}

/// Reads one varint from the front of `b`; returns the value and the bytes it used.
pub(crate) fn get_uvarint(b: &[u8]) -> Result<(u64, usize)> {
  let mut v = 0u64;
  for (i, &byte) in b.iter().enumerate() {
    // Go's limit: 10 bytes, and the 10th may only carry the top bit of a u64.
    if i == 9 && byte > 1 {
      bail!("varint overflows 64 bits");
    }
    v |= u64::from(byte & 0x7f) << (7 * i);
    if byte < 0x80 {
      return Ok((v, i + 1));
    }
  }
  bail!("truncated varint")
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn round_trips_and_limits() {
    for v in [
      0,
      1,
      127,
      128,
      300,
      16383,
      16384,
      u32::MAX as u64,
      u64::MAX - 1,
      u64::MAX,
    ] {
      let mut b = Vec::new();
      put_uvarint(&mut b, v);
      assert_eq!(get_uvarint(&b).unwrap(), (v, b.len()));
      assert!(get_uvarint(&b[..b.len() - 1]).is_err());
    }
    let mut max = Vec::new();
    put_uvarint(&mut max, u64::MAX);
    assert_eq!(max.len(), 10);
    let mut over = max.clone();
    over[9] = 2;
    assert!(
      get_uvarint(&over)
        .unwrap_err()
        .message()
        .contains("overflows")
    );
    assert_eq!(get_uvarint(&[0xac, 0x02]).unwrap(), (300, 2));
  }
}

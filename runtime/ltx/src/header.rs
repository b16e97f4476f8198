//! The 100-byte LTX header (big-endian) and its validation rules.

use crate::checksum::CHECKSUM_FLAG;
use crate::error::{LtxError, Result, bail};

/// First 4 bytes of every LTX file. v2 and v3 share it; this crate reads and writes v3.
pub const MAGIC: &[u8; 4] = b"LTX1";
pub const HEADER_SIZE: usize = 100;
/// Header flag: pre/post-apply checksums are not tracked (both must be 0). The only valid flag.
pub const HEADER_FLAG_NO_CHECKSUM: u32 = 0x2;
pub const MIN_PAGE_SIZE: u32 = 512;
pub const MAX_PAGE_SIZE: u32 = 65536;
/// SQLite's pending byte: the page holding it (the lock page) is never stored.
const PENDING_BYTE: u32 = 0x4000_0000;

/// The page holding SQLite's pending byte; LTX never encodes it and checksums skip it.
pub fn lock_pgno(page_size: u32) -> u32 {
  PENDING_BYTE / page_size.max(1) + 1
}

pub fn is_valid_page_size(page_size: u32) -> bool {
  page_size.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size)
}

/// An LTX header. `encode` writes the 20 reserved bytes as zeros; `decode` ignores them, as
/// Litestream's reader does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
  pub flags: u32,
  pub page_size: u32,
  /// Database size in pages after applying the file. 0 is the empty database.
  pub commit: u32,
  pub min_txid: u64,
  pub max_txid: u64,
  /// Milliseconds since the Unix epoch.
  pub timestamp_ms: i64,
  /// Database checksum at `min_txid - 1`; 0 for snapshots and NoChecksum files.
  pub pre_apply_checksum: u64,
  pub wal_offset: i64,
  pub wal_size: i64,
  pub wal_salt1: u32,
  pub wal_salt2: u32,
  pub node_id: u64,
}

impl Header {
  /// A NoChecksum snapshot header: the whole database at `max_txid`, as cellhost writes it.
  pub fn snapshot(page_size: u32, commit: u32, max_txid: u64, timestamp_ms: i64) -> Self {
    Self::delta(page_size, commit, 1, max_txid, timestamp_ms)
  }

  /// A NoChecksum header for the changed pages of transactions `min_txid..=max_txid`.
  /// With `min_txid == 1` this is a snapshot and must hold every page.
  pub fn delta(page_size: u32, commit: u32, min_txid: u64, max_txid: u64, ts: i64) -> Self {
    Self {
      flags: HEADER_FLAG_NO_CHECKSUM,
      page_size,
      commit,
      min_txid,
      max_txid,
      timestamp_ms: ts,
      ..Self::default()
    }
  }

  /// Snapshot ⇔ the file starts at TXID 1; it then holds every page 1..=commit.
  pub fn is_snapshot(&self) -> bool {
    self.min_txid == 1
  }

  pub fn no_checksum(&self) -> bool {
    self.flags & HEADER_FLAG_NO_CHECKSUM != 0
  }

  pub fn lock_pgno(&self) -> u32 {
    lock_pgno(self.page_size)
  }

  /// The rules of Litestream's `Header.Validate`, in the same order.
  pub fn validate(&self) -> Result<()> {
    if self.flags & !HEADER_FLAG_NO_CHECKSUM != 0 {
      bail!("invalid header flags: 0x{:08x}", self.flags);
    }
    if !is_valid_page_size(self.page_size) {
      bail!("invalid page size: {}", self.page_size);
    }
    if self.min_txid == 0 {
      bail!("minimum transaction id required");
    }
    if self.max_txid == 0 {
      bail!("maximum transaction id required");
    }
    if self.min_txid > self.max_txid {
      bail!(
        "transaction ids out of order: ({}, {})",
        self.min_txid,
        self.max_txid
      );
    }
    if self.wal_offset < 0 {
      bail!("wal offset cannot be negative: {}", self.wal_offset);
    }
    if self.wal_size < 0 {
      bail!("wal size cannot be negative: {}", self.wal_size);
    }
    if (self.wal_salt1 != 0 || self.wal_salt2 != 0) && self.wal_offset == 0 {
      bail!("wal offset required if wal salt is set");
    }
    if self.wal_size != 0 && self.wal_offset == 0 {
      bail!("wal offset required if wal size is set");
    }
    if self.is_snapshot() {
      if self.pre_apply_checksum != 0 {
        bail!("pre-apply checksum must be zero on snapshots");
      }
    } else if self.no_checksum() {
      if self.pre_apply_checksum != 0 {
        bail!("pre-apply checksum not allowed with the no-checksum flag");
      }
    } else if self.pre_apply_checksum == 0 {
      bail!("pre-apply checksum required on non-snapshot files");
    } else if self.pre_apply_checksum & CHECKSUM_FLAG == 0 {
      bail!(
        "invalid pre-apply checksum format: 0x{:016x}",
        self.pre_apply_checksum
      );
    }
    Ok(())
  }

  /// The 100 header bytes. Does not validate; the encoder validates before calling this.
  pub fn encode(&self) -> [u8; HEADER_SIZE] {
    let mut b = [0u8; HEADER_SIZE];
    b[0..4].copy_from_slice(MAGIC);
    b[4..8].copy_from_slice(&self.flags.to_be_bytes());
    b[8..12].copy_from_slice(&self.page_size.to_be_bytes());
    b[12..16].copy_from_slice(&self.commit.to_be_bytes());
    b[16..24].copy_from_slice(&self.min_txid.to_be_bytes());
    b[24..32].copy_from_slice(&self.max_txid.to_be_bytes());
    b[32..40].copy_from_slice(&self.timestamp_ms.to_be_bytes());
    b[40..48].copy_from_slice(&self.pre_apply_checksum.to_be_bytes());
    b[48..56].copy_from_slice(&self.wal_offset.to_be_bytes());
    b[56..64].copy_from_slice(&self.wal_size.to_be_bytes());
    b[64..68].copy_from_slice(&self.wal_salt1.to_be_bytes());
    b[68..72].copy_from_slice(&self.wal_salt2.to_be_bytes());
    b[72..80].copy_from_slice(&self.node_id.to_be_bytes());
    b
  }

  /// Parses and validates the header at the start of `b` (which may be a whole file).
  pub fn decode(b: &[u8]) -> Result<Self> {
    let Some(b) = b.get(..HEADER_SIZE) else {
      bail!("truncated header: {} of {HEADER_SIZE} bytes", b.len());
    };
    if &b[0..4] != MAGIC {
      bail!("bad magic {:02x?}, expected \"LTX1\"", &b[0..4]);
    }
    let h = Self {
      flags: be_u32(b, 4),
      page_size: be_u32(b, 8),
      commit: be_u32(b, 12),
      min_txid: be_u64(b, 16),
      max_txid: be_u64(b, 24),
      timestamp_ms: be_u64(b, 32) as i64,
      pre_apply_checksum: be_u64(b, 40),
      wal_offset: be_u64(b, 48) as i64,
      wal_size: be_u64(b, 56) as i64,
      wal_salt1: be_u32(b, 64),
      wal_salt2: be_u32(b, 68),
      node_id: be_u64(b, 72),
    };
    h.validate()
      .map_err(|e| LtxError::new(format!("invalid header: {}", e.message())))?;
    Ok(h)
  }
}

pub(crate) fn be_u16(b: &[u8], at: usize) -> u16 {
  u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
  u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn be_u64(b: &[u8], at: usize) -> u64 {
  u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn full() -> Header {
    Header {
      flags: 0,
      page_size: 4096,
      commit: 17,
      min_txid: 5,
      max_txid: 9,
      timestamp_ms: 1_700_000_000_123,
      pre_apply_checksum: CHECKSUM_FLAG | 0x1234,
      wal_offset: 32,
      wal_size: 4152,
      wal_salt1: 0xdead_beef,
      wal_salt2: 0x0102_0304,
      node_id: 0xfeed,
    }
  }

  #[test]
  fn round_trip_every_field() {
    let h = full();
    let b = h.encode();
    assert_eq!(&b[0..4], b"LTX1");
    assert_eq!(&b[8..12], &4096u32.to_be_bytes());
    assert_eq!(&b[80..100], &[0u8; 20]);
    assert_eq!(Header::decode(&b).unwrap(), h);
    let s = Header::snapshot(512, 3, 7, -5);
    assert_eq!(Header::decode(&s.encode()).unwrap(), s);
    assert!(s.is_snapshot() && s.no_checksum());
  }

  #[test]
  fn field_offsets_are_big_endian() {
    let b = full().encode();
    assert_eq!(be_u32(&b, 12), 17);
    assert_eq!(be_u64(&b, 16), 5);
    assert_eq!(be_u64(&b, 24), 9);
    assert_eq!(be_u64(&b, 32), 1_700_000_000_123);
    assert_eq!(be_u64(&b, 40), CHECKSUM_FLAG | 0x1234);
    assert_eq!(be_u64(&b, 48), 32);
    assert_eq!(be_u64(&b, 56), 4152);
    assert_eq!(be_u32(&b, 64), 0xdead_beef);
    assert_eq!(be_u32(&b, 68), 0x0102_0304);
    assert_eq!(be_u64(&b, 72), 0xfeed);
  }

  #[test]
  fn reserved_bytes_are_ignored_on_decode() {
    let mut b = full().encode();
    b[99] = 1;
    assert_eq!(Header::decode(&b).unwrap(), full());
  }

  #[test]
  fn rejects_short_and_bad_magic() {
    let b = full().encode();
    for n in 0..HEADER_SIZE {
      let e = Header::decode(&b[..n]).unwrap_err();
      assert!(e.message().contains("truncated header"), "{e}");
    }
    let mut bad = b;
    bad[3] = b'2';
    assert!(
      Header::decode(&bad)
        .unwrap_err()
        .message()
        .contains("magic")
    );
  }

  fn rejects(h: Header, why: &str) {
    let e = h.validate().unwrap_err();
    assert!(e.message().contains(why), "expected {why:?}, got {e}");
    let e = Header::decode(&h.encode()).unwrap_err();
    assert!(e.message().contains(why), "expected {why:?}, got {e}");
  }

  #[test]
  fn every_validation_rule() {
    full().validate().unwrap();
    for flags in [1, 4, 0x8000_0000, 0x3] {
      rejects(Header { flags, ..full() }, "invalid header flags");
    }
    for page_size in [0, 1, 256, 511, 513, 1000, 4095, 131072, u32::MAX] {
      rejects(
        Header {
          page_size,
          ..full()
        },
        "invalid page size",
      );
    }
    for page_size in [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536] {
      Header {
        page_size,
        ..full()
      }
      .validate()
      .unwrap();
    }
    rejects(
      Header {
        min_txid: 0,
        ..full()
      },
      "minimum transaction id required",
    );
    rejects(
      Header {
        max_txid: 0,
        min_txid: 1,
        ..full()
      },
      "maximum transaction id required",
    );
    rejects(
      Header {
        min_txid: 10,
        ..full()
      },
      "out of order",
    );
    Header {
      min_txid: 9,
      ..full()
    }
    .validate()
    .unwrap();
    rejects(
      Header {
        wal_offset: -1,
        ..full()
      },
      "wal offset cannot be negative",
    );
    rejects(
      Header {
        wal_size: -1,
        ..full()
      },
      "wal size cannot be negative",
    );
    let no_wal = Header {
      wal_offset: 0,
      wal_size: 0,
      wal_salt1: 0,
      wal_salt2: 0,
      ..full()
    };
    no_wal.validate().unwrap();
    rejects(
      Header {
        wal_salt1: 1,
        ..no_wal
      },
      "wal offset required if wal salt",
    );
    rejects(
      Header {
        wal_salt2: 1,
        ..no_wal
      },
      "wal offset required if wal salt",
    );
    rejects(
      Header {
        wal_size: 1,
        ..no_wal
      },
      "wal offset required if wal size",
    );
    let snap = Header {
      min_txid: 1,
      pre_apply_checksum: 0,
      ..full()
    };
    snap.validate().unwrap();
    rejects(
      Header {
        pre_apply_checksum: CHECKSUM_FLAG,
        ..snap
      },
      "must be zero on snapshots",
    );
    let nock = Header {
      flags: HEADER_FLAG_NO_CHECKSUM,
      pre_apply_checksum: 0,
      ..full()
    };
    nock.validate().unwrap();
    rejects(
      Header {
        pre_apply_checksum: CHECKSUM_FLAG,
        ..nock
      },
      "not allowed",
    );
    rejects(
      Header {
        pre_apply_checksum: 0,
        ..full()
      },
      "pre-apply checksum required",
    );
    rejects(
      Header {
        pre_apply_checksum: 0x1234,
        ..full()
      },
      "invalid pre-apply checksum format",
    );
  }

  #[test]
  fn lock_page_numbers() {
    assert_eq!(lock_pgno(512), 2_097_153);
    assert_eq!(lock_pgno(4096), 262_145);
    assert_eq!(lock_pgno(65536), 16_385);
    assert_eq!(full().lock_pgno(), 262_145);
  }
}

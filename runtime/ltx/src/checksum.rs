//! CRC-64/GO-ISO checksums as LTX stores them: bit 63 forced on so a stored checksum is never 0.

use crate::error::{Result, bail};
use crate::header::{is_valid_page_size, lock_pgno};
use crc::{CRC_64_GO_ISO, Crc, Digest, Table};

/// OR-ed into every stored checksum; 0 then means "absent".
pub const CHECKSUM_FLAG: u64 = 1 << 63;

/// Go's `crc64.ISO`; the 16-entry table is the fastest of the crc crate's implementations.
pub(crate) static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_GO_ISO);

pub(crate) type Crc64Digest = Digest<'static, u64, Table<16>>;

/// Plain CRC-64/GO-ISO of `data` (no flag), the building block of every LTX checksum.
pub fn crc64(data: &[u8]) -> u64 {
  CRC64.checksum(data)
}

/// Checksum of one page: flag | CRC(pgno big-endian ‖ page bytes).
pub fn page_checksum(pgno: u32, data: &[u8]) -> u64 {
  let mut d = CRC64.digest();
  d.update(&pgno.to_be_bytes());
  d.update(data);
  CHECKSUM_FLAG | d.finalize()
}

/// Database checksum of a whole image (pages 1..=len/page_size): flag | XOR of the page
/// checksums, skipping the lock page. It is what a tracked LTX file stores as pre- and
/// post-apply checksum; the empty database gives `CHECKSUM_FLAG`.
pub fn database_checksum(page_size: u32, image: &[u8]) -> Result<u64> {
  if !is_valid_page_size(page_size) {
    bail!("invalid page size: {page_size}");
  }
  let ps = page_size as usize;
  if !image.len().is_multiple_of(ps) {
    bail!(
      "database image of {} bytes is not a whole number of {ps}-byte pages",
      image.len()
    );
  }
  if image.len() / ps > u32::MAX as usize {
    bail!("database image has more than u32::MAX pages");
  }
  let pages = image
    .chunks_exact(ps)
    .enumerate()
    .map(|(i, p)| (i as u32 + 1, p));
  Ok(pages_checksum(page_size, pages))
}

/// Database checksum from (pgno, page) pairs: flag | XOR of their page checksums, the lock
/// page skipped. The caller supplies each page of the database once; order does not matter.
pub fn pages_checksum<'a>(page_size: u32, pages: impl IntoIterator<Item = (u32, &'a [u8])>) -> u64 {
  let lock = lock_pgno(page_size);
  let mut sum = CHECKSUM_FLAG;
  for (pgno, page) in pages {
    if pgno != lock {
      sum ^= page_checksum(pgno, page);
    }
  }
  CHECKSUM_FLAG | sum
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn crc64_go_iso_check_value() {
    assert_eq!(crc64(b"123456789"), 0xB909_56C7_75A4_1001);
  }

  #[test]
  fn page_checksum_has_flag_and_covers_pgno() {
    let page = [7u8; 512];
    let a = page_checksum(1, &page);
    let b = page_checksum(2, &page);
    assert_ne!(a, b);
    assert_eq!(a & CHECKSUM_FLAG, CHECKSUM_FLAG);
    let mut feed = 1u32.to_be_bytes().to_vec();
    feed.extend_from_slice(&page);
    assert_eq!(a, CHECKSUM_FLAG | crc64(&feed));
  }

  #[test]
  fn database_checksum_is_xor_of_pages() {
    let mut image = vec![0u8; 3 * 512];
    image[600] = 1;
    image[1100] = 2;
    let expect = CHECKSUM_FLAG
      | (page_checksum(1, &image[..512])
        ^ page_checksum(2, &image[512..1024])
        ^ page_checksum(3, &image[1024..]));
    assert_eq!(database_checksum(512, &image).unwrap(), expect);
    assert_eq!(database_checksum(512, &[]).unwrap(), CHECKSUM_FLAG);
  }

  #[test]
  fn pages_checksum_skips_lock_page() {
    // The lock page sits at byte 1 GiB, so use pgnos rather than a real image.
    let ps = 4096u32;
    let lock = lock_pgno(ps);
    assert_eq!(lock, 262_145);
    let a = [1u8; 4096];
    let b = [2u8; 4096];
    let without = pages_checksum(ps, [(lock - 1, &a[..]), (lock + 1, &b[..])]);
    let with = pages_checksum(ps, [(lock - 1, &a[..]), (lock, &a[..]), (lock + 1, &b[..])]);
    assert_eq!(with, without);
    assert_ne!(pages_checksum(ps, [(lock - 1, &a[..])]), without);
  }

  #[test]
  fn database_checksum_rejects_bad_input() {
    assert!(database_checksum(1000, &[]).is_err());
    let e = database_checksum(512, &[0; 513]).unwrap_err();
    assert!(e.message().contains("whole number"), "{e}");
  }
}

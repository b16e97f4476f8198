//! Rebuilding a database image from a snapshot and the contiguous deltas after it.

use crate::checksum::database_checksum;
use crate::decode::LtxFile;
use crate::error::{Result, bail};

/// `IsContiguous` of Litestream: the next file may overlap the previous one but not leave a gap,
/// and must move the position forward.
pub fn is_contiguous(prev_max_txid: u64, min_txid: u64, max_txid: u64) -> bool {
  min_txid <= prev_max_txid.saturating_add(1) && max_txid > prev_max_txid
}

/// Applies `files` in order: a snapshot (min TXID 1) and then contiguous files. Returns the
/// database image, `commit * page_size` bytes of the last file, with the lock page as zeros.
/// Tracked checksums (files without the NoChecksum flag) are verified along the way.
pub fn apply(files: &[LtxFile]) -> Result<Vec<u8>> {
  let Some(first) = files.first() else {
    bail!("no LTX files to apply");
  };
  if !first.header.is_snapshot() {
    bail!(
      "the first file must be a snapshot (min TXID 1), it starts at TXID {}",
      first.header.min_txid
    );
  }
  apply_onto(Vec::new(), 0, files)
}

/// Applies `files` onto `image`, which is state `prev_max` of their
/// lineage: how a paged epoch's deltas (from TXID 2; its state 1 is the
/// image of the chain it links to) continue an image.
pub fn apply_onto(mut image: Vec<u8>, mut prev_max: u64, files: &[LtxFile]) -> Result<Vec<u8>> {
  let Some(first) = files.first() else {
    return Ok(image);
  };
  let page_size = first.header.page_size;
  let ps = page_size as usize;
  if !image.len().is_multiple_of(ps) {
    bail!(
      "an image of {} bytes is not in {ps}-byte pages",
      image.len()
    );
  }
  for (i, f) in files.iter().enumerate() {
    let h = &f.header;
    let name = format!("file {i} (TXID {}..={})", h.min_txid, h.max_txid);
    if h.page_size != page_size {
      bail!(
        "{name}: page size {} differs from the snapshot's {page_size}",
        h.page_size
      );
    }
    if !is_contiguous(prev_max, h.min_txid, h.max_txid) {
      if h.min_txid > prev_max.saturating_add(1) {
        bail!("{name}: gap after TXID {prev_max}");
      }
      bail!("{name}: does not advance past TXID {prev_max}");
    }
    if !h.no_checksum() && !h.is_snapshot() && h.min_txid == prev_max + 1 {
      let have = database_checksum(page_size, &image)?;
      if have != h.pre_apply_checksum {
        bail!(
          "{name}: pre-apply checksum 0x{:016x} does not match the database (0x{have:016x})",
          h.pre_apply_checksum
        );
      }
    }

    // Growing fills with zeros; shrinking drops the pages past the new end, so that a later
    // regrowth does not resurrect them.
    let Some(len) = (h.commit as usize).checked_mul(ps) else {
      bail!(
        "{name}: commit size {} pages does not fit in memory",
        h.commit
      );
    };
    if len > image.len() {
      if image.try_reserve_exact(len - image.len()).is_err() {
        bail!("{name}: cannot allocate a {len}-byte database image");
      }
      image.resize(len, 0);
    } else {
      image.truncate(len);
    }
    for page in &f.pages {
      // LtxFile's fields are public, so re-check what `decode` guarantees.
      if page.pgno == 0 || page.pgno > h.commit || page.data.len() != ps {
        bail!(
          "{name}: page {} is not a {ps}-byte page within the commit size",
          page.pgno
        );
      }
      let at = (page.pgno as usize - 1) * ps;
      image[at..at + ps].copy_from_slice(&page.data);
    }

    if !h.no_checksum() {
      let have = database_checksum(page_size, &image)?;
      if have != f.post_apply_checksum {
        bail!(
          "{name}: post-apply checksum 0x{:016x} does not match the database (0x{have:016x})",
          f.post_apply_checksum
        );
      }
    }
    prev_max = h.max_txid;
  }
  Ok(image)
}

//! Writing LTX files: header, compressed page frames, page index, trailer.

use crate::checksum::{CHECKSUM_FLAG, CRC64, Crc64Digest, page_checksum};
use crate::error::{LtxError, Result, bail};
use crate::header::Header;
use crate::lz4;
use crate::varint::put_uvarint;

/// Page header flag: a 4-byte compressed size and a raw LZ4 block follow.
pub const PAGE_FLAG_SIZE: u16 = 0x0001;
/// Page header (pgno, flags) size; the 6-byte all-zero terminator has the same size.
pub const PAGE_HEADER_SIZE: usize = 6;
pub const TRAILER_SIZE: usize = 16;

/// Builds one LTX file in memory. Pages go in strictly ascending pgno order; a snapshot
/// (`min_txid == 1`) must get every page 1..=commit except the lock page.
pub struct Encoder {
  header: Header,
  buf: Vec<u8>,
  digest: Crc64Digest,
  /// (pgno, offset of the frame's page header, frame size) for the page index.
  index: Vec<(u32, u64, u64)>,
  last_pgno: u32,
  /// Database checksum accumulated over a tracked snapshot's pages.
  snapshot_checksum: u64,
  post_apply: Option<u64>,
  /// Tests write the legacy per-page LZ4 frame format to exercise the decoder's second path.
  legacy_frames: bool,
}

impl Encoder {
  /// Validates `header` and writes it.
  pub fn new(header: Header) -> Result<Self> {
    header.validate()?;
    let bytes = header.encode();
    let mut digest = CRC64.digest();
    digest.update(&bytes);
    Ok(Self {
      header,
      buf: bytes.to_vec(),
      digest,
      index: Vec::new(),
      last_pgno: 0,
      snapshot_checksum: CHECKSUM_FLAG,
      post_apply: None,
      legacy_frames: false,
    })
  }

  #[cfg(test)]
  pub(crate) fn with_legacy_frames(mut self) -> Self {
    self.legacy_frames = true;
    self
  }

  pub fn header(&self) -> &Header {
    &self.header
  }

  /// Post-apply database checksum for a file whose header tracks checksums (flags 0). A
  /// tracked snapshot computes its own; a NoChecksum file stores 0 and must not get one.
  pub fn set_post_apply_checksum(&mut self, checksum: u64) {
    self.post_apply = Some(checksum);
  }

  /// Appends one page frame.
  pub fn add_page(&mut self, pgno: u32, data: &[u8]) -> Result<()> {
    let h = &self.header;
    if data.len() != h.page_size as usize {
      bail!(
        "page {pgno} has {} bytes, page size is {}",
        data.len(),
        h.page_size
      );
    }
    if pgno == 0 {
      bail!("page number 0 is not a page");
    }
    if pgno <= self.last_pgno {
      bail!(
        "pages out of order: page {pgno} after page {}",
        self.last_pgno
      );
    }
    if pgno > h.commit {
      bail!(
        "page {pgno} is beyond the commit size of {} pages",
        h.commit
      );
    }
    if pgno == h.lock_pgno() {
      bail!("page {pgno} is the lock page and is never encoded");
    }
    if h.is_snapshot() {
      let want = next_snapshot_pgno(self.last_pgno, h.lock_pgno());
      if u64::from(pgno) != want {
        bail!("snapshot is missing page {want} (next page given is {pgno})");
      }
    }

    let offset = self.buf.len() as u64;
    let mut frame_header = [0u8; PAGE_HEADER_SIZE];
    frame_header[0..4].copy_from_slice(&pgno.to_be_bytes());
    if self.legacy_frames {
      self.buf.extend_from_slice(&frame_header);
      self.digest.update(&frame_header);
      self.buf.extend_from_slice(&lz4::compress_frame(data));
    } else {
      frame_header[4..6].copy_from_slice(&PAGE_FLAG_SIZE.to_be_bytes());
      let block = lz4::compress_block(data);
      // A page is at most 64 KiB, so its LZ4 bound fits easily in u32.
      let size = (block.len() as u32).to_be_bytes();
      self.buf.extend_from_slice(&frame_header);
      self.buf.extend_from_slice(&size);
      self.buf.extend_from_slice(&block);
      self.digest.update(&frame_header);
      self.digest.update(&size);
    }
    // The file checksum covers the decompressed page, not the LZ4 bytes.
    self.digest.update(data);
    self
      .index
      .push((pgno, offset, self.buf.len() as u64 - offset));
    self.last_pgno = pgno;
    if h.is_snapshot() && !h.no_checksum() {
      self.snapshot_checksum = CHECKSUM_FLAG | (self.snapshot_checksum ^ page_checksum(pgno, data));
    }
    Ok(())
  }

  /// Writes the terminator, page index and trailer; returns the whole file.
  pub fn finish(mut self) -> Result<Vec<u8>> {
    let h = self.header;
    if h.is_snapshot() {
      let want = next_snapshot_pgno(self.last_pgno, h.lock_pgno());
      if want <= u64::from(h.commit) {
        bail!(
          "snapshot is missing pages {want}..={} of its commit size",
          h.commit
        );
      }
    }
    let post_apply = self.post_apply_checksum()?;

    let terminator = [0u8; PAGE_HEADER_SIZE];
    self.buf.extend_from_slice(&terminator);
    self.digest.update(&terminator);

    let index_start = self.buf.len();
    for &(pgno, offset, size) in &self.index {
      put_uvarint(&mut self.buf, pgno.into());
      put_uvarint(&mut self.buf, offset);
      put_uvarint(&mut self.buf, size);
    }
    put_uvarint(&mut self.buf, 0);
    // The length excludes its own 8 bytes, so a reader can find the index from the tail.
    let index_len = (self.buf.len() - index_start) as u64;
    self.buf.extend_from_slice(&index_len.to_be_bytes());
    self.buf.extend_from_slice(&post_apply.to_be_bytes());
    self.digest.update(&self.buf[index_start..]);

    let file_checksum = CHECKSUM_FLAG | self.digest.finalize();
    self.buf.extend_from_slice(&file_checksum.to_be_bytes());
    Ok(self.buf)
  }

  fn post_apply_checksum(&self) -> Result<u64> {
    let h = &self.header;
    match (h.no_checksum(), self.post_apply) {
      (true, None | Some(0)) => Ok(0),
      (true, Some(c)) => bail!("post-apply checksum 0x{c:016x} not allowed with no-checksum flag"),
      (false, Some(c)) if c & CHECKSUM_FLAG == 0 => {
        bail!("invalid post-apply checksum format: 0x{c:016x}")
      }
      (false, Some(c)) if h.is_snapshot() && c != self.snapshot_checksum => bail!(
        "post-apply checksum 0x{c:016x} does not match the snapshot's pages (0x{:016x})",
        self.snapshot_checksum
      ),
      (false, Some(c)) => Ok(c),
      (false, None) if h.is_snapshot() => Ok(self.snapshot_checksum),
      (false, None) => Err(LtxError::new(
        "post-apply checksum required: the header tracks checksums and this is not a snapshot",
      )),
    }
  }
}

/// The pgno a snapshot must hold after `last`: the next one, stepping over the lock page.
/// u64 so that the page after u32::MAX does not wrap.
pub(crate) fn next_snapshot_pgno(last: u32, lock: u32) -> u64 {
  let next = u64::from(last) + 1;
  if next == u64::from(lock) {
    next + 1
  } else {
    next
  }
}

/// Encodes a whole file from a header and pages in ascending pgno order.
pub fn encode<'a>(
  header: &Header,
  pages: impl IntoIterator<Item = (u32, &'a [u8])>,
) -> Result<Vec<u8>> {
  let mut enc = Encoder::new(*header)?;
  for (pgno, data) in pages {
    enc.add_page(pgno, data)?;
  }
  enc.finish()
}

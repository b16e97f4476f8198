//! Reading LTX files: every structural rule is checked and the file checksum verified.
//! Nothing here panics on malformed input; each defect becomes an `LtxError`.

use crate::checksum::{CHECKSUM_FLAG, CRC64, page_checksum};
use crate::encode::{PAGE_FLAG_SIZE, PAGE_HEADER_SIZE, TRAILER_SIZE, next_snapshot_pgno};
use crate::error::{Result, bail};
use crate::header::{HEADER_SIZE, Header, be_u16, be_u32, be_u64};
use crate::lz4;
use crate::varint::get_uvarint;

/// One decompressed page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
  pub pgno: u32,
  pub data: Vec<u8>,
}

/// A decoded, verified LTX file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LtxFile {
  pub header: Header,
  /// In strictly ascending pgno order, each `header.page_size` bytes.
  pub pages: Vec<Page>,
  /// 0 for NoChecksum files.
  pub post_apply_checksum: u64,
  pub file_checksum: u64,
}

/// Decodes and verifies a whole LTX file: header, frames (block and legacy LZ4-frame format),
/// terminator, page index (must describe the frames exactly), trailer and file checksum.
pub fn decode(b: &[u8]) -> Result<LtxFile> {
  let header = Header::decode(b)?;
  let page_size = header.page_size as usize;
  let lock = header.lock_pgno();
  let tracked_snapshot = header.is_snapshot() && !header.no_checksum();
  let mut digest = CRC64.digest();
  digest.update(&b[..HEADER_SIZE]);

  let mut pages = Vec::new();
  // (offset, size) of each frame, compared against the page index.
  let mut frames: Vec<(u64, u64)> = Vec::new();
  let mut last_pgno = 0u32;
  let mut snapshot_checksum = CHECKSUM_FLAG;
  let mut pos = HEADER_SIZE;
  loop {
    let Some(ph) = b.get(pos..pos + PAGE_HEADER_SIZE) else {
      bail!("truncated page header at offset {pos}");
    };
    let pgno = be_u32(ph, 0);
    let flags = be_u16(ph, 4);
    if pgno == 0 && flags == 0 {
      digest.update(ph);
      pos += PAGE_HEADER_SIZE;
      break;
    }
    let at = format!("page frame {} at offset {pos}", pages.len());
    if pgno == 0 {
      bail!("{at}: page number 0 with flags 0x{flags:04x}");
    }
    if flags & !PAGE_FLAG_SIZE != 0 {
      bail!("{at}: invalid page flags 0x{flags:04x}");
    }
    if pgno <= last_pgno {
      bail!("{at}: pages out of order: page {pgno} after page {last_pgno}");
    }
    if pgno > header.commit {
      bail!(
        "{at}: page {pgno} is beyond the commit size of {} pages",
        header.commit
      );
    }
    if pgno == lock {
      bail!("{at}: page {pgno} is the lock page, which is never stored");
    }
    if header.is_snapshot() {
      let want = next_snapshot_pgno(last_pgno, lock);
      if u64::from(pgno) != want {
        bail!("{at}: snapshot is missing page {want} (found page {pgno})");
      }
    }

    let frame_start = pos;
    pos += PAGE_HEADER_SIZE;
    let data = if flags & PAGE_FLAG_SIZE != 0 {
      let Some(size) = b.get(pos..pos + 4) else {
        bail!("{at}: truncated compressed size");
      };
      let size_field = be_u32(size, 0) as usize;
      pos += 4;
      let Some(block) = b.get(pos..pos.saturating_add(size_field)) else {
        bail!(
          "{at}: truncated lz4 block: {size_field} bytes, {} left",
          b.len() - pos
        );
      };
      pos += size_field;
      digest.update(&b[frame_start..frame_start + PAGE_HEADER_SIZE + 4]);
      lz4::decompress_block(block, page_size).map_err(|e| e.context(&at))?
    } else {
      let len = lz4::frame_len(&b[pos..]).map_err(|e| e.context(&at))?;
      let frame = &b[pos..pos + len];
      pos += len;
      digest.update(ph);
      lz4::decompress_frame(frame, page_size).map_err(|e| e.context(&at))?
    };
    digest.update(&data);
    if tracked_snapshot {
      snapshot_checksum = CHECKSUM_FLAG | (snapshot_checksum ^ page_checksum(pgno, &data));
    }
    frames.push((frame_start as u64, (pos - frame_start) as u64));
    pages.push(Page { pgno, data });
    last_pgno = pgno;
  }
  if header.is_snapshot() {
    let want = next_snapshot_pgno(last_pgno, lock);
    if want <= u64::from(header.commit) {
      bail!(
        "snapshot is missing pages {want}..={} of its commit size",
        header.commit
      );
    }
  }

  let index_start = pos;
  for (i, (page, &(offset, size))) in pages.iter().zip(&frames).enumerate() {
    let entry = read_index_entry(b, &mut pos).map_err(|e| e.context(&format!("index {i}")))?;
    if entry != (u64::from(page.pgno), offset, size) {
      bail!(
        "page index entry {i} is (pgno {}, offset {}, size {}) but the frame is \
         (pgno {}, offset {offset}, size {size})",
        entry.0,
        entry.1,
        entry.2,
        page.pgno
      );
    }
  }
  let (end, n) = get_uvarint(&b[pos..]).map_err(|e| e.context("page index terminator"))?;
  if end != 0 {
    bail!(
      "page index has more entries than the file has pages ({})",
      pages.len()
    );
  }
  pos += n;
  let Some(len_field) = b.get(pos..pos + 8) else {
    bail!("truncated page index length at offset {pos}");
  };
  let index_len = be_u64(len_field, 0);
  if index_len != (pos - index_start) as u64 {
    bail!(
      "page index length field says {index_len} bytes, the index is {}",
      pos - index_start
    );
  }
  pos += 8;

  let rest = b.len() - pos;
  if rest < TRAILER_SIZE {
    bail!("truncated trailer: {rest} of {TRAILER_SIZE} bytes");
  }
  if rest > TRAILER_SIZE {
    bail!(
      "{} unexpected bytes after the page index",
      rest - TRAILER_SIZE
    );
  }
  let post_apply_checksum = be_u64(b, pos);
  let file_checksum = be_u64(b, pos + 8);
  digest.update(&b[index_start..pos + 8]);

  if header.no_checksum() {
    if post_apply_checksum != 0 {
      bail!("post-apply checksum not allowed with the no-checksum flag");
    }
  } else if post_apply_checksum == 0 {
    bail!("post-apply checksum required");
  } else if post_apply_checksum & CHECKSUM_FLAG == 0 {
    bail!("invalid post-apply checksum format: 0x{post_apply_checksum:016x}");
  }
  if file_checksum & CHECKSUM_FLAG == 0 {
    bail!("invalid file checksum format: 0x{file_checksum:016x}");
  }
  let computed = CHECKSUM_FLAG | digest.finalize();
  if computed != file_checksum {
    bail!(
      "file checksum mismatch: trailer has 0x{file_checksum:016x}, content is 0x{computed:016x}"
    );
  }
  if tracked_snapshot && post_apply_checksum != snapshot_checksum {
    bail!(
      "post-apply checksum 0x{post_apply_checksum:016x} does not match the snapshot's pages \
       (0x{snapshot_checksum:016x})"
    );
  }
  if !header.no_checksum() && header.commit == 0 && post_apply_checksum != CHECKSUM_FLAG {
    bail!("post-apply checksum of an empty database must be 0x{CHECKSUM_FLAG:016x}");
  }
  Ok(LtxFile {
    header,
    pages,
    post_apply_checksum,
    file_checksum,
  })
}

fn read_index_entry(b: &[u8], pos: &mut usize) -> Result<(u64, u64, u64)> {
  let mut field = || -> Result<u64> {
    let (v, n) = get_uvarint(&b[*pos..])?;
    *pos += n;
    Ok(v)
  };
  let pgno = field()?;
  if pgno == 0 {
    bail!("page index ends before its page");
  }
  Ok((pgno, field()?, field()?))
}

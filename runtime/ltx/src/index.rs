//! Random access to an LTX file in a bucket: its page index read from the
//! file's end, and one page decoded from its frame, so a paged cell reads
//! the pages it touches without fetching whole files.

use crate::decode::Page;
use crate::encode::{PAGE_FLAG_SIZE, PAGE_HEADER_SIZE, TRAILER_SIZE};
use crate::error::{Result, bail};
use crate::header::{be_u16, be_u32, be_u64};
use crate::lz4;
use crate::varint::get_uvarint;

/// Where one page's frame is in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameAt {
  pub pgno: u32,
  pub offset: u64,
  pub size: u64,
}

/// What the last bytes of a file say of its page index.
#[derive(Debug, PartialEq, Eq)]
pub enum IndexTail {
  /// The index: the file's last `suffix` bytes are needed.
  Needs {
    suffix: u64,
  },
  Index(Vec<FrameAt>),
}

/// Reads the page index from the last bytes of a file (`tail`: at least
/// the 24 bytes of the index length and the trailer).
pub fn index_from_tail(tail: &[u8]) -> Result<IndexTail> {
  let fixed = 8 + TRAILER_SIZE;
  if tail.len() < fixed {
    return Ok(IndexTail::Needs {
      suffix: fixed as u64,
    });
  }
  let len_at = tail.len() - fixed;
  let index_len = be_u64(tail, len_at);
  let Some(start) = (len_at as u64).checked_sub(index_len) else {
    return Ok(IndexTail::Needs {
      suffix: index_len.saturating_add(fixed as u64),
    });
  };
  let b = &tail[start as usize..len_at];
  let mut pos = 0;
  let mut out = Vec::new();
  loop {
    let (pgno, n) = get_uvarint(&b[pos..])?;
    pos += n;
    if pgno == 0 {
      break;
    }
    let (offset, n) = get_uvarint(&b[pos..])?;
    pos += n;
    let (size, n) = get_uvarint(&b[pos..])?;
    pos += n;
    let Ok(pgno) = u32::try_from(pgno) else {
      bail!("page index entry for page {pgno}");
    };
    out.push(FrameAt { pgno, offset, size });
  }
  if pos != b.len() {
    bail!("page index length field says {index_len} bytes, the index is {pos}");
  }
  Ok(IndexTail::Index(out))
}

/// Decodes one page frame (the bytes the index names).
pub fn decode_frame(frame: &[u8], page_size: u32) -> Result<Page> {
  let Some(ph) = frame.get(..PAGE_HEADER_SIZE) else {
    bail!("truncated page header");
  };
  let (pgno, flags) = (be_u32(ph, 0), be_u16(ph, 4));
  if pgno == 0 {
    bail!("a frame for page 0");
  }
  let rest = &frame[PAGE_HEADER_SIZE..];
  let data = if flags & PAGE_FLAG_SIZE != 0 {
    let Some(size) = rest.get(..4) else {
      bail!("page {pgno}: truncated compressed size");
    };
    let Some(block) = rest.get(4..4 + be_u32(size, 0) as usize) else {
      bail!("page {pgno}: truncated lz4 block");
    };
    lz4::decompress_block(block, page_size as usize)?
  } else {
    lz4::decompress_frame(rest, page_size as usize)?
  };
  Ok(Page { pgno, data })
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::{Header, decode, encode};

  #[test]
  fn the_index_and_each_frame_read_alone_give_the_file() {
    let page_size = 4096u32;
    let pages: Vec<(u32, Vec<u8>)> = (1..=40u32)
      .map(|p| (p, (0..page_size).map(|i| (i * p % 251) as u8).collect()))
      .collect();
    let header = Header::snapshot(page_size, 40, 1, 9);
    let bytes = encode(&header, pages.iter().map(|(p, d)| (*p, &d[..]))).unwrap();
    let file = decode(&bytes).unwrap();
    // A short tail asks for more; the whole index comes from its suffix.
    let IndexTail::Needs { suffix } = index_from_tail(&bytes[bytes.len() - 30..]).unwrap() else {
      panic!("30 bytes cannot hold 40 entries");
    };
    let IndexTail::Index(index) = index_from_tail(&bytes[bytes.len() - suffix as usize..]).unwrap()
    else {
      panic!("the suffix it asked for holds the index");
    };
    assert_eq!(index.len(), 40);
    for (at, page) in index.iter().zip(&file.pages) {
      let frame = &bytes[at.offset as usize..(at.offset + at.size) as usize];
      assert_eq!(&decode_frame(frame, page_size).unwrap(), page);
    }
    assert!(decode_frame(&[0; 3], page_size).is_err());
  }
}

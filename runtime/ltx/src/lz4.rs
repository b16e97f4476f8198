//! Page payloads: raw LZ4 blocks (current format) and whole LZ4 frames (legacy v3 writers).

use crate::error::{Result, bail};
use std::io::Read;

/// One page as a raw LZ4 block. Not `compress_prepend_size`: LTX keeps its own big-endian
/// compressed size in the frame header.
pub(crate) fn compress_block(page: &[u8]) -> Vec<u8> {
  lz4_flex::block::compress(page)
}

/// Decompresses a block that must yield exactly `page_size` bytes.
pub(crate) fn decompress_block(block: &[u8], page_size: usize) -> Result<Vec<u8>> {
  let mut out = vec![0u8; page_size];
  match lz4_flex::block::decompress_into(block, &mut out) {
    Ok(n) if n == page_size => Ok(out),
    Ok(n) => bail!("lz4 block decompressed to {n} bytes, expected {page_size}"),
    Err(e) => bail!("lz4 block: {e}"),
  }
}

/// One page as a whole LZ4 frame, the legacy v3 payload; only tests write it.
pub(crate) fn compress_frame(page: &[u8]) -> Vec<u8> {
  use std::io::Write;
  // Go's pierrec/lz4 writer, which legacy files came from, adds a content checksum.
  let info = lz4_flex::frame::FrameInfo::new().content_checksum(true);
  let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
  enc.write_all(page).expect("write to Vec");
  enc.finish().expect("finish to Vec")
}

const FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
const FLG_BLOCK_CHECKSUM: u8 = 0x10;
const FLG_CONTENT_SIZE: u8 = 0x08;
const FLG_CONTENT_CHECKSUM: u8 = 0x04;
const FLG_DICT_ID: u8 = 0x01;
const BLOCK_UNCOMPRESSED: u32 = 0x8000_0000;

/// Length of the LZ4 frame at the start of `b`. The frame has no outer size in LTX, so walk
/// its structure (descriptor, block sizes, end mark, optional checksums) to find where the
/// next page header begins. The frame decoder then gets exactly these bytes, so it can neither
/// read into the next page nor stop early at a missing end mark.
pub(crate) fn frame_len(b: &[u8]) -> Result<usize> {
  if b.len() < 7 {
    bail!("truncated lz4 frame header");
  }
  if b[0..4] != FRAME_MAGIC {
    bail!("bad lz4 frame magic {:02x?}", &b[0..4]);
  }
  let flg = b[4];
  let mut pos: usize = 6; // magic, FLG, BD
  if flg & FLG_CONTENT_SIZE != 0 {
    pos += 8;
  }
  if flg & FLG_DICT_ID != 0 {
    pos += 4;
  }
  pos += 1; // header checksum
  loop {
    let Some(word) = b.get(pos..pos.saturating_add(4)) else {
      bail!("truncated lz4 frame: no block size at frame offset {pos}");
    };
    let word = u32::from_le_bytes(word.try_into().expect("4 bytes"));
    pos += 4;
    if word == 0 {
      break;
    }
    // Saturating: a huge size must end in "truncated", not an overflow.
    pos = pos.saturating_add((word & !BLOCK_UNCOMPRESSED) as usize);
    if flg & FLG_BLOCK_CHECKSUM != 0 {
      pos = pos.saturating_add(4);
    }
  }
  if flg & FLG_CONTENT_CHECKSUM != 0 {
    pos = pos.saturating_add(4);
  }
  if pos > b.len() {
    bail!("truncated lz4 frame: needs {pos} bytes, {} left", b.len());
  }
  Ok(pos)
}

/// Decompresses one whole frame (exactly `frame`, as found by `frame_len`) into one page.
pub(crate) fn decompress_frame(frame: &[u8], page_size: usize) -> Result<Vec<u8>> {
  let mut out = Vec::with_capacity(page_size + 1);
  // One byte more than a page shows an oversized frame without decompressing all of it.
  let mut dec = lz4_flex::frame::FrameDecoder::new(frame).take(page_size as u64 + 1);
  if let Err(e) = dec.read_to_end(&mut out) {
    bail!("lz4 frame: {e}");
  }
  if out.len() != page_size {
    bail!(
      "lz4 frame decompressed to {} bytes, expected {page_size}",
      out.len()
    );
  }
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn block_round_trip_and_size_mismatch() {
    let page: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let c = compress_block(&page);
    assert_eq!(decompress_block(&c, 4096).unwrap(), page);
    assert!(decompress_block(&c, 8192).is_err());
    assert!(decompress_block(&c, 2048).is_err());
    assert!(decompress_block(&[], 512).is_err());
  }

  #[test]
  fn frame_walk_finds_the_exact_end() {
    let page: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 13) as u8).collect();
    let f = compress_frame(&page);
    assert_eq!(frame_len(&f).unwrap(), f.len());
    let mut more = f.clone();
    more.extend_from_slice(&[1, 2, 3]);
    assert_eq!(frame_len(&more).unwrap(), f.len());
    for n in 0..f.len() {
      assert!(frame_len(&f[..n]).is_err(), "prefix {n}");
    }
    assert_eq!(decompress_frame(&f, 4096).unwrap(), page);
    assert!(decompress_frame(&f, 2048).is_err());
    assert!(decompress_frame(&f, 8192).is_err());
  }
}

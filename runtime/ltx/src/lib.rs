//! LTX v3 files, as Litestream 0.5 and celld write them, for replicating a cell's SQLite
//! database to an object-store bucket.
//!
//! Layout (all integers big-endian): a 100-byte header; page frames (pgno, flags, and for
//! flag 1 a compressed size and a raw LZ4 block; for flag 0 a legacy LZ4 frame) in ascending
//! pgno order; a 6-byte zero terminator; a varint page index with its length; a 16-byte
//! trailer (post-apply checksum, file checksum). Checksums are CRC-64/GO-ISO with bit 63 set.
//! cellhost writes NoChecksum files only, because Litestream's restore rejects tracked
//! post-apply checksums. See `shared/reference/ltx-and-buckets.md` §2.

mod apply;
mod checksum;
mod decode;
mod encode;
mod error;
mod header;
mod index;
mod key;
mod lz4;
mod varint;

pub use apply::{apply, apply_onto, is_contiguous};
pub use checksum::{CHECKSUM_FLAG, crc64, database_checksum, page_checksum, pages_checksum};
pub use decode::{LtxFile, Page, decode};
pub use encode::{Encoder, PAGE_FLAG_SIZE, PAGE_HEADER_SIZE, TRAILER_SIZE, encode};
pub use error::{LtxError, Result};
pub use header::{
  HEADER_FLAG_NO_CHECKSUM, HEADER_SIZE, Header, MAGIC, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
  is_valid_page_size, lock_pgno,
};
pub use index::{FrameAt, IndexTail, decode_frame, index_from_tail};
pub use key::{
  CellLtxKey, MAX_SCOPE_LEN, cell_ltx_key, cell_ltx_prefix, is_valid_scope, ltx_filename,
  parse_cell_ltx_key, parse_ltx_filename,
};

#[cfg(test)]
mod tests;

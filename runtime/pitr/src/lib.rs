//! Point-in-time recovery (`ctx.storage.getCurrentBookmark()` and friends).
//!
//! A bookmark names one committed state of one object: the epoch of its LTX
//! chain and the TXID within it (`bookmark`). Without a bucket, the states
//! are kept in a local history log next to the database (`history`); on a
//! bucket, the bucket's LTX chains are the history (see `cellhost_fleet`).

mod bookmark;
mod history;

pub use bookmark::{Bookmark, DAY_MS};
pub use history::{History, Point, Resume, WalMark};

//! Page capture for replication: the pages each commit changed, read from
//! the WAL frames the commit appended. With capture on, SQLite never
//! checkpoints by itself (`wal_autocheckpoint=0`): frames stay in the WAL
//! until they were taken, and only then `checkpoint` folds them into the
//! database, so no commit's frames are lost to a checkpoint. Everything
//! here runs between transactions, never inside one.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use crate::{CellDb, StorageError, sqlite_error};

const WAL_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;

/// Pages of the database after some commits: `commit` is its size in pages.
#[derive(Debug, Default, PartialEq)]
pub struct Captured {
  pub page_size: u32,
  pub commit: u32,
  pub pages: BTreeMap<u32, Vec<u8>>,
}

/// How far the WAL was read.
#[derive(Default)]
pub(crate) struct WalCursor {
  /// The byte offset after the last commit frame taken; 0: read the header.
  offset: u64,
  salts: (u32, u32),
  page_size: u32,
}

fn io(e: std::io::Error) -> StorageError {
  StorageError(format!("reading the WAL: {e}"))
}

fn be32(b: &[u8]) -> u32 {
  u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl CellDb {
  /// Starts capture: folds what the WAL holds into the database first, so
  /// the next `snapshot` or `take_captured` starts from a clean WAL.
  pub fn enable_capture(&mut self) -> Result<(), StorageError> {
    self.internal(|db| {
      db.conn
        .execute_batch("PRAGMA wal_autocheckpoint=0")
        .map_err(sqlite_error)
    })?;
    self.capture = Some(WalCursor::default());
    self.checkpoint()
  }

  fn not_in_txn(&self, what: &str) -> Result<(), StorageError> {
    if self.in_txn {
      return Err(StorageError(format!("{what} inside an open transaction")));
    }
    Ok(())
  }

  /// Folds every WAL frame into the database file and empties the WAL.
  /// Call only after the frames were taken.
  pub fn checkpoint(&mut self) -> Result<(), StorageError> {
    self.not_in_txn("a checkpoint")?;
    let busy: i64 = self.internal(|db| {
      db.conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .map_err(sqlite_error)
    })?;
    if busy != 0 {
      return Err(StorageError("the WAL checkpoint could not finish".into()));
    }
    if let Some(c) = &mut self.capture {
      *c = WalCursor::default();
    }
    // The WAL is empty: the next commit writes its header afresh.
    self.fresh_wal = true;
    Ok(())
  }

  /// The whole database as of the last commit (the first file of a
  /// generation): checkpoints, then reads the database file.
  pub fn snapshot(&mut self) -> Result<Captured, StorageError> {
    self.checkpoint()?;
    let page_size: u32 = self.internal(|db| {
      db.conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .map_err(sqlite_error)
    })?;
    let image = std::fs::read(&self.path).map_err(io)?;
    let mut out = Captured {
      page_size,
      commit: (image.len() / page_size as usize) as u32,
      pages: BTreeMap::new(),
    };
    for (i, page) in image.chunks_exact(page_size as usize).enumerate() {
      out.pages.insert(i as u32 + 1, page.to_vec());
    }
    Ok(out)
  }

  /// The pages committed since the last call (later versions win) and the
  /// database size after the last commit; `None` when nothing committed.
  pub fn take_captured(&mut self) -> Result<Option<Captured>, StorageError> {
    self.not_in_txn("page capture")?;
    let wal = self.wal_path();
    let Some(cursor) = self.capture.as_mut() else {
      return Err(StorageError("page capture is not enabled".into()));
    };
    let mut f = match std::fs::File::open(&wal) {
      Ok(f) => f,
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
      Err(e) => return Err(io(e)),
    };
    let len = f.metadata().map_err(io)?.len();
    if cursor.offset == 0 {
      if len < WAL_HEADER {
        return Ok(None);
      }
      let mut h = [0u8; WAL_HEADER as usize];
      f.read_exact(&mut h).map_err(io)?;
      cursor.page_size = be32(&h[8..]);
      cursor.salts = (be32(&h[16..]), be32(&h[20..]));
      cursor.offset = WAL_HEADER;
    }
    let frame = FRAME_HEADER + u64::from(cursor.page_size);
    f.seek(SeekFrom::Start(cursor.offset)).map_err(io)?;
    let mut pending = BTreeMap::new();
    let mut out = Captured {
      page_size: cursor.page_size,
      ..Captured::default()
    };
    let mut pos = cursor.offset;
    let mut buf = vec![0u8; frame as usize];
    while pos + frame <= len {
      f.read_exact(&mut buf).map_err(io)?;
      if (be32(&buf[8..]), be32(&buf[12..])) != cursor.salts {
        break; // a frame of an older WAL generation: the end
      }
      pending.insert(be32(&buf), buf[FRAME_HEADER as usize..].to_vec());
      pos += frame;
      let commit = be32(&buf[4..]);
      if commit != 0 {
        // A commit frame ends a transaction: its pages are complete.
        out.pages.append(&mut pending);
        out.commit = commit;
        cursor.offset = pos;
      }
    }
    Ok((out.commit != 0).then_some(out))
  }

  /// Checkpoints once the WAL outgrew `max_bytes` (after a take).
  pub fn checkpoint_if_large(&mut self, max_bytes: u64) -> Result<(), StorageError> {
    let size = std::fs::metadata(self.wal_path())
      .map(|m| m.len())
      .unwrap_or(0);
    if size > max_bytes {
      self.checkpoint()?;
    }
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn ltx(c: &Captured, min: u64, max: u64) -> cellhost_ltx::LtxFile {
    let h = cellhost_ltx::Header::delta(c.page_size, c.commit, min, max, 0);
    let pages = c
      .pages
      .iter()
      .filter(|(p, _)| **p != cellhost_ltx::lock_pgno(c.page_size))
      .map(|(p, d)| (*p, d.as_slice()));
    cellhost_ltx::decode(&cellhost_ltx::encode(&h, pages).unwrap()).unwrap()
  }

  /// A generation (snapshot, then one LTX file per commit, with our own
  /// checkpoints in between) rebuilds the database byte for byte.
  #[test]
  fn captured_commits_rebuild_the_database() {
    let dir = std::env::temp_dir().join(format!("cellhost-capture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("c.sqlite");
    let mut db = CellDb::open(&path).unwrap();
    db.conn
      .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
      .unwrap();
    db.enable_capture().unwrap();
    let snap = db.snapshot().unwrap();
    assert!(snap.commit >= 2, "{}", snap.commit);
    let mut files = vec![ltx(&snap, 1, 1)];
    let mut txid = 1;
    assert_eq!(db.take_captured().unwrap(), None, "nothing committed yet");
    for round in 0..60u64 {
      db.begin_write().unwrap();
      for i in 0..20 {
        let k = (round * 7 + i) % 300;
        db.conn
          .execute(
            "INSERT OR REPLACE INTO t VALUES (?1, randomblob(?2))",
            (k as i64, 100 + (round * 13 % 900) as i64),
          )
          .unwrap();
      }
      if round % 5 == 4 {
        db.conn
          .execute("DELETE FROM t WHERE k % 3 = 0", [])
          .unwrap();
      }
      // A rolled-back transaction in between captures nothing.
      if round % 7 == 3 {
        db.rollback();
        assert_eq!(db.take_captured().unwrap(), None);
        continue;
      }
      db.commit().unwrap();
      let c = db.take_captured().unwrap().expect("a commit");
      txid += 1;
      files.push(ltx(&c, txid, txid));
      db.checkpoint_if_large(64 * 1024).unwrap();
    }
    db.checkpoint().unwrap();
    let image = cellhost_ltx::apply(&files).unwrap();
    assert_eq!(image, std::fs::read(&path).unwrap());
    std::fs::remove_dir_all(dir).unwrap();
  }

  #[test]
  fn capture_refuses_to_run_inside_a_transaction() {
    let dir = std::env::temp_dir().join(format!("cellhost-capture-txn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut db = CellDb::open(&dir.join("c.sqlite")).unwrap();
    db.enable_capture().unwrap();
    db.kv_put("a", b"1").unwrap();
    assert!(db.take_captured().is_err());
    assert!(db.snapshot().is_err());
    db.commit().unwrap();
    assert!(db.take_captured().unwrap().is_some());
    std::fs::remove_dir_all(dir).unwrap();
  }
}

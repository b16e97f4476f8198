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

/// Where a commit ended in the WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalPosition {
  pub salts: (u32, u32),
  pub offset: u64,
}

/// How far the WAL was read.
#[derive(Default)]
pub(crate) struct WalCursor {
  /// The byte offset after the last commit frame taken; 0: read the header.
  offset: u64,
  salts: (u32, u32),
  page_size: u32,
  /// A WAL with these salts holds only folded frames (see `fold`).
  folded: Option<(u32, u32)>,
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

  /// Folds every WAL frame into the database file; the next commit starts
  /// the WAL over from its beginning. The file keeps its size, so commits
  /// overwrite blocks it already has (an overwrite's fdatasync need not
  /// commit the file system's journal, an append's must). Call only after
  /// the frames were taken.
  pub fn checkpoint(&mut self) -> Result<(), StorageError> {
    self.fold("RESTART")
  }

  /// `checkpoint`, and the WAL file is truncated: for a cell going idle,
  /// so that many evicted cells do not each keep a large WAL.
  pub fn checkpoint_and_shrink(&mut self) -> Result<(), StorageError> {
    self.fold("TRUNCATE")
  }

  fn fold(&mut self, mode: &str) -> Result<(), StorageError> {
    self.not_in_txn("a checkpoint")?;
    // An open read statement would hold the checkpoint off.
    self.drain_cursors();
    let busy: i64 = self.internal(|db| {
      db.conn
        .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(0))
        .map_err(sqlite_error)
    })?;
    if busy != 0 {
      return Err(StorageError("the WAL checkpoint could not finish".into()));
    }
    if self.capture.is_some() {
      // Until the next commit restarts it, the WAL still holds the folded
      // frames under its old salts: they must not be taken again.
      let folded = self.wal_state()?.map(|w| w.salts);
      self.capture = Some(WalCursor {
        folded,
        ..WalCursor::default()
      });
    }
    // The next commit writes the WAL's header afresh.
    self.fresh_wal = true;
    Ok(())
  }

  /// The salts of a WAL whose frames were all folded into the database
  /// (the last checkpoint's), while no commit has restarted it.
  pub fn folded_salts(&self) -> Option<(u32, u32)> {
    self.capture.as_ref().and_then(|c| c.folded)
  }

  /// The whole database as of the last commit (the first file of a
  /// generation): checkpoints, then reads the database file.
  pub fn snapshot(&mut self) -> Result<Captured, StorageError> {
    // The file is read directly: a paged one must be whole first.
    if let Some(p) = &self.paged {
      p.wait_complete();
    }
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
    let mut merged: Option<Captured> = None;
    for (c, _) in self.take_commits()? {
      match &mut merged {
        None => merged = Some(c),
        Some(m) => {
          m.pages.extend(c.pages);
          m.commit = c.commit;
        }
      }
    }
    Ok(merged)
  }

  /// Each commit since the last call, in order, with where it ended in the
  /// WAL: its salts and the byte offset after its commit frame.
  pub fn take_commits(&mut self) -> Result<Vec<(Captured, WalPosition)>, StorageError> {
    self.not_in_txn("page capture")?;
    let wal = self.wal_path();
    let Some(cursor) = self.capture.as_mut() else {
      return Err(StorageError("page capture is not enabled".into()));
    };
    let mut f = match std::fs::File::open(&wal) {
      Ok(f) => f,
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
      Err(e) => return Err(io(e)),
    };
    let len = f.metadata().map_err(io)?.len();
    if cursor.offset == 0 {
      if len < WAL_HEADER {
        return Ok(Vec::new());
      }
      let mut h = [0u8; WAL_HEADER as usize];
      f.read_exact(&mut h).map_err(io)?;
      let salts = (be32(&h[16..]), be32(&h[20..]));
      if cursor.folded == Some(salts) {
        return Ok(Vec::new());
      }
      cursor.folded = None;
      cursor.page_size = be32(&h[8..]);
      cursor.salts = salts;
      cursor.offset = WAL_HEADER;
    }
    let frame = FRAME_HEADER + u64::from(cursor.page_size);
    f.seek(SeekFrom::Start(cursor.offset)).map_err(io)?;
    let mut out = Vec::new();
    let mut pending = Captured {
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
      (pending.pages).insert(be32(&buf), buf[FRAME_HEADER as usize..].to_vec());
      pos += frame;
      let commit = be32(&buf[4..]);
      if commit != 0 {
        // A commit frame ends a transaction: its pages are complete.
        pending.commit = commit;
        cursor.offset = pos;
        let next = Captured {
          page_size: cursor.page_size,
          ..Captured::default()
        };
        let at = WalPosition {
          salts: cursor.salts,
          offset: pos,
        };
        out.push((std::mem::replace(&mut pending, next), at));
      }
    }
    Ok(out)
  }

  /// The WAL's salts and length, if it holds any frame.
  pub fn wal_state(&self) -> Result<Option<WalPosition>, StorageError> {
    let mut f = match std::fs::File::open(self.wal_path()) {
      Ok(f) => f,
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
      Err(e) => return Err(io(e)),
    };
    let len = f.metadata().map_err(io)?.len();
    if len <= WAL_HEADER {
      return Ok(None);
    }
    let mut h = [0u8; WAL_HEADER as usize];
    f.read_exact(&mut h).map_err(io)?;
    Ok(Some(WalPosition {
      salts: (be32(&h[16..]), be32(&h[20..])),
      offset: len,
    }))
  }

  /// Starts capture where an earlier one left off (`at`: after that commit
  /// of the WAL; `None`: at the WAL's start, unless its salts are `folded`),
  /// without a checkpoint. From now on only `checkpoint` folds the WAL,
  /// closing the database included, so no commit leaves the WAL before it
  /// was taken.
  pub fn resume_capture(
    &mut self,
    at: Option<WalPosition>,
    folded: Option<(u32, u32)>,
  ) -> Result<(), StorageError> {
    self.internal(|db| {
      db.conn
        .execute_batch("PRAGMA wal_autocheckpoint=0")
        .map_err(sqlite_error)
    })?;
    self
      .conn
      .set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
      )
      .map_err(sqlite_error)?;
    let mut cursor = WalCursor {
      folded,
      ..WalCursor::default()
    };
    if let Some(at) = at {
      let mut f = std::fs::File::open(self.wal_path()).map_err(io)?;
      let mut h = [0u8; WAL_HEADER as usize];
      f.read_exact(&mut h).map_err(io)?;
      cursor.page_size = be32(&h[8..]);
      cursor.salts = at.salts;
      cursor.offset = at.offset;
    }
    self.capture = Some(cursor);
    Ok(())
  }

  /// Checkpoints once this cycle of the WAL (the frames taken since it
  /// last started over) outgrew `max_bytes` (after a take).
  pub fn checkpoint_if_large(&mut self, max_bytes: u64) -> Result<(), StorageError> {
    if self.wal_used() > max_bytes {
      self.checkpoint()?;
    }
    Ok(())
  }

  /// Bytes of the WAL's current cycle: as far as capture took it, or, with
  /// capture off, the file's length (SQLite checkpoints by itself then).
  pub fn wal_used(&self) -> u64 {
    match &self.capture {
      Some(c) => c.offset,
      None => std::fs::metadata(self.wal_path()).map_or(0, |m| m.len()),
    }
  }

  /// For a cell going idle: folds and truncates a WAL file past `max_bytes`.
  pub fn shrink_wal_if_large(&mut self, max_bytes: u64) -> Result<(), StorageError> {
    let size = std::fs::metadata(self.wal_path()).map_or(0, |m| m.len());
    if size > max_bytes {
      self.checkpoint_and_shrink()?;
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

  /// Commits are taken one by one with where each ended; a database
  /// closed with capture on keeps its WAL, and a capture resumed at a mark
  /// takes only the commits after it.
  #[test]
  fn commits_resume_at_their_wal_mark_after_a_reopen() {
    let dir = std::env::temp_dir().join(format!("cellhost-capture-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("c.sqlite");
    let mut db = CellDb::open(&path).unwrap();
    db.resume_capture(None, None).unwrap();
    for v in ["1", "2", "3"] {
      db.kv_put(v, v.as_bytes()).unwrap();
      db.commit().unwrap();
    }
    let commits = db.take_commits().unwrap();
    assert_eq!(commits.len(), 3);
    assert!(commits[0].1.offset < commits[1].1.offset);
    let mark = commits[1].1;
    db.kv_put("4", b"4").unwrap();
    db.commit().unwrap();
    drop(db);
    let state = CellDb::open(&path).unwrap().wal_state().unwrap().unwrap();
    assert_eq!(state.salts, mark.salts, "closing did not checkpoint");
    let mut db = CellDb::open(&path).unwrap();
    db.resume_capture(Some(mark), None).unwrap();
    let again = db.take_commits().unwrap();
    assert_eq!(again.len(), 2, "commits 3 and 4");
    assert_eq!(again[0].1, commits[2].1);
    assert_eq!(again[1].1.offset, state.offset);
    std::fs::remove_dir_all(dir).unwrap();
  }

  /// A checkpoint keeps the WAL file: the next commits overwrite it from
  /// its start (no growth), and the folded frames, still in the file under
  /// their old salts until then, are never taken again.
  #[test]
  fn a_checkpoint_reuses_the_wal_and_folded_frames_stay_taken() {
    let dir = std::env::temp_dir().join(format!("cellhost-capture-reuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("c.sqlite");
    let mut db = CellDb::open(&path).unwrap();
    db.enable_capture().unwrap();
    for i in 0..20 {
      db.kv_put(&format!("k{i}"), &[i as u8; 3000]).unwrap();
      db.commit().unwrap();
    }
    assert_eq!(db.take_commits().unwrap().len(), 20);
    let len = std::fs::metadata(db.wal_path()).unwrap().len();
    db.checkpoint().unwrap();
    assert_eq!(std::fs::metadata(db.wal_path()).unwrap().len(), len, "kept");
    assert!(db.folded_salts().is_some());
    assert_eq!(
      db.take_commits().unwrap(),
      vec![],
      "folded frames are not new"
    );
    db.kv_put("after", b"1").unwrap();
    db.commit().unwrap();
    assert_eq!(
      std::fs::metadata(db.wal_path()).unwrap().len(),
      len,
      "overwritten, not grown"
    );
    let after = db.take_commits().unwrap();
    assert_eq!(after.len(), 1, "only the new commit");
    assert!(after[0].1.offset < len);
    assert_eq!(db.folded_salts(), None);
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

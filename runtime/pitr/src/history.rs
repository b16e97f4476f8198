//! The history of a cell without a bucket, kept next to its database.
//!
//! History is a list of generations. Each is one append-only log file,
//! `<first TXID %016x>-<start time ms>.log`, that opens with a snapshot of
//! the whole database (an LTX snapshot) and goes on with one record per
//! commit (an LTX delta of the pages it changed), so any state of the
//! generation is its snapshot plus the deltas up to it. TXIDs go on across
//! generations, so a bookmark keeps meaning the same state.
//!
//! The log is not fsynced per commit: the commit's frames stay in SQLite's
//! WAL (which is) until the log was fsynced, and only then is the WAL
//! checkpointed (`CellDb` never checkpoints by itself while history is on).
//! Each record names where in the WAL its commit ended (`WalMark`), so a
//! reopened cell knows whether the log covers the WAL exactly; when it does
//! not (a crash lost the log's tail), a new generation starts from a
//! snapshot of what SQLite recovered, and the states in between are simply
//! not bookmarkable. A `checkpoint` record says the WAL was emptied.
//!
//! Retention drops whole generations: one goes once the generation after
//! it started before the cut-off, since every state it holds is older.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"CHR1";
const HEAD: usize = 52;
const KIND_STATE: u32 = 0;
const KIND_CHECKPOINT: u32 = 1;
const HAS_MARK: u32 = 2;

/// Where a commit ended in SQLite's WAL: the WAL's salts (which change each
/// time it restarts) and the byte offset after the commit's last frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalMark {
  pub salts: (u32, u32),
  pub offset: u64,
}

/// One bookmarkable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
  pub txid: u64,
  pub time_ms: u64,
}

struct Generation {
  start: u64,
  time_ms: u64,
  path: PathBuf,
}

#[derive(Clone, Copy, Debug)]
struct Head {
  kind: u32,
  txid: u64,
  time_ms: u64,
  mark: Option<WalMark>,
  len: u64,
}

/// How a reopened cell goes on with its history.
#[derive(Debug, PartialEq)]
pub enum Resume {
  /// The log covers the WAL up to this mark: capture from there.
  At(WalMark),
  /// The log covers the database file and the WAL holds nothing.
  Empty,
  /// The log covers the database file; the WAL holds only frames already
  /// folded into it, under these salts (it starts over at the next commit).
  Folded((u32, u32)),
  /// The log does not cover the database: start a new generation.
  NewGeneration,
}

pub struct History {
  dir: PathBuf,
  gens: Vec<Generation>,
  file: Option<File>,
  /// The newest record: its TXID, time and WAL mark.
  last: Option<Head>,
  unsynced: bool,
}

fn io(what: &Path, e: std::io::Error) -> String {
  format!("history {}: {e}", what.display())
}

fn be32(b: &[u8]) -> u32 {
  u32::from_be_bytes(b[..4].try_into().unwrap())
}

fn be64(b: &[u8]) -> u64 {
  u64::from_be_bytes(b[..8].try_into().unwrap())
}

fn encode_head(h: &Head) -> [u8; HEAD - 8] {
  let mut b = [0u8; HEAD - 8];
  b[..4].copy_from_slice(MAGIC);
  let flags = h.kind | if h.mark.is_some() { HAS_MARK } else { 0 };
  b[4..8].copy_from_slice(&flags.to_be_bytes());
  b[8..16].copy_from_slice(&h.txid.to_be_bytes());
  b[16..24].copy_from_slice(&h.time_ms.to_be_bytes());
  let m = h.mark.unwrap_or(WalMark {
    salts: (0, 0),
    offset: 0,
  });
  b[24..28].copy_from_slice(&m.salts.0.to_be_bytes());
  b[28..32].copy_from_slice(&m.salts.1.to_be_bytes());
  b[32..40].copy_from_slice(&m.offset.to_be_bytes());
  b[40..44].copy_from_slice(&(h.len as u32).to_be_bytes());
  b
}

fn decode_head(b: &[u8]) -> Option<(Head, u64)> {
  if &b[..4] != MAGIC {
    return None;
  }
  let flags = be32(&b[4..]);
  let mark = (flags & HAS_MARK != 0).then(|| WalMark {
    salts: (be32(&b[24..]), be32(&b[28..])),
    offset: be64(&b[32..]),
  });
  let head = Head {
    kind: flags & !HAS_MARK,
    txid: be64(&b[8..]),
    time_ms: be64(&b[16..]),
    mark,
    len: u64::from(be32(&b[40..])),
  };
  Some((head, be64(&b[44..])))
}

fn record(h: &Head, body: &[u8]) -> Vec<u8> {
  let head = encode_head(h);
  let mut out = Vec::with_capacity(HEAD + body.len());
  out.extend_from_slice(&head);
  out.extend_from_slice(&[0; 8]);
  out.extend_from_slice(body);
  let mut summed = head.to_vec();
  summed.extend_from_slice(body);
  let crc = cellhost_ltx::crc64(&summed);
  out[HEAD - 8..HEAD].copy_from_slice(&crc.to_be_bytes());
  out
}

/// Reads a log's records in order; `body` says which bodies to return.
/// Stops at the end or at the first record that is torn or damaged, and
/// returns the byte length of the valid prefix.
fn scan(
  path: &Path,
  verify: bool,
  mut each: impl FnMut(&Head, Option<Vec<u8>>) -> bool,
) -> Result<u64, String> {
  let mut f = File::open(path).map_err(|e| io(path, e))?;
  let len = f.metadata().map_err(|e| io(path, e))?.len();
  let mut pos = 0u64;
  let mut hb = [0u8; HEAD];
  while pos + HEAD as u64 <= len {
    f.seek(SeekFrom::Start(pos)).map_err(|e| io(path, e))?;
    f.read_exact(&mut hb).map_err(|e| io(path, e))?;
    let Some((h, crc)) = decode_head(&hb) else {
      break;
    };
    let end = pos + HEAD as u64 + h.len;
    if end > len {
      break;
    }
    let want = h.kind == KIND_STATE && h.len > 0;
    let body = if verify || want {
      let mut body = vec![0u8; h.len as usize];
      f.read_exact(&mut body).map_err(|e| io(path, e))?;
      if verify {
        let mut summed = hb[..HEAD - 8].to_vec();
        summed.extend_from_slice(&body);
        if cellhost_ltx::crc64(&summed) != crc {
          break;
        }
      }
      Some(body)
    } else {
      None
    };
    pos = end;
    if !each(&h, body) {
      break;
    }
  }
  Ok(pos)
}

/// An LTX file of the pages a state needs (never the lock page, none past
/// the end of the database).
fn ltx<'a>(
  header: cellhost_ltx::Header,
  pages: impl IntoIterator<Item = (u32, &'a [u8])>,
) -> Result<Vec<u8>, String> {
  let lock = cellhost_ltx::lock_pgno(header.page_size);
  let commit = header.commit;
  let pages = pages
    .into_iter()
    .filter(|(p, _)| *p != lock && *p <= commit);
  cellhost_ltx::encode(&header, pages).map_err(|e| e.to_string())
}

/// A folded WAL is marked by its salts at offset 0 (no commit ends there).
fn folded_mark(folded: Option<(u32, u32)>) -> Option<WalMark> {
  folded.map(|salts| WalMark { salts, offset: 0 })
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
  let (start, time) = name.strip_suffix(".log")?.split_once('-')?;
  Some((u64::from_str_radix(start, 16).ok()?, time.parse().ok()?))
}

impl History {
  /// Opens (or starts) the history in `dir`; a torn tail of the newest
  /// generation is cut off.
  pub fn open(dir: &Path) -> Result<History, String> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut gens = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
      let entry = entry.map_err(|e| io(dir, e))?;
      if let Some((start, time_ms)) = entry.file_name().to_str().and_then(parse_name) {
        gens.push(Generation {
          start,
          time_ms,
          path: entry.path(),
        });
      }
    }
    gens.sort_by_key(|g| g.start);
    let mut h = History {
      dir: dir.to_path_buf(),
      gens,
      file: None,
      last: None,
      unsynced: false,
    };
    while let Some(g) = h.gens.last() {
      let mut last = None;
      let valid = scan(&g.path, true, |head, _| {
        last = Some(*head);
        true
      })?;
      if last.is_none() {
        // Not even its snapshot made it: the generation never started.
        std::fs::remove_file(&g.path).map_err(|e| io(&g.path, e))?;
        h.gens.pop();
        continue;
      }
      let f = OpenOptions::new()
        .append(true)
        .open(&g.path)
        .map_err(|e| io(&g.path, e))?;
      f.set_len(valid).map_err(|e| io(&g.path, e))?;
      h.file = Some(f);
      h.last = last;
      break;
    }
    Ok(h)
  }

  /// Whether the log can go on over the database whose WAL has `wal` (its
  /// salts and length; `None`: no WAL or one without frames). The WAL may
  /// hold frames past the point given (a transaction that never committed,
  /// or commits the log missed): the caller takes what follows and starts
  /// a new generation if that holds a commit.
  pub fn resume(&self, wal: Option<((u32, u32), u64)>) -> Resume {
    let Some(last) = self.last else {
      return Resume::NewGeneration;
    };
    match (last.mark, wal) {
      (Some(m), _) if m.offset == 0 => Resume::Folded(m.salts),
      (Some(m), Some((salts, len))) if m.salts == salts && m.offset <= len => Resume::At(m),
      (None, _) => Resume::Empty,
      _ => Resume::NewGeneration,
    }
  }

  /// The newest state kept.
  pub fn last(&self) -> Option<Point> {
    self.last.map(|h| Point {
      txid: h.txid,
      time_ms: h.time_ms,
    })
  }

  /// When the newest generation started.
  pub fn newest_generation_start(&self) -> Option<u64> {
    self.gens.last().map(|g| g.time_ms)
  }

  /// The oldest state kept.
  pub fn first(&self) -> Option<Point> {
    self.gens.first().map(|g| Point {
      txid: g.start,
      time_ms: g.time_ms,
    })
  }

  fn write(&mut self, h: Head, body: &[u8]) -> Result<(), String> {
    let rec = record(&h, body);
    let path = self.gens.last().map(|g| g.path.clone()).unwrap_or_default();
    let f = self
      .file
      .as_mut()
      .ok_or_else(|| "history: no generation is open".to_string())?;
    f.write_all(&rec).map_err(|e| io(&path, e))?;
    self.last = Some(h);
    self.unsynced = true;
    Ok(())
  }

  /// Starts a generation with a snapshot of the database (every page, the
  /// database `commit` pages long), taken right after a checkpoint that
  /// left the WAL with only `folded` frames (under those salts; `None`: no
  /// WAL). Durable when it returns, as is the generation before it.
  pub fn begin<'a>(
    &mut self,
    page_size: u32,
    commit: u32,
    pages: impl IntoIterator<Item = (u32, &'a [u8])>,
    time_ms: u64,
    folded: Option<(u32, u32)>,
  ) -> Result<u64, String> {
    self.sync()?;
    let start = self.last.map_or(1, |l| l.txid + 1);
    let ltx = ltx(
      cellhost_ltx::Header::snapshot(page_size, commit, start, time_ms as i64),
      pages,
    )?;
    let path = self.dir.join(format!("{start:016x}-{time_ms}.log"));
    let f = File::create(&path).map_err(|e| io(&path, e))?;
    self.gens.push(Generation {
      start,
      time_ms,
      path: path.clone(),
    });
    self.file = Some(f);
    let head = Head {
      kind: KIND_STATE,
      txid: start,
      time_ms,
      mark: folded_mark(folded),
      len: ltx.len() as u64,
    };
    self.write(head, &ltx)?;
    self.sync()?;
    File::open(&self.dir)
      .and_then(|d| d.sync_all())
      .map_err(|e| io(&self.dir, e))?;
    Ok(start)
  }

  /// Records the next commit: the pages it changed, the database size after
  /// it, and where it ended in the WAL. Returns its TXID.
  pub fn append<'a>(
    &mut self,
    page_size: u32,
    commit: u32,
    pages: impl IntoIterator<Item = (u32, &'a [u8])>,
    time_ms: u64,
    mark: WalMark,
  ) -> Result<u64, String> {
    let txid = self
      .last
      .map(|l| l.txid + 1)
      .ok_or_else(|| "history: no generation is open".to_string())?;
    let ltx = ltx(
      cellhost_ltx::Header::delta(page_size, commit, txid, txid, time_ms as i64),
      pages,
    )?;
    let head = Head {
      kind: KIND_STATE,
      txid,
      time_ms,
      mark: Some(mark),
      len: ltx.len() as u64,
    };
    self.write(head, &ltx)?;
    Ok(txid)
  }

  /// Records that the WAL was folded into the database (`folded`: the
  /// salts its frames keep until it starts over; `None`: it is empty).
  pub fn checkpointed(&mut self, folded: Option<(u32, u32)>) -> Result<(), String> {
    let Some(last) = self.last else {
      return Ok(());
    };
    let head = Head {
      kind: KIND_CHECKPOINT,
      txid: last.txid,
      time_ms: last.time_ms,
      mark: folded_mark(folded),
      len: 0,
    };
    self.write(head, &[])
  }

  /// Makes what was appended durable (before the WAL may be checkpointed).
  pub fn sync(&mut self) -> Result<(), String> {
    if let (true, Some(f)) = (self.unsynced, &self.file) {
      f.sync_data().map_err(|e| io(&self.dir, e))?;
    }
    self.unsynced = false;
    Ok(())
  }

  /// Drops the generations whose every state is older than `cutoff_ms`.
  pub fn prune(&mut self, cutoff_ms: u64) -> Result<(), String> {
    while self.gens.len() > 1 && self.gens[1].time_ms <= cutoff_ms {
      let g = self.gens.remove(0);
      std::fs::remove_file(&g.path).map_err(|e| io(&g.path, e))?;
    }
    Ok(())
  }

  fn generation_of(&self, txid: u64) -> Option<&Generation> {
    self.gens.iter().rev().find(|g| g.start <= txid)
  }

  /// The newest state at or before `time_ms`; `None` if history holds none.
  pub fn point_at_time(&self, time_ms: u64) -> Result<Option<Point>, String> {
    let Some(g) = self.gens.iter().rev().find(|g| g.time_ms <= time_ms) else {
      return Ok(None);
    };
    let mut found = None;
    scan(&g.path, false, |h, _| {
      if h.time_ms > time_ms {
        return false;
      }
      if h.kind == KIND_STATE {
        found = Some(Point {
          txid: h.txid,
          time_ms: h.time_ms,
        });
      }
      true
    })?;
    Ok(found)
  }

  /// The state `txid`, if history holds it.
  pub fn point(&self, txid: u64) -> Result<Option<Point>, String> {
    let Some(g) = self.generation_of(txid) else {
      return Ok(None);
    };
    let mut found = None;
    scan(&g.path, false, |h, _| {
      if h.kind == KIND_STATE && h.txid == txid {
        found = Some(Point {
          txid,
          time_ms: h.time_ms,
        });
      }
      h.txid < txid
    })?;
    Ok(found)
  }

  /// The database image of state `txid`: its generation's snapshot and the
  /// deltas up to it.
  pub fn image(&self, txid: u64) -> Result<Vec<u8>, String> {
    let g = self
      .generation_of(txid)
      .ok_or_else(|| format!("history holds no state {txid}"))?;
    let mut files = Vec::new();
    let mut failed = None;
    scan(&g.path, false, |h, body| {
      if h.txid > txid {
        return false;
      }
      if let Some(b) = body {
        match cellhost_ltx::decode(&b) {
          Ok(f) => files.push(f),
          Err(e) => {
            failed = Some(format!(
              "history {}: TXID {}: {e}",
              g.path.display(),
              h.txid
            ));
            return false;
          }
        }
      }
      true
    })?;
    if let Some(e) = failed {
      return Err(e);
    }
    if files.last().map(|f| f.header.max_txid) != Some(txid) {
      return Err(format!("history holds no state {txid}"));
    }
    cellhost_ltx::apply(&files).map_err(|e| format!("history: {e}"))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const PS: u32 = 4096;

  fn page(fill: u8) -> Vec<u8> {
    vec![fill; PS as usize]
  }

  fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cellhost-history-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
  }

  fn at(offset: u64) -> WalMark {
    WalMark {
      salts: (7, 9),
      offset,
    }
  }

  /// A generation of three pages, then commits that change one page each:
  /// every state rebuilds, and the history resumes only where it covers
  /// the WAL.
  #[test]
  fn states_rebuild_and_a_torn_tail_is_cut() {
    let d = dir("states");
    let mut h = History::open(&d).unwrap();
    assert_eq!(h.resume(None), Resume::NewGeneration);
    let base = [page(1), page(2), page(3)];
    let start = h
      .begin(
        PS,
        3,
        base
          .iter()
          .enumerate()
          .map(|(i, p)| (i as u32 + 1, p.as_slice())),
        1000,
        None,
      )
      .unwrap();
    assert_eq!(start, 1);
    assert_eq!(h.resume(None), Resume::Empty);
    let p2 = page(20);
    assert_eq!(
      h.append(PS, 3, [(2, p2.as_slice())], 2000, at(100))
        .unwrap(),
      2
    );
    let p4 = page(40);
    assert_eq!(
      h.append(PS, 4, [(4, p4.as_slice())], 3000, at(200))
        .unwrap(),
      3
    );
    assert_eq!(h.resume(Some(((7, 9), 200))), Resume::At(at(200)));
    assert_eq!(
      h.resume(Some(((7, 9), 300))),
      Resume::At(at(200)),
      "the caller looks further"
    );
    assert_eq!(
      h.resume(Some(((7, 9), 150))),
      Resume::NewGeneration,
      "a shorter WAL"
    );
    assert_eq!(
      h.resume(Some(((8, 9), 200))),
      Resume::NewGeneration,
      "another WAL"
    );

    let img = h.image(2).unwrap();
    assert_eq!(img, [page(1), page(20), page(3)].concat());
    assert_eq!(
      h.image(3).unwrap(),
      [page(1), page(20), page(3), page(40)].concat()
    );
    assert!(h.image(4).is_err());
    assert_eq!(h.point_at_time(2500).unwrap().map(|p| p.txid), Some(2));
    assert_eq!(h.point_at_time(999).unwrap(), None);
    assert_eq!(h.point(3).unwrap().map(|p| p.time_ms), Some(3000));
    drop(h);

    // A crash tore the last record: it is cut off, the rest stands.
    let log = std::fs::read_dir(&d)
      .unwrap()
      .next()
      .unwrap()
      .unwrap()
      .path();
    let len = std::fs::metadata(&log).unwrap().len();
    OpenOptions::new()
      .write(true)
      .open(&log)
      .unwrap()
      .set_len(len - 10)
      .unwrap();
    let mut h = History::open(&d).unwrap();
    assert_eq!(h.last().map(|p| p.txid), Some(2));
    assert_eq!(h.resume(Some(((7, 9), 100))), Resume::At(at(100)));
    // A damaged byte inside a record cuts there too.
    assert_eq!(
      h.append(PS, 4, [(4, p4.as_slice())], 3000, at(200))
        .unwrap(),
      3
    );
    h.checkpointed(None).unwrap();
    assert_eq!(h.resume(None), Resume::Empty);
    h.checkpointed(Some((7, 9))).unwrap();
    assert_eq!(h.resume(Some(((7, 9), 300))), Resume::Folded((7, 9)));
    drop(h);
    let mut bytes = std::fs::read(&log).unwrap();
    let n = bytes.len();
    bytes[n - 2 * HEAD - 30] ^= 0xff; // inside TXID 3, before the two checkpoint records
    std::fs::write(&log, bytes).unwrap();
    let h = History::open(&d).unwrap();
    assert_eq!(h.last().map(|p| p.txid), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
  }

  /// TXIDs go on across generations; retention drops a generation only
  /// once the next one started before the cut-off.
  #[test]
  fn generations_continue_and_are_pruned_whole() {
    let d = dir("prune");
    let mut h = History::open(&d).unwrap();
    let one = page(1);
    h.begin(PS, 1, [(1, one.as_slice())], 1000, None).unwrap();
    h.append(PS, 1, [(1, page(2).as_slice())], 1500, at(100))
      .unwrap();
    let two = page(3);
    assert_eq!(
      h.begin(PS, 1, [(1, two.as_slice())], 2000, None).unwrap(),
      3
    );
    h.append(PS, 1, [(1, page(4).as_slice())], 2500, at(100))
      .unwrap();
    assert_eq!(h.image(2).unwrap(), page(2));
    assert_eq!(h.image(4).unwrap(), page(4));
    assert_eq!(h.point_at_time(1700).unwrap().map(|p| p.txid), Some(2));
    h.prune(1999).unwrap();
    assert_eq!(
      h.first().map(|p| p.txid),
      Some(1),
      "state 2 is still the newest before 1999"
    );
    h.prune(2000).unwrap();
    assert_eq!(h.first().map(|p| p.txid), Some(3));
    assert!(h.image(2).is_err());
    drop(h);
    let h = History::open(&d).unwrap();
    assert_eq!((h.first().unwrap().txid, h.last().unwrap().txid), (3, 4));
    std::fs::remove_dir_all(&d).unwrap();
  }
}

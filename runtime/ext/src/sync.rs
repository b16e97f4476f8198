//! Durability rounds: the files one round must fsync (a cell's WAL held
//! open, a new database and its directory) and, on a bucket, the LTX
//! objects it publishes under the acknowledgement rule. A round runs off
//! the isolate thread; the isolate settles rounds in order (see `Cells`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cellhost_storage::CellDb;

/// A file a durability round must fsync.
#[derive(Clone, Debug)]
pub struct Unsynced {
  /// Its directory entry is new: fsync the directory too.
  pub dir: bool,
  /// The file held open (a cell's WAL), or `None` to open it by path.
  pub(crate) file: Option<std::sync::Arc<std::fs::File>>,
}

/// A commit's LTX object on its way to the bucket: its cell's handle, the
/// object, and the hold that keeps the cell from being taken again on this
/// node until the round is done with it (`cellhost_fleet::Hold`).
pub(crate) type Captured = (u32, cellhost_fleet::Upload, cellhost_fleet::Hold);

/// WAL files to fsync for one durability round, and with a bucket the LTX
/// objects to publish.
pub struct SyncBatch {
  pub round: u64,
  /// The cells whose commits this round makes durable, with their keys.
  pub cells: Vec<(u32, String)>,
  pub files: Vec<(PathBuf, Unsynced)>,
  pub(crate) uploads: Vec<Captured>,
  pub(crate) fleet: Option<std::sync::Arc<cellhost_fleet::Fleet>>,
}

/// A durability round that failed: the message callers see, and the cells
/// that must be reset (with a bucket: those no longer owned).
#[derive(Debug)]
pub struct SyncFailure {
  pub message: String,
  pub cells: Vec<u32>,
}

impl SyncBatch {
  /// The blocking part: fsync and (with a bucket) the acknowledgement rule
  /// over this round's LTX objects, at once: the round is acknowledged only
  /// once both are done, and objects that reach a follower or the bucket
  /// before a failed fsync are a failed round's, which a restore may show
  /// (an acknowledgement never came for them).
  pub fn run(mut self) -> Result<(), SyncFailure> {
    let all: Vec<u32> = self.cells.iter().map(|(h, _)| *h).collect();
    let mut handles = Vec::new();
    let mut uploads = Vec::new();
    // Released once the round is done with its objects (below).
    let mut holds = Vec::new();
    for (h, u, hold) in std::mem::take(&mut self.uploads) {
      handles.push(h);
      uploads.push(u);
      holds.push(hold);
    }
    let scopes: Vec<String> = uploads.iter().map(|u| u.scope.clone()).collect();
    let proof = (self.fleet.clone()).map(|fleet| {
      let f = fleet.clone();
      fleet.spawn(async move { f.publish(uploads).await })
    });
    // An fsync that failed may have dropped any of the round's pages.
    let synced = self.fsync();
    let proved = proof.map(futures::executor::block_on);
    drop(holds);
    synced.map_err(|e| SyncFailure {
      message: format!("Durable Object reset because its storage could not be made durable: {e}"),
      cells: all.clone(),
    })?;
    let Some(proved) = proved else {
      return Ok(());
    };
    proved.map_err(|failed| {
      // The node lease lapsed (empty scope): every cell of the round.
      let whole = failed.iter().any(|(s, _)| s.is_empty());
      let cells = if whole {
        all
      } else {
        (handles.iter().zip(&scopes))
          .filter(|(_, s)| failed.iter().any(|(f, _)| f == *s))
          .map(|(h, _)| *h)
          .collect()
      };
      let message = failed
        .into_iter()
        .map(|(_, m)| m)
        .collect::<Vec<_>>()
        .join("; ");
      SyncFailure { message, cells }
    })
  }

  /// Whether the round publishes to a bucket (slow: never inline).
  pub fn has_uploads(&self) -> bool {
    !self.uploads.is_empty()
  }

  /// Whether this round syncs the file system once (see `SYNCFS_FROM`).
  pub(crate) fn syncs_file_system(&self) -> bool {
    let new_dirs: HashSet<&Path> = (self.files.iter())
      .filter(|(_, u)| u.dir)
      .filter_map(|(p, _)| p.parent())
      .collect();
    self.files.len() + new_dirs.len() >= SYNCFS_FROM && syncfs_reports_errors()
  }

  /// One syncfs per file system the round's files live on.
  fn syncfs(&self) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let mut devices = HashSet::new();
    let parents: HashSet<&Path> = self.files.iter().filter_map(|(p, _)| p.parent()).collect();
    for dir in parents {
      let d = std::fs::File::open(dir)?;
      if devices.insert(d.metadata()?.dev()) {
        // SAFETY: a valid descriptor we own.
        if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
          return Err(std::io::Error::last_os_error());
        }
      }
    }
    Ok(())
  }

  fn fsync(&self) -> std::io::Result<()> {
    if self.syncs_file_system() {
      return self.syncfs();
    }
    let mut dirs = HashSet::new();
    for (path, u) in &self.files {
      match &u.file {
        Some(f) => f.sync_data()?,
        None => match std::fs::File::open(path) {
          Ok(f) => f.sync_data()?,
          Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
          Err(e) => return Err(e),
        },
      }
      if u.dir
        && let Some(parent) = path.parent()
      {
        dirs.insert(parent);
      }
    }
    // New WALs' directory entries: one fsync per directory, not per file.
    for dir in dirs {
      std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
  }
}

/// From this many fsync calls on, a round syncs the file system once
/// instead: one device flush rather than one per file. New objects need
/// three each (database, WAL, directory), so a spread over many objects
/// otherwise waits on a flush per file. Below it, a round waits only for its
/// own files, not for whatever else the file system has to write back.
const SYNCFS_FROM: usize = 6;

/// syncfs(2) reports writeback errors only since Linux 5.8; before, it
/// returned 0 regardless, so older kernels keep one fsync per file.
pub(crate) fn syncfs_reports_errors() -> bool {
  static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
  *OK.get_or_init(|| {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
      return false;
    };
    let mut parts = release
      .trim()
      .split(['.', '-'])
      .map(|p| p.parse::<u32>().ok());
    matches!((parts.next(), parts.next()), (Some(Some(a)), Some(Some(b))) if (a, b) >= (5, 8))
  })
}

/// A cell's WAL joins the next durability round (`dir`: its directory
/// entry too).
pub(crate) fn note_unsynced(unsynced: &mut HashMap<PathBuf, Unsynced>, db: &mut CellDb, dir: bool) {
  let file = db.wal_file();
  let u = unsynced
    .entry(db.wal_path())
    .or_insert(Unsynced { dir, file: None });
  u.dir |= dir;
  u.file = u.file.take().or(file);
}

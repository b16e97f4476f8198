//! Cells on a bucket (`--bucket`): taking a cell when it opens ("the bucket
//! wins": the newest chain replaces the local file, and a snapshot starts
//! this epoch's generation), and capturing each commit's pages as the next
//! LTX object, uploaded in the durability round under the acknowledgement
//! rule (`cellhost_fleet::Fleet::publish`). A cell that stays open long
//! also uploads snapshots within its epoch (`cellhost_logic::compact`), so
//! that a restore reads the database and its recent changes, not every
//! commit since the cell opened.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cellhost_fleet::{Fleet, PagedRestore, Restored, Upload, encode_ltx};
use cellhost_logic::compact::{Compactor, Pending, SnapshotPolicy};
use cellhost_storage::{Captured, CellDb};

/// Replication state of one open cell.
pub(crate) struct Repl {
  pub scope: String,
  pub epoch: u64,
  /// The last TXID captured in this epoch.
  pub txid: u64,
  compactor: Compactor,
  /// The snapshot taken, waiting until its TXID is durable.
  snapshot: Option<Vec<u8>>,
  /// Snapshots whose upload failed (reported from the fleet runtime).
  failed: Arc<Mutex<Vec<Pending>>>,
  /// The epoch paged in and has no snapshot of its own yet: one is taken
  /// at the first commit after the local file is whole.
  paged: bool,
}

impl Repl {
  fn new(scope: &str, epoch: u64) -> Self {
    Repl {
      scope: scope.to_string(),
      epoch,
      txid: 1,
      compactor: Compactor::new(SnapshotPolicy::default()),
      snapshot: None,
      failed: Arc::default(),
      paged: false,
    }
  }

  /// The durability round `round` made this cell's commits through it
  /// durable: a snapshot that waited for them goes to the bucket.
  pub(crate) fn on_durable(&mut self, fleet: &Fleet, round: u64) {
    let Some(p) = self.compactor.on_durable(round) else {
      return;
    };
    let Some(bytes) = self.snapshot.take() else {
      return;
    };
    let upload = Upload {
      scope: self.scope.clone(),
      epoch: self.epoch,
      txid: p.txid,
      bytes,
    };
    let failed = self.failed.clone();
    fleet.put_snapshot(upload, move |ok| {
      if !ok {
        failed.lock().unwrap().push(p);
      }
    });
  }

  /// A write of this cell will not be acknowledged: what it committed
  /// since the last durable round is never snapshotted.
  pub(crate) fn on_broken(&mut self) {
    self.compactor.on_broken();
    self.snapshot = None;
  }
}

/// The WAL grows to at most this much before it is folded into the
/// database (after its frames were captured).
const CHECKPOINT_BYTES: u64 = 4 << 20;

fn ltx(c: &Captured, min: u64, max: u64) -> Result<Vec<u8>, String> {
  encode_ltx(c.page_size, c.commit, &c.pages, min, max)
}

/// Takes the cell `scope` and opens its database at `path`, without
/// blocking the isolate: other cells keep serving while this one talks to
/// the bucket. A point-in-time restore the cell's last session scheduled
/// (`key` names the object in its bookmarks) is carried out here: the
/// epoch opens from the bookmarked state instead of the newest one.
pub(crate) async fn open(
  fleet: Arc<Fleet>,
  path: PathBuf,
  scope: String,
  key: String,
) -> Result<(CellDb, Repl), cellhost_fleet::ActivateError> {
  let act = fleet.activate(scope.clone()).await?;
  let epoch = act.epoch;
  let (mut db, mut marker) = match act.restored {
    Restored::Empty => (place(&path, None)?, None),
    Restored::Image(image) => (place(&path, Some(image))?, None),
    Restored::Paged(p) => (place_paged(&path, &p)?, Some(p.marker)),
  };
  if let Some(b) = db.pending_restore().map_err(|e| e.0)? {
    let target = cellhost_pitr::Bookmark::parse(&key, &b)?;
    let image = fleet.image_at(&scope, target.epoch, target.txid).await?;
    drop(db);
    db = place(&path, Some(image))?;
    marker = None;
    // The bookmarked state may hold an older restore request of its own.
    db.clear_pending_restore().map_err(|e| e.0)?;
    tracing::info!(
      "{scope}: restored to bookmark {b} (epoch {}, TXID {})",
      target.epoch,
      target.txid
    );
  }
  if let Some(m) = marker {
    // The epoch opens with its link, in the bucket before the cell serves;
    // its own snapshot follows once the local file is whole.
    db.enable_capture().map_err(|e| e.0)?;
    fleet.put_marker(&scope, m).await?;
    tracing::info!(
      "{scope}: paged in from epoch {} at TXID {} (epoch {epoch})",
      m.from,
      m.cut
    );
    let mut repl = Repl::new(&scope, epoch);
    repl.paged = true;
    return Ok((db, repl));
  }
  let (db, repl, upload) = start(db, &scope, epoch)?;
  // The generation's snapshot is in the bucket before the cell serves.
  fleet.publish(vec![upload]).await.map_err(|failed| {
    failed
      .into_iter()
      .map(|(_, m)| m)
      .collect::<Vec<_>>()
      .join("; ")
  })?;
  Ok((db, repl))
}

/// Replaces the local file with `image` (the bucket wins over whatever the
/// file holds; `None`: start empty) and opens it.
fn place(path: &Path, image: Option<Vec<u8>>) -> Result<CellDb, String> {
  remove_files(path)?;
  if let Some(image) = image {
    if let Some(dir) = path.parent() {
      std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, image).map_err(|e| format!("{}: {e}", path.display()))?;
  }
  CellDb::open(path).map_err(|e| e.0)
}

/// The pages of a paged restore, fetched by the cell's VFS on first use.
struct Source(Arc<cellhost_fleet::PagedChain>);

impl cellhost_storage::paged::PageSource for Source {
  fn page(&self, pgno: u32) -> Result<Vec<u8>, String> {
    self.0.page(pgno)
  }
  fn fill(&self, put: &mut dyn FnMut(u32, &[u8])) -> Result<(), String> {
    self.0.fill(put)
  }
}

/// Opens the local file over the bucket's pages (whatever it held goes).
fn place_paged(path: &Path, p: &PagedRestore) -> Result<CellDb, String> {
  remove_files(path)?;
  let source = Arc::new(Source(p.chain.clone()));
  let paged = cellhost_storage::paged::prepare(path, p.chain.page_size, p.chain.pages, source)
    .map_err(|e| e.0)?;
  CellDb::open_paged(path, paged).map_err(|e| e.0)
}

/// Makes the snapshot that opens this epoch's generation.
fn start(mut db: CellDb, scope: &str, epoch: u64) -> Result<(CellDb, Repl, Upload), String> {
  db.enable_capture().map_err(|e| e.0)?;
  let snap = db.snapshot().map_err(|e| e.0)?;
  let upload = Upload {
    scope: scope.to_string(),
    epoch,
    txid: 1,
    bytes: ltx(&snap, 1, 1)?,
  };
  let repl = Repl::new(scope, epoch);
  Ok((db, repl, upload))
}

/// After a commit that durability round `round` carries: its pages as the
/// next LTX object of the epoch, and when one is due a snapshot of the
/// database as of that commit (taken now, uploaded once it is durable).
/// `None`: the cell is closing, so no snapshot (its next activation opens
/// a new epoch with one anyway).
pub(crate) fn capture(
  db: &mut CellDb,
  repl: &mut Repl,
  round: Option<u64>,
) -> Result<Option<Upload>, String> {
  let Some(c) = db.take_captured().map_err(|e| e.0)? else {
    return Ok(None);
  };
  let txid = repl.txid + 1;
  let bytes = ltx(&c, txid, txid)?;
  repl.txid = txid;
  for p in std::mem::take(&mut *repl.failed.lock().unwrap()) {
    repl.compactor.on_upload_failed(p);
  }
  let db_bytes = u64::from(c.commit) * u64::from(c.page_size);
  if repl.paged && db.local_complete() {
    repl.paged = false;
    repl.compactor.owe();
  }
  // A paged epoch snapshots only once its file is whole (a snapshot reads
  // the file).
  if let Some(round) = round
    && !repl.paged
    && repl
      .compactor
      .on_capture(txid, bytes.len() as u64, db_bytes, round)
  {
    // Nothing else has committed since `txid`: this is its state. A
    // snapshot is an optimisation: failing to take one fails no commit.
    match db
      .snapshot()
      .map_err(|e| e.0)
      .and_then(|s| ltx(&s, 1, txid))
    {
      Ok(bytes) => repl.snapshot = Some(bytes),
      Err(e) => {
        tracing::warn!("{}: no snapshot at TXID {txid}: {e}", repl.scope);
        repl.compactor.abandon();
      }
    }
  }
  db.checkpoint_if_large(CHECKPOINT_BYTES).map_err(|e| e.0)?;
  Ok(Some(Upload {
    scope: repl.scope.clone(),
    epoch: repl.epoch,
    txid,
    bytes,
  }))
}

/// Empties the cell `scope` in the bucket (a deleted facet): takes it at a
/// new epoch whose generation starts from an empty database, so every
/// restore from now on finds it empty. `scratch` holds that database while
/// its snapshot is made. Blocks the caller for a few bucket round trips.
pub(crate) fn wipe(fleet: &Fleet, scratch: &Path, scope: &str) -> Result<(), String> {
  let act = fleet
    .activate_blocking(scope.to_string())
    .map_err(|e| e.message)?;
  let (db, _, upload) = start(place(scratch, None)?, scope, act.epoch)?;
  drop(db);
  remove_files(scratch)?;
  fleet.publish_one_blocking(upload)
}

/// Removes a database file and its WAL and shared-memory files.
pub(crate) fn remove_files(path: &Path) -> Result<(), String> {
  for suffix in ["", "-wal", "-shm"] {
    let mut side = path.as_os_str().to_owned();
    side.push(suffix);
    match std::fs::remove_file(&side) {
      Ok(()) => {}
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
      Err(e) => return Err(format!("{}: {e}", Path::new(&side).display())),
    }
  }
  Ok(())
}

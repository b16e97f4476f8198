//! Paged cells: a database opened over a sparse local file whose pages come
//! from elsewhere (the bucket's LTX objects) on first use, while a
//! background thread fills the rest. SQLite reads the main database only
//! through its VFS, so a VFS (`cellhost-paged`, over `unix-none`) is where
//! a page that is not here yet is fetched and written in before the read
//! goes on. Pages SQLite writes itself (checkpoints) are the newest and are
//! never overwritten by a fetch: one lock covers "missing?" and the write.
//! The WAL and everything else pass straight through.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};

use libsqlite3_sys as ffi;

use crate::StorageError;

/// Where a paged database's pages come from.
pub trait PageSource: Send + Sync + 'static {
  /// Page `pgno` (from 1) as of the state the cell opened at: `page_size`
  /// bytes. Called on the thread that runs SQL, so it blocks.
  fn page(&self, pgno: u32) -> Result<Vec<u8>, String>;
  /// Every page, in any order, handed to `put` (the background fill).
  fn fill(&self, put: &mut dyn FnMut(u32, &[u8])) -> Result<(), String>;
}

struct State {
  /// Pages 1..=len(present) that the file still lacks are `false`.
  present: Vec<bool>,
  missing: usize,
}

/// One paged database file.
pub struct Paged {
  source: Arc<dyn PageSource>,
  file: std::fs::File,
  page_size: u64,
  state: Mutex<State>,
  filled: Condvar,
}

impl Paged {
  fn done(&self, st: &State) -> bool {
    st.missing == 0
  }

  /// Whether every page is in the local file.
  pub fn complete(&self) -> bool {
    self.done(&self.state.lock().unwrap())
  }

  /// Blocks until the background fill is done.
  pub fn wait_complete(&self) {
    let mut st = self.state.lock().unwrap();
    while !self.done(&st) {
      st = self.filled.wait(st).unwrap();
    }
  }

  /// Writes `data` as page `pgno` unless the file has it already (fetched
  /// before, or written by SQLite: newer than any fetch).
  fn put(&self, pgno: u32, data: &[u8]) -> std::io::Result<()> {
    let mut st = self.state.lock().unwrap();
    let i = pgno as usize - 1;
    if st.present.get(i) != Some(&false) {
      return Ok(());
    }
    self
      .file
      .write_all_at(data, u64::from(pgno - 1) * self.page_size)?;
    st.present[i] = true;
    st.missing -= 1;
    if st.missing == 0 {
      self.filled.notify_all();
    }
    Ok(())
  }

  /// The pages of byte range `off..off + len`, from the first to the last.
  fn pages(&self, off: i64, len: c_int) -> std::ops::RangeInclusive<u32> {
    let first = off.max(0) as u64 / self.page_size;
    let last = (off.max(0) as u64 + (len.max(1) as u64) - 1) / self.page_size;
    (first as u32 + 1)..=(last as u32 + 1)
  }

  /// Fetches what a read or a partial write of `off..off + len` needs.
  fn ensure(&self, off: i64, len: c_int) -> Result<(), String> {
    for pgno in self.pages(off, len) {
      let missing = self.state.lock().unwrap().present.get(pgno as usize - 1) == Some(&false);
      if missing {
        let data = self.source.page(pgno)?;
        if data.len() as u64 != self.page_size {
          return Err(format!("page {pgno} came with {} bytes", data.len()));
        }
        self.put(pgno, &data).map_err(|e| e.to_string())?;
      }
    }
    Ok(())
  }

  /// SQLite wrote (or truncated away) these pages: nothing to fetch. The
  /// caller holds the lock across its write and this.
  fn written(&self, st: &mut State, pages: std::ops::RangeInclusive<u32>) {
    for pgno in pages {
      if let Some(p) = st.present.get_mut(pgno as usize - 1)
        && !*p
      {
        *p = true;
        st.missing -= 1;
      }
    }
    if st.missing == 0 {
      self.filled.notify_all();
    }
  }
}

/// Prepares `path` as a paged database of `pages` pages of `page_size`
/// bytes (a sparse file of that size) and starts its background fill.
/// Open it with [`crate::CellDb::open_paged`].
pub fn prepare(
  path: &Path,
  page_size: u32,
  pages: u32,
  source: Arc<dyn PageSource>,
) -> Result<Arc<Paged>, StorageError> {
  let io = |e: std::io::Error| StorageError(format!("{}: {e}", path.display()));
  if let Some(dir) = path.parent() {
    std::fs::create_dir_all(dir).map_err(io)?;
  }
  let file = std::fs::OpenOptions::new()
    .read(true)
    .write(true)
    .create(true)
    .truncate(true)
    .open(path)
    .map_err(io)?;
  file
    .set_len(u64::from(pages) * u64::from(page_size))
    .map_err(io)?;
  let paged = Arc::new(Paged {
    source,
    file,
    page_size: u64::from(page_size),
    state: Mutex::new(State {
      present: vec![false; pages as usize],
      missing: pages as usize,
    }),
    filled: Condvar::new(),
  });
  let filler = paged.clone();
  let name = path.display().to_string();
  std::thread::Builder::new()
    .name("cellhost-page-fill".into())
    .spawn(move || fill(&filler, &name))
    .map_err(io)?;
  Ok(paged)
}

/// The background fill: retried until every page is here.
fn fill(paged: &Paged, name: &str) {
  let mut pause = std::time::Duration::from_millis(200);
  while !paged.complete() {
    let mut failed = None;
    let r = paged.source.fill(&mut |pgno, data| {
      if failed.is_none()
        && let Err(e) = paged.put(pgno, data)
      {
        failed = Some(e.to_string());
      }
    });
    match r.err().or(failed) {
      None if paged.complete() => {
        tracing::info!("{name}: every page is local now");
        return;
      }
      None => {
        tracing::warn!("{name}: the fill left pages out; again");
      }
      Some(e) => tracing::warn!("{name}: filling from the bucket: {e}; retrying"),
    }
    std::thread::sleep(pause);
    pause = (pause * 2).min(std::time::Duration::from_secs(10));
  }
}

/// Paged databases about to be opened, by the id in their URI.
fn waiting() -> &'static Mutex<HashMap<u64, Arc<Paged>>> {
  static W: std::sync::OnceLock<Mutex<HashMap<u64, Arc<Paged>>>> = std::sync::OnceLock::new();
  W.get_or_init(Default::default)
}

/// The URI that opens `path` over `paged` with the paged VFS.
pub(crate) fn uri(path: &Path, paged: &Arc<Paged>) -> Result<String, StorageError> {
  register()?;
  static NEXT: AtomicU64 = AtomicU64::new(1);
  let id = NEXT.fetch_add(1, Ordering::Relaxed);
  waiting().lock().unwrap().insert(id, paged.clone());
  let mut p = String::new();
  for c in path.to_string_lossy().chars() {
    match c {
      '%' | '?' | '#' => p.push_str(&format!("%{:02X}", c as u32)),
      c => p.push(c),
    }
  }
  Ok(format!("file:{p}?paged={id}"))
}

/// Forgets a registration whose open failed.
pub(crate) fn forget(uri: &str) {
  if let Some(id) = uri.rsplit("paged=").next().and_then(|s| s.parse().ok()) {
    waiting().lock().unwrap().remove(&id);
  }
}

pub(crate) const VFS: &str = "cellhost-paged";

/// A file of the paged VFS: our methods, the paged database (null for a
/// file that is not one), then the `unix-none` file it wraps.
#[repr(C)]
struct File {
  base: ffi::sqlite3_file,
  paged: *const Paged,
}

const HEAD: usize = std::mem::size_of::<File>();

unsafe fn parts(f: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, Option<&'static Paged>) {
  // SAFETY: `f` is one of our files (SQLite only hands back what xOpen
  // filled); the wrapped file follows the header, and the Paged lives until
  // xClose releases it.
  unsafe {
    let real = (f as *mut u8).add(HEAD) as *mut ffi::sqlite3_file;
    let paged = (*(f as *mut File)).paged;
    (real, paged.as_ref())
  }
}

unsafe fn real_methods(real: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
  // SAFETY: the wrapped file opened, so its methods are set.
  unsafe { &*(*real).pMethods }
}

fn register() -> Result<(), StorageError> {
  static ONCE: Once = Once::new();
  static mut FAILED: bool = false;
  ONCE.call_once(|| unsafe {
    // SAFETY: registration runs once; the structure is leaked so it
    // outlives every connection.
    let name = CString::new("unix-none").unwrap();
    let base = ffi::sqlite3_vfs_find(name.as_ptr());
    if base.is_null() {
      FAILED = true;
      return;
    }
    let mut vfs: ffi::sqlite3_vfs = *base;
    vfs.szOsFile = (HEAD as c_int) + (*base).szOsFile;
    vfs.zName = CString::new(VFS).unwrap().into_raw();
    vfs.pAppData = base as *mut c_void;
    vfs.pNext = std::ptr::null_mut();
    vfs.xOpen = Some(x_open);
    let vfs = Box::into_raw(Box::new(vfs));
    if ffi::sqlite3_vfs_register(vfs, 0) != ffi::SQLITE_OK {
      FAILED = true;
    }
  });
  // SAFETY: written only inside `call_once`, which has returned.
  if unsafe { FAILED } {
    return Err(StorageError("cannot register the paged VFS".into()));
  }
  Ok(())
}

unsafe extern "C" fn x_open(
  vfs: *mut ffi::sqlite3_vfs,
  name: *const c_char,
  f: *mut ffi::sqlite3_file,
  flags: c_int,
  out_flags: *mut c_int,
) -> c_int {
  // SAFETY: SQLite's contract for xOpen: `f` has szOsFile bytes.
  unsafe {
    let base = (*vfs).pAppData as *mut ffi::sqlite3_vfs;
    let real = (f as *mut u8).add(HEAD) as *mut ffi::sqlite3_file;
    let file = f as *mut File;
    (*file).base.pMethods = std::ptr::null();
    (*file).paged = std::ptr::null();
    let rc = ((*base).xOpen.unwrap())(base, name, real, flags, out_flags);
    if rc != ffi::SQLITE_OK || (*real).pMethods.is_null() {
      return rc;
    }
    if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 && !name.is_null() {
      let key = CString::new("paged").unwrap();
      let id = ffi::sqlite3_uri_parameter(name, key.as_ptr());
      let id = (!id.is_null())
        .then(|| CStr::from_ptr(id).to_str().ok()?.parse::<u64>().ok())
        .flatten();
      if let Some(p) = id.and_then(|id| waiting().lock().unwrap().remove(&id)) {
        (*file).paged = Arc::into_raw(p);
      }
    }
    (*file).base.pMethods = &METHODS;
    ffi::SQLITE_OK
  }
}

unsafe extern "C" fn x_close(f: *mut ffi::sqlite3_file) -> c_int {
  unsafe {
    let (real, _) = parts(f);
    let rc = (real_methods(real).xClose.unwrap())(real);
    let file = f as *mut File;
    if !(*file).paged.is_null() {
      drop(Arc::from_raw((*file).paged));
      (*file).paged = std::ptr::null();
    }
    rc
  }
}

unsafe extern "C" fn x_read(
  f: *mut ffi::sqlite3_file,
  buf: *mut c_void,
  amt: c_int,
  off: ffi::sqlite3_int64,
) -> c_int {
  unsafe {
    let (real, paged) = parts(f);
    if let Some(p) = paged
      && let Err(e) = p.ensure(off, amt)
    {
      tracing::error!("a paged database could not read page(s) at {off}: {e}");
      return ffi::SQLITE_IOERR_READ;
    }
    (real_methods(real).xRead.unwrap())(real, buf, amt, off)
  }
}

unsafe extern "C" fn x_write(
  f: *mut ffi::sqlite3_file,
  buf: *const c_void,
  amt: c_int,
  off: ffi::sqlite3_int64,
) -> c_int {
  unsafe {
    let (real, paged) = parts(f);
    let Some(p) = paged else {
      return (real_methods(real).xWrite.unwrap())(real, buf, amt, off);
    };
    // A page written in part keeps the rest of it: fetch it first.
    let ps = p.page_size as i64;
    if (off % ps != 0 || amt as i64 % ps != 0) && p.ensure(off, amt).is_err() {
      return ffi::SQLITE_IOERR_WRITE;
    }
    // Under the lock, with the marking: the fill never writes over what
    // SQLite wrote.
    let mut st = p.state.lock().unwrap();
    let rc = (real_methods(real).xWrite.unwrap())(real, buf, amt, off);
    if rc == ffi::SQLITE_OK {
      p.written(&mut st, p.pages(off, amt));
    }
    rc
  }
}

unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
  unsafe {
    let (real, paged) = parts(f);
    let Some(p) = paged else {
      return (real_methods(real).xTruncate.unwrap())(real, size);
    };
    let mut st = p.state.lock().unwrap();
    let rc = (real_methods(real).xTruncate.unwrap())(real, size);
    if rc == ffi::SQLITE_OK {
      // Gone: a regrowth is SQLite's to write, never a fetch.
      let from = (size.max(0) as u64).div_ceil(p.page_size) as u32 + 1;
      let to = st.present.len() as u32;
      if from <= to {
        p.written(&mut st, from..=to);
      }
    }
    rc
  }
}

macro_rules! forward {
  ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*)) => {
    unsafe extern "C" fn $name(f: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
      unsafe {
        let (real, _) = parts(f);
        match real_methods(real).$field {
          Some(m) => m(real $(, $arg)*),
          None => ffi::SQLITE_IOERR,
        }
      }
    }
  };
}

forward!(x_sync, xSync, (flags: c_int));
forward!(x_file_size, xFileSize, (size: *mut ffi::sqlite3_int64));
forward!(x_lock, xLock, (level: c_int));
forward!(x_unlock, xUnlock, (level: c_int));
forward!(x_check_reserved_lock, xCheckReservedLock, (out: *mut c_int));
forward!(x_file_control, xFileControl, (op: c_int, arg: *mut c_void));
forward!(x_shm_map, xShmMap, (region: c_int, size: c_int, extend: c_int, pp: *mut *mut c_void));
forward!(x_shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int));
forward!(x_shm_unmap, xShmUnmap, (delete: c_int));
forward!(x_unfetch, xUnfetch, (off: ffi::sqlite3_int64, p: *mut c_void));

unsafe extern "C" fn x_sector_size(f: *mut ffi::sqlite3_file) -> c_int {
  unsafe {
    let (real, _) = parts(f);
    real_methods(real).xSectorSize.map_or(4096, |m| m(real))
  }
}

unsafe extern "C" fn x_device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
  unsafe {
    let (real, _) = parts(f);
    real_methods(real)
      .xDeviceCharacteristics
      .map_or(0, |m| m(real))
  }
}

unsafe extern "C" fn x_shm_barrier(f: *mut ffi::sqlite3_file) {
  unsafe {
    let (real, _) = parts(f);
    if let Some(m) = real_methods(real).xShmBarrier {
      m(real)
    }
  }
}

unsafe extern "C" fn x_fetch(
  f: *mut ffi::sqlite3_file,
  off: ffi::sqlite3_int64,
  amt: c_int,
  pp: *mut *mut c_void,
) -> c_int {
  unsafe {
    let (real, paged) = parts(f);
    // A memory map would read the holes: a paged file is read, not mapped.
    if paged.is_some() {
      *pp = std::ptr::null_mut();
      return ffi::SQLITE_OK;
    }
    match real_methods(real).xFetch {
      Some(m) => m(real, off, amt, pp),
      None => {
        *pp = std::ptr::null_mut();
        ffi::SQLITE_OK
      }
    }
  }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
  iVersion: 3,
  xClose: Some(x_close),
  xRead: Some(x_read),
  xWrite: Some(x_write),
  xTruncate: Some(x_truncate),
  xSync: Some(x_sync),
  xFileSize: Some(x_file_size),
  xLock: Some(x_lock),
  xUnlock: Some(x_unlock),
  xCheckReservedLock: Some(x_check_reserved_lock),
  xFileControl: Some(x_file_control),
  xSectorSize: Some(x_sector_size),
  xDeviceCharacteristics: Some(x_device_characteristics),
  xShmMap: Some(x_shm_map),
  xShmLock: Some(x_shm_lock),
  xShmBarrier: Some(x_shm_barrier),
  xShmUnmap: Some(x_shm_unmap),
  xFetch: Some(x_fetch),
  xUnfetch: Some(x_unfetch),
};

#[cfg(test)]
mod tests {
  use std::sync::atomic::AtomicUsize;

  use super::*;
  use crate::CellDb;

  /// A database image as the source; the fill waits until let go.
  struct Image {
    bytes: Vec<u8>,
    page_size: usize,
    fetched: AtomicUsize,
    go: Mutex<bool>,
    went: Condvar,
  }

  impl PageSource for Image {
    fn page(&self, pgno: u32) -> Result<Vec<u8>, String> {
      self.fetched.fetch_add(1, Ordering::Relaxed);
      let at = (pgno as usize - 1) * self.page_size;
      Ok(self.bytes[at..at + self.page_size].to_vec())
    }
    fn fill(&self, put: &mut dyn FnMut(u32, &[u8])) -> Result<(), String> {
      let mut go = self.go.lock().unwrap();
      while !*go {
        go = self.went.wait(go).unwrap();
      }
      for (i, page) in self.bytes.chunks(self.page_size).enumerate() {
        put(i as u32 + 1, page);
      }
      Ok(())
    }
  }

  fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cellhost-paged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
  }

  fn value(i: usize, round: u8) -> Vec<u8> {
    vec![(i % 251) as u8 ^ round; 1000]
  }

  #[test]
  fn a_paged_database_reads_what_it_touches_and_keeps_its_own_writes() {
    let d = dir();
    let whole = d.join("whole.sqlite");
    let mut db = CellDb::open(&whole).unwrap();
    for i in 0..3000 {
      db.kv_put(&format!("k{i:05}"), &value(i, 0)).unwrap();
    }
    db.commit().unwrap();
    db.checkpoint().unwrap();
    drop(db);
    let bytes = std::fs::read(&whole).unwrap();
    let page_size = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    let pages = (bytes.len() / page_size) as u32;
    assert!(pages > 500, "{pages} pages");
    let src = Arc::new(Image {
      bytes,
      page_size,
      fetched: AtomicUsize::new(0),
      go: Mutex::new(false),
      went: Condvar::new(),
    });

    let path = d.join("paged.sqlite");
    let paged = prepare(&path, page_size as u32, pages, src.clone()).unwrap();
    let mut db = CellDb::open_paged(&path, paged.clone()).unwrap();
    assert_eq!(db.kv_get("k01234").unwrap(), Some(value(1234, 0)));
    let fetched = src.fetched.load(Ordering::Relaxed);
    assert!(
      fetched < 40,
      "a point read fetched {fetched} of {pages} pages"
    );
    assert!(!db.local_complete());
    // A write, folded into the file before the fill runs: the fill must
    // not put the bucket's older page back over it.
    db.kv_put("k01234", &value(1234, 7)).unwrap();
    db.commit().unwrap();
    db.checkpoint().unwrap();
    *src.go.lock().unwrap() = true;
    src.went.notify_all();
    paged.wait_complete();
    assert!(db.local_complete());
    for i in (0..3000).step_by(97) {
      let want = value(i, if i == 1234 { 7 } else { 0 });
      assert_eq!(db.kv_get(&format!("k{i:05}")).unwrap(), Some(want), "k{i}");
    }
    drop(db);
    // The filled file stands alone.
    let mut db = CellDb::open(&path).unwrap();
    assert_eq!(db.kv_get("k01234").unwrap(), Some(value(1234, 7)));
    assert_eq!(db.kv_get("k02999").unwrap(), Some(value(2999, 0)));
    let _ = std::fs::remove_dir_all(&d);
  }
}

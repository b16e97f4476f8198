//! The directory bucket (`file:///abs/path`): atomic across processes on one machine.
//!
//! Each object is one file at `<root>/<key>`: a 32-byte header (magic + the write's
//! random version token) followed by the content. The token lives inside the file, so it
//! changes atomically with the content on every write; an inode or mtime could repeat
//! (inodes are reused) and let a stale CAS through.
//!
//! Every write stages a temp file under `<root>/.cellhost-bucket/tmp`, fsyncs it, then
//! commits it: `create` with `link()` (fails when the key exists, atomically), `put`/`cas`
//! with `rename()` while holding an exclusive `flock` on the key's lock file, which
//! `cas` and `delete` also hold, so "compare the token, then replace" cannot interleave
//! with another process. The parent directory is fsynced before success is reported.
//!
//! A conditional write that fails before its `link()`/`rename()` (staging, the lock, the
//! token check, the link or rename itself, each atomic) changed nothing: it is `Failed`,
//! and safe to retry. Only a failure after the object is in place (the directory fsync) is
//! `Ambiguous`, since the new object may or may not survive a crash.
//!
//! Limits that follow from using a real directory tree: a key cannot be both an object and
//! a prefix of another (`a` and `a/b`; S3 allows it), and deleting the last object under a
//! prefix leaves its (empty) directories behind. Directories are never removed, so a create
//! cannot race a cleanup.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::{BoxFuture, ByteRange, Error, ObjectInfo, Result, Store, Version, WriteOutcome};

/// The bucket's own directory under the root; keys may not start with it.
pub(crate) const META_DIR: &str = ".cellhost-bucket";
const MAGIC: &[u8; 8] = b"CHBKT01\n";
const TOKEN_LEN: usize = 24;
const HEADER: u64 = (MAGIC.len() + TOKEN_LEN) as u64;

#[derive(Clone)]
pub(crate) struct LocalDir {
  root: Arc<PathBuf>,
}

fn io_err(e: io::Error) -> Error {
  Error::Store(e.to_string())
}

impl LocalDir {
  pub(crate) fn open(path: &str) -> Result<LocalDir> {
    if !path.starts_with('/') {
      return Err(Error::InvalidUrl(format!(
        "file://{path}: the path must be absolute"
      )));
    }
    let root = PathBuf::from(path);
    for sub in ["tmp", "locks"] {
      fs::create_dir_all(root.join(META_DIR).join(sub))
        .map_err(|e| Error::InvalidUrl(format!("file://{path}: {e}")))?;
    }
    Ok(LocalDir {
      root: Arc::new(root),
    })
  }

  fn object(&self, key: &str) -> PathBuf {
    self.root.join(key)
  }

  /// A read that finds nothing means "absent" only while the bucket itself
  /// is there: a root that is gone or not a directory (an unmounted volume,
  /// a link pointing elsewhere) fails the read, or a restore would list an
  /// empty history and start a cell from nothing. Reads check before they
  /// start and again when they find nothing, so a root that was away at any
  /// moment in between is seen.
  fn reachable(&self) -> io::Result<()> {
    match fs::metadata(self.root.join(META_DIR)) {
      Ok(m) if m.is_dir() => Ok(()),
      Ok(_) => Err(self.unreachable("its own directory is not a directory")),
      Err(e) => Err(self.unreachable(&e.to_string())),
    }
  }

  /// The error of a bucket whose root cannot be reached (never `NotFound`,
  /// which callers read as an absent key).
  fn unreachable(&self, why: &str) -> io::Error {
    io::Error::other(format!(
      "the bucket directory {} is unreachable ({why})",
      self.root.display()
    ))
  }

  /// `e` from a read of something absent (not found, or a path through a
  /// file), once the bucket is confirmed reachable; any other error as is.
  fn absent(&self, e: io::Error) -> io::Result<()> {
    match e.kind() {
      io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => self.reachable(),
      _ => Err(e),
    }
  }

  /// Writes header + data to a fresh temp file and fsyncs it.
  fn stage(&self, data: &[u8], token: &str) -> io::Result<PathBuf> {
    let tmp = self
      .root
      .join(META_DIR)
      .join("tmp")
      .join(crate::unique_token());
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let res = (|| {
      f.write_all(MAGIC)?;
      f.write_all(token.as_bytes())?;
      f.write_all(data)?;
      f.sync_all()
    })();
    if let Err(e) = res {
      let _ = fs::remove_file(&tmp);
      return Err(e);
    }
    Ok(tmp)
  }

  /// An exclusive lock on `key`, held until the returned file is dropped. flock locks
  /// belong to the open file description, so they exclude other threads of this process
  /// as well as other processes.
  fn lock(&self, key: &str) -> io::Result<File> {
    let name: String = Sha256::digest(key.as_bytes())[..16]
      .iter()
      .map(|b| format!("{b:02x}"))
      .collect();
    let path = self.root.join(META_DIR).join("locks").join(name);
    let f = OpenOptions::new()
      .create(true)
      .truncate(false)
      .write(true)
      .open(path)?;
    loop {
      // SAFETY: flock on a file descriptor we own for the duration of the call.
      if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
        return Ok(f);
      }
      let e = io::Error::last_os_error();
      if e.kind() != io::ErrorKind::Interrupted {
        return Err(e);
      }
    }
  }

  /// Creates the missing directories of `dir`, fsyncing each new one's parent so the
  /// directory entry survives a crash.
  fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
      return Ok(());
    }
    if let Some(parent) = dir.parent() {
      self.ensure_dir(parent)?;
    }
    match fs::create_dir(dir) {
      Ok(()) => sync_dir(dir.parent().unwrap_or(dir)),
      Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
      Err(e) => Err(e),
    }
  }

  fn do_get(&self, key: &str) -> io::Result<Option<(Bytes, Version)>> {
    self.reachable()?;
    let mut f = match File::open(self.object(key)) {
      Ok(f) => f,
      Err(e) => return self.absent(e).map(|()| None),
    };
    if f.metadata()?.is_dir() {
      // Only a prefix of other keys (`a` when `a/b` exists): no object here.
      return Ok(None);
    }
    let token = read_token(&mut f)?;
    let mut data = Vec::new();
    f.read_to_end(&mut data)?;
    Ok(Some((data.into(), version(token))))
  }

  fn do_get_range(&self, key: &str, range: &ByteRange) -> Result<Bytes> {
    self.reachable().map_err(io_err)?;
    let mut f = match File::open(self.object(key)) {
      Ok(f) => f,
      Err(e) => {
        self.absent(e).map_err(io_err)?;
        return Err(Error::NotFound(key.into()));
      }
    };
    read_token(&mut f).map_err(io_err)?;
    let len = f.metadata().map_err(io_err)?.len() - HEADER;
    let r = range.resolve(len).map_err(Error::RangeNotSatisfiable)?;
    f.seek(SeekFrom::Start(HEADER + r.start)).map_err(io_err)?;
    let mut buf = vec![0; (r.end - r.start) as usize];
    f.read_exact(&mut buf).map_err(io_err)?;
    Ok(buf.into())
  }

  fn do_put(&self, key: &str, data: &[u8]) -> io::Result<Version> {
    let token = crate::unique_token();
    let tmp = self.stage(data, &token)?;
    let dest = self.object(key);
    let res = (|| {
      let parent = dest.parent().unwrap_or(&self.root);
      self.ensure_dir(parent)?;
      let _lock = self.lock(key)?;
      fs::rename(&tmp, &dest)?;
      sync_dir(parent)
    })();
    let _ = fs::remove_file(&tmp);
    res.map(|()| version(token))
  }

  fn do_create(&self, key: &str, data: &[u8]) -> WriteOutcome {
    let token = crate::unique_token();
    let tmp = match self.stage(data, &token) {
      Ok(t) => t,
      Err(e) => return WriteOutcome::Failed(format!("staging {key}: {e}")),
    };
    let dest = self.object(key);
    let parent = dest.parent().unwrap_or(&self.root);
    // link() fails with EEXIST when the key exists: the check and the write are one step.
    let res = self
      .ensure_dir(parent)
      .and_then(|()| fs::hard_link(&tmp, &dest));
    let _ = fs::remove_file(&tmp);
    match res {
      Ok(()) => match sync_dir(parent) {
        Ok(()) => WriteOutcome::Applied(version(token)),
        Err(e) => WriteOutcome::Ambiguous(format!("fsync after create {key}: {e}")),
      },
      Err(e) if e.kind() == io::ErrorKind::AlreadyExists => WriteOutcome::Rejected,
      // link() is atomic: when it fails, no object appeared.
      Err(e) => WriteOutcome::Failed(format!("create {key}: {e}")),
    }
  }

  fn do_cas(&self, key: &str, data: &[u8], expected: &Version) -> WriteOutcome {
    let Some(want) = expected.e_tag.as_deref() else {
      return WriteOutcome::Rejected;
    };
    let token = crate::unique_token();
    let tmp = match self.stage(data, &token) {
      Ok(t) => t,
      Err(e) => return WriteOutcome::Failed(format!("staging {key}: {e}")),
    };
    let dest = self.object(key);
    let out = (|| {
      let failed = |e: io::Error| WriteOutcome::Failed(format!("cas {key}: {e}"));
      let _lock = self.lock(key).map_err(failed)?;
      let current = match File::open(&dest) {
        Ok(mut f) => read_token(&mut f).map_err(failed)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(failed(e)),
      };
      if current != want {
        return Ok(false);
      }
      // rename() is atomic: when it fails, the old object is still in place.
      fs::rename(&tmp, &dest).map_err(failed)?;
      sync_dir(dest.parent().unwrap_or(&self.root))
        .map_err(|e| WriteOutcome::Ambiguous(format!("fsync after cas {key}: {e}")))?;
      Ok(true)
    })();
    let _ = fs::remove_file(&tmp);
    match out {
      Ok(true) => WriteOutcome::Applied(version(token)),
      Ok(false) => WriteOutcome::Rejected,
      Err(o) => o,
    }
  }

  fn do_delete(&self, key: &str) -> io::Result<()> {
    let dest = self.object(key);
    let _lock = self.lock(key)?;
    match fs::remove_file(&dest) {
      Ok(()) => sync_dir(dest.parent().unwrap_or(&self.root)),
      Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
      Err(e) => Err(e),
    }
  }

  fn do_list(&self, prefix: &str) -> io::Result<Vec<ObjectInfo>> {
    let mut out = Vec::new();
    for (key, path) in self.walk(prefix)? {
      let mut f = match File::open(&path) {
        Ok(f) => f,
        // Deleted since the walk saw it.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
          self.reachable()?;
          continue;
        }
        Err(e) => return Err(e),
      };
      match read_token(&mut f) {
        Ok(token) => {
          let size = f.metadata()?.len() - HEADER;
          out.push(ObjectInfo {
            key,
            size,
            version: version(token),
          });
        }
        Err(e) => tracing::warn!("bucket {}: skipping {key}: {e}", self.root.display()),
      }
    }
    Ok(out)
  }

  /// `do_list` without opening each object for its version.
  fn do_list_keys(&self, prefix: &str) -> io::Result<Vec<String>> {
    Ok(self.walk(prefix)?.into_iter().map(|(k, _)| k).collect())
  }

  /// The directories directly under `prefix` (one `read_dir`, no walk).
  fn do_list_dirs(&self, prefix: &str) -> io::Result<Vec<String>> {
    self.reachable()?;
    let dir = if prefix.is_empty() {
      self.root.to_path_buf()
    } else {
      self.object(prefix)
    };
    let entries = match fs::read_dir(&dir) {
      Ok(e) => e,
      Err(e) => return self.absent(e).map(|()| Vec::new()),
    };
    let mut out = Vec::new();
    for entry in entries {
      let entry = entry?;
      let Some(name) = entry.file_name().to_str().map(str::to_string) else {
        continue;
      };
      if (prefix.is_empty() && name == META_DIR) || !entry.file_type()?.is_dir() {
        continue;
      }
      out.push(name);
    }
    Ok(out)
  }

  /// Every object file under `prefix`: its key and path.
  fn walk(&self, prefix: &str) -> io::Result<Vec<(String, PathBuf)>> {
    let base = if prefix.is_empty() {
      self.root.to_path_buf()
    } else {
      self.object(prefix)
    };
    self.reachable()?;
    let mut out = Vec::new();
    let mut dirs = vec![(base, prefix.to_string())];
    while let Some((dir, rel)) = dirs.pop() {
      let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        // Absent, a plain object, or deleted between listing its parent
        // and reading it: nothing there, if the bucket is.
        Err(e) => {
          self.absent(e)?;
          continue;
        }
      };
      for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
          continue;
        };
        if rel.is_empty() && name == META_DIR {
          continue;
        }
        let key = if rel.is_empty() {
          name
        } else {
          format!("{rel}/{name}")
        };
        let ty = entry.file_type()?;
        if ty.is_dir() {
          dirs.push((entry.path(), key));
        } else if ty.is_file() {
          out.push((key, entry.path()));
        }
      }
    }
    Ok(out)
  }
}

fn version(token: String) -> Version {
  Version {
    e_tag: Some(token),
    version: None,
  }
}

fn read_token(f: &mut File) -> io::Result<String> {
  let mut head = [0u8; HEADER as usize];
  f.read_exact(&mut head)
    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not a bucket object (short)"))?;
  if &head[..MAGIC.len()] != MAGIC {
    return Err(io::Error::new(
      io::ErrorKind::InvalidData,
      "not a bucket object (magic)",
    ));
  }
  Ok(String::from_utf8_lossy(&head[MAGIC.len()..]).into_owned())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
  File::open(dir)?.sync_all()
}

/// Runs blocking filesystem work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
  tokio::task::spawn_blocking(f).await.ok()
}

const PANICKED: &str = "directory bucket worker panicked";

impl LocalDir {
  /// One file-system operation on the blocking pool, its I/O error as the
  /// bucket's.
  fn run_io<'a, T: Send + 'static>(
    &self,
    f: impl FnOnce(&LocalDir) -> io::Result<T> + Send + 'static,
  ) -> BoxFuture<'a, Result<T>> {
    let me = self.clone();
    Box::pin(async move {
      blocking(move || f(&me).map_err(io_err))
        .await
        .unwrap_or_else(|| Err(Error::Store(PANICKED.into())))
    })
  }
}

impl Store for LocalDir {
  fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, Version)>>> {
    let key = key.to_string();
    self.run_io(move |me| me.do_get(&key))
  }

  fn get_range<'a>(&'a self, key: &'a str, range: ByteRange) -> BoxFuture<'a, Result<Bytes>> {
    let (me, key) = (self.clone(), key.to_string());
    Box::pin(async move {
      blocking(move || me.do_get_range(&key, &range))
        .await
        .unwrap_or_else(|| Err(Error::Store(PANICKED.into())))
    })
  }

  fn put<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, Result<Version>> {
    let key = key.to_string();
    self.run_io(move |me| me.do_put(&key, &data))
  }

  fn create<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, WriteOutcome> {
    let (me, key) = (self.clone(), key.to_string());
    Box::pin(async move {
      blocking(move || me.do_create(&key, &data))
        .await
        .unwrap_or_else(|| WriteOutcome::Ambiguous(PANICKED.into()))
    })
  }

  fn cas<'a>(
    &'a self,
    key: &'a str,
    data: Bytes,
    expected: &'a Version,
  ) -> BoxFuture<'a, WriteOutcome> {
    let (me, key, expected) = (self.clone(), key.to_string(), expected.clone());
    Box::pin(async move {
      blocking(move || me.do_cas(&key, &data, &expected))
        .await
        .unwrap_or_else(|| WriteOutcome::Ambiguous(PANICKED.into()))
    })
  }

  fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>> {
    let key = key.to_string();
    self.run_io(move |me| me.do_delete(&key))
  }

  fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<ObjectInfo>>> {
    let prefix = prefix.to_string();
    self.run_io(move |me| me.do_list(&prefix))
  }

  fn list_keys<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
    let prefix = prefix.to_string();
    self.run_io(move |me| me.do_list_keys(&prefix))
  }

  fn list_dirs<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
    let prefix = prefix.to_string();
    self.run_io(move |me| me.do_list_dirs(&prefix))
  }

  fn describe(&self) -> String {
    format!("file://{}", self.root.display())
  }
}

//! The object-store contract cellhost relies on.
//!
//! A fleet coordinates only through one bucket, so every conditional write here answers
//! with exactly one of *applied*, *rejected*, *failed* or *ambiguous*. Failed means
//! "provably never reached the store": nothing changed, and retrying is safe. Ambiguous
//! means "may have happened": the caller must reconcile by reading, never by retrying
//! blindly.
//!
//! Backends: `file:///abs/path` (our own directory bucket, atomic across processes on one
//! machine), `s3://NAME[/PREFIX]`, `gs://NAME[/PREFIX]` and `az://NAME[/PREFIX]` (through
//! `object_store`). [`storage_test`] asks a store whether it really honours the conditions.

mod local;
mod probe;
mod remote;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use bytes::Bytes;
pub use probe::{
  LIST_OK_LINE, PROBE_OK_LINE, ProbeFault, ProbeOutcome, ProbeReport, list_after_write,
  storage_test,
};

/// The token a conditional overwrite compares against. S3 and Azure compare `e_tag`; GCS
/// compares `version` (the generation); the local bucket puts its write nonce in `e_tag`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Version {
  pub e_tag: Option<String>,
  pub version: Option<String>,
}

/// The answer to a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
  /// The write happened; the object now carries this version.
  Applied(Version),
  /// The store cleanly refused it: the object exists (create) or changed (cas).
  Rejected,
  /// The write provably did not reach the store (staging failed, the connection was never
  /// made, the store refused the credentials): nothing changed. Retrying is safe; the
  /// condition still holds or fails on its own.
  Failed(String),
  /// Anything else: the write may or may not have happened. Reconcile by reading.
  Ambiguous(String),
  /// The store does not implement this conditional write at all, so nothing happened.
  /// cellhost cannot fence cells on such a store; callers treat it as fatal.
  Unsupported(String),
}

/// One object in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
  /// The key relative to the bucket (and its prefix), as given to `put`/`create`.
  pub key: String,
  pub size: u64,
  pub version: Version,
}

/// A byte range of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByteRange {
  /// `start..end`; an `end` past the object is clamped, a `start` at or past it is an error.
  Bounded(std::ops::Range<u64>),
  /// Everything from this offset.
  From(u64),
  /// The last `n` bytes (all of them when the object is shorter).
  Suffix(u64),
}

impl From<std::ops::Range<u64>> for ByteRange {
  fn from(r: std::ops::Range<u64>) -> Self {
    ByteRange::Bounded(r)
  }
}

impl ByteRange {
  /// The concrete byte range this selects in an object of `len` bytes.
  pub fn resolve(&self, len: u64) -> std::result::Result<std::ops::Range<u64>, String> {
    match *self {
      ByteRange::Bounded(ref r) => {
        if r.start >= r.end || r.start >= len {
          return Err(format!(
            "range {}..{} of a {len}-byte object",
            r.start, r.end
          ));
        }
        Ok(r.start..r.end.min(len))
      }
      ByteRange::From(n) => {
        if n >= len {
          return Err(format!("range {n}.. of a {len}-byte object"));
        }
        Ok(n..len)
      }
      ByteRange::Suffix(n) => Ok(len.saturating_sub(n)..len),
    }
  }
}

/// Errors of the non-conditional operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
  /// The key breaks the key rules (see [`validate_key`]).
  InvalidKey(String),
  /// The bucket URL or its options are unusable.
  InvalidUrl(String),
  /// The object does not exist (ranged reads only; `get` answers `None`).
  NotFound(String),
  /// The range lies outside the object.
  RangeNotSatisfiable(String),
  /// The store answered a ranged read with something other than that range (it ignores
  /// `Range`). Not retryable: cellhost cannot restore cells from such a store.
  RangeIgnored(String),
  /// The store failed; the operation may have to be retried.
  Store(String),
}

impl fmt::Display for Error {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      Error::InvalidKey(m) => write!(f, "invalid bucket key: {m}"),
      Error::InvalidUrl(m) => write!(f, "invalid bucket: {m}"),
      Error::NotFound(k) => write!(f, "no such object: {k}"),
      Error::RangeNotSatisfiable(m) => write!(f, "range not satisfiable: {m}"),
      Error::RangeIgnored(m) => write!(f, "the store ignored a ranged read: {m}"),
      Error::Store(m) => write!(f, "bucket error: {m}"),
    }
  }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One storage backend. Keys reaching it are already validated and carry the bucket
/// prefix. Public so tests (and simulators) can wrap a store, e.g. one that ignores
/// conditions.
pub trait Store: Send + Sync + 'static {
  fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, Version)>>>;
  fn get_range<'a>(&'a self, key: &'a str, range: ByteRange) -> BoxFuture<'a, Result<Bytes>>;
  fn put<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, Result<Version>>;
  fn create<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, WriteOutcome>;
  fn cas<'a>(
    &'a self,
    key: &'a str,
    data: Bytes,
    expected: &'a Version,
  ) -> BoxFuture<'a, WriteOutcome>;
  /// Deleting an absent object succeeds, as on S3.
  fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>>;
  /// Every object under `prefix` (a whole-segment prefix, or "" for all), sorted by key.
  fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<ObjectInfo>>>;
  /// The keys `list` would return, for a caller that needs no versions (a
  /// backend that must read each object for its version overrides it).
  fn list_keys<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
    Box::pin(async move {
      Ok(
        self
          .list(prefix)
          .await?
          .into_iter()
          .map(|o| o.key)
          .collect(),
      )
    })
  }
  /// The keys under `prefix` greater than `after` (a whole key): a
  /// start-after listing, so a long history is not listed to read its end.
  fn list_keys_after<'a>(
    &'a self,
    prefix: &'a str,
    after: &'a str,
  ) -> BoxFuture<'a, Result<Vec<String>>> {
    Box::pin(async move {
      let mut keys = self.list_keys(prefix).await?;
      keys.retain(|k| k.as_str() > after);
      Ok(keys)
    })
  }
  /// The names of the "directories" directly under `prefix` (a delimiter
  /// listing's common prefixes, last segment only), in any order.
  fn list_dirs<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
    Box::pin(async move {
      let keys = self.list_keys(prefix).await?;
      let under = if prefix.is_empty() {
        String::new()
      } else {
        format!("{prefix}/")
      };
      let mut names: Vec<String> = (keys.iter())
        .filter_map(|k| Some(k.strip_prefix(&under)?.split_once('/')?.0.to_string()))
        .collect();
      names.sort();
      names.dedup();
      Ok(names)
    })
  }
  /// A short human name for messages, e.g. `s3://bucket (endpoint http://…)`.
  fn describe(&self) -> String;
}

/// Options that do not fit in the URL.
#[derive(Debug, Clone, Default)]
pub struct BucketOptions {
  /// S3 endpoint (R2, MinIO, moto…); `http://` endpoints are allowed.
  pub endpoint: Option<String>,
  pub region: Option<String>,
  /// Extra backend settings as object_store config keys, e.g. `("aws_access_key_id", …)`.
  /// They override the environment.
  pub config: Vec<(String, String)>,
}

/// A bucket (with its optional prefix). Cheap to clone; clones share one client.
#[derive(Clone)]
pub struct Bucket {
  store: Arc<dyn Store>,
  /// Empty, or a validated key prefix ending in `/`.
  prefix: Arc<str>,
}

impl fmt::Debug for Bucket {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "Bucket({})", self.describe())
  }
}

impl Bucket {
  /// Opens `file:///abs/path`, `s3://NAME[/PREFIX]`, `gs://NAME[/PREFIX]` or
  /// `az://NAME[/PREFIX]`. Credentials come from the standard environment variables
  /// (`AWS_*`, `GOOGLE_*`, `AZURE_*`) unless `opts.config` overrides them.
  pub fn open(url: &str, opts: &BucketOptions) -> Result<Bucket> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
      Error::InvalidUrl(format!("{url}: expected file://, s3://, gs:// or az://"))
    })?;
    if scheme == "file" {
      if opts.endpoint.is_some() {
        return Err(Error::InvalidUrl(
          "--endpoint applies to s3:// buckets only".into(),
        ));
      }
      let store = local::LocalDir::open(rest)?;
      return Ok(Bucket::from_store(Arc::new(store)));
    }
    let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if name.is_empty() {
      return Err(Error::InvalidUrl(format!("{url}: no bucket name")));
    }
    let store = remote::Remote::open(scheme, name, opts)?;
    Bucket::from_store(Arc::new(store)).with_prefix(prefix)
  }

  /// A bucket over any [`Store`].
  pub fn from_store(store: Arc<dyn Store>) -> Bucket {
    Bucket {
      store,
      prefix: "".into(),
    }
  }

  /// An in-process bucket on object_store's `InMemory` (linearizable: one lock), for tests
  /// and simulations.
  pub fn memory() -> Bucket {
    Bucket::from_store(Arc::new(remote::Remote::memory()))
  }

  /// The same store with every key under `prefix` (appended to any existing prefix).
  pub fn with_prefix(mut self, prefix: &str) -> Result<Bucket> {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
      return Ok(self);
    }
    validate_key(prefix)?;
    self.prefix = format!("{}{prefix}/", self.prefix).into();
    Ok(self)
  }

  pub fn describe(&self) -> String {
    if self.prefix.is_empty() {
      self.store.describe()
    } else {
      format!("{} prefix {}", self.store.describe(), self.prefix)
    }
  }

  fn full(&self, key: &str) -> Result<String> {
    validate_key(key)?;
    Ok(format!("{}{key}", self.prefix))
  }

  /// The object and its version, or `None` when it does not exist.
  pub async fn get(&self, key: &str) -> Result<Option<(Bytes, Version)>> {
    self.store.get(&self.full(key)?).await
  }

  /// Bytes of one range; `Error::NotFound` when the object does not exist.
  pub async fn get_range(&self, key: &str, range: impl Into<ByteRange>) -> Result<Bytes> {
    self.store.get_range(&self.full(key)?, range.into()).await
  }

  /// Unconditional write (retried by the client on transient failures).
  pub async fn put(&self, key: &str, data: impl Into<Bytes>) -> Result<Version> {
    self.store.put(&self.full(key)?, data.into()).await
  }

  /// Writes only if no object exists at `key` (`If-None-Match: *`). Never retried.
  pub async fn create(&self, key: &str, data: impl Into<Bytes>) -> WriteOutcome {
    match self.full(key) {
      Ok(k) => self.store.create(&k, data.into()).await,
      Err(e) => WriteOutcome::Unsupported(e.to_string()),
    }
  }

  /// Overwrites only if the object still has version `expected` (`If-Match`; GCS
  /// generation match). A missing object is `Rejected`. Never retried.
  pub async fn cas(&self, key: &str, data: impl Into<Bytes>, expected: &Version) -> WriteOutcome {
    if expected.e_tag.is_none() && expected.version.is_none() {
      // An empty token would turn the condition off on some stores: refuse it here.
      return WriteOutcome::Unsupported("cas with an empty version".into());
    }
    match self.full(key) {
      Ok(k) => self.store.cas(&k, data.into(), expected).await,
      Err(e) => WriteOutcome::Unsupported(e.to_string()),
    }
  }

  pub async fn delete(&self, key: &str) -> Result<()> {
    self.store.delete(&self.full(key)?).await
  }

  /// Every object whose key starts with the whole segments of `prefix` ("" lists all),
  /// recursively, sorted by key. Keys come back relative to the bucket prefix.
  pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
    let mut out = self.store.list(&self.list_prefix(prefix)?).await?;
    for o in &mut out {
      o.key = self.relative(&o.key);
    }
    out.retain(|o| !o.key.is_empty());
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
  }

  /// `list`'s keys only: cheaper where versions cost a read per object
  /// (a restore lists a cell's whole history).
  pub async fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
    let keys = self.store.list_keys(&self.list_prefix(prefix)?).await?;
    Ok(self.relative_sorted(keys))
  }

  /// `list_keys`, only the keys greater than the key `after`.
  pub async fn list_keys_after(&self, prefix: &str, after: &str) -> Result<Vec<String>> {
    let keys = (self.store)
      .list_keys_after(&self.list_prefix(prefix)?, &self.full(after)?)
      .await?;
    Ok(self.relative_sorted(keys))
  }

  /// Store keys as the caller names them, sorted.
  fn relative_sorted(&self, keys: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = (keys.iter())
      .map(|k| self.relative(k))
      .filter(|k| !k.is_empty())
      .collect();
    out.sort();
    out
  }

  /// The names of the "directories" directly under `prefix` (`e7` for
  /// `<prefix>/e7/…`), sorted.
  pub async fn list_dirs(&self, prefix: &str) -> Result<Vec<String>> {
    let mut names = self.store.list_dirs(&self.list_prefix(prefix)?).await?;
    names.sort();
    Ok(names)
  }

  /// The store's prefix for listing `prefix` ("" lists the whole bucket).
  fn list_prefix(&self, prefix: &str) -> Result<String> {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
      Ok(self.prefix.trim_end_matches('/').to_string())
    } else {
      self.full(prefix)
    }
  }

  /// A store key relative to the bucket prefix.
  fn relative(&self, key: &str) -> String {
    key.strip_prefix(&*self.prefix).unwrap_or(key).to_string()
  }
}

/// Key rules, the same on every backend so a fleet can move between them: non-empty,
/// `/`-separated segments, no empty segment (so no leading, trailing or doubled `/`), no
/// `.` or `..` segment, no control characters or backslashes, at most 1024 bytes. The first
/// segment may not be `.cellhost-bucket` (the directory bucket keeps its locks there).
pub fn validate_key(key: &str) -> Result<()> {
  let bad = |why: &str| Err(Error::InvalidKey(format!("{key:?}: {why}")));
  if key.is_empty() {
    return bad("empty");
  }
  if key.len() > 1024 {
    return bad("longer than 1024 bytes");
  }
  if key.chars().any(|c| c.is_control() || c == '\\') {
    return bad("control character or backslash");
  }
  for (i, seg) in key.split('/').enumerate() {
    match seg {
      "" => return bad("empty segment (leading, trailing or doubled '/')"),
      "." | ".." => return bad("'.' or '..' segment"),
      local::META_DIR if i == 0 => return bad("reserved by the directory bucket"),
      _ => {}
    }
  }
  Ok(())
}

/// A short unique suffix for probe keys and temp files: time, process, counter and the
/// kernel's randomness, hashed.
pub(crate) fn unique_token() -> String {
  use sha2::{Digest, Sha256};
  use std::sync::atomic::{AtomicU64, Ordering};
  static COUNTER: AtomicU64 = AtomicU64::new(0);
  let mut h = Sha256::new();
  let now = std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .unwrap_or_default();
  h.update(now.as_nanos().to_le_bytes());
  h.update(std::process::id().to_le_bytes());
  h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
  let mut rnd = [0u8; 16];
  if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
    use std::io::Read;
    let _ = f.read_exact(&mut rnd);
  }
  h.update(rnd);
  h.finalize()[..12]
    .iter()
    .map(|b| format!("{b:02x}"))
    .collect()
}

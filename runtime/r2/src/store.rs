//! The operations of one R2 bucket over a cellhost bucket: what R2 answers
//! and which error it gives, decided here; the stored form in `object.rs`.
//! Writes go through the bucket's atomic, durable puts (the directory
//! bucket fsyncs before it answers), so an acknowledged put survives a
//! crash; a conditional put is a compare-and-swap on the object, so two
//! nodes sharing a bucket cannot both win it.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use cellhost_bucket::{Bucket, Bytes, Error as BucketError, Version, WriteOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::cond::{Conditional, RangeRequest};
use crate::object::{self, Meta};

const MAX_KEY_SIZE: usize = 1024;
const MAX_VALUE_SIZE: u64 = 5_363_466_240;
const MAX_METADATA_SIZE: usize = 2048;
const MAX_LIST_KEYS: f64 = 1000.0;
pub(crate) const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// Compare-and-swap attempts of a conditional put that keeps losing races.
const CAS_TRIES: usize = 16;

/// An error as R2 reports it (`<message> (<code>)`).
#[derive(Debug)]
pub struct Failure {
  pub code: u32,
  pub message: String,
}

fn fail(code: u32, message: &str) -> Failure {
  Failure {
    code,
    message: message.into(),
  }
}

pub fn internal() -> Failure {
  fail(10001, "We encountered an internal error. Please try again.")
}
fn entity_too_large() -> Failure {
  fail(
    100100,
    "Your proposed upload exceeds the maximum allowed object size.",
  )
}
pub(crate) fn entity_too_small() -> Failure {
  fail(
    10011,
    "Your proposed upload is smaller than the minimum allowed object size.",
  )
}
fn metadata_too_large() -> Failure {
  fail(
    10012,
    "Your metadata headers exceed the maximum allowed metadata size.",
  )
}
fn invalid_object_name() -> Failure {
  fail(10020, "The specified object name is not valid.")
}
fn invalid_max_keys() -> Failure {
  fail(10022, "MaxKeys params must be positive integer <= 1000.")
}
pub(crate) fn no_such_upload() -> Failure {
  fail(10024, "The specified multipart upload does not exist.")
}
pub(crate) fn invalid_part() -> Failure {
  fail(
    10025,
    "One or more of the specified parts could not be found.",
  )
}
fn invalid_range() -> Failure {
  fail(10039, "The requested range is not satisfiable")
}
pub(crate) fn bad_upload() -> Failure {
  fail(10048, "There was a problem with the multipart upload.")
}

/// A storage failure: logged with its cause, reported as R2's internal error.
pub(crate) fn store_failed(what: &str, e: impl std::fmt::Display) -> Failure {
  tracing::warn!("R2 {what}: {e}");
  internal()
}

pub(crate) fn now_ms() -> f64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as f64)
    .unwrap_or(0.0)
}

pub(crate) fn check_key(key: &str) -> Result<(), Failure> {
  if key.len() > MAX_KEY_SIZE {
    return Err(invalid_object_name());
  }
  Ok(())
}

/// What a get found.
pub enum Got {
  Missing,
  /// The condition failed: the object without its body.
  Precondition(Meta),
  Body {
    meta: Meta,
    /// Offset and length of `body` in the object.
    range: (u64, u64),
    body: Bytes,
  },
}

/// A put's options, checked by the binding's JS before they come here.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PutOptions {
  pub version: String,
  pub http_metadata: Map<String, Value>,
  pub custom_metadata: Map<String, Value>,
  pub only_if: Option<Conditional>,
  /// Hex digests to check the body against, by field name (`md5`, `sha1`…).
  pub checksums: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ListOptions {
  pub limit: Option<f64>,
  pub prefix: String,
  pub start_after: Option<String>,
  pub delimiter: Option<String>,
  pub include: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
  pub objects: Vec<Meta>,
  pub truncated: bool,
  /// The last key of this page (the JS encodes it as the cursor).
  pub cursor: Option<String>,
  pub delimited_prefixes: Vec<String>,
}

#[derive(Deserialize)]
pub struct PartRef {
  pub part: u32,
  pub etag: String,
}

/// One R2 bucket.
#[derive(Debug, Clone)]
pub struct R2Bucket {
  pub(crate) bucket: Bucket,
}

impl R2Bucket {
  pub fn new(bucket: Bucket) -> R2Bucket {
    R2Bucket { bucket }
  }

  pub fn describe(&self) -> String {
    self.bucket.describe()
  }

  /// The metadata of the object at `path`, reading only its first bytes.
  pub(crate) async fn read_meta(&self, path: &str) -> Result<Option<Meta>, Failure> {
    Ok(self.read_meta_at(path).await?.map(|(m, _)| m))
  }

  /// The metadata and where the body starts in the stored object.
  async fn read_meta_at(&self, path: &str) -> Result<Option<(Meta, u64)>, Failure> {
    let head = match self.bucket.get_range(path, 0..object::HEAD_PROBE).await {
      Ok(b) => b,
      Err(BucketError::NotFound(_)) => return Ok(None),
      Err(e) => return Err(store_failed("head", e)),
    };
    let n = object::header_len(&head).map_err(|e| store_failed(path, e))? as u64;
    if let Some(m) = object::decode_head(&head).map_err(|e| store_failed(path, e))? {
      return Ok(Some((m, 8 + n)));
    }
    match self.bucket.get_range(path, 0..8 + n).await {
      Ok(b) => Ok(
        object::decode_head(&b)
          .map_err(|e| store_failed(path, e))?
          .map(|m| (m, 8 + n)),
      ),
      Err(BucketError::NotFound(_)) => Ok(None),
      Err(e) => Err(store_failed("head", e)),
    }
  }

  /// The whole stored object at `path` with the bucket's version of it.
  pub(crate) async fn read(&self, path: &str) -> Result<Option<(Meta, Bytes, Version)>, Failure> {
    match self.bucket.get(path).await {
      Ok(Some((stored, version))) => {
        let (meta, body) = object::decode(&stored).map_err(|e| store_failed(path, e))?;
        let at = stored.len() - body.len();
        Ok(Some((meta, stored.slice(at..), version)))
      }
      Ok(None) => Ok(None),
      Err(e) => Err(store_failed("get", e)),
    }
  }

  pub async fn head(&self, key: &str) -> Result<Option<Meta>, Failure> {
    check_key(key)?;
    self.read_meta(&object::path_of(key)).await
  }

  pub async fn get(
    &self,
    key: &str,
    only_if: Option<&Conditional>,
    range: &RangeRequest,
  ) -> Result<Got, Failure> {
    check_key(key)?;
    let path = object::path_of(key);
    if !range.is_whole() {
      // Only the bytes asked for (a range of a large object must not read
      // it all), from the version the metadata describes.
      for _ in 0..CAS_TRIES {
        let Some((meta, at)) = self.read_meta_at(&path).await? else {
          return Ok(Got::Missing);
        };
        if only_if.is_some_and(|c| !c.holds(Some(&meta))) {
          return Ok(Got::Precondition(meta));
        }
        let Some((start, end)) = range.resolve(meta.size).map_err(|_| invalid_range())? else {
          break;
        };
        let body = match self.bucket.get_range(&path, at + start..at + end + 1).await {
          Ok(b) => b,
          Err(BucketError::NotFound(_)) => continue,
          Err(e) => return Err(store_failed("get", e)),
        };
        // Replaced meanwhile: these bytes may be another version's.
        match self.read_meta(&path).await? {
          Some(now) if now.version == meta.version => {}
          _ => continue,
        }
        return Ok(Got::Body {
          meta,
          range: (start, end - start + 1),
          body,
        });
      }
    }
    let Some((meta, body, _)) = self.read(&path).await? else {
      return Ok(Got::Missing);
    };
    if only_if.is_some_and(|c| !c.holds(Some(&meta))) {
      return Ok(Got::Precondition(meta));
    }
    let size = meta.size;
    let (start, end) = match range.resolve(size).map_err(|_| invalid_range())? {
      Some(r) => r,
      None if size == 0 => {
        return Ok(Got::Body {
          meta,
          range: (0, 0),
          body: Bytes::new(),
        });
      }
      None => (0, size - 1),
    };
    let body = body.slice(start as usize..end as usize + 1);
    Ok(Got::Body {
      meta,
      range: (start, end - start + 1),
      body,
    })
  }

  /// Stores `body` under `key`; `None` when `onlyIf` did not hold.
  pub async fn put(
    &self,
    key: &str,
    body: Vec<u8>,
    opts: PutOptions,
  ) -> Result<Option<Meta>, Failure> {
    check_key(key)?;
    if body.len() as u64 > MAX_VALUE_SIZE {
      return Err(entity_too_large());
    }
    check_metadata_size(&opts.custom_metadata)?;
    let md5 = digest("md5", &body);
    let mut checksums = Map::new();
    for (field, given) in &opts.checksums {
      let actual = if field == "md5" {
        md5.clone()
      } else {
        digest(field, &body)
      };
      if !given.eq_ignore_ascii_case(&actual) {
        return Err(bad_digest(field, given, &actual));
      }
      checksums.insert(field.clone(), Value::String(actual));
    }
    let meta = Meta {
      key: key.to_string(),
      version: opts.version,
      size: body.len() as u64,
      etag: md5,
      uploaded: now_ms(),
      checksums,
      http_metadata: opts.http_metadata,
      custom_metadata: opts.custom_metadata,
      storage_class: String::new(),
    };
    let stored = Bytes::from(object::encode(&meta, &body));
    let path = object::path_of(key);
    match &opts.only_if {
      None => {
        self
          .bucket
          .put(&path, stored)
          .await
          .map_err(|e| store_failed("put", e))?;
        Ok(Some(meta))
      }
      Some(cond) => self.put_if(&path, stored, meta, cond).await,
    }
  }

  /// A put that happens only while `cond` holds for the object it replaces:
  /// read it (whole: only a full read gives the store's version), decide,
  /// then create or compare-and-swap; a lost race decides again.
  async fn put_if(
    &self,
    path: &str,
    stored: Bytes,
    meta: Meta,
    cond: &Conditional,
  ) -> Result<Option<Meta>, Failure> {
    for _ in 0..CAS_TRIES {
      let current = self.read(path).await?;
      if !cond.holds(current.as_ref().map(|(m, _, _)| m)) {
        return Ok(None);
      }
      let outcome = match &current {
        None => self.bucket.create(path, stored.clone()).await,
        Some((_, _, version)) => self.bucket.cas(path, stored.clone(), version).await,
      };
      match outcome {
        WriteOutcome::Applied(_) => return Ok(Some(meta)),
        WriteOutcome::Rejected => continue,
        WriteOutcome::Ambiguous(e) => {
          // Ours if the object now carries our version.
          return match self.read_meta(path).await? {
            Some(m) if m.version == meta.version => Ok(Some(meta)),
            _ => Err(store_failed("conditional put", e)),
          };
        }
        WriteOutcome::Failed(e) | WriteOutcome::Unsupported(e) => {
          return Err(store_failed("conditional put", e));
        }
      }
    }
    Err(store_failed(
      "conditional put",
      "lost the race too many times",
    ))
  }

  pub async fn delete(&self, keys: &[String]) -> Result<(), Failure> {
    for k in keys {
      check_key(k)?;
    }
    for k in keys {
      self
        .bucket
        .delete(&object::path_of(k))
        .await
        .map_err(|e| store_failed("delete", e))?;
    }
    Ok(())
  }

  /// Every key in the bucket, sorted by its bytes. A listing reads the
  /// store's whole listing (R2's order and delimiters are on the decoded
  /// keys), then the metadata of the page's objects only.
  async fn keys(&self) -> Result<Vec<(String, String)>, Failure> {
    let mut out = Vec::new();
    for info in self
      .bucket
      .list("o")
      .await
      .map_err(|e| store_failed("list", e))?
    {
      if let Some(k) = object::key_of(&info.key) {
        out.push((k, info.key));
      }
    }
    for info in self
      .bucket
      .list("h")
      .await
      .map_err(|e| store_failed("list", e))?
    {
      if let Some(m) = self.read_meta(&info.key).await? {
        out.push((m.key, info.key));
      }
    }
    out.sort();
    Ok(out)
  }

  pub async fn list(&self, opts: &ListOptions) -> Result<Listing, Failure> {
    let mut limit = opts.limit.unwrap_or(MAX_LIST_KEYS);
    if !(1.0..=MAX_LIST_KEYS).contains(&limit) {
      return Err(invalid_max_keys());
    }
    if !opts.include.is_empty() {
      limit = limit.min(100.0);
    }
    let limit = limit as usize;
    let prefix = opts.prefix.as_str();
    let delimiter = opts.delimiter.as_deref().filter(|d| !d.is_empty());
    // Rows: an object, or a delimited prefix standing for all its keys
    // (the last of them is where the next page starts).
    enum Row {
      Object(String, String),
      Prefix(String, String),
    }
    let mut rows: Vec<Row> = Vec::new();
    for (key, path) in self.keys().await? {
      if !key.starts_with(prefix) || opts.start_after.as_ref().is_some_and(|a| key <= *a) {
        continue;
      }
      let group = delimiter.and_then(|d| {
        key[prefix.len()..]
          .find(d)
          .map(|i| key[..prefix.len() + i + d.len()].to_string())
      });
      match (group, rows.last_mut()) {
        (Some(g), Some(Row::Prefix(p, last))) if *p == g => *last = key,
        (Some(g), _) => {
          if rows.len() > limit {
            break;
          }
          rows.push(Row::Prefix(g, key));
        }
        (None, _) => {
          if rows.len() > limit {
            break;
          }
          rows.push(Row::Object(key, path));
        }
      }
    }
    let truncated = rows.len() > limit;
    rows.truncate(limit);
    let cursor = truncated.then(|| match rows.last() {
      Some(Row::Object(k, _)) | Some(Row::Prefix(_, k)) => k.clone(),
      None => String::new(),
    });
    let mut listing = Listing {
      objects: Vec::new(),
      truncated,
      cursor,
      delimited_prefixes: Vec::new(),
    };
    for row in rows {
      match row {
        Row::Prefix(p, _) => listing.delimited_prefixes.push(p),
        Row::Object(_, path) => {
          // Deleted since the listing: left out.
          if let Some(m) = self.read_meta(&path).await? {
            listing.objects.push(m);
          }
        }
      }
    }
    Ok(listing)
  }
}

fn check_metadata_size(custom: &Map<String, Value>) -> Result<(), Failure> {
  // miniflare counts UTF-16 code units, twice for a string with any
  // character past Latin-1.
  let len = |s: &str| {
    let n = s.encode_utf16().count();
    if s.chars().any(|c| c as u32 >= 256) {
      n * 2
    } else {
      n
    }
  };
  let total: usize = custom
    .iter()
    .map(|(k, v)| len(k) + len(v.as_str().unwrap_or("")))
    .sum();
  if total > MAX_METADATA_SIZE {
    return Err(metadata_too_large());
  }
  Ok(())
}

fn algorithm_name(field: &str) -> &'static str {
  match field {
    "md5" => "MD5",
    "sha1" => "SHA-1",
    "sha256" => "SHA-256",
    "sha384" => "SHA-384",
    _ => "SHA-512",
  }
}

fn bad_digest(field: &str, given: &str, actual: &str) -> Failure {
  let alg = algorithm_name(field);
  Failure {
    code: 10037,
    message: format!(
      "The {alg} checksum you specified did not match what we received.\nYou provided a {alg} checksum with value: {}\nActual {alg} was: {actual}",
      given.to_ascii_lowercase()
    ),
  }
}

pub(crate) fn digest_bytes_md5(data: &[u8]) -> String {
  use md5::Digest;
  object::hex(&md5::Md5::digest(data))
}

/// The hex digest of `data` by R2's field name for the algorithm.
pub(crate) fn digest(field: &str, data: &[u8]) -> String {
  match field {
    "md5" => digest_bytes_md5(data),
    "sha1" => {
      use sha1::Digest;
      object::hex(&sha1::Sha1::digest(data))
    }
    "sha256" => {
      use sha2::Digest;
      object::hex(&sha2::Sha256::digest(data))
    }
    "sha384" => {
      use sha2::Digest;
      object::hex(&sha2::Sha384::digest(data))
    }
    _ => {
      use sha2::Digest;
      object::hex(&sha2::Sha512::digest(data))
    }
  }
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
  if !s.len().is_multiple_of(2) {
    return None;
  }
  (0..s.len())
    .step_by(2)
    .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
    .collect()
}

#[cfg(test)]
pub(crate) mod tests {
  use super::*;

  pub(crate) fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
      .enable_all()
      .build()
      .unwrap()
      .block_on(f)
  }

  fn opts(version: &str) -> PutOptions {
    PutOptions {
      version: version.into(),
      ..Default::default()
    }
  }

  #[test]
  fn put_get_list_delete() {
    block(async {
      let r2 = R2Bucket::new(Bucket::memory());
      for k in ["b", "a/1", "a/2", "a/b/3", "c"] {
        r2.put(k, k.as_bytes().to_vec(), opts("v"))
          .await
          .unwrap()
          .unwrap();
      }
      let m = r2.head("a/1").await.unwrap().unwrap();
      assert_eq!((m.size, m.etag.len()), (3, 32));
      let Got::Body { body, range, .. } = r2
        .get(
          "a/b/3",
          None,
          &RangeRequest {
            offset: Some(2.0),
            ..Default::default()
          },
        )
        .await
        .unwrap()
      else {
        panic!("no body")
      };
      assert_eq!((&body[..], range), (&b"b/3"[..], (2, 3)));
      let l = r2
        .list(&ListOptions {
          delimiter: Some("/".into()),
          limit: Some(2.0),
          ..Default::default()
        })
        .await
        .unwrap();
      assert_eq!(l.delimited_prefixes, ["a/"]);
      assert_eq!(
        l.objects.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(),
        ["b"]
      );
      assert_eq!(l.cursor.as_deref(), Some("b"));
      let next = r2
        .list(&ListOptions {
          start_after: l.cursor,
          ..Default::default()
        })
        .await
        .unwrap();
      assert_eq!(
        next
          .objects
          .iter()
          .map(|m| m.key.as_str())
          .collect::<Vec<_>>(),
        ["c"]
      );
      assert!(!next.truncated);
      r2.delete(&["a/1".into(), "zzz".into()]).await.unwrap();
      assert!(r2.head("a/1").await.unwrap().is_none());
    });
  }

  #[test]
  fn conditional_put_is_compare_and_swap() {
    block(async {
      let r2 = R2Bucket::new(Bucket::memory());
      let absent = Conditional {
        etag_does_not_match: Some(vec![crate::cond::Etag::Wildcard]),
        ..Default::default()
      };
      let mut o = opts("1");
      o.only_if = Some(absent.clone());
      assert!(r2.put("k", b"one".to_vec(), o).await.unwrap().is_some());
      let mut o = opts("2");
      o.only_if = Some(absent);
      assert!(r2.put("k", b"two".to_vec(), o).await.unwrap().is_none());
      assert_eq!(r2.head("k").await.unwrap().unwrap().version, "1");
    });
  }

  #[test]
  fn checksums_are_checked() {
    block(async {
      let r2 = R2Bucket::new(Bucket::memory());
      let mut o = opts("v");
      o.checksums.insert("sha256".into(), "00".repeat(32));
      let e = r2.put("k", b"x".to_vec(), o).await.unwrap_err();
      assert_eq!(e.code, 10037);
      assert!(e.message.contains("SHA-256"), "{}", e.message);
      assert!(r2.head("k").await.unwrap().is_none());
    });
  }
}

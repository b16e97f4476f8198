//! How an R2 object lies in the bucket: one bucket object per R2 object,
//! its metadata and its bytes together, so a put is one atomic write (on
//! every backend) and a reader never sees the metadata of one version with
//! the bytes of another.
//!
//! Layout: `R2O1`, the metadata's length (u32, little-endian), the metadata
//! as JSON, then the body. Keys become bucket keys under `o/`, each byte
//! outside `[A-Za-z0-9_-]` percent-encoded and the result cut into
//! 200-character segments (file-name limits of the directory bucket); a key
//! whose encoding would pass the bucket's key limit lives under `h/` by its
//! SHA-256, and its name is read back from its metadata.

use std::fmt::Write;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

const MAGIC: &[u8; 4] = b"R2O1";
/// How much of an object a metadata read fetches first.
pub const HEAD_PROBE: u64 = 4096;
const SEGMENT: usize = 200;
const MAX_ENCODED: usize = 900;

/// What R2 keeps about an object besides its bytes.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
  pub key: String,
  pub version: String,
  pub size: u64,
  pub etag: String,
  /// Milliseconds since the epoch.
  pub uploaded: f64,
  /// Hex digests given (and checked) at upload, by algorithm name.
  #[serde(default)]
  pub checksums: Map<String, Value>,
  #[serde(default)]
  pub http_metadata: Map<String, Value>,
  #[serde(default)]
  pub custom_metadata: Map<String, Value>,
  /// Always empty, as wrangler dev answers: there are no storage classes here.
  #[serde(default)]
  pub storage_class: String,
}

/// The stored form of `meta` and `body`.
pub fn encode(meta: &Meta, body: &[u8]) -> Vec<u8> {
  let json = serde_json::to_vec(meta).expect("metadata serializes");
  let mut out = Vec::with_capacity(8 + json.len() + body.len());
  out.extend_from_slice(MAGIC);
  out.extend_from_slice(&(json.len() as u32).to_le_bytes());
  out.extend_from_slice(&json);
  out.extend_from_slice(body);
  out
}

/// The metadata's length, if `head` starts like an object.
pub fn header_len(head: &[u8]) -> Result<usize, String> {
  if head.len() < 8 || &head[..4] != MAGIC {
    return Err("not an R2 object (bad header)".into());
  }
  Ok(u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize)
}

/// Metadata and body of a stored object.
pub fn decode(stored: &[u8]) -> Result<(Meta, &[u8]), String> {
  let n = header_len(stored)?;
  if stored.len() < 8 + n {
    return Err("truncated R2 object".into());
  }
  let meta = serde_json::from_slice(&stored[8..8 + n]).map_err(|e| format!("R2 metadata: {e}"))?;
  Ok((meta, &stored[8 + n..]))
}

/// Metadata from the first bytes of a stored object (`None`: more needed).
pub fn decode_head(head: &[u8]) -> Result<Option<Meta>, String> {
  let n = header_len(head)?;
  if head.len() < 8 + n {
    return Ok(None);
  }
  decode(&head[..8 + n]).map(|(m, _)| Some(m))
}

/// Where the object named `key` lives in the bucket.
pub fn path_of(key: &str) -> String {
  let mut enc = String::with_capacity(key.len());
  for b in key.bytes() {
    if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
      enc.push(b as char);
    } else {
      let _ = write!(enc, "%{b:02X}");
    }
  }
  if enc.is_empty() || enc.len() > MAX_ENCODED {
    return format!("h/{}", sha256_hex(key.as_bytes()));
  }
  let segments: Vec<&str> = enc
    .as_bytes()
    .chunks(SEGMENT)
    .map(|c| std::str::from_utf8(c).expect("ASCII"))
    .collect();
  format!("o/{}", segments.join("/"))
}

/// The key stored at an `o/` path (`None` for `h/` paths and anything else).
pub fn key_of(path: &str) -> Option<String> {
  let enc: Vec<u8> = path
    .strip_prefix("o/")?
    .bytes()
    .filter(|&b| b != b'/')
    .collect();
  let mut out = Vec::with_capacity(enc.len());
  let mut i = 0;
  while i < enc.len() {
    if enc[i] == b'%' {
      let hex = std::str::from_utf8(enc.get(i + 1..i + 3)?).ok()?;
      out.push(u8::from_str_radix(hex, 16).ok()?);
      i += 3;
    } else {
      out.push(enc[i]);
      i += 1;
    }
  }
  String::from_utf8(out).ok()
}

pub fn sha256_hex(data: &[u8]) -> String {
  use sha2::{Digest, Sha256};
  hex(&Sha256::digest(data))
}

pub fn hex(bytes: &[u8]) -> String {
  let mut s = String::with_capacity(bytes.len() * 2);
  for b in bytes {
    let _ = write!(s, "{b:02x}");
  }
  s
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn keys_round_trip_through_paths() {
    for key in [
      "a",
      "dir/file.txt",
      "dir/",
      "..",
      "a b%c",
      "ключ/ü",
      "x".repeat(500).as_str(),
    ] {
      let p = path_of(key);
      assert!(cellhost_bucket::validate_key(&p).is_ok(), "{p}");
      assert_eq!(key_of(&p).as_deref(), Some(key), "{p}");
    }
    // Too long to encode, or empty: by hash, read back from the metadata.
    for key in ["", &"ü".repeat(400)] {
      let p = path_of(key);
      assert!(p.starts_with("h/"), "{p}");
      assert_eq!(key_of(&p), None);
    }
  }

  #[test]
  fn objects_round_trip() {
    let meta = Meta {
      key: "k".into(),
      size: 3,
      ..Default::default()
    };
    let stored = encode(&meta, b"abc");
    let (m, body) = decode(&stored).unwrap();
    assert_eq!((m.key.as_str(), body), ("k", &b"abc"[..]));
    assert!(decode_head(&stored[..5]).is_err());
    assert!(decode_head(&stored[..10]).unwrap().is_none());
    assert!(decode(b"junkjunkjunk").is_err());
  }
}

//! Multipart uploads of an R2 bucket: each upload a record (`u/<id>/info`)
//! and its parts (`u/<id>/<n>`, stored as objects are), joined into one
//! object on completion, as R2 (and miniflare) check them.

use std::collections::HashSet;

use cellhost_bucket::Version;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::object::{self, Meta};
use crate::store::{
  Failure, MIN_PART_SIZE, PartRef, R2Bucket, bad_upload, check_key, digest, digest_bytes_md5,
  entity_too_small, internal, invalid_part, no_such_upload, now_ms, store_failed, unhex,
};

/// A multipart upload's record.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Upload {
  key: String,
  http_metadata: Map<String, Value>,
  custom_metadata: Map<String, Value>,
  /// 0 in progress, 1 completed, 2 aborted.
  state: u8,
}

impl R2Bucket {
  fn upload_path(id: &str) -> Option<String> {
    let ok = !id.is_empty()
      && id.len() <= 200
      && id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| format!("u/{id}"))
  }

  async fn upload(&self, key: &str, id: &str) -> Result<Option<(Upload, Version)>, Failure> {
    let Some(dir) = Self::upload_path(id) else {
      return Ok(None);
    };
    match self.bucket.get(&format!("{dir}/info")).await {
      Ok(Some((b, v))) => {
        let u: Upload = serde_json::from_slice(&b).map_err(|e| store_failed("upload", e))?;
        Ok((u.key == key).then_some((u, v)))
      }
      Ok(None) => Ok(None),
      Err(e) => Err(store_failed("upload", e)),
    }
  }

  async fn set_upload(&self, id: &str, u: &Upload) -> Result<(), Failure> {
    let dir = Self::upload_path(id).ok_or_else(internal)?;
    let data = serde_json::to_vec(u).expect("serializes");
    self
      .bucket
      .put(&format!("{dir}/info"), data)
      .await
      .map_err(|e| store_failed("upload", e))?;
    Ok(())
  }

  pub async fn create_upload(
    &self,
    key: &str,
    id: &str,
    http_metadata: Map<String, Value>,
    custom_metadata: Map<String, Value>,
  ) -> Result<(), Failure> {
    check_key(key)?;
    let upload = Upload {
      key: key.to_string(),
      http_metadata,
      custom_metadata,
      state: 0,
    };
    self.set_upload(id, &upload).await
  }

  pub async fn upload_part(
    &self,
    key: &str,
    id: &str,
    part: u32,
    etag: &str,
    body: Vec<u8>,
  ) -> Result<(), Failure> {
    check_key(key)?;
    match self.upload(key, id).await? {
      Some((u, _)) if u.state == 0 => {}
      _ => return Err(no_such_upload()),
    }
    let mut checksums = Map::new();
    checksums.insert("md5".into(), Value::String(digest("md5", &body)));
    let meta = Meta {
      key: key.to_string(),
      size: body.len() as u64,
      etag: etag.to_string(),
      checksums,
      ..Default::default()
    };
    let dir = Self::upload_path(id).ok_or_else(internal)?;
    self
      .bucket
      .put(&format!("{dir}/{part}"), object::encode(&meta, &body))
      .await
      .map_err(|e| store_failed("uploadPart", e))?;
    Ok(())
  }

  pub async fn complete_upload(
    &self,
    key: &str,
    id: &str,
    version: String,
    parts: &[PartRef],
  ) -> Result<Meta, Failure> {
    check_key(key)?;
    let Some((mut upload, _)) = self.upload(key, id).await? else {
      return Err(internal());
    };
    if upload.state > 0 {
      return Err(no_such_upload());
    }
    let mut seen = HashSet::new();
    if !parts.iter().all(|p| seen.insert(p.part)) {
      return Err(internal());
    }
    let dir = Self::upload_path(id).ok_or_else(internal)?;
    let mut found = Vec::new();
    for p in parts {
      let path = format!("{dir}/{}", p.part);
      match self.read_meta(&path).await? {
        Some(m) if m.etag == p.etag => found.push((p.part, m, path)),
        _ => return Err(invalid_part()),
      }
    }
    if let Some((_, rest)) = found.split_last()
      && rest.iter().any(|(_, m, _)| m.size < MIN_PART_SIZE)
    {
      return Err(entity_too_small());
    }
    found.sort_by_key(|(n, _, _)| *n);
    if let Some(((_, last, _), rest)) = found.split_last() {
      let size = rest.first().map(|(_, m, _)| m.size);
      if rest.iter().any(|(_, m, _)| Some(m.size) != size) {
        return Err(bad_upload());
      }
      if size.is_some_and(|s| last.size > s) {
        return Err(bad_upload());
      }
    }
    let mut body = Vec::new();
    let mut md5s = Vec::new();
    for (_, m, path) in &found {
      let Some((_, bytes, _)) = self.read(path).await? else {
        return Err(invalid_part());
      };
      body.extend_from_slice(&bytes);
      let hex = m
        .checksums
        .get("md5")
        .and_then(|v| v.as_str())
        .unwrap_or("");
      md5s.extend(unhex(hex).ok_or_else(internal)?);
    }
    let etag = format!("{}-{}", digest_bytes_md5(&md5s), found.len());
    let meta = Meta {
      key: key.to_string(),
      version,
      size: body.len() as u64,
      etag,
      uploaded: now_ms(),
      checksums: Map::new(),
      http_metadata: std::mem::take(&mut upload.http_metadata),
      custom_metadata: std::mem::take(&mut upload.custom_metadata),
      storage_class: String::new(),
    };
    self
      .bucket
      .put(&object::path_of(key), object::encode(&meta, &body))
      .await
      .map_err(|e| store_failed("completeMultipartUpload", e))?;
    upload.state = 1;
    self.set_upload(id, &upload).await?;
    self.drop_parts(&dir).await;
    Ok(meta)
  }

  pub async fn abort_upload(&self, key: &str, id: &str) -> Result<(), Failure> {
    check_key(key)?;
    let Some((mut upload, _)) = self.upload(key, id).await? else {
      return Err(internal());
    };
    if upload.state > 0 {
      return Ok(());
    }
    upload.state = 2;
    self.set_upload(id, &upload).await?;
    let dir = Self::upload_path(id).ok_or_else(internal)?;
    self.drop_parts(&dir).await;
    Ok(())
  }

  /// Deletes the parts of a finished upload; one left behind is only space.
  async fn drop_parts(&self, dir: &str) {
    if let Ok(list) = self.bucket.list(dir).await {
      for o in list.iter().filter(|o| !o.key.ends_with("/info")) {
        let _ = self.bucket.delete(&o.key).await;
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::cond::RangeRequest;
  use crate::store::Got;
  use crate::store::tests::block;
  use cellhost_bucket::Bucket;

  #[test]
  fn multipart_joins_parts_in_order() {
    block(async {
      let r2 = R2Bucket::new(Bucket::memory());
      r2.create_upload("big", "u1", Map::new(), Map::new())
        .await
        .unwrap();
      // A part under 5 MiB before the last one is refused.
      r2.create_upload("big", "u0", Map::new(), Map::new())
        .await
        .unwrap();
      r2.upload_part("big", "u0", 1, "a", vec![1; 10])
        .await
        .unwrap();
      r2.upload_part("big", "u0", 2, "b", vec![1; 10])
        .await
        .unwrap();
      let small = [
        PartRef {
          part: 1,
          etag: "a".into(),
        },
        PartRef {
          part: 2,
          etag: "b".into(),
        },
      ];
      let e = r2
        .complete_upload("big", "u0", "v".into(), &small)
        .await
        .unwrap_err();
      assert_eq!(e.code, 10011);
      let part = vec![7u8; MIN_PART_SIZE as usize];
      r2.upload_part("big", "u1", 2, "e2", b"tail".to_vec())
        .await
        .unwrap();
      r2.upload_part("big", "u1", 1, "e1", part.clone())
        .await
        .unwrap();
      let refs = [
        PartRef {
          part: 1,
          etag: "e1".into(),
        },
        PartRef {
          part: 2,
          etag: "e2".into(),
        },
      ];
      let m = r2
        .complete_upload("big", "u1", "v".into(), &refs)
        .await
        .unwrap();
      assert_eq!(m.size, MIN_PART_SIZE + 4);
      assert!(m.etag.ends_with("-2"));
      let Got::Body { body, .. } = r2.get("big", None, &RangeRequest::default()).await.unwrap()
      else {
        panic!()
      };
      assert_eq!(&body[body.len() - 4..], b"tail");
      // A finished upload takes no more parts.
      let e = r2
        .upload_part("big", "u1", 3, "e3", vec![1])
        .await
        .unwrap_err();
      assert_eq!(e.code, 10024);
    });
  }
}

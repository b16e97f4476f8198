//! Versions in the bucket: upload (blobs, then the manifest, then the
//! switch), listing, reading, and the download a node runs from.

use std::path::Path;

use cellhost_bucket::{Bucket, Version, WriteOutcome};
use sha2::Digest;

use crate::{CURRENT_KEY, Current, LocalFile, Manifest, blob_key, hash_hex, manifest_key};

/// Uploads the blobs `files` of `manifest` not yet stored (by content),
/// calling `progress(bytes)` after each, then the manifest. Nothing is
/// switched: see [`switch`].
pub async fn upload(
  bucket: &Bucket,
  manifest: &Manifest,
  files: &[LocalFile],
  progress: &(dyn Fn(u64) + Sync),
) -> Result<(), String> {
  let have: std::collections::HashSet<String> = bucket
    .list("deploy-blobs")
    .await
    .map_err(|e| format!("listing deploy-blobs/: {e}"))?
    .into_iter()
    .filter_map(|o| o.key.strip_prefix("deploy-blobs/").map(str::to_string))
    .collect();
  let have = &have;
  let jobs = files.iter().map(|f| async move {
    if !have.contains(&f.sha256) {
      match bucket.create(&blob_key(&f.sha256), f.bytes.clone()).await {
        // Rejected: the same content is stored already.
        WriteOutcome::Applied(_) | WriteOutcome::Rejected => {}
        WriteOutcome::Ambiguous(e) | WriteOutcome::Failed(e) | WriteOutcome::Unsupported(e) => {
          return Err(format!("uploading {}: {e}", f.path));
        }
      }
    }
    progress(f.bytes.len() as u64);
    Ok(())
  });
  use futures::StreamExt;
  let results: Vec<Result<(), String>> = futures::stream::iter(jobs)
    .buffer_unordered(8)
    .collect()
    .await;
  results.into_iter().collect::<Result<Vec<()>, String>>()?;
  let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
  match bucket.create(&manifest_key(&manifest.id), json).await {
    WriteOutcome::Applied(_) => Ok(()),
    WriteOutcome::Rejected => Err(format!("version {} exists already", manifest.id)),
    WriteOutcome::Ambiguous(e) | WriteOutcome::Failed(e) | WriteOutcome::Unsupported(e) => {
      Err(format!("uploading the manifest of {}: {e}", manifest.id))
    }
  }
}

/// `deploy/current.json` and its version token.
pub async fn read_current(bucket: &Bucket) -> Result<Option<(Current, Version)>, String> {
  match bucket.get(CURRENT_KEY).await {
    Ok(None) => Ok(None),
    Ok(Some((b, v))) => serde_json::from_slice(&b)
      .map(|c| Some((c, v)))
      .map_err(|e| format!("{CURRENT_KEY} is malformed: {e}")),
    Err(e) => Err(format!("reading {CURRENT_KEY}: {e}")),
  }
}

pub async fn read_manifest(bucket: &Bucket, id: &str) -> Result<Manifest, String> {
  if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
    return Err(format!("{id:?} is not a version id"));
  }
  match bucket.get(&manifest_key(id)).await {
    Ok(Some((b, _))) => serde_json::from_slice(&b)
      .map_err(|e| format!("the manifest of version {id} is malformed: {e}")),
    Ok(None) => Err(format!(
      "there is no version {id} in this bucket (cellhost deployments lists them)"
    )),
    Err(e) => Err(format!("reading version {id}: {e}")),
  }
}

/// Every version's manifest, oldest first.
pub async fn list_versions(bucket: &Bucket) -> Result<Vec<Manifest>, String> {
  let keys = bucket
    .list("deploy/versions")
    .await
    .map_err(|e| format!("listing deploy/versions/: {e}"))?;
  let mut out = Vec::new();
  for o in keys {
    if let Some(id) = o
      .key
      .strip_prefix("deploy/versions/")
      .and_then(|r| r.strip_suffix("/manifest.json"))
    {
      out.push(read_manifest(bucket, id).await?);
    }
  }
  out.sort_by(|a, b| a.id.cmp(&b.id));
  Ok(out)
}

/// Points `current.json` at `id`, if it is still what `expected` read (a
/// concurrent deploy or rollback makes this fail, naming it).
pub async fn switch(
  bucket: &Bucket,
  id: &str,
  expected: Option<(&Current, &Version)>,
  now_ms: u64,
) -> Result<Current, String> {
  let next = Current {
    version: id.to_string(),
    switched_ms: now_ms,
    previous: expected.map(|(c, _)| c.version.clone()),
  };
  let body = serde_json::to_vec(&next).expect("current serializes");
  let w = match expected {
    None => bucket.create(CURRENT_KEY, body).await,
    Some((_, v)) => bucket.cas(CURRENT_KEY, body, v).await,
  };
  match w {
    WriteOutcome::Applied(_) => Ok(next),
    WriteOutcome::Rejected => Err(format!(
      "{CURRENT_KEY} changed while this ran (another deploy or rollback): nothing was switched; run it again"
    )),
    WriteOutcome::Ambiguous(e) => Err(format!(
      "switching {CURRENT_KEY} may or may not have happened ({e}): check with `cellhost deployments`"
    )),
    WriteOutcome::Failed(e) | WriteOutcome::Unsupported(e) => {
      Err(format!("switching {CURRENT_KEY}: {e}"))
    }
  }
}

/// Writes the files of `manifest` under `dir` (checking each one's hash);
/// a `.complete` marker makes a second call free.
pub async fn download(bucket: &Bucket, manifest: &Manifest, dir: &Path) -> Result<(), String> {
  let marker = dir.join(".cellhost-version-complete");
  if marker.exists() {
    return Ok(());
  }
  let _ = std::fs::remove_dir_all(dir);
  for f in &manifest.files {
    if f
      .path
      .split('/')
      .any(|s| s.is_empty() || s == "." || s == "..")
    {
      return Err(format!(
        "version {}: a file path {:?} leaves its folder",
        manifest.id, f.path
      ));
    }
    let bytes = match bucket.get(&blob_key(&f.sha256)).await {
      Ok(Some((b, _))) => b,
      Ok(None) => {
        return Err(format!(
          "version {}: {} ({}) is missing from deploy-blobs/",
          manifest.id, f.path, f.sha256
        ));
      }
      Err(e) => return Err(format!("version {}: reading {}: {e}", manifest.id, f.path)),
    };
    if hash_hex(&sha2::Sha256::digest(&bytes)) != f.sha256 {
      return Err(format!(
        "version {}: {} does not match its hash",
        manifest.id, f.path
      ));
    }
    let to = dir.join(&f.path);
    if let Some(p) = to.parent() {
      std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    std::fs::write(&to, &bytes).map_err(|e| format!("{}: {e}", to.display()))?;
  }
  std::fs::write(&marker, manifest.id.as_bytes()).map_err(|e| format!("{}: {e}", marker.display()))
}

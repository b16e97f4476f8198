//! The files of a version: everything under the Worker's directory that
//! `cellhost run` may read (config, modules, data files), minus local
//! state, version control, dependencies and local secrets.

use std::path::Path;

use sha2::Digest;

/// Names never deployed, with why (printed by `cellhost deploy`).
pub const SKIPPED: &[(&str, &str)] = &[
  (".cellhost", "local state"),
  (".wrangler", "wrangler's local state"),
  (".git", "version control"),
  (
    "node_modules",
    "dependencies: bundle with `wrangler deploy --dry-run --outdir dist` and deploy that",
  ),
  (".dev.vars", "local secrets are not deployed"),
  (".env", "local secrets are not deployed"),
];

/// The largest version accepted.
const MAX_TOTAL: u64 = 512 << 20;

pub struct LocalFile {
  pub path: String,
  pub bytes: Vec<u8>,
  pub sha256: String,
}

impl LocalFile {
  pub fn new(path: String, bytes: Vec<u8>) -> Self {
    let sha256 = hash_hex(&sha2::Sha256::digest(&bytes));
    LocalFile {
      path,
      bytes,
      sha256,
    }
  }

  /// Its manifest entry, with the module type the rules give it.
  pub fn entry(&self, module_type: Option<String>) -> crate::FileEntry {
    crate::FileEntry {
      path: self.path.clone(),
      size: self.bytes.len() as u64,
      sha256: self.sha256.clone(),
      module_type,
    }
  }
}

pub fn hash_hex(b: &[u8]) -> String {
  b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every file under `dir` (sorted by path), and the skipped names found.
pub fn collect(dir: &Path) -> Result<(Vec<LocalFile>, Vec<String>), String> {
  let mut out = Vec::new();
  let mut skipped = Vec::new();
  let mut total = 0u64;
  walk(dir, dir, &mut out, &mut skipped, &mut total)?;
  out.sort_by(|a, b| a.path.cmp(&b.path));
  Ok((out, skipped))
}

fn walk(
  root: &Path,
  dir: &Path,
  out: &mut Vec<LocalFile>,
  skipped: &mut Vec<String>,
  total: &mut u64,
) -> Result<(), String> {
  let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
  for entry in entries {
    let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = entry.path();
    let rel = path
      .strip_prefix(root)
      .map_err(|e| e.to_string())?
      .to_string_lossy()
      .replace('\\', "/");
    let name = entry.file_name().to_string_lossy().into_owned();
    if SKIPPED.iter().any(|(n, _)| *n == name) {
      skipped.push(rel);
      continue;
    }
    // Symlinks are followed (a file or folder the link names is deployed).
    let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.is_dir() {
      walk(root, &path, out, skipped, total)?;
    } else if meta.is_file() {
      *total += meta.len();
      if *total > MAX_TOTAL {
        return Err(format!(
          "{}: the Worker's files pass {} MiB; deploy a bundle (wrangler deploy --dry-run --outdir dist)",
          root.display(),
          MAX_TOTAL >> 20
        ));
      }
      let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
      out.push(LocalFile::new(rel, bytes));
    }
  }
  Ok(())
}

//! The assets directory read at start: every file (not symlinks, not
//! `_redirects`, `_headers`, `.assetsignore` or what it lists) by its URL
//! path, with a content hash for its ETag and a type by extension.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Cloudflare's limits on one Worker version's assets.
const MAX_ASSET_SIZE: u64 = 25 << 20;
const MAX_ASSET_COUNT: usize = 100_000;
/// Files this small are kept in memory (up to `MAX_CACHED` in all): most
/// of a site's requests are for them, and they are read at start anyway.
const CACHE_FILE_BELOW: u64 = 256 << 10;
const MAX_CACHED: u64 = 64 << 20;

#[derive(Debug)]
pub struct File {
  pub path: PathBuf,
  /// 32 hex digits of the content's SHA-256: the same file has the same
  /// ETag on every node and after every restart.
  pub hash: String,
  pub content_type: Option<String>,
  pub len: u64,
  pub cached: Option<bytes::Bytes>,
}

/// `.assetsignore` lines as gitignore reads them: a pattern without a
/// slash matches a name at any depth, one with a slash from the root, a
/// trailing slash a directory (and so what is under it); `!` re-includes.
struct Ignore(Vec<(bool, glob::Pattern, bool)>);

impl Ignore {
  fn new(text: &str) -> Ignore {
    let mut out = Vec::new();
    for line in ["/.assetsignore", "/_redirects", "/_headers"]
      .into_iter()
      .chain(text.lines())
    {
      let line = line.trim_end();
      if line.is_empty() || line.starts_with('#') {
        continue;
      }
      let (negate, line) = match line.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, line),
      };
      let (dir_only, line) = match line.strip_suffix('/') {
        Some(rest) => (true, rest),
        None => (false, line),
      };
      let anchored = line.trim_start_matches('/');
      let pattern = if line.contains('/') {
        anchored.to_string()
      } else {
        format!("**/{anchored}")
      };
      if let Ok(p) = glob::Pattern::new(&pattern) {
        out.push((negate, p, dir_only));
      }
    }
    Ignore(out)
  }

  /// Whether `rel` (a/b/c.txt) is ignored: the last matching line decides,
  /// for the path or any directory above it.
  fn ignored(&self, rel: &str) -> bool {
    let opts = glob::MatchOptions {
      require_literal_separator: true,
      ..Default::default()
    };
    let mut verdict = false;
    let parts: Vec<&str> = rel.split('/').collect();
    for (negate, p, dir_only) in &self.0 {
      let hit = (1..=parts.len()).any(|n| {
        let prefix = parts[..n].join("/");
        let is_dir = n < parts.len();
        (is_dir || !dir_only)
          && (p.matches_with(&prefix, opts) || p.matches_with(&format!("/{prefix}")[1..], opts))
      });
      if hit {
        verdict = !negate;
      }
    }
    verdict
  }
}

pub fn walk(dir: &Path) -> Result<HashMap<String, File>, String> {
  let meta =
    std::fs::metadata(dir).map_err(|e| format!("assets directory {}: {e}", dir.display()))?;
  if !meta.is_dir() {
    return Err(format!(
      "assets directory {}: the path specified is not a directory",
      dir.display()
    ));
  }
  let ignore = Ignore::new(&std::fs::read_to_string(dir.join(".assetsignore")).unwrap_or_default());
  let mut files = HashMap::new();
  let mut stack = vec![dir.to_path_buf()];
  let mut cached_bytes = 0;
  while let Some(d) = stack.pop() {
    let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    for entry in entries {
      let entry = entry.map_err(|e| format!("{}: {e}", d.display()))?;
      let path = entry.path();
      let kind = entry
        .file_type()
        .map_err(|e| format!("{}: {e}", path.display()))?;
      let rel = path
        .strip_prefix(dir)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/");
      if kind.is_symlink() || ignore.ignored(&rel) {
        continue;
      }
      if kind.is_dir() {
        stack.push(path);
        continue;
      }
      let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
      let len = bytes.len() as u64;
      if len > MAX_ASSET_SIZE {
        return Err(format!(
          "Asset too large: {} is {len} bytes; Cloudflare Workers supports assets of up to 25 MiB",
          path.display()
        ));
      }
      let hash: String = Sha256::digest(&bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
      let cached = (len < CACHE_FILE_BELOW && cached_bytes + len <= MAX_CACHED).then(|| {
        cached_bytes += len;
        bytes::Bytes::from(bytes)
      });
      files.insert(
        format!("/{rel}"),
        File {
          content_type: content_type(&rel),
          path,
          hash,
          len,
          cached,
        },
      );
      if files.len() > MAX_ASSET_COUNT {
        return Err(format!(
          "Maximum number of assets exceeded: Cloudflare Workers supports up to {MAX_ASSET_COUNT} assets in a version ({})",
          dir.display()
        ));
      }
    }
  }
  Ok(files)
}

/// The type wrangler gives a file: by extension, `text/*` with UTF-8.
pub fn content_type(name: &str) -> Option<String> {
  let ext = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
  // Where the `mime` package wrangler uses (mime-db) differs from
  // mime_guess's table for types the web uses.
  let t = match ext.as_str() {
    "js" | "mjs" | "cjs" => "text/javascript".to_string(),
    "wasm" => "application/wasm".into(),
    "map" => "application/json".into(),
    "md" | "markdown" => "text/markdown".into(),
    "ico" => "image/vnd.microsoft.icon".into(),
    "webmanifest" => "application/manifest+json".into(),
    "avif" => "image/avif".into(),
    "woff" => "font/woff".into(),
    "woff2" => "font/woff2".into(),
    "ttf" => "font/ttf".into(),
    "otf" => "font/otf".into(),
    "mp4" => "video/mp4".into(),
    "xml" => "application/xml".into(),
    "rtf" => "application/rtf".into(),
    "gz" => "application/gzip".into(),
    "wav" => "audio/wav".into(),
    _ => mime_guess::from_ext(&ext).first_raw()?.to_string(),
  };
  Some(if t.starts_with("text/") && !t.contains("charset") {
    format!("{t}; charset=utf-8")
  } else {
    t
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn ignore_lists_as_gitignore() {
    let i = Ignore::new("*.map\n/secret.txt\nbuild/\n!keep.map\n");
    assert!(i.ignored("_headers"));
    assert!(!i.ignored("a/_headers"));
    assert!(i.ignored("a/b/x.map"));
    assert!(!i.ignored("keep.map"));
    assert!(i.ignored("secret.txt"));
    assert!(!i.ignored("a/secret.txt"));
    assert!(i.ignored("build/x.js"));
    assert!(!i.ignored("build"));
  }

  #[test]
  fn types_as_wrangler_gives_them() {
    assert_eq!(content_type("a.html").unwrap(), "text/html; charset=utf-8");
    assert_eq!(
      content_type("a.js").unwrap(),
      "text/javascript; charset=utf-8"
    );
    assert_eq!(content_type("a.css").unwrap(), "text/css; charset=utf-8");
    assert_eq!(content_type("a.png").unwrap(), "image/png");
    assert_eq!(content_type("a.json").unwrap(), "application/json");
    assert_eq!(content_type("noext"), None);
  }
}

//! Deployments on a fleet's bucket. A version is immutable: its files are
//! stored once by content (`deploy-blobs/<sha256>`), listed with their
//! hashes in `deploy/versions/<id>/manifest.json` together with what the
//! Worker declares (classes, migrations, bindings), and a fleet serves the
//! version `deploy/current.json` names, switched by compare-and-swap.
//!
//! Between versions the Durable Object classes are checked as Cloudflare
//! checks them: a class may not vanish (deleting one needs a
//! `deleted_classes` migration, which cellhost refuses), may not change its
//! storage (KV-backed or SQLite), and the migration tags of the previous
//! version must stay, in order, at the head of the new list.

mod files;
mod store;

use serde::{Deserialize, Serialize};

pub use files::{LocalFile, SKIPPED, collect, hash_hex};
pub use store::{download, list_versions, read_current, read_manifest, switch, upload};

pub const CURRENT_KEY: &str = "deploy/current.json";

pub fn manifest_key(id: &str) -> String {
  format!("deploy/versions/{id}/manifest.json")
}

pub fn blob_key(sha256: &str) -> String {
  format!("deploy-blobs/{sha256}")
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Class {
  pub name: String,
  pub sqlite: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Binding {
  pub name: String,
  /// "durable_object", "var", "service", "r2_bucket", …
  pub kind: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
  /// Relative to the Worker's directory, `/`-separated.
  pub path: String,
  pub size: u64,
  pub sha256: String,
  /// The module type wrangler's rules give it, if it is a module.
  #[serde(default)]
  pub module_type: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Manifest {
  pub id: String,
  pub created_ms: u64,
  #[serde(default)]
  pub message: Option<String>,
  /// SHA-256 over every file's path and hash, in path order.
  pub content_hash: String,
  pub worker: String,
  /// The entry module or config file the node starts from (relative).
  pub main: String,
  #[serde(default)]
  pub compatibility_date: Option<String>,
  #[serde(default)]
  pub compatibility_flags: Vec<String>,
  pub classes: Vec<Class>,
  pub migration_tags: Vec<String>,
  pub bindings: Vec<Binding>,
  pub files: Vec<FileEntry>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Current {
  pub version: String,
  pub switched_ms: u64,
  /// The version it replaced.
  #[serde(default)]
  pub previous: Option<String>,
}

/// The content hash of a file list (order-independent).
pub fn content_hash(files: &[FileEntry]) -> String {
  use sha2::Digest;
  let mut sorted: Vec<&FileEntry> = files.iter().collect();
  sorted.sort_by(|a, b| a.path.cmp(&b.path));
  let mut h = sha2::Sha256::new();
  for f in sorted {
    h.update(f.path.as_bytes());
    h.update([0]);
    h.update(f.sha256.as_bytes());
    h.update([0]);
  }
  hash_hex(&h.finalize())
}

/// A version id: sortable by time, named by content.
pub fn version_id(created_ms: u64, content_hash: &str) -> String {
  format!("{created_ms:013}-{}", &content_hash[..12])
}

/// Whether `next` may follow `prev` on a fleet (the migration rules above);
/// `Err` says why not, by class or tag.
pub fn check_migrations(prev: &Manifest, next: &Manifest) -> Result<(), String> {
  for c in &prev.classes {
    match next.classes.iter().find(|n| n.name == c.name) {
      None => {
        return Err(format!(
          "Durable Object class {} (in version {}) is gone from this version: its objects would be orphaned. Deleting or renaming a class needs a deleted_classes or renamed_classes migration, which cellhost does not support yet; keep the class exported",
          c.name, prev.id
        ));
      }
      Some(n) if n.sqlite != c.sqlite => {
        return Err(format!(
          "Durable Object class {} changes its storage ({} in version {}, {} here): a class's storage backend cannot change",
          c.name,
          backend(c.sqlite),
          prev.id,
          backend(n.sqlite)
        ));
      }
      Some(_) => {}
    }
  }
  if !next.migration_tags.starts_with(&prev.migration_tags) {
    return Err(format!(
      "the migrations of version {} ({}) must stay, in order, at the head of this version's ({}): applied migrations cannot be edited or removed",
      prev.id,
      prev.migration_tags.join(", "),
      next.migration_tags.join(", ")
    ));
  }
  Ok(())
}

fn backend(sqlite: bool) -> &'static str {
  if sqlite { "SQLite" } else { "KV" }
}

/// What changed from `prev` to `next`, a line each.
pub fn changes(prev: Option<&Manifest>, next: &Manifest) -> Vec<String> {
  let Some(prev) = prev else {
    return vec![format!(
      "first version: {} files, {} classes, {} bindings",
      next.files.len(),
      next.classes.len(),
      next.bindings.len()
    )];
  };
  let mut out = Vec::new();
  for f in &next.files {
    match prev.files.iter().find(|p| p.path == f.path) {
      None => out.push(format!("+ file {}", f.path)),
      Some(p) if p.sha256 != f.sha256 => out.push(format!("~ file {}", f.path)),
      Some(_) => {}
    }
  }
  for p in &prev.files {
    if !next.files.iter().any(|f| f.path == p.path) {
      out.push(format!("- file {}", p.path));
    }
  }
  for c in &next.classes {
    if !prev.classes.iter().any(|p| p.name == c.name) {
      out.push(format!("+ class {} ({})", c.name, backend(c.sqlite)));
    }
  }
  for b in &next.bindings {
    if !prev.bindings.contains(b) {
      out.push(format!("+ binding {} ({})", b.name, b.kind));
    }
  }
  for b in &prev.bindings {
    if !next.bindings.contains(b) {
      out.push(format!("- binding {} ({})", b.name, b.kind));
    }
  }
  for t in next.migration_tags.iter().skip(prev.migration_tags.len()) {
    out.push(format!("+ migration {t}"));
  }
  if prev.compatibility_date != next.compatibility_date {
    out.push(format!(
      "~ compatibility_date {} -> {}",
      prev.compatibility_date.as_deref().unwrap_or("(none)"),
      next.compatibility_date.as_deref().unwrap_or("(none)")
    ));
  }
  if prev.compatibility_flags != next.compatibility_flags {
    out.push(format!(
      "~ compatibility_flags [{}] -> [{}]",
      prev.compatibility_flags.join(", "),
      next.compatibility_flags.join(", ")
    ));
  }
  if out.is_empty() {
    out.push(format!("no change from version {}", prev.id));
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  fn m(id: &str, classes: &[(&str, bool)], tags: &[&str]) -> Manifest {
    Manifest {
      id: id.into(),
      created_ms: 1,
      message: None,
      content_hash: "0".repeat(64),
      worker: "w".into(),
      main: "worker.js".into(),
      compatibility_date: None,
      compatibility_flags: vec![],
      classes: classes
        .iter()
        .map(|(n, s)| Class {
          name: n.to_string(),
          sqlite: *s,
        })
        .collect(),
      migration_tags: tags.iter().map(|t| t.to_string()).collect(),
      bindings: vec![],
      files: vec![],
    }
  }

  #[test]
  fn a_class_may_be_added_but_not_dropped_or_moved_to_other_storage() {
    let v1 = m("v1", &[("A", true)], &["v1"]);
    assert!(check_migrations(&v1, &m("v2", &[("A", true), ("B", false)], &["v1", "v2"])).is_ok());
    let e = check_migrations(&v1, &m("v2", &[("B", true)], &["v1", "v2"])).unwrap_err();
    assert!(e.contains("class A (in version v1) is gone"), "{e}");
    let e = check_migrations(&v1, &m("v2", &[("A", false)], &["v1"])).unwrap_err();
    assert!(
      e.contains("changes its storage (SQLite in version v1, KV here)"),
      "{e}"
    );
  }

  #[test]
  fn applied_migrations_stay_at_the_head_in_order() {
    let v1 = m("v1", &[], &["a", "b"]);
    assert!(check_migrations(&v1, &m("v2", &[], &["a", "b", "c"])).is_ok());
    assert!(check_migrations(&v1, &m("v2", &[], &["a"])).is_err());
    assert!(check_migrations(&v1, &m("v2", &[], &["b", "a"])).is_err());
  }

  #[test]
  fn the_content_hash_follows_paths_and_bytes_not_order() {
    let f = |p: &str, h: &str| FileEntry {
      path: p.into(),
      size: 1,
      sha256: h.into(),
      module_type: None,
    };
    let a = content_hash(&[f("a", "1"), f("b", "2")]);
    assert_eq!(a, content_hash(&[f("b", "2"), f("a", "1")]));
    assert_ne!(a, content_hash(&[f("a", "2"), f("b", "1")]));
    assert_ne!(a, content_hash(&[f("a", "1"), f("c", "2")]));
  }

  #[test]
  fn changes_name_files_classes_and_bindings() {
    let mut v1 = m("v1", &[("A", true)], &["v1"]);
    v1.files = vec![FileEntry {
      path: "worker.js".into(),
      size: 1,
      sha256: "1".into(),
      module_type: None,
    }];
    let mut v2 = m("v2", &[("A", true), ("B", true)], &["v1", "v2"]);
    v2.files = vec![FileEntry {
      path: "worker.js".into(),
      size: 1,
      sha256: "2".into(),
      module_type: None,
    }];
    let c = changes(Some(&v1), &v2);
    assert_eq!(
      c,
      vec!["~ file worker.js", "+ class B (SQLite)", "+ migration v2"]
    );
  }
}

//! Durable Object facets' databases: each facet is its own SQLite database,
//! kept beside its parent's (`<data>/<unique key>/<id>.facets/<name>.sqlite`,
//! a nested facet under `<name>.facets/`), so deleting a facet deletes its
//! children with it. Facet names are percent-encoded into file names.

use std::path::PathBuf;

use cellhost_storage::CellDb;
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;

use crate::cell::{cells, err};

fn encode(name: &str) -> String {
  let mut out = String::with_capacity(name.len());
  for b in name.bytes() {
    if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
      out.push(b as char);
    } else {
      out.push_str(&format!("%{b:02X}"));
    }
  }
  out
}

/// The database file of the facet at `path` (names from the top object
/// down) and the directory of its own facets.
fn location(
  data_dir: &std::path::Path,
  unique_key: &str,
  id_hex: &str,
  path: &[String],
) -> (PathBuf, PathBuf) {
  let mut dir = data_dir.join(unique_key).join(format!("{id_hex}.facets"));
  let (last, parents) = path.split_last().expect("a facet has a name");
  for p in parents {
    dir = dir.join(format!("{}.facets", encode(p)));
  }
  (
    dir.join(format!("{}.sqlite", encode(last))),
    dir.join(format!("{}.facets", encode(last))),
  )
}

fn refuse_bucket(state: &mut OpState) -> Result<(), JsErrorBox> {
  if cells(state).fleet.is_some() {
    return Err(JsErrorBox::generic(
      "Durable Object facets are not supported in bucket mode by cellhost yet: their databases would not be replicated with their parent's",
    ));
  }
  Ok(())
}

/// Opens the database of a facet of object `id_hex`.
#[op2]
#[smi]
pub fn op_cell_open_facet(
  state: &mut OpState,
  #[string] unique_key: &str,
  #[string] id_hex: &str,
  #[serde] path: Vec<String>,
) -> Result<u32, JsErrorBox> {
  refuse_bucket(state)?;
  if path.is_empty() {
    return Err(JsErrorBox::type_error("a facet has a name"));
  }
  let c = cells(state);
  let (file, _) = location(&c.data_dir, unique_key, id_hex, &path);
  if let Some(dir) = file.parent() {
    std::fs::create_dir_all(dir)
      .map_err(|e| JsErrorBox::generic(format!("facet {}: {e}", path.join("/"))))?;
  }
  let db = CellDb::open(&file).map_err(err)?;
  let key = format!(
    "{id_hex}#{}",
    path.iter().map(|p| encode(p)).collect::<Vec<_>>().join("/")
  );
  Ok(c.insert(unique_key, &key, db, None))
}

/// Deletes a facet's database and every facet under it (none may be open).
#[op2]
pub fn op_cell_delete_facet(
  state: &mut OpState,
  #[string] unique_key: &str,
  #[string] id_hex: &str,
  #[serde] path: Vec<String>,
) -> Result<(), JsErrorBox> {
  refuse_bucket(state)?;
  if path.is_empty() {
    return Err(JsErrorBox::type_error("a facet has a name"));
  }
  let c = cells(state);
  let (file, dir) = location(&c.data_dir, unique_key, id_hex, &path);
  let fail =
    |e: std::io::Error| JsErrorBox::generic(format!("deleting facet {}: {e}", path.join("/")));
  for suffix in ["", "-wal", "-shm"] {
    let mut f = file.clone().into_os_string();
    f.push(suffix);
    match std::fs::remove_file(&f) {
      Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(fail(e)),
      _ => {}
    }
  }
  match std::fs::remove_dir_all(&dir) {
    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fail(e)),
    _ => Ok(()),
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn facets_live_beside_their_parent() {
    let (f, d) = location(std::path::Path::new("/d"), "ns", "ab", &["foo".into()]);
    assert_eq!(f, PathBuf::from("/d/ns/ab.facets/foo.sqlite"));
    assert_eq!(d, PathBuf::from("/d/ns/ab.facets/foo.facets"));
    let (f, _) = location(
      std::path::Path::new("/d"),
      "ns",
      "ab",
      &["a/b".into(), "..".into()],
    );
    assert_eq!(
      f,
      PathBuf::from("/d/ns/ab.facets/a%2Fb.facets/%2E%2E.sqlite")
    );
  }
}

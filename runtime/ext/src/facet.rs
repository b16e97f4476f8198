//! Durable Object facets' databases: each facet is its own SQLite database,
//! kept beside its parent's (`<data>/<unique key>/<id>.facets/<name>.sqlite`,
//! a nested facet under `<name>.facets/`), so deleting a facet deletes its
//! children with it. Facet names are percent-encoded into file names.
//! On a bucket each facet is a cell of its own, `<parent scope>$<name>`
//! (see `cellhost_fleet`'s facets module), taken by the node that runs
//! its parent.

use std::path::PathBuf;

use deno_core::{OpState, op2};
use deno_error::JsErrorBox;

use crate::cell::cells;

/// `name` with `[A-Za-z0-9_-]` as is and any other byte as `<mark>XX`.
fn escape(name: &str, mark: char) -> String {
  let mut out = String::with_capacity(name.len());
  for b in name.bytes() {
    if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
      out.push(b as char);
    } else {
      out.push_str(&format!("{mark}{b:02X}"));
    }
  }
  out
}

/// A facet name in a file name.
fn encode(name: &str) -> String {
  escape(name, '%')
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

/// A facet name as one part of a bucket scope (`[A-Za-z0-9_-]` as is, any
/// other byte `.XX`); a long name becomes `.H` and 128 bits of its SHA-256,
/// so that nested facets still fit the 255 bytes of a scope.
fn scope_part(name: &str) -> String {
  let mut out = escape(name, '.');
  if out.len() > 48 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    out = String::from(".H");
    for b in &digest[..16] {
      out.push_str(&format!("{b:02x}"));
    }
  }
  out
}

/// The bucket scope of the facet at `path` under the object `root`.
fn facet_scope(root: &str, path: &[String]) -> Result<String, JsErrorBox> {
  let mut scope = root.to_string();
  for p in path {
    scope.push('$');
    scope.push_str(&scope_part(p));
  }
  cellhost_logic::own::validate_scope(&scope).map_err(|e| {
    JsErrorBox::generic(format!(
      "facet {} cannot be stored on the bucket: {e}",
      path.join("/")
    ))
  })?;
  Ok(scope)
}

/// Where a facet lives: its cell key, local file, and (on a bucket) scopes.
struct Place {
  key: String,
  file: PathBuf,
  children: PathBuf,
}

fn place(
  state: &mut OpState,
  unique_key: &str,
  id_hex: &str,
  path: &[String],
) -> Result<Place, JsErrorBox> {
  if path.is_empty() {
    return Err(JsErrorBox::type_error("a facet has a name"));
  }
  let (file, children) = location(&cells(state).data_dir, unique_key, id_hex, path);
  let key = format!(
    "{id_hex}#{}",
    path.iter().map(|p| encode(p)).collect::<Vec<_>>().join("/")
  );
  Ok(Place {
    key,
    file,
    children,
  })
}

fn make_dir(file: &std::path::Path, what: &[String]) -> Result<(), JsErrorBox> {
  match file.parent() {
    Some(dir) => std::fs::create_dir_all(dir)
      .map_err(|e| JsErrorBox::generic(format!("facet {}: {e}", what.join("/")))),
    None => Ok(()),
  }
}

/// Opens the database of a facet of object `id_hex` (without a bucket).
#[op2]
#[smi]
pub fn op_cell_open_facet(
  state: &mut OpState,
  #[string] unique_key: &str,
  #[string] id_hex: &str,
  #[serde] path: Vec<String>,
) -> Result<u32, JsErrorBox> {
  if cells(state).fleet.is_some() {
    return Err(JsErrorBox::generic(
      "a facet on a bucket is opened with op_cell_activate_facet",
    ));
  }
  let at = place(state, unique_key, id_hex, &path)?;
  make_dir(&at.file, &path)?;
  cells(state).open_local(unique_key, &at.key, &at.file)
}

/// Takes a facet's cell on the bucket (recording it under its parent
/// first, so deleting the parent finds it) and opens its database.
#[op2]
pub async fn op_cell_activate_facet(
  state: std::rc::Rc<std::cell::RefCell<OpState>>,
  #[string] unique_key: String,
  #[string] id_hex: String,
  #[serde] path: Vec<String>,
) -> Result<u32, JsErrorBox> {
  let (fleet, at, scope, parent) = {
    let mut st = state.borrow_mut();
    let root = root_scope(&st, &unique_key, &id_hex)?;
    let at = place(&mut st, &unique_key, &id_hex, &path)?;
    let scope = facet_scope(&root, &path)?;
    let parent = facet_scope(&root, &path[..path.len() - 1])?;
    (bucket_of(&mut st)?, at, scope, parent)
  };
  make_dir(&at.file, &path)?;
  let name = &scope[parent.len() + 1..];
  fleet
    .note_facet(&parent, name)
    .await
    .map_err(JsErrorBox::generic)?;
  let key = format!("{unique_key}/{}", at.key);
  let (db, repl) = crate::replica::open(fleet, at.file, scope, key)
    .await
    .map_err(crate::cell::activate_error)?;
  let mut st = state.borrow_mut();
  Ok(cells(&mut st).insert(&unique_key, &at.key, db, Some(repl)))
}

fn root_scope(state: &OpState, unique_key: &str, id_hex: &str) -> Result<String, JsErrorBox> {
  let class = crate::cell::class_of(state, unique_key)
    .ok_or_else(|| JsErrorBox::type_error("unknown Durable Object namespace"))?;
  Ok(cellhost_fleet::cell_scope(&class, id_hex))
}

fn bucket_of(state: &mut OpState) -> Result<std::sync::Arc<cellhost_fleet::Fleet>, JsErrorBox> {
  cells(state)
    .fleet
    .clone()
    .ok_or_else(|| JsErrorBox::generic("cells are not on a bucket"))
}

/// Empties, in the bucket, the facet `scope` and (first) every facet under
/// it, then drops its marker under `parent`. Each facet's emptying is one
/// atomic step (a new epoch from an empty database); the whole tree is not.
fn wipe_tree(
  fleet: &cellhost_fleet::Fleet,
  scratch: &std::path::Path,
  parent: &str,
  name: &str,
) -> Result<(), String> {
  let scope = format!("{parent}${name}");
  for child in fleet.facets_of_blocking(&scope)? {
    wipe_tree(fleet, scratch, &scope, &child)?;
  }
  crate::replica::wipe(fleet, scratch, &scope)?;
  fleet.forget_facet_blocking(parent, name)
}

/// Deletes a facet's database and every facet under it (none may be open):
/// on a bucket, their cells are emptied there before this returns (the
/// isolate waits: `ctx.facets.delete()` is synchronous).
#[op2]
pub fn op_cell_delete_facet(
  state: &mut OpState,
  #[string] unique_key: &str,
  #[string] id_hex: &str,
  #[serde] path: Vec<String>,
) -> Result<(), JsErrorBox> {
  let at = place(state, unique_key, id_hex, &path)?;
  let what = path.join("/");
  let fail = |e: String| JsErrorBox::generic(format!("deleting facet {what}: {e}"));
  if let Some(fleet) = cells(state).fleet.clone() {
    let root = root_scope(state, unique_key, id_hex)?;
    let scope = facet_scope(&root, &path)?;
    let parent = facet_scope(&root, &path[..path.len() - 1])?;
    let scratch = location(
      &cells(state).data_dir,
      unique_key,
      id_hex,
      &[".wipe".into()],
    )
    .0;
    make_dir(&scratch, &path)?;
    wipe_tree(&fleet, &scratch, &parent, &scope[parent.len() + 1..]).map_err(fail)?;
  }
  crate::replica::remove_files(&at.file).map_err(fail)?;
  match std::fs::remove_dir_all(&at.children) {
    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fail(e.to_string())),
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

  #[test]
  fn facet_scopes_nest_under_their_parents() {
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(facet_scope("C:ab", &path(&["foo"])).unwrap(), "C:ab$foo");
    assert_eq!(
      facet_scope("C:ab", &path(&["a/b", ".."])).unwrap(),
      "C:ab$a.2Fb$.2E.2E"
    );
    // A long name is hashed; the same name always gives the same part.
    let long = "x".repeat(200);
    let s = facet_scope("C:ab", &path(&[&long, "y"])).unwrap();
    assert_eq!(s.len(), "C:ab$.H".len() + 32 + 2);
    assert_eq!(s, facet_scope("C:ab", &path(&[&long, "y"])).unwrap());
    assert!(s.ends_with("$y"));
    // Deep nesting past 255 bytes is refused by name.
    let deep: Vec<String> = (0..8).map(|_| "y".repeat(40)).collect();
    let e = facet_scope("C:ab", &deep).unwrap_err().to_string();
    assert!(e.contains("cannot be stored on the bucket"), "{e}");
  }
}

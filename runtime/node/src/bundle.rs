//! node:fs's read-only `/bundle`: the Worker's modules under their module
//! names, as workerd shows them. The host puts a `Bundle` in the op state;
//! the files are listed and read when a Worker first looks (never before,
//! so a Worker that does not use node:fs pays nothing).

use std::path::{Path, PathBuf};

use deno_core::{OpState, op2};
use deno_error::JsErrorBox;

/// The Worker's module files: `root` and the names under it that are
/// modules (`is_module`, by the Worker's module rules).
pub struct Bundle {
  root: PathBuf,
  is_module: Box<dyn Fn(&str) -> bool>,
  listed: std::cell::OnceCell<Vec<String>>,
}

impl Bundle {
  pub fn new(root: PathBuf, is_module: Box<dyn Fn(&str) -> bool>) -> Bundle {
    Bundle {
      root,
      is_module,
      listed: Default::default(),
    }
  }

  /// The names, listed once per isolate.
  fn names(&self) -> &[String] {
    self.listed.get_or_init(|| self.list())
  }

  /// Module names under the root, `/`-separated and sorted. Hidden
  /// directories (the default data directory among them) and node_modules
  /// are not a Worker's modules.
  fn list(&self) -> Vec<String> {
    fn walk(bundle: &Bundle, dir: &Path, out: &mut Vec<String>) {
      let Ok(entries) = std::fs::read_dir(dir) else {
        return;
      };
      for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
          continue;
        };
        let path = entry.path();
        if kind.is_dir() {
          if !name.starts_with('.') && name != "node_modules" {
            walk(bundle, &path, out);
          }
        } else if kind.is_file()
          && let Ok(rel) = path.strip_prefix(&bundle.root)
        {
          let rel = rel.to_string_lossy().replace('\\', "/");
          if (bundle.is_module)(&rel) {
            out.push(rel);
          }
        }
      }
    }
    let mut out = Vec::new();
    walk(self, &self.root, &mut out);
    out.sort();
    out
  }
}

#[op2]
#[serde]
pub fn op_node_bundle_names(state: &OpState) -> Vec<String> {
  state
    .try_borrow::<Bundle>()
    .map(|b| b.names().to_vec())
    .unwrap_or_default()
}

/// One module's bytes; only names the listing gives are read (no path
/// outside the root can be named).
#[op2]
#[buffer]
pub fn op_node_bundle_read(state: &OpState, #[string] name: &str) -> Result<Vec<u8>, JsErrorBox> {
  let bundle = state
    .try_borrow::<Bundle>()
    .ok_or_else(|| JsErrorBox::generic("no bundle"))?;
  if bundle
    .names()
    .binary_search_by(|n| n.as_str().cmp(name))
    .is_err()
  {
    return Err(JsErrorBox::generic(format!(
      "{name} is not a module of this Worker"
    )));
  }
  std::fs::read(bundle.root.join(name)).map_err(|e| JsErrorBox::generic(e.to_string()))
}

//! Builds the startup snapshot: Deno's Web-platform extensions plus the
//! cellhost glue in js/, evaluated once here so each isolate starts from it.
//! Extension sources are not embedded by deno_core any more, so the lazy
//! files the snapshot did not evaluate (deno_node's polyfills among them) are
//! embedded as a residual table, prepared as the snapshot would have seen
//! them (`prepare` below).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use deno_core::ExtensionFileSourceCode;
use deno_core::snapshot::{CreateSnapshotOptions, create_snapshot};
use deno_core::{ModuleCodeString, ModuleName, SourceMapData};
use deno_error::JsErrorBox;

fn main() {
  let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
  let extensions = cellhost_ext::set::extensions();

  let mut lazy: Vec<(String, String, bool)> = Vec::new();
  for ext in &extensions {
    let files = ext
      .lazy_loaded_js_files
      .iter()
      .map(|f| (f, true))
      .chain(ext.lazy_loaded_esm_files.iter().map(|f| (f, false)));
    for (file, is_js) in files {
      #[allow(deprecated)]
      if let ExtensionFileSourceCode::LoadedFromFsDuringSnapshot(path) = &file.code {
        lazy.push((file.specifier.to_string(), path.to_string(), is_js));
      }
    }
  }

  let output = create_snapshot(
    CreateSnapshotOptions {
      cargo_manifest_dir: env!("CARGO_MANIFEST_DIR"),
      startup_snapshot: None,
      skip_op_registration: false,
      extensions,
      extension_transpiler: Some(std::rc::Rc::new(transpile)),
      with_runtime_cb: None,
    },
    None,
  )
  .expect("creating the startup snapshot");
  std::fs::write(out.join("CELLHOST_SNAPSHOT.bin"), &output.output).unwrap();
  for path in &output.files_loaded_during_snapshot {
    println!("cargo:rerun-if-changed={}", path.display());
  }

  lazy.sort();
  let consumed: HashSet<_> = output.consumed_lazy_specifiers.iter().cloned().collect();
  // Residual sources are embedded as the snapshot would have seen them:
  // TypeScript transpiled, polyfills given their private `Deno`.
  let prepared = out.join("residual");
  std::fs::create_dir_all(&prepared).unwrap();
  let mut js = String::from("pub static RESIDUAL_JS: &[(&str, &str)] = &[\n");
  let mut esm = String::from("pub static RESIDUAL_ESM: &[(&str, &str)] = &[\n");
  for (n, (spec, path, is_js)) in lazy.into_iter().enumerate() {
    if consumed.contains(&spec) {
      continue;
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let code = prepare(&spec, &text).unwrap_or_else(|e| panic!("preparing {spec}: {e}"));
    let path = if code == text {
      PathBuf::from(path)
    } else {
      let file = prepared.join(format!("{n}.js"));
      std::fs::write(&file, code).unwrap();
      file
    };
    let line = format!("  ({spec:?}, include_str!({path:?})),\n");
    if is_js {
      js.push_str(&line)
    } else {
      esm.push_str(&line)
    }
  }
  let mut code = String::new();
  writeln!(code, "{js}];\n{esm}];").unwrap();
  std::fs::write(out.join("residual.rs"), code).unwrap();
  println!("cargo:rerun-if-changed=build.rs");
}

/// The snapshot's `extension_transpiler`: every extension source as
/// `prepare` leaves it.
fn transpile(
  name: ModuleName,
  source: ModuleCodeString,
) -> Result<(ModuleCodeString, Option<SourceMapData>), JsErrorBox> {
  Ok((prepare(name.as_str(), source.as_str())?.into(), None))
}

/// deno_node's polyfills transpiled and given their private `Deno`,
/// deno_crypto's key statics taken off the class a Worker can reach, and
/// the edits to Deno's Web JS in cellhost_ext::sources.
fn prepare(name: &str, source: &str) -> Result<String, JsErrorBox> {
  let code = cellhost_node::transpile::prepare(name, source)?;
  let code = cellhost_crypto::prepare(name, &code).unwrap_or(code);
  Ok(cellhost_ext::sources::prepare(name, &code).unwrap_or(code))
}

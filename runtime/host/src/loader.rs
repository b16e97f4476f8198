//! Module loading for a Worker bundle. A Worker sees its own module set and
//! nothing else: relative imports of files inside the Worker's directory
//! (resolved once at start, symlinks included), and the built-in
//! `cloudflare:*` modules (`BUILTINS`). Anything else — another `file:` URL, a `..`
//! or symlink escape, `ext:`, `data:`, `http:` — is refused with workerd's
//! `No such module` error, without reading the file.
//!
//! A module's type comes from wrangler's module rules (`rules.rs`). A Text,
//! Data, CompiledWasm or JSON module is answered as a one-line JavaScript
//! module that imports the file's value from its own URL (plus a query)
//! under an internal import attribute type; that second load hands the bytes to
//! `isolate::module_value`, which makes the value (a string, an
//! `ArrayBuffer`, a `WebAssembly.Module`, the parsed JSON) in Rust, so no
//! user-reachable global is involved and a wasm module compiles even where
//! code generation is refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::rules::{ModuleKind, ModuleRules};

use deno_core::{
  ModuleLoadOptions, ModuleLoadReferrer, ModuleLoadResponse, ModuleLoader, ModuleSource,
  ModuleSourceCode, ModuleSpecifier, ModuleType, RequestedModuleType, ResolutionKind,
};
use deno_error::JsErrorBox;

/// The `cloudflare:*` modules and the names each exports. Each re-exports
/// what the snapshot left under `globalThis[Symbol.for("cellhost.modules")]`
/// (js/99_main.js). The host evaluates them once, before the Worker's code
/// and before it takes the hook off the global object (see
/// `isolate::seal`); every later import is answered from the module map.
pub const BUILTINS: &[(&str, &str)] = &[
  (
    "cloudflare:workers",
    "DurableObject, WorkerEntrypoint, RpcTarget, WorkflowEntrypoint, env, waitUntil, \
     RpcStub, RpcPromise, RpcProperty, ServiceStub, abortIsolate, withEnv, withExports, \
     withEnvAndExports, exports, cache, tracing, restore",
  ),
  ("cloudflare:sockets", "connect"),
  ("cloudflare:email", "EmailMessage"),
];

fn builtin_source(specifier: &str) -> Option<String> {
  let (name, exports) = BUILTINS.iter().find(|(n, _)| *n == specifier)?;
  Some(format!(
    "const m = globalThis[Symbol.for(\"cellhost.modules\")][{name:?}];\nexport const {{ {exports} }} = m;\n"
  ))
}

pub struct Loader {
  /// The Worker's base directory, canonical: every module lives under it,
  /// and module names are relative to it.
  root: PathBuf,
  /// The entry module, canonical: JavaScript whatever the rules say.
  main: PathBuf,
  rules: Arc<ModuleRules>,
  node: crate::NodeCompat,
}

impl Loader {
  /// A loader for the Worker whose entry is `main` (canonical), its
  /// modules under `base_dir` (default: `main`'s directory).
  pub fn new(
    main: &Path,
    base_dir: Option<&Path>,
    rules: Arc<ModuleRules>,
    node: crate::NodeCompat,
  ) -> Result<Self, String> {
    let dir = match base_dir {
      Some(d) => d,
      None => main
        .parent()
        .ok_or_else(|| format!("{}: no directory", main.display()))?,
    };
    let root = dir
      .canonicalize()
      .map_err(|e| format!("{}: {e}", dir.display()))?;
    if !main.starts_with(&root) {
      return Err(format!(
        "main {} is not inside base_dir {}",
        main.display(),
        root.display()
      ));
    }
    Ok(Loader {
      root,
      main: main.to_path_buf(),
      rules,
      node,
    })
  }

  /// The Worker's module directory (canonical): module names are relative
  /// to it.
  pub fn root(&self) -> &Path {
    &self.root
  }

  /// The canonical path of `specifier` if it is a module of this Worker.
  fn module_path(&self, specifier: &ModuleSpecifier) -> Option<PathBuf> {
    if specifier.scheme() != "file" {
      return None;
    }
    let path = specifier.to_file_path().ok()?;
    // Lexically inside first (no `..` survives URL resolution), then the
    // real path too, so a symlink cannot lead out of the directory.
    if !path.starts_with(&self.root) {
      return None;
    }
    let real = path.canonicalize().ok()?;
    (real.starts_with(&self.root) && real.is_file()).then_some(real)
  }

  /// The module name workerd gives `specifier` imported from `referrer`:
  /// a path relative to the Worker's directory, joined as a path (not a
  /// URL: `file:///x` becomes `file:/x`), `/` meaning the Worker's
  /// directory. `None` when it climbs above that directory.
  fn module_name(&self, specifier: &str, referrer: &str) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if !specifier.starts_with('/')
      && let Ok(url) = ModuleSpecifier::parse(referrer)
      && let Ok(path) = url.to_file_path()
      && let Ok(rel) = path.strip_prefix(&self.root)
      && let Some(dir) = rel.parent()
    {
      parts.extend(dir.iter().map(|c| c.to_string_lossy().into_owned()));
    }
    for part in specifier.split('/') {
      match part {
        "" | "." => {}
        ".." => {
          parts.pop()?;
        }
        p => parts.push(p.to_string()),
      }
    }
    Some(parts.join("/"))
  }
}

/// workerd's error for a name outside the Worker's module set.
fn no_such_module(name: &str) -> JsErrorBox {
  JsErrorBox::generic(format!("No such module \"{name}\"."))
}

/// workerd's error for a specifier that climbs above the Worker's
/// directory: the specifier as written, without a final period.
fn above_root(specifier: &str) -> JsErrorBox {
  JsErrorBox::generic(format!("No such module \"{specifier}\""))
}

/// deno_core turns every resolution error into a `TypeError`; workerd
/// throws a plain `Error`. A refused import therefore resolves to a module
/// of this scheme (the message hex-encoded), whose evaluation throws it.
const REFUSED: &str = "cellhost-refused";

fn refused(e: JsErrorBox) -> ModuleSpecifier {
  let hex: String = e.to_string().bytes().map(|b| format!("{b:02x}")).collect();
  ModuleSpecifier::parse(&format!("{REFUSED}:{hex}")).expect("hex is a valid opaque path")
}

fn refused_source(specifier: &ModuleSpecifier) -> Option<String> {
  let hex = specifier
    .as_str()
    .strip_prefix(REFUSED)?
    .strip_prefix(':')?;
  let bytes: Vec<u8> = (0..hex.len() / 2)
    .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
    .collect::<Option<_>>()?;
  let msg = serde_json::to_string(&String::from_utf8_lossy(&bytes)).ok()?;
  Some(format!("throw new Error({msg});"))
}

impl ModuleLoader for Loader {
  fn resolve(
    &self,
    specifier: &str,
    referrer: &str,
    kind: ResolutionKind,
  ) -> Result<ModuleSpecifier, JsErrorBox> {
    if let Some(node) = crate::node::resolve(specifier, referrer, self.node) {
      return Ok(node.unwrap_or_else(refused));
    }
    if BUILTINS.iter().any(|(n, _)| *n == specifier) {
      return ModuleSpecifier::parse(specifier).map_err(JsErrorBox::from_err);
    }
    // cloudflare:node lives with node:http's server, whose port table it
    // reads (cellhost_node's `_cloudflare_node`).
    if specifier == "cloudflare:node" {
      return Ok(ModuleSpecifier::parse("cellhost-node:_cloudflare_node").expect("valid"));
    }
    if specifier.starts_with("cloudflare:") {
      return Err(JsErrorBox::type_error(format!(
        "Cannot import \"{specifier}\": this Workers module is not supported by cellhost yet"
      )));
    }
    // A non-JavaScript module's wrapper importing its value.
    if specifier.strip_suffix(VALUE_QUERY) == Some(referrer)
      && let Ok(url) = ModuleSpecifier::parse(specifier)
      && self.module_path(&url).is_some()
    {
      return Ok(url);
    }
    // The entry itself, as the host names it (an absolute file URL).
    if matches!(kind, ResolutionKind::MainModule)
      && let Ok(url) = ModuleSpecifier::parse(specifier)
      && self.module_path(&url).is_some()
    {
      return Ok(url);
    }
    Ok(
      self
        .resolve_module(specifier, referrer)
        .unwrap_or_else(refused),
    )
  }

  fn load(
    &self,
    specifier: &ModuleSpecifier,
    _referrer: Option<&ModuleLoadReferrer>,
    options: ModuleLoadOptions,
  ) -> ModuleLoadResponse {
    ModuleLoadResponse::Sync(self.load_sync(specifier, options.requested_module_type))
  }
}

impl Loader {
  /// One of the Worker's modules, or workerd's error.
  fn resolve_module(&self, specifier: &str, referrer: &str) -> Result<ModuleSpecifier, JsErrorBox> {
    // wrangler's `**/*.wasm?module` rule: the file is the `.wasm` one.
    let specifier = (specifier.strip_suffix("?module"))
      .filter(|s| s.ends_with(".wasm"))
      .unwrap_or(specifier);
    let name = self
      .module_name(specifier, referrer)
      .ok_or_else(|| above_root(specifier))?;
    let url =
      ModuleSpecifier::from_file_path(self.root.join(&name)).map_err(|_| no_such_module(&name))?;
    if name.is_empty() || self.module_path(&url).is_none() {
      return Err(no_such_module(&name));
    }
    Ok(url)
  }

  fn load_sync(
    &self,
    specifier: &ModuleSpecifier,
    requested: RequestedModuleType,
  ) -> Result<ModuleSource, JsErrorBox> {
    let js = |code: String| {
      ModuleSource::new(
        ModuleType::JavaScript,
        ModuleSourceCode::String(code.into()),
        specifier,
        None,
      )
    };
    if let Some(code) = builtin_source(specifier.as_str()) {
      return Ok(js(code));
    }
    if let Some(code) = refused_source(specifier) {
      return Ok(js(code));
    }
    if let Some(code) = crate::node::wrapper_source(specifier) {
      return Ok(js(code));
    }
    // Checked again here: the file may have changed since it resolved.
    let rel = |p: &Path| {
      p.strip_prefix(&self.root)
        .ok()
        .map(|r| r.to_string_lossy().into_owned())
    };
    let path = self.module_path(specifier).ok_or_else(|| {
      let name = (specifier.to_file_path().ok())
        .and_then(|p| rel(&p))
        .unwrap_or_else(|| specifier.to_string());
      no_such_module(&name)
    })?;
    let name = rel(&path).unwrap_or_default();
    let kind = if path == self.main {
      Some(ModuleKind::EsModule)
    } else {
      self.rules.kind_of(&name)
    };
    let read_error =
      |e: std::io::Error| JsErrorBox::generic(format!("Cannot load module {name}: {e}"));
    if let RequestedModuleType::Other(ty) = &requested {
      // The value of a non-JavaScript module, for its own wrapper.
      if kind.and_then(ModuleKind::value_type) != Some(ty.as_ref()) {
        return Err(no_such_module(&name));
      }
      let bytes = std::fs::read(&path).map_err(read_error)?;
      return Ok(ModuleSource::new(
        ModuleType::Other(ty.clone()),
        ModuleSourceCode::Bytes(bytes.into_boxed_slice().into()),
        specifier,
        None,
      ));
    }
    match kind {
      Some(ModuleKind::EsModule) => Ok(js(std::fs::read_to_string(&path).map_err(read_error)?)),
      Some(ModuleKind::CommonJs) => Err(JsErrorBox::generic(format!(
        "Cannot load module {name}: CommonJS modules (module type CommonJS) are not supported by cellhost yet"
      ))),
      Some(kind) => {
        let ty = kind.value_type().expect("not JavaScript");
        // Its own URL with a query: a module of its own in deno_core's map.
        let url = format!("{specifier}{VALUE_QUERY}");
        let url = serde_json::to_string(&url).expect("a string");
        Ok(js(format!(
          "import value from {url} with {{ type: \"{ty}\" }};\nexport default value;\n"
        )))
      }
      None => Err(JsErrorBox::generic(format!(
        "No module rule matches \"{name}\": give it a type with [[rules]] (ESModule, CommonJS, CompiledWasm, Text or Data)"
      ))),
    }
  }
}

/// Whether an import attribute is the loader's own: a non-JavaScript
/// module's wrapper importing its value from itself.
pub fn is_value_import(
  attributes: &std::collections::HashMap<String, String>,
  referrer: &str,
  specifier: &str,
) -> bool {
  attributes.len() == 1
    && attributes
      .get("type")
      .is_some_and(|t| ModuleKind::from_value_type(t).is_some())
    && specifier.strip_suffix(VALUE_QUERY) == Some(referrer)
}

/// What a wrapper appends to its own URL to import its value.
const VALUE_QUERY: &str = "?cellhost-value";

#[cfg(test)]
mod tests {
  use super::*;

  fn fixture() -> (PathBuf, Loader) {
    let base = std::env::temp_dir().join(format!("cellhost-loader-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let app = base.join("app");
    std::fs::create_dir_all(app.join("lib")).unwrap();
    std::fs::write(app.join("worker.js"), "export default {}").unwrap();
    std::fs::write(app.join("lib/a.js"), "export const a = 1").unwrap();
    std::fs::write(base.join("secret.js"), "export const s = 1").unwrap();
    std::os::unix::fs::symlink(base.join("secret.js"), app.join("link.js")).unwrap();
    let main = app.join("worker.js").canonicalize().unwrap();
    let loader = Loader::new(&main, None, Default::default(), Default::default()).unwrap();
    (base, loader)
  }

  #[test]
  fn only_the_workers_own_files_resolve() {
    let (base, l) = fixture();
    let file = |p: &str| {
      ModuleSpecifier::from_file_path(base.join(p).canonicalize().unwrap())
        .unwrap()
        .to_string()
    };
    let (main, a) = (file("app/worker.js"), file("app/lib/a.js"));
    let kind = ResolutionKind::DynamicImport;
    assert!(l.resolve("./lib/a.js", &main, kind).is_ok());
    assert!(l.resolve("/lib/a.js", &main, kind).is_ok());
    assert!(l.resolve("cloudflare:workers", &main, kind).is_ok());
    assert!(l.resolve("../worker.js", &a, kind).is_ok());
    for (bad, from, msg) in [
      ("../secret.js", &main, "No such module \"../secret.js\""),
      (
        "./lib/../../secret.js",
        &main,
        "No such module \"./lib/../../secret.js\"",
      ),
      ("./link.js", &main, "No such module \"link.js\"."),
      (
        "file:///etc/hostname",
        &main,
        "No such module \"file:/etc/hostname\".",
      ),
      (
        "file:///etc/hostname",
        &a,
        "No such module \"lib/file:/etc/hostname\".",
      ),
      ("/etc/hostname", &main, "No such module \"etc/hostname\"."),
      ("./missing.js", &a, "No such module \"lib/missing.js\"."),
      (
        "ext:cellhost/99_main.js",
        &main,
        "No such module \"ext:cellhost/99_main.js\".",
      ),
      (
        "https://example.com/x.js",
        &main,
        "No such module \"https:/example.com/x.js\".",
      ),
      ("./lib", &main, "No such module \"lib\"."),
    ] {
      let e = l.resolve_module(bad, from).expect_err(bad);
      use deno_error::JsErrorClass;
      assert_eq!(
        (e.get_class().as_ref(), e.to_string()),
        ("Error", msg.to_string()),
        "{bad}"
      );
      let stand_in = l.resolve(bad, from, kind).unwrap();
      let code = refused_source(&stand_in).unwrap();
      assert_eq!(
        code,
        format!("throw new Error({});", serde_json::to_string(msg).unwrap())
      );
    }
    let outside = ModuleSpecifier::from_file_path(base.join("secret.js")).unwrap();
    assert!(
      l.load_sync(&outside, RequestedModuleType::None).is_err(),
      "load refuses what resolve refuses"
    );
    let _ = std::fs::remove_dir_all(base);
  }
}

//! Which `node:*` modules a Worker may import, as workerd 1.20261117 lists
//! them for `nodejs_compat`; each is served by deno_node's polyfill of the
//! same name (`cellhost-node`). Any other `node:` module fails by name.

use deno_core::ModuleSpecifier;
use deno_error::JsErrorBox;

use crate::NodeCompat;

/// workerd's supported built-ins (sub-paths included).
pub const MODULES: &[&str] = &[
  "assert",
  "assert/strict",
  "async_hooks",
  "buffer",
  "crypto",
  "diagnostics_channel",
  "dns",
  "dns/promises",
  "events",
  "fs",
  "fs/promises",
  "http",
  "https",
  "module",
  "net",
  "os",
  "path",
  "path/posix",
  "path/win32",
  "perf_hooks",
  "process",
  "punycode",
  "querystring",
  "readline",
  "readline/promises",
  "stream",
  "stream/consumers",
  "stream/promises",
  "stream/web",
  "string_decoder",
  "timers",
  "timers/promises",
  "tls",
  "url",
  "util",
  "util/types",
  "worker_threads",
  "zlib",
];

/// The scheme of a module served with workerd's export names
/// (`cellhost_node::wrap`).
const WRAPPED: &str = "cellhost-node:";
/// deno_node's module, re-exported as it is, for a wrapper to import.
const RAW: &str = "cellhost-node-raw:";

/// The source of a wrapper module, or of a raw re-export, for the loader.
pub fn wrapper_source(specifier: &ModuleSpecifier) -> Option<String> {
  let s = specifier.as_str();
  if let Some(name) = s.strip_prefix(RAW) {
    return Some(format!(
      "export * from \"node:{name}\";\nexport {{ default }} from \"node:{name}\";\n"
    ));
  }
  cellhost_node::wrap::wrapper(s.strip_prefix(WRAPPED)?).map(str::to_string)
}

/// The module a Worker's import names, if it names a Node.js built-in:
/// `node:x`, or a bare `x` from the list when `nodejs_compat` is on (as
/// workerd resolves them). `None`: not a Node.js import.
pub fn resolve(
  specifier: &str,
  referrer: &str,
  compat: NodeCompat,
) -> Option<Result<ModuleSpecifier, JsErrorBox>> {
  // A wrapper's own import of the module it wraps goes through a plain
  // re-export (`RAW`): deno_core registers a synthetic module (deno_node's
  // node:util, node:url, ...) under the specifier of the module importing
  // it, which must not be the wrapper.
  if referrer.starts_with(RAW) && specifier.starts_with("node:") {
    return Some(ModuleSpecifier::parse(specifier).map_err(JsErrorBox::from_err));
  }
  // A wrapper may import another wrapper (node:dns/promises shares
  // node:dns's instance).
  if referrer.starts_with(WRAPPED) && specifier.starts_with(WRAPPED) {
    return Some(ModuleSpecifier::parse(specifier).map_err(JsErrorBox::from_err));
  }
  if referrer.starts_with(WRAPPED)
    && let Some(name) = specifier.strip_prefix("node:")
  {
    return Some(ModuleSpecifier::parse(&format!("{RAW}{name}")).map_err(JsErrorBox::from_err));
  }
  let (name, prefixed) = match specifier.strip_prefix("node:") {
    Some(name) => (name, true),
    None if compat != NodeCompat::Off && MODULES.contains(&specifier) => (specifier, false),
    None => return None,
  };
  // node:fs is workerd's in-memory file system (cellhost_node's own
  // modules, not deno_node's), from 2025-09-15 or by flag.
  let is_fs = matches!(name, "fs" | "fs/promises");
  if is_fs && let NodeCompat::On { fs: true, .. } = compat {
    return Some(Ok(
      ModuleSpecifier::parse(&format!("node:cellhost/{name}")).expect("valid"),
    ));
  }
  let allowed = match compat {
    NodeCompat::On { .. } if is_fs => false,
    NodeCompat::On { .. } => MODULES.contains(&name),
    NodeCompat::AsyncLocalStorage => name == "async_hooks",
    NodeCompat::Off => false,
  };
  if allowed {
    let scheme = match cellhost_node::wrap::wrapper(name) {
      Some(_) => WRAPPED,
      None => "node:",
    };
    return Some(Ok(
      ModuleSpecifier::parse(&format!("{scheme}{name}")).expect("valid"),
    ));
  }
  let why = match compat {
    NodeCompat::Off => "Node.js built-in modules need the `nodejs_compat` compatibility flag",
    NodeCompat::AsyncLocalStorage => {
      "`nodejs_als` gives only node:async_hooks; `nodejs_compat` gives the rest"
    }
    NodeCompat::On { .. } if is_fs => {
      "node:fs needs a compatibility date from 2025-09-15 or the `enable_nodejs_fs_module` flag"
    }
    NodeCompat::On { .. } => "this Node.js module is not supported by workerd or cellhost",
  };
  let shown = if prefixed {
    specifier.to_string()
  } else {
    format!("node:{name}")
  };
  Some(Err(JsErrorBox::generic(format!(
    "No such module \"{shown}\": {why}"
  ))))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn node_imports_by_flag() {
    let on = NodeCompat::On {
      populate_env: false,
      fs: true,
    };
    let resolve = |s: &str, c| resolve(s, "file:///w.js", c);
    assert_eq!(
      resolve("node:buffer", on).unwrap().unwrap().as_str(),
      "node:buffer"
    );
    assert_eq!(
      resolve("path", on).unwrap().unwrap().as_str(),
      "cellhost-node:path"
    );
    assert_eq!(
      super::resolve("node:path", "cellhost-node:path", on)
        .unwrap()
        .unwrap()
        .as_str(),
      "cellhost-node-raw:path"
    );
    assert_eq!(
      super::resolve("node:path", "cellhost-node-raw:path", on)
        .unwrap()
        .unwrap()
        .as_str(),
      "node:path"
    );
    assert!(resolve("lodash", on).is_none());
    assert!(resolve("path", NodeCompat::Off).is_none());
    let e = resolve("node:child_process", on).unwrap().unwrap_err();
    assert!(e.to_string().contains("node:child_process"), "{e}");
    let e = resolve("node:buffer", NodeCompat::Off)
      .unwrap()
      .unwrap_err();
    assert!(e.to_string().contains("nodejs_compat"), "{e}");
    assert!(
      resolve("node:async_hooks", NodeCompat::AsyncLocalStorage)
        .unwrap()
        .is_ok()
    );
    assert!(
      resolve("node:buffer", NodeCompat::AsyncLocalStorage)
        .unwrap()
        .is_err()
    );
  }
}

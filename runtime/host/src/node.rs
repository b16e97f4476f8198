//! Which `node:*` modules a Worker may import, as workerd 1.20261117 lists
//! them for `nodejs_compat`; each is served by deno_node's polyfill of the
//! same name, or by cellhost-node's wrapper or stub of it (`cellhost_node::
//! wrap`, `cellhost_node::stub`). Any other `node:` module fails by name.

use deno_core::ModuleSpecifier;
use deno_error::JsErrorBox;

use crate::NodeCompat;

/// workerd's supported built-ins (sub-paths included).
pub const MODULES: &[&str] = &[
  "assert",
  "assert/strict",
  "async_hooks",
  "buffer",
  "child_process",
  "cluster",
  "console",
  "constants",
  "crypto",
  "dgram",
  "diagnostics_channel",
  "dns",
  "dns/promises",
  "domain",
  "events",
  "fs",
  "fs/promises",
  "http",
  "http2",
  "https",
  "inspector",
  "inspector/promises",
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
  "repl",
  "sqlite",
  "stream",
  "stream/consumers",
  "stream/promises",
  "stream/web",
  "string_decoder",
  "sys",
  "test",
  "timers",
  "timers/promises",
  "tls",
  "trace_events",
  "tty",
  "url",
  "util",
  "util/types",
  "v8",
  "vm",
  "wasi",
  "worker_threads",
  "zlib",
];

/// Built-ins a Worker names with the `node:` prefix only, as in Node.js (a
/// bare `test` or `sqlite` is a package).
const PREFIX_ONLY: &[&str] = &["sqlite", "test"];

/// Modules workerd gives with `nodejs_compat` only from a date, or by
/// their `enable_nodejs_<name>_module` flag (`disable_…` takes them away;
/// `cellhost_compat` knows the dates): (module, flag). A bit of
/// `NodeCompat::On::gated` each.
pub const GATED: &[(&str, &str)] = &[
  ("http", "enable_nodejs_http_modules"),
  ("https", "enable_nodejs_http_modules"),
  ("os", "enable_nodejs_os_module"),
  ("console", "enable_nodejs_console_module"),
  ("punycode", "enable_nodejs_punycode_module"),
  ("perf_hooks", "enable_nodejs_perf_hooks_module"),
  ("readline", "enable_nodejs_readline_module"),
  ("readline/promises", "enable_nodejs_readline_module"),
  ("worker_threads", "enable_nodejs_worker_threads_module"),
  ("http2", "enable_nodejs_http2_module"),
  ("vm", "enable_nodejs_vm_module"),
  ("cluster", "enable_nodejs_cluster_module"),
  ("domain", "enable_nodejs_domain_module"),
  ("trace_events", "enable_nodejs_trace_events_module"),
  ("wasi", "enable_nodejs_wasi_module"),
  ("dgram", "enable_nodejs_dgram_module"),
  ("inspector", "enable_nodejs_inspector_module"),
  ("inspector/promises", "enable_nodejs_inspector_module"),
  ("sqlite", "enable_nodejs_sqlite_module"),
  ("child_process", "enable_nodejs_child_process_module"),
  ("repl", "enable_nodejs_repl_module"),
  ("tty", "enable_nodejs_tty_module"),
  ("v8", "enable_nodejs_v8_module"),
];

/// Every gated module there.
pub const ALL_GATED: u32 = (1 << GATED.len()) - 1;

/// The gated modules the compatibility flags give (`GATED`).
pub fn gated(compat: &cellhost_compat::Resolved) -> u32 {
  (GATED.iter().enumerate())
    .filter(|(_, (_, flag))| compat.on(flag))
    .fold(0, |set, (i, _)| set | 1 << i)
}

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
  let name = s.strip_prefix(WRAPPED)?;
  if name == "module" {
    return Some(cellhost_node::stub::module_source(MODULES, |m| {
      matches!(m, "fs" | "fs/promises").then(|| format!("node:cellhost/{m}"))
    }));
  }
  cellhost_node::wrap::wrapper(name).map(str::to_string)
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
    None
      if compat != NodeCompat::Off
        && MODULES.contains(&specifier)
        && !PREFIX_ONLY.contains(&specifier) =>
    {
      (specifier, false)
    }
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
  let gate = GATED.iter().position(|(m, _)| *m == name);
  let gated_off = match (compat, gate) {
    (NodeCompat::On { gated, .. }, Some(i)) => gated & (1 << i) == 0,
    _ => false,
  };
  let allowed = match compat {
    NodeCompat::On { .. } if is_fs || gated_off => false,
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
    NodeCompat::Off => {
      "Node.js built-in modules need the `nodejs_compat` compatibility flag".to_string()
    }
    NodeCompat::AsyncLocalStorage => {
      "`nodejs_als` gives only node:async_hooks; `nodejs_compat` gives the rest".to_string()
    }
    NodeCompat::On { .. } if is_fs => {
      "node:fs needs a compatibility date from 2025-09-15 or the `enable_nodejs_fs_module` flag"
        .into()
    }
    NodeCompat::On { .. } if gated_off => {
      let (m, flag) = GATED[gate.expect("gated")];
      let since = cellhost_compat::since(flag).unwrap_or("?");
      format!("node:{m} needs a compatibility date from {since} or the `{flag}` flag")
    }
    NodeCompat::On { .. } => "this Node.js module is not supported by workerd or cellhost".into(),
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
      gated: ALL_GATED,
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
    let e = resolve("node:sea", on).unwrap().unwrap_err();
    assert!(e.to_string().contains("node:sea"), "{e}");
    assert_eq!(
      resolve("node:child_process", on).unwrap().unwrap().as_str(),
      "cellhost-node:child_process"
    );
    assert_eq!(
      resolve("node:test", on).unwrap().unwrap().as_str(),
      "cellhost-node:test"
    );
    assert!(resolve("test", on).is_none());
    let early = NodeCompat::On {
      populate_env: false,
      fs: true,
      gated: gated(&cellhost_compat::resolve(
        Some("2025-11-01"),
        &["nodejs_compat".into(), "enable_nodejs_tty_module".into()],
      )),
    };
    assert!(resolve("node:vm", early).unwrap().is_ok());
    assert!(resolve("node:tty", early).unwrap().is_ok());
    let e = resolve("node:v8", early).unwrap().unwrap_err();
    assert!(e.to_string().contains("enable_nodejs_v8_module"), "{e}");
    assert!(e.to_string().contains("from 2026-03-17"), "{e}");
    // Modules deno_node serves are gated too: node:os from 2025-09-15.
    assert!(resolve("node:os", early).unwrap().is_ok());
    let older = NodeCompat::On {
      populate_env: false,
      fs: false,
      gated: gated(&cellhost_compat::resolve(
        Some("2025-01-01"),
        &["nodejs_compat".into()],
      )),
    };
    let e = resolve("node:os", older).unwrap().unwrap_err();
    assert!(e.to_string().contains("`enable_nodejs_os_module`"), "{e}");
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

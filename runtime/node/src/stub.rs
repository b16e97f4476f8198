//! Node.js modules workerd provides with their names but not their function
//! (a Worker starts no processes, opens no terminal, compiles no code at run
//! time): importing them works, and a call throws what workerd throws, most
//! often ERR_METHOD_NOT_IMPLEMENTED. Written for cellhost after workerd
//! 1.20261117's behaviour (`js/stub/*.js`); served like wrappers
//! (`crate::wrap`). Names starting with `_` are their shared helpers, which
//! no Worker can import.

/// (module name without `node:`, source).
pub const STUBS: &[(&str, &str)] = &[
  ("_errors", include_str!("../js/stub/_errors.js")),
  ("_names", include_str!("../js/stub/_names.js")),
  ("child_process", include_str!("../js/stub/child_process.js")),
  ("cluster", include_str!("../js/stub/cluster.js")),
  ("console", include_str!("../js/stub/console.js")),
  ("constants", include_str!("../js/stub/constants.js")),
  ("dgram", include_str!("../js/stub/dgram.js")),
  ("domain", include_str!("../js/stub/domain.js")),
  ("http2", include_str!("../js/stub/http2.js")),
  ("inspector", include_str!("../js/stub/inspector.js")),
  (
    "inspector/promises",
    include_str!("../js/stub/inspector_promises.js"),
  ),
  ("module", include_str!("../js/stub/module.js")),
  ("repl", include_str!("../js/stub/repl.js")),
  ("sqlite", include_str!("../js/stub/sqlite.js")),
  ("sys", include_str!("../js/stub/sys.js")),
  ("test", include_str!("../js/stub/test.js")),
  ("trace_events", include_str!("../js/stub/trace_events.js")),
  ("tty", include_str!("../js/stub/tty.js")),
  ("v8", include_str!("../js/stub/v8.js")),
  ("vm", include_str!("../js/stub/vm.js")),
  ("wasi", include_str!("../js/stub/wasi.js")),
];

/// node:module's source: `require()` from `createRequire` is synchronous, so
/// the module imports every built-in a Worker may import (`modules`) up
/// front and looks them up in `loaded`. `fs`: the specifier a Worker's
/// import of node:fs resolves to.
pub fn module_source(modules: &[&str], fs: impl Fn(&str) -> Option<String>) -> String {
  let mut imports = String::new();
  let mut table = String::from("const loaded = {\n");
  for (i, name) in modules.iter().filter(|m| **m != "module").enumerate() {
    let specifier = match fs(name) {
      Some(s) => s,
      None if crate::wrap::wrapper(name).is_some() => format!("cellhost-node:{name}"),
      None => format!("node:{name}"),
    };
    imports.push_str(&format!("import * as m{i} from {specifier:?};\n"));
    table.push_str(&format!("  {name:?}: m{i},\n"));
  }
  table.push_str("};\n");
  let body = crate::wrap::wrapper("module").expect("node:module is a stub");
  format!("{imports}{table}{body}")
}

//! Node.js compatibility (`nodejs_compat`): Deno's `deno_node` polyfills and
//! the extensions they are built on, wired with what a Worker may do and
//! nothing more.
//!
//! The polyfills were written for Deno's runtime: they call ops that reach
//! the host (files, processes, signals, listeners, the environment) and name
//! a global `Deno`. Here every op that reaches the host is disabled (it
//! throws when called; the snapshot and the isolates still register the
//! same op table), and the polyfills' `Deno` is a module-scoped stand-in
//! (`js/deno.js`) injected when the snapshot is built (`transpile.rs`), so
//! no `Deno` global exists for a Worker to find.

use std::collections::HashSet;

use deno_core::{Extension, OpDecl, v8};

pub mod bundle;
pub mod stub;
#[cfg(feature = "build")]
pub mod transpile;
pub mod wrap;

/// Ops deno_node's polyfills import that live in Deno's own runtime crate
/// (not in deno_node): each throws, naming what a Worker lacks, except the
/// terminal's colour depth, which is 1 (no colours: no terminal).
macro_rules! unsupported_ops {
  ($($op:ident: $what:literal),* $(,)?) => {
    $(
      #[deno_core::op2(fast)]
      fn $op() -> Result<(), deno_error::JsErrorBox> {
        Err(deno_error::JsErrorBox::generic(concat!($what, " is not supported in a Worker (cellhost)")))
      }
    )*
  };
}

unsupported_ops!(
  op_current_thread_cpu_usage: "process.threadCpuUsage()",
  op_brotli_compress: "Brotli (node:zlib)",
  op_brotli_compress_async: "Brotli (node:zlib)",
  op_brotli_compress_stream: "Brotli (node:zlib)",
  op_brotli_compress_stream_end: "Brotli (node:zlib)",
  op_brotli_decompress: "Brotli (node:zlib)",
  op_brotli_decompress_async: "Brotli (node:zlib)",
  op_brotli_decompress_stream: "Brotli (node:zlib)",
  op_brotli_decompress_stream_end: "Brotli (node:zlib)",
  op_create_brotli_compress: "Brotli (node:zlib)",
  op_create_brotli_decompress: "Brotli (node:zlib)",
  op_http_notify_serving: "Serving HTTP from node:http",
  op_http_serve_address_override: "Serving HTTP from node:http",
  op_napi_open: "Native addons",
);

#[deno_core::op2(fast)]
fn op_bootstrap_color_depth() -> u32 {
  1
}

/// Lets the runtime compile one of its own lazily loaded scripts while a
/// Worker serves events: V8 counts compiling a script as a function as code
/// generation from strings, which a Worker may not do then (the polyfills'
/// script loads go through `internals.cellhostLoad` in js/deno.js, which
/// calls this around each). Returns the previous setting, to be put back. Not reachable by a Worker: ops are not on its global scope.
#[deno_core::op2(fast)]
fn op_node_allow_codegen(scope: &mut v8::PinScope, allow: bool) -> bool {
  let context = scope.get_current_context();
  let was = context.is_code_generation_from_strings_allowed();
  context.set_allow_generation_from_strings(allow);
  was
}

deno_core::extension!(
  cellhost_node,
  deps = [deno_web, deno_node],
  ops = [
    op_current_thread_cpu_usage,
    op_brotli_compress,
    op_brotli_compress_async,
    op_brotli_compress_stream,
    op_brotli_compress_stream_end,
    op_brotli_decompress,
    op_brotli_decompress_async,
    op_brotli_decompress_stream,
    op_brotli_decompress_stream_end,
    op_create_brotli_compress,
    op_create_brotli_decompress,
    op_http_notify_serving,
    op_http_serve_address_override,
    op_napi_open,
    op_bootstrap_color_depth,
    op_node_allow_codegen,
    bundle::op_node_bundle_names,
    bundle::op_node_bundle_read,
  ],
  esm_entry_point = "ext:cellhost_node/deno.js",
  esm = [dir "js", "deno.js"],
  lazy_loaded_esm = [
    dir "js",
    "globals.js",
    "ext:runtime/98_global_scope_shared.js" = "global_scope_shared.js",
    // In place of deno_node's synthetic modules of these names (dropped in
    // `extensions`): workerd's export names (see src/wrap.rs).
    "node:util" = "wrap/util.js",
    "node:url" = "wrap/url.js",
    "node:worker_threads" = "wrap/worker_threads.js",
    // node:fs, workerd's in-memory file system (node:fs resolves here:
    // runtime/host/src/node.rs; a Worker cannot name these).
    "node:cellhost/fs" = "fs/node_fs.js",
    "node:cellhost/fs/promises" = "fs/node_fs_promises.js",
    // What the stub modules (src/stub.rs) need of deno_node's internals.
    "node:cellhost/internals" = "stub/_internals.js",
    "fs/vfs.js",
    "fs/callback.js",
    "fs/core.js",
    "fs/cp.js",
    "fs/nodes.js",
    "fs/errors.js",
    "fs/glob.js",
    "fs/promises.js",
    "fs/streams.js",
    "fs/sync.js",
    "fs/utils.js",
  ],
  lazy_loaded_js = [
    dir "js",
    "ext:deno_telemetry/util.ts" = "telemetry_util.js",
    "ext:deno_telemetry/telemetry.ts" = "telemetry.js",
  ],
);

/// No npm packages: a Worker's bundle carries its dependencies, so the
/// npm resolution deno_node is generic over answers "not an npm package".
pub struct NoNpm;

impl node_resolver::InNpmPackageChecker for NoNpm {
  fn in_npm_package(&self, _: &deno_core::url::Url) -> bool {
    false
  }
}

impl node_resolver::NpmPackageFolderResolver for NoNpm {
  fn resolve_package_folder_from_package(
    &self,
    specifier: &str,
    referrer: &node_resolver::UrlOrPathRef,
  ) -> Result<std::path::PathBuf, node_resolver::errors::PackageFolderResolveError> {
    Err(
      node_resolver::errors::PackageNotFoundError {
        package_name: specifier.to_string(),
        referrer: referrer.display(),
        referrer_extra: None,
      }
      .into(),
    )
  }

  fn resolve_types_package_folder(
    &self,
    _: &str,
    _: Option<&deno_semver::Version>,
    _: Option<&node_resolver::UrlOrPathRef>,
  ) -> Option<std::path::PathBuf> {
    None
  }
}

type Sys = sys_traits::impls::RealSys;

/// The extensions, in registration order (after deno_web and before the
/// `cellhost` extension). The snapshot and every isolate call this.
///
/// deno_core applies every extension's op middleware to every op of the
/// runtime, so the denials are one middleware (on `cellhost_node`) that
/// knows the denied ops by name: all of deno_io, deno_fs, deno_os and
/// deno_process (files, terminals, the environment, processes, signals,
/// exit), and deno_node's that reach the host (everything not in `ALLOWED`).
pub fn extensions() -> Vec<Extension> {
  let fs: deno_fs::FileSystemRc = std::rc::Rc::new(deno_fs::RealFs);
  let mut io = deno_io::deno_io::init(None);
  // Its middleware swaps console output to its own stdout resource, which
  // a Worker does not have; console output stays deno_core's.
  io.middleware_fn = None;
  let host = [
    io,
    deno_fs::deno_fs::init(fs.clone()),
    deno_os::deno_os::init(None),
    deno_process::deno_process::init(None),
  ];
  let mut denied: HashSet<&'static str> = host
    .iter()
    .flat_map(|e| e.ops.iter().map(|o| o.name))
    .collect();
  let mut node = deno_node::deno_node::init::<NoNpm, NoNpm, Sys>(None, fs);
  // node:util, node:url and node:worker_threads are cellhost_node's own
  // modules (workerd's export names); deno_core would link a synthetic
  // module of the same name ahead of them.
  node.synthetic_esm_modules = node
    .synthetic_esm_modules
    .iter()
    .filter(|(name, _)| !matches!(*name, "node:util" | "node:url" | "node:worker_threads"))
    .copied()
    .collect::<Vec<_>>()
    .into();
  denied.extend(node.ops.iter().map(|o| o.name).filter(|n| !allowed(n)));
  let mut glue = cellhost_node::init();
  glue.middleware_fn = Some(Box::new(move |op: OpDecl| match op.name {
    "op_node_process_set_title" => op.with_implementation_from(&op_cellhost_set_title()),
    "op_get_env_no_permission_check" => op.with_implementation_from(&op_cellhost_no_env()),
    _ if denied.contains(op.name) => op.disable(),
    "op_node_call_is_from_dependency" => {
      op.with_implementation_from(&op_cellhost_from_dependency())
    }
    "op_node_in_npm_package" => op.with_implementation_from(&op_cellhost_in_npm_package()),
    _ => op,
  }));
  let mut all: Vec<Extension> = host.into();
  all.extend([deno_node_crypto::deno_node_crypto::init(), node, glue]);
  all
}

/// deno_node asks its npm resolver whether the code calling a deprecated
/// Node API lives in a dependency (then it stays quiet); there is no
/// resolver here, and deno_node's op would panic looking for it, aborting
/// the process. A Worker's bundle is all one program, and workerd's
/// `util.deprecate` never warns: every caller counts as a dependency.
#[deno_core::op2(fast)]
fn op_cellhost_from_dependency() -> bool {
  true
}

/// `process.title = x` names the Worker's process object only (workerd's
/// title is "workerd"); deno_node's op would rename the host's process.
#[deno_core::op2(fast)]
fn op_cellhost_set_title(#[string] _title: &str) {}

/// The polyfills read the host's environment here and there (TERM for
/// readline, proxy variables for agents, console colours); a Worker has
/// none of it (its `process.env` is its bindings), so every variable is
/// unset. deno_os's op was disabled, and threw where they read it.
#[deno_core::op2]
#[string]
fn op_cellhost_no_env(#[string] _key: &str) -> Option<String> {
  None
}

/// No path is inside an npm package (see `NoNpm`); deno_node's op would
/// panic looking for its resolver.
#[deno_core::op2(fast)]
fn op_cellhost_in_npm_package(#[string] _path: &str) -> bool {
  false
}

/// The deno_node ops a Worker's polyfills may call: pure computation
/// (buffers, encodings, IDNA, zlib checksums, V8 serialization, block
/// lists, socket-address parsing), async ids, TLS over a socket the Worker
/// already holds, and three read-only answers (constants, error names,
/// "no inspector"). Every other op of deno_node is disabled: it reaches the
/// host (files, the resolver, processes, user ids, priorities, signals,
/// terminals, listeners, the inspector, heap snapshots, node:vm's compiler)
/// or is new to us. An op a newer deno_node adds stays disabled until it is
/// reviewed and listed here. Sorted (binary search; a test checks).
pub const ALLOWED: &[&str] = &[
  "op_blocklist_add_address",
  "op_blocklist_add_range",
  "op_blocklist_add_subnet",
  "op_blocklist_check",
  "op_blocklist_new",
  "op_inspector_enabled",
  "op_is_ascii",
  "op_is_utf8",
  "op_mark_as_untransferable",
  "op_node_buffer_compare",
  "op_node_buffer_compare_offset",
  "op_node_build_os",
  "op_node_call_is_from_dependency",
  "op_node_encoding_slice",
  "op_node_fs_constants",
  "op_node_get_first_expression",
  "op_node_get_own_non_index_properties",
  "op_node_idna_domain_to_ascii",
  "op_node_idna_domain_to_unicode",
  "op_node_idna_punycode_decode",
  "op_node_idna_punycode_encode",
  "op_node_idna_punycode_to_ascii",
  "op_node_idna_punycode_to_unicode",
  "op_node_idna_to_ascii",
  "op_node_in_npm_package",
  "op_node_new_async_id",
  "op_node_parse_env",
  "op_node_parse_shell_args",
  "op_node_strip_typescript_types",
  "op_node_sys_to_uv_error",
  "op_node_tls_handshake",
  "op_node_tls_start",
  "op_node_translate_cli_args",
  "op_node_view_has_buffer",
  "op_socket_address_get_serialization",
  "op_socket_address_parse",
  "op_stream_base_register_state",
  "op_tls_canonicalize_ipv4_address",
  "op_tls_peer_certificate",
  "op_transcode",
  "op_v8_cached_data_version_tag",
  "op_v8_gc_profiler_new",
  "op_v8_gc_profiler_start",
  "op_v8_gc_profiler_stop",
  "op_v8_get_heap_code_statistics",
  "op_v8_get_heap_statistics",
  "op_v8_get_wire_format_version",
  "op_v8_new_deserializer",
  "op_v8_new_serializer",
  "op_v8_number_of_heap_spaces",
  "op_v8_query_objects_count",
  "op_v8_read_double",
  "op_v8_read_header",
  "op_v8_read_raw_bytes",
  "op_v8_read_uint32",
  "op_v8_read_uint64",
  "op_v8_read_value",
  "op_v8_release_buffer",
  "op_v8_set_treat_array_buffer_views_as_host_objects",
  "op_v8_transfer_array_buffer",
  "op_v8_transfer_array_buffer_de",
  "op_v8_update_heap_space_statistics",
  "op_v8_write_double",
  "op_v8_write_header",
  "op_v8_write_raw_bytes",
  "op_v8_write_uint32",
  "op_v8_write_uint64",
  "op_v8_write_value",
  "op_vm_is_context",
  "op_zlib_crc32",
  "op_zlib_crc32_string",
];

pub fn allowed(name: &str) -> bool {
  ALLOWED.binary_search(&name).is_ok()
}

/// Resource ids 0, 1 and 2 are a process's stdio in Deno, and deno_node's
/// polyfills read a resource id of 0 as "no resource" (a cipher context at
/// id 0 is an unknown cipher). A Worker has no stdio: the three ids are
/// held by placeholders, so its own resources start at 3.
pub fn reserve_stdio_ids(state: &mut deno_core::OpState) {
  struct NoStdio;
  impl deno_core::Resource for NoStdio {
    fn name(&self) -> std::borrow::Cow<'_, str> {
      "noStdio".into()
    }
  }
  while state.resource_table.len() < 3 {
    state.resource_table.add(NoStdio);
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn node_ops() -> Vec<&'static str> {
    let node =
      deno_node::deno_node::init::<NoNpm, NoNpm, Sys>(None, std::rc::Rc::new(deno_fs::RealFs));
    node.ops.iter().map(|o| o.name).collect()
  }

  #[test]
  fn allow_list_is_sorted_and_names_real_ops() {
    assert!(
      ALLOWED.windows(2).all(|w| w[0] < w[1]),
      "ALLOWED must stay sorted"
    );
    let ops = node_ops();
    for name in ALLOWED {
      assert!(
        ops.contains(name),
        "{name} is not an op of this deno_node (stale entry)"
      );
    }
  }

  #[test]
  fn host_reaching_ops_stay_disabled() {
    let ops = node_ops();
    for name in [
      "op_node_process_setuid",
      "op_node_process_setgid",
      "op_node_process_set_title",
      "op_node_os_set_priority",
      "op_node_load_env_file",
      "op_homedir",
      "op_cpus",
      "op_node_os_user_info",
      "op_v8_take_heap_snapshot",
      "op_vm_compile_function",
      "op_node_getaddrinfo",
      "op_node_ipc_write_json",
      "op_node_fs_read_sync",
    ] {
      assert!(ops.contains(&name), "{name}: renamed? update this test");
      assert!(!allowed(name), "{name} reaches the host");
    }
    // Most of deno_node reaches the host; what a Worker may call is a minority.
    assert!(
      ALLOWED.len() * 2 < ops.len(),
      "{} of {} allowed",
      ALLOWED.len(),
      ops.len()
    );
  }
}

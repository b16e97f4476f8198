//! V8 isolates that run Workers.
//!
//! Each isolate thread owns one `deno_core::JsRuntime` created from the
//! startup snapshot, loads the Worker's main module once, and then answers the
//! HTTP jobs sent to its inbox. A watchdog enforces the per-request CPU limit
//! and the heap limit by terminating the isolate, which is then recycled.

mod isolate;
mod loader;
pub mod node;
mod quiet;
pub mod rules;
mod watchdog;

use std::path::PathBuf;

pub use cellhost_ext::Peers;
pub use cellhost_ext::egress::{Egress, set_policy as set_egress};
pub use cellhost_ext::{
  Body, BoxError, Forward, HttpJob, HttpReply, Job, Namespace, QueueJob, ReplyBody, ReplyStream,
  ScheduledJob,
};
pub use isolate::{IsolatePool, PoolOptions, ThreadHook};

mod snapshot {
  pub static SNAPSHOT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/CELLHOST_SNAPSHOT.bin"));
  include!(concat!(env!("OUT_DIR"), "/residual.rs"));
}

/// The two Worker formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
  /// `export default { fetch }` (or a `WorkerEntrypoint` class).
  Module,
  /// `addEventListener("fetch", ...)`, evaluated as a classic script.
  ServiceWorker,
}

/// What to run: the main module and the bindings it sees.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
  /// The Worker's name (wrangler's `name`): what its service bindings to
  /// itself name.
  pub name: String,
  /// Absolute path of the entry file.
  pub main: PathBuf,
  pub format: Format,
  /// `env` as a JSON object (vars and secrets).
  pub env: serde_json::Map<String, serde_json::Value>,
  /// Durable Object namespaces bound in `env`.
  pub durable_objects: Vec<Namespace>,
  /// Where cells keep their SQLite files.
  pub data_dir: PathBuf,
  /// `--bucket`: the node on a shared bucket that owns and replicates cells.
  pub fleet: Option<std::sync::Arc<cellhost_fleet::Fleet>>,
  /// On a fleet: calls for cells other nodes own go to them.
  pub forward: Option<std::sync::Arc<dyn cellhost_ext::Forward>>,
  /// `--pitr-days`: how long the point-in-time history of SQLite-backed
  /// objects reaches back (0: none is kept).
  pub pitr_days: f64,
  /// `eval`/`new Function` while the Worker's top level runs (workerd's
  /// `allow_eval_during_startup`); never once it serves events.
  pub eval_during_startup: bool,
  /// The module rules (wrangler's `[[rules]]` and defaults).
  pub rules: std::sync::Arc<rules::ModuleRules>,
  /// wrangler's `base_dir`: module names are relative to it (default: the
  /// entry's directory).
  pub base_dir: Option<PathBuf>,
  /// What of Node.js the compatibility flags give the Worker.
  pub node: NodeCompat,
  /// Static assets (served before the Worker by the server) and the name
  /// of their binding in `env`, if any.
  pub assets: Option<std::sync::Arc<cellhost_assets::Assets>>,
  pub assets_binding: Option<String>,
  /// KV namespaces: (binding, namespace id), stored under `data_dir/kv`.
  pub kv_namespaces: Vec<(String, String)>,
  /// R2 buckets by binding name (each a local directory or a bucket URL).
  pub r2_buckets: Option<std::sync::Arc<cellhost_r2::R2Buckets>>,
  /// D1 databases: (binding, database id), stored under `data_dir/d1`.
  pub d1_databases: Vec<(String, String)>,
  /// Queue producers: (binding, queue name).
  pub queue_producers: Vec<(String, String)>,
  /// The queue store, when the Worker produces or consumes messages.
  pub queues: Option<std::sync::Arc<cellhost_queues::QueueStore>>,
  /// Service bindings (to this Worker's own entrypoints, or to another
  /// Worker of the process).
  pub services: Vec<ServiceBinding>,
  /// The process's Workers by name, for service bindings between them.
  pub peers: Option<cellhost_ext::Peers>,
  /// `ctx.exports` (on from 2025-11-17, or by `enable_ctx_exports`).
  pub ctx_exports: bool,
  /// workerd's compatibility flags as the date and the named flags set
  /// them (`Cloudflare.compatibilityFlags`).
  pub compat: cellhost_compat::Resolved,
  /// `cellhost node`: the deployed version this pool serves, so a later
  /// version's pool can take its cells over in the same process.
  pub generation: Option<Generation>,
}

/// A pool's place among the versions one process serves.
#[derive(Clone)]
pub struct Generation {
  pub version: String,
  /// The pool this one follows (`None`: it is the first).
  pub after: Option<IsolatePool>,
}

impl std::fmt::Debug for Generation {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_struct("Generation")
      .field("version", &self.version)
      .finish_non_exhaustive()
  }
}

/// `services = [{ binding, service = <this Worker>, entrypoint, props }]`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServiceBinding {
  pub binding: String,
  /// Another Worker of the process; `None` for this Worker itself.
  pub worker: Option<String>,
  /// A named `WorkerEntrypoint` export; `None` for the default export.
  pub entrypoint: Option<String>,
  /// `ctx.props` of the calls through this binding.
  pub props: serde_json::Value,
}

/// Node.js compatibility as the compatibility flags and date decide it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeCompat {
  /// No `node:*` modules.
  #[default]
  Off,
  /// `nodejs_als`: only `node:async_hooks`.
  AsyncLocalStorage,
  /// `nodejs_compat`: the modules and globals; `process.env` holds the
  /// Worker's text bindings when `populate_env`; `fs`: node:fs (workerd's
  /// in-memory one) is there; `gated`: which of the modules workerd gates
  /// by date or flag are there (a bit per `node::GATED` entry).
  On {
    populate_env: bool,
    fs: bool,
    gated: u32,
  },
}

impl WorkerSpec {
  /// Decides the format the way bundlers do: a file with an ES module
  /// `import` or `export` statement is a module, anything else a service
  /// worker script. Comments and string literals do not count (webpack
  /// writes `/* harmony export */` into plain scripts).
  pub fn detect_format(source: &str) -> Format {
    let code = code_only(source);
    let source = code.as_str();
    const EXPORTS: [&str; 10] = [
      "export default",
      "export {",
      "export{",
      "export *",
      "export const ",
      "export let ",
      "export var ",
      "export function",
      "export class ",
      "export async ",
    ];
    let import = source.lines().any(|l| {
      let l = l.trim_start();
      (l.starts_with("import ") || l.starts_with("import{")) && !l.starts_with("import (")
    });
    if import || EXPORTS.iter().any(|e| source.contains(e)) {
      Format::Module
    } else {
      Format::ServiceWorker
    }
  }
}

/// `source` with its comments and the insides of its string, template and
/// regular-expression literals blanked (line breaks kept), for scanning its
/// statements. A `/` starts a regular expression where an operand may begin
/// (the usual tokenizer rule of thumb).
fn code_only(source: &str) -> String {
  let b = source.as_bytes();
  let mut out = Vec::with_capacity(b.len());
  let mut i = 0;
  let mut prev = b'\n'; // the last significant byte written
  let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
  while i < b.len() {
    let c = b[i];
    let next = b.get(i + 1).copied();
    if c == b'/' && next == Some(b'/') {
      while i < b.len() && b[i] != b'\n' {
        out.push(b' ');
        i += 1;
      }
    } else if c == b'/' && next == Some(b'*') {
      let end = source[i + 2..]
        .find("*/")
        .map_or(b.len(), |e| i + 2 + e + 2);
      out.extend(b[i..end].iter().map(|&c| blank(c)));
      i = end;
    } else if c == b'"'
      || c == b'\''
      || c == b'`'
      || (c == b'/' && b"(,=:[!&|?{};+-*%<>~^\n".contains(&prev))
    {
      // A literal: up to its unescaped closing quote (or slash outside a
      // character class).
      out.push(c);
      i += 1;
      let mut class = false;
      while i < b.len() {
        let d = b[i];
        if d == b'\\' {
          out.push(b' ');
          if i + 1 < b.len() {
            out.push(blank(b[i + 1]));
          }
          i += 2;
          continue;
        }
        if c == b'/' && d == b'[' {
          class = true;
        } else if c == b'/' && d == b']' {
          class = false;
        } else if d == c && !class {
          break;
        } else if c != b'`' && d == b'\n' {
          break; // unterminated: not a literal after all
        }
        out.push(blank(d));
        i += 1;
      }
      if i < b.len() {
        out.push(b[i]);
        i += 1;
      }
      prev = b'x';
    } else {
      out.push(c);
      if !c.is_ascii_whitespace() {
        prev = c;
      }
      i += 1;
    }
  }
  String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod format_tests {
  use super::*;

  #[test]
  fn comments_and_literals_do_not_make_a_module() {
    let script = "/* harmony export */ var x = 1;\n// export default {}\nconst s = \"export default\";\nconst r = /export {/;\naddEventListener('fetch', e => e.respondWith(new Response(`import x from 'y'`)));\n";
    assert_eq!(WorkerSpec::detect_format(script), Format::ServiceWorker);
    let module = "/* a comment */\nconst a = 'x'; // hi\nexport default { fetch() {} };\n";
    assert_eq!(WorkerSpec::detect_format(module), Format::Module);
    let import = "const d = a / b / c;\nimport { x } from \"./x.js\";\n";
    assert_eq!(WorkerSpec::detect_format(import), Format::Module);
  }
}

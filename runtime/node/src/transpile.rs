//! Build-time source preparation for the snapshot: deno_node's TypeScript
//! polyfills become JavaScript, and every polyfill gets two module-scoped
//! bindings from `js/deno.js`: `Deno`, the stand-in (the Worker's global
//! scope has no `Deno`), and `__cellhostLoad`, which each of its
//! `core.loadExtScript(...)` calls becomes (a script loaded while a Worker
//! serves events must be let through the code generation check).

use std::path::Path;

use deno_ast::{MediaType, ParseParams};
use deno_error::JsErrorBox;

/// One module's JavaScript, ready for the snapshot or the residual table.
pub fn prepare(name: &str, source: &str) -> Result<String, JsErrorBox> {
  let ts =
    name.starts_with("node:") || MediaType::from_path(Path::new(name)) == MediaType::TypeScript;
  let mut code = if ts {
    to_javascript(name, source)?
  } else {
    source.to_string()
  };
  if name.starts_with("node:") || name.contains("deno_node/") {
    let loads = route_loads(&code);
    if loads != code || code.contains("Deno") {
      code = bind(&loads);
    }
  }
  if name.ends_with("deno_node/_process/process.ts") {
    code = code.replace("__NODE_VERSION__", deno_node::NODE_VERSION);
  }
  if name.ends_with("deno_node/_next_tick.ts") {
    // The polyfills' nextTick queue runs from the first load of the module
    // that has it (Deno's node:process bootstrap would enable it; a Worker
    // may use streams or callbackify without ever loading node:process).
    let at = code
      .rfind("return {")
      .expect("_next_tick.ts ends by returning its exports");
    code.insert_str(at, "enableNextTick();\n");
  }
  if name.ends_with("deno_node/timers.ts") {
    // node:timers' functions are the Worker's timers (js/05_timers.js), as
    // on workerd: setImmediate is a 0 ms timer in setTimeout's queue, so
    // immediates and zero-delay timeouts run in call order.
    let timers = "__bootstrap.internals.workersTimers";
    let mut edits = 0;
    for (f, params) in [
      ("setTimeout", "callback, timeout, ...args"),
      ("setInterval", "callback, timeout, ...args"),
      ("clearTimeout", "timeout"),
      ("clearInterval", "timeout"),
      ("clearImmediate", "immediate"),
    ] {
      let head = format!("function {f}({params}) {{");
      if let Some(at) = code.find(&head) {
        code.insert_str(
          at + head.len(),
          &format!("\n    return {timers}.{f}({params});"),
        );
        edits += 1;
      }
    }
    for (from, to) in [
      (
        "return new Immediate(cb, ...new SafeArrayIterator(args));",
        format!("return {timers}.setImmediate(cb, ...new SafeArrayIterator(args));"),
      ),
      (
        ": new Immediate(()=>resolve(value));",
        format!(": {timers}.setImmediate(()=>resolve(value));"),
      ),
    ] {
      if code.contains(from) {
        code = code.replacen(from, &to, 1);
        edits += 1;
      }
    }
    assert!(
      edits == 7,
      "deno_node's timers.ts changed shape ({edits} of 7 edits)"
    );
  }
  if (name.starts_with("node:") || name.contains("deno_node/"))
    && code.contains("class AsyncLocalStorage")
  {
    // workerd's AsyncLocalStorage has no enterWith() or disable(): a store
    // only lives for the run() that set it.
    let class = code
      .find("class AsyncLocalStorage")
      .expect("node:async_hooks has AsyncLocalStorage");
    for m in ["enterWith", "disable"] {
      let at = code[class..]
        .find(&format!("{m}("))
        .expect("AsyncLocalStorage method moved")
        + class;
      let body = code[at..].find('{').unwrap() + at + 1;
      code.insert_str(
        body,
        &format!("\n    throw new Error(\"asyncLocalStorage.{m}() is not implemented\");"),
      );
    }
  }
  if name == "node:process" {
    // Hands the finished process object to js/deno.js (`internals` is
    // imported by the polyfill).
    code.push_str("\ninternals.cellhostProcessLoaded(process);\n");
  }
  Ok(code)
}

fn to_javascript(name: &str, source: &str) -> Result<String, JsErrorBox> {
  let specifier = deno_core::url::Url::parse(name).map_err(JsErrorBox::from_err)?;
  let parsed = deno_ast::parse_module(ParseParams {
    specifier,
    text: source.into(),
    media_type: MediaType::TypeScript,
    capture_tokens: false,
    scope_analysis: false,
    maybe_syntax: None,
  })
  .map_err(|e| JsErrorBox::generic(format!("{name}: {e}")))?;
  let emitted = parsed
    .transpile(
      &deno_ast::TranspileOptions {
        imports_not_used_as_values: deno_ast::ImportsNotUsedAsValues::Remove,
        ..Default::default()
      },
      &deno_ast::TranspileModuleOptions::default(),
      &deno_ast::EmitOptions {
        source_map: deno_ast::SourceMapOption::None,
        ..Default::default()
      },
    )
    .map_err(|e| JsErrorBox::generic(format!("{name}: {e}")))?;
  Ok(emitted.into_source().text)
}

/// `core.loadExtScript(` (a line break may sit before the dot) becomes
/// `__cellhostLoad(`.
fn route_loads(code: &str) -> String {
  const CALL: &str = ".loadExtScript(";
  let mut out = String::with_capacity(code.len());
  let mut rest = code;
  while let Some(at) = rest.find(CALL) {
    let before = rest[..at].trim_end();
    if let Some(head) = before.strip_suffix("core")
      && !head.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '$')
    {
      out.push_str(head);
      out.push_str("__cellhostLoad(");
    } else {
      out.push_str(&rest[..at + CALL.len()]);
    }
    rest = &rest[at + CALL.len()..];
  }
  out.push_str(rest);
  out
}

/// Scripts (`loadExtScript`) are one function expression that deno_core
/// calls with `__bootstrap`; modules import `internals` under a private
/// name. Either way the bindings are added on the first line, so line
/// numbers in stack traces stay the polyfill's own.
fn bind(code: &str) -> String {
  let body = strip_prologue(code);
  if let Some(brace) = body.strip_prefix("(function").and_then(|_| body.find('{')) {
    let at = code.len() - body.len() + brace + 1;
    format!(
      "{} const Deno = __bootstrap.internals.cellhostDeno, __cellhostLoad = __bootstrap.internals.cellhostLoad;{}",
      &code[..at],
      &code[at..]
    )
  } else {
    format!(
      "import {{ internals as __cellhostInternals }} from \"ext:core/mod.js\"; const Deno = __cellhostInternals.cellhostDeno, __cellhostLoad = __cellhostInternals.cellhostLoad; {code}"
    )
  }
}

/// The text after leading comments, whitespace and a `"use strict"`.
fn strip_prologue(mut s: &str) -> &str {
  loop {
    let t = s.trim_start();
    if let Some(rest) = t.strip_prefix("//") {
      s = rest.split_once('\n').map_or("", |(_, r)| r);
    } else if let Some(rest) = t.strip_prefix("/*") {
      s = rest.split_once("*/").map_or("", |(_, r)| r);
    } else if let Some(rest) = t
      .strip_prefix("\"use strict\";")
      .or_else(|| t.strip_prefix("'use strict';"))
    {
      s = rest;
    } else {
      return t;
    }
  }
}

#[cfg(test)]
mod tests {
  #[test]
  fn script_loads_go_through_the_runtime() {
    let code = "const a = core.loadExtScript(\"x\");\nconst b = core\n  .loadExtScript(\"y\");\nmycore.loadExtScript(\"z\");";
    assert_eq!(
      super::route_loads(code),
      "const a = __cellhostLoad(\"x\");\nconst b = __cellhostLoad(\"y\");\nmycore.loadExtScript(\"z\");"
    );
  }

  #[test]
  fn scripts_and_modules_get_a_private_deno() {
    let script = "// c\n\"use strict\";\n(function () {\nreturn Deno.pid;\n})();";
    let out = super::bind(script);
    assert!(out.contains("(function () { const Deno = __bootstrap.internals.cellhostDeno,"));
    let swc = "// c\n(function() {\nreturn Deno.pid;\n})();";
    assert!(super::bind(swc).contains("(function() { const Deno = __bootstrap"));
    let module = "import { core } from \"ext:core/mod.js\";\nexport const x = Deno.pid;";
    let out = super::bind(module);
    assert!(out.starts_with("import { internals as __cellhostInternals }"));
    assert_eq!(out.lines().count(), module.lines().count());
  }
}

//! Build-time source preparation for the snapshot: deno_node's TypeScript
//! polyfills become JavaScript, and every polyfill that names `Deno` gets a
//! module-scoped `Deno` bound to the stand-in in `js/deno.js` (the Worker's
//! global scope has no `Deno`).

use std::path::Path;

use deno_ast::{MediaType, ParseParams};
use deno_core::{ModuleCodeString, ModuleName, SourceMapData};
use deno_error::JsErrorBox;

/// The snapshot's `extension_transpiler`.
pub fn transpile(
  name: ModuleName,
  source: ModuleCodeString,
) -> Result<(ModuleCodeString, Option<SourceMapData>), JsErrorBox> {
  let code = prepare(name.as_str(), source.as_str())?;
  Ok((code.into(), None))
}

/// One module's JavaScript, ready for the snapshot or the residual table.
pub fn prepare(name: &str, source: &str) -> Result<String, JsErrorBox> {
  let ts =
    name.starts_with("node:") || MediaType::from_path(Path::new(name)) == MediaType::TypeScript;
  let mut code = if ts {
    to_javascript(name, source)?
  } else {
    source.to_string()
  };
  if (name.starts_with("node:") || name.contains("deno_node/")) && code.contains("Deno") {
    code = bind_deno(&code);
  }
  if name.ends_with("deno_node/_process/process.ts") {
    code = code.replace("__NODE_VERSION__", deno_node::NODE_VERSION);
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

/// Scripts (`loadExtScript`) are one function expression that deno_core
/// calls with `__bootstrap`; modules import `internals` under a private
/// name. Either way the binding is added on the first line, so line numbers
/// in stack traces stay the polyfill's own.
fn bind_deno(code: &str) -> String {
  let body = strip_prologue(code);
  if let Some(brace) = body.strip_prefix("(function").and_then(|_| body.find('{')) {
    let at = code.len() - body.len() + brace + 1;
    format!(
      "{} const Deno = __bootstrap.internals.cellhostDeno;{}",
      &code[..at],
      &code[at..]
    )
  } else {
    format!(
      "import {{ internals as __cellhostInternals }} from \"ext:core/mod.js\"; const Deno = __cellhostInternals.cellhostDeno; {code}"
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
  fn scripts_and_modules_get_a_private_deno() {
    let script = "// c\n\"use strict\";\n(function () {\nreturn Deno.pid;\n})();";
    let out = super::bind_deno(script);
    assert!(out.contains("(function () { const Deno = __bootstrap.internals.cellhostDeno;\n"));
    let swc = "// c\n(function() {\nreturn Deno.pid;\n})();";
    assert!(super::bind_deno(swc).contains("(function() { const Deno = __bootstrap"));
    let module = "import { core } from \"ext:core/mod.js\";\nexport const x = Deno.pid;";
    let out = super::bind_deno(module);
    assert!(out.starts_with("import { internals as __cellhostInternals }"));
    assert_eq!(out.lines().count(), module.lines().count());
  }
}

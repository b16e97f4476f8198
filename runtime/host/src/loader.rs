//! Module loading for a Worker bundle: relative ES module imports from disk,
//! the built-in `cloudflare:workers` module, and clear errors for the rest.

use deno_core::{
  ModuleLoadOptions, ModuleLoadReferrer, ModuleLoadResponse, ModuleLoader, ModuleSource,
  ModuleSourceCode, ModuleSpecifier, ModuleType, RequestedModuleType, ResolutionKind,
  resolve_import,
};
use deno_error::JsErrorBox;

/// `cloudflare:workers` re-exports the classes the snapshot defined.
const WORKERS_MODULE: &str = r#"
const m = globalThis[Symbol.for("cellhost.workers")];
export const DurableObject = m.DurableObject;
export const WorkerEntrypoint = m.WorkerEntrypoint;
export const RpcTarget = m.RpcTarget;
export const WorkflowEntrypoint = m.WorkflowEntrypoint;
export default m;
"#;

pub struct Loader;

impl ModuleLoader for Loader {
  fn resolve(
    &self,
    specifier: &str,
    referrer: &str,
    _kind: ResolutionKind,
  ) -> Result<ModuleSpecifier, JsErrorBox> {
    if let Some(name) = specifier.strip_prefix("node:") {
      return Err(JsErrorBox::type_error(format!(
        "Cannot import \"{specifier}\": Node.js built-in modules (node:{name}) are not supported by cellhost yet"
      )));
    }
    if specifier == "cloudflare:workers" {
      return ModuleSpecifier::parse(specifier).map_err(JsErrorBox::from_err);
    }
    if specifier.starts_with("cloudflare:") {
      return Err(JsErrorBox::type_error(format!(
        "Cannot import \"{specifier}\": this Workers module is not supported by cellhost yet"
      )));
    }
    resolve_import(specifier, referrer).map_err(JsErrorBox::from_err)
  }

  fn load(
    &self,
    specifier: &ModuleSpecifier,
    _referrer: Option<&ModuleLoadReferrer>,
    options: ModuleLoadOptions,
  ) -> ModuleLoadResponse {
    ModuleLoadResponse::Sync(load(specifier, options.requested_module_type))
  }
}

fn load(
  specifier: &ModuleSpecifier,
  requested: RequestedModuleType,
) -> Result<ModuleSource, JsErrorBox> {
  let code = match specifier.scheme() {
    "cloudflare" => WORKERS_MODULE.to_string(),
    "file" => {
      let path = specifier
        .to_file_path()
        .map_err(|_| JsErrorBox::generic(format!("bad file URL {specifier}")))?;
      std::fs::read_to_string(&path)
        .map_err(|e| JsErrorBox::generic(format!("Cannot load module {}: {e}", path.display())))?
    }
    other => {
      return Err(JsErrorBox::type_error(format!(
        "Cannot import {specifier}: {other}: modules are not supported; bundle the Worker first"
      )));
    }
  };
  let ty = match requested {
    RequestedModuleType::Json => ModuleType::Json,
    _ if specifier.path().ends_with(".json") => ModuleType::Json,
    _ => ModuleType::JavaScript,
  };
  Ok(ModuleSource::new(
    ty,
    ModuleSourceCode::String(code.into()),
    specifier,
    None,
  ))
}

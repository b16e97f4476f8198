//! Wrangler keys cellhost does not act on. Nothing in a Worker's config is
//! ignored without a word: a binding or setting that would change what the
//! Worker sees stops the start with its name; one that changes nothing when
//! the Worker runs here (deployment, routing, build settings) is a warning;
//! a key wrangler itself does not know is a warning, as wrangler warns.

use serde_json::Value;

/// Keys whose absence changes what the Worker sees: refused by name.
const REFUSED: &[(&str, &str)] = &[
  ("site", "Workers Sites"),
  ("ai", "the Workers AI binding"),
  ("vectorize", "Vectorize bindings"),
  ("hyperdrive", "Hyperdrive bindings"),
  ("analytics_engine_datasets", "Analytics Engine bindings"),
  ("browser", "the Browser Rendering binding"),
  ("workflows", "Workflows"),
  ("send_email", "send_email bindings"),
  (
    "dispatch_namespaces",
    "dispatch namespaces (Workers for Platforms)",
  ),
  ("mtls_certificates", "mTLS certificate bindings"),
  ("tail_consumers", "Tail Workers"),
  ("version_metadata", "the version metadata binding"),
  ("secrets_store_secrets", "Secrets Store bindings"),
  ("images", "the Images binding"),
  ("pipelines", "Pipelines bindings"),
  ("ratelimits", "rate limiting bindings"),
  ("unsafe", "unsafe bindings"),
  ("wasm_modules", "wasm_modules (service-worker format)"),
  ("text_blobs", "text_blobs (service-worker format)"),
  ("data_blobs", "data_blobs (service-worker format)"),
  ("node_compat", "the legacy node_compat setting"),
  ("containers", "Containers"),
];

/// Keys that change nothing when the Worker runs here: a warning each.
const NO_EFFECT: &[(&str, &str)] = &[
  ("$schema", "the config's JSON schema"),
  ("account_id", "deployment"),
  ("workers_dev", "deployment"),
  ("preview_urls", "deployment"),
  ("route", "routing on Cloudflare"),
  ("routes", "routing on Cloudflare"),
  ("observability", "Cloudflare's observability"),
  ("logpush", "Cloudflare's Logpush"),
  ("upload_source_maps", "deployment"),
  ("minify", "wrangler's build"),
  ("build", "wrangler's build"),
  ("alias", "wrangler's build"),
  ("define", "wrangler's build"),
  ("tsconfig", "wrangler's build"),
  ("jsx_factory", "wrangler's build"),
  ("jsx_fragment", "wrangler's build"),
  ("keep_vars", "deployment"),
  ("keep_names", "wrangler's build"),
  ("send_metrics", "wrangler's telemetry"),
  ("dev", "wrangler dev's settings (use cellhost run's flags)"),
  ("placement", "Smart Placement"),
  ("limits", "Cloudflare's plan limits (use --cpu-ms)"),
  (
    "env",
    "wrangler environments (cellhost uses the top-level configuration)",
  ),
  ("legacy_env", "wrangler environments"),
  ("usage_model", "billing"),
  ("first_party_worker", "deployment"),
  ("zone_id", "deployment"),
  ("python_modules", "Python Workers packaging"),
];

/// Checks the keys a config holds beyond those cellhost reads.
pub fn check(
  file: &std::path::Path,
  other: &std::collections::BTreeMap<String, Value>,
) -> anyhow::Result<()> {
  for key in other.keys() {
    if let Some((_, what)) = REFUSED.iter().find(|(k, _)| k == key) {
      anyhow::bail!(
        "{}: `{key}` ({what}) is not supported by cellhost yet; remove it or run the Worker on wrangler",
        file.display()
      );
    }
    match NO_EFFECT.iter().find(|(k, _)| k == key) {
      Some((_, what)) => tracing::warn!(
        "{}: `{key}` is ignored: it concerns {what}, not how the Worker runs here",
        file.display()
      ),
      None => tracing::warn!("{}: unknown key `{key}` is ignored", file.display()),
    }
  }
  Ok(())
}

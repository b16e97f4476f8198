//! The binding sections of a Worker's config (`assets`, `services`,
//! `kv_namespaces`, `d1_databases`, `queues`, `triggers`): their shapes as
//! wrangler writes them, each refusing a key it does not know, and what
//! cellhost makes of them.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Map, Value};

/// One `[[d1_databases]]` entry. `database_name`, `preview_database_id` and
/// `migrations_dir` concern wrangler's commands, not the running Worker.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub(crate) struct D1Config {
  pub(crate) binding: String,
  pub(crate) database_id: Option<String>,
  pub(crate) database_name: Option<String>,
  pub(crate) preview_database_id: Option<String>,
  pub(crate) migrations_dir: Option<String>,
  pub(crate) migrations_table: Option<String>,
}

/// Where `cellhost d1 migrations apply NAME` finds its database: the
/// database id, the migrations folder and the table recording them.
pub struct D1Migrations {
  pub id: String,
  pub dir: PathBuf,
  pub table: String,
}

/// The `d1_databases` entry named `name` (binding or database_name) in the
/// config of `dir`.
pub fn d1_migrations(dir: &Path, name: &str) -> anyhow::Result<D1Migrations> {
  let dir = std::fs::canonicalize(dir).with_context(|| format!("{}", dir.display()))?;
  let file = ["wrangler.toml", "wrangler.jsonc", "wrangler.json"]
    .iter()
    .map(|n| dir.join(n))
    .find(|f| f.exists())
    .ok_or_else(|| {
      anyhow::anyhow!(
        "{}: no wrangler.toml, wrangler.jsonc or wrangler.json here",
        dir.display()
      )
    })?;
  let cfg = crate::config::parse(&file, &std::fs::read_to_string(&file)?)?;
  let Some(d) = cfg
    .d1_databases
    .iter()
    .find(|d| d.binding == name || d.database_name.as_deref() == Some(name))
  else {
    bail!(
      "{}: no d1_databases entry has the binding or database_name {name:?}",
      file.display()
    );
  };
  Ok(D1Migrations {
    id: d.database_id.clone().unwrap_or_else(|| d.binding.clone()),
    dir: dir.join(d.migrations_dir.as_deref().unwrap_or("migrations")),
    table: d
      .migrations_table
      .clone()
      .unwrap_or_else(|| "d1_migrations".into()),
  })
}

/// `[queues]`: producers and consumers.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct QueuesConfig {
  pub(crate) producers: Vec<ProducerConfig>,
  pub(crate) consumers: Vec<ConsumerConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProducerConfig {
  pub(crate) binding: String,
  pub(crate) queue: String,
}

/// A consumer; `max_concurrency` is read but one batch of a queue is
/// delivered at a time here (a warning says so when it asks for more).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConsumerConfig {
  pub(crate) queue: String,
  pub(crate) max_batch_size: Option<u32>,
  pub(crate) max_batch_timeout: Option<f64>,
  pub(crate) max_retries: Option<u32>,
  pub(crate) dead_letter_queue: Option<String>,
  pub(crate) retry_delay: Option<f64>,
  pub(crate) max_concurrency: Option<u32>,
}

pub(crate) fn consumers(
  file: &Path,
  list: &[ConsumerConfig],
) -> anyhow::Result<Vec<cellhost_queues::Consumer>> {
  list
    .iter()
    .map(|c| {
      let size = c.max_batch_size.unwrap_or(10);
      if !(1..=100).contains(&size) {
        bail!("{}: queues.consumers ({}): max_batch_size must be 1 to 100", file.display(), c.queue);
      }
      let timeout = c.max_batch_timeout.unwrap_or(5.0);
      if !(0.0..=60.0).contains(&timeout) {
        bail!("{}: queues.consumers ({}): max_batch_timeout must be 0 to 60 seconds", file.display(), c.queue);
      }
      let retries = c.max_retries.unwrap_or(3);
      if retries > 100 {
        bail!("{}: queues.consumers ({}): max_retries must be at most 100", file.display(), c.queue);
      }
      let delay = c.retry_delay.unwrap_or(0.0);
      if !(0.0..=43200.0).contains(&delay) {
        bail!("{}: queues.consumers ({}): retry_delay must be 0 to 43200 seconds", file.display(), c.queue);
      }
      if c.max_concurrency.is_some_and(|n| n != 1) {
        tracing::warn!(
          "{}: queues.consumers ({}): max_concurrency is not supported by cellhost yet: one batch is delivered at a time",
          file.display(),
          c.queue
        );
      }
      Ok(cellhost_queues::Consumer {
        queue: c.queue.clone(),
        max_batch_size: size as usize,
        max_batch_timeout: std::time::Duration::from_secs_f64(timeout),
        max_retries: retries,
        dead_letter_queue: c.dead_letter_queue.clone(),
        retry_delay: std::time::Duration::from_secs_f64(delay),
      })
    })
    .collect()
}

/// `[triggers]`: Cron Triggers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Triggers {
  pub(crate) crons: Vec<String>,
}

/// One `[[kv_namespaces]]` entry. `preview_id` is wrangler's namespace for
/// remote previews: the local data is the same, so it changes nothing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KvConfig {
  pub(crate) binding: String,
  pub(crate) id: Option<String>,
  #[allow(dead_code)]
  pub(crate) preview_id: Option<String>,
}

/// One `[[r2_buckets]]` entry. `preview_bucket_name` is wrangler's bucket
/// for remote previews: the local data is the same, so it changes nothing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct R2Config {
  pub(crate) binding: String,
  pub(crate) bucket_name: Option<String>,
  #[allow(dead_code)]
  pub(crate) preview_bucket_name: Option<String>,
  pub(crate) jurisdiction: Option<String>,
  pub(crate) remote: Option<bool>,
}

/// (binding, bucket name) of each R2 binding; wrangler dev names a bucket
/// without `bucket_name` by its binding.
pub(crate) fn r2_buckets(file: &Path, list: &[R2Config]) -> anyhow::Result<Vec<(String, String)>> {
  list
    .iter()
    .map(|b| {
      if b.remote == Some(true) {
        bail!(
          "{}: r2_buckets ({}): `remote = true` would reach Cloudflare's R2; cellhost serves R2 from its own storage (point it at a bucket with --r2 {}=s3://…)",
          file.display(),
          b.binding,
          b.binding
        );
      }
      if let Some(j) = &b.jurisdiction {
        tracing::warn!(
          "{}: r2_buckets ({}): jurisdiction {j:?} changes nothing here: the data stays where --r2 or --data puts it",
          file.display(),
          b.binding
        );
      }
      let name = b.bucket_name.clone().unwrap_or_else(|| b.binding.clone());
      if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        bail!("{}: r2_buckets ({}): bucket_name {name:?} is not a bucket name", file.display(), b.binding);
      }
      Ok((b.binding.clone(), name))
    })
    .collect()
}

/// One `[[services]]` entry; a key cellhost does not act on is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServiceConfig {
  pub(crate) binding: String,
  pub(crate) service: String,
  pub(crate) entrypoint: Option<String>,
  pub(crate) props: Option<Value>,
}

/// Service bindings: to this Worker itself (the default export or a named
/// entrypoint), or to another Worker, which must run in the same process
/// (`cellhost run A B`; checked once every Worker is loaded).
pub(crate) fn services(
  file: &Path,
  name: &str,
  list: &[ServiceConfig],
) -> anyhow::Result<Vec<cellhost_host::ServiceBinding>> {
  list
    .iter()
    .map(|s| {
      let props = s.props.clone().unwrap_or(Value::Object(Map::new()));
      if !props.is_object() {
        bail!(
          "{}: service binding {}: props must be an object",
          file.display(),
          s.binding
        );
      }
      Ok(cellhost_host::ServiceBinding {
        binding: s.binding.clone(),
        worker: (s.service != name).then(|| s.service.clone()),
        entrypoint: s.entrypoint.clone(),
        props,
      })
    })
    .collect()
}

/// `[assets]`; a key wrangler does not have is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AssetsSection {
  pub(crate) directory: Option<String>,
  pub(crate) binding: Option<String>,
  pub(crate) html_handling: Option<String>,
  pub(crate) not_found_handling: Option<String>,
  pub(crate) run_worker_first: Option<Value>,
}

/// The assets section resolved against the config's directory and flags.
pub(crate) fn assets(
  file: &Path,
  dir: &Path,
  section: &AssetsSection,
  has_worker: bool,
  compat: &cellhost_compat::Resolved,
) -> anyhow::Result<cellhost_assets::Assets> {
  use cellhost_assets::{AssetsConfig, HtmlHandling, NotFound, RunWorkerFirst};
  let at = |what: String| anyhow::anyhow!("{}: assets.{what}", file.display());
  let Some(directory) = &section.directory else {
    bail!(
      "{}: assets.directory is missing (the folder of files to serve)",
      file.display()
    );
  };
  let html_handling = match section.html_handling.as_deref() {
    None | Some("auto-trailing-slash") => HtmlHandling::AutoTrailingSlash,
    Some("force-trailing-slash") => HtmlHandling::ForceTrailingSlash,
    Some("drop-trailing-slash") => HtmlHandling::DropTrailingSlash,
    Some("none") => HtmlHandling::None,
    Some(other) => {
      return Err(at(format!(
        "html_handling = {other:?}: expected \"auto-trailing-slash\", \"force-trailing-slash\", \"drop-trailing-slash\" or \"none\""
      )));
    }
  };
  let not_found_handling = match section.not_found_handling.as_deref() {
    None | Some("none") => NotFound::None,
    Some("single-page-application") => NotFound::SinglePageApplication,
    Some("404-page") => NotFound::Page404,
    Some(other) => {
      return Err(at(format!(
        "not_found_handling = {other:?}: expected \"single-page-application\", \"404-page\" or \"none\""
      )));
    }
  };
  let run_worker_first = match &section.run_worker_first {
    None | Some(Value::Bool(false)) => RunWorkerFirst::No,
    Some(Value::Bool(true)) => {
      if section.binding.is_none() {
        tracing::warn!(
          "{}: run_worker_first = true without an assets binding: every request runs the Worker, which cannot reach the assets (set assets.binding)",
          file.display()
        );
      }
      RunWorkerFirst::Yes
    }
    Some(Value::Array(list)) => {
      let rules: Option<Vec<String>> = list.iter().map(|v| v.as_str().map(String::from)).collect();
      let rules = rules.ok_or_else(|| at("run_worker_first: expected strings".into()))?;
      RunWorkerFirst::patterns(&rules).map_err(|e| at(format!("run_worker_first: {e}")))?
    }
    Some(other) => {
      return Err(at(format!(
        "run_worker_first = {other}: expected a boolean or an array of route patterns"
      )));
    }
  };
  if !has_worker && !matches!(run_worker_first, RunWorkerFirst::No) {
    bail!(
      "{}: Cannot set run_worker_first without a Worker script (`main`)",
      file.display()
    );
  }
  let navigation_prefers_assets = compat.on("assets_navigation_prefers_asset_serving");
  let (assets, warnings) = cellhost_assets::Assets::load(AssetsConfig {
    directory: dir.join(directory),
    html_handling,
    not_found_handling,
    run_worker_first,
    navigation_prefers_assets,
    has_worker,
  })
  .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
  for w in warnings {
    tracing::warn!("{}: {w}", file.display());
  }
  Ok(assets)
}

//! What a deployment's manifest records of a Worker's wrangler config
//! (a child of `config`, so it reads the parsed config's fields).

use std::path::Path;

use super::parse;

/// What a deployment's manifest records of a Worker directory's config.
pub struct Described {
  pub compatibility_date: Option<String>,
  pub compatibility_flags: Vec<String>,
  pub migration_tags: Vec<String>,
  /// (name, kind) of every binding.
  pub bindings: Vec<(String, String)>,
}

/// Reads the wrangler config in `dir` for a deployment's manifest.
pub fn describe(dir: &Path) -> anyhow::Result<Described> {
  let file = ["wrangler.toml", "wrangler.jsonc", "wrangler.json"]
    .iter()
    .map(|n| dir.join(n))
    .find(|f| f.exists())
    .ok_or_else(|| anyhow::anyhow!("{}: no wrangler config", dir.display()))?;
  let cfg = parse(&file, &std::fs::read_to_string(&file)?)?;
  let mut bindings: Vec<(String, String)> = Vec::new();
  let mut add = |n: &str, k: &str| bindings.push((n.to_string(), k.to_string()));
  for b in &cfg.durable_objects.bindings {
    add(&b.name, "durable_object");
  }
  for k in cfg.vars.keys() {
    add(k, "var");
  }
  for s in &cfg.services {
    add(&s.binding, "service");
  }
  for k in &cfg.kv_namespaces {
    add(&k.binding, "kv_namespace");
  }
  for r in &cfg.r2_buckets {
    add(&r.binding, "r2_bucket");
  }
  for d in &cfg.d1_databases {
    add(&d.binding, "d1_database");
  }
  if let Some(b) = cfg.assets.as_ref().and_then(|a| a.binding.clone()) {
    add(&b, "assets");
  }
  Ok(Described {
    compatibility_date: cfg.compatibility_date,
    compatibility_flags: cfg.compatibility_flags,
    migration_tags: cfg
      .migrations
      .iter()
      .enumerate()
      .map(|(i, m)| m.tag.clone().unwrap_or_else(|| format!("(untagged #{i})")))
      .collect(),
    bindings,
  })
}

//! Reading a Worker's configuration the way wrangler does: `wrangler.toml`
//! or `wrangler.jsonc` (name, main, compatibility_date, compatibility_flags,
//! vars, Durable Objects and migrations, module rules and base_dir) and
//! `.dev.vars` for secrets.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use std::sync::Arc;

use cellhost_host::rules::{ModuleKind, ModuleRules, Rule};
use cellhost_host::{Namespace, WorkerSpec};

use crate::bindings::{
  AssetsSection, D1Config, KvConfig, QueuesConfig, R2Config, ServiceConfig, Triggers, assets,
  consumers, services,
};
use serde::Deserialize;
use serde_json::{Map, Value};

mod describe;
pub use describe::describe;

pub struct Worker {
  pub name: String,
  pub spec: WorkerSpec,
  /// `queues.consumers`.
  pub consumers: Vec<cellhost_queues::Consumer>,
  /// `triggers.crons`.
  pub crons: cellhost_cron::Crons,
  /// `r2_buckets`: (binding, bucket name); where each lives is decided at
  /// start (`--r2`, the fleet's bucket, or the data directory).
  pub r2_buckets: Vec<(String, String)>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct WranglerConfig {
  name: Option<String>,
  main: Option<String>,
  compatibility_date: Option<String>,
  compatibility_flags: Vec<String>,
  vars: Map<String, Value>,
  durable_objects: DurableObjects,
  migrations: Vec<Migration>,
  rules: Vec<RuleConfig>,
  base_dir: Option<String>,
  assets: Option<AssetsSection>,
  services: Vec<ServiceConfig>,
  kv_namespaces: Vec<KvConfig>,
  r2_buckets: Vec<R2Config>,
  pub(crate) d1_databases: Vec<D1Config>,
  queues: Option<QueuesConfig>,
  triggers: Option<Triggers>,
  /// Every file under the base directory can be imported here, so wrangler's
  /// `find_additional_modules` and `no_bundle` change nothing; read so they
  /// are not reported as unknown.
  #[allow(dead_code)]
  find_additional_modules: Option<bool>,
  #[allow(dead_code)]
  no_bundle: Option<bool>,
  /// Everything else: refused or warned about by name (`keys`).
  #[serde(flatten)]
  other: std::collections::BTreeMap<String, Value>,
}

/// One `[[rules]]` entry; a key wrangler does not have is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleConfig {
  #[serde(rename = "type")]
  kind: String,
  globs: Vec<String>,
  #[serde(default)]
  fallthrough: bool,
}

fn module_rules(file: &Path, rules: &[RuleConfig]) -> anyhow::Result<Arc<ModuleRules>> {
  let mut out = Vec::new();
  for (i, r) in rules.iter().enumerate() {
    let kind = ModuleKind::parse(&r.kind)
      .map_err(|e| anyhow::anyhow!("{}: rules[{i}] ({:?}): {e}", file.display(), r.globs))?;
    out.push(Rule {
      kind,
      globs: r.globs.clone(),
      fallthrough: r.fallthrough,
    });
  }
  let (rules, warnings) =
    ModuleRules::new(&out).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
  for w in warnings {
    tracing::warn!("{}: {w}", file.display());
  }
  Ok(Arc::new(rules))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct DurableObjects {
  bindings: Vec<DoBinding>,
}

#[derive(Deserialize)]
struct DoBinding {
  name: String,
  class_name: String,
  script_name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Migration {
  tag: Option<String>,
  new_classes: Vec<String>,
  new_sqlite_classes: Vec<String>,
  renamed_classes: Vec<Value>,
  deleted_classes: Vec<Value>,
  transferred_classes: Vec<Value>,
}

/// Checks bindings against migrations: which classes are SQLite-backed, and
/// the migrations cellhost refuses (renames, deletes, transfers).
fn namespaces(
  file: &Path,
  script: &str,
  cfg_do: &DurableObjects,
  migrations: &[Migration],
) -> anyhow::Result<Vec<Namespace>> {
  let mut sqlite = Vec::new();
  let mut kv = Vec::new();
  for m in migrations {
    let tag = m.tag.as_deref().unwrap_or("(untagged)");
    for (what, list) in [
      ("renamed_classes", &m.renamed_classes),
      ("deleted_classes", &m.deleted_classes),
      ("transferred_classes", &m.transferred_classes),
    ] {
      if !list.is_empty() {
        bail!(
          "{}: migration {tag} uses {what}, which cellhost does not support yet",
          file.display()
        );
      }
    }
    sqlite.extend(m.new_sqlite_classes.iter().cloned());
    kv.extend(m.new_classes.iter().cloned());
  }
  let mut out = Vec::new();
  for b in &cfg_do.bindings {
    if let Some(s) = &b.script_name {
      bail!(
        "{}: durable_objects binding {} names script_name = {s:?}; Durable Objects of another Worker are not supported by cellhost yet",
        file.display(),
        b.name
      );
    }
    let is_sqlite = sqlite.contains(&b.class_name);
    if !is_sqlite && !kv.contains(&b.class_name) {
      tracing::warn!(
        "{}: class {} has no migration; treating it as a KV-only (new_classes) class",
        file.display(),
        b.class_name
      );
    }
    out.push(Namespace::new(&b.name, &b.class_name, script, is_sqlite));
  }
  // A class a migration declares but no binding names is still a
  // namespace: the Worker reaches it through `ctx.exports`.
  for (class, is_sqlite) in sqlite
    .iter()
    .map(|c| (c, true))
    .chain(kv.iter().map(|c| (c, false)))
  {
    if !out.iter().any(|n| &n.class_name == class) {
      out.push(Namespace::new("", class, script, is_sqlite));
    }
  }
  Ok(out)
}

pub fn load(path: &Path, data_dir: &Path) -> anyhow::Result<Worker> {
  let path = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
  if path.is_dir() {
    from_dir(&path, data_dir)
  } else {
    let name = path
      .file_stem()
      .map(|s| s.to_string_lossy().into_owned())
      .unwrap_or_default();
    spec(name, path, Map::new(), Vec::new(), data_dir)
  }
}

fn from_dir(dir: &Path, data_dir: &Path) -> anyhow::Result<Worker> {
  let (file, cfg) = if dir.join("wrangler.toml").exists() {
    let f = dir.join("wrangler.toml");
    let cfg = parse(&f, &std::fs::read_to_string(&f)?)?;
    (f, cfg)
  } else if let Some(f) = ["wrangler.jsonc", "wrangler.json"]
    .iter()
    .map(|n| dir.join(n))
    .find(|f| f.exists())
  {
    let cfg = parse(&f, &std::fs::read_to_string(&f)?)?;
    (f, cfg)
  } else {
    bail!(
      "{}: no wrangler.toml, wrangler.jsonc or wrangler.json here",
      dir.display()
    );
  };
  crate::keys::check(&file, &cfg.other)?;
  let (main, has_worker) = match &cfg.main {
    Some(m) => (dir.join(m), true),
    // An assets-only Worker: the assets answer every request.
    None if cfg.assets.is_some() => (assets_only_main(data_dir)?, false),
    None => bail!(
      "{}: `main` is missing (the Worker's entry file)",
      file.display()
    ),
  };
  if cfg.compatibility_date.is_none() {
    tracing::warn!(
      "{}: no compatibility_date; using today's behaviour",
      file.display()
    );
  }
  let compat =
    cellhost_compat::resolve(cfg.compatibility_date.as_deref(), &cfg.compatibility_flags);
  crate::flags::check(&file, &compat, &cfg.compatibility_flags);
  let name = cfg.name.unwrap_or_else(|| "worker".into());
  let dos = namespaces(&file, &name, &cfg.durable_objects, &cfg.migrations)?;
  let mut env = cfg.vars;
  let dev_vars = dir.join(".dev.vars");
  if dev_vars.exists() {
    let text = std::fs::read_to_string(&dev_vars)?;
    for (k, v) in parse_dotenv(&text) {
      env.insert(k, Value::String(v));
    }
  }
  let rules = module_rules(&file, &cfg.rules)?;
  let mut worker = spec(name, main, env, dos, data_dir)?;
  worker.spec.eval_during_startup = compat.on("allow_eval_during_startup");
  worker.spec.rules = rules;
  worker.spec.node = crate::flags::node_compat(&compat);
  worker.spec.services = services(&file, &worker.name, &cfg.services)?;
  if let Some(q) = &cfg.queues {
    worker.spec.queue_producers = q
      .producers
      .iter()
      .map(|p| (p.binding.clone(), p.queue.clone()))
      .collect();
    worker.consumers = consumers(&file, &q.consumers)?;
    if !q.producers.is_empty() || !q.consumers.is_empty() {
      worker.spec.queues =
        Some(cellhost_queues::QueueStore::open(data_dir).map_err(anyhow::Error::msg)?);
    }
  }
  if let Some(t) = &cfg.triggers {
    worker.crons = cellhost_cron::Crons::parse(&t.crons)
      .map_err(|e| anyhow::anyhow!("{}: triggers.crons: {e}", file.display()))?;
  }
  // wrangler dev keys a database without an id by its binding name.
  worker.spec.d1_databases = cfg
    .d1_databases
    .iter()
    .map(|d| {
      (
        d.binding.clone(),
        d.database_id.clone().unwrap_or_else(|| d.binding.clone()),
      )
    })
    .collect();
  worker.r2_buckets = crate::bindings::r2_buckets(&file, &cfg.r2_buckets)?;
  // wrangler dev keys a namespace without an id by its binding name.
  worker.spec.kv_namespaces = cfg
    .kv_namespaces
    .iter()
    .map(|k| {
      (
        k.binding.clone(),
        k.id.clone().unwrap_or_else(|| k.binding.clone()),
      )
    })
    .collect();
  worker.spec.ctx_exports = compat.on("enable_ctx_exports");
  worker.spec.compat = compat.clone();
  if let Some(section) = &cfg.assets {
    let a = assets(&file, dir, section, has_worker, &compat)?;
    tracing::info!(
      "assets: {} files from {}",
      a.len(),
      dir
        .join(section.directory.as_deref().unwrap_or(""))
        .display()
    );
    worker.spec.assets = Some(Arc::new(a));
    worker.spec.assets_binding = section.binding.clone();
  }
  if let Some(base) = &cfg.base_dir {
    let base = dir.join(base);
    let base =
      std::fs::canonicalize(&base).with_context(|| format!("base_dir {}", base.display()))?;
    if has_worker && !worker.spec.main.starts_with(&base) {
      bail!(
        "{}: main {} is not inside base_dir {}",
        file.display(),
        worker.spec.main.display(),
        base.display()
      );
    }
    worker.spec.base_dir = Some(base);
  }
  Ok(worker)
}

/// The module an assets-only Worker runs: the router never hands it a
/// request (everything is the assets'), but the isolates need a module.
fn assets_only_main(data_dir: &Path) -> anyhow::Result<PathBuf> {
  std::fs::create_dir_all(data_dir).with_context(|| format!("{}", data_dir.display()))?;
  let path = data_dir.join("assets-only-worker.js");
  std::fs::write(
    &path,
    "// Written by cellhost for an assets-only Worker: the assets answer every request.\nexport default { fetch() { return new Response(null, { status: 404 }); } };\n",
  )?;
  Ok(path)
}

/// A config file's text: TOML for `wrangler.toml`, JSON with comments and
/// trailing commas otherwise. Pure, so the property tests can reach it.
pub(crate) fn parse(file: &Path, text: &str) -> anyhow::Result<WranglerConfig> {
  let cfg = if file.extension().is_some_and(|e| e == "toml") {
    toml::from_str(text).with_context(|| format!("{}", file.display()))?
  } else {
    serde_json::from_str(&strip_jsonc(text)).with_context(|| format!("{}", file.display()))?
  };
  Ok(cfg)
}

fn spec(
  name: String,
  main: PathBuf,
  env: Map<String, Value>,
  durable_objects: Vec<Namespace>,
  data_dir: &Path,
) -> anyhow::Result<Worker> {
  let main = std::fs::canonicalize(&main).with_context(|| format!("main {}", main.display()))?;
  let source = std::fs::read_to_string(&main).with_context(|| format!("{}", main.display()))?;
  let format = WorkerSpec::detect_format(&source);
  if format == cellhost_host::Format::ServiceWorker && !durable_objects.is_empty() {
    bail!(
      "{}: Durable Objects need a module Worker (export the classes)",
      main.display()
    );
  }
  let data_dir = data_dir.to_path_buf();
  Ok(Worker {
    crons: cellhost_cron::Crons::parse(&[]).expect("no expressions"),
    consumers: Vec::new(),
    r2_buckets: Vec::new(),
    name: name.clone(),
    spec: WorkerSpec {
      name,
      main,
      format,
      env,
      durable_objects,
      data_dir,
      fleet: None,
      forward: None,
      pitr_days: 30.0,
      eval_during_startup: true,
      rules: Default::default(),
      base_dir: None,
      node: Default::default(),
      assets: None,
      assets_binding: None,
      services: Vec::new(),
      peers: None,
      kv_namespaces: Vec::new(),
      d1_databases: Vec::new(),
      r2_buckets: None,
      queue_producers: Vec::new(),
      queues: None,
      ctx_exports: true,
      // A bare file gets today's behaviour, without Node.js (`node` above).
      compat: cellhost_compat::resolve(None, &["no_nodejs_compat".into()]),
      generation: None,
    },
  })
}

/// `.dev.vars`: KEY=VALUE lines, `#` comments, optional quotes.
fn parse_dotenv(text: &str) -> Vec<(String, String)> {
  text
    .lines()
    .map(str::trim)
    .filter(|l| !l.is_empty() && !l.starts_with('#'))
    .filter_map(|l| {
      let (k, v) = l.split_once('=')?;
      let v = v.trim();
      let v = if v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
      {
        v[1..v.len() - 1].replace("\\n", "\n")
      } else {
        v.to_string()
      };
      Some((k.trim().trim_start_matches("export ").trim().to_string(), v))
    })
    .collect()
}

/// JSONC to JSON: drops comments, then trailing commas, leaving strings alone.
fn strip_jsonc(text: &str) -> String {
  let no_comments = scan(text, |c, rest, out| match c {
    '/' if rest.starts_with('/') => rest.find('\n').map_or(rest.len(), |i| i),
    '/' if rest.starts_with('*') => rest.find("*/").map_or(rest.len(), |i| i + 2),
    _ => {
      out.push(c);
      0
    }
  });
  scan(&no_comments, |c, rest, out| {
    let next = rest.trim_start().chars().next();
    if !(c == ',' && matches!(next, Some('}') | Some(']'))) {
      out.push(c);
    }
    0
  })
}

/// Walks `text` outside string literals; `f(c, rest, out)` handles one
/// character and returns how many following bytes to skip.
fn scan(text: &str, mut f: impl FnMut(char, &str, &mut String) -> usize) -> String {
  let mut out = String::with_capacity(text.len());
  let mut i = 0;
  let mut in_str = false;
  while let Some(c) = text[i..].chars().next() {
    i += c.len_utf8();
    if in_str {
      out.push(c);
      if c == '\\' {
        if let Some(n) = text[i..].chars().next() {
          out.push(n);
          i += n.len_utf8();
        }
      } else if c == '"' {
        in_str = false;
      }
    } else if c == '"' {
      in_str = true;
      out.push(c);
    } else {
      i += f(c, &text[i..], &mut out);
    }
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn jsonc_comments_and_trailing_commas() {
    let j = strip_jsonc("{\n // c\n \"a\": \"x//y\", /* b */ \"b\": [1,2,], /* c */\n}");
    let v: Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["a"], "x//y");
    assert_eq!(v["b"], serde_json::json!([1, 2]));
  }

  #[test]
  fn dotenv_quotes_and_comments() {
    let v = parse_dotenv("# c\nA=1\nB=\"two words\"\nexport C='x'\n");
    assert_eq!(
      v,
      vec![
        ("A".into(), "1".into()),
        ("B".into(), "two words".into()),
        ("C".into(), "x".into())
      ]
    );
  }
  /// Property tests of the config parser (CI runs the default case count; `PROPTEST_CASES=N`
  /// runs more, see scripts/fuzz.sh). The parser lives in the binary crate, which cargo-fuzz
  /// cannot link without V8, so these are its fuzz targets.
  mod props {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Everything the loader does with a config's text short of reading files.
    fn load_text(file: &str, text: &str) -> anyhow::Result<Value> {
      let file = Path::new(file);
      let cfg = parse(file, text)?;
      crate::keys::check(file, &cfg.other)?;
      let name = cfg.name.clone().unwrap_or_else(|| "worker".into());
      let dos = namespaces(file, &name, &cfg.durable_objects, &cfg.migrations)?;
      let eval =
        cellhost_compat::resolve(cfg.compatibility_date.as_deref(), &cfg.compatibility_flags)
          .on("allow_eval_during_startup");
      // What the Worker gets, as one comparable value.
      Ok(json!({
        "name": cfg.name, "main": cfg.main, "date": cfg.compatibility_date,
        "flags": cfg.compatibility_flags, "vars": cfg.vars, "eval": eval,
        "dos": dos.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>(),
        "other": cfg.other,
      }))
    }

    /// Any JSON value a config could hold (no null: TOML has none).
    fn value() -> impl Strategy<Value = Value> {
      let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
          .prop_filter("finite", |f| f.is_finite())
          .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        "[a-z0-9 /*\"\\\\,\\]\\}\\n-]{0,10}".prop_map(Value::from),
      ];
      leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
          prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
          prop::collection::btree_map(any::<String>(), inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
      })
    }

    fn class() -> impl Strategy<Value = String> {
      prop::sample::select(vec!["A", "B", "Counter"]).prop_map(str::to_string)
    }

    /// A wrangler config: the keys cellhost reads, with sometimes a key it refuses or warns
    /// about, and durable_objects/migrations that may or may not agree.
    fn config() -> impl Strategy<Value = Value> {
      let binding = (class(), class(), prop::option::weighted(0.1, "[a-z]{1,4}")).prop_map(
        |(name, class_name, script)| {
          let mut b = json!({ "name": name, "class_name": class_name });
          if let Some(s) = script {
            b["script_name"] = s.into();
          }
          b
        },
      );
      let migration = (
        prop::option::of("v[0-9]"),
        prop::collection::vec(class(), 0..2),
        prop::collection::vec(class(), 0..2),
        prop::option::weighted(0.1, Just(json!([{ "from": "A", "to": "B" }]))),
      )
        .prop_map(|(tag, kv, sqlite, renamed)| {
          let mut m = json!({ "new_classes": kv, "new_sqlite_classes": sqlite });
          if let Some(t) = tag {
            m["tag"] = t.into();
          }
          if let Some(r) = renamed {
            m["renamed_classes"] = r;
          }
          m
        });
      (
        prop::option::of(any::<String>()),
        prop::option::of("[a-z/.]{1,12}"),
        prop::option::of(prop_oneof![
          "20[0-9]{2}-[01][0-9]-[0-3][0-9]",
          any::<String>()
        ]),
        prop::collection::vec(
          prop_oneof![
            Just("allow_eval_during_startup".to_string()),
            Just("disallow_eval_during_startup".to_string()),
            any::<String>(),
          ],
          0..3,
        ),
        prop::collection::btree_map(any::<String>(), value(), 0..4),
        prop::collection::vec(binding, 0..3),
        prop::collection::vec(migration, 0..3),
        prop::option::weighted(
          0.2,
          (
            prop::sample::select(vec!["kv_namespaces", "routes", "observability", "zzz"]),
            value(),
          ),
        ),
      )
        .prop_map(
          |(name, main, date, flags, vars, bindings, migrations, extra)| {
            let mut c = json!({
              "compatibility_flags": flags, "vars": vars,
              "durable_objects": { "bindings": bindings }, "migrations": migrations,
            });
            for (k, v) in [("name", name), ("main", main), ("compatibility_date", date)] {
              if let Some(v) = v {
                c[k] = v.into();
              }
            }
            if let Some((k, v)) = extra {
              c[k] = v;
            }
            c
          },
        )
    }

    /// `v` as JSONC: every gap between tokens may hold whitespace or a comment (comments
    /// holding quotes, slashes, commas and brackets), and containers may end with a comma.
    fn jsonc(v: &Value, deco: &mut dyn Iterator<Item = u8>, out: &mut String) {
      const GAPS: [&str; 8] = [
        "",
        " ",
        "\n\t",
        "// a \"line\" comment, ] } /* \n",
        "/* a block \"comment\" , ] } // */",
        "/**/",
        "/* multi\nline */ ",
        "//\n",
      ];
      fn gap(out: &mut String, deco: &mut dyn Iterator<Item = u8>) {
        out.push_str(GAPS[deco.next().unwrap_or(0) as usize % GAPS.len()]);
      }
      gap(out, deco);
      match v {
        Value::Array(items) => {
          out.push('[');
          for (i, item) in items.iter().enumerate() {
            if i > 0 {
              out.push(',');
            }
            jsonc(item, deco, out);
          }
          if !items.is_empty() && deco.next().unwrap_or(0).is_multiple_of(2) {
            out.push(',');
            gap(out, deco);
          }
          out.push(']');
        }
        Value::Object(map) => {
          out.push('{');
          for (i, (k, item)) in map.iter().enumerate() {
            if i > 0 {
              out.push(',');
            }
            gap(out, deco);
            out.push_str(&Value::from(k.as_str()).to_string());
            gap(out, deco);
            out.push(':');
            jsonc(item, deco, out);
          }
          if !map.is_empty() && deco.next().unwrap_or(0).is_multiple_of(2) {
            out.push(',');
            gap(out, deco);
          }
          out.push('}');
        }
        leaf => out.push_str(&leaf.to_string()),
      }
      gap(out, deco);
    }

    /// Text near a config: JSON and TOML punctuation, comment openers, quotes, escapes.
    fn near_config() -> impl Strategy<Value = String> {
      prop::collection::vec(
        prop_oneof![
          prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            "[[",
            "]]",
            ",",
            ":",
            "=",
            "\"",
            "'",
            "\\",
            "\\\"",
            "//",
            "/*",
            "*/",
            "/",
            "\n",
            " ",
            "#",
            "\"\"\"",
            "'''",
            "name",
            "main",
            "vars",
            "migrations",
            "durable_objects",
            "bindings",
            "class_name",
            "script_name",
            "new_sqlite_classes",
            "renamed_classes",
            "kv_namespaces",
            "1",
            "-0",
            "1e999",
            "true",
            "null",
            "é",
            "\u{0}",
          ])
          .prop_map(str::to_string),
          any::<String>(),
        ],
        0..40,
      )
      .prop_map(|parts| parts.concat())
    }

    proptest! {
      /// Whatever a config file holds, loading it answers (a config or an error).
      #[test]
      fn any_text_loads_or_fails_cleanly(text in prop_oneof![near_config(), any::<String>()]) {
        let _ = load_text("wrangler.toml", &text);
        let _ = load_text("wrangler.jsonc", &text);
      }

      /// Stripping comments and trailing commas leaves plain JSON as it is.
      #[test]
      fn strip_jsonc_keeps_json(v in value()) {
        for text in [v.to_string(), serde_json::to_string_pretty(&v).unwrap()] {
          prop_assert_eq!(strip_jsonc(&text), text);
        }
      }

      /// JSONC with comments and trailing commas anywhere reads as the JSON it decorates.
      #[test]
      fn jsonc_reads_as_its_json(v in config(), deco in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut text = String::new();
        jsonc(&v, &mut deco.into_iter(), &mut text);
        let stripped = strip_jsonc(&text);
        let back: Value = serde_json::from_str(&stripped)
          .map_err(|e| TestCaseError::fail(format!("{e}: {stripped}")))?;
        prop_assert_eq!(back, v);
      }

      /// The same config as wrangler.toml and as wrangler.jsonc loads the same (or fails
      /// both ways).
      #[test]
      fn toml_and_jsonc_agree(v in config()) {
        let Ok(toml_text) = toml::to_string(&v) else {
          return Ok(()); // a value TOML cannot write
        };
        let from_toml = load_text("wrangler.toml", &toml_text).map_err(|e| format!("{e:#}"));
        let from_json = load_text("wrangler.jsonc", &v.to_string()).map_err(|e| format!("{e:#}"));
        match (&from_toml, &from_json) {
          (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{}", toml_text),
          (Err(_), Err(_)) => {}
          _ => prop_assert!(false, "{from_toml:?} vs {from_json:?}\n{toml_text}"),
        }
      }

      /// `.dev.vars`: never panics; a quoted value comes back as written.
      #[test]
      fn dotenv_values_round_trip(
        text in any::<String>(),
        key in "[A-Za-z_][A-Za-z0-9_]{0,8}",
        value in "[^\\\\\\n\\r]{0,16}",
        export in any::<bool>(),
      ) {
        let _ = parse_dotenv(&text);
        let line = format!("{}{key} = \"{value}\"\n", if export { "export " } else { "" });
        prop_assert_eq!(parse_dotenv(&line), vec![(key, value)]);
      }
    }
  }
}

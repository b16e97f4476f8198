//! Reading a Worker's configuration the way wrangler does: `wrangler.toml`
//! or `wrangler.jsonc` (name, main, compatibility_date, compatibility_flags,
//! vars) and `.dev.vars` for secrets.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cellhost_host::{Namespace, WorkerSpec};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct Worker {
  pub name: String,
  pub spec: WorkerSpec,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WranglerConfig {
  name: Option<String>,
  main: Option<String>,
  compatibility_date: Option<String>,
  compatibility_flags: Vec<String>,
  vars: Map<String, Value>,
  durable_objects: DurableObjects,
  migrations: Vec<Migration>,
  /// Everything else: refused or warned about by name (`keys`).
  #[serde(flatten)]
  other: std::collections::BTreeMap<String, Value>,
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
    let text = std::fs::read_to_string(&f)?;
    let cfg: WranglerConfig = toml::from_str(&text).with_context(|| format!("{}", f.display()))?;
    (f, cfg)
  } else if let Some(f) = ["wrangler.jsonc", "wrangler.json"]
    .iter()
    .map(|n| dir.join(n))
    .find(|f| f.exists())
  {
    let text = std::fs::read_to_string(&f)?;
    let cfg: WranglerConfig =
      serde_json::from_str(&strip_jsonc(&text)).with_context(|| format!("{}", f.display()))?;
    (f, cfg)
  } else {
    bail!(
      "{}: no wrangler.toml, wrangler.jsonc or wrangler.json here",
      dir.display()
    );
  };
  crate::keys::check(&file, &cfg.other)?;
  let Some(main) = cfg.main else {
    bail!(
      "{}: `main` is missing (the Worker's entry file)",
      file.display()
    );
  };
  if cfg.compatibility_date.is_none() {
    tracing::warn!(
      "{}: no compatibility_date; using today's behaviour",
      file.display()
    );
  }
  crate::flags::check(
    &file,
    cfg.compatibility_date.as_deref(),
    &cfg.compatibility_flags,
  );
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
  let mut worker = spec(name, dir.join(main), env, dos, data_dir)?;
  worker.spec.eval_during_startup =
    eval_during_startup(cfg.compatibility_date.as_deref(), &cfg.compatibility_flags);
  Ok(worker)
}

/// workerd's `allow_eval_during_startup`: on from 2025-06-01 (or by flag),
/// code generation from strings works while the Worker's top level runs.
fn eval_during_startup(date: Option<&str>, flags: &[String]) -> bool {
  let flag = |f: &str| flags.iter().any(|x| x == f);
  if flag("disallow_eval_during_startup") {
    return false;
  }
  flag("allow_eval_during_startup") || date.is_none_or(|d| d >= "2025-06-01")
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
    name,
    spec: WorkerSpec {
      main,
      format,
      env,
      durable_objects,
      data_dir,
      fleet: None,
      eval_during_startup: true,
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
}

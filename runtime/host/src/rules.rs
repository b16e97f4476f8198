//! Wrangler's module rules: the type of each module of a Worker, decided by
//! the first rule whose glob matches the module's name (its path relative
//! to the Worker's base directory). The config's `[[rules]]` come first,
//! then wrangler's defaults; once a rule of a type without `fallthrough`
//! has been listed, later rules of that type are dropped, with a warning,
//! as wrangler drops them.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleKind {
  EsModule,
  CommonJs,
  Text,
  Data,
  CompiledWasm,
  Json,
}

impl ModuleKind {
  /// A rule's `type`, as wrangler spells it.
  pub fn parse(name: &str) -> Result<ModuleKind, String> {
    Ok(match name {
      "ESModule" => ModuleKind::EsModule,
      "CommonJS" => ModuleKind::CommonJs,
      "Text" => ModuleKind::Text,
      "Data" => ModuleKind::Data,
      "CompiledWasm" => ModuleKind::CompiledWasm,
      "PythonModule" | "PythonRequirement" => {
        return Err(format!(
          "module type {name} (Python Workers) is not supported by cellhost"
        ));
      }
      other => {
        return Err(format!(
          "unknown module type {other:?} (wrangler's types are ESModule, CommonJS, CompiledWasm, Text, Data and PythonModule)"
        ));
      }
    })
  }

  pub fn name(self) -> &'static str {
    match self {
      ModuleKind::EsModule => "ESModule",
      ModuleKind::CommonJs => "CommonJS",
      ModuleKind::Text => "Text",
      ModuleKind::Data => "Data",
      ModuleKind::CompiledWasm => "CompiledWasm",
      ModuleKind::Json => "JSON",
    }
  }

  /// The import attribute type under which the loader answers a module's
  /// value (see `loader.rs`); `None` for JavaScript modules.
  pub fn value_type(self) -> Option<&'static str> {
    match self {
      ModuleKind::EsModule | ModuleKind::CommonJs => None,
      ModuleKind::Text => Some("cellhost-Text"),
      ModuleKind::Data => Some("cellhost-Data"),
      ModuleKind::CompiledWasm => Some("cellhost-CompiledWasm"),
      ModuleKind::Json => Some("cellhost-JSON"),
    }
  }

  pub fn from_value_type(ty: &str) -> Option<ModuleKind> {
    [
      ModuleKind::Text,
      ModuleKind::Data,
      ModuleKind::CompiledWasm,
      ModuleKind::Json,
    ]
    .into_iter()
    .find(|k| k.value_type() == Some(ty))
  }
}

/// One `[[rules]]` entry of a config.
#[derive(Clone, Debug)]
pub struct Rule {
  pub kind: ModuleKind,
  pub globs: Vec<String>,
  pub fallthrough: bool,
}

/// wrangler's default rules, after the config's (those for JavaScript are
/// the ones wrangler applies to unbundled directories; a bundle is one of
/// them).
fn defaults() -> Vec<Rule> {
  let rule = |kind, globs: &[&str]| Rule {
    kind,
    globs: globs.iter().map(|g| g.to_string()).collect(),
    fallthrough: false,
  };
  vec![
    rule(ModuleKind::Text, &["**/*.txt", "**/*.html", "**/*.sql"]),
    rule(ModuleKind::Data, &["**/*.bin"]),
    rule(ModuleKind::CompiledWasm, &["**/*.wasm", "**/*.wasm?module"]),
    rule(ModuleKind::EsModule, &["**/*.js", "**/*.mjs"]),
    rule(ModuleKind::CommonJs, &["**/*.cjs"]),
  ]
}

#[derive(Debug)]
pub struct ModuleRules {
  rules: Vec<(ModuleKind, Vec<glob::Pattern>)>,
}

impl Default for ModuleRules {
  fn default() -> Self {
    ModuleRules::new(&[]).expect("the default rules parse").0
  }
}

impl ModuleRules {
  /// The config's rules then wrangler's defaults, and a warning for each
  /// rule dropped because an earlier one of its type had no `fallthrough`.
  pub fn new(config: &[Rule]) -> Result<(ModuleRules, Vec<String>), String> {
    let mut done: Vec<ModuleKind> = Vec::new();
    let mut rules = Vec::new();
    let mut warnings = Vec::new();
    for (i, rule) in config.iter().chain(defaults().iter()).enumerate() {
      if done.contains(&rule.kind) {
        if i < config.len() {
          warnings.push(format!(
            "module rule {} ({} {:?}) is ignored: an earlier {} rule has no fallthrough = true",
            i + 1,
            rule.kind.name(),
            rule.globs,
            rule.kind.name()
          ));
        }
        continue;
      }
      let mut globs = Vec::new();
      for g in &rule.globs {
        globs.push(
          glob::Pattern::new(g)
            .map_err(|e| format!("module rule glob {g:?} ({}): {e}", rule.kind.name()))?,
        );
      }
      if !rule.fallthrough {
        done.push(rule.kind);
      }
      rules.push((rule.kind, globs));
    }
    Ok((ModuleRules { rules }, warnings))
  }

  /// The type of the module named `name` (relative to the base directory,
  /// `/`-separated): the first matching rule's, else JSON for `.json`
  /// files; `None` when nothing matches.
  pub fn kind_of(&self, name: &str) -> Option<ModuleKind> {
    let opts = glob::MatchOptions {
      case_sensitive: true,
      require_literal_separator: true,
      require_literal_leading_dot: false,
    };
    self
      .rules
      .iter()
      .find(|(_, globs)| globs.iter().any(|g| g.matches_with(name, opts)))
      .map(|(kind, _)| *kind)
      .or_else(|| name.ends_with(".json").then_some(ModuleKind::Json))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn rule(kind: ModuleKind, globs: &[&str], fallthrough: bool) -> Rule {
    Rule {
      kind,
      globs: globs.iter().map(|g| g.to_string()).collect(),
      fallthrough,
    }
  }

  #[test]
  fn defaults_as_wrangler() {
    let r = ModuleRules::default();
    for (name, kind) in [
      ("worker.js", Some(ModuleKind::EsModule)),
      ("lib/a.mjs", Some(ModuleKind::EsModule)),
      ("a.cjs", Some(ModuleKind::CommonJs)),
      ("chat.html", Some(ModuleKind::Text)),
      ("deep/dir/q.sql", Some(ModuleKind::Text)),
      ("x.txt", Some(ModuleKind::Text)),
      ("blob.bin", Some(ModuleKind::Data)),
      ("abc123-add.wasm", Some(ModuleKind::CompiledWasm)),
      ("data.json", Some(ModuleKind::Json)),
      ("image.png", None),
      ("a.ts", None),
    ] {
      assert_eq!(r.kind_of(name), kind, "{name}");
    }
  }

  #[test]
  fn config_rules_first_and_fallthrough() {
    // A Data rule for HTML: the default Data rule (*.bin) is dropped.
    let (r, w) = ModuleRules::new(&[rule(ModuleKind::Data, &["**/*.html"], false)]).unwrap();
    assert!(w.is_empty());
    assert_eq!(r.kind_of("chat.html"), Some(ModuleKind::Data));
    assert_eq!(r.kind_of("blob.bin"), None);
    // With fallthrough the default one stays.
    let (r, _) = ModuleRules::new(&[rule(ModuleKind::Data, &["**/*.html"], true)]).unwrap();
    assert_eq!(r.kind_of("blob.bin"), Some(ModuleKind::Data));
    // A second rule of a type after one without fallthrough: warned, dropped.
    let (r, w) = ModuleRules::new(&[
      rule(ModuleKind::Text, &["**/*.md"], false),
      rule(ModuleKind::Text, &["**/*.csv"], false),
    ])
    .unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("module rule 2"), "{w:?}");
    assert_eq!(r.kind_of("a.md"), Some(ModuleKind::Text));
    assert_eq!(r.kind_of("a.csv"), None);
    assert_eq!(r.kind_of("a.txt"), None, "the default Text rule went too");
    // `*` does not cross directories.
    let (r, _) = ModuleRules::new(&[rule(ModuleKind::Text, &["*.md"], false)]).unwrap();
    assert_eq!(r.kind_of("a.md"), Some(ModuleKind::Text));
    assert_eq!(r.kind_of("docs/a.md"), None);
  }

  #[test]
  fn types_by_name() {
    assert_eq!(ModuleKind::parse("Data"), Ok(ModuleKind::Data));
    assert!(
      ModuleKind::parse("PythonModule")
        .unwrap_err()
        .contains("Python")
    );
    assert!(ModuleKind::parse("Blob").unwrap_err().contains("\"Blob\""));
    assert!(ModuleRules::new(&[rule(ModuleKind::Text, &["[oops"], false)]).is_err());
  }
}

//! What a Worker can reach of its host. `tests/sandbox/globals.js` lists
//! every own property and symbol of `globalThis` (and its prototype chain)
//! and of the objects the runtime hands to user code; its output on workerd
//! is recorded in `tests/sandbox/workerd-globals.json`. cellhost may lack
//! some of workerd's names (those are compatibility gaps, tracked
//! elsewhere), but it must not offer anything workerd does not — no
//! runtime internals, ops or embedder objects — except the few listed
//! below, each a harmless implementation detail of Deno's Web APIs.
//! The differential fixtures `sandbox_*` compare the rest with workerd
//! (`Deno`, `import()` of host files, code generation from strings).

mod support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::*;

/// Keys cellhost shows that workerd does not, by section, with why each is
/// not a way out of the sandbox.
const KNOWN: &[(&str, &str, &str)] = &[
  (
    "globalThis",
    "Symbol()",
    "deno_web's EventTarget keeps its listeners under an unregistered symbol",
  ),
  (
    "globalThis",
    "Symbol([[webidl.brand]])",
    "deno_webidl's brand, inherited by the global for EventTarget's checks",
  ),
  (
    "globalThis",
    "getParent",
    "deno_web's EventTarget.prototype hook for event paths; returns null",
  ),
  (
    "console",
    "Symbol(isConsoleInstance)",
    "deno_web's console marks its instances",
  ),
  ("console", "indentLevel", "deno_web's console group depth"),
  (
    "crypto",
    "Symbol([[webidl.brand]])",
    "deno_webidl's brand on Web IDL objects",
  ),
  (
    "cryptoSubtle",
    "Symbol([[webidl.brand]])",
    "deno_webidl's brand on Web IDL objects",
  ),
  (
    "performance",
    "Symbol([[webidl.brand]])",
    "deno_webidl's brand on Web IDL objects",
  ),
  (
    "performance",
    "now",
    "workerd's performance.now() (Date.now()), set on the instance",
  ),
  (
    "performance",
    "timeOrigin",
    "workerd's timeOrigin (0), set on the instance",
  ),
];

/// Every property name and symbol a section lists, at any depth.
fn keys(v: &Value, out: &mut BTreeSet<String>) {
  match v {
    Value::Object(m) => {
      for (k, v) in m {
        if (k == "names" || k == "symbols") && v.is_object() {
          out.extend(v.as_object().unwrap().keys().cloned());
        } else {
          keys(v, out);
        }
      }
    }
    Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
    _ => {}
  }
}

#[test]
fn a_worker_sees_nothing_workerd_does_not_offer() {
  let root = repo_root().join("tests/sandbox");
  let workerd: Value =
    serde_json::from_str(&std::fs::read_to_string(root.join("workerd-globals.json")).unwrap())
      .unwrap();
  let src = std::fs::read_to_string(root.join("globals.js")).unwrap();
  let d = project("globals", &src, "[vars]\nGREETING = \"hello\"\n");
  let ch = Cellhost::start(&d, &["--data", &d.join(".data").to_string_lossy()]);
  let r = get(ch.addr, "/");
  assert_eq!(r.status, 200, "{}", r.text());
  let ours: Value = serde_json::from_str(&r.text()).unwrap();
  let mut offending = Vec::new();
  for (section, v) in ours.as_object().unwrap() {
    if section == "counts" {
      continue;
    }
    let (mut mine, mut theirs) = (BTreeSet::new(), BTreeSet::new());
    keys(v, &mut mine);
    if let Some(w) = workerd.get(section) {
      keys(w, &mut theirs);
    }
    for k in &mine {
      // Whatever the section, nothing may name the embedding runtime.
      let lower = k.to_lowercase();
      assert!(
        !(lower.contains("deno")
          || lower.contains("cellhost")
          || lower.contains("bootstrap")
          || lower.starts_with("op_")),
        "{section}: {k} names the embedding runtime"
      );
      // The navigator's prototype is Object.prototype here: its keys are
      // the language's, not the host's.
      if theirs.contains(k) || section == "navigatorPrototype" {
        continue;
      }
      if !KNOWN.iter().any(|(s, n, _)| s == section && n == k) {
        offending.push(format!("{section}: {k}"));
      }
    }
  }
  assert!(
    offending.is_empty(),
    "cellhost offers what workerd does not:\n{}",
    offending.join("\n")
  );
}

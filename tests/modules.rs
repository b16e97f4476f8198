//! Non-JavaScript modules by wrangler's module rules, through the config:
//! a bundle wrangler built (`deploy --dry-run --outdir`, its `<sha1>-name`
//! files) served with the app's own `[[rules]]`, `base_dir`, and the start
//! failing by name for what is not supported. The module values themselves
//! are compared with workerd by the `modules_types` differential fixture.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

fn dir(name: &str) -> PathBuf {
  let d = std::env::temp_dir().join(format!("cellhost-modules-{}-{name}", std::process::id()));
  let _ = std::fs::remove_dir_all(&d);
  std::fs::create_dir_all(d.join("src")).unwrap();
  d
}

fn write(d: &Path, rel: &str, bytes: &[u8]) {
  let p = d.join(rel);
  std::fs::create_dir_all(p.parent().unwrap()).unwrap();
  std::fs::write(p, bytes).unwrap();
}

/// `(func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add)`
const ADD_WASM: &[u8] = &[
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01,
  0x7f, 0x03, 0x02, 0x01, 0x00, 0x07, 0x07, 0x01, 0x03, 0x61, 0x64, 0x64, 0x00, 0x00, 0x0a, 0x09,
  0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b,
];

const RULES: &str = "[[rules]]\ntype = \"Data\"\nglobs = [\"**/*.html\"]\nfallthrough = true\n";

#[test]
fn a_wrangler_bundle_runs_with_its_module_rules() {
  let d = dir("bundle");
  write(&d, "src/chat.html", b"<h1>chat</h1>\n");
  write(&d, "src/notes.txt", b"hello\n");
  write(&d, "src/blob.bin", &[1, 2, 3]);
  write(&d, "src/add.wasm", ADD_WASM);
  write(
    &d,
    "src/index.js",
    br#"import html from "./chat.html";
import notes from "./notes.txt";
import blob from "./blob.bin";
import add from "./add.wasm";
export default {
  async fetch() {
    const sum = new WebAssembly.Instance(add, {}).exports.add(2, 3);
    const page = new TextDecoder().decode(html);
    return new Response(`${Object.prototype.toString.call(html)} ${JSON.stringify(page)} ${JSON.stringify(notes)} ${blob.byteLength} ${sum}`);
  },
};
"#,
  );
  let toml = |main: &str| {
    format!("name = \"bundle\"\nmain = \"{main}\"\ncompatibility_date = \"2026-04-01\"\n{RULES}")
  };
  write(&d, "wrangler.toml", toml("src/index.js").as_bytes());
  let wrangler = repo_root().join("tests/node_modules/.bin/wrangler");
  assert!(
    wrangler.exists(),
    "wrangler is not installed: run `npm ci --prefix tests`"
  );
  let out = Command::new(&wrangler)
    .args(["deploy", "--dry-run", "--outdir", "dist"])
    .current_dir(&d)
    .env("WRANGLER_SEND_METRICS", "false")
    .output()
    .unwrap();
  assert!(
    out.status.success(),
    "wrangler: {}",
    String::from_utf8_lossy(&out.stderr)
  );
  // wrangler's output: one ESM plus each module as `<sha1>-<name>`.
  let names: Vec<String> = std::fs::read_dir(d.join("dist"))
    .unwrap()
    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
    .collect();
  assert!(
    names
      .iter()
      .any(|n| n.ends_with("-chat.html") && n.len() == 40 + "-chat.html".len()),
    "{names:?}"
  );
  // Served from the bundle with the app's own rules: HTML is Data.
  write(&d, "wrangler.toml", toml("dist/index.js").as_bytes());
  let ch = Cellhost::start(&d, &[]);
  let r = get(ch.addr, "/");
  assert_eq!(r.status, 200, "{}", r.text());
  assert_eq!(
    r.text(),
    r#"[object ArrayBuffer] "<h1>chat</h1>\n" "hello\n" 3 5"#
  );
  drop(ch);
  // The same bundle without the rule: HTML is Text by wrangler's defaults.
  write(
    &d,
    "wrangler.toml",
    b"name = \"bundle\"\nmain = \"dist/index.js\"\ncompatibility_date = \"2026-04-01\"\n",
  );
  let ch = Cellhost::start(&d, &[]);
  let r = get(ch.addr, "/");
  assert_eq!(
    r.status,
    500,
    "TextDecoder.decode of a string: {}",
    r.text()
  );
  let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn base_dir_names_modules_from_it() {
  let d = dir("base");
  write(&d, "src/lib/words.txt", b"base dir\n");
  write(&d, "src/lib/add.wasm", ADD_WASM);
  write(&d, "shared/extra.txt", b"outside\n");
  write(
    &d,
    "src/lib/worker.js",
    br#"import words from "../lib/words.txt";
import add from "./add.wasm?module";
export default {
  async fetch() {
    if (!(add instanceof WebAssembly.Module)) throw new Error("not a module");
    let outside;
    try { outside = (await import("../../shared/extra.txt")).default; } catch (e) { outside = `${e.message}`; }
    return new Response(`${JSON.stringify(words)} ${JSON.stringify(outside)}`);
  },
};
"#,
  );
  write(
    &d,
    "wrangler.toml",
    b"name = \"base\"\nmain = \"src/lib/worker.js\"\nbase_dir = \"src\"\ncompatibility_date = \"2026-04-01\"\nfind_additional_modules = true\nno_bundle = true\n",
  );
  let ch = Cellhost::start(&d, &[]);
  let r = get(ch.addr, "/");
  assert_eq!(
    r.text(),
    r#""base dir\n" "No such module \"../../shared/extra.txt\"""#
  );
  drop(ch);
  // main outside base_dir: refused by name.
  write(
    &d,
    "wrangler.toml",
    b"name = \"base\"\nmain = \"src/lib/worker.js\"\nbase_dir = \"shared\"\n",
  );
  let (code, out) = cellhost_fails(&d);
  assert_eq!(code, Some(1), "{out}");
  assert!(out.contains("is not inside base_dir"), "{out}");
  let _ = std::fs::remove_dir_all(&d);
}

/// A start that must fail: name, files, extra config, words the error names.
type Refusal<'a> = (&'a str, &'a [(&'a str, &'a [u8])], &'a str, &'a [&'a str]);

#[test]
fn what_is_not_supported_stops_the_start_by_name() {
  let cases: &[Refusal] = &[
    (
      "python",
      &[("src/worker.js", b"export default {}")],
      "[[rules]]\ntype = \"PythonModule\"\nglobs = [\"**/*.py\"]\n",
      &["PythonModule", "not supported"],
    ),
    (
      "unknown-type",
      &[("src/worker.js", b"export default {}")],
      "[[rules]]\ntype = \"Blob\"\nglobs = [\"**/*.x\"]\n",
      &["\"Blob\"", "rules[0]"],
    ),
    (
      "unknown-key",
      &[("src/worker.js", b"export default {}")],
      "[[rules]]\ntype = \"Text\"\nglobs = [\"**/*.md\"]\nfallthru = true\n",
      &["fallthru"],
    ),
    (
      "commonjs",
      &[
        (
          "src/worker.js",
          b"import x from \"./legacy.cjs\"; export default {}",
        ),
        ("src/legacy.cjs", b"module.exports = 1"),
      ],
      "",
      &["legacy.cjs", "CommonJS"],
    ),
    (
      "no-rule",
      &[
        (
          "src/worker.js",
          b"import logo from \"./logo.png\"; export default {}",
        ),
        ("src/logo.png", b"\x89PNG"),
      ],
      "",
      &["logo.png", "[[rules]]"],
    ),
    (
      "bad-wasm",
      &[
        (
          "src/worker.js",
          b"import m from \"./broken.wasm\"; export default {}",
        ),
        ("src/broken.wasm", b"\0asm not really"),
      ],
      "",
      &["CompiledWasm", "broken.wasm"],
    ),
    (
      "bad-json",
      &[
        (
          "src/worker.js",
          b"import j from \"./conf.json\"; export default {}",
        ),
        ("src/conf.json", b"{\"a\": }"),
      ],
      "",
      &["JSON", "conf.json", "not valid JSON"],
    ),
  ];
  for (name, files, extra, needles) in cases {
    let d = dir(name);
    for (rel, bytes) in *files {
      write(&d, rel, bytes);
    }
    write(
      &d,
      "wrangler.toml",
      format!(
        "name = \"x\"\nmain = \"src/worker.js\"\ncompatibility_date = \"2026-04-01\"\n{extra}"
      )
      .as_bytes(),
    );
    let (code, out) = cellhost_fails(&d);
    assert_ne!(code, Some(0), "{name}: {out}");
    for n in *needles {
      assert!(out.contains(n), "{name}: no {n:?} in {out}");
    }
    let _ = std::fs::remove_dir_all(&d);
  }
}

//! Service bindings and `ctx.exports`: what the differential fixtures
//! (`service_*`, `ctx_exports*`) cannot show because workerd would refuse to
//! start: configs and modules refused at start with a message naming the
//! binding or export, and `ctx.exports` by date/flag; and bindings to
//! another Worker of the process (`cellhost run A B`) against `wrangler dev
//! -c A -c B`.

mod support;

use support::*;

const WORKER: &str = r#"
import { WorkerEntrypoint } from "cloudflare:workers";
export class Api extends WorkerEntrypoint { ping() { return "pong"; } }
export default {
  async fetch(req, env, ctx) {
    const u = new URL(req.url);
    if (u.pathname === "/exports") return new Response(String(ctx.exports === undefined ? "none" : Object.keys(ctx.exports)));
    return new Response(await env.API.ping());
  },
};
"#;

fn fails_with(name: &str, worker: &str, toml: &str, expected: &str) {
  let dir = project(name, worker, toml);
  let (code, out) = cellhost_fails(&dir);
  assert_eq!(code, Some(1), "{name}: {out}");
  assert!(
    out.contains(expected),
    "{name}: expected {expected:?} in:\n{out}"
  );
}

#[test]
fn bindings_refused_at_start_by_name() {
  fails_with(
    "svc-other",
    WORKER,
    "[[services]]\nbinding = \"API\"\nservice = \"billing\"\n",
    "service binding API names Worker \"billing\", which is not running here",
  );
  fails_with(
    "svc-key",
    WORKER,
    "[[services]]\nbinding = \"API\"\nservice = \"svc-key\"\nenvironment = \"production\"\n",
    "unknown field `environment`",
  );
  fails_with(
    "svc-missing",
    WORKER,
    "[[services]]\nbinding = \"API\"\nservice = \"svc-missing\"\nentrypoint = \"Nope\"\n",
    "Worker \"svc-missing\"'s binding \"API\" refers to service \"svc-missing\" with a named entrypoint \"Nope\", but \"svc-missing\" has no such named entrypoint.",
  );
  fails_with(
    "svc-props",
    WORKER,
    "[[services]]\nbinding = \"API\"\nservice = \"svc-props\"\nentrypoint = \"Api\"\nprops = 3\n",
    "service binding API: props must be an object",
  );
  fails_with(
    "export-type",
    "export const VERSION = \"1\";\nexport default { fetch() { return new Response(VERSION); } };\n",
    "",
    "Incorrect type for map entry 'VERSION': the provided value is not of type 'function or ExportedHandler'.",
  );
}

#[test]
fn self_binding_and_ctx_exports_by_date() {
  let toml = "[[services]]\nbinding = \"API\"\nservice = \"svc-ok\"\nentrypoint = \"Api\"\n";
  let dir = project("svc-ok", WORKER, toml);
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  assert_eq!(get(ch.addr, "/").text(), "pong");
  assert_eq!(get(ch.addr, "/exports").text(), "default,Api");
  drop(ch);
  // Before 2025-11-17 ctx.exports is there only by flag.
  let old = std::fs::read_to_string(dir.join("wrangler.toml"))
    .unwrap()
    .replace("2026-11-01", "2025-06-01");
  std::fs::write(dir.join("wrangler.toml"), &old).unwrap();
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  assert_eq!(get(ch.addr, "/exports").text(), "none");
  assert_eq!(
    get(ch.addr, "/").text(),
    "pong",
    "the binding does not need ctx.exports"
  );
  drop(ch);
  let flagged = old.replace(
    "compatibility_date = \"2025-06-01\"",
    "compatibility_date = \"2025-06-01\"\ncompatibility_flags = [\"enable_ctx_exports\"]",
  );
  std::fs::write(dir.join("wrangler.toml"), flagged).unwrap();
  let ch = Cellhost::start(&dir, &["--data", dir.join(".data").to_str().unwrap()]);
  assert_eq!(get(ch.addr, "/exports").text(), "default,Api");
}

/// `tests/services/two_workers`: `front` binds `back` (its default export
/// and a named entrypoint with props); every answer as on wrangler dev.
#[test]
fn another_worker_through_service_bindings_as_on_wrangler_dev() {
  let tmp = tempdir("two-workers");
  copy_dir(&repo_root().join("tests/services/two_workers"), &tmp);
  let front = tmp.join("front");
  let back = tmp.join("back");
  let reqs = requests(&front.join("worker.js"));
  let theirs: Vec<String> = {
    let (_dev, addr) = wrangler_dev(
      &front,
      &["-c", "wrangler.jsonc", "-c", "../back/wrangler.jsonc"],
    );
    reqs.iter().map(|r| answer(addr, r)).collect()
  };
  let data = tmp.join(".data");
  let ch = Cellhost::start(
    &front,
    &["--data", data.to_str().unwrap(), back.to_str().unwrap()],
  );
  let mut diffs = Vec::new();
  for (r, theirs) in reqs.iter().zip(&theirs) {
    let ours = answer(ch.addr, r);
    if &ours != theirs {
      diffs.push(format!(
        "{} {}\n--- wrangler dev\n{theirs}\n--- cellhost\n{ours}\n",
        r.0, r.1
      ));
    }
  }
  assert!(diffs.is_empty(), "{}\n{}", diffs.join("\n"), ch.log());
  assert!(ch.log().contains("back runs beside it"), "{}", ch.log());
}

//! `Cloudflare.compatibilityFlags` on cellhost and on workerd, for
//! compatibility dates across the years and for named enable, disable and
//! implying flags: the same object, flag for flag; and what the flags
//! decide of three behaviours, Request's `cache` option, whether a
//! multipart body's file part is read as a File and whether node:http has
//! its server. (The `workers_scope`
//! fixture compares the rest of the `Cloudflare` global at one date.)

mod support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

/// `/`: the flags; `/cache`, `/formdata` and `/httpserver`: what they
/// decide of Request's cache option, of a multipart file part and of
/// node:http's server.
const WORKER: &str = r#"
const MULTIPART = '--b\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\n\r\nhi\r\n--b--';
export default {
  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (path === "/cache") {
      const out = [];
      for (const cache of ["no-store", "no-cache", "default", "reload"]) {
        try {
          out.push(`${cache}: ${new Request("https://x/", { cache }).cache}`);
        } catch (e) {
          out.push(`${cache}: ${e.name}: ${e.message}`);
        }
      }
      return new Response(out.join("\n"));
    }
    if (path === "/formdata") {
      const headers = { "content-type": "multipart/form-data; boundary=b" };
      const part = (await new Request("https://x/", { method: "POST", body: MULTIPART, headers }).formData()).get("f");
      return new Response(typeof part === "string" ? `string ${part}` : `file ${part.name} ${await part.text()}`);
    }
    if (path === "/httpserver") {
      const http = globalThis.process?.getBuiltinModule?.("node:http");
      if (!http) return new Response("no node:http");
      const out = [];
      for (const f of [() => http.createServer(), () => new http.Server(), () => new http.ServerResponse({})]) {
        try { f(); out.push("ok"); } catch (e) { out.push(`${e.code}: ${e.message}`); }
      }
      return new Response(out.join(", "));
    }
    return Response.json(Cloudflare.compatibilityFlags);
  },
};
"#;

/// (compatibility date, named flags).
const CASES: &[(&str, &[&str])] = &[
  ("2021-06-01", &[]),
  ("2023-03-01", &[]),
  ("2024-09-23", &["nodejs_compat"]),
  ("2025-01-01", &["nodejs_compat"]),
  // node:http without its server (from 2025-09-01).
  ("2025-08-20", &["nodejs_compat"]),
  (
    "2025-10-01",
    &["nodejs_compat", "disable_nodejs_http_modules"],
  ),
  ("2022-01-01", &["streams_enable_constructors", "nodejs_als"]),
  ("2026-11-01", &[]),
  (
    "2026-11-01",
    &[
      "url_original",
      "no_nodejs_compat",
      "enable_nodejs_fs_module",
    ],
  ),
];

#[test]
fn compatibility_flags_are_workerds_for_each_date_and_flag() {
  let tmp = tempdir("compat-flags");
  std::fs::write(tmp.join("w.js"), WORKER).unwrap();
  // One workerd, a service per case.
  let ports: Vec<u16> = CASES.iter().map(|_| free_port()).collect();
  let mut cfg = String::from("using Workerd = import \"/workerd/workerd.capnp\";\n");
  let services: Vec<String> = (0..CASES.len())
    .map(|i| format!("(name = \"s{i}\", worker = .w{i})"))
    .collect();
  let sockets: Vec<String> = (ports.iter().enumerate())
    .map(|(i, p)| {
      format!("(name = \"h{i}\", address = \"127.0.0.1:{p}\", http = (), service = \"s{i}\")")
    })
    .collect();
  cfg += &format!(
    "const config :Workerd.Config = (services = [{}], sockets = [{}]);\n",
    services.join(", "),
    sockets.join(", ")
  );
  for (i, (date, flags)) in CASES.iter().enumerate() {
    let flags: Vec<String> = flags.iter().map(|f| format!("{f:?}")).collect();
    cfg += &format!(
      "const w{i} :Workerd.Worker = (modules = [(name = \"w.js\", esModule = embed \"w.js\")], compatibilityDate = \"{date}\", compatibilityFlags = [{}]);\n",
      flags.join(", ")
    );
  }
  std::fs::write(tmp.join("config.capnp"), cfg).unwrap();
  let mut workerd = Command::new(workerd_bin())
    .arg("serve")
    .arg(tmp.join("config.capnp"))
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(tmp.join("workerd.log")).unwrap())
    .spawn()
    .expect("starting workerd");
  let mut failures = Vec::new();
  for (i, (date, flags)) in CASES.iter().enumerate() {
    let waddr: SocketAddr = ([127, 0, 0, 1], ports[i]).into();
    assert!(
      wait_port(waddr, Duration::from_secs(20)),
      "workerd: {}",
      std::fs::read_to_string(tmp.join("workerd.log")).unwrap_or_default()
    );
    let want = get(waddr, "/").text();
    assert!(keys(&want).len() > 200, "{want}");
    let dir = tmp.join(format!("c{i}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.js"), WORKER).unwrap();
    let named: Vec<String> = flags.iter().map(|f| format!("{f:?}")).collect();
    std::fs::write(
      dir.join("wrangler.toml"),
      format!(
        "name = \"w\"\nmain = \"w.js\"\ncompatibility_date = \"{date}\"\ncompatibility_flags = [{}]\n",
        named.join(", ")
      ),
    )
    .unwrap();
    let ch = Cellhost::start(&dir, &["--data", &dir.join(".data").to_string_lossy()]);
    let got = get(ch.addr, "/").text();
    for path in ["/cache", "/formdata", "/httpserver"] {
      let (want, got) = (get(waddr, path).text(), get(ch.addr, path).text());
      assert!(
        want.contains(':') || want.contains(' '),
        "{date} {path}: {want}"
      );
      if want != got {
        failures.push(format!(
          "{date} {flags:?}: {path}: workerd {want:?}, cellhost {got:?}"
        ));
      }
    }
    let parse =
      |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap_or_else(|e| panic!("{e}: {t}"));
    let (w, c) = (parse(&want), parse(&got));
    if keys(&want) != keys(&got) {
      failures.push(format!(
        "{date} {flags:?}: the flags differ in name or order"
      ));
    }
    for (k, v) in w.as_object().unwrap() {
      if c.get(k) != Some(v) {
        failures.push(format!(
          "{date} {flags:?}: {k} is {v} on workerd, {:?} on cellhost",
          c.get(k)
        ));
      }
    }
  }
  let _ = workerd.kill();
  let _ = workerd.wait();
  assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The keys of a flat JSON object of booleans, in the order written.
fn keys(text: &str) -> Vec<&str> {
  (text.trim_matches(['{', '}']).split(','))
    .map(|kv| kv.split(':').next().unwrap_or("").trim_matches('"'))
    .collect()
}

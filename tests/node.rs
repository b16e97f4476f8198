//! Node.js compatibility (`nodejs_compat`, deno_node underneath): the
//! modules reach nothing of the host (files, listeners, processes, the
//! host's environment and resolver), the compatibility flags decide what is
//! there, and process.env holds the Worker's text bindings. What the
//! modules compute is compared with workerd by the `node_*` differential
//! fixtures.

mod support;

use support::*;

/// Every way out that deno_node's polyfills would take in Deno: each must
/// fail in the Worker (or stay in node:fs's in-memory file system), and the
/// process must not listen on the ports it tried.
const ESCAPES: &str = r#"
import fs from "node:fs";
import fsp from "node:fs/promises";
import net from "node:net";
import http from "node:http";
import dns from "node:dns/promises";
import os from "node:os";
const tries = {
  readFile: () => fs.readFileSync("/etc/hostname", "utf8"),
  // node:fs is workerd's in-memory file system: its /tmp takes the write
  // (the host's /tmp must not), its root is its own, `..` stays inside.
  escapeBundle: () => fs.readFileSync("/bundle/../../etc/hostname", "utf8"),
  symlinkOut: () => { fs.symlinkSync("/etc/hostname", "/tmp/link"); return fs.readFileSync("/tmp/link", "utf8"); },
  readFileAsync: () => fsp.readFile("/etc/hostname", "utf8"),
  writeFile: () => fs.writeFileSync("/tmp/cellhost-node-escape", "x"),
  readdir: () => fs.readdirSync("/"),
  netListen: () => new Promise((ok, no) => {
    const s = net.createServer();
    s.on("error", no);
    s.listen(Number(PORT_A), "127.0.0.1", () => ok("listening"));
  }),
  httpListen: () => new Promise((ok, no) => {
    const s = http.createServer(() => {});
    s.on("error", no);
    s.listen(Number(PORT_B), "127.0.0.1", () => ok("listening"));
  }),
  dns: () => dns.lookup("localhost"),
  // workerd's fixed answers (cellhost's too) say nothing of the host.
  hostInfo: () => {
    const got = [os.cpus().length, os.hostname(), os.totalmem(), os.homedir(), JSON.stringify(os.userInfo()), os.loadavg().join()];
    if (got.join() === "0,localhost,0,/tmp/,{},0,0,0") throw new Error("fixed");
    return got;
  },
  setuid: () => process.setuid(0),
  setgid: () => process.setgid(0),
  loadEnvFile: () => process.loadEnvFile("/etc/hostname"),
  exit: () => process.exit(3),
  kill: () => process.kill(1, "SIGTERM"),
  chdir: () => process.chdir("/"),
  binding: () => process.binding("fs").open("/etc/hostname"),
  hostEnv: () => process.env.PATH ?? process.env.HOME ?? "none",
  // The modules behind node:* that may reach deno_node's internals.
  internals: () => import("node:cellhost/internals"),
  stubHelpers: () => import("cellhost-node:_errors"),
  httpServerModule: () => import("cellhost-node:_http_server"),
  rawModule: () => import("cellhost-node-raw:http2"),
  wrapper: () => import("cellhost-node:http2"),
  extCore: () => import("ext:core/mod.js"),
};
export default {
  async fetch(request, env) {
    const out = {};
    for (const [k, f] of Object.entries(tries)) {
      try {
        const v = await f();
        out[k] = k === "hostEnv" && v === "none" ? "denied" : "REACHED " + JSON.stringify(v);
      } catch (e) {
        out[k] = "denied";
      }
    }
    out.env = process.env;
    return Response.json(out);
  },
};
"#;

#[test]
fn node_modules_reach_nothing_of_the_host() {
  let (a, b) = (free_port(), free_port());
  let src = ESCAPES
    .replace("PORT_A", &format!("\"{a}\""))
    .replace("PORT_B", &format!("\"{b}\""));
  let d = project(
    "node-escapes",
    &src,
    "compatibility_flags = [\"nodejs_compat\"]\n[vars]\nGREETING = \"hi\"\nCONF = { a = 1 }\n",
  );
  let _ = std::fs::remove_file("/tmp/cellhost-node-escape");
  let ch = Cellhost::start(&d, &["--data", &d.join(".data").to_string_lossy()]);
  let r = get(ch.addr, "/");
  assert_eq!(r.status, 200, "{}", r.text());
  let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
  // What the in-memory file system answers (none of it the host's).
  let virtual_fs = [
    ("writeFile", "REACHED 1"),
    ("readdir", "REACHED [\"bundle\",\"tmp\",\"dev\"]"),
    ("chdir", "REACHED undefined"),
    // node:http's server listens in the isolate's port table only (as on
    // workerd); the process must not hold the port (checked below).
    ("httpListen", "REACHED \"listening\""),
  ];
  for (k, got) in v.as_object().unwrap() {
    if k != "env" {
      let want = virtual_fs
        .iter()
        .find(|(n, _)| n == k)
        .map_or("denied", |(_, w)| *w);
      assert_eq!(got, want, "{k}: {}", r.text());
    }
  }
  // workerd puts the text bindings in process.env, not the others.
  assert_eq!(
    v["env"],
    serde_json::json!({ "GREETING": "hi" }),
    "{}",
    r.text()
  );
  assert!(!std::path::Path::new("/tmp/cellhost-node-escape").exists());
  // Asked of the process's own sockets: binding the port here would race
  // the other tests' servers, which may be handed the same free port.
  let listening = listening_ports(ch.child.id());
  for port in [a, b] {
    assert!(
      !listening.contains(&port),
      "port {port} was taken by the Worker"
    );
  }
  assert!(listening.contains(&ch.addr.port()), "{listening:?}");
}

#[test]
fn compatibility_flags_decide_what_node_is_there() {
  let worker = r#"
    export default {
      async fetch() {
        const out = { globals: [typeof Buffer, typeof process, typeof setImmediate] };
        for (const m of ["node:buffer", "node:async_hooks", "node:child_process", "node:fs"]) {
          try { await import(m); out[m] = "ok"; } catch (e) { out[m] = e.message; }
        }
        return Response.json(out);
      },
    };
  "#;
  let run = |name: &str, date: &str, toml: &str| {
    let d = project(name, worker, toml);
    let cfg = d.join("wrangler.toml");
    let text = std::fs::read_to_string(&cfg)
      .unwrap()
      .replace("2026-11-01", date);
    std::fs::write(&cfg, text).unwrap();
    let ch = Cellhost::start(&d, &["--data", &d.join(".data").to_string_lossy()]);
    let r = get(ch.addr, "/");
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_str::<serde_json::Value>(&r.text()).unwrap()
  };
  // Before 2026-08-04 and without the flag: no Node.js at all.
  let off = run("node-off", "2025-01-01", "");
  assert_eq!(
    off["globals"],
    serde_json::json!(["undefined", "undefined", "undefined"])
  );
  assert!(
    off["node:buffer"]
      .as_str()
      .unwrap()
      .contains("nodejs_compat"),
    "{off}"
  );
  // nodejs_als: node:async_hooks only.
  let als = run(
    "node-als",
    "2025-01-01",
    "compatibility_flags = [\"nodejs_als\"]\n",
  );
  assert_eq!(als["node:async_hooks"], "ok", "{als}");
  assert!(
    als["node:buffer"].as_str().unwrap().contains("nodejs_als"),
    "{als}"
  );
  assert_eq!(als["globals"][0], "undefined");
  // The flag: modules and globals; a module workerd lacks fails by name.
  let on = run(
    "node-on",
    "2025-01-01",
    "compatibility_flags = [\"nodejs_compat\"]\n",
  );
  assert_eq!(
    on["globals"],
    serde_json::json!(["function", "object", "function"])
  );
  assert_eq!(on["node:buffer"], "ok");
  assert!(
    on["node:child_process"]
      .as_str()
      .unwrap()
      .contains("node:child_process needs a compatibility date from 2026-03-17 or the `enable_nodejs_child_process_module` flag"),
    "{on}"
  );
  // node:fs (workerd's in-memory one) from 2025-09-15, or by its flag.
  assert!(
    on["node:fs"]
      .as_str()
      .unwrap()
      .contains("enable_nodejs_fs_module"),
    "{on}"
  );
  let fs = run(
    "node-fs-flag",
    "2025-01-01",
    "compatibility_flags = [\"nodejs_compat\", \"enable_nodejs_fs_module\", \"enable_nodejs_child_process_module\"]\n",
  );
  assert_eq!(fs["node:fs"], "ok", "{fs}");
  assert_eq!(fs["node:child_process"], "ok", "{fs}");
  // A stub module from its date on, unless its disable flag takes it away.
  let stub = run(
    "node-stub-date",
    "2026-03-17",
    "compatibility_flags = [\"nodejs_compat\"]\n",
  );
  assert_eq!(stub["node:child_process"], "ok", "{stub}");
  let gone = run(
    "node-stub-disabled",
    "2026-03-17",
    "compatibility_flags = [\"nodejs_compat\", \"disable_nodejs_child_process_module\"]\n",
  );
  assert!(
    gone["node:child_process"]
      .as_str()
      .unwrap()
      .contains("enable_nodejs_child_process_module"),
    "{gone}"
  );
  let dated = run(
    "node-fs-date",
    "2025-09-15",
    "compatibility_flags = [\"nodejs_compat\"]\n",
  );
  assert_eq!(dated["node:fs"], "ok", "{dated}");
}

/// No process loads the C++ standard library: ada, the URL parser, takes
/// the few symbols it needs from runtime/url/src/cxx.rs, where loading
/// libstdc++ cost every process about 1.2 MB resident (`bench/hello.sh`).
/// URL parsing works all the same, with and without Node.js compatibility.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn no_process_loads_the_cxx_standard_library() {
  let d = tempdir("no-libstdcxx");
  let worker = "export default { fetch(r) { const u = new URL('../b?x=1#h', 'https://user@EXAMPLE.com:443/a/c'); \
     return new Response(`${u.href} ${new URL(r.url).pathname}`) } }";
  std::fs::write(d.join("worker.js"), worker).unwrap();
  for flags in ["", "compatibility_flags = [\"nodejs_compat\"]\n"] {
    std::fs::write(
      d.join("wrangler.toml"),
      format!("name = \"w\"\nmain = \"worker.js\"\ncompatibility_date = \"2025-01-01\"\n{flags}"),
    )
    .unwrap();
    let ch = Cellhost::start(&d, &["--data", &d.join(".data").to_string_lossy()]);
    let r = get(ch.addr, "/p");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "https://user@example.com/b?x=1#h /p", "{flags}");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", ch.child.id())).unwrap();
    assert!(
      !maps.contains("libstdc++"),
      "the process loaded libstdc++ ({flags}):\n{maps}"
    );
  }
}

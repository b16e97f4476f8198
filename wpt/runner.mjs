// Runs Web Platform Tests (`.any.js` files whose META global= includes a
// worker scope) on cellhost and, in the same run, on workerd, and compares
// each subtest's status with wpt/expectations.json.
//
//   node wpt/runner.mjs [FOLDER|FILE…] [--update] [--jobs N] [--verbose]
//                       [--report-only] [--timeout-ms N] [--runtime cellhost|workerd]
//
// --report-only: compare the results saved by the last run (wpt/.cache/results.json);
// --runtime R: run R only and take the other runtime's results from the last run;
//
// Each test (one file, or one META variant of it) becomes one Worker (a
// service-worker-syntax script, so that WPT's classic scripts run in sloppy
// mode as in a browser; WPT_FORMAT=module makes it an ES module):
// testharness.js, the META script= files and the test, as source text in one
// function that the Worker's fetch handler calls (workerd refuses
// timers and I/O outside a request), plus the same minimal shims on both
// runtimes (`location`, `GLOBAL`, a `fetch` that serves the files the test
// reads relative to its URL). The handler answers the subtests' results as
// JSON. Every test gets a fresh isolate: a `cellhost run` process of its own,
// and a Worker of its own in a workerd process that serves a batch of them.
//
// Plain Node (>= 18), no npm packages. See wpt/README.md.

import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..");
const WPT = process.env.WPT_DIR || path.join(HERE, ".cache", "wpt");
const WORK = path.join(HERE, ".cache", "run");
const EXPECTATIONS = path.join(HERE, "expectations.json");
const RESULTS = path.join(HERE, ".cache", "results.json");

const COMPAT_DATE = "2026-11-01";
// The date implies nodejs_compat on both runtimes; the tests are of the Web
// platform, so it is turned off on both.
const COMPAT_FLAGS = ["no_nodejs_compat"];

// The folders in scope: what Node vendors that a Worker can run. Left out:
// webmessaging (BroadcastChannel, on neither runtime), resource-timing (needs
// WPT's Python server), webstorage, media, interfaces, common, resources
// (no .any.js tests).
const DEFAULT_FOLDERS = [
  "url",
  "encoding",
  "streams",
  "html/webappapis",
  "FileAPI",
  "compression",
  "WebCryptoAPI",
  "webidl",
  "dom/abort",
  "dom/events",
  "console",
  "hr-time",
  "user-timing",
  "performance-timeline",
  "wasm",
];

// The origin the tests see as theirs (`location`), on both runtimes.
const ORIGIN = "http://web-platform.test:8000";

const RUNTIMES = ["cellhost", "workerd"];
let FORMAT = process.env.WPT_FORMAT || "script";
const STATUS = ["PASS", "FAIL", "TIMEOUT", "NOTRUN", "PRECONDITION_FAILED"];
const HARNESS = ["OK", "ERROR", "TIMEOUT", "PRECONDITION_FAILED"];

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  const o = {
    folders: [],
    update: false,
    // One more than the cores: a test waiting on its timers takes no CPU.
    jobs: 1 + (os.availableParallelism ? os.availableParallelism() : os.cpus().length),
    verbose: false,
    reportOnly: false,
    timeoutMs: 30000,
    batch: 12,
    runtimes: RUNTIMES,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--update") o.update = true;
    else if (a === "--verbose" || a === "-v") o.verbose = true;
    else if (a === "--report-only") o.reportOnly = true;
    else if (a === "--jobs" || a === "-j") o.jobs = Number(argv[++i]);
    else if (a === "--timeout-ms") o.timeoutMs = Number(argv[++i]);
    else if (a === "--batch") o.batch = Number(argv[++i]);
    else if (a === "--runtime") {
      // Runs one runtime only; the other's results come from the last run.
      const r = argv[++i];
      if (!RUNTIMES.includes(r)) {
        console.error(`wpt: --runtime ${r}: one of ${RUNTIMES.join(", ")}`);
        process.exit(2);
      }
      o.runtimes = [r];
    }
    else if (a === "--help" || a === "-h") {
      const lines = fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n");
      console.log(lines.slice(0, lines.findIndex((l) => !l.startsWith("//"))).map((l) => l.replace(/^\/\/ ?/, "")).join("\n"));
      process.exit(0);
    } else if (a.startsWith("-")) {
      console.error(`wpt: unknown option ${a}`);
      process.exit(2);
    } else o.folders.push(a.replace(/^wpt\/\.cache\/wpt\//, "").replace(/\/+$/, ""));
  }
  return o;
}

// ---------------------------------------------------------------- discovery

function walk(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.isFile()) out.push(p);
  }
  return out;
}

// WPT's rules (tools/manifest/sourcefile.py, tools/serve/serve.py): no
// global= means "window,dedicatedworker"; "worker" means dedicated, shared
// and service workers; shadowrealm and jsshell scopes are not workers.
function hasWorkerScope(globals) {
  if (globals === null) return true;
  return globals
    .split(",")
    .map((s) => s.trim())
    .some((g) => /^(default|worker|dedicatedworker|sharedworker|serviceworker)(-module)?$/.test(g));
}

function parseMeta(src) {
  const meta = { globals: null, scripts: [], timeout: "normal", title: null, variants: [] };
  for (const line of src.split("\n")) {
    const m = /^\/\/ META: *([a-z]+)=(.*)$/.exec(line.trimEnd());
    if (!m) {
      if (line.startsWith("//") || line.trim() === "") continue;
      break;
    }
    const [, key, value] = m;
    if (key === "global") meta.globals = value;
    else if (key === "script") meta.scripts.push(value.trim());
    else if (key === "timeout") meta.timeout = value.trim();
    else if (key === "title") meta.title = value.trim();
    else if (key === "variant") meta.variants.push(value.trim());
  }
  return meta;
}

function discover(folders) {
  const tests = [];
  for (const folder of folders) {
    const abs = path.join(WPT, folder);
    if (!fs.existsSync(abs)) {
      console.error(`wpt: ${folder}: not in the fetched WPT copy`);
      process.exit(2);
    }
    const files = fs.statSync(abs).isDirectory() ? walk(abs) : [abs];
    for (const f of files.sort()) {
      if (!f.endsWith(".any.js")) continue;
      const rel = path.relative(WPT, f).split(path.sep).join("/");
      const src = fs.readFileSync(f, "utf8");
      const meta = parseMeta(src);
      if (!hasWorkerScope(meta.globals)) continue;
      for (const variant of meta.variants.length ? meta.variants : [""]) {
        tests.push({ id: rel + variant, file: rel, variant, meta });
      }
    }
  }
  return tests;
}

function folderOf(id) {
  const parts = id.split("/");
  if (parts[0] === "html" || parts[0] === "dom") return parts.slice(0, parts[0] === "html" ? 2 : 2).join("/");
  return parts[0];
}

// ---------------------------------------------------------- building a Worker

const CONTENT_TYPES = {
  ".json": "application/json",
  ".js": "text/javascript",
  ".html": "text/html",
  ".htm": "text/html",
  ".txt": "text/plain",
  ".css": "text/css",
  ".xml": "application/xml",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".gif": "image/gif",
  ".jpg": "image/jpeg",
  ".wasm": "application/wasm",
  ".webm": "video/webm",
};
const TEXT_TYPES = new Set([".json", ".js", ".html", ".htm", ".txt", ".css", ".xml", ".svg"]);
const MAX_RESOURCE = 4 << 20;

// Resolves a URL path (as the test would see it) to a file of the WPT copy.
function wptFile(urlPath) {
  const rel = decodeURIComponent(urlPath).replace(/^\/+/, "");
  const p = path.join(WPT, rel);
  if (!p.startsWith(WPT + path.sep)) return null;
  try {
    return fs.statSync(p).isFile() ? p : null;
  } catch {
    return null;
  }
}

// The files a test may fetch: every string literal in the test and its
// scripts that names a file of the WPT copy, resolved against the test's URL
// (as fetch() resolves it).
function resourcesFor(testUrl, sources) {
  const found = new Map();
  const re = /(["'`])((?:\.{1,2}\/|\/)?[\w\-.%/]+\.[A-Za-z0-9]+)(?:\?[^"'`]*)?\1/g;
  for (const src of sources) {
    for (const m of src.matchAll(re)) {
      let u;
      try {
        u = new URL(m[2], testUrl);
      } catch {
        continue;
      }
      if (u.origin !== ORIGIN || found.has(u.pathname)) continue;
      const f = wptFile(u.pathname);
      if (!f || f.endsWith(".any.js") && u.pathname === new URL(testUrl).pathname) continue;
      const size = fs.statSync(f).size;
      if (size > MAX_RESOURCE) continue;
      const ext = path.extname(f).toLowerCase();
      const type = CONTENT_TYPES[ext] || "application/octet-stream";
      const buf = fs.readFileSync(f);
      found.set(u.pathname, TEXT_TYPES.has(ext) ? { type, text: buf.toString("utf8") } : { type, base64: buf.toString("base64") });
    }
  }
  return Object.fromEntries(found);
}

// Paths wptserve answers from another file.
const ALIASES = { "resources/WebIDLParser.js": "resources/webidl2/lib/webidl2.js" };

function scriptPath(script, testFile) {
  const p = scriptPathRaw(script, testFile);
  return ALIASES[p] || p;
}

function scriptPathRaw(script, testFile) {
  if (script.startsWith("/")) return script.slice(1);
  return path.posix.normalize(path.posix.join(path.posix.dirname(testFile), script));
}

// The part of the Worker that is ours; identical on both runtimes.
const PRELUDE = String.raw`
const __wpt_realFetch = globalThis.fetch;

// testharness.js picks its test environment by sniffing the global scope
// (document, *WorkerGlobalScope); the Workers global scope is neither a
// browser worker nor a window, so while testharness.js starts, those names
// are hidden and it takes its shell environment (done() ends the file, no
// harness timeout: the runner keeps the time).
const __wpt_hidden = [];
function __wpt_hide() {
  for (const name of ["document", "DedicatedWorkerGlobalScope", "SharedWorkerGlobalScope", "ServiceWorkerGlobalScope", "WorkerGlobalScope"]) {
    for (let o = globalThis; o; o = Object.getPrototypeOf(o)) {
      const d = Object.getOwnPropertyDescriptor(o, name);
      if (!d) continue;
      if (!d.configurable) throw new Error("wpt runner: cannot hide " + name);
      delete o[name];
      __wpt_hidden.push([o, name, d]);
    }
  }
}
function __wpt_unhide() {
  for (const [o, name, d] of __wpt_hidden.splice(0)) Object.defineProperty(o, name, d);
}

function __wpt_shims() {
  const url = new URL(__WPT.href);
  const location = {
    href: url.href, origin: url.origin, protocol: url.protocol, host: url.host,
    hostname: url.hostname, port: url.port, pathname: url.pathname,
    search: url.search, hash: url.hash,
    toString() { return url.href; },
  };
  Object.defineProperty(globalThis, "location", { value: location, writable: true, configurable: true, enumerable: true });
  globalThis.GLOBAL = {
    isWindow() { return false; },
    isWorker() { return true; },
    isShadowRealm() { return false; },
  };
  if ("META_TITLE" in __WPT) globalThis.META_TITLE = __WPT.META_TITLE;
  // The files the test reads relative to its URL are answered here.
  globalThis.fetch = function fetch(input, init) {
    let target;
    try {
      const raw = typeof input === "object" && input !== null && "url" in input ? input.url : String(input);
      target = new URL(raw, url.href);
    } catch {
      return __wpt_realFetch.call(globalThis, input, init);
    }
    if (target.origin !== url.origin) {
      return __wpt_realFetch.call(globalThis, typeof input === "string" ? target.href : input, init);
    }
    const r = __WPT.resources[target.pathname];
    if (!r) return Promise.resolve(new Response("not found: " + target.pathname, { status: 404 }));
    const body = r.text !== undefined ? r.text : Uint8Array.from(atob(r.base64), (c) => c.charCodeAt(0));
    return Promise.resolve(new Response(body, { status: 200, headers: { "content-type": r.type } }));
  };
}

function __wpt_text(v) {
  if (v === undefined || v === null) return null;
  try { v = String(v); } catch { return "(unprintable)"; }
  return v.length > 600 ? v.slice(0, 600) + "…" : v;
}

let __wpt_started = null;
function __wpt_run() {
  if (__wpt_started) return __wpt_started;
  __wpt_started = new Promise((resolve) => {
    const out = { id: __WPT.id, harness: null, tests: [], error: null };
    const names = [];
    let finished = false;
    const finish = (why) => {
      if (finished) return;
      finished = true;
      if (why) {
        const have = new Set(out.tests.map((t) => t.name));
        for (const n of names) if (!have.has(n)) out.tests.push({ name: n, status: "TIMEOUT", message: why });
        out.harness = out.harness || { status: "TIMEOUT", message: why };
      }
      resolve(out);
    };
    globalThis.__wpt_after_harness = () => {
      __wpt_unhide();
      add_test_state_callback((t) => { if (!names.includes(t.name)) names.push(t.name); });
      add_completion_callback((tests, status) => {
        out.tests = tests.map((t) => ({ name: t.name, status: ${JSON.stringify(STATUS)}[t.status] || String(t.status), message: __wpt_text(t.message) }));
        out.harness = { status: ${JSON.stringify(HARNESS)}[status.status] || String(status.status), message: __wpt_text(status.message) };
        finish(null);
      });
    };
    // The runner's clock: past it, testharness times out what is left;
    // if even that does not answer, what has finished is sent.
    setTimeout(() => {
      try { timeout(); } catch (e) { out.error = "timeout(): " + __wpt_text(e && e.stack || e); }
      setTimeout(() => finish("the runner's timeout (" + __WPT.timeoutMs + " ms)"), 2000);
    }, __WPT.timeoutMs);
    try {
      __wpt_shims();
      __wpt_hide();
      __wpt_body.call(globalThis);
    } catch (e) {
      __wpt_unhide();
      // As an uncaught error in a worker's importScripts: the harness errs,
      // the tests defined so far still run.
      out.error = __wpt_text(e && e.stack || e);
      out.harness_error = __wpt_text(e && e.message || e);
    }
    try {
      done();
    } catch (e) {
      out.error = (out.error ? out.error + "\n" : "") + "done(): " + __wpt_text(e && e.stack || e);
      finish("done() threw");
    }
  });
  return __wpt_started;
}

async function __wpt_answer() {
  const out = await __wpt_run();
  return new Response(JSON.stringify(out), { headers: { "content-type": "application/json" } });
}
`;

const MODULE_TAIL = `
export default {
  fetch(request) {
    return __wpt_answer();
  },
};
`;

const SCRIPT_TAIL = `
addEventListener("fetch", (event) => event.respondWith(__wpt_answer()));
`;

function buildWorker(test, timeoutMs) {
  const scripts = [{ name: "resources/testharness.js", after: "__wpt_after_harness();" }];
  for (const s of test.meta.scripts) scripts.push({ name: scriptPath(s, test.file) });
  scripts.push({ name: test.file });
  const parts = [];
  const sources = [];
  for (const s of scripts) {
    const f = path.join(WPT, s.name);
    let src;
    try {
      src = fs.readFileSync(f, "utf8");
    } catch {
      src = `throw new Error(${JSON.stringify("META script not found: " + s.name)});`;
    }
    if (s.name !== "resources/testharness.js") sources.push(src);
    // cellhost tells a service-worker script from a module by looking for
    // `export *` and the like in the text (workerd is told by its config);
    // webidl2.js's comments say "harmony export */". An extra space in the
    // comment keeps cellhost from taking the script for a module.
    if (FORMAT === "script") src = src.replace(/\bexport \*\//g, "export  */");
    parts.push(`// ---- /${s.name}\n${src}\n;${s.after || ""}\n`);
  }
  const href = `${ORIGIN}/${test.file.replace(/\.any\.js$/, ".any.worker.js")}${test.variant}`;
  const cfg = {
    id: test.id,
    href,
    timeoutMs: test.meta.timeout === "long" ? timeoutMs * 3 : timeoutMs,
    resources: resourcesFor(href, sources),
  };
  // idlharness.js fetches /interfaces/<spec>.idl by a name it builds.
  if (test.meta.scripts.some((s) => s.endsWith("/idlharness.js"))) {
    for (const f of fs.readdirSync(path.join(WPT, "interfaces"))) {
      if (f.endsWith(".idl")) {
        cfg.resources[`/interfaces/${f}`] = { type: "text/plain", text: fs.readFileSync(path.join(WPT, "interfaces", f), "utf8") };
      }
    }
  }
  if (test.meta.title) cfg.META_TITLE = test.meta.title;
  return (
    `// Generated by wpt/runner.mjs for ${test.id}; WPT's files are third-party code.\n` +
    `const __WPT = ${JSON.stringify(cfg)};\n` +
    PRELUDE +
    (FORMAT === "module" ? MODULE_TAIL : SCRIPT_TAIL) +
    `\nfunction __wpt_body() {\n${parts.join("")}\n}\n`
  );
}

// ------------------------------------------------------------ running them

// Ports are handed out here, from a range below the kernel's ephemeral one
// (where `--listen :0` and outgoing connections take theirs), each checked
// free and never handed out twice in a run.
let nextPort = 20000 + Math.floor(Math.random() * 8000);
function freePort() {
  return new Promise((resolve) => {
    const attempt = () => {
      const port = nextPort++;
      if (nextPort >= 30000) nextPort = 20000;
      const s = net.createServer();
      s.unref();
      s.on("error", attempt);
      s.listen(port, "127.0.0.1", () => s.close(() => resolve(port)));
    };
    attempt();
  });
}

function get(port, timeoutMs) {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/", timeout: timeoutMs, agent: false }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (e) => resolve({ error: e.message }));
    });
    req.on("timeout", () => {
      req.destroy();
      resolve({ error: "timeout", timeout: true });
    });
    req.on("error", (e) => resolve({ error: e.message }));
  });
}

function waitPort(port, ms, child) {
  const end = Date.now() + ms;
  return new Promise((resolve) => {
    const tryOnce = () => {
      if (child && child.exitCode !== null) return resolve(false);
      const s = net.connect(port, "127.0.0.1");
      s.on("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.on("error", () => {
        s.destroy();
        if (Date.now() > end) resolve(false);
        else setTimeout(tryOnce, 25);
      });
    };
    tryOnce();
  });
}

function outcome(resp, testTimeout, id) {
  if (resp.timeout) return { harness: { status: "TIMEOUT", message: `no answer within ${testTimeout} ms` }, tests: [] };
  if (resp.error) return { harness: { status: "CRASH", message: resp.error }, tests: [] };
  if (resp.status !== 200) return { harness: { status: "CRASH", message: `HTTP ${resp.status}: ${resp.body.slice(0, 300)}` }, tests: [] };
  try {
    const r = JSON.parse(resp.body);
    if (r.id !== id) return { harness: { status: "CRASH", message: `answered by another Worker (${r.id})` }, tests: [] };
    delete r.id;
    return r;
  } catch (e) {
    return { harness: { status: "CRASH", message: `bad JSON: ${e.message}: ${resp.body.slice(0, 200)}` }, tests: [] };
  }
}

function requestTimeout(test, opts) {
  return (test.meta.timeout === "long" ? opts.timeoutMs * 3 : opts.timeoutMs) + 15000;
}

function kill(child) {
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill("SIGKILL");
    } catch {}
  }
}

function tail(s, n = 1500) {
  s = s.replace(/\x1b\[[0-9;]*m/g, "");
  return s.length > n ? "…" + s.slice(-n) : s;
}

async function runCellhost(bin, test, dir, opts) {
  const t0 = Date.now();
  let r = await runCellhostOnce(bin, test, dir, opts);
  if (r.harness && r.harness.status === "CRASH") {
    // Once more, so that a crash is a crash and not a lost port race.
    const again = await runCellhostOnce(bin, test, dir, opts);
    again.retried = r.harness.message;
    r = again;
  }
  r.ms = Date.now() - t0;
  return r;
}

async function runCellhostOnce(bin, test, dir, opts) {
  const wdir = path.join(dir, "cellhost");
  fs.mkdirSync(wdir, { recursive: true });
  fs.writeFileSync(path.join(wdir, "worker.js"), test.source);
  fs.writeFileSync(
    path.join(wdir, "wrangler.toml"),
    `name = "wpt"\nmain = "worker.js"\ncompatibility_date = "${COMPAT_DATE}"\ncompatibility_flags = ${JSON.stringify(COMPAT_FLAGS)}\n`,
  );
  // No CPU or heap limit that workerd serve does not have either.
  const listen = await freePort();
  const child = spawn(
    bin,
    ["run", wdir, "--listen", `127.0.0.1:${listen}`, "--isolates", "1", "--cpu-ms", "600000", "--memory-mb", "2048"],
    { cwd: wdir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1", RUST_LOG: process.env.WPT_RUST_LOG || "warn" } },
  );
  let log = "";
  child.stderr.on("data", (d) => (log = tail(log + d, 20000)));
  const port = await new Promise((resolve) => {
    let buf = "";
    child.stdout.on("data", (d) => {
      buf += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)/.exec(buf);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", () => resolve(null));
    setTimeout(() => resolve(null), 30000);
  });
  if (!port) {
    kill(child);
    return { harness: { status: "CRASH", message: "cellhost did not start: " + tail(log) }, tests: [] };
  }
  const t = requestTimeout(test, opts);
  const r = outcome(await get(port, t), t, test.id);
  if (r.harness && r.harness.status === "CRASH") r.harness.message += "\n" + tail(log);
  if (log.trim()) r.log = tail(log, 4000);
  kill(child);
  return r;
}

function capnp(s) {
  return JSON.stringify(s);
}

async function runWorkerdBatch(bin, batch, dirs, opts) {
  const bdir = dirs[0] + ".workerd";
  fs.mkdirSync(bdir, { recursive: true });
  const ports = [];
  for (let i = 0; i < batch.length; i++) ports.push(await freePort());
  const services = [];
  const sockets = [];
  let workers = "";
  batch.forEach((test, i) => {
    fs.writeFileSync(path.join(bdir, `w${i}.js`), test.source);
    services.push(`(name = "s${i}", worker = .w${i})`);
    sockets.push(`(name = "k${i}", address = "127.0.0.1:${ports[i]}", http = (), service = "s${i}")`);
    const code =
      FORMAT === "module"
        ? `modules = [(name = "worker.js", esModule = embed ${capnp(`w${i}.js`)})]`
        : `serviceWorkerScript = embed ${capnp(`w${i}.js`)}`;
    workers += `const w${i} :Workerd.Worker = (${code}, compatibilityDate = ${capnp(COMPAT_DATE)}, compatibilityFlags = [${COMPAT_FLAGS.map(capnp).join(", ")}]);\n`;
  });
  const cfg =
    `using Workerd = import "/workerd/workerd.capnp";\n` +
    `const config :Workerd.Config = (services = [${services.join(", ")}], sockets = [${sockets.join(", ")}]);\n` +
    workers;
  fs.writeFileSync(path.join(bdir, "config.capnp"), cfg);
  const child = spawn(bin, ["serve", path.join(bdir, "config.capnp")], { cwd: bdir, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => (log = tail(log + d, 20000)));
  const results = [];
  const up = await waitPort(ports[ports.length - 1], 60000, child);
  for (let i = 0; i < batch.length; i++) {
    if (!up || child.exitCode !== null) {
      results.push({ harness: { status: "CRASH", message: "workerd is not running: " + tail(log) }, tests: [] });
      continue;
    }
    const before = log.length;
    const t = requestTimeout(batch[i], opts);
    const t0 = Date.now();
    const r = outcome(await get(ports[i], t), t, batch[i].id);
    r.ms = Date.now() - t0;
    const mine = log.slice(before).trim();
    if (mine) r.log = tail(mine, 4000);
    if (r.harness && r.harness.status === "CRASH" && !batch[i].retried) {
      // Once more in a fresh process (a crash is then a crash).
      batch[i].retried = r.harness.message + "\n" + tail(log.slice(before), 3000);
      kill(child);
      results.push(...(await runWorkerdBatch(bin, batch.slice(i), dirs.slice(i), opts)));
      return results;
    }
    if (batch[i].retried) r.retried = batch[i].retried;
    results.push(r);
    if (r.harness && (r.harness.status === "TIMEOUT" || r.harness.status === "CRASH")) {
      // A hung Worker may hold workerd's only thread, a crash ends the
      // process: the rest of the batch gets a fresh one.
      await new Promise((res) => setTimeout(res, 200));
      if (r.harness.status === "CRASH") r.harness.message += "\n" + tail(log.slice(before), 3000);
      kill(child);
      const rest = batch.slice(i + 1);
      if (rest.length) results.push(...(await runWorkerdBatch(bin, rest, dirs.slice(i + 1), opts)));
      return results;
    }
  }
  kill(child);
  return results;
}

async function pool(jobs, n) {
  let next = 0;
  const workers = Array.from({ length: Math.min(n, jobs.length) }, async () => {
    while (next < jobs.length) {
      const j = jobs[next++];
      await j();
    }
  });
  await Promise.all(workers);
}

function newest(paths) {
  const have = paths.filter((p) => fs.existsSync(p)).map((p) => [p, fs.statSync(p).mtimeMs]);
  have.sort((a, b) => b[1] - a[1]);
  return have.length ? have[0][0] : null;
}

function binaries() {
  const target = path.resolve(ROOT, process.env.CARGO_TARGET_DIR || "target");
  // The newer of the release and debug builds, or CELLHOST_BIN.
  // (Paths given by environment are taken from the repository root, where
  // run.sh starts; the runner spawns from per-test folders.)
  const given = (v) => (v ? path.resolve(ROOT, v) : null);
  const cellhost =
    given(process.env.CELLHOST_BIN) || newest([path.join(target, "release/cellhost"), path.join(target, "debug/cellhost")]);
  const workerd = given(process.env.WORKERD_BIN) || path.join(ROOT, "tests/node_modules/.bin/workerd");
  return { cellhost, workerd };
}

async function runAll(tests, opts) {
  const { cellhost, workerd } = binaries();
  const want = new Set(opts.runtimes);
  if (want.has("cellhost") && (!cellhost || !fs.existsSync(cellhost))) {
    console.error("wpt: no cellhost binary (build it, or set CELLHOST_BIN)");
    process.exit(2);
  }
  if (want.has("workerd") && !fs.existsSync(workerd)) {
    console.error("wpt: workerd is not installed: run `npm ci --prefix tests`");
    process.exit(2);
  }
  console.error(
    `wpt: ${tests.length} tests on ${[...want].map((r) => r + " " + path.relative(ROOT, r === "cellhost" ? cellhost : workerd)).join(", ")}; ${opts.jobs} jobs`,
  );
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  const dirs = tests.map((t, i) => {
    t.source = buildWorker(t, opts.timeoutMs);
    return path.join(WORK, String(i));
  });
  const results = {};
  for (const t of tests) results[t.id] = {};
  // The slowest files first (by the last run's times), so no long one is left
  // for the end.
  const last = opts.previous || {};
  const cost = (t, rt) => (last[t.id] && last[t.id][rt] && last[t.id][rt].ms) || 0;
  let done = 0;
  const total = tests.length * want.size;
  const progress = () => {
    done++;
    if (process.stderr.isTTY) process.stderr.write(`\rwpt: ${done}/${total} `);
  };
  const jobs = [];
  // workerd: batches of tests, one process each (its Workers run on one thread).
  for (let i = 0; want.has("workerd") && i < tests.length; i += opts.batch) {
    const batch = tests.slice(i, i + opts.batch);
    const bdirs = dirs.slice(i, i + opts.batch);
    jobs.push(async () => {
      const rs = await runWorkerdBatch(workerd, batch, bdirs, opts);
      batch.forEach((t, k) => {
        results[t.id].workerd = rs[k];
        progress();
      });
    });
  }
  // cellhost: a process per test. Interleave so that both runtimes progress.
  const order = tests.map((t, i) => i).sort((a, b) => cost(tests[b], "cellhost") - cost(tests[a], "cellhost"));
  const cjobs = (want.has("cellhost") ? order : []).map((i) => async () => {
    const t = tests[i];
    results[t.id].cellhost = await runCellhost(cellhost, t, dirs[i], opts);
    progress();
  });
  const mixed = [];
  const ratio = Math.max(1, Math.round(cjobs.length / Math.max(1, jobs.length)));
  let c = 0;
  for (const j of jobs) {
    mixed.push(j);
    for (let k = 0; k < ratio && c < cjobs.length; k++) mixed.push(cjobs[c++]);
  }
  while (c < cjobs.length) mixed.push(cjobs[c++]);
  // Longest first would be better; the slow files are known by name.
  await pool(mixed, opts.jobs);
  if (process.stderr.isTTY) process.stderr.write("\n");
  return results;
}

// ------------------------------------------------------------- comparing

function subtestTable(results) {
  // id -> name -> {cellhost: status, workerd: status, messages}
  const table = {};
  for (const [id, per] of Object.entries(results)) {
    const names = [];
    const seen = new Set();
    for (const rt of RUNTIMES) {
      for (const t of (per[rt] && per[rt].tests) || []) {
        if (!seen.has(t.name)) {
          seen.add(t.name);
          names.push(t.name);
        }
      }
    }
    const rows = {};
    for (const n of names) {
      const row = {};
      for (const rt of RUNTIMES) {
        const r = per[rt] || { tests: [] };
        const t = (r.tests || []).find((x) => x.name === n);
        if (t) {
          row[rt] = t.status;
          row[rt + "_message"] = t.message;
        } else {
          const h = r.harness || {};
          row[rt] = h.status === "TIMEOUT" ? "TIMEOUT" : h.status === "CRASH" ? "CRASH" : "MISSING";
          row[rt + "_message"] = h.message || r.harness_error || "not reported";
        }
      }
      rows[n] = row;
    }
    table[id] = rows;
  }
  return table;
}

function loadExpectations() {
  if (!fs.existsSync(EXPECTATIONS)) return { tests: {} };
  return JSON.parse(fs.readFileSync(EXPECTATIONS, "utf8"));
}

function isFail(s) {
  return s !== "PASS";
}

// The gate: a subtest that passes on workerd must pass on cellhost unless it
// is listed with a cellhost status; a listed one that passes is stale.
function check(table, exp) {
  const problems = [];
  const warnings = [];
  for (const [id, rows] of Object.entries(table)) {
    const e = (exp.tests && exp.tests[id]) || {};
    for (const [name, row] of Object.entries(rows)) {
      const x = e[name];
      const listed = x && x.cellhost;
      if (row.workerd === "PASS" && isFail(row.cellhost) && !listed) {
        problems.push(`NEW FAILURE (passes on workerd)  ${id} :: ${name}\n      cellhost ${row.cellhost}: ${shortReason(row.cellhost_message)}`);
      } else if (listed && listed !== "FLAKY" && row.cellhost === "PASS") {
        problems.push(`STALE (passes on cellhost now)  ${id} :: ${name}`);
      } else if (listed && listed !== "FLAKY" && row.workerd !== "PASS") {
        warnings.push(`listed, but workerd does not pass it now (${row.workerd}): ${id} :: ${name}`);
      }
    }
    for (const name of Object.keys(e)) {
      if (!(name in rows)) problems.push(`STALE (no such subtest in this run)  ${id} :: ${name}`);
    }
  }
  return { problems, warnings };
}

function shortReason(msg) {
  if (!msg) return "";
  let m = String(msg).split("\n")[0];
  if (m.length > 160) m = m.slice(0, 160) + "…";
  return m;
}

// --update: the entries the gate needs (workerd passes, cellhost does not),
// with the reasons already written; FLAKY marks stay while the subtest exists;
// tests that did not run keep their entries.
function update(table, exp, ran) {
  const old = exp.tests || {};
  const next = {};
  for (const id of Object.keys(old)) if (!ran.has(id)) next[id] = old[id];
  for (const id of Object.keys(table)) {
    const rows = table[id];
    const e = {};
    for (const name of Object.keys(rows)) {
      const row = rows[name];
      const o = (old[id] && old[id][name]) || {};
      const entry = {};
      if (o.cellhost === "FLAKY") entry.cellhost = "FLAKY";
      else if (row.workerd === "PASS" && isFail(row.cellhost)) entry.cellhost = row.cellhost;
      if (o.workerd === "FLAKY") entry.workerd = "FLAKY";
      if (!Object.keys(entry).length) continue;
      entry.reason = o.reason || "TODO: " + shortReason(row.cellhost_message);
      e[name] = entry;
    }
    if (Object.keys(e).length) next[id] = e;
  }
  const sorted = {};
  for (const k of Object.keys(next).sort()) sorted[k] = next[k];
  return {
    _: exp._ || [
      "tests[test id][subtest name] = { cellhost: status, reason }: the subtests that pass on workerd and not on cellhost.",
      "CI (bash wpt/run.sh) fails on such a subtest that is not listed, and on a listed one that passes.",
      "cellhost (or workerd) \"FLAKY\": either outcome is accepted. `bash wpt/run.sh --update` rewrites the list from a run, keeping reasons.",
    ],
    tests: sorted,
  };
}

function report(table) {
  const folders = {};
  const add = (f, row) => {
    const r = (folders[f] ||= { subtests: 0, cellhost: 0, workerd: 0, workerdOnly: 0, cellhostOnly: 0 });
    r.subtests++;
    if (row.cellhost === "PASS") r.cellhost++;
    if (row.workerd === "PASS") r.workerd++;
    if (row.workerd === "PASS" && row.cellhost !== "PASS") r.workerdOnly++;
    if (row.cellhost === "PASS" && row.workerd !== "PASS") r.cellhostOnly++;
  };
  for (const [id, rows] of Object.entries(table)) for (const row of Object.values(rows)) add(folderOf(id), row);
  const names = Object.keys(folders).sort();
  const tot = { subtests: 0, cellhost: 0, workerd: 0, workerdOnly: 0, cellhostOnly: 0 };
  for (const n of names) for (const k of Object.keys(tot)) tot[k] += folders[n][k];
  const pct = (a, b) => (b ? ((100 * a) / b).toFixed(1) + "%" : "-");
  const lines = [
    "| folder | subtests | cellhost | workerd | cellhost/workerd | workerd only | cellhost only |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ];
  for (const n of [...names, "total"]) {
    const r = n === "total" ? tot : folders[n];
    const label = n === "total" ? "**total**" : n;
    lines.push(
      `| ${label} | ${r.subtests} | ${r.cellhost} (${pct(r.cellhost, r.subtests)}) | ${r.workerd} (${pct(r.workerd, r.subtests)}) | ${pct(r.cellhost, r.workerd)} | ${r.workerdOnly} | ${r.cellhostOnly} |`,
    );
  }
  return lines.join("\n");
}

// ------------------------------------------------------------------ main

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(path.join(WPT, "resources/testharness.js"))) {
    console.error("wpt: no WPT copy in " + WPT + " (run bash wpt/fetch.sh)");
    process.exit(3);
  }
  const folders = opts.folders.length ? opts.folders : DEFAULT_FOLDERS.filter((f) => fs.existsSync(path.join(WPT, f)));
  const tests = discover(folders);
  const exp = loadExpectations();
  const started = Date.now();
  let results;
  if (opts.reportOnly) {
    const saved = JSON.parse(fs.readFileSync(RESULTS, "utf8")).results;
    results = {};
    for (const t of tests) if (saved[t.id]) results[t.id] = saved[t.id];
  } else {
    const prev = fs.existsSync(RESULTS) ? JSON.parse(fs.readFileSync(RESULTS, "utf8")).results : {};
    opts.previous = prev;
    results = await runAll(tests, opts);
    for (const id of Object.keys(results)) {
      for (const rt of RUNTIMES) {
        if (!opts.runtimes.includes(rt)) {
          if (prev[id] && prev[id][rt]) results[id][rt] = prev[id][rt];
        }
      }
    }
    fs.writeFileSync(RESULTS, JSON.stringify({ date: new Date().toISOString(), results: { ...prev, ...results } }));
  }
  const secs = ((Date.now() - started) / 1000).toFixed(0);
  const table = subtestTable(results);
  console.log(report(table));
  if (!opts.reportOnly) console.log(`\n${tests.length} tests (${folders.join(", ")}) in ${secs} s`);
  // Files that did not run as a whole on one runtime, for the log.
  for (const [id, per] of Object.entries(results)) {
    for (const rt of RUNTIMES) {
      const h = per[rt] && per[rt].harness;
      if (h && h.status !== "OK" && (opts.verbose || h.status === "CRASH")) {
        console.log(`  ${rt} ${h.status}: ${id}${h.message ? " — " + shortReason(h.message) : ""}`);
      }
    }
  }

  if (opts.update) {
    const ran = new Set(Object.keys(results));
    const next = update(table, exp, ran);
    fs.writeFileSync(EXPECTATIONS, JSON.stringify(next, null, 2) + "\n");
    console.log(`\nwpt: wrote ${path.relative(ROOT, EXPECTATIONS)}`);
    return 0;
  }
  const { problems, warnings } = check(table, exp);
  for (const w of warnings) console.log("  note: " + w);
  if (problems.length) {
    console.log(`\nwpt: ${problems.length} difference(s) from wpt/expectations.json:\n`);
    for (const p of problems) console.log("  " + p);
    console.log("\n(fix cellhost, or list the subtest with a reason: `bash wpt/run.sh --update` writes the entries, then edit their reasons)");
    return 1;
  }
  console.log("\nwpt: matches wpt/expectations.json");
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e);
    process.exit(2);
  },
);

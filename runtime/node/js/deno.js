// The `Deno` that deno_node's polyfills see (bound into each of them when
// the snapshot is built; see src/transpile.rs). A Worker is not a process on
// a host: no files, no signals, no exit, no host environment. What the
// polyfills read at start-up gets fixed values, as workerd reports them;
// what would reach the host throws an error that names it.
import { core, internals, primordials } from "ext:core/mod.js";
import { op_node_allow_codegen } from "ext:core/ops";

const { Error, ObjectDefineProperty, ObjectFreeze, SymbolFor } = primordials;

function unsupported(what) {
  return () => {
    throw new Error(`${what} is not supported in a Worker (cellhost)`);
  };
}

const errors = {};
for (
  const name of [
    "NotFound", "PermissionDenied", "NotCapable", "ConnectionRefused",
    "ConnectionReset", "ConnectionAborted", "NotConnected", "AddrInUse",
    "AddrNotAvailable", "BrokenPipe", "AlreadyExists", "InvalidData",
    "TimedOut", "Interrupted", "WriteZero", "UnexpectedEof", "BadResource",
    "Http", "Busy", "NotSupported", "FilesystemLoop", "IsADirectory",
    "NetworkUnreachable", "NotADirectory",
  ]
) {
  errors[name] = class extends Error {
    constructor(message, options) {
      super(message, options);
      this.name = name;
    }
  };
}

// process.env: the Worker's text bindings where the compatibility flags
// say so (set by the dispatcher before the Worker's code runs), else empty.
const vars = new Map();
internals.cellhostNodeEnv = vars;
const env = ObjectFreeze({
  get: (key) => vars.get(key),
  set: (key, value) => void vars.set(key, `${value}`),
  has: (key) => vars.has(key),
  delete: (key) => void vars.delete(key),
  toObject: () => Object.fromEntries(vars),
});

internals.cellhostDeno = ObjectFreeze({
  build: ObjectFreeze({
    os: "linux",
    arch: "x86_64",
    target: "x86_64-unknown-linux-gnu",
    standalone: false,
  }),
  version: ObjectFreeze({ deno: "", v8: "", typescript: "" }),
  errors: ObjectFreeze(errors),
  env,
  pid: 1,
  ppid: 0,
  noColor: true,
  internal: SymbolFor("Deno.internal"),
  privateCustomInspect: SymbolFor("Deno.privateCustomInspect"),
  inspect: (value, options) =>
    core.loadExtScript("ext:deno_web/01_console.js").inspect(value, options),
  mainModule: "file:///bundle/worker.js",
  cwd: () => "/bundle",
  execPath: () => "/bundle",
  exitCode: 0,
  memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0 }),
  cpuUsage: () => ({ user: 0, system: 0 }),
  uid: () => 0,
  gid: () => 0,
  exit: unsupported("process.exit()"),
  addSignalListener: unsupported("Signal handling"),
  removeSignalListener: unsupported("Signal handling"),
  consoleSize: unsupported("A terminal"),
  systemMemoryInfo: unsupported("System memory information"),
  loadavg: () => [0, 0, 0],
  hostname: () => "localhost",
  osRelease: () => "",
  networkInterfaces: () => ({}),
  resolveDns: unsupported("DNS resolution (node:dns)"),
  serve: unsupported("Listening for connections"),
  watchFs: unsupported("The file system"),
});

// The polyfills load their scripts on first use, often while a Worker
// serves a request, when code generation from strings is off; V8 counts
// compiling a script that way. Their `core.loadExtScript(...)` calls are
// routed here (src/transpile.rs): each load is let through, and the setting
// put back at once.
internals.cellhostLoad = (specifier) => {
  const was = op_node_allow_codegen(true);
  try {
    return core.loadExtScript(specifier);
  } finally {
    op_node_allow_codegen(was);
  }
};

// `core.build`, which the polyfills read (process.arch, os.platform()).
core.setBuildInfo("x86_64-unknown-linux-gnu");

// Called by node:process once it is evaluated (the call is added to the
// polyfill when the snapshot is built; see src/transpile.rs), however the
// Worker reaches it (the global or an import): what a Worker's process
// differs in from Deno's.
internals.cellhostProcessLoaded = (process) => {
  // workerd's process.nextTick is a microtask, in order with promise
  // callbacks (Node and Deno run the whole tick queue before them).
  process.nextTick = (callback, ...args) => queueMicrotask(() => callback(...args));
  // A Worker's working directory is node:fs's (workerd: /bundle at the
  // start of each request; chdir() changes it for the request). Without
  // node:fs it stays /bundle.
  const fsCwd = () => {
    core.createLazyLoader("node:cellhost/fs")();
    return internals.cellhostFsCwd;
  };
  process.cwd = () => (internals.cellhostNodeFs ? fsCwd().cwd() : "/bundle");
  process.chdir = (directory) => {
    if (!internals.cellhostNodeFs) {
      throw new Error("process.chdir() needs node:fs (a compatibility date from 2025-09-15 or enable_nodejs_fs_module)");
    }
    return fsCwd().chdir(directory);
  };
  // workerd's getBuiltinModule gives what an import of the module gives
  // (cellhost's wrappers and stubs, under the Worker's flags), and
  // undefined for anything else; deno_node's would load its own node:module
  // machinery, which reaches the host.
  defineValue(process, "getBuiltinModule", function getBuiltinModule(id) {
    id = `${id}`;
    // Built-ins only (a name without a scheme is a Node.js module's),
    // never one of the Worker's own modules.
    const scheme = /^[a-z]+:/.exec(id)?.[0];
    if (scheme && scheme !== "node:" && scheme !== "cloudflare:") return undefined;
    const specifier = scheme ? id : `node:${id}`;
    let ns;
    try {
      ns = core.ops.op_import_sync(specifier);
    } catch (e) {
      // Resolved to one of deno_node's lazily loaded modules, which the
      // synchronous import does not reach: load it as the import would.
      const lazy = /^Error: No such module "(node:[^"]+)"\.$/.exec(`${e}`);
      try {
        ns = lazy && core.createLazyLoader(lazy[1])();
      } catch {
        ns = undefined;
      }
      // Otherwise not a built-in, or one the Worker's flags leave off.
      if (!ns) return undefined;
    }
    return ns.default ?? ns;
  });
  // The bootstrap binds node's stdio streams onto the global console;
  // workerd's console has no such properties, and a Worker no stdio.
  delete globalThis.console._stdout;
  delete globalThis.console._stderr;
  asWorkerd(process);
};

/** `object[name] = v`, as an own writable, enumerable, configurable value. */
function defineValue(object, name, v) {
  ObjectDefineProperty(object, name, { __proto__: null, value: v, writable: true, enumerable: true, configurable: true });
}

// What workerd's process answers where Deno's would ask the host (its ops
// are disabled here, and threw 'op is disabled'): fixed values, and
// ERR_METHOD_NOT_IMPLEMENTED where workerd has no answer.
function asWorkerd(process) {
  const value = (name, v) => defineValue(process, name, v);
  const notImplemented = (name) => () => {
    const e = new Error(`The process.${name} method is not implemented`);
    e.code = "ERR_METHOD_NOT_IMPLEMENTED";
    throw e;
  };
  value("argv", ["workerd"]);
  // Accessors of deno_node's that cannot be redefined; their setters take.
  process.execPath = "";
  process.title = "workerd";
  value("version", `v${NODE_VERSION}`);
  const versions = { node: NODE_VERSION };
  for (const k of VERSION_KEYS) versions[k] = "";
  value("versions", ObjectFreeze(versions));
  process.debugPort = 0;
  for (const name of ["getuid", "geteuid", "getgid", "getegid"]) value(name, () => 0);
  value("getgroups", () => [0]);
  // workerd's mask never changes.
  value("umask", () => 0o22);
  value("constrainedMemory", () => 0);
  value("availableMemory", () => 0);
  value("resourceUsage", () => ({
    userCPUTime: 0, systemCPUTime: 0, maxRSS: 0, sharedMemorySize: 0, unsharedDataSize: 0, unsharedStackSize: 0,
    minorPageFault: 0, majorPageFault: 0, swappedOut: 0, fsRead: 0, fsWrite: 0, ipcSent: 0, ipcReceived: 0,
    signalsCount: 0, voluntaryContextSwitches: 0, involuntaryContextSwitches: 0,
  }));
  value("dlopen", notImplemented("dlopen"));
  // Reads the file through the Worker's node:fs (its /bundle, /tmp), as
  // workerd's does; keys already in process.env are kept.
  value("loadEnvFile", function loadEnvFile(path = ".env") {
    const fs = process.getBuiltinModule("node:fs");
    if (!fs) {
      throw new Error("process.loadEnvFile() needs node:fs (a compatibility date from 2025-09-15 or enable_nodejs_fs_module)");
    }
    const parsed = process.getBuiltinModule("node:util").parseEnv(fs.readFileSync(path, "utf8"));
    for (const k in parsed) if (!(k in process.env)) process.env[k] = parsed[k];
  });
  for (const name of [
    "cpuUsage", "threadCpuUsage", "getActiveResourcesInfo", "hasUncaughtExceptionCaptureCallback",
    "setUncaughtExceptionCaptureCallback",
  ]) value(name, notImplemented(name));
  // A stream that never has input (there is no terminal).
  let stdin;
  ObjectDefineProperty(process, "stdin", {
    __proto__: null,
    get() {
      if (stdin === undefined) {
        const { Readable } = core.createLazyLoader("node:stream")();
        stdin = new Readable({ read() {} });
        stdin.fd = 0;
      }
      return stdin;
    },
    set(v) {
      stdin = v;
    },
    enumerable: true,
    configurable: true,
  });
}

// The Node.js version workerd 1.20261117 reports, and the other names of
// its process.versions (each an empty string there).
const NODE_VERSION = "22.23.4";
const VERSION_KEYS = [
  "v8", "modules", "zlib", "brotli", "zstd", "ares", "napi", "llhttp", "nghttp2", "acorn", "ada", "simdutf", "nbytes",
  "ncrypto", "uvwasi", "uv", "openssl", "sqlite", "icu", "undici", "simdjson", "unicode", "cldr", "tz",
  "cjs_module_lexer", "amaro", "merve",
];

// What node:process's bootstrap reads (see deno_node's process.ts).
internals.__nodeBootstrapArgs = {
  argv0: "workerd",
  denoArgs: [],
  denoVersion: {},
  nodeDebug: "",
  runningOnMainThread: true,
};


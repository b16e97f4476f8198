// Service bindings to this Worker's own entrypoints (`services` naming this
// Worker, with or without `entrypoint`) and `ctx.exports`: a call is a new
// event on this isolate, with its own subrequest budget, `ctx.props`, and
// arguments, results and errors copied as across RPC (structured clone;
// functions and RpcTargets by reference, through the stubs of
// 30_durable_objects.js). Errors reach the caller with their class, message
// and own properties, marked `remote`, as workerd delivers them.
import { core, primordials } from "ext:core/mod.js";
import {
  decode,
  decodeParams,
  releaseParams,
  encode,
  fetchVia,
  outputGate,
  remoteError,
  toRequest,
} from "ext:cellhost/30_durable_objects.js";
import { DurableObject, WorkerEntrypoint } from "ext:cellhost/20_workers_module.js";
import { spendSubrequest, withBudget } from "ext:cellhost/06_budget.js";
import { KEY } from "ext:cellhost/01_keys.js";
import { illegal, tag, tracing } from "ext:cellhost/08_workers_scope.js";

const {
  ArrayPrototypePush,
  Error,
  JSONStringify,
  ObjectKeys,
  ObjectPrototypeIsPrototypeOf,
  Promise,
  PromisePrototypeThen,
  PromiseRace,
  Proxy,
  ReflectGet,
  ReflectHas,
  SafeMap,
  SafeWeakMap,
  SymbolToStringTag,
  TypeError,
} = primordials;
const ObjectPrototype = Object.prototype;
const { op_cellhost_log, op_service_fetch, op_service_call } = core.ops;

// The Worker's entrypoints by export name, filled at boot; env likewise.
const entrypoints = new SafeMap();
let workerEnv = null;
// `ctx.exports` (and `exports` of cloudflare:workers): one object.
let loopback = null;

/** `ctx.exports` (undefined where the compatibility date does not give it). */
export function ctxExports() {
  return loopback ?? undefined;
}

const TOKEN = Symbol("internal");
// Each event's abort: settles the event with the reason (`ctx.abort()`).
const aborts = new SafeWeakMap();

/** The execution context of one event of the Worker (not of an object). */
export class ExecutionContext {
  // Own properties in workerd's order (`exports` only where the
  // compatibility date gives it); `cache` and `access` are Cloudflare's
  // (cache purge, Access identity), which a host has not.
  constructor(props, token) {
    if (token !== TOKEN) throw illegal();
    this.tracing = tracing;
    this.access = undefined;
    this.cache = undefined;
    this.props = props ?? {};
    if (loopback !== null) this.exports = loopback;
    let reject;
    const promise = new Promise((_, no) => reject = no);
    PromisePrototypeThen(promise, undefined, () => {});
    aborts.set(this, { promise, reject });
  }
  waitUntil(promise) {
    // The isolate outlives the response, so the work keeps running; keep the
    // promise observed so a rejection is logged, not lost.
    PromisePrototypeThen(promise, undefined, (e) =>
      op_cellhost_log(3, `Uncaught (in waitUntil) ${e?.stack ?? e}\n`)
    );
  }
  passThroughOnException() {}
  mapVirtualHost(fetcher) {
    throw new TypeError(
      fetcher === undefined || fetcher === null || typeof fetcher !== "object"
        ? "Failed to execute 'mapVirtualHost' on 'ExecutionContext': parameter 1 is not of type 'Fetcher'."
        : "ctx.mapVirtualHost() is not supported by cellhost yet",
    );
  }
  /** Ends the event with `reason`, whatever its handler goes on to do. */
  abort(reason) {
    aborts.get(this)?.reject(reason);
  }
}
tag(ExecutionContext.prototype, "ExecutionContext");

/** A new event's context (`props`: ctx.props). */
export function newContext(props) {
  return new ExecutionContext(props, TOKEN);
}

/** What the event's handler returns (`result`), unless `ctx.abort()` ends
 * the event first. */
export function unlessAborted(ctx, result) {
  return PromiseRace([aborts.get(ctx).promise, result]);
}

const BUILTIN_ERRORS = {
  Error,
  TypeError,
  RangeError: primordials.RangeError,
  SyntaxError: primordials.SyntaxError,
  ReferenceError: primordials.ReferenceError,
  EvalError: primordials.EvalError,
  URIError: primordials.URIError,
};

/** What the caller receives for an error thrown by the callee. */
function remoteCopy(e) {
  if (e === null || typeof e !== "object") {
    const copy = new Error(`${e}`);
    copy.remote = true;
    return copy;
  }
  let copy;
  if (ObjectPrototypeIsPrototypeOf(DOMException.prototype, e)) {
    copy = new DOMException(e.message, e.name);
  } else {
    const ctor = BUILTIN_ERRORS[e.name] ?? Error;
    copy = new ctor(e.message);
  }
  for (const k of ObjectKeys(e)) {
    if (k === "stack" || k === "message") continue;
    try {
      copy[k] = core.deserialize(core.serialize(e[k]));
    } catch {
      // A property that cannot be cloned stays behind, as over RPC.
    }
  }
  copy.remote = true;
  return copy;
}

function serialize(v) {
  try {
    return core.serialize(encode(v));
  } catch (e) {
    throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
  }
}

/** Runs `fn(target, ctx)` as a new event of entrypoint `name`. */
function invoke(name, props, fn) {
  return withBudget(async () => {
    const entry = entrypoints.get(name);
    const ctx = newContext(props);
    try {
      const target = entry.cls !== undefined ? new entry.cls(ctx, workerEnv) : entry.handler;
      return await unlessAborted(ctx, fn(target, ctx));
    } catch (e) {
      throw remoteCopy(e);
    }
  });
}

export async function callFetch(name, props, request) {
  return await invoke(name, props, async (target, ctx) => {
    if (typeof target?.fetch !== "function") {
      throw new Error("Handler does not export a fetch() function.");
    }
    const inner = new Request(request);
    const response = entrypoints.get(name).cls !== undefined
      ? await target.fetch(inner)
      : await target.fetch(inner, workerEnv, ctx);
    if (!ObjectPrototypeIsPrototypeOf(Response.prototype, response)) {
      throw new TypeError("Incorrect type for Promise: the Promise did not resolve to 'Response'.");
    }
    return response;
  });
}

async function callMethod(name, props, kind, method, args) {
  spendSubrequest();
  const bytes = serialize(args);
  let made = [];
  const params = () => {
    const p = decodeParams(core.deserialize(bytes));
    made = p.made;
    return p.value;
  };
  let value;
  try {
    value = await runMethod(name, props, kind, method, params, serialize);
  } finally {
    releaseParams(made);
  }
  return decode(core.deserialize(value));
}

// V8 serialization of plain values: between Workers nothing passes by
// reference (a function or RpcTarget is a DataCloneError naming it).
function plainSerialize(v) {
  try {
    return core.serialize(v);
  } catch (e) {
    throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
  }
}

/** Another Worker's call of `method` on entrypoint `name`: the result's bytes. */
export function serveCall(name, props, kind, method, args) {
  if (!entrypoints.has(name)) {
    throw new Error(`This Worker has no entrypoint named "${name}".`);
  }
  return runMethod(name, props, kind, method, () => args, plainSerialize);
}

/** Runs `method` of entrypoint `name` as a new event: `args()` gives the
 * arguments, `ser` turns the result into what goes back. */
async function runMethod(name, props, kind, method, args, ser) {
  return await invoke(name, props, async (target, ctx) => {
    const decoded = args();
    const entry = entrypoints.get(name);
    // A class's methods are its prototype's (instance fields are not
    // reachable, as on workerd); a handler object's are its own.
    const known = entry.cls !== undefined ? ReflectHas(entry.cls.prototype, method) : target[method] !== undefined;
    if (entry.bare || ReflectHas(ObjectPrototype, method) || !known) {
      throw new TypeError(`The RPC receiver does not implement the method "${method}".`);
    }
    if (kind === "get") return ser(await target[method]);
    if (typeof target[method] !== "function") {
      throw new TypeError(`"${method}" is not a function.`);
    }
    if (entry.cls !== undefined) return ser(await target[method](...decoded));
    // A handler object's method is called as a handler: one argument,
    // then env and ctx, as workerd calls it.
    if (decoded.length !== 1) {
      throw new TypeError(
        `Attempted to call RPC function "${method}" with the wrong number of arguments. When calling a top-level handler function that is not declared as part of a class, you must always send exactly one argument. In order to support variable numbers of arguments, the server must use class-based syntax (extending WorkerEntrypoint) instead.`,
      );
    }
    return ser(await target[method](decoded[0], workerEnv, ctx));
  });
}

/** A Fetcher binding: `fetch()` through `send(input, init)`, whatever the
 * binding reaches (this Worker, another Worker, a facet). */
export class Fetcher {
  #send;
  #tag;
  #what;
  constructor(key, tag, what, send) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#tag = tag;
    this.#what = what;
    this.#send = send;
  }
  get [SymbolToStringTag]() {
    return this.#tag;
  }
  async fetch(input, init) {
    return await this.#send(input, init);
  }
  connect() {
    throw new Error(`connect() on ${this.#what} is not supported by cellhost yet`);
  }
}

const OWN = ["fetch", "connect"];

/** A binding to entrypoint `name` ("default" for the default export). */
export function serviceStub(name, props, tag = "Fetcher") {
  const fetcher = new Fetcher(KEY, tag, "a service binding", (input, init) => {
    spendSubrequest();
    return callFetch(name, props ?? {}, toRequest(input, init));
  });
  return stubProxy(fetcher, (kind, prop, args) => callMethod(name, props, kind, prop, args));
}


/** A binding to entrypoint `entrypoint` (null: default) of Worker `worker`. */
export function remoteServiceStub(worker, entrypoint, props) {
  const target = JSONStringify({ entrypoint, props: props ?? {} });
  const call = async (kind, method, args) => {
    spendSubrequest();
    const bytes = plainSerialize([kind, args]);
    await outputGate();
    const { 0: ok, 1: payload } = await op_service_call(worker, target, method, bytes);
    if (!ok) throw remoteError(new TextDecoder().decode(payload));
    return core.deserialize(payload);
  };
  const fetcher = new Fetcher(KEY, "Fetcher", "a service binding", (input, init) =>
    fetchVia(input, init, (method, url, headers, bodyRid) =>
      op_service_fetch(worker, target, method, url, headers, bodyRid)));
  return stubProxy(fetcher, call);
}

// A Fetcher whose other members are RPC: `stub.method(...args)` calls,
// `await stub.prop` reads, through `call(kind, prop, args)`.
export function stubProxy(fetcher, call) {
  return new Proxy(fetcher, {
    get(target, prop) {
      if (prop === "constructor") {
        return function () {
          throw new TypeError("Illegal constructor");
        };
      }
      if (typeof prop === "symbol" || OWN.includes(prop) || prop in ObjectPrototype) {
        const v = ReflectGet(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      }
      // Not a promise, and not JSON: both are looked up by the language.
      if (prop === "then" || prop === "toJSON") return undefined;
      const method = (...args) => call("call", prop, args);
      method.then = (resolve, reject) => call("get", prop, []).then(resolve, reject);
      return method;
    },
    has(target, prop) {
      return typeof prop === "string" || ReflectHas(target, prop);
    },
  });
}

/** `ctx.exports.Name` for an entrypoint: callable with `{ props }` for a
 * stub with props; otherwise the stub itself. */
function exportEntry(name) {
  const tag = "LoopbackServiceStub";
  const plain = serviceStub(name, {}, tag);
  const make = (opts) => serviceStub(name, opts?.props ?? {}, tag);
  return new Proxy(make, {
    get(_target, prop) {
      if (prop === "fetch" && entrypoints.get(name).bare) return undefined;
      return ReflectGet(plain, prop);
    },
    has(_target, prop) {
      return ReflectHas(plain, prop);
    },
  });
}

// What a facet is started from (`class` of its startup options): the
// Durable Object classes of ctx.exports, with the props they give ctx.props.
const facetClasses = new SafeWeakMap();

/** The class (and props) a facet's `class` option names, if it is one. */
export function facetClassOf(v) {
  return (typeof v === "function" || typeof v === "object") && v !== null ? facetClasses.get(v) : undefined;
}

// A Durable Object class as a facet class: calling it with `{ props }`
// gives the same class with those props.
function doClass(className, cls, props) {
  const make = (opts) => doClass(className, cls, opts?.props ?? {});
  facetClasses.set(make, { className, cls, uniqueKey: null, sqlite: true, props });
  return make;
}

/** `ctx.exports.Class` for a Durable Object class with a namespace: the
 * namespace, callable for the namespace with props (an object, as on
 * workerd), which also names the class for facets. */
function namespaceEntry(namespace, className, cls) {
  const forward = () => ({
    get(_target, prop) {
      const v = ReflectGet(namespace, prop, namespace);
      return typeof v === "function" ? v.bind(namespace) : v;
    },
    has(_target, prop) {
      return ReflectHas(namespace, prop);
    },
  });
  const withProps = (opts) => {
    const o = new Proxy({}, forward());
    facetClasses.set(o, { className, cls, uniqueKey: null, sqlite: true, props: opts?.props ?? {} });
    return o;
  };
  const entry = new Proxy(withProps, forward());
  facetClasses.set(entry, { className, cls, uniqueKey: null, sqlite: true, props: {} });
  return entry;
}

/**
 * Called at boot with the main module's namespace: checks every export is
 * what workerd accepts (a function or a handler object), records the
 * entrypoints, checks the service bindings' entrypoints exist (workerd
 * refuses the config otherwise), and builds `ctx.exports` when the
 * compatibility date gives it: the default export, handler objects,
 * WorkerEntrypoint classes, Durable Object classes (their namespaces), then
 * other functions, as workerd orders them.
 */
export function setupServices(ns, env, config, namespaces, setModuleExports) {
  workerEnv = env;
  const groups = [[], [], [], [], []];
  for (const name of ns === null ? [] : ObjectKeys(ns)) {
    const v = ns[name];
    const isClass = typeof v === "function";
    if (!isClass && (v === null || typeof v !== "object")) {
      throw new TypeError(
        `Incorrect type for map entry '${name}': the provided value is not of type 'function or ExportedHandler'.`,
      );
    }
    const namespace = namespaces.find((n) => n[0] === name);
    if (isClass && ObjectPrototypeIsPrototypeOf(WorkerEntrypoint.prototype, v.prototype)) {
      entrypoints.set(name, { cls: v });
      ArrayPrototypePush(groups[name === "default" ? 0 : 2], name);
    } else if (!isClass) {
      entrypoints.set(name, { handler: v });
      ArrayPrototypePush(groups[name === "default" ? 0 : 1], name);
    } else if (namespace !== undefined || ObjectPrototypeIsPrototypeOf(DurableObject.prototype, v.prototype)) {
      ArrayPrototypePush(groups[3], name);
    } else {
      entrypoints.set(name, { handler: null, bare: true });
      ArrayPrototypePush(groups[name === "default" ? 0 : 4], name);
    }
  }
  for (const s of config.services) {
    // Another Worker's entrypoints are checked when it is called.
    if (s.worker !== null) continue;
    const ep = s.entrypoint ?? "default";
    if (!entrypoints.has(ep)) {
      throw new Error(
        s.entrypoint === null
          ? `Worker "${config.name}"'s binding "${s.binding}" refers to service "${config.name}", but "${config.name}" has no default export handler.`
          : `Worker "${config.name}"'s binding "${s.binding}" refers to service "${config.name}" with a named entrypoint "${ep}", but "${config.name}" has no such named entrypoint.`,
      );
    }
  }
  if (!config.ctxExports) return;
  const out = {};
  for (const group of groups) {
    for (const name of group) {
      const namespace = namespaces.find((n) => n[0] === name);
      if (namespace !== undefined) out[name] = namespaceEntry(namespace[1], name, ns[name]);
      else if (group === groups[3]) out[name] = doClass(name, ns[name], {});
      else out[name] = exportEntry(name);
    }
  }
  loopback = out;
  setModuleExports(out);
}

// The classes behind the `cloudflare:workers` module. Durable Object and RPC
// behaviour arrives with the Durable Objects work; these base classes already
// set `ctx`/`env` the way workerd's do.
export class WorkerEntrypoint {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

export class DurableObject {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

export class RpcTarget {}

export class WorkflowEntrypoint {
  constructor() {
    throw new Error("WorkflowEntrypoint (Workflows) is not supported by cellhost yet");
  }
}

// The Worker's bindings, for code that imports them instead of taking the
// handler's `env` (filled before the Worker's modules evaluate, so their
// top level sees them too). A copy: workerd's is not the handler's object.
export const env = {};

export function setModuleEnv(bindings) {
  for (const k of Object.keys(bindings)) env[k] = bindings[k];
}

/** Keeps work of the current event going after its response, observed so a
 * rejection is logged. */
export function waitUntil(promise) {
  Promise.resolve(promise).then(undefined, (e) =>
    globalThis.console.error(`Uncaught (in waitUntil) ${e?.stack ?? e}`)
  );
}

// The rest of workerd's module: importing them works, using them fails
// with their name (never a silent `undefined`).
function unsupported(name) {
  return () => {
    throw new Error(`cloudflare:workers ${name} is not supported by cellhost yet`);
  };
}

function unsupportedObject(name) {
  const fail = unsupported(name);
  return new Proxy({}, { get: fail, set: fail, has: fail, ownKeys: fail, apply: fail });
}

export const RpcStub = unsupported("RpcStub");
export const RpcPromise = unsupported("RpcPromise");
export const RpcProperty = unsupported("RpcProperty");
export const ServiceStub = unsupported("ServiceStub");
export const abortIsolate = unsupported("abortIsolate()");
export const withEnv = unsupported("withEnv()");
export const withExports = unsupported("withExports()");
export const withEnvAndExports = unsupported("withEnvAndExports()");
// `ctx.exports` for code that imports it: another object showing the same
// entries (as workerd's), set at boot (25_services.js).
let exportsTarget = {};
export const exports = new Proxy({}, {
  get: (_, k) => Reflect.get(exportsTarget, k),
  set: (_, k, v) => Reflect.set(exportsTarget, k, v),
  has: (_, k) => Reflect.has(exportsTarget, k),
  deleteProperty: (_, k) => Reflect.deleteProperty(exportsTarget, k),
  ownKeys: () => Reflect.ownKeys(exportsTarget),
  getOwnPropertyDescriptor: (_, k) => Reflect.getOwnPropertyDescriptor(exportsTarget, k),
  defineProperty: (_, k, d) => Reflect.defineProperty(exportsTarget, k, d),
});

export function setModuleExports(target) {
  exportsTarget = target;
}
export const cache = unsupportedObject("cache");
// workerd's `tracing` with no trace sink attached (as under `workerd serve`
// and `wrangler dev`): spans are never traced, the callbacks run as given.
// Libraries detect it by its methods (agents does), so it must not throw.
const kSpan = Symbol("span");
class Span {
  constructor(key) {
    if (key !== kSpan) throw new TypeError("Illegal constructor");
  }
  get isTraced() {
    return false;
  }
  get [Symbol.toStringTag]() {
    return "Span";
  }
  spanContext() {
    return null;
  }
  setAttribute() {}
  setAttributes() {}
  recordException() {}
  updateName() {}
  setStatus() {}
  end() {}
}
const untraced = new Span(kSpan);
function callback(fn, method) {
  if (typeof fn !== "function") {
    throw new TypeError(
      `Failed to execute '${method}' on 'Tracing': parameter 2 is not of type 'Function'.`,
    );
  }
  return fn;
}
class Tracing {
  get [Symbol.toStringTag]() {
    return "Tracing";
  }
  get Span() {
    return Span;
  }
  startActiveSpan(_name, fn, ...args) {
    return callback(fn, "startActiveSpan")(untraced, ...args);
  }
  enterSpan(_name, fn, ...args) {
    return callback(fn, "enterSpan")(untraced, ...args);
  }
  startSpan(_name) {
    return new Span(kSpan);
  }
  getActiveSpan() {
    return untraced;
  }
  withActiveSpan(_span, fn, ...args) {
    return callback(fn, "withActiveSpan")(...args);
  }
}
export const tracing = new Tracing();
export const restore = Symbol("restore");

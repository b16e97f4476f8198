// Durable Object namespaces, ids and stubs as the caller sees them. Calls
// travel to the isolate that hosts the object (see 40_cell.js) through
// op_do_fetch / op_do_call.
import { core, primordials } from "ext:core/mod.js";
import { RpcTarget } from "ext:cellhost/20_workers_module.js";
import { socketFromRid } from "ext:cellhost/50_websocket.js";
import { KEY, kOwner, kUnreachable } from "ext:cellhost/01_keys.js";
import { spendSubrequest } from "ext:cellhost/06_budget.js";
import { internal } from "ext:cellhost/00_globals.js";
import { refusedSocket } from "ext:cellhost_sockets/sockets.js";

const {
  ObjectPrototypeIsPrototypeOf,
  TypeError,
  RangeError,
  Error,
  JSONParse,
  JSONStringify,
  PromisePrototypeThen,
  PromiseRace,
  PromiseReject,
  Proxy,
  SymbolDispose,
  ReflectGet,
  ReflectHas,
  SymbolToStringTag,
} = primordials;
const ObjectPrototype = Object.prototype;
const {
  op_do_id_from_name,
  op_do_unique_id,
  op_do_id_from_string,
  op_do_fetch,
  op_do_call,
  op_do_call_export,
  op_do_reply,
  op_cell_gate_pending,
  op_cell_sync,
} = core.ops;

// Calls to other objects are outbound effects: they wait for this isolate's
// pending writes to be durable first (the output gate).
export function outputGate() {
  return op_cell_gate_pending() ? op_cell_sync() : undefined;
}


export class DurableObjectId {
  #hex;
  #name;
  constructor(key, hex, name) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#hex = hex;
    this.#name = name;
  }
  toString() {
    return this.#hex;
  }
  equals(other) {
    return ObjectPrototypeIsPrototypeOf(DurableObjectId.prototype, other) &&
      other.toString() === this.#hex;
  }
  get name() {
    return this.#name;
  }
  get jurisdiction() {
    return undefined;
  }
}

function noJurisdiction(j) {
  if (j !== undefined && j !== null) {
    throw new Error("Jurisdiction restrictions are not implemented in workerd.");
  }
}

function checkGetOptions(opts) {
  if (opts === undefined || opts === null) return;
  noJurisdiction(opts.jurisdiction);
  if (opts.routingMode !== undefined && opts.routingMode !== "primary-only") {
    throw new RangeError(`unknown routingMode: ${opts.routingMode}`);
  }
}

// Ids a namespace keeps by name (see #hexOf), and the longest name kept.
const NAMES_KEPT = 512;
const NAME_KEPT_LENGTH = 256;

export class DurableObjectNamespace {
  #ns;
  #names = new primordials.SafeMap();
  constructor(key, ns) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#ns = ns;
  }
  idFromName(name) {
    name = `${name}`;
    return new DurableObjectId(KEY, this.#hexOf(name), name);
  }
  // An id from a name is a keyed hash (in Rust); a Worker asks for its hot
  // objects by the same few names request after request.
  #hexOf(name) {
    let hex = this.#names.get(name);
    if (hex === undefined) {
      hex = op_do_id_from_name(this.#ns, name);
      if (this.#names.size >= NAMES_KEPT) this.#names.clear();
      if (name.length <= NAME_KEPT_LENGTH) this.#names.set(name, hex);
    }
    return hex;
  }
  newUniqueId(opts) {
    noJurisdiction(opts?.jurisdiction);
    return new DurableObjectId(KEY, op_do_unique_id(this.#ns), undefined);
  }
  idFromString(s) {
    return new DurableObjectId(KEY, op_do_id_from_string(this.#ns, `${s}`), undefined);
  }
  get(id, opts) {
    if (!ObjectPrototypeIsPrototypeOf(DurableObjectId.prototype, id)) {
      throw new TypeError(
        "Failed to execute 'get' on 'DurableObjectNamespace': parameter 1 is not of type 'DurableObjectId'.",
      );
    }
    checkGetOptions(opts);
    return makeStub(this.#ns, id);
  }
  getByName(name, opts) {
    return this.get(this.idFromName(name), opts);
  }
  getExisting() {
    throw new Error("workerd only supports GET_OR_CREATE mode for getting actor stubs");
  }
  jurisdiction(j) {
    noJurisdiction(j);
    return this;
  }
}

export function makeNamespace(ns) {
  return new DurableObjectNamespace(KEY, ns);
}

/** Rebuilds an error that crossed from an object: workerd's properties. */
/** An error as JSON for the caller (the inverse of remoteError). */
export function errorJson(e, extra) {
  const info = { name: "Error", message: `${e}` };
  if (e !== null && typeof e === "object") {
    info.name = e.name ?? "Error";
    info.message = e.message ?? `${e}`;
    if (ObjectPrototypeIsPrototypeOf(DOMException.prototype, e)) {
      info.name = "DOMException";
      info.domName = e.name;
    }
    if (e.durableObjectReset) info.durableObjectReset = true;
    if (e.overloaded) info.overloaded = true;
    if (e[kOwner] !== undefined) {
      info.owner = e[kOwner];
      info.retryable = true;
      info.overloaded = false;
    }
    if (e[kUnreachable] !== undefined) {
      info.unreachableOwner = e[kUnreachable];
      info.retryable = true;
      info.overloaded = false;
    }
  }
  return JSONStringify({ ...info, ...extra });
}

export function remoteError(json) {
  let info;
  try {
    info = JSONParse(json);
  } catch {
    info = { name: "Error", message: json };
  }
  const ctor = {
    Error,
    TypeError,
    RangeError,
    SyntaxError,
    ReferenceError,
    EvalError,
    URIError,
  }[info.name] ?? Error;
  const e = new ctor(info.message);
  if (info.name === "DOMException" || info.domName) {
    const d = new DOMException(info.message, info.domName ?? "Error");
    d.remote = true;
    return d;
  }
  // A reset is the runtime's doing, not an error the object threw.
  if (info.durableObjectReset) e.durableObjectReset = true;
  else e.remote = true;
  if (info.overloaded) e.overloaded = true;
  if (info.retryable) e.retryable = true;
  if (info.durableObjectId) e.durableObjectId = info.durableObjectId;
  if (info.owner !== undefined) {
    e.retryable = true;
    e.overloaded = false;
    e[kOwner] = info.owner;
  }
  if (info.unreachableOwner !== undefined) {
    e.retryable = true;
    e.overloaded = false;
    e[kUnreachable] = info.unreachableOwner;
  }
  if (info.brokenStub) brokenStubErrors.add(e);
  return e;
}

// Errors that break the stub they reached the caller through (the object was
// reset by the runtime): that stub answers every later call with the same
// error.
const brokenStubErrors = new primordials.SafeWeakSet();

function noteBroken(state, e) {
  if (brokenStubErrors.has(e)) state.broken = e;
  return e;
}

// Functions and RpcTargets cross RPC by reference: the sender keeps them in
// its export table and sends a marker; the receiver gets a stub whose calls
// travel back to the sender's isolate. An export lives until a stub for it
// is disposed (`stub[Symbol.dispose]()`, each `dup()` counting once), or the
// isolate is recycled. One a Durable Object returned dies with that object's
// instance (ctx.abort(), a reset), as on workerd.
const STUB_KEY = "__cellhost_rpc_stub__";
// The method name that disposes an export (a NUL cannot name a method).
const DISPOSE = "\0dispose";
const exportsTable = new primordials.SafeMap(); // id -> { value, owner }
let nextExport = 1;
let selfIsolate = 0;
// The object whose answer is being encoded (its exports die with it).
let exportOwner = null;

export function setIsolate(index) {
  selfIsolate = index;
}

// The fleet node a forwarded call came from, while its arguments are
// decoded or its answer encoded: a stub names an isolate of one process,
// so stubs and RpcTargets cannot cross nodes; they fail by name.
let crossNode;

function crossNodeError() {
  return new DOMException(
    `An RPC stub or RpcTarget cannot be passed between cellhost fleet nodes (this call was forwarded from node ${crossNode} to the object's owner); pass structured-clone values, or call the object from a Worker on its owner`,
    "DataCloneError",
  );
}

/** `encode(v)` for the answer of object `owner` (a Cell); `from`: the node
 * a forwarded call came from. */
export function encodeFor(owner, v, from = undefined) {
  const before = exportOwner;
  exportOwner = owner;
  crossNode = from ?? undefined;
  try {
    return encode(v);
  } finally {
    exportOwner = before;
    crossNode = undefined;
  }
}

function exportValue(v) {
  if (crossNode !== undefined) throw crossNodeError();
  const id = nextExport++;
  exportsTable.set(id, { value: v, owner: exportOwner });
  return { [STUB_KEY]: [selfIsolate, id, typeof v === "function" ? "f" : "t"] };
}

function plain(v) {
  const p = primordials.ObjectGetPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/** Replaces functions and RpcTargets (in arrays and plain objects) by markers. */
export function encode(v, depth = 0) {
  if (typeof v === "function") return exportValue(v);
  if (v === null || typeof v !== "object" || depth > 64) return v;
  if (ObjectPrototypeIsPrototypeOf(RpcTarget.prototype, v)) return exportValue(v);
  if (primordials.ArrayIsArray(v)) return v.map((x) => encode(x, depth + 1));
  if (plain(v)) {
    // A marker is only ever made here: user data cannot forge a stub to
    // another event's exports.
    if (primordials.ObjectHasOwn(v, STUB_KEY)) {
      throw new DOMException(`The property name "${STUB_KEY}" is reserved by cellhost's RPC`, "DataCloneError");
    }
    const o = {};
    for (const k of primordials.ObjectKeys(v)) o[k] = encode(v[k], depth + 1);
    return o;
  }
  return v;
}

/** Turns markers back into stubs (each one made is pushed to `made`). */
export function decode(v, depth = 0, made = undefined) {
  if (v === null || typeof v !== "object" || depth > 64) return v;
  if (primordials.ArrayIsArray(v)) return v.map((x) => decode(x, depth + 1, made));
  if (plain(v)) {
    const m = v[STUB_KEY];
    if (m !== undefined) {
      if (crossNode !== undefined) throw crossNodeError();
      const stub = importStub(m);
      made?.push(stub);
      return stub;
    }
    const o = {};
    for (const k of primordials.ObjectKeys(v)) o[k] = decode(v[k], depth + 1, made);
    return o;
  }
  return v;
}

// A call's parameters: the stubs among them are the callee's only for the
// call (workerd disposes them when it ends; dup() keeps one).
export function decodeParams(v, from = undefined) {
  const made = [];
  crossNode = from ?? undefined;
  try {
    return { value: decode(v, 0, made), made };
  } finally {
    crossNode = undefined;
  }
}

export function releaseParams(made) {
  for (const stub of new primordials.SafeArrayIterator(made)) implicitDispose.get(stub)?.();
}

// The end-of-call disposal of each parameter stub: it releases the stub's
// reference; the target hears of it (its Symbol.dispose) only when that was
// the last one, as on workerd.
const implicitDispose = new primordials.SafeWeakMap();

const DISPOSED = "RPC stub used after being disposed.";

// A stub for export `id` of isolate `iso`: callable (a function's) with
// methods (an RpcTarget's), `dup()` and `[Symbol.dispose]()`; `refs` counts
// the stubs of this import still alive.
function importStub({ 0: iso, 1: id, 2: kind }, refs = { n: 1 }) {
  let disposed = false;
  const call = (method, args) => {
    if (disposed) return PromiseReject(new Error(DISPOSED));
    return callExport(iso, id, method, args);
  };
  // Each stub's disposal reaches the target (its Symbol.dispose runs, as
  // on workerd); the last one also releases the export.
  const dispose = () => {
    if (disposed) return;
    disposed = true;
    // The exporter may be gone already: nothing to release then.
    callExport(iso, id, DISPOSE, [--refs.n === 0]).catch(() => {});
  };
  const dup = () => {
    if (disposed) throw new Error(DISPOSED);
    refs.n++;
    return importStub([iso, id, kind], refs);
  };
  // A function target: the stub is callable (typeof "function"), as workerd's.
  const stub = new Proxy(function () {}, {
    apply(_t, _this, args) {
      if (disposed) return PromiseReject(new Error(DISPOSED));
      if (kind !== "f") return PromiseReject(new TypeError("The RPC stub is not a function."));
      return call("", args);
    },
    get(_, prop) {
      if (prop === SymbolDispose) return dispose;
      if (prop === "dup") return dup;
      if (typeof prop === "symbol" || prop === "then") return undefined;
      return (...args) => call(prop, args);
    },
  });
  implicitDispose.set(stub, () => {
    if (disposed) return;
    disposed = true;
    if (--refs.n === 0) callExport(iso, id, DISPOSE, [true]).catch(() => {});
  });
  return stub;
}

async function callExport(iso, id, method, args) {
  const bytes = serializeArgs(["call", encode(args)]);
  await outputGate();
  const { 0: ok, 1: payload } = await op_do_call_export(iso, id, method, bytes);
  if (!ok) throw remoteError(new TextDecoder().decode(payload));
  return decode(core.deserialize(payload));
}

const GONE = "The execution context which hosts this callback is no longer running.";

/** Runs a call that arrived through a stub for one of our exports. */
export async function runExport(job, errorJson) {
  try {
    const entry = exportsTable.get(job.export);
    if (entry === undefined) throw new Error(DISPOSED);
    const { value: target, owner } = entry;
    if (job.method === DISPOSE) {
      if (core.deserialize(job.args)[1][0] === true) exportsTable.delete(job.export);
      if (target !== null && typeof target[SymbolDispose] === "function") target[SymbolDispose]();
      op_do_reply(job.id, true, serializeArgs(undefined));
      return;
    }
    if (owner !== null && owner.broken !== null) throw new Error(GONE);
    const { 1: args } = core.deserialize(job.args);
    const { value: decoded, made } = decodeParams(args);
    let value;
    try {
      let run;
      if (job.method === "") {
        run = target(...decoded);
      } else {
        if (typeof target[job.method] !== "function" || ReflectHas(Object.prototype, job.method)) {
          throw new TypeError(`The RPC receiver does not implement the method "${job.method}".`);
        }
        run = target[job.method](...decoded);
      }
      // A call still running when its object is aborted gets the reason.
      value = owner === null ? await run : await PromiseRace([run, owner.whenBroken()]);
    } finally {
      releaseParams(made);
    }
    op_do_reply(job.id, true, serializeArgs(encodeFor(owner, value)));
  } catch (e) {
    op_do_reply(job.id, false, new TextEncoder().encode(errorJson(e)));
  }
}

function serializeArgs(value) {
  try {
    return core.serialize(value);
  } catch (e) {
    throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
  }
}

// Hands a call to an object of this isolate in place (40_cell.js), given
// its arguments serialized or (`own`, primitives only) as they are: a
// promise of `[ok, payload, value]` (`payload` null when the answer is
// `value` itself), or undefined when it must go through the queue.
let callHere = () => undefined;
export function setCallHere(f) {
  callHere = f;
}

// Calls through one stub leave in the order they were made (E-order): each
// waits for the output gate and for the call before it to leave. Without a
// gate to wait for, a call waits one microtask, as every call did before.
function leaveInOrder(state) {
  const gate = outputGate();
  const prev = state.leaving;
  if (prev === null && gate === undefined) return undefined;
  const mine = prev === null ? gate : PromisePrototypeThen(prev, () => gate);
  const left = PromisePrototypeThen(mine, noop, noop);
  state.leaving = left;
  PromisePrototypeThen(left, () => {
    if (state.leaving === left) state.leaving = null;
  });
  return mine;
}

function noop() {}

/** Whether `v` is its own structured clone: a primitive that can be cloned
 * (a symbol cannot). Such values cross to an object of this isolate as
 * they are, without a trip through the serializer. */
export function isCloneOfItself(v) {
  const t = typeof v;
  return v === null || (t !== "object" && t !== "function" && t !== "symbol");
}

function allCloneOfItself(args) {
  for (let i = 0; i < args.length; i++) if (!isCloneOfItself(args[i])) return false;
  return true;
}

async function rpc(state, ns, id, kind, method, args) {
  if (state.broken !== null) throw state.broken;
  spendSubrequest();
  // `args` is this call's own array (a rest parameter): kept as it is when
  // it holds primitives only; serialized (a DataCloneError thrown now)
  // otherwise.
  const own = allCloneOfItself(args) ? [kind, args] : null;
  const bytes = own === null ? serializeArgs([kind, encode(args)]) : null;
  await leaveInOrder(state);
  const hex = id.toString();
  const { 0: ok, 1: payload, 2: value } = await (callHere(ns, hex, id.name, method, bytes, own) ??
    op_do_call(ns, hex, id.name, method, bytes ?? serializeArgs(own)));
  if (!ok) throw noteBroken(state, remoteError(new TextDecoder().decode(payload)));
  return payload === null ? value : decode(core.deserialize(payload));
}

class DurableObjectStub {
  #ns;
  #id;
  #state;
  constructor(ns, id, state) {
    this.#ns = ns;
    this.#id = id;
    this.#state = state;
  }
  get id() {
    return this.#id;
  }
  get name() {
    return this.#id.name;
  }
  get [SymbolToStringTag]() {
    return "DurableObject";
  }
  // An object takes no connections: workerd's refusal, on the socket.
  connect(address, options) {
    return refusedSocket(address, options);
  }
  async fetch(input, init) {
    if (this.#state.broken !== null) throw this.#state.broken;
    return await fetchVia(
      input,
      init,
      (method, url, headers, bodyRid) =>
        op_do_fetch(this.#ns, this.#id.toString(), this.#id.name, method, url, headers, bodyRid),
      (e) => noteBroken(this.#state, e),
      () => leaveInOrder(this.#state),
    );
  }
}

/** `fetch(input, init)`'s request, a bad URL worded as workerd words it
 * (without quotes). */
export function toRequest(input, init) {
  try {
    return new Request(input, init);
  } catch (e) {
    if (typeof input === "string" && e?.name === "TypeError" && !URL.canParse(input)) {
      throw new TypeError(`Invalid URL: ${input}`);
    }
    throw e;
  }
}

/**
 * A request to another isolate (an object, or another Worker's entrypoint):
 * spends a subrequest, waits for the output gate (`leave`: a stub's calls
 * leave in the order they were made), sends the request with
 * `send(method, url, headers, bodyRid)`, and makes its answer a Response
 * (an error the other side threw is thrown here, through `onError`).
 */
export async function fetchVia(input, init, send, onError = (e) => e, leave = outputGate) {
  spendSubrequest();
  const req = toRequest(input, init);
  const { streams } = internal;
  const bodyRid = req.body === null ? null : streams.resourceForReadableStream(req.body);
  const headers = [];
  for (const pair of req.headers) headers.push(pair);
  await leave();
  const res = await send(req.method, req.url, headers, bodyRid);
  if (res.error !== null) throw onError(remoteError(res.error));
  if (res.wsRid !== null) {
    return new Response(null, {
      status: 101,
      headers: res.headers,
      webSocket: socketFromRid(res.wsRid),
    });
  }
  const body = res.bodyRid === null ? null : streams.readableStreamForRid(res.bodyRid);
  const nullBody = res.status === 101 || res.status === 204 || res.status === 205 ||
    res.status === 304;
  return new Response(nullBody ? null : body, { status: res.status, headers: res.headers });
}

const STUB_OWN = ["fetch", "connect", "id", "name"];

function makeStub(ns, id) {
  const state = { broken: null, leaving: null };
  const stub = new DurableObjectStub(ns, id, state);
  // What the caller assigns onto the stub stays local, as on workerd.
  const assigned = new primordials.SafeMap();
  return new Proxy(stub, {
    get(target, prop) {
      if (assigned.has(prop)) return assigned.get(prop);
      if (prop === "constructor") {
        return function () {
          throw new TypeError("Illegal constructor");
        };
      }
      // Own members, and what every object has (toString, ...), are local.
      if (typeof prop === "symbol" || STUB_OWN.includes(prop) || prop in ObjectPrototype) {
        const v = ReflectGet(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      }
      if (prop === "then") return undefined; // a stub is not a promise
      // stub.method(...args) calls; `await stub.prop` reads a property.
      const call = (...args) => rpc(state, ns, id, "call", prop, args);
      call.then = (resolve, reject) => rpc(state, ns, id, "get", prop, []).then(resolve, reject);
      return call;
    },
    set(_target, prop, value) {
      assigned.set(prop, value);
      return true;
    },
    // Any method name may exist on the remote object.
    has(target, prop) {
      return typeof prop === "string" || assigned.has(prop) || ReflectHas(target, prop);
    },
    // workerd's stubs show their name and id as own keys.
    ownKeys() {
      return ["name", "id"];
    },
    getOwnPropertyDescriptor(target, prop) {
      if (prop !== "name" && prop !== "id") return undefined;
      return { value: ReflectGet(target, prop, target), enumerable: true, configurable: true, writable: false };
    },
  });
}

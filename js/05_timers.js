// Timers as workerd exposes them: setTimeout/setInterval return a `Timeout`
// object (it converts to its numeric id), and the clear functions accept
// either. Deno's timers do the scheduling.
import { core, primordials } from "ext:core/mod.js";

const { ObjectDefineProperty, SymbolDispose, SymbolToPrimitive, SymbolToStringTag, ObjectPrototypeIsPrototypeOf, TypeError } = primordials;
// Called unbound: Deno's timers insist on `this` being undefined or globalThis.
const {
  setTimeout: denoSetTimeout,
  setInterval: denoSetInterval,
  clearTimeout: denoClearTimeout,
  clearInterval: denoClearInterval,
} = core.loadExtScript("ext:deno_web/02_timers.js");

const { op_defer, op_cellhost_log } = core.ops;

// Our own ids over two schedulers: Deno's timers (a millisecond wheel), and
// for a one-shot timer of at most 1 ms the next macrotask, as workerd fires
// it, with no millisecond floor (an app awaiting setTimeout(0) per message
// must not wait 1-2 ms each time). Those run in workerd's order: its clock
// stands still while JavaScript runs, so every pending 0 ms timer comes
// before every pending 1 ms one (setTimeout(fn) without a delay is 1 ms),
// each group in call order. Each macrotask runs the first pending one.
let nextId = 1;
const active = new primordials.SafeMap();
const due = [[], []]; // pending fast timers: 0 ms, then 1 ms
const head = [0, 0];

function runFast() {
  const q = head[0] < due[0].length ? 0 : 1;
  const entry = due[q][head[q]];
  due[q][head[q]++] = undefined;
  if (head[q] === due[q].length) {
    due[q].length = 0;
    head[q] = 0;
  }
  if (entry === undefined || active.get(entry.id) !== entry.rec) return; // cleared meanwhile
  active.delete(entry.id);
  const previous = core.getAsyncContext();
  core.setAsyncContext(entry.context);
  try {
    entry.callback(...entry.args);
  } catch (e) {
    op_cellhost_log(3, `Uncaught ${e?.stack ?? e}\n`);
  } finally {
    core.setAsyncContext(previous);
  }
}

function schedule(id, callback, delay, args, repeat) {
  const ms = delay === undefined ? 1 : +delay;
  if (!repeat && !(ms > 1)) {
    const rec = { fast: true };
    active.set(id, rec);
    due[ms >= 1 ? 1 : 0].push({ id, rec, callback, args, context: core.getAsyncContext() });
    op_defer().then(runFast);
    return;
  }
  const f = repeat ? denoSetInterval : denoSetTimeout;
  const wrapped = repeat ? callback : (...a) => {
    active.delete(id);
    return callback(...a);
  };
  active.set(id, { deno: f(wrapped, delay, ...args), repeat });
}

function cancel(id) {
  const rec = active.get(id);
  if (rec === undefined) return;
  active.delete(id);
  if (rec.deno !== undefined) (rec.repeat ? denoClearInterval : denoClearTimeout)(rec.deno);
}

class Timeout {
  #id;
  #repeat;
  #callback;
  #delay;
  #args;
  constructor(repeat, callback, delay, args) {
    this.#id = nextId++;
    this.#repeat = repeat;
    this.#callback = callback;
    this.#delay = delay;
    this.#args = args;
    schedule(this.#id, callback, delay, args, repeat);
  }
  refresh() {
    cancel(this.#id);
    schedule(this.#id, this.#callback, this.#delay, this.#args, this.#repeat);
    return this;
  }
  unref() {
    return this;
  }
  ref() {
    return this;
  }
  hasRef() {
    return true;
  }
  close() {
    cancel(this.#id);
    return this;
  }
  [SymbolToPrimitive]() {
    return this.#id;
  }
}

function idOf(t) {
  return ObjectPrototypeIsPrototypeOf(Timeout.prototype, t) ? t[SymbolToPrimitive]() : t;
}

// A string "callback" would be compiled as code (Deno's timers do that); workerd
// refuses anything but a function, with Node's wording under its default
// compatibility date (nodejs_compat).
function checkCallback(callback) {
  if (typeof callback === "function") return;
  let received;
  if (callback === null || callback === undefined) received = `Received ${callback}`;
  else if (typeof callback === "object") {
    const name = callback.constructor?.name;
    received = name ? `Received an instance of ${name}` : `Received ${typeof callback}`;
  } else {
    let shown = typeof callback === "string" ? `'${callback}'` : `${String(callback)}`;
    if (typeof callback === "string" && callback.length > 28) shown = `'${callback.slice(0, 25)}'...`;
    received = `Received type ${typeof callback} (${shown})`;
  }
  const e = new TypeError(`The "callback" argument must be of type function. ${received}`);
  e.code = "ERR_INVALID_ARG_TYPE";
  throw e;
}

export function setTimeout(callback, delay, ...args) {
  checkCallback(callback);
  return new Timeout(false, callback, delay, args);
}

export function setInterval(callback, delay = 0, ...args) {
  checkCallback(callback);
  return new Timeout(true, callback, delay, args);
}

export function clearTimeout(t) {
  cancel(+idOf(t));
}

export function clearInterval(t) {
  cancel(+idOf(t));
}

// setImmediate (nodejs_compat) as workerd has it: a 0 ms timer in the same
// queue as setTimeout(fn, 0), so the two run in call order; the Immediate
// it returns is never "ref'd" and has no numeric value.
class Immediate {
  #id;
  constructor(id) {
    this.#id = id;
  }
  ref() {}
  unref() {}
  hasRef() {
    return false;
  }
  [SymbolDispose]() {
    cancel(this.#id);
  }
  static cancel(immediate) {
    cancel(immediate.#id);
  }
}
ObjectDefineProperty(Immediate.prototype, SymbolToStringTag, { value: "Immediate", configurable: true });

export function setImmediate(callback, ...args) {
  if (typeof callback !== "function") {
    throw new TypeError("Failed to execute 'setImmediate' on 'ServiceWorkerGlobalScope': parameter 1 is not of type 'function'.");
  }
  const id = nextId++;
  schedule(id, callback, 0, args, false);
  return new Immediate(id);
}

export function clearImmediate(immediate) {
  if (immediate === undefined || immediate === null) return;
  if (!ObjectPrototypeIsPrototypeOf(Immediate.prototype, immediate)) {
    throw new TypeError("Failed to execute 'clearImmediate' on 'ServiceWorkerGlobalScope': parameter 1 is not of type 'Immediate'.");
  }
  Immediate.cancel(immediate);
}

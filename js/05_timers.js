// Timers as workerd exposes them: setTimeout/setInterval return a `Timeout`
// object (it converts to its numeric id), and the clear functions accept
// either. Deno's timers do the scheduling.
import { core, primordials } from "ext:core/mod.js";

const { SymbolToPrimitive, ObjectPrototypeIsPrototypeOf } = primordials;
// Called unbound: Deno's timers insist on `this` being undefined or globalThis.
const {
  setTimeout: denoSetTimeout,
  setInterval: denoSetInterval,
  clearTimeout: denoClearTimeout,
  clearInterval: denoClearInterval,
} = core.loadExtScript("ext:deno_web/02_timers.js");

class Timeout {
  #id;
  #repeat;
  #callback;
  #delay;
  #args;
  constructor(id, repeat, callback, delay, args) {
    this.#id = id;
    this.#repeat = repeat;
    this.#callback = callback;
    this.#delay = delay;
    this.#args = args;
  }
  refresh() {
    denoClearTimeout(this.#id);
    const f = this.#repeat ? denoSetInterval : denoSetTimeout;
    this.#id = f(this.#callback, this.#delay, ...this.#args);
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
    denoClearTimeout(this.#id);
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

export function setTimeout(callback, delay = 0, ...args) {
  checkCallback(callback);
  return new Timeout(denoSetTimeout(callback, delay, ...args), false, callback, delay, args);
}

export function setInterval(callback, delay = 0, ...args) {
  checkCallback(callback);
  return new Timeout(denoSetInterval(callback, delay, ...args), true, callback, delay, args);
}

export function clearTimeout(t) {
  denoClearTimeout(idOf(t));
}

export function clearInterval(t) {
  denoClearInterval(idOf(t));
}

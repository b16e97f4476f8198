// The parts of workerd's global scope that say where a Worker runs:
// `navigator` (a Navigator), `Cloudflare.compatibilityFlags`, `origin`,
// `console.context()`, the Node.js-flavoured additions to `performance`,
// and `ctx.tracing` (spans that record nothing: a host has no tracer).
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayPrototypeIncludes,
  FunctionPrototypeApply,
  ObjectCreate,
  ObjectDefineProperties,
  ObjectDefineProperty,
  ObjectFreeze,
  ObjectGetOwnPropertyDescriptor,
  ObjectSetPrototypeOf,
  MathCeil,
  PromiseReject,
  ReflectOwnKeys,
  SymbolToStringTag,
  TypeError,
} = primordials;

export const illegal = () => new TypeError("Illegal constructor");
/** Gives a class's prototype the shape of workerd's (`[object name]`,
 * methods of length 0 as its native ones have, `constructor` last). */
export function tag(proto, name) {
  for (const key of ReflectOwnKeys(proto)) {
    const d = ObjectGetOwnPropertyDescriptor(proto, key);
    if (key !== "constructor" && typeof d.value === "function") {
      ObjectDefineProperty(d.value, "length", { value: 0, configurable: true });
    }
  }
  const ctor = proto.constructor;
  delete proto.constructor;
  ObjectDefineProperty(proto, "constructor", { value: ctor, writable: true, configurable: true });
  ObjectDefineProperty(proto, SymbolToStringTag, {
    value: name,
    configurable: true,
    writable: true,
  });
}
function notA(method, cls, i, type) {
  return new TypeError(`Failed to execute '${method}' on '${cls}': parameter ${i} is not of type '${type}'.`);
}
const fixed = (value) => ({ value, enumerable: true, configurable: true });

export class Navigator {
  constructor() {
    throw illegal();
  }
  /** Sends `data` to `url` in the background and says it queued it, as
   * workerd does (even for a URL that cannot be fetched). */
  sendBeacon(url, data) {
    if (typeof url !== "string") throw notA("sendBeacon", "Navigator", 1, "string");
    const sent = (async () => globalThis.fetch(url, { method: "POST", body: data ?? null }))();
    sent.then(undefined, () => {});
    return true;
  }
}
tag(Navigator.prototype, "Navigator");

export const navigator = ObjectCreate(Navigator.prototype);
ObjectDefineProperties(navigator, {
  languages: fixed(["en"]),
  language: fixed("en"),
  platform: fixed(""),
  hardwareConcurrency: fixed(1),
  userAgent: fixed("Cloudflare-Workers"),
});

export class Cloudflare {
  constructor() {
    throw illegal();
  }
}
tag(Cloudflare.prototype, "Cloudflare");

/** Every workerd flag and whether the Worker's date and flags turn it on,
 * from [name, on] pairs in workerd's order: a frozen null-prototype object,
 * what `Cloudflare.compatibilityFlags` is. */
export function compatibilityFlags(pairs) {
  const flags = ObjectCreate(null);
  for (let i = 0; i < pairs.length; i++) flags[pairs[i][0]] = pairs[i][1];
  return ObjectFreeze(flags);
}

/** The global `Cloudflare` for the Worker's `compatibilityFlags`. */
export function cloudflareGlobal(flags) {
  const cf = ObjectCreate(Cloudflare.prototype);
  ObjectDefineProperty(cf, "compatibilityFlags", fixed(flags));
  return cf;
}

// In workerd's order.
const CONSOLE_METHODS = [
  "dir", "dirxml", "table", "groupEnd", "clear", "count", "countReset", "profile", "profileEnd",
  "debug", "error", "info", "log", "warn", "trace", "group", "groupCollapsed", "time", "timeLog",
  "timeEnd", "timeStamp", "assert",
];
/** `console.context(name)`: an object with console's methods, writing to
 * the same log. */
export function consoleContext(console) {
  return function context() {
    const c = ObjectCreate(ObjectCreate(null));
    for (const m of CONSOLE_METHODS) {
      const f = console[m];
      c[m] = (...args) => FunctionPrototypeApply(f, console, args);
    }
    return c;
  };
}

// performance's Node.js additions, as workerd has them: a Worker's event
// loop is the host's, so its measures are zeros.
class EventCounts {
  get size() {
    return 0;
  }
  get() {
    return undefined;
  }
  has() {
    return false;
  }
  *entries() {}
  *keys() {}
  *values() {}
  forEach() {}
}
tag(EventCounts.prototype, "EventCounts");

const NODE_TIMING = ["uvMetricsInfo", "idleTime", "loopExit", "loopStart", "environment", "bootstrapComplete", "v8Start", "nodeStart"];
class PerformanceNodeTiming {
  constructor() {
    for (const k of NODE_TIMING) {
      this[k] = k === "uvMetricsInfo" ? { loopCount: 0, events: 0, eventsWaiting: 0 } : 0;
    }
  }
  toJSON() {
    const out = { name: "node", entryType: "node", startTime: 0, duration: 0 };
    for (let i = NODE_TIMING.length - 1; i >= 0; i--) out[NODE_TIMING[i]] = this[NODE_TIMING[i]];
    return out;
  }
}
tag(PerformanceNodeTiming.prototype, "PerformanceNodeTiming");

function eventLoopUtilization() {
  return { idle: 0, active: 0, utilization: 0 };
}
// Measures nothing (no PerformanceObserver sees it): the function itself,
// as workerd hands it back.
function timerify(fn) {
  if (typeof fn !== "function") throw notA("timerify", "Performance", 1, "function");
  return fn;
}
function markResourceTiming() {}

export function addPerformanceExtras(Performance) {
  // deno_node's node:perf_hooks assigns its own versions of these onto the
  // global performance when it loads (node:http loads it); the setters
  // take those assignments without effect, so the global keeps workerd's.
  const keep = (value) => ({ get: () => value, set() {}, enumerable: true, configurable: true });
  ObjectDefineProperties(Performance.prototype, {
    eventCounts: { get: () => new EventCounts(), enumerable: true, configurable: true },
    nodeTiming: { get: () => new PerformanceNodeTiming(), set() {}, enumerable: true, configurable: true },
    eventLoopUtilization: keep(eventLoopUtilization),
    timerify: keep(timerify),
    markResourceTiming: keep(markResourceTiming),
  });
}

// ctx.tracing: workerd's API for user spans. Nothing records them here, so
// every span is untraced and its calls change nothing, as on workerd
// without a tracing backend.
const TOKEN = Symbol("internal");
const STATUS = ["unset", "ok", "error"];
export class Span {
  constructor(token) {
    if (token !== TOKEN) throw illegal();
  }
  get isTraced() {
    return false;
  }
  /** An untraced span's context: all zeros, a new object each call. */
  spanContext() {
    return { traceId: "00000000000000000000000000000000", spanId: "0000000000000000", traceFlags: 0 };
  }
  setAttribute(key, _value) {
    if (typeof key !== "string") throw notA("setAttribute", "Span", 1, "string");
    return this;
  }
  setAttributes(_attributes) {
    return this;
  }
  recordException(_exception) {}
  updateName(_name) {
    return this;
  }
  setStatus(status) {
    if (typeof status !== "object" || status === null) {
      throw notA("setStatus", "Span", 1, "TracingSpanStatus");
    }
    if (!ArrayPrototypeIncludes(STATUS, status.code)) {
      throw new TypeError("Span status code must be 'unset', 'ok', or 'error'.");
    }
    return this;
  }
  end() {}
}
tag(Span.prototype, "Span");

const idleSpan = new Span(TOKEN);
let active = idleSpan;
// The active span, for synchronous code only (workerd's follows the async
// context too).
function within(span, fn, args) {
  const was = active;
  active = span;
  try {
    return FunctionPrototypeApply(fn, undefined, args);
  } finally {
    active = was;
  }
}

class Tracing {
  constructor(token) {
    if (token !== TOKEN) throw illegal();
  }
  enterSpan(name, fn, ...args) {
    if (typeof fn !== "function") throw notA("enterSpan", "Tracing", 2, "Function");
    const span = new Span(TOKEN);
    return within(span, fn, [span, ...args]);
  }
  startActiveSpan(name, fn) {
    if (typeof fn !== "function") throw notA("startActiveSpan", "Tracing", 2, "Function");
    const span = new Span(TOKEN);
    return within(span, fn, [span]);
  }
  startSpan(name) {
    if (name === undefined) throw notA("startSpan", "Tracing", 1, "string");
    return new Span(TOKEN);
  }
  getActiveSpan() {
    return active;
  }
  withActiveSpan(span, fn, ...args) {
    if (!(span instanceof Span)) throw notA("withActiveSpan", "Tracing", 1, "Span");
    if (typeof fn !== "function") throw notA("withActiveSpan", "Tracing", 2, "Function");
    return within(span, fn, args);
  }
}
ObjectDefineProperty(Tracing.prototype, "Span", { value: Span, enumerable: true, configurable: true, writable: true });
tag(Tracing.prototype, "Tracing");

/** The one `ctx.tracing` of every event. */
export const tracing = new Tracing(TOKEN);

// The event and scope classes workerd names on its global scope. None is
// constructed by a Worker (illegal constructors); the runtime's events
// pass `EVENT`.
const { Event, EventTarget } = core.loadExtScript("ext:deno_web/02_event.js");
export const EVENT = Symbol("event");

export class ExtendableEvent extends Event {
  constructor(type, init, token) {
    if (token !== EVENT) throw illegal();
    super(type, init);
  }
  waitUntil(_promise) {}
}
tag(ExtendableEvent.prototype, "ExtendableEvent");
// Tail and trace Workers' events: no such Workers here.
export class TailEvent extends ExtendableEvent {
  constructor() {
    throw illegal();
  }
}
export class TraceEvent extends ExtendableEvent {
  constructor() {
    throw illegal();
  }
}
export class WorkerGlobalScope extends EventTarget {
  constructor() {
    throw illegal();
  }
}
ObjectDefineProperty(WorkerGlobalScope.prototype, "EventTarget", {
  value: EventTarget,
  writable: true,
  configurable: true,
});

/** workerd's `Body`: Request's and Response's common part. Deno's classes
 * carry the members themselves; this parent gives `instanceof` and the
 * prototype chain workerd has. */
export class Body {
  constructor() {
    throw illegal();
  }
}
export function bodyParent(Request, Response) {
  for (const key of ["body", "bodyUsed", "arrayBuffer", "bytes", "text", "json", "formData", "blob"]) {
    ObjectDefineProperty(Body.prototype, key, ObjectGetOwnPropertyDescriptor(Response.prototype, key));
  }
  ObjectSetPrototypeOf(Request.prototype, Body.prototype);
  ObjectSetPrototypeOf(Response.prototype, Body.prototype);
}

/** Resource timings: a Worker's fetches record none, so there are no
 * instances; the class is there for feature checks. */
export function resourceTiming(PerformanceEntry) {
  class PerformanceResourceTiming extends PerformanceEntry {
    constructor() {
      throw illegal();
    }
  }
  tag(PerformanceResourceTiming.prototype, "PerformanceResourceTiming");
  return PerformanceResourceTiming;
}

// workerd's ReadableStreamBYOBReader.readAtLeast(minBytes, view): the
// standard read's `min`, counted in bytes.
const { ReadableStreamBYOBReader } = core.loadExtScript("ext:deno_web/06_streams.js");
ObjectDefineProperty(ReadableStreamBYOBReader.prototype, "readAtLeast", {
  value: function readAtLeast(minBytes, view) {
    if (minBytes > view?.byteLength) {
      return PromiseReject(
        new TypeError(`Minimum bytes to read (${minBytes}) exceeds size of buffer (${view.byteLength}).`),
      );
    }
    const size = view?.BYTES_PER_ELEMENT ?? 1;
    return this.read(view, { min: MathCeil(minBytes / size) || 1 });
  },
  writable: true,
  enumerable: true,
  configurable: true,
});
ObjectDefineProperty(ReadableStreamBYOBReader.prototype.readAtLeast, "length", { value: 0, configurable: true });

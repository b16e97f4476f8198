// The Workers global scope, assembled from Deno's Web-platform extensions.
// Everything here runs once at build time and is captured in the startup
// snapshot, so an isolate starts with these globals already defined.
import { core, internals, primordials } from "ext:core/mod.js";

const { ObjectDefineProperties, ObjectDefineProperty } = primordials;

// deno_fetch's fetch() reaches for OpenTelemetry helpers; we do not ship
// deno_telemetry, so give it inert ones (tracing is always off).
internals.__telemetry = {
  TRACING_ENABLED: false,
  PROPAGATORS: [],
  DID_NOT_ENTER: {},
  builtinTracer() {
    return undefined;
  },
  enterSpan() {
    return internals.__telemetry.DID_NOT_ENTER;
  },
  exitSpan() {},
  ContextManager: { active: () => undefined },
};
internals.__telemetryUtil = {
  updateSpanFromClientResponse() {},
  updateSpanFromError() {},
  updateSpanFromRequest() {},
};

const webidl = core.loadExtScript("ext:deno_webidl/00_webidl.js");
const event = core.loadExtScript("ext:deno_web/02_event.js");
import * as timers from "ext:cellhost/05_timers.js";
import { kOwner } from "ext:cellhost/01_keys.js";
import { currentEvent, spendSubrequest, withConnection } from "ext:cellhost/06_budget.js";
import * as workersGlobals from "ext:cellhost/07_workers_globals.js";
import * as scope from "ext:cellhost/08_workers_scope.js";
import { workerdFormData } from "ext:cellhost/09_form_data.js";
import { HTMLRewriter } from "ext:cellhost_html/html_rewriter.js";
import * as cacheApi from "ext:cellhost_cache/cache.js";
import { install as installCrypto } from "ext:cellhost_crypto/crypto.js";
const base64 = core.loadExtScript("ext:deno_web/05_base64.js");
const encoding = core.loadExtScript("ext:deno_web/08_text_encoding.js");
const consoleMod = core.loadExtScript("ext:deno_web/01_console.js");
const performance = core.loadExtScript("ext:deno_web/15_performance.js");
const crypto = core.loadExtScript("ext:deno_crypto/00_crypto.js");
const url = core.loadExtScript("ext:deno_web/00_url.js");
const urlPattern = core.loadExtScript("ext:deno_web/01_urlpattern.js");
const streams = core.loadExtScript("ext:deno_web/06_streams.js");
const compression = core.loadExtScript("ext:deno_web/14_compression.js");
const file = core.loadExtScript("ext:deno_web/09_file.js");
const messagePort = core.loadExtScript("ext:deno_web/13_message_port.js");
const { DOMException } = core.loadExtScript("ext:deno_web/01_dom_exception.js");
const abortSignal = core.loadExtScript("ext:deno_web/03_abort_signal.js");
// An abort without a reason gives workerd's AbortError message, not Deno's
// ("The signal has been aborted"): AbortController.abort(),
// AbortSignal.abort() and every signal deno_web aborts without one.
{
  const { AbortSignal, signalAbort } = abortSignal;
  const denoAbort = AbortSignal.prototype[signalAbort];
  AbortSignal.prototype[signalAbort] = function (reason) {
    if (reason === undefined) reason = new DOMException("The operation was aborted", "AbortError");
    return primordials.FunctionPrototypeCall(denoAbort, this, reason);
  };
}
const headers = core.loadExtScript("ext:deno_fetch/20_headers.js");
const formData = core.loadExtScript("ext:deno_fetch/21_formdata.js");
const request = core.loadExtScript("ext:deno_fetch/23_request.js");
const response = core.loadExtScript("ext:deno_fetch/23_response.js");
const fetchMod = core.loadExtScript("ext:deno_fetch/26_fetch.js");
const eventSource = core.loadExtScript("ext:deno_fetch/27_eventsource.js");

// The output gate covers outbound requests too: while writes made on this
// isolate are not yet durable, a request waits for them before it leaves.
// Every outbound request of an event spends its budget and holds one of its
// connections (`start` makes the request).
const { op_cell_gate_pending, op_cell_sync } = core.ops;
function outbound(start) {
  spendSubrequest();
  return withConnection(() => (op_cell_gate_pending() ? op_cell_sync().then(start) : start()));
}
const realFetch = fetchMod.fetch;
function gatedFetch(input, init) {
  try {
    const checked = workersGlobals.checkRequestInit(init);
    return outbound(() => realFetch(input, checked));
  } catch (e) {
    return primordials.PromiseReject(e);
  }
}
ObjectDefineProperty(gatedFetch, "name", { value: "fetch" });
// nodejs_compat's setImmediate and node:timers' functions (runtime/node) are
// these.
internals.workersTimers = timers;
// node:fs's per-request /tmp (runtime/node/js/fs) keys on the current event.
internals.currentEvent = currentEvent;
// EventSource's stream requests take the same path (runtime/ext/src/sources.rs).
internals.eventSourceFetch = (mainFetch, req, signal) => outbound(() => mainFetch(req, true, signal));

// console.* goes to the host log (tracing), not straight to stdout, and
// without terminal colours.
consoleMod.setNoColorFns(() => true, () => true);
const console = new consoleMod.Console((msg, level) =>
  core.ops.op_cellhost_log(level, msg)
);

ObjectDefineProperty(console, "context", core.propWritable(scope.consoleContext(console)));
const navigator = scope.navigator;

ObjectDefineProperties(globalThis, {
  AbortController: core.propNonEnumerable(abortSignal.AbortController),
  AbortSignal: core.propNonEnumerable(abortSignal.AbortSignal),
  Blob: core.propNonEnumerable(file.Blob),
  File: core.propNonEnumerable(file.File),
  FormData: core.propNonEnumerable(formData.FormData),
  Headers: core.propNonEnumerable(headers.Headers),
  Request: core.propNonEnumerable(request.Request),
  Response: core.propNonEnumerable(response.Response),
  fetch: core.propWritable(gatedFetch),
  CloseEvent: core.propNonEnumerable(event.CloseEvent),
  CustomEvent: core.propNonEnumerable(event.CustomEvent),
  ErrorEvent: core.propNonEnumerable(event.ErrorEvent),
  Event: core.propNonEnumerable(event.Event),
  EventTarget: core.propNonEnumerable(event.EventTarget),
  MessageEvent: core.propNonEnumerable(event.MessageEvent),
  PromiseRejectionEvent: core.propNonEnumerable(event.PromiseRejectionEvent),
  DOMException: core.propNonEnumerable(DOMException),
  CompressionStream: core.propNonEnumerable(compression.CompressionStream),
  DecompressionStream: core.propNonEnumerable(compression.DecompressionStream),
  ByteLengthQueuingStrategy: core.propNonEnumerable(
    streams.ByteLengthQueuingStrategy,
  ),
  CountQueuingStrategy: core.propNonEnumerable(streams.CountQueuingStrategy),
  ReadableStream: core.propNonEnumerable(streams.ReadableStream),
  ReadableStreamDefaultReader: core.propNonEnumerable(
    streams.ReadableStreamDefaultReader,
  ),
  ReadableStreamBYOBReader: core.propNonEnumerable(
    streams.ReadableStreamBYOBReader,
  ),
  ReadableStreamBYOBRequest: core.propNonEnumerable(
    streams.ReadableStreamBYOBRequest,
  ),
  ReadableByteStreamController: core.propNonEnumerable(
    streams.ReadableByteStreamController,
  ),
  ReadableStreamDefaultController: core.propNonEnumerable(
    streams.ReadableStreamDefaultController,
  ),
  TransformStream: core.propNonEnumerable(streams.TransformStream),
  TransformStreamDefaultController: core.propNonEnumerable(
    streams.TransformStreamDefaultController,
  ),
  WritableStream: core.propNonEnumerable(streams.WritableStream),
  WritableStreamDefaultWriter: core.propNonEnumerable(
    streams.WritableStreamDefaultWriter,
  ),
  WritableStreamDefaultController: core.propNonEnumerable(
    streams.WritableStreamDefaultController,
  ),
  TextDecoder: core.propNonEnumerable(encoding.TextDecoder),
  TextEncoder: core.propNonEnumerable(encoding.TextEncoder),
  TextDecoderStream: core.propNonEnumerable(encoding.TextDecoderStream),
  TextEncoderStream: core.propNonEnumerable(encoding.TextEncoderStream),
  URL: core.propNonEnumerable(url.URL),
  URLSearchParams: core.propNonEnumerable(url.URLSearchParams),
  URLPattern: core.propNonEnumerable(urlPattern.URLPattern),
  MessageChannel: core.propNonEnumerable(messagePort.MessageChannel),
  MessagePort: core.propNonEnumerable(messagePort.MessagePort),
  Performance: core.propNonEnumerable(performance.Performance),
  performance: core.propWritable(performance.performance),
  CryptoKey: core.propNonEnumerable(crypto.CryptoKey),
  Crypto: core.propNonEnumerable(crypto.Crypto),
  SubtleCrypto: core.propNonEnumerable(crypto.SubtleCrypto),
  crypto: core.propGetterOnly(() => crypto.crypto),
  atob: core.propWritable(base64.atob),
  btoa: core.propWritable(base64.btoa),
  setTimeout: core.propWritable(timers.setTimeout),
  setInterval: core.propWritable(timers.setInterval),
  clearTimeout: core.propWritable(timers.clearTimeout),
  clearInterval: core.propWritable(timers.clearInterval),
  structuredClone: core.propWritable(messagePort.structuredClone),
  reportError: core.propWritable(event.reportError),
  console: core.propNonEnumerable(console),
  scheduler: core.propWritable(workersGlobals.scheduler),
  IdentityTransformStream: core.propNonEnumerable(workersGlobals.IdentityTransformStream),
  FixedLengthStream: core.propNonEnumerable(workersGlobals.FixedLengthStream),
  navigator: core.propGetterOnly(() => navigator),
  Navigator: core.propNonEnumerable(scope.Navigator),
  WorkerGlobalScope: core.propNonEnumerable(scope.WorkerGlobalScope),
  ExtendableEvent: core.propNonEnumerable(scope.ExtendableEvent),
  TailEvent: core.propNonEnumerable(scope.TailEvent),
  TraceEvent: core.propNonEnumerable(scope.TraceEvent),
  Body: core.propNonEnumerable(scope.Body),
  origin: { value: "null", enumerable: true, configurable: true },
  self: core.propGetterOnly(() => globalThis),
  caches: core.propGetterOnly(() => cacheApi.caches),
  Cache: core.propNonEnumerable(cacheApi.Cache),
  CacheStorage: core.propNonEnumerable(cacheApi.CacheStorage),
  HTMLRewriter: core.propNonEnumerable(HTMLRewriter),
  EventSource: core.propNonEnumerable(eventSource.EventSource),
});

// globalThis is an EventTarget in Workers (service-worker format uses
// addEventListener("fetch", ...)).
class ServiceWorkerGlobalScope extends scope.WorkerGlobalScope {}
// EventTarget's methods check Web IDL's brand; the global inherits it.
ObjectDefineProperty(ServiceWorkerGlobalScope.prototype, webidl.brand, {
  value: webidl.brand,
});
primordials.ObjectSetPrototypeOf(globalThis, ServiceWorkerGlobalScope.prototype);
globalThis.ServiceWorkerGlobalScope = ServiceWorkerGlobalScope;
event.setEventTargetData(globalThis);
// Deno's console hook would name Deno on the global object's prototype
// chain; console.log(globalThis) formats it generically instead.
delete event.EventTarget.prototype[primordials.SymbolFor("Deno.privateCustomInspect")];
event.saveGlobalThisReference(globalThis);
// Called as bare functions, so they bind to globalThis themselves.
const { FunctionPrototypeCall } = primordials;
const targetProto = event.EventTarget.prototype;
ObjectDefineProperties(globalThis, {
  addEventListener: core.propWritable(function addEventListener(...args) {
    return FunctionPrototypeCall(targetProto.addEventListener, this ?? globalThis, ...args);
  }),
  removeEventListener: core.propWritable(function removeEventListener(...args) {
    return FunctionPrototypeCall(targetProto.removeEventListener, this ?? globalThis, ...args);
  }),
  dispatchEvent: core.propWritable(function dispatchEvent(...args) {
    return FunctionPrototypeCall(targetProto.dispatchEvent, this ?? globalThis, ...args);
  }),
});

const dateNow = Date.now;
// workerd reports time only at I/O boundaries and anchors performance at the
// Unix epoch (timeOrigin 0, now() == Date.now()); do the same.
scope.addPerformanceExtras(performance.Performance);
workerdFormData(request.Request, response.Response);
scope.bodyParent(request.Request, response.Response);
ObjectDefineProperties(performance.performance, {
  timeOrigin: { get: () => 0, configurable: true, enumerable: true },
  now: { value: () => dateNow(), configurable: true, writable: true },
});

// Errors thrown by ops carry a class name; map the DOMException ones.
for (
  const name of [
    "OperationError", "NotSupportedError", "NetworkError", "AbortError",
    "InvalidCharacterError", "DataError", "InvalidStateError", "SyntaxError",
    "IndexSizeError", "TypeMismatchError", "InvalidAccessError", "NotFoundError",
    "DataCloneError", "TimeoutError",
  ]
) {
  core.registerErrorBuilder(`DOMException${name}`, (msg) => new DOMException(msg, name));
}
// A cell another fleet node owns: retryable (nothing happened), not overload.
core.registerErrorBuilder("CellOwnedElsewhere", (json) => {
  const { message, owner } = primordials.JSONParse(json);
  const e = new Error(message);
  e.retryable = true;
  e.overloaded = false;
  e[kOwner] = owner;
  return e;
});
core.registerErrorBuilder(
  "DOMExceptionQuotaExceededError",
  (msg) => new DOMException(msg, "QuotaExceededError"),
);

// Uncaught errors in callbacks and unhandled rejections are logged; they do
// not stop the isolate (workerd keeps serving too).
core.setReportExceptionCallback((e) =>
  core.ops.op_cellhost_log(3, `Uncaught ${e?.stack ?? e}\n`)
);
// So are errors reportError() and event listeners report: deno_web
// dispatches them as "error" on the global scope and, unless that is
// canceled, hands them to deno_core, which would end the isolate's event
// loop and with it the requests in flight (workerd logs them and goes on).
FunctionPrototypeCall(targetProto.addEventListener, globalThis, "error", (e) => {
  e.preventDefault();
  core.ops.op_cellhost_log(3, `Uncaught ${e.error?.stack ?? e.error}\n`);
});
// The global scope hears about them as workerd tells it: `unhandledrejection`
// (not cancelable) and, once such a promise gets a handler,
// `rejectionhandled`.
function dispatchRejection(type, init) {
  try {
    FunctionPrototypeCall(
      targetProto.dispatchEvent,
      globalThis,
      new event.PromiseRejectionEvent(type, init),
    );
  } catch (e) {
    core.ops.op_cellhost_log(3, `Uncaught ${e?.stack ?? e}\n`);
  }
}
core.setUnhandledPromiseRejectionHandler((promise, reason) => {
  dispatchRejection("unhandledrejection", { promise, reason, cancelable: false });
  core.ops.op_cellhost_log(3, `Uncaught (in promise) ${reason?.stack ?? reason}\n`);
  return true;
});
core.setHandledPromiseRejectionHandler((promise) => {
  dispatchRejection("rejectionhandled", { promise });
});

// workerd's Web Crypto additions (MD5, AES-GCM at any IV length, DigestStream,
// timingSafeEqual).
installCrypto(crypto);

// workerd has no Request.cache (without a compatibility flag).
delete request.Request.prototype.cache;

// Internal handles for the dispatch glue, exported to the other glue
// modules only (never reachable from the global object).
export const internal = {
  request,
  response,
  streams,
  event,
  console,
};

// Deno's console hooks are registered symbols naming Deno; take them off every
// prototype a Worker can reach from the global scope, so no key it can list
// names the embedding runtime. Also drop Web Crypto methods workerd lacks,
// so feature detection sees workerd's API.
{
  const hook = primordials.SymbolFor("Deno.privateCustomInspect");
  const seen = new primordials.SafeSet();
  const scrub = (o) => {
    for (; o !== null && typeof o === "object" && !seen.has(o); o = primordials.ObjectGetPrototypeOf(o)) {
      seen.add(o);
      // Frozen objects keep theirs (a strict-mode delete would throw).
      if (primordials.ObjectGetOwnPropertyDescriptor(o, hook)?.configurable) delete o[hook];
    }
  };
  for (const key of primordials.ReflectOwnKeys(globalThis)) {
    const d = primordials.ObjectGetOwnPropertyDescriptor(globalThis, key);
    const v = d?.value;
    if (typeof v === "function" && v.prototype) scrub(v.prototype);
    else if (v !== null && typeof v === "object") scrub(v);
  }
  scrub(navigator);
  for (const m of ["decapsulateBits", "decapsulateKey", "encapsulateBits", "encapsulateKey", "getPublicKey"]) {
    delete crypto.SubtleCrypto.prototype[m];
  }
}

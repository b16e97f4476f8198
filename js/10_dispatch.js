// Request dispatch: takes HTTP requests from the host (op_cellhost_next),
// builds Fetch API Requests, calls the Worker's handler and hands the
// Response back to Rust (fast paths for static bodies, a stream resource
// otherwise).
import { core, internals, primordials } from "ext:core/mod.js";
import {
  setModuleEnv,
  setModuleExports,
  WorkerEntrypoint,
} from "ext:cellhost/20_workers_module.js";
import {
  callFetch,
  newContext,
  unlessAborted,
  remoteServiceStub,
  serveCall,
  serviceStub,
  setupServices,
} from "ext:cellhost/25_services.js";
import { errorJson, makeNamespace, setIsolate } from "ext:cellhost/30_durable_objects.js";
import { adopt, dispatching, dispatchActor, dispatchExport, retire, setupActors } from "ext:cellhost/40_cell.js";
import "ext:cellhost/42_facets.js";
import { kTake } from "ext:cellhost/50_websocket.js";
import { internal } from "ext:cellhost/00_globals.js";
import { kOwner, kUnreachable } from "ext:cellhost/01_keys.js";
import { setSubrequestLimit, withBudget } from "ext:cellhost/06_budget.js";
import { fallbackCf, fixedLengths, requestCache } from "ext:cellhost/07_workers_globals.js";
import { formDataFlags } from "ext:cellhost/09_form_data.js";
import {
  cloudflareGlobal,
  compatibilityFlags,
  EVENT,
  ExtendableEvent,
  resourceTiming,
} from "ext:cellhost/08_workers_scope.js";
import { unframedBodies } from "ext:cellhost_html/html_rewriter.js";
import { assetsBinding } from "ext:cellhost_assets/assets.js";
import { kvNamespace } from "ext:cellhost_kv/kv.js";
import { d1Database } from "ext:cellhost_d1/d1.js";
import { r2Bucket } from "ext:cellhost_r2/r2.js";
import { makeBatch, queueProducer } from "ext:cellhost_queues/queues.js";

const {
  ArrayPrototypeFilter,
  ObjectDefineProperty,
  ObjectPrototypeIsPrototypeOf,
  StringPrototypeToLowerCase,
  TypeError,
  Error,
  JSONParse,
  JSONStringify,
  TypedArrayPrototypeGetSymbolToStringTag,
} = primordials;
const {
  op_cellhost_next,
  op_cellhost_took,
  op_cellhost_respond_text,
  op_cellhost_respond_bytes,
  op_cellhost_respond_stream,
  op_cellhost_respond_error,
  op_cellhost_respond_ws,
  op_cellhost_log,
  op_do_reply,
} = core.ops;

const { request: requestMod, response: responseMod, streams } =
  internal;
const { InnerBody } = core.loadExtScript("ext:deno_fetch/22_body.js");
const {
  serveFastBodyKey,
  serveFastStatusKey,
  serveFastHeaderKindKey,
  serveFastContentTypeKey,
  SERVE_FAST_HEADER_DEFAULT_TEXT,
  SERVE_FAST_HEADER_CONTENT_TYPE,
} = responseMod;
const ResponsePrototype = responseMod.ResponsePrototype;

// The service-worker format's event.
class FetchEvent extends ExtendableEvent {
  #request;
  #respond;
  #responded = false;
  #ctx;
  constructor(type, init) {
    super(type, undefined, EVENT);
    this.#request = init.request;
    this.#respond = init.respond;
    this.#ctx = init.ctx;
  }
  get request() {
    return this.#request;
  }
  respondWith(promise) {
    if (this.#responded) {
      throw new DOMException(
        "FetchEvent.respondWith() has already been called; it can only be called once.",
        "InvalidStateError",
      );
    }
    this.#responded = true;
    this.#respond(promise);
  }
  waitUntil(promise) {
    this.#ctx.waitUntil(promise);
  }
  passThroughOnException() {}
}
globalThis.FetchEvent = FetchEvent;

const EMPTY = new Uint8Array(0);
let worker = null; // { kind, handler, env }

function log(level, msg) {
  op_cellhost_log(level, msg);
}

function errorText(e) {
  if (e && typeof e === "object" && typeof e.stack === "string") return e.stack;
  return String(e);
}

let config = null;

// Called once by the host before the Worker's modules evaluate: the
// bindings exist from then on (`import { env } from "cloudflare:workers"`).
export function prepare(configJson) {
  config = JSONParse(configJson);
  const flags = compatibilityFlags(config.compatibilityFlags);
  formDataFlags(flags);
  ObjectDefineProperty(globalThis, "Cloudflare", {
    value: cloudflareGlobal(flags),
    writable: true,
    enumerable: true,
    configurable: true,
  });
  ObjectDefineProperty(globalThis, "Request", {
    value: requestCache(flags, requestMod),
    writable: true,
    enumerable: false,
    configurable: true,
  });
  // workerd's performance classes as globals, from 2026-03-17 with
  // nodejs_compat (enable_global_performance_classes).
  if (flags.enable_global_performance_classes) {
    const perf = core.loadExtScript("ext:deno_web/15_performance.js");
    for (const name of ["PerformanceEntry", "PerformanceMark", "PerformanceMeasure", "PerformanceObserver", "PerformanceObserverEntryList"]) {
      ObjectDefineProperty(globalThis, name, core.propNonEnumerable(perf[name]));
    }
    ObjectDefineProperty(globalThis, "PerformanceResourceTiming", core.propNonEnumerable(resourceTiming(perf.PerformanceEntry)));
  }
  setIsolate(config.isolate);
  setSubrequestLimit(config.maxSubrequests);
  for (let i = 0; i < config.durableObjects.length; i++) {
    // A class declared by a migration but bound to no name has no binding:
    // it is reached through ctx.exports.
    const binding = config.durableObjects[i].binding;
    if (binding !== "") config.env[binding] = makeNamespace(i);
  }
  for (const { 0: binding, 1: id } of config.kvNamespaces) {
    config.env[binding] = kvNamespace(id);
  }
  for (const { 0: binding, 1: id } of config.d1Databases) {
    config.env[binding] = d1Database(id);
  }
  for (const binding of config.r2Buckets) config.env[binding] = r2Bucket(binding);
  for (const { 0: binding, 1: queue } of config.queueProducers) {
    config.env[binding] = queueProducer(queue);
  }
  for (const s of config.services) {
    config.env[s.binding] = s.worker === null
      ? serviceStub(s.entrypoint ?? "default", s.props)
      : remoteServiceStub(s.worker, s.entrypoint, s.props);
  }
  if (config.assetsBinding) config.env[config.assetsBinding] = assetsBinding();
  setModuleEnv(config.env);
  // nodejs_compat's process.env: the text bindings (workerd leaves out the
  // others), when the compatibility flags populate it.
  if (config.populateProcessEnv) {
    for (const k in config.env) {
      if (typeof config.env[k] === "string") internals.cellhostNodeEnv.set(k, config.env[k]);
    }
  }
  // process.cwd()/chdir() work on node:fs's directories when node:fs is on.
  internals.cellhostNodeFs = config.nodeFs;
}

// Called once by the host after the main module evaluated. `ns` is the module
// namespace (module format) or null (service-worker format).
export function boot(ns) {
  const env = config.env;
  const actors = [];
  const namespaces = [];
  for (let i = 0; i < config.durableObjects.length; i++) {
    const d = config.durableObjects[i];
    const cls = ns?.[d.className];
    if (typeof cls !== "function" && d.binding === "") {
      // Migrated but neither bound nor exported (any more): nothing reaches it.
      actors.push({ cls: null, className: d.className, uniqueKey: d.uniqueKey, sqlite: d.sqlite });
      continue;
    }
    if (!namespaces.some((n) => n[0] === d.className)) {
      namespaces.push([d.className, makeNamespace(i)]);
    }
    if (typeof cls !== "function") {
      throw new Error(
        `${config.main}: Durable Object class "${d.className}" (binding ${d.binding}) is not exported by the Worker`,
      );
    }
    actors.push({ cls, className: d.className, uniqueKey: d.uniqueKey, sqlite: d.sqlite });
  }
  setupActors(actors, env);
  if (ns === null) {
    for (const k in env) globalThis[k] = env[k];
    worker = { kind: "script", env };
  } else {
    const handler = ns.default;
    if (handler === undefined) {
      throw new Error(
        `${config.main}: the module has no default export; a module Worker must \`export default { async fetch(request, env, ctx) { ... } }\``,
      );
    }
    const isClass = typeof handler === "function" &&
      ObjectPrototypeIsPrototypeOf(WorkerEntrypoint.prototype, handler.prototype);
    const hasFetch = isClass
      ? typeof handler.prototype.fetch === "function"
      : handler !== null && typeof handler.fetch === "function";
    if (!hasFetch) {
      log(2, `${config.main}: the default export has no fetch() handler; requests will fail with "Handler does not export a fetch() function."\n`);
    }
    worker = { kind: isClass ? "class" : "object", handler, env };
  }
  setupServices(ns, env, config, namespaces, setModuleExports);
  runLoop();
}

async function runLoop() {
  while (true) {
    // Unref'd: waiting for work does not count as work, so an isolate with
    // nothing else pending is idle, and the host cancels the requests whose
    // code hung (see cancel_hung).
    const next = op_cellhost_next();
    core.unrefOpPromise(next);
    const jobs = await next;
    if (jobs === null) return;
    // From here on, calls made in place look at the batch (40_cell.js).
    dispatching.jobs = jobs;
    op_cellhost_took();
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i];
      dispatching.next = i + 1;
      if (job.kind === "export") dispatchExport(job);
      else if (job.kind === "service") serveServiceCall(job);
      else if (job.service !== null) serveServiceFetch(job);
      else if (job.kind === "scheduled") runScheduled(job);
      else if (job.kind === "queue") runQueue(job);
      else if (job.kind === "retire") retire();
      else if (job.kind === "adopt") adopt(job);
      else if (job.actor === null) handle(job);
      else dispatchActor(job);
    }
    dispatching.jobs = null;
  }
}

export function makeRequest(job) {
  const { method, url, headers: headerList, bodyRid } = job;
  const body = bodyRid === null
    ? null
    : new InnerBody(streams.readableStreamForRid(bodyRid));
  const inner = requestMod.newInnerRequest(
    method,
    url,
    () => headerList,
    body,
    false,
  );
  // As on workerd: a request that arrived is not followed through
  // redirects when passed on (`fetch(request)` hands a 3xx back).
  inner.redirectMode = "manual";
  const request = requestMod.fromInnerRequest(inner, "immutable");
  incomingCf.set(request, null); // built on first read: most requests never look
  return request;
}

// `request.cf`: set on requests that arrive from outside, as workerd and
// wrangler dev do; a Request the Worker builds itself has none.
const incomingCf = new primordials.SafeWeakMap();
ObjectDefineProperty(requestMod.Request.prototype, "cf", {
  get() {
    let cf = incomingCf.get(this);
    if (cf === null) incomingCf.set(this, cf = fallbackCf());
    return cf;
  },
  enumerable: true,
  configurable: true,
});

// workerd's Request has `fetcher` (null: a Request made here was not sent
// through a binding), its Response a `cf` (undefined unless set by a fetch
// to Cloudflare, which cellhost does not make).
ObjectDefineProperty(requestMod.Request.prototype, "fetcher", {
  get() {
    return null;
  },
  enumerable: true,
  configurable: true,
});
ObjectDefineProperty(ResponsePrototype, "cf", {
  get() {
    return undefined;
  },
  enumerable: true,
  configurable: true,
});

function callHandler(request, ctx) {
  switch (worker.kind) {
    case "object": {
      if (typeof worker.handler.fetch !== "function") {
        throw new Error("Handler does not export a fetch() function.");
      }
      return worker.handler.fetch(request, worker.env, ctx);
    }
    case "class": {
      const obj = new worker.handler(ctx, worker.env);
      if (typeof obj.fetch !== "function") {
        throw new Error("Handler does not export a fetch() function.");
      }
      return obj.fetch(request);
    }
    default: {
      let result;
      const ev = new FetchEvent("fetch", {
        request,
        ctx,
        respond: (p) => result = p,
      });
      globalThis.dispatchEvent(ev);
      if (result === undefined) {
        throw new Error(
          "No event listener called respondWith() and passThroughOnException() is not supported here: a fetch event listener must call event.respondWith().",
        );
      }
      return result;
    }
  }
}

// A Cron Trigger's event: what `scheduled(controller, env, ctx)` receives.
class ScheduledController {
  #time;
  #cron;
  constructor(time, cron) {
    this.#time = time;
    this.#cron = cron;
  }
  get scheduledTime() {
    return this.#time;
  }
  get cron() {
    return this.#cron;
  }
  noRetry() {}
  get [primordials.SymbolToStringTag]() {
    return "ScheduledController";
  }
}

// The service-worker format's scheduled event.
class ScheduledEvent extends ExtendableEvent {
  #controller;
  #ctx;
  constructor(controller, ctx) {
    super("scheduled", undefined, EVENT);
    this.#controller = controller;
    this.#ctx = ctx;
  }
  get scheduledTime() {
    return this.#controller.scheduledTime;
  }
  get cron() {
    return this.#controller.cron;
  }
  noRetry() {}
  waitUntil(promise) {
    this.#ctx.waitUntil(promise);
  }
}
globalThis.ScheduledEvent = ScheduledEvent;

function callScheduled(controller, ctx) {
  const missing = () => new Error("Handler does not export a scheduled() function.");
  switch (worker.kind) {
    case "object":
      if (typeof worker.handler.scheduled !== "function") throw missing();
      return worker.handler.scheduled(controller, worker.env, ctx);
    case "class": {
      const obj = new worker.handler(ctx, worker.env);
      if (typeof obj.scheduled !== "function") throw missing();
      return obj.scheduled(controller);
    }
    default:
      globalThis.dispatchEvent(new ScheduledEvent(controller, ctx));
  }
}

const TEXT = [["content-type", "text/plain;charset=UTF-8"]];

// Runs the scheduled handler; the reply says how it went, as wrangler's
// /cdn-cgi/handler/scheduled does ("ok", or "exception" with a 500).
async function runScheduled(job) {
  const controller = new ScheduledController(Number(job.url), job.method);
  try {
    const ctx = newContext();
    await withBudget(() => unlessAborted(ctx, callScheduled(controller, ctx)));
    op_cellhost_respond_text(job.id, 200, TEXT, "ok");
  } catch (e) {
    log(3, `Uncaught ${errorText(e)}\n`);
    op_cellhost_respond_text(job.id, 500, TEXT, "exception");
  }
}

function callQueue(batch, ctx) {
  const missing = () => new Error("Handler does not export a queue() function.");
  switch (worker.kind) {
    case "object":
      if (typeof worker.handler.queue !== "function") throw missing();
      return worker.handler.queue(batch, worker.env, ctx);
    case "class": {
      const obj = new worker.handler(ctx, worker.env);
      if (typeof obj.queue !== "function") throw missing();
      return obj.queue(batch);
    }
    default:
      throw new Error("No event listener registered for queue messages.");
  }
}

// Delivers a batch; the reply is what the handler acknowledged or asked to
// retry (all of it is retried, unless acknowledged, when it throws).
async function runQueue(job) {
  let batch, result;
  try {
    ({ batch, result } = makeBatch(job.url));
  } catch (e) {
    log(3, `Uncaught ${errorText(e)}\n`);
    op_cellhost_respond_text(job.id, 200, TEXT, '{"ok":false}');
    return;
  }
  try {
    const ctx = newContext();
    await withBudget(() => unlessAborted(ctx, callQueue(batch, ctx)));
    result.ok = true;
  } catch (e) {
    log(3, `Uncaught ${errorText(e)}\n`);
  }
  op_cellhost_respond_text(job.id, 200, TEXT, JSONStringify(result));
}

// An uncaught refusal by a fleet node that does not own the Durable
// Object: nothing happened, so the client may retry; 503 says so, unlike
// the 500 of an unknown outcome. A forwarded call whose owner could not
// answer may have run there: 503 too (retry later), naming the owner in
// another header, so that nobody reads it as "nothing happened".
function refusedElsewhere(id, e) {
  const isObj = e !== null && typeof e === "object";
  const owner = isObj ? e[kOwner] : undefined;
  const unreachable = isObj ? e[kUnreachable] : undefined;
  if (typeof owner !== "string" && typeof unreachable !== "string") return false;
  const headers = [
    ["content-type", "text/plain;charset=UTF-8"],
    ["retry-after", "1"],
    typeof owner === "string"
      ? ["x-cellhost-owner", owner]
      : ["x-cellhost-unreachable-owner", unreachable],
  ];
  op_cellhost_respond_text(id, 503, headers, `${e.message}\n`);
  return true;
}

// Another Worker's service binding: its request for one of our entrypoints.
async function serveServiceFetch(job) {
  const { entrypoint, props } = JSONParse(job.service);
  let response;
  try {
    response = await callFetch(entrypoint ?? "default", props, makeRequest(job));
  } catch (e) {
    // As from the network: the caller gets a 500, not the exception.
    log(3, `Uncaught ${errorText(e)}\n`);
    op_cellhost_respond_text(job.id, 500, [], "Internal Server Error");
    return;
  }
  respond(job.id, response);
}

// Another Worker's JS RPC call on one of our entrypoints.
async function serveServiceCall(job) {
  const { entrypoint, props } = JSONParse(job.service);
  try {
    const { 0: kind, 1: args } = core.deserialize(job.args);
    const bytes = await serveCall(entrypoint ?? "default", props, kind, job.method, args);
    op_do_reply(job.id, true, bytes);
  } catch (e) {
    op_do_reply(job.id, false, core.encode(errorJson(e)));
  }
}

async function handle(job) {
  const id = job.id;
  let response;
  try {
    const ctx = newContext();
    response = await withBudget(() => unlessAborted(ctx, callHandler(makeRequest(job), ctx)));
  } catch (e) {
    log(3, `Uncaught ${errorText(e)}\n`);
    if (!refusedElsewhere(id, e)) op_cellhost_respond_error(id, errorText(e));
    return;
  }
  try {
    if (!ObjectPrototypeIsPrototypeOf(ResponsePrototype, response)) {
      throw new TypeError(
        "Incorrect type for Promise: the Promise did not resolve to 'Response'.",
      );
    }
    respond(id, response);
  } catch (e) {
    log(3, `Uncaught ${errorText(e)}\n`);
    op_cellhost_respond_error(id, errorText(e));
  }
}

export function respond(id, response) {
  if (!ObjectPrototypeIsPrototypeOf(ResponsePrototype, response)) {
    throw new TypeError(
      "Incorrect type for Promise: the Promise did not resolve to 'Response'.",
    );
  }
  // 101 with a WebSocket: the socket end goes to the connection.
  const ws = response.webSocket;
  if (ws !== null) {
    const inner = responseMod.toInnerResponseForDenoServe(response);
    if (inner.status !== 101) throw new TypeError("A Response with a webSocket must have status 101.");
    op_cellhost_respond_ws(id, inner.headerList, ws[kTake]());
    return;
  }
  // new Response("text") keeps its body unencoded; send it as is.
  const fastStatus = response[serveFastStatusKey];
  if (fastStatus !== 0 && !response.bodyUsed) {
    const kind = response[serveFastHeaderKindKey];
    const headers = kind === SERVE_FAST_HEADER_DEFAULT_TEXT
      ? [["content-type", "text/plain;charset=UTF-8"]]
      : kind === SERVE_FAST_HEADER_CONTENT_TYPE
      ? [["content-type", response[serveFastContentTypeKey]]]
      : [];
    sendStatic(id, fastStatus, headers, response[serveFastBodyKey]);
    return;
  }
  const inner = responseMod.toInnerResponseForDenoServe(response);
  if (inner.type === "error") {
    op_cellhost_respond_error(id, "the handler returned Response.error()");
    return;
  }
  const headerList = inner.headerList;
  const body = inner.body;
  if (body === null) {
    op_cellhost_respond_bytes(id, inner.status, headerList, EMPTY);
    return;
  }
  const s = body.streamOrStatic;
  if (!ObjectPrototypeIsPrototypeOf(streams.ReadableStreamPrototype, s)) {
    if (s.consumed) throw new TypeError("Body is unusable: body already consumed");
    s.consumed = true;
    sendStatic(id, inner.status, headerList, s.body);
    return;
  }
  if (s.locked || streams.isReadableStreamDisturbed(s)) {
    throw new TypeError("Body is unusable: ReadableStream is locked or disturbed");
  }
  const fixed = fixedLengths.get(s);
  let list = headerList;
  if (unframedBodies.has(s)) {
    list = ArrayPrototypeFilter(list, (h) => StringPrototypeToLowerCase(h[0]) !== "content-length");
  }
  if (fixed !== undefined && !list.some((h) => h[0].toLowerCase() === "content-length")) {
    list = [...list, ["content-length", `${fixed}`]];
  }
  const rid = streams.resourceForReadableStream(s, body.length ?? fixed ?? undefined);
  op_cellhost_respond_stream(id, inner.status, list, rid);
}

function sendStatic(id, status, headers, body) {
  if (typeof body === "string") {
    op_cellhost_respond_text(id, status, headers, body);
  } else if (
    body === null || body === undefined ||
    TypedArrayPrototypeGetSymbolToStringTag(body) === "Uint8Array"
  ) {
    op_cellhost_respond_bytes(id, status, headers, body ?? EMPTY);
  } else {
    throw new TypeError("unexpected static body type");
  }
}

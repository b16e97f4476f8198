// The hosting side of Durable Objects: one Cell per object on this isolate
// (one live instance per id), its input gate (an event queue that
// blockConcurrencyWhile closes), and the storage API over the cell's SQLite
// database. Writes join the isolate's implicit transaction, committed by the
// host at the end of the turn; replies wait for that commit (output gate).
import { core, primordials } from "ext:core/mod.js";
import { DurableObject } from "ext:cellhost/20_workers_module.js";
import {
  decode,
  DurableObjectId,
  encode,
  encodeFor,
  errorJson,
  outputGate,
  remoteError,
  runExport,
} from "ext:cellhost/30_durable_objects.js";
import { makeRequest, respond } from "ext:cellhost/10_dispatch.js";
import * as hib from "ext:cellhost/45_hibernation.js";
import { kState } from "ext:cellhost/50_websocket.js";
import { KEY, kOwner } from "ext:cellhost/01_keys.js";
import { withBudget } from "ext:cellhost/06_budget.js";
import { ctxExports } from "ext:cellhost/25_services.js";

const {
  ArrayIsArray,
  DatePrototype,
  DatePrototypeGetTime,
  MathFloor,
  MathMax,
  NumberIsFinite,
  ArrayPrototypeSort,
  Error,
  JSONStringify,
  MapPrototypeSet,
  ObjectGetPrototypeOf,
  ObjectPrototypeHasOwnProperty,
  ObjectPrototypeIsPrototypeOf,
  ObjectKeys,
  PromiseReject,
  PromiseResolve,
  SafeMap,
  SymbolIterator,
  TypeError,
} = primordials;
const {
  op_cell_open,
  op_cell_open_facet,
  op_cell_activate,
  op_cell_bucket_mode,
  op_cell_close,
  op_cell_abort,
  op_cell_sync,
  op_cell_take_failure,
  op_kv_get,
  op_kv_put,
  op_kv_put_many,
  op_kv_delete,
  op_kv_list,
  op_kv_delete_all,
  op_sql_exec,
  op_sql_database_size,
  op_txn_savepoint,
  op_txn_finish,
  op_alarm_get,
  op_alarm_set,
  op_alarm_delete,
  op_alarm_finish,
  op_alarm_skip,
  op_do_reply,
  op_cellhost_respond_error,
  op_cellhost_log,
  op_cellhost_memory_pressure,
  op_defer,
} = core.ops;

const EVICT_AFTER_MS = 10_000;
// workerd's limit on blockConcurrencyWhile() calls open at once.
const BCW_MAX_DEPTH = 64;
const BCW_TIMEOUT_MS = 30_000;
const RESERVED = [
  "fetch", "connect", "alarm", "webSocketMessage", "webSocketClose", "webSocketError", "dup",
  "constructor",
];

let classes = []; // by namespace index: { className, cls, uniqueKey, sqlite }
let env;
// On a bucket a cell is taken (ownership record, restore) before it opens;
// that talks to the bucket, so it runs without blocking the isolate.
let bucketMode = false;
const cells = new SafeMap();
let evictTimer = null;

// ctx.facets, built by 42_facets.js (it needs Cell; this module needs it
// only when a Durable Object asks).
let makeFacets = null;
export function setFacetsFactory(f) {
  makeFacets = f;
}

/** The Worker's env, for facets' constructors. */
export function workerEnv() {
  return env;
}

export function setupActors(list, e) {
  classes = list;
  env = e;
  bucketMode = list.length > 0 && op_cell_bucket_mode();
}

// Resolves once the event's handler has started (or the event was dropped).
hib.setDeliver((actor, entry, event) =>
  new Promise((started) => dispatchActor({ kind: "ws", actor, entry, event, started }))
);

export function dispatchExport(job) {
  runExport(job, (e) => errorJson(e));
}

export function dispatchActor(job) {
  const key = `${job.actor.ns}:${job.actor.id}`;
  let cell = cells.get(key);
  if (cell === undefined) {
    cell = new Cell(key, job.actor);
    cells.set(key, cell);
    if (evictTimer === null) evictTimer = setInterval(evictIdle, 1000);
  }
  if (job.kind === "alarm") cell.alarmArrived();
  else if (job.kind === "alarm-failed") cell.alarmFailed(job.row);
  else cell.enqueue(job);
}

function evictIdle() {
  const now = Date.now();
  let evicted = 0;
  for (const [key, cell] of cells) {
    if (cell.idle() && now - cell.lastActive >= EVICT_AFTER_MS) {
      cell.close();
      cells.delete(key);
      evicted++;
    }
  }
  // A burst of objects went idle: give their memory back.
  if (evicted > 0 && (cells.size === 0 || evicted >= 256)) op_cellhost_memory_pressure();
  if (cells.size === 0) {
    clearInterval(evictTimer);
    evictTimer = null;
  }
}


export class Cell {
  // `facet`: for a facet, { root, path, id, props, cls }: its top-level
  // object, its names from there, its ctx.id and ctx.props, and its class.
  constructor(key, actor, facet = null) {
    this.key = key;
    this.facet = facet;
    // This object's running facets by name (42_facets.js keeps them).
    this.facets = new SafeMap();
    this.ns = actor.ns;
    this.hex = actor.id;
    this.name = actor.name;
    this.queue = [];
    this.turnHeld = false;
    this.holdToken = 0;
    this.blocked = 0;
    this.inflight = 0;
    this.instance = null;
    this.broken = null;
    this.handle = 0;
    this.lastActive = Date.now();
    this.cls = facet !== null ? facet.cls : classes[this.ns];
    // The alarm being run ([ms, retry, tag]), and whether another delivery
    // came meanwhile (one alarm() at a time; it is checked again after).
    this.alarmRunning = null;
    this.alarmQueued = false;
    this.alarmAgain = false;
    this.activating = false;
    // accept()ed (not hibernatable) sockets keep the object alive.
    this.liveSockets = 0;
  }

  // Rejects with the reason once this instance is broken (aborted, reset).
  whenBroken() {
    if (this.broken !== null) return PromiseReject(this.broken);
    if (this.brokenWaiter === undefined) {
      let reject;
      const promise = new Promise((_, r) => {
        reject = r;
      });
      promise.catch(() => {});
      this.brokenWaiter = { promise, reject };
    }
    return this.brokenWaiter.promise;
  }

  openHandle() {
    if (this.handle === 0) {
      const f = this.facet;
      this.handle = f === null
        ? op_cell_open(this.cls.uniqueKey, this.hex)
        : op_cell_open_facet(f.root.cls.uniqueKey, f.root.hex, f.path);
    }
    return this.handle;
  }

  // The wake schedule says the alarm may be due. The stored row decides,
  // before anything is constructed: a stale or moved alarm runs nothing.
  alarmArrived() {
    if (this.alarmRunning !== null) {
      this.alarmAgain = true;
      return;
    }
    if (this.alarmQueued || this.broken !== null) return;
    if (bucketMode && this.handle === 0) {
      // Not taken yet: take it, then the alarm job checks the row.
      this.alarmQueued = true;
      this.enqueue({ kind: "alarm" });
      return;
    }
    try {
      if (this.dueAlarm() === null) return;
    } catch (e) {
      // The wake schedule's guard delivers it again later.
      op_cellhost_log(2, `alarm of ${this.cls.className} ${this.hex}: ${e?.message ?? e}\n`);
      return;
    }
    this.alarmQueued = true;
    this.enqueue({ kind: "alarm" });
  }

  dueAlarm() {
    const row = op_alarm_get(this.openHandle());
    if (row === null) op_alarm_skip(this.ns, this.hex, this.name, -1);
    else if (row[0] > Date.now()) op_alarm_skip(this.ns, this.hex, this.name, row[0]);
    else return row;
    return null;
  }

  // The previous instance was reset while its alarm() ran: count that
  // failure here, on the cell's fresh database handle.
  alarmFailed(row) {
    // On a bucket the cell must be taken first: count it from the queue.
    if (bucketMode && this.handle === 0) {
      this.enqueue({ kind: "alarm-failed", row });
      return;
    }
    op_alarm_finish(this.openHandle(), this.ns, this.hex, this.name, row[0], row[1], row[2], 1);
    this.lastActive = Date.now();
  }

  async runAlarm() {
    this.alarmQueued = false;
    const row = this.dueAlarm();
    if (row === null) return;
    const { ns, hex, name } = this;
    if (typeof this.instance.alarm !== "function") {
      op_cellhost_log(2, `Durable Object ${this.cls.className} has no alarm() handler; its alarm is deleted\n`);
      op_alarm_finish(this.handle, ns, hex, name, row[0], row[1], row[2], 0);
      return;
    }
    this.alarmRunning = row;
    let outcome = 0;
    try {
      await this.instance.alarm({ scheduledTime: row[0], retryCount: row[1], isRetry: row[1] > 0 });
    } catch (e) {
      op_cellhost_log(3, `Uncaught ${e?.stack ?? e}\n`);
      outcome = 1;
    } finally {
      this.alarmRunning = null;
    }
    if (this.broken !== null) {
      dispatchActor({ kind: "alarm-failed", row, actor: { ns, id: hex, name } });
      return;
    }
    op_alarm_finish(this.handle, ns, hex, name, row[0], row[1], row[2], outcome);
    if (this.alarmAgain) {
      this.alarmAgain = false;
      this.alarmArrived();
    }
  }

  idle() {
    if (this.inflight !== 0 || this.queue.length !== 0 || this.blocked !== 0 || this.liveSockets !== 0) {
      return false;
    }
    for (const f of this.facets.values()) if (!f.idle()) return false;
    return true;
  }

  enqueue(job) {
    this.queue.push(job);
    this.pump();
  }

  // The input gate: an event starts only while no critical section is open
  // and no other event started in this turn; the gate reopens on the next
  // macrotask, so an event's microtasks (settled storage promises included)
  // finish before the next event runs. The constructor runs on the first
  // event, under the gate, so a blockConcurrencyWhile() in it holds that
  // event back too.
  pump() {
    if (this.turnHeld || this.blocked > 0 || this.queue.length === 0) return;
    // A failed commit reset the object (its callers got the error): events
    // that came after go to a fresh instance built from the last good state.
    const failure = this.handle !== 0 ? op_cell_take_failure(this.handle) : null;
    if (failure !== null) {
      const later = this.queue.splice(0);
      this.break(new Error(failure));
      for (const job of later) dispatchActor(job);
      return;
    }
    if (this.instance === null && this.broken === null) {
      if (bucketMode && this.handle === 0 && this.facet === null) {
        this.activate();
        return;
      }
      try {
        this.construct();
      } catch {
        return; // break() failed every queued event
      }
      if (this.blocked > 0) return;
    }
    // The gate reopens when this event finishes (its microtasks included),
    // or on the next macrotask if it is still waiting on real I/O then;
    // events that finish at once share a turn, and so one commit.
    this.turnHeld = true;
    const token = ++this.holdToken;
    const release = () => {
      if (this.holdToken === token && this.turnHeld) {
        this.turnHeld = false;
        this.pump();
      }
    };
    op_defer().then(release);
    const job = this.queue.shift();
    withBudget(() => this.run(job)).then(release);
  }

  // Takes the cell on the bucket; events wait in the queue meanwhile.
  activate() {
    if (this.activating) return;
    this.activating = true;
    op_cell_activate(this.cls.uniqueKey, this.hex).then((h) => {
      this.activating = false;
      if (this.broken !== null) {
        op_cell_close(h);
        return;
      }
      this.handle = h;
      // A cell taken over from another node brings its stored alarm,
      // which this node's schedule has not seen: check it as a wake-up.
      this.alarmArrived();
      this.pump();
    }, (e) => {
      this.activating = false;
      // Owned elsewhere, or the bucket failed: the waiting events get it.
      this.break(e);
    });
  }

  construct() {
    if (this.instance !== null) return;
    try {
      this.openHandle();
    } catch (e) {
      // Its database could not be opened (or, on a bucket, the cell is
      // owned elsewhere): the queued events get the error.
      this.break(e);
      throw e;
    }
    const id = this.facet !== null
      ? this.facet.id
      : new DurableObjectId(KEY, this.hex, this.name !== null && byteLength(this.name) <= 1024 ? this.name : undefined);
    this.ctxId = id;
    const ctx = new DurableObjectState(KEY, this, id, this.facet?.props);
    this.blocked++;
    try {
      this.instance = new this.cls.cls(ctx, env);
    } catch (e) {
      this.break(e);
      throw e;
    } finally {
      this.blocked--;
    }
  }

  break(reason) {
    if (this.broken !== null) return;
    const e = ObjectPrototypeIsPrototypeOf(Error.prototype, reason) ? reason : new Error(`${reason}`);
    try {
      // A refusal by a node that does not own the cell reset nothing.
      if (e[kOwner] === undefined) e.durableObjectReset = true;
    } catch {
      // frozen error objects keep their shape
    }
    this.broken = e;
    this.brokenWaiter?.reject(e);
    // A facet's children go with it; its parent forgets it.
    for (const f of this.facets.values()) f.abort(e);
    this.facets.clear();
    this.onBroken?.(e);
    hib.disconnectAll(this.key);
    if (this.handle !== 0) op_cell_abort(this.handle);
    this.handle = 0;
    cells.delete(this.key); // the next call builds a fresh instance
    for (const job of this.queue.splice(0)) this.fail(job, e);
  }

  close() {
    for (const f of this.facets.values()) f.close();
    this.facets.clear();
    hib.hibernate(this.key);
    if (this.handle !== 0) op_cell_close(this.handle);
    this.handle = 0;
  }

  fail(job, e) {
    // Nobody waits for these: the wake schedule delivers an alarm again.
    if (job.kind === "ws") {
      job.started();
      if (job.event.kind !== "text" && job.event.kind !== "binary") hib.finishClose(job.entry, job.event);
    }
    if (job.kind === "alarm" || job.kind === "alarm-failed" || job.kind === "ws") return;
    if (job.kind === "facet-rpc" || job.kind === "facet-http") {
      job.reject(remoteError(errorJson(e, {})));
      return;
    }
    const extra = job.kind === "rpc" ? { durableObjectId: this.hex } : {};
    const json = errorJson(e, extra);
    if (job.kind === "rpc") op_do_reply(job.id, false, new TextEncoder().encode(json));
    else op_cellhost_respond_error(job.id, json);
  }

  async run(job) {
    this.inflight++;
    try {
      if (this.broken !== null) throw this.broken;
      if (job.kind === "alarm") {
        await this.runAlarm();
      } else if (job.kind === "alarm-failed") {
        this.alarmFailed(job.row);
      } else if (job.kind === "http") {
        if (typeof this.instance.fetch !== "function") {
          throw new Error("Handler does not export a fetch() function.");
        }
        const res = await this.instance.fetch(makeRequest(job));
        // Reset while it ran: its answer is the reset (the output gate broke).
        if (this.broken !== null) throw this.broken;
        respond(job.id, res);
        this.trackSocket(res);
      } else if (job.kind === "ws") {
        await this.deliverFrame(job.entry, job.event, job.started);
      } else if (job.kind === "facet-http") {
        if (typeof this.instance.fetch !== "function") {
          throw new Error("Handler does not export a fetch() function.");
        }
        const res = await this.instance.fetch(job.request);
        if (this.broken !== null) throw this.broken;
        // The parent sees the answer once the facet's writes are durable.
        await outputGate();
        job.resolve(res);
      } else {
        const { 0: kind, 1: args } = core.deserialize(job.args);
        const value = await this.invoke(kind, job.method, decode(args));
        if (this.broken !== null) throw this.broken;
        let bytes;
        try {
          bytes = core.serialize(encodeFor(this, value));
        } catch (e) {
          throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
        }
        if (job.kind === "facet-rpc") {
          await outputGate();
          job.resolve(bytes);
        } else {
          op_do_reply(job.id, true, bytes);
        }
      }
    } catch (e) {
      op_cellhost_log(3, `Uncaught ${e?.stack ?? e}\n`);
      this.fail(job, e);
    } finally {
      this.inflight--;
      this.lastActive = Date.now();
    }
  }

  // The object answered 101 and kept the other end accept()ed.
  trackSocket(res) {
    const peer = res?.webSocket?.[kState]?.peer;
    if (peer === null || peer === undefined || !peer.accepted || peer.readyState === 3) return;
    this.liveSockets++;
    peer.onClosed.push(() => {
      this.liveSockets--;
      this.lastActive = Date.now();
    });
  }

  // A frame or close of a hibernatable socket, for the class's handlers;
  // a missing handler drops it.
  async deliverFrame(entry, ev, started) {
    started();
    const inst = this.instance;
    const ws = hib.socketOf(entry);
    if (ev.kind === "text" || ev.kind === "binary") {
      if (typeof inst.webSocketMessage !== "function") return;
      await inst.webSocketMessage(ws, ev.kind === "text" ? ev.text : ev.data.buffer);
    } else {
      try {
        if (ev.kind === "error") {
          // A protocol error from the peer: the socket is dead.
          if (typeof inst.webSocketError === "function") await inst.webSocketError(ws, new Error(ev.text));
        } else if (typeof inst.webSocketClose !== "function") {
          return;
        } else if (ev.kind === "close") {
          await inst.webSocketClose(ws, ev.code, ev.text, true);
        } else {
          await inst.webSocketClose(ws, 1006, "WebSocket disconnected without sending Close frame.", false);
        }
      } finally {
        hib.finishClose(entry, ev);
      }
    }
  }

  invoke(kind, method, args) {
    const inst = this.instance;
    if (!ObjectPrototypeIsPrototypeOf(DurableObject.prototype, inst)) {
      throw new TypeError(
        "The receiving Durable Object does not support RPC, because its class was not declared with `extends DurableObject`. In order to enable RPC, make sure your class extends the special class `DurableObject`, which can be imported from the module \"cloudflare:workers\".",
      );
    }
    if (RESERVED.includes(method)) {
      throw new TypeError(`'${method}' is a reserved method and cannot be called over RPC.`);
    }
    // Only class members are exposed: walk the prototypes, not the instance.
    let found = false;
    for (let p = ObjectGetPrototypeOf(inst); p !== null && p !== DurableObject.prototype && p !== Object.prototype; p = ObjectGetPrototypeOf(p)) {
      if (ObjectPrototypeHasOwnProperty(p, method)) {
        found = true;
        break;
      }
    }
    if (!found) throw new TypeError(`The RPC receiver does not implement the method "${method}".`);
    const member = inst[method];
    if (kind === "get") return member;
    if (typeof member !== "function") throw new TypeError(`"${method}" is not a function.`);
    return member.apply(inst, args);
  }
}

function byteLength(s) {
  return new TextEncoder().encode(s).length;
}

// -- ctx ---------------------------------------------------------------------

class DurableObjectState {
  #cell;
  #id;
  #props;
  #storage = null;
  #facets = null;
  constructor(key, cell, id, props) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
    this.#id = id;
    this.#props = props ?? {};
  }
  get facets() {
    return this.#facets ??= makeFacets(this.#cell);
  }
  get id() {
    return this.#id;
  }
  get storage() {
    return this.#storage ??= new DurableObjectStorage(KEY, this.#cell);
  }
  get props() {
    return this.#props;
  }
  get exports() {
    return ctxExports();
  }
  waitUntil(promise) {
    // The object stays alive anyway; observe rejections so they are logged.
    PromiseResolve(promise).then(undefined, (e) =>
      op_cellhost_log(3, `Uncaught (in waitUntil) ${e?.stack ?? e}\n`)
    );
  }
  blockConcurrencyWhile(callback) {
    const cell = this.#cell;
    if (cell.blocked >= BCW_MAX_DEPTH) {
      const e = new Error("blockConcurrencyWhile() calls are nested too deeply.");
      cell.break(e);
      throw e;
    }
    cell.blocked++;
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => {
        const e = new Error(
          "A call to blockConcurrencyWhile() in a Durable Object waited for too long. The call was canceled and the Durable Object was reset.",
        );
        e.overloaded = true;
        reject(e);
      }, BCW_TIMEOUT_MS);
    });
    return (async () => {
      try {
        return await Promise.race([callback(), timeout]);
      } catch (e) {
        cell.break(e);
        throw e;
      } finally {
        clearTimeout(timer);
        cell.blocked--;
        cell.pump();
      }
    })();
  }
  abort(reason) {
    const e = new Error(reason === undefined ? "Application called abort() to reset Durable Object." : `${reason}`);
    this.#cell.break(e);
    throw e;
  }
  get #actor() {
    const c = this.#cell;
    return { ns: c.ns, id: c.hex, name: c.name };
  }
  acceptWebSocket(ws, tags) {
    if (this.#cell.facet !== null) {
      throw new Error("Hibernatable WebSockets in Durable Object facets are not supported by cellhost yet");
    }
    hib.acceptWebSocket(this.#cell.key, this.#actor, ws, tags);
  }
  getWebSockets(tag) {
    return hib.getWebSockets(this.#cell.key, tag);
  }
  getTags(ws) {
    return hib.getTags(ws);
  }
  setWebSocketAutoResponse(pair) {
    hib.setAutoResponse(this.#cell.key, this.#actor, pair);
  }
  getWebSocketAutoResponse() {
    return hib.getAutoResponse(this.#cell.key);
  }
  getWebSocketAutoResponseTimestamp(ws) {
    return hib.getAutoResponseTimestamp(ws);
  }
  setHibernatableWebSocketEventTimeout(ms) {
    hib.setEventTimeout(this.#cell.key, this.#actor, ms);
  }
  getHibernatableWebSocketEventTimeout() {
    return hib.getEventTimeout(this.#cell.key);
  }
}

// -- storage -----------------------------------------------------------------

function handle(cell) {
  if (cell.broken !== null) throw cell.broken;
  if (cell.handle === 0) throw new Error("Durable Object storage is no longer accessible.");
  return cell.handle;
}

function ser(value) {
  try {
    return core.serialize(value, { forStorage: true });
  } catch (e) {
    throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
  }
}

function de(bytes) {
  return core.deserialize(bytes, { forStorage: true });
}

// Async storage methods: synchronous SQLite underneath, so they return
// settled promises (no other event can interleave) and errors reject.
function settle(f) {
  try {
    return PromiseResolve(f());
  } catch (e) {
    return PromiseReject(e);
  }
}

function byUtf8(a, b) {
  // SQLite orders keys by their UTF-8 bytes.
  const x = new TextEncoder().encode(a[0]);
  const y = new TextEncoder().encode(b[0]);
  for (let i = 0; i < x.length && i < y.length; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

function compileList(opts) {
  opts ??= {};
  if (opts.start !== undefined && opts.startAfter !== undefined) {
    throw new TypeError("list() cannot be called with both start and startAfter values.");
  }
  if (opts.limit !== undefined && !(opts.limit > 0)) {
    throw new TypeError("List limit must be positive.");
  }
  const s = (v) => (v === undefined ? null : `${v}`);
  return [s(opts.start), s(opts.startAfter), s(opts.end), s(opts.prefix), !!opts.reverse, opts.limit ?? null];
}

class DurableObjectStorage {
  #cell;
  #sql = null;
  #kv = null;
  constructor(key, cell) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
  }
  get(keys) {
    return settle(() => {
      const h = handle(this.#cell);
      if (ArrayIsArray(keys)) {
        const found = [];
        for (const k of keys) {
          const v = op_kv_get(h, `${k}`);
          if (v !== null) found.push([`${k}`, de(v)]);
        }
        ArrayPrototypeSort(found, byUtf8);
        return new Map(found);
      }
      const v = op_kv_get(h, `${keys}`);
      return v === null ? undefined : de(v);
    });
  }
  put(key, value, options) {
    return settle(() => {
      const h = handle(this.#cell);
      if (key !== null && typeof key === "object") {
        if (value !== undefined && (value === null || typeof value !== "object")) {
          throw new TypeError(
            "put() may only be called with a single key-value pair and optional options as put(key, value, options) or with multiple key-value pairs and optional options as put(entries, options)",
          );
        }
        const entries = [];
        for (const k of ObjectKeys(key)) {
          if (key[k] !== undefined) entries.push([k, ser(key[k])]);
        }
        op_kv_put_many(h, entries);
        return;
      }
      if (value === undefined) throw new TypeError("put() called with undefined value.");
      op_kv_put(h, `${key}`, ser(value));
    });
  }
  delete(keys) {
    return settle(() => {
      const h = handle(this.#cell);
      if (ArrayIsArray(keys)) {
        let n = 0;
        for (const k of keys) if (op_kv_delete(h, `${k}`)) n++;
        return n;
      }
      return op_kv_delete(h, `${keys}`);
    });
  }
  list(options) {
    return settle(() => {
      const h = handle(this.#cell);
      const rows = op_kv_list(h, ...compileList(options));
      const m = new Map();
      for (const { 0: k, 1: v } of rows) MapPrototypeSet(m, k, de(v));
      return m;
    });
  }
  deleteAll() {
    return settle(() => {
      if (this.#cell.txnDepth > 0) throw new Error("Cannot call deleteAll() within a transaction");
      op_kv_delete_all(handle(this.#cell));
    });
  }
  transactionSync(callback) {
    const h = handle(this.#cell);
    const depth = op_txn_savepoint(h);
    this.#cell.txnDepth = (this.#cell.txnDepth ?? 0) + 1;
    try {
      const r = callback();
      op_txn_finish(h, depth, true);
      return r;
    } catch (e) {
      op_txn_finish(h, depth, false);
      throw e;
    } finally {
      this.#cell.txnDepth--;
    }
  }
  async transaction(callback) {
    const h = handle(this.#cell);
    const depth = op_txn_savepoint(h);
    this.#cell.txnDepth = (this.#cell.txnDepth ?? 0) + 1;
    let rolledBack = false;
    const txn = {
      get: (k) => this.get(k),
      put: (k, v, o) => this.put(k, v, o),
      delete: (k) => this.delete(k),
      list: (o) => this.list(o),
      deleteAll: () => PromiseReject(new Error("Cannot call deleteAll() within a transaction")),
      getAlarm: (o) => this.getAlarm(o),
      setAlarm: (t, o) => this.setAlarm(t, o),
      deleteAlarm: (o) => this.deleteAlarm(o),
      rollback: () => {
        if (!rolledBack) {
          rolledBack = true;
          op_txn_finish(h, depth, false);
        }
      },
    };
    try {
      const r = await callback(txn);
      if (!rolledBack) op_txn_finish(h, depth, true);
      return r;
    } catch (e) {
      if (!rolledBack) op_txn_finish(h, depth, false);
      throw e;
    } finally {
      this.#cell.txnDepth--;
    }
  }
  sync() {
    // Resolves once every write made so far is committed and fsynced.
    handle(this.#cell);
    return op_cell_sync().then(() => undefined);
  }
  get sql() {
    return this.#sql ??= new SqlStorage(KEY, this.#cell);
  }
  // workerd lets code (tests, mostly) replace it.
  set sql(value) {
    this.#sql = value;
  }
  get kv() {
    if (!this.#cell.cls.sqlite) {
      throw new Error(
        "The storage.kv (synchronous KV) API is only available for SQLite-backed Durable Objects, i.e. those declared with `new_sqlite_classes` in a migration.",
      );
    }
    return this.#kv ??= new SyncKvStorage(KEY, this.#cell);
  }
  getAlarm(_options) {
    return settle(() => storedAlarm(this.#cell));
  }
  setAlarm(time, _options) {
    return settle(() => setAlarm(this.#cell, time));
  }
  deleteAlarm(_options) {
    return settle(() => {
      op_alarm_delete(handle(this.#cell));
    });
  }
}

// The alarm a running alarm() fired reads as none (unless re-armed).
function storedAlarm(cell) {
  const row = op_alarm_get(handle(cell));
  if (row === null) return null;
  if (cell.alarmRunning !== null && row[2] === cell.alarmRunning[2]) return null;
  return row[0];
}

function setAlarm(cell, time) {
  let ms;
  if (ObjectPrototypeIsPrototypeOf(DatePrototype, time)) ms = DatePrototypeGetTime(time);
  else if (typeof time === "number") ms = time;
  else {
    throw new TypeError(
      "Failed to execute 'setAlarm' on 'DurableObjectStorage': parameter 1 is not of type 'date'.",
    );
  }
  if (!NumberIsFinite(ms)) {
    throw new TypeError("The value cannot be converted because it is not a valid Date.");
  }
  if (ms <= 0) throw new TypeError("setAlarm() cannot be called with an alarm time <= 0");
  if (cell.facet !== null) throw new Error("Alarms of Durable Object facets are not supported by cellhost yet");
  // Allowed in the constructor (no instance yet) whatever the class.
  if (cell.instance !== null && typeof cell.instance.alarm !== "function") {
    throw new TypeError(
      "Your Durable Object class must have an alarm() handler in order to call setAlarm()",
    );
  }
  const h = handle(cell);
  // Past times fire at once.
  ms = MathMax(MathFloor(ms), Date.now());
  if (storedAlarm(cell) === ms) return; // the same time: no write at all
  op_alarm_set(h, cell.ns, cell.hex, cell.name, ms);
}

class SyncKvStorage {
  #cell;
  constructor(key, cell) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
  }
  get(key) {
    const v = op_kv_get(handle(this.#cell), `${key}`);
    return v === null ? undefined : de(v);
  }
  put(key, value) {
    op_kv_put(handle(this.#cell), `${key}`, ser(value));
  }
  delete(key) {
    return op_kv_delete(handle(this.#cell), `${key}`);
  }
  // One entry per step, each resuming after the last key returned, so the
  // iterator sees later writes and does not hold anything open; a newer
  // list() call invalidates older iterators (workerd allows only one).
  list(options) {
    const cell = this.#cell;
    // Taken now, not at the first next(): this call invalidates older ones.
    const generation = cell.kvListGeneration = (cell.kvListGeneration ?? 0) + 1;
    return kvListSteps(cell, generation, compileList(options));
  }
}

function* kvListSteps(cell, generation, compiled) {
  {
    const { 0: start, 1: startAfter, 2: end, 3: prefix, 4: reverse, 5: limit } = compiled;
    let last = null;
    for (let n = 0; limit === null || n < limit; n++) {
      if (cell.kvListGeneration !== generation) {
        throw new Error(
          "kv.list() iterator was invalidated because a new call to kv.list() was started. Only one kv.list() iterator can exist at a time.",
        );
      }
      const rows = last === null
        ? op_kv_list(handle(cell), start, startAfter, end, prefix, reverse, 1)
        : reverse
        ? op_kv_list(handle(cell), start, startAfter, last, prefix, true, 1)
        : op_kv_list(handle(cell), null, last, end, prefix, false, 1);
      if (rows.length === 0) return;
      last = rows[0][0];
      yield [last, de(rows[0][1])];
    }
  }
}

// -- SQL ---------------------------------------------------------------------

function sqlHandle(cell) {
  if (!cell.cls.sqlite) {
    throw new Error(
      "SQL is not enabled for this Durable Object class. To enable it, set `enableSql = true` in your workerd config for the class. If using wrangler, make sure the class is declared in a `new_sqlite_classes` migration.",
    );
  }
  return handle(cell);
}

function binding(v) {
  if (v === null || v === undefined || typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "bigint") throw new TypeError("Cannot convert a BigInt value to a number");
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return v;
  return `${v}`; // WebIDL string coercion: true -> "true", 1n -> "1"
}

class SqlStorage {
  #cell;
  constructor(key, cell) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
  }
  exec(query, ...bindings) {
    const out = op_sql_exec(sqlHandle(this.#cell), `${query}`, bindings.map(binding));
    return new SqlStorageCursor(KEY, out);
  }
  get databaseSize() {
    return op_sql_database_size(sqlHandle(this.#cell));
  }
}

class SqlStorageCursor {
  #columns;
  #rows;
  #pos = 0;
  #read;
  #written;
  constructor(key, out) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#columns = out[0];
    this.#rows = out[1];
    this.#read = out[2];
    this.#written = out[3];
  }
  get columnNames() {
    return this.#columns;
  }
  get rowsRead() {
    return this.#read;
  }
  get rowsWritten() {
    return this.#written;
  }
  #object(row) {
    const o = {};
    for (let i = 0; i < this.#columns.length; i++) o[this.#columns[i]] = row[i];
    return o;
  }
  next() {
    if (this.#pos >= this.#rows.length) return { done: true, value: undefined };
    return { done: false, value: this.#object(this.#rows[this.#pos++]) };
  }
  toArray() {
    const out = [];
    while (this.#pos < this.#rows.length) out.push(this.#object(this.#rows[this.#pos++]));
    return out;
  }
  one() {
    const rest = this.#rows.length - this.#pos;
    if (rest === 0) throw new Error("Expected exactly one result from SQL query, but got no results.");
    if (rest > 1) throw new Error("Expected exactly one result from SQL query, but got multiple results.");
    return this.#object(this.#rows[this.#pos++]);
  }
  *raw() {
    while (this.#pos < this.#rows.length) yield this.#rows[this.#pos++];
  }
  [SymbolIterator]() {
    return this;
  }
}

export { remoteError };

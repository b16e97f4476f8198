// The hosting side of Durable Objects: one Cell per object on this isolate
// (one live instance per id), its input gate (an event queue that
// blockConcurrencyWhile closes) and its ctx; the storage API over the
// cell's SQLite database is 41_storage.js. Writes join the isolate's
// implicit transaction, committed by the host at the end of the turn;
// replies wait for that commit (output gate).
import { core, primordials } from "ext:core/mod.js";
import { DurableObject } from "ext:cellhost/20_workers_module.js";
import {
  decode,
  decodeParams,
  releaseParams,
  DurableObjectId,
  encodeFor,
  isCloneOfItself,
  errorJson,
  outputGate,
  remoteError,
  runExport,
  setCallHere,
} from "ext:cellhost/30_durable_objects.js";
import { makeRequest, respond } from "ext:cellhost/10_dispatch.js";
import * as hib from "ext:cellhost/45_hibernation.js";
import { kState } from "ext:cellhost/50_websocket.js";
import { KEY, kOwner } from "ext:cellhost/01_keys.js";
import { withBudget } from "ext:cellhost/06_budget.js";
import { ctxExports } from "ext:cellhost/25_services.js";
import { DurableObjectStorage, handle } from "ext:cellhost/41_storage.js";

const {
  Error,
  ObjectGetPrototypeOf,
  ObjectPrototypeHasOwnProperty,
  ObjectPrototypeIsPrototypeOf,
  PromiseReject,
  PromiseResolve,
  SafeMap,
  TypeError,
} = primordials;
const {
  op_cell_open,
  op_cell_open_facet,
  op_cell_activate_facet,
  op_cell_activate,
  op_cell_bucket_mode,
  op_cell_close,
  op_cell_abort,
  op_cell_take_failure,
  op_alarm_get,
  op_alarm_finish,
  op_alarm_skip,
  op_do_reply,
  op_cellhost_respond_error,
  op_cellhost_log,
  op_cellhost_memory_pressure,
  op_defer,
  op_cell_settled,
  op_gen_release,
  op_gen_moving,
  op_gen_adopt,
  op_gen_local,
  op_do_unplace,
  op_do_local_call,
  op_do_local_answer,
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
// The eviction sweep is housekeeping, not work of a request: unref'd, so it
// does not keep a hung request from being found (see cancel_hung).
// Called unbound: Deno's timers insist on `this` being undefined.
const { setInterval: denoSetInterval, clearInterval: denoClearInterval, unrefTimer } =
  core.loadExtScript("ext:deno_web/02_timers.js");
function startEvicting() {
  if (evictTimer !== null) return;
  evictTimer = denoSetInterval(evictIdle, 1000);
  unrefTimer(evictTimer);
}

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

// The batch of jobs runLoop (10_dispatch.js) is dispatching, and the index
// of the first it has not dispatched yet.
export const dispatching = { jobs: null, next: 0 };

function waitsInBatch(ns, hex) {
  const { jobs } = dispatching;
  if (jobs === null) return false;
  for (let i = dispatching.next; i < jobs.length; i++) {
    const a = jobs[i].actor;
    if (a !== null && a !== undefined && a.ns === ns && a.id === hex) return true;
  }
  return false;
}

// The context events start in: an object's event sees none of its caller's.
const ROOT_CONTEXT = core.getAsyncContext();

// A call to an object that lives here, with nothing queued for it (see
// runtime/ext/src/local.rs), joins its cell's queue at once: no trip
// through the isolate's queue. Its answer passes the output gate as any.
setCallHere((ns, hex, name, method, args, own) => {
  const cell = cells.get(cellKey(ns, hex));
  if (cell === undefined || cell.broken !== null || waitsInBatch(ns, hex)) return undefined;
  const id = op_do_local_call(ns, hex);
  if (id === 0) return undefined;
  const prev = core.getAsyncContext();
  core.setAsyncContext(ROOT_CONTEXT);
  try {
    cell.enqueue({ kind: "rpc", id, method, args, own, here: true, actor: { ns, id: hex, name: name ?? null, remote: null } });
  } finally {
    core.setAsyncContext(prev);
  }
  return answerHere(id);
});

// Answers to calls made in place that are their own clone (primitives),
// by job id: the reply through the output gate carries no bytes for them.
const ownAnswers = new SafeMap();
const NO_BYTES = new Uint8Array(0);

// `[ok, payload, value]`: `payload` null when the answer is `value` itself.
async function answerHere(id) {
  try {
    const r = await op_do_local_answer(id);
    return r[0] && ownAnswers.has(id) ? [true, null, ownAnswers.get(id)] : r;
  } finally {
    ownAnswers.delete(id);
  }
}

export function dispatchActor(job) {
  const key = cellKey(job.actor.ns, job.actor.id);
  let cell = cells.get(key);
  if (cell === undefined) {
    // Handed over to the new version (`cellhost node`): an instance built
    // here would be a second writer beside the new version's.
    if (!op_gen_local(job.actor.ns, job.actor.id)) {
      const e = new Error(
        `Durable Object ${job.actor.id} moved to the new version of this Worker while this event waited; retry`,
      );
      failJob(job, e, job.actor.id);
      return;
    }
    cell = new Cell(key, job.actor);
    cells.set(key, cell);
    startEvicting();
  }
  if (job.kind === "alarm") cell.alarmArrived();
  else if (job.kind === "alarm-failed") cell.alarmFailed(job.row);
  else cell.enqueue(job);
}

// This isolate's version was replaced (`cellhost node`): each object is
// handed over to the new isolates at its next idle point (its writes
// durable), with its hibernatable WebSockets.
let retiring = false;

export function retire() {
  if (retiring) return;
  retiring = true;
  handOverIdle();
  setInterval(handOverIdle, 5);
}

function handOverIdle() {
  for (const [key, cell] of cells) {
    if (!cell.idle() || (cell.handle !== 0 && !op_cell_settled(cell.handle))) continue;
    cells.delete(key);
    cell.close();
    handOver(key, cell.ns, cell.hex);
  }
  // Objects evicted earlier whose sockets stayed (hibernated).
  for (const [key, actor] of hib.hibernatedWithout(cells)) handOver(key, actor.ns, actor.id);
}

async function handOver(key, ns, id) {
  if (!hib.hasSockets(key)) {
    op_gen_release(ns, id, hib.takeSettings(key));
    return;
  }
  // Calls for it wait (in order) while its sockets' reads end here.
  op_gen_moving(ns, id);
  const meta = await hib.pack(key, ns, id);
  op_gen_release(ns, id, meta);
}

// Objects released here whose placement waits for this isolate's writes
// to be durable (asked again each second).
const unplacing = new primordials.SafeSet();

function held(key) {
  return cells.has(key) || hib.managerFor(key, null, false) !== undefined;
}

// A job for it taken from the queue and not dispatched yet would start it
// here again: its placement stays until that job ran.
function unplace(ns, hex) {
  return !waitsInBatch(ns, hex) && op_do_unplace(ns, hex);
}

// A cell's key in `cells`, and back (keyParts).
function cellKey(ns, hex) {
  return `${ns}:${hex}`;
}

function keyParts(key) {
  const i = key.indexOf(":");
  return [+key.slice(0, i), key.slice(i + 1)];
}

/** Cell `key` has no instance and no sockets here any more. */
function released(key) {
  if (held(key)) return;
  const { 0: ns, 1: hex } = keyParts(key);
  op_gen_release(ns, hex, null);
  // Its next call may start it on another isolate once nothing of it is
  // left here.
  if (!unplace(ns, hex)) {
    unplacing.add(key);
    startEvicting();
  }
}
hib.setReleased(released);

/** A cell handed over from a retiring isolate: its sockets are read here. */
export function adopt(job) {
  const json = op_gen_adopt(job.actor.ns, job.actor.id);
  if (json !== null) hib.unpack(cellKey(job.actor.ns, job.actor.id), job.actor, json);
}

function evictIdle() {
  const now = Date.now();
  let evicted = 0;
  for (const [key, cell] of cells) {
    if (cell.idle() && now - cell.lastActive >= EVICT_AFTER_MS) {
      cell.close();
      cells.delete(key);
      released(key);
      evicted++;
    }
  }
  // A burst of objects went idle: give their memory back.
  if (evicted > 0 && (cells.size === 0 || evicted >= 256)) op_cellhost_memory_pressure();
  for (const key of unplacing) {
    const { 0: ns, 1: hex } = keyParts(key);
    // Back here meanwhile: released again when it goes.
    if (held(key) || unplace(ns, hex)) unplacing.delete(key);
  }
  if (cells.size === 0 && unplacing.size === 0) {
    denoClearInterval(evictTimer);
    evictTimer = null;
  }
}


/** Answers an event of object `hex` with error `e` instead of running it. */
function failJob(job, e, hex) {
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
  const extra = job.kind === "rpc" ? { durableObjectId: hex } : {};
  const json = errorJson(e, extra);
  if (job.kind === "rpc") op_do_reply(job.id, false, new TextEncoder().encode(json));
  else op_cellhost_respond_error(job.id, json);
}

export class Cell {
  // `facet`: for a facet, { root, path, id, props, cls }: its top-level
  // object, its names from there, its ctx.id and ctx.props, and its class.
  constructor(key, actor, facet = null) {
    this.key = key;
    this.facet = facet;
    // getCurrentBookmark()'s sequence: kept across instances, as workerd's.
    this.bookmarks = 0;
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
      // The object stays on this isolate for them: released now, it could
      // be handed to a new version while they build an instance here.
      this.break(new Error(failure), later.length > 0);
      for (const job of later) dispatchActor(job);
      return;
    }
    if (this.instance === null && this.broken === null) {
      if (bucketMode && this.handle === 0) {
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
    const f = this.facet;
    const taking = f === null
      ? op_cell_activate(this.cls.uniqueKey, this.hex)
      : op_cell_activate_facet(f.root.cls.uniqueKey, f.root.hex, f.path);
    taking.then((h) => {
      this.activating = false;
      if (this.broken !== null) {
        op_cell_close(h);
        return;
      }
      this.handle = h;
      // A cell taken over from another node brings its stored alarm,
      // which this node's schedule has not seen: check it as a wake-up
      // (facets have none: the schedule knows only top-level objects).
      if (f === null) this.alarmArrived();
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

  // `keep`: events for the object follow at once (a fresh instance here),
  // so it is not released.
  break(reason, keep = false) {
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
    if (this.facet === null && cells.get(this.key) === this) {
      cells.delete(this.key); // the next call builds a fresh instance
      if (!keep) released(this.key);
    }
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
    failJob(job, e, this.hex);
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
        const { 0: kind, 1: args } = job.own ?? core.deserialize(job.args);
        const from = job.actor?.remote;
        const { value: params, made } = decodeParams(args, from);
        let value;
        try {
          value = await this.invoke(kind, job.method, params);
        } finally {
          releaseParams(made);
        }
        if (this.broken !== null) throw this.broken;
        // A caller on this isolate takes a primitive as it is.
        if (job.here === true && isCloneOfItself(value)) {
          ownAnswers.set(job.id, value);
          op_do_reply(job.id, true, NO_BYTES);
          return;
        }
        let bytes;
        try {
          bytes = core.serialize(encodeFor(this, value, from));
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

export { remoteError };

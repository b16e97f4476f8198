// Hibernatable WebSockets: sockets an object accepted with
// ctx.acceptWebSocket(). They belong to the cell, not to the JS instance:
// the manager of a cell outlives eviction, reads every socket, answers the
// auto-response without waking anything, and delivers other frames as
// events through the cell's queue (constructing the object again if it was
// evicted). After eviction getWebSockets() returns new JS objects.
import { core, primordials } from "ext:core/mod.js";
import {
  closeOn,
  kState,
  markClosed,
  socketForState,
} from "ext:cellhost/50_websocket.js";

const { SafeMap, SafeSet, Error, RangeError, TypeError } = primordials;
const { op_ws_next, op_ws_send_text, op_ws_close } = core.ops;

const MAX_SOCKETS = 32768;
const MAX_TAGS = 10;
const MAX_TAG_BYTES = 256;
const MAX_AUTO_BYTES = 2048;
const MAX_EVENT_TIMEOUT_MS = 604_800_000;
const encoder = new TextEncoder();

let deliver = null; // (actor, entry, event) => void, set by 40_cell.js

export function setDeliver(f) {
  deliver = f;
}

const managers = new SafeMap(); // cell key -> Manager

class Manager {
  constructor(actor) {
    this.actor = actor;
    this.entries = new SafeSet();
    this.autoResponse = null;
    this.eventTimeout = null;
  }
}

export function managerFor(key, actor, create) {
  let m = managers.get(key);
  if (m === undefined && create) {
    m = new Manager(actor);
    managers.set(key, m);
  }
  return m;
}

/** ctx.acceptWebSocket(ws, tags) for the cell `key`. */
export function acceptWebSocket(key, actor, ws, tags) {
  const st = ws[kState];
  if (st === undefined) throw new TypeError("acceptWebSocket() expects a WebSocket");
  if (st.accepted) {
    throw new Error("Cannot call `acceptWebSocket()` if the WebSocket was already accepted via `accept()`");
  }
  if (st.hibernatable !== null) return;
  if (st.left || (st.pair !== null && st.pair.used) || st.rid === null) {
    throw new Error(
      "Cannot call `acceptWebSocket()` on this WebSocket because its pair has already been accepted or used in a Response.",
    );
  }
  const list = [];
  for (const t of tags ?? []) {
    const tag = `${t}`;
    if (encoder.encode(tag).length > MAX_TAG_BYTES) {
      throw new Error(`"${tag}" is longer than the max tag length (${MAX_TAG_BYTES} characters).`);
    }
    if (!list.includes(tag)) list.push(tag);
  }
  if (list.length > MAX_TAGS) throw new Error(`a Hibernatable WebSocket cannot have more than ${MAX_TAGS} tags`);
  const m = managerFor(key, actor, true);
  if (m.entries.size >= MAX_SOCKETS) {
    throw new Error(`only ${MAX_SOCKETS} websockets can be accepted on a single Durable Object instance`);
  }
  if (st.pair !== null) st.pair.used = true;
  const entry = { st, ws, tags: list, autoTs: null, key, manager: m };
  st.hibernatable = entry;
  m.entries.add(entry);
  readLoop(key, m, entry);
}

async function readLoop(key, m, entry) {
  const st = entry.st;
  while (st.rid !== null) {
    let ev;
    try {
      ev = await op_ws_next(st.rid);
    } catch {
      return;
    }
    if (ev.kind === "text" && m.autoResponse !== null && ev.text === m.autoResponse.request) {
      op_ws_send_text(st.rid, m.autoResponse.response);
      entry.autoTs = Date.now();
      continue;
    }
    // The next frame is read once this one's handler has started, so an
    // auto-response never overtakes frames queued before it.
    await deliver(m.actor, entry, ev);
    // The socket's last event (an error is one too: no webSocketClose()
    // follows it); see finishClose().
    if (ev.kind === "close" || ev.kind === "gone" || ev.kind === "error") return;
  }
}

/** After webSocketClose(): answer the peer's Close unless the handler did
 * (web_socket_auto_reply_to_close), and release the socket. */
export function finishClose(entry, ev) {
  const st = entry.st;
  if (ev.kind === "close" && !st.closeSent && st.rid !== null) {
    st.closeSent = true;
    op_ws_close(st.rid, ev.code, ev.text);
  }
  markClosed(st);
  // Listed by getWebSockets() until its webSocketClose() has run.
  const m = entry.manager;
  m.entries.delete(entry);
  if (m.entries.size === 0 && m.autoResponse === null && m.eventTimeout === null) {
    if (managers.get(entry.key) === m) managers.delete(entry.key);
  }
}

/** The JS object for a socket in the current instance (new after eviction). */
export function socketOf(entry) {
  return entry.ws ??= socketForState(entry.st);
}

/** The instance was evicted: its JS objects go; the sockets stay. */
export function hibernate(key) {
  const m = managers.get(key);
  if (m === undefined) return;
  for (const entry of m.entries) entry.ws = null;
}

/** The object was reset: its hibernatable sockets are disconnected. */
export function disconnectAll(key) {
  const m = managers.get(key);
  if (m === undefined) return;
  managers.delete(key);
  for (const entry of m.entries) {
    try {
      closeOn(entry.st, 1011, "Durable Object reset");
    } catch {
      // already closing
    }
    markClosed(entry.st);
  }
}

export function getWebSockets(key, tag) {
  const m = managers.get(key);
  if (m === undefined) return [];
  const out = [];
  for (const entry of m.entries) {
    if (tag === undefined || entry.tags.includes(`${tag}`)) out.push(socketOf(entry));
  }
  return out;
}

export function getTags(ws) {
  const st = ws?.[kState];
  if (st === undefined) throw new TypeError("getTags() expects a WebSocket");
  if (st.hibernatable === null) {
    if (st.accepted) throw new Error("only hibernatable websockets can have tags.");
    throw new Error("you must call 'acceptWebSocket()' before attempting to access the tags of a WebSocket.");
  }
  return [...st.hibernatable.tags];
}

export function setAutoResponse(key, actor, pair) {
  const m = managerFor(key, actor, true);
  if (pair === undefined || pair === null) {
    m.autoResponse = null;
    return;
  }
  const req = pair.request, res = pair.response;
  const n = encoder.encode(req).length;
  if (n > MAX_AUTO_BYTES) {
    throw new RangeError(`Request cannot be larger than ${MAX_AUTO_BYTES} bytes. A request of size ${n} was provided.`);
  }
  const r = encoder.encode(res).length;
  if (r > MAX_AUTO_BYTES) {
    throw new RangeError(`Response cannot be larger than ${MAX_AUTO_BYTES} bytes. A response of size ${r} was provided.`);
  }
  m.autoResponse = pair;
}

export function getAutoResponse(key) {
  return managers.get(key)?.autoResponse ?? null;
}

export function getAutoResponseTimestamp(ws) {
  const entry = ws?.[kState]?.hibernatable;
  if (entry === null || entry === undefined || entry.autoTs === null) return null;
  return new Date(entry.autoTs);
}

export function setEventTimeout(key, actor, ms) {
  if (ms === undefined || ms === null || ms === 0) {
    const m = managers.get(key);
    if (m !== undefined) m.eventTimeout = null;
    return;
  }
  if (ms > MAX_EVENT_TIMEOUT_MS) throw new Error(`Event timeout should not exceed ${MAX_EVENT_TIMEOUT_MS} ms.`);
  managerFor(key, actor, true).eventTimeout = ms;
}

export function getEventTimeout(key) {
  return managers.get(key)?.eventTimeout ?? null;
}

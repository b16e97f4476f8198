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
  SocketState,
  socketForState,
  WebSocketRequestResponsePair,
} from "ext:cellhost/50_websocket.js";

const { SafeMap, SafeSet, Error, JSONParse, JSONStringify, RangeError, TypeError, Uint8Array } = primordials;
const { op_ws_next, op_ws_send_text, op_ws_close, op_ws_cancel, op_gen_pack } = core.ops;

const MAX_SOCKETS = 32768;
const MAX_TAGS = 10;
const MAX_TAG_BYTES = 256;
const MAX_AUTO_BYTES = 2048;
const MAX_EVENT_TIMEOUT_MS = 604_800_000;
const encoder = new TextEncoder();

let deliver = null; // (actor, entry, event) => void, set by 40_cell.js
let released = (_key) => {}; // a cell's manager went away (40_cell.js)

export function setDeliver(f) {
  deliver = f;
}

export function setReleased(f) {
  released = f;
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
  entry.loop = readLoop(key, m, entry);
}

async function readLoop(key, m, entry, first = null) {
  const st = entry.st;
  while (st.rid !== null || first !== null) {
    let ev = first;
    first = null;
    if (ev === null) {
      try {
        ev = await op_ws_next(st.rid);
      } catch {
        return;
      }
      // Read as the socket was being packed: the event travels with it.
      if (entry.moving) {
        entry.pending = ev;
        return;
      }
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
    if (managers.get(entry.key) === m) {
      managers.delete(entry.key);
      released(entry.key);
    }
  }
}

// Handing a cell over to a new version's isolate (see 40_cell.js).

/** Cells with hibernated sockets or settings and no instance here. */
export function hibernatedWithout(cells) {
  const out = [];
  for (const [key, m] of managers) if (!cells.has(key)) out.push([key, m.actor]);
  return out;
}

export function hasSockets(key) {
  const m = managers.get(key);
  return m !== undefined && m.entries.size > 0;
}

function settingsOf(m) {
  const a = m.autoResponse;
  return JSONStringify({
    autoResponse: a === null ? null : { request: a.request, response: a.response },
    eventTimeout: m.eventTimeout,
  });
}

/** The hibernation settings of a cell without sockets, taken out (or null). */
export function takeSettings(key) {
  const m = managers.get(key);
  if (m === undefined) return null;
  managers.delete(key);
  return settingsOf(m);
}

/** Ends the reads of the cell's sockets and packs them (op_gen_pack) for
 * the new isolate; resolves to its settings. */
export async function pack(key, ns, id) {
  const m = managers.get(key);
  managers.delete(key);
  const entries = [...m.entries];
  for (const e of entries) {
    e.moving = true;
    if (e.st.rid !== null) op_ws_cancel(e.st.rid);
  }
  for (const e of entries) await e.loop;
  for (const e of entries) {
    const st = e.st;
    if (st.rid === null) continue; // closed meanwhile
    const ev = e.pending ?? null;
    op_gen_pack(ns, id, st.rid, JSONStringify({
      tags: e.tags,
      autoTs: e.autoTs,
      attachment: st.attachment === null ? null : [...st.attachment],
      url: st.url,
      protocol: st.protocol,
      extensions: st.extensions,
      readyState: st.readyState,
      closeSent: st.closeSent,
      pending: ev === null ? null : { ...ev, data: ev.data === null || ev.data === undefined ? null : [...ev.data] },
    }));
    st.rid = null;
  }
  return settingsOf(m);
}

/** A cell's sockets and settings, handed over from a retiring isolate. */
export function unpack(key, actor, json) {
  const p = JSONParse(json);
  const m = managerFor(key, actor, true);
  const a = p.meta.autoResponse;
  if (a !== null) m.autoResponse = new WebSocketRequestResponsePair(a.request, a.response);
  m.eventTimeout = p.meta.eventTimeout;
  for (const { rid, info } of p.sockets) {
    const st = new SocketState(rid);
    st.url = info.url;
    st.protocol = info.protocol;
    st.extensions = info.extensions;
    st.readyState = info.readyState;
    st.closeSent = info.closeSent;
    st.attachment = info.attachment === null ? null : new Uint8Array(info.attachment);
    const entry = { st, ws: null, tags: info.tags, autoTs: info.autoTs, key, manager: m };
    st.hibernatable = entry;
    m.entries.add(entry);
    const ev = info.pending;
    if (ev !== null && ev.data !== null) ev.data = new Uint8Array(ev.data);
    entry.loop = readLoop(key, m, entry, ev);
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
  released(key);
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

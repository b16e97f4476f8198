// WebSockets as Workers have them: one WebSocket class for both ends of a
// WebSocketPair, for sockets a Response hands over (status 101), and for
// outbound clients (`new WebSocket(url)`, fetch() with Upgrade: websocket).
// Each socket end is a Rust endpoint (runtime/ext/src/ws.rs); frames a
// socket sends wait for the output gate there.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayBufferIsView,
  ArrayIsArray,
  ObjectDefineProperty,
  ObjectPrototypeIsPrototypeOf,
  Proxy,
  RangeError,
  ReflectConstruct,
  SafeWeakMap,
  TypeError,
  Error,
} = primordials;
const {
  op_ws_pair,
  op_ws_send_text,
  op_ws_send_binary,
  op_ws_close,
  op_ws_drop,
  op_ws_next,
  op_ws_connect,
  op_cell_gate_pending,
  op_cell_sync,
} = core.ops;

import { KEY, kState, kTake } from "ext:cellhost/01_keys.js";
import { spendSubrequest } from "ext:cellhost/06_budget.js";
export { kState, kTake };
const CONNECTING = 0, OPEN = 1, CLOSING = 2, CLOSED = 3;
const encoder = new TextEncoder();

/** What one socket end knows; shared by the JS objects that stand for it. */
export class SocketState {
  constructor(rid) {
    this.rid = rid;
    this.readyState = OPEN;
    this.accepted = false; // accept(): events go to listeners
    this.hibernatable = null; // acceptWebSocket(): the hibernation entry
    this.pair = null; // { used } shared by both ends of a WebSocketPair
    this.peer = null; // the other end's state, for a pair
    this.closeSent = false;
    this.left = false; // handed over in a Response
    this.url = null;
    this.protocol = "";
    this.extensions = "";
    this.attachment = null;
    this.onClosed = [];
  }
}

function closed(st) {
  if (st.readyState === CLOSED) return;
  st.readyState = CLOSED;
  if (st.rid !== null) op_ws_drop(st.rid);
  st.rid = null;
  for (const f of st.onClosed) f();
}

export function sendOn(st, data) {
  if (st.readyState === CONNECTING) {
    throw new DOMException("WebSocket is not open: readyState 0 (CONNECTING)", "InvalidStateError");
  }
  if (!st.accepted && st.hibernatable === null) {
    throw new TypeError(
      "You must call one of accept() or state.acceptWebSocket() on this WebSocket before sending messages.",
    );
  }
  if (st.closeSent || st.readyState === CLOSED) {
    throw new TypeError("Can't call WebSocket send() after close().");
  }
  if (typeof data === "string") {
    op_ws_send_text(st.rid, data);
  } else if (ObjectPrototypeIsPrototypeOf(ArrayBuffer.prototype, data)) {
    op_ws_send_binary(st.rid, new Uint8Array(data));
  } else if (ArrayBufferIsView(data)) {
    op_ws_send_binary(st.rid, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  } else {
    op_ws_send_text(st.rid, `${data}`);
  }
}

export function closeOn(st, code, reason) {
  if (code !== undefined) {
    code = Number(code);
    // 1004-1006 and 1015 are reserved: never sent in a Close frame.
    if (!(code >= 1000 && code < 5000) || code === 1004 || code === 1005 || code === 1006 || code === 1015) {
      throw new DOMException(`Invalid WebSocket close code: ${code}.`, "InvalidAccessError");
    }
  }
  reason = reason === undefined ? "" : `${reason}`;
  if (encoder.encode(reason).length > 123) {
    throw new DOMException(
      "WebSocket close reason must not be longer than 123 bytes when UTF-8 encoded.",
      "SyntaxError",
    );
  }
  if (st.closeSent || st.readyState === CLOSED) return;
  st.closeSent = true;
  // Still connecting: the connection fails once it is made (see the
  // constructor), as the WebSocket standard has it.
  if (st.readyState === CONNECTING) {
    st.readyState = CLOSING;
    return;
  }
  if (st.readyState === OPEN) st.readyState = CLOSING;
  // 1005: a Close frame without a status.
  op_ws_close(st.rid, code ?? 1005, reason);
}

export class WebSocket extends EventTarget {
  #st;
  #binaryType = "blob";

  constructor(url, protocols) {
    super();
    if (url === KEY) {
      this.#st = protocols;
      return;
    }
    let u;
    try {
      u = new URL(`${url}`);
    } catch {
      throw new DOMException("WebSocket Constructor: The url is invalid.", "SyntaxError");
    }
    if (u.protocol === "http:") u.protocol = "ws:";
    if (u.protocol === "https:") u.protocol = "wss:";
    if (u.protocol !== "ws:" && u.protocol !== "wss:") {
      throw new DOMException("WebSocket Constructor: The url scheme must be ws or wss.", "SyntaxError");
    }
    const list = protocols === undefined ? [] : ArrayIsArray(protocols) ? protocols : [`${protocols}`];
    const st = new SocketState(null);
    st.readyState = CONNECTING;
    st.url = u.href;
    st.accepted = true;
    this.#st = st;
    spendSubrequest();
    const headers = list.length > 0 ? [["sec-websocket-protocol", list.join(", ")]] : [];
    const failed = (e) => {
      st.readyState = CLOSED;
      this.dispatchEvent(new ErrorEvent("error", { message: e?.message ?? `${e}`, error: e }));
      this.dispatchEvent(new CloseEvent("close", { code: 1006, reason: "", wasClean: false }));
    };
    op_ws_connect(u.href, headers).then((c) => {
      if (st.closeSent) {
        op_ws_drop(c.rid);
        failed(new Error("WebSocket was closed before the connection was established."));
        return;
      }
      st.rid = c.rid;
      st.protocol = c.protocol;
      st.extensions = c.extensions;
      st.readyState = OPEN;
      this.dispatchEvent(new Event("open"));
      readLoop(this, st);
    }, failed);
  }

  get [kState]() {
    return this.#st;
  }

  /** Hands the socket end over (to a Response); it leaves this isolate. */
  [kTake]() {
    const st = this.#st;
    if (st.accepted || st.hibernatable !== null || st.left || st.rid === null) {
      throw new TypeError("Can't return WebSocket in a Response if it was accepted or already used.");
    }
    if (st.pair !== null) st.pair.used = true;
    st.left = true;
    const rid = st.rid;
    st.rid = null;
    return rid;
  }

  accept() {
    const st = this.#st;
    if (st.hibernatable !== null) throw new TypeError("Can't accept() WebSocket after enabling hibernation.");
    if (st.left) throw new TypeError("Can't accept() WebSocket that was already used in a response.");
    if (st.accepted) return;
    st.accepted = true;
    if (st.pair !== null) st.pair.used = true;
    readLoop(this, st);
  }

  send(data) {
    sendOn(this.#st, data);
  }

  close(code, reason) {
    closeOn(this.#st, code, reason);
  }

  get readyState() {
    return this.#st.readyState;
  }
  get url() {
    return this.#st.url;
  }
  get protocol() {
    return this.#st.protocol;
  }
  get extensions() {
    return this.#st.extensions;
  }
  get binaryType() {
    return this.#binaryType;
  }
  set binaryType(v) {
    if (v === "blob" || v === "arraybuffer") this.#binaryType = v;
  }

  serializeAttachment(value) {
    const bytes = core.serialize(value, { forStorage: true });
    if (bytes.length > 16384) {
      throw new Error(
        `A WebSocket 'attachment' cannot be larger than 16384 bytes.'attachment' was ${bytes.length} bytes.`,
      );
    }
    // The socket's state outlives the JS object (hibernation keeps it).
    this.#st.attachment = bytes;
  }

  deserializeAttachment() {
    const bytes = this.#st.attachment;
    return bytes === null ? null : core.deserialize(bytes, { forStorage: true });
  }
}

// workerd's constants, under both names, on the class and its instances
// (libraries compare readyState with READY_STATE_OPEN).
for (
  const [name, v] of [["CONNECTING", 0], ["OPEN", 1], ["CLOSING", 2], ["CLOSED", 3]]
) {
  for (const key of [name, `READY_STATE_${name}`]) {
    const d = { value: v, enumerable: true, configurable: true };
    ObjectDefineProperty(WebSocket, key, d);
    ObjectDefineProperty(WebSocket.prototype, key, d);
  }
}

/** A JS object for an endpoint that arrived from elsewhere. */
export function socketFromRid(rid) {
  return new WebSocket(KEY, new SocketState(rid));
}

export function socketForState(st) {
  return new WebSocket(KEY, st);
}

async function readLoop(ws, st) {
  while (st.rid !== null) {
    let ev;
    try {
      ev = await op_ws_next(st.rid);
    } catch {
      break;
    }
    if (ev.kind === "text") {
      ws.dispatchEvent(new MessageEvent("message", { data: ev.text }));
    } else if (ev.kind === "binary") {
      const data = ws.binaryType === "arraybuffer" ? ev.data.buffer : new Blob([ev.data]);
      ws.dispatchEvent(new MessageEvent("message", { data }));
    } else {
      if (ev.kind === "error") {
        ws.dispatchEvent(new ErrorEvent("error", { message: ev.text, error: new Error(ev.text) }));
      }
      const clean = ev.kind === "close";
      // The runtime answers a Close itself (web_socket_auto_reply_to_close).
      if (clean && !st.closeSent && st.rid !== null) {
        st.closeSent = true;
        op_ws_close(st.rid, ev.code, ev.text);
      }
      closed(st);
      ws.dispatchEvent(
        new CloseEvent("close", {
          code: ev.code,
          reason: clean ? ev.text : "WebSocket disconnected without sending Close frame.",
          wasClean: clean,
        }),
      );
      return;
    }
  }
}

export { closed as markClosed };

export class WebSocketPair {
  constructor() {
    const { 0: a, 1: b } = op_ws_pair();
    const pair = { used: false };
    const sa = new SocketState(a);
    const sb = new SocketState(b);
    sa.pair = sb.pair = pair;
    sa.peer = sb;
    sb.peer = sa;
    this[0] = socketForState(sa);
    this[1] = socketForState(sb);
  }
}

export class WebSocketRequestResponsePair {
  #request;
  #response;
  constructor(request, response) {
    this.#request = `${request}`;
    this.#response = `${response}`;
  }
  get request() {
    return this.#request;
  }
  get response() {
    return this.#response;
  }
}

// Response keeps the `webSocket` of its init (status 101).
const socketOf = new SafeWeakMap();
const BaseResponse = globalThis.Response;
const ResponseWithSocket = new Proxy(BaseResponse, {
  construct(target, args, newTarget) {
    const r = ReflectConstruct(target, args, newTarget === ResponseWithSocket ? target : newTarget);
    const ws = args[1]?.webSocket;
    if ((ws === undefined || ws === null) && args[1]?.status === 101) {
      throw new RangeError(
        "Responses may only be constructed with status codes in the range 200 to 599, inclusive.",
      );
    }
    if (ws !== undefined && ws !== null) {
      if (!ObjectPrototypeIsPrototypeOf(WebSocket.prototype, ws)) {
        throw new TypeError("Failed to construct 'Response': webSocket must be a WebSocket.");
      }
      socketOf.set(r, ws);
    }
    return r;
  },
});
ObjectDefineProperty(BaseResponse.prototype, "webSocket", {
  get() {
    return socketOf.get(this) ?? null;
  },
  configurable: true,
  enumerable: true,
});

function isUpgrade(input, init) {
  let h = null;
  if (init?.headers !== undefined) h = new Headers(init.headers);
  else if (ObjectPrototypeIsPrototypeOf(Request.prototype, input)) h = input.headers;
  return h !== null && `${h.get("upgrade")}`.toLowerCase() === "websocket";
}

// fetch() with Upgrade: websocket answers 101 with a socket to accept().
const baseFetch = globalThis.fetch;
async function fetchUpgrade(input, init) {
  const req = new Request(input, init);
  const headers = [];
  for (const { 0: k, 1: v } of req.headers) {
    if (k !== "upgrade" && k !== "connection" && !k.startsWith("sec-websocket-key") && k !== "sec-websocket-version") {
      headers.push([k, v]);
    }
  }
  // An outbound effect: it waits for the output gate.
  if (op_cell_gate_pending()) await op_cell_sync();
  const c = await op_ws_connect(req.url.replace(/^http/, "ws"), headers);
  const st = new SocketState(c.rid);
  st.url = req.url;
  st.protocol = c.protocol;
  st.extensions = c.extensions;
  const out = [["upgrade", "websocket"], ["connection", "Upgrade"]];
  if (c.protocol !== "") out.push(["sec-websocket-protocol", c.protocol]);
  return new ResponseWithSocket(null, { status: 101, headers: out, webSocket: socketForState(st) });
}
function fetch(input, init) {
  if (isUpgrade(input, init)) return fetchUpgrade(input, init);
  return baseFetch(input, init);
}

const prop = (value) => ({ value, writable: true, enumerable: false, configurable: true });
ObjectDefineProperty(globalThis, "Response", prop(ResponseWithSocket));
ObjectDefineProperty(globalThis, "WebSocket", prop(WebSocket));
ObjectDefineProperty(globalThis, "WebSocketPair", prop(WebSocketPair));
ObjectDefineProperty(globalThis, "WebSocketRequestResponsePair", prop(WebSocketRequestResponsePair));
ObjectDefineProperty(globalThis, "fetch", { ...prop(fetch), enumerable: true });

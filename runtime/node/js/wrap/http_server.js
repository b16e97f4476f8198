// node:http's server as workerd has it (enable_nodejs_http_server_modules):
// no sockets; server.listen(port) puts the server in the isolate's port
// table, and cloudflare:node's httpServerHandler(port) turns each fetch
// event into an IncomingMessage and a ServerResponse whose writes become
// the Response. IncomingMessage is shared with the client (http_client.js).
// Served as the internal module `_http_server`, which no Worker imports.
import { EventEmitter } from "node:events";
import { Readable } from "node:stream";
import { Buffer } from "node:buffer";
import { OutgoingMessage, STATUS_CODES } from "node:http";

export function nodeError(Class, code, message) {
  const e = new Class(message);
  e.code = code;
  Object.defineProperty(e, "name", { value: Class.name, configurable: true, writable: true });
  e.toString = function () {
    return `${this.name} [${code}]: ${this.message}`;
  };
  return e;
}

export const notImplemented = (what) => nodeError(Error, "ERR_METHOD_NOT_IMPLEMENTED", `The ${what} method is not implemented`);

const kState = Symbol("state");
const kResponse = Symbol("response");
const kRespond = Symbol("respond");
const kFail = Symbol("fail");
const kOutHeadersOf = Symbol("outHeaders");
const kIncoming = Symbol("IncomingMessage");
const kResponseClass = Symbol("ServerResponse");

export const serverOn = !!globalThis.Cloudflare?.compatibilityFlags?.enable_nodejs_http_server_modules;

// Headers Node.js keeps once (fetch has joined their repeats with commas).
const FIRST_ONLY = new Set([
  "host", "content-type", "user-agent", "referer", "authorization", "proxy-authorization",
  "if-modified-since", "if-unmodified-since", "from", "location", "max-forwards",
]);

// The first value of a comma-joined header, commas in quoted strings kept.
function firstValue(value) {
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === "\\" && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if (c === "," && !quoted) return value.slice(0, i).trim();
  }
  return value;
}

/** The client's response message for a fetch() Response. */
export let fromResponse;
// A server's request message (an IncomingMessage, or a subclass given as
// the server's option) filled from the fetch event's Request.
let fromRequest;

export class IncomingMessage extends Readable {
  #stream = null;
  #reader;
  #reading = false;
  #socket;
  constructor() {
    super({});
    this.aborted = false;
    this.url = "";
    this.method = null;
    this.statusCode = null;
    this.statusMessage = null;
    this.httpVersionMajor = 1;
    this.httpVersionMinor = 1;
    this.httpVersion = "1.1";
    this.complete = false;
    this.rawHeaders = [];
    this.rawTrailers = [];
    this.trailers = {};
    this.headers = {};
    this.joinDuplicateHeaders = false;
  }
  get socket() {
    return this.#socket;
  }
  get connection() {
    return this.#socket;
  }
  get headersDistinct() {
    const out = {};
    for (const name in this.headers) {
      const v = this.headers[name];
      out[name] = Array.isArray(v) ? v : [v];
    }
    return out;
  }
  get trailersDistinct() {
    return {};
  }
  static {
    fromResponse = (response) => {
      const m = new IncomingMessage();
      m.url = response.url;
      m.statusCode = response.status;
      m.statusMessage = response.statusText;
      for (const [name, value] of response.headers) {
        // fetch's Headers yield set-cookie once per cookie; workerd joins
        // every repeated header into one string, set-cookie included.
        m.headers[name] = name in m.headers ? `${m.headers[name]}, ${value}` : value;
      }
      m.#stream = response.body;
      return m;
    };
    fromRequest = (m, request, port, env, ctx) => {
      const url = new URL(request.url);
      m.url = url.pathname + url.search;
      m.method = request.method;
      for (const [name, value] of request.headers) {
        const v = FIRST_ONLY.has(name) ? firstValue(value) : value;
        m.rawHeaders.push(name, v);
        if (name === "set-cookie") (m.headers[name] ??= []).push(v);
        else m.headers[name] = name in m.headers ? `${m.headers[name]}, ${v}` : v;
      }
      m.#stream = request.body;
      m.#socket = fakeSocket(m, request.headers, port);
      m.cloudflare = { env, ctx, cf: request.cf };
    };
  }
  _read() {
    if (this.#reading) return;
    if (this.#stream === null) {
      this.complete = true;
      this.push(null);
      return;
    }
    this.#reader ??= this.#stream.getReader();
    this.#reading = true;
    this.#reader.read().then(
      ({ done, value }) => {
        this.#reading = false;
        if (done) {
          this.complete = true;
          this.push(null);
        } else {
          this.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
        }
      },
      (e) => {
        this.#reading = false;
        this.destroy(e);
      },
    );
  }
  _destroy(err, cb) {
    this.#reader?.cancel(err).catch(() => {});
    cb(err);
  }
  setTimeout(ms, cb) {
    if (cb) this.once("timeout", cb);
    return this;
  }
}

// What a server's request offers of its connection (there is none): the
// client's address from cf-connecting-ip, TLS from x-forwarded-proto.
function fakeSocket(incoming, headers, localPort) {
  const ip = headers.get("cf-connecting-ip");
  const remotePort = (Math.random() * 0x8000) | 0x8000;
  const socket = new EventEmitter();
  const live = (v) => () => (incoming.destroyed ? undefined : v);
  Object.defineProperties(socket, {
    encrypted: { value: headers.get("x-forwarded-proto") === "https", configurable: true },
    readable: { get: () => incoming.readable, configurable: true },
    remoteFamily: { get: live(ip === null || !ip.includes(":") ? "IPv4" : "IPv6"), configurable: true },
    remoteAddress: { get: live(ip ?? "127.0.0.1"), configurable: true },
    remotePort: { get: live(remotePort), configurable: true },
    localAddress: { value: headers.get("host") ?? "127.0.0.1", configurable: true },
    localPort: { value: localPort, configurable: true },
    destroy: { value: (err) => incoming.destroy(err), configurable: true },
  });
  return socket;
}

// ServerResponse is Node's OutgoingMessage (deno_node's port) writing into
// a Response instead of a socket: _send() is where Node hands the socket the
// header block and the body, so the header block becomes the Response's
// status and headers and the body its stream. Chunked framing is not
// written (the body is a stream already).
export function ServerResponse(req, options) {
  if (!serverOn) throw notImplemented("ServerResponse");
  if (!new.target) return new ServerResponse(req, options);
  Reflect.apply(OutgoingMessage, this, [options]);
  this.req = req;
  this.statusCode = 200;
  this.statusMessage = "unknown";
  if (req?.method === "HEAD") this._hasBody = false;
  const state = { controller: null, pending: [], written: 0, length: null, done: false };
  this[kState] = state;
  this[kResponse] = new Promise((resolve, reject) => {
    state.resolve = resolve;
    state.reject = reject;
  });
  // Nobody awaits the Response of a handler that threw.
  this[kResponse].catch(() => {});
  this.on("error", (e) => this[kFail](e));
  // 'close' follows 'finish' and whatever its listeners do.
  this.once("finish", () =>
    queueMicrotask(() => {
      this._closed = true;
      this.emit("close");
    }));
  this.writeHeader = this.writeHead.bind(this);
}
Object.setPrototypeOf(ServerResponse.prototype, OutgoingMessage.prototype);
Object.setPrototypeOf(ServerResponse, OutgoingMessage);

Object.assign(ServerResponse.prototype, {
  _implicitHeader() {
    this.writeHead(this.statusCode);
  },
  writeHead(statusCode, reason, obj) {
    if (this._header) {
      throw nodeError(Error, "ERR_HTTP_HEADERS_SENT", "Cannot write headers after they are sent to the client");
    }
    const given = statusCode;
    statusCode |= 0;
    // A Response cannot carry an informational status.
    if (statusCode < 200 || statusCode > 999) {
      throw nodeError(RangeError, "ERR_HTTP_INVALID_STATUS_CODE", `Invalid status code: ${given}`);
    }
    if (typeof reason === "string") this.statusMessage = reason;
    else {
      this.statusMessage ||= STATUS_CODES[statusCode] || "unknown";
      obj ??= reason;
    }
    this.statusCode = statusCode;
    let headers = obj;
    if (this.getHeaderNames().length > 0) {
      // Headers set before and given here: these replace those by name.
      if (Array.isArray(obj)) {
        if (obj.length % 2 !== 0) {
          throw nodeError(TypeError, "ERR_INVALID_ARG_VALUE", "The argument 'headers' is invalid.");
        }
        for (let n = 0; n < obj.length; n += 2) this.removeHeader(`${obj[n]}`);
        for (let n = 0; n < obj.length; n += 2) this.appendHeader(`${obj[n]}`, obj[n + 1]);
      } else if (obj) {
        for (const key of Object.keys(obj)) if (obj[key]) this.setHeader(key, obj[key]);
      }
      headers = undefined;
    }
    if (/[^\t\x20-\x7e\x80-\xff]/.test(this.statusMessage)) {
      throw nodeError(TypeError, "ERR_INVALID_CHAR", 'Invalid character in statusMessage');
    }
    if (statusCode === 204 || statusCode === 304) this._hasBody = false;
    // Node's own path renders the headers set so far when given none.
    this._storeHeader(`HTTP/1.1 ${statusCode} ${this.statusMessage}\r\n`, headers ?? this[kOutHeadersOf]());
    return this;
  },
  [kOutHeadersOf]() {
    const names = this.getRawHeaderNames();
    if (names.length === 0) return null;
    const out = [];
    for (const name of names) {
      const v = this.getHeader(name);
      if (Array.isArray(v)) for (const x of v) out.push(name, x);
      else out.push(name, v);
    }
    return out;
  },
  _storeHeader(firstLine, headers) {
    Reflect.apply(OutgoingMessage.prototype._storeHeader, this, [firstLine, headers]);
    this.chunkedEncoding = false;
  },
  _send(data, encoding, callback) {
    if (typeof encoding === "function") {
      callback = encoding;
      encoding = null;
    }
    const state = this[kState];
    if (!this._headerSent && this._header !== null) {
      this._headerSent = true;
      this[kRespond](this._header);
    }
    let chunk = typeof data === "string" ? Buffer.from(data, encoding || "utf8") : data;
    if (chunk && chunk.length > 0) {
      // Bytes past the Content-Length are not sent.
      if (state.length !== null) {
        chunk = chunk.subarray(0, Math.max(0, state.length - state.written));
      }
      state.written += chunk.length;
      if (chunk.length > 0) {
        const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength).slice();
        if (state.controller) state.controller.enqueue(bytes);
        else state.pending.push(bytes);
      }
    }
    if (typeof callback === "function") queueMicrotask(() => callback());
    return true;
  },
  // The header block Node renders becomes the Response.
  [kRespond](block) {
    const state = this[kState];
    const [statusLine, ...lines] = block.split("\r\n");
    const m = /^HTTP\/\d+\.\d+ (\d+) (.*)$/.exec(statusLine);
    const headers = new Headers();
    for (const line of lines) {
      if (line === "") continue;
      const at = line.indexOf(": ");
      headers.append(line.slice(0, at), line.slice(at + 2));
    }
    const length = headers.get("content-length");
    if (length !== null) state.length = parseInt(length, 10);
    let body = null;
    if (this._hasBody) {
      body = new ReadableStream({
        type: "bytes",
        start: (controller) => {
          state.controller = controller;
          for (const chunk of state.pending) controller.enqueue(chunk);
          state.pending.length = 0;
          if (state.done) controller.close();
        },
        cancel: (reason) => {
          this.destroy(reason);
        },
      });
      this.once("finish", () => {
        state.done = true;
        state.controller?.close();
      });
    }
    state.resolve(new Response(body, { status: Number(m[1]), statusText: m[2], headers }));
  },
  destroy(error) {
    if (this.destroyed) return this;
    Reflect.apply(OutgoingMessage.prototype.destroy, this, [error]);
    this[kFail](error ?? nodeError(Error, "ERR_STREAM_DESTROYED", "Cannot call destroy after a stream was destroyed"));
    return this;
  },
  [kFail](e) {
    const state = this[kState];
    state.reject(e);
    if (state.controller && !state.done) {
      state.done = true;
      state.controller.error(e);
    }
  },
  assignSocket() {
    throw notImplemented("assignSocket");
  },
  detachSocket() {
    throw notImplemented("detachSocket");
  },
  writeContinue() {
    throw notImplemented("writeContinue");
  },
  writeProcessing() {
    throw notImplemented("writeProcessing");
  },
  writeEarlyHints() {
    throw notImplemented("writeEarlyHints");
  },
});

/** The isolate's listening servers: port -> { fetch }. */
export const portMapper = new Map();

// Node's port check (net's validatePort), with workerd's message.
function validatePort(port) {
  const bad = (typeof port !== "number" && typeof port !== "string") ||
    (typeof port === "string" && port.trim().length === 0) ||
    +port !== +port >>> 0 || +port > 0xffff;
  if (bad) {
    throw nodeError(Error, "ERR_SOCKET_BAD_PORT", `options.port should be >= 0 and < 65536. Received ${typeof port}.`);
  }
  return +port | 0;
}

// The port of listen()'s argument forms (net's normalizeArgs): (port[,
// host][, backlog][, cb]), (options[, cb]), (path[, cb]) or (cb); a path
// (a string that is no number) or none listens on a port of its own.
function listenPort(args) {
  const first = args[0];
  let port = first !== null && typeof first === "object" ? first.port : first;
  if (typeof port === "string" && !(Number(port) >= 0)) port = undefined;
  return typeof port === "number" || typeof port === "string" ? validatePort(port) : 0;
}

const unsupportedOptions = ["maxHeaderSize", "keepAliveTimeout", "keepAliveTimeoutBuffer", "connectionsCheckingInterval"];

export class Server extends EventEmitter {
  #port = null;
  constructor(options, requestListener) {
    if (!serverOn) throw notImplemented("Server");
    super();
    const given = options != null && typeof options !== "function";
    if (typeof options === "function") {
      requestListener = options;
      options = {};
    } else if (options == null) {
      options = {};
    } else if (typeof options !== "object") {
      throw nodeError(TypeError, "ERR_INVALID_ARG_TYPE", `The "options" argument must be of type object. Received type ${typeof options} (${String(options)})`);
    }
    for (const o of unsupportedOptions) {
      if (options[o] !== undefined) throw nodeError(Error, "ERR_OPTION_NOT_IMPLEMENTED", `The ${o} option is not implemented`);
    }
    this.httpAllowHalfOpen = false;
    this.timeout = 0;
    this.maxHeadersCount = null;
    this.maxRequestsPerSocket = 0;
    this.connectionsCheckingInterval = 30_000;
    this.requestTimeout = options.requestTimeout ?? 300_000;
    this.headersTimeout = options.headersTimeout ?? Math.min(60_000, this.requestTimeout);
    // Node's option defaults apply only where options were given.
    this.requireHostHeader = options.requireHostHeader ?? given;
    this.keepAliveTimeout = 5_000;
    this.keepAliveTimeoutBuffer = 1_000;
    this.highWaterMark = options.highWaterMark > 0 ? options.highWaterMark : 65_536;
    this.joinDuplicateHeaders = options.joinDuplicateHeaders ?? false;
    this.rejectNonStandardBodyWrites = options.rejectNonStandardBodyWrites ?? false;
    this[kIncoming] = options.IncomingMessage ?? IncomingMessage;
    this[kResponseClass] = options.ServerResponse ?? ServerResponse;
    if (requestListener) this.on("request", requestListener);
  }
  listen(...args) {
    const callback = typeof args.at(-1) === "function" ? args.pop() : null;
    let port = listenPort(args);
    if (this.#port !== null) {
      throw nodeError(Error, "ERR_SERVER_ALREADY_LISTEN", "Listen method has been called more than once without closing.");
    }
    if (port !== 0 && portMapper.has(port)) {
      const e = new Error(`bind EADDRINUSE 127.0.0.1:${port}`);
      Object.assign(e, { code: "EADDRINUSE", syscall: "bind", address: "127.0.0.1", port });
      throw e;
    }
    if (callback) this.once("listening", callback);
    while (port === 0 || portMapper.has(port)) port = Math.floor(Math.random() * 65535) + 1;
    this.#port = port;
    portMapper.set(port, { fetch: (request, env, ctx) => this.#onRequest(request, env, ctx) });
    queueMicrotask(() => this.emit("listening"));
    return this;
  }
  async #onRequest(request, env, ctx) {
    const incoming = new this[kIncoming]();
    fromRequest(incoming, request, this.#port, env, ctx);
    const response = new this[kResponseClass](incoming);
    try {
      this.emit("connection", this, incoming);
      this.emit("request", incoming, response);
      return await response[kResponse];
    } catch (e) {
      response.destroy(e);
      throw e;
    }
  }
  close(callback) {
    if (this.#port !== null) {
      portMapper.delete(this.#port);
      this.#port = null;
    }
    if (typeof callback === "function") this.once("close", callback);
    queueMicrotask(() => this.emit("close"));
    return this;
  }
  closeAllConnections() {}
  closeIdleConnections() {}
  setTimeout(msecs, callback) {
    if (typeof msecs === "function") callback = msecs;
    else if (typeof msecs === "number") this.timeout = msecs;
    if (typeof callback === "function") this.once("timeout", callback);
    return this;
  }
  getConnections(callback) {
    if (typeof callback === "function") queueMicrotask(() => callback(null, 0));
    return this;
  }
  ref() {
    return this;
  }
  unref() {
    return this;
  }
  get listening() {
    return this.#port !== null;
  }
  address() {
    return this.#port === null ? null : { port: this.#port, family: "IPv4", address: "127.0.0.1" };
  }
  get maxConnections() {
    return Infinity;
  }
  get connections() {
    return 0;
  }
  async [Symbol.asyncDispose]() {
    await new Promise((resolve) => this.close(resolve));
  }
}

export function createServer(options, requestListener) {
  if (!serverOn) throw notImplemented("createServer");
  return new Server(options, requestListener);
}

export function _connectionListener() {
  throw notImplemented("_connectionListener");
}

// cloudflare:node's two functions (see _cloudflare_node).
export async function handleAsNodeRequest(desc, request, env, ctx) {
  if (typeof desc === "number") desc = { port: desc };
  const port = portOf(desc?.port);
  const server = portMapper.get(port);
  if (!server) {
    const e = new Error(
      `Http server with port ${port} not found. This is likely a bug with your code. ` +
        `You should check if server.listen() was called with the same port (${port})`,
    );
    e.code = "ERR_INVALID_ARG_VALUE";
    throw e;
  }
  return await server.fetch(request, env, ctx);
}

function portOf(port) {
  if (!Number.isFinite(port) || port < 0 || port > 65535) throw new Error("Failed to determine port for server");
  return port;
}

export function httpServerHandler(desc) {
  if (typeof desc === "number") desc = { port: desc };
  if (desc == null) throw new Error("Server descriptor cannot be null or undefined");
  let port = null;
  if (desc.port == null && typeof desc.listen === "function") {
    // A server: its port, listening first if it is not yet.
    port = desc.address()?.port;
    if (typeof port !== "number") {
      desc.listen();
      port = desc.address()?.port;
    }
  } else if (typeof desc.port === "number") {
    port = desc.port;
  }
  port = portOf(port);
  return {
    async fetch(request, env, ctx) {
      return await handleAsNodeRequest({ port }, request, env, ctx);
    },
  };
}

// `cloudflare:sockets` as workerd offers it: connect() answers a Socket at
// once; `opened` settles when the connection is up (src/lib.rs connects,
// under the egress policy); bytes move through deno_net's stream resource.
import { core, primordials } from "ext:core/mod.js";

const {
  Error,
  MathTrunc,
  NumberIsFinite,
  ObjectDefineProperty,
  ObjectPrototypeIsPrototypeOf,
  Promise,
  PromisePrototypeThen,
  PromiseReject,
  RegExpPrototypeExec,
  String,
  StringPrototypeLastIndexOf,
  StringPrototypeSlice,
  StringPrototypeStartsWith,
  StringPrototypeEndsWith,
  StringPrototypeIncludes,
  Symbol,
  SymbolToStringTag,
  TypedArrayPrototypeSubarray,
  TypeError,
  Uint8Array,
  ArrayBufferIsView,
  ArrayBuffer,
} = primordials;
const { op_socket_connect, op_tls_start } = core.ops;
const { ReadableStream, WritableStream } = core.loadExtScript("ext:deno_web/06_streams.js");
const { TextEncoder } = core.loadExtScript("ext:deno_web/08_text_encoding.js");

const encoder = new TextEncoder();
const CHUNK = 64 * 1024;
const FAILED = "proxy request failed, cannot connect to the specified address";

function parseAddress(address) {
  if (typeof address === "object" && address !== null) {
    // As workerd converts it: a number (truncated), nothing else.
    let port = address.port;
    if (typeof port !== "number" || !NumberIsFinite(port)) {
      throw new TypeError("The value cannot be converted because it is not an integer.");
    }
    port = MathTrunc(port);
    if (port < 0 || port > 65535) throw new TypeError("Specified address could not be parsed.");
    return { hostname: String(address.hostname), port };
  }
  const text = String(address);
  const colon = StringPrototypeLastIndexOf(text, ":");
  if (colon < 0) throw new TypeError("Specified address is missing port.");
  let hostname = StringPrototypeSlice(text, 0, colon);
  const portText = StringPrototypeSlice(text, colon + 1);
  const port = +portText;
  if (RegExpPrototypeExec(/^[0-9]{1,5}$/, portText) === null || port > 65535 || hostname === "") {
    throw new TypeError("Specified address could not be parsed.");
  }
  if (StringPrototypeStartsWith(hostname, "[") && StringPrototypeEndsWith(hostname, "]")) {
    hostname = StringPrototypeSlice(hostname, 1, -1);
  }
  return { hostname, port };
}

function toBytes(chunk) {
  if (typeof chunk === "string") return encoder.encode(chunk);
  if (ArrayBufferIsView(chunk)) {
    return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }
  if (ObjectPrototypeIsPrototypeOf(ArrayBuffer.prototype, chunk)) return new Uint8Array(chunk);
  throw new TypeError("This WritableStream only supports writing bytes or strings.");
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const kCreate = Symbol("create");

export class Socket {
  #rid; // a promise of the stream resource
  #address;
  #secure;
  #allowHalfOpen;
  #opened;
  #closed = deferred();
  #readable;
  #writable;
  #readController;
  #writeController;
  #readEnded = false;
  #writeEnded = false;
  #done = false;
  #upgraded = false;

  constructor(key, rid, address, secure, allowHalfOpen) {
    if (key !== kCreate) throw new TypeError("Illegal constructor");
    this.#rid = rid;
    this.#address = address;
    this.#secure = secure;
    this.#allowHalfOpen = allowHalfOpen;
    // Nobody has to await these: a failed connection rejects both, and an
    // unobserved rejection here is not the Worker's error.
    PromisePrototypeThen(this.#closed.promise, undefined, () => {});
    this.#opened = PromisePrototypeThen(rid, () => ({
      remoteAddress: address,
      localAddress: undefined,
    }));
    PromisePrototypeThen(this.#opened, undefined, (e) => this.#fail(e));
    this.#readable = new ReadableStream({
      start: (c) => {
        this.#readController = c;
      },
      pull: async (c) => {
        let id;
        try {
          id = await this.#rid;
        } catch {
          return; // never opened: #fail ends the streams
        }
        const buf = new Uint8Array(CHUNK);
        let n;
        try {
          n = await core.read(id, buf);
        } catch (e) {
          if (this.#done) return;
          throw e;
        }
        if (this.#done) return;
        if (n === 0) {
          c.close();
          this.#readEnded = true;
          if (!this.#allowHalfOpen && !this.#writeEnded) {
            this.#writeEnded = true;
            PromisePrototypeThen(core.shutdown(id), undefined, () => {});
            this.#writeController.error(new TypeError("This WritableStream belongs to an object that is closing."));
          }
          this.#maybeDone();
          return;
        }
        c.enqueue(TypedArrayPrototypeSubarray(buf, 0, n));
      },
      cancel: () => {
        this.#readEnded = true;
        this.#maybeDone();
      },
    });
    this.#writable = new WritableStream({
      start: (c) => {
        this.#writeController = c;
      },
      write: async (chunk) => {
        const id = await this.#rid;
        await core.writeAll(id, toBytes(chunk));
      },
      close: async () => {
        const id = await this.#rid;
        await core.shutdown(id);
        this.#writeEnded = true;
        this.#maybeDone();
      },
      abort: () => {
        this.#writeEnded = true;
        this.#maybeDone();
      },
    });
  }

  get readable() {
    return this.#readable;
  }
  get writable() {
    return this.#writable;
  }
  get opened() {
    return this.#opened;
  }
  get closed() {
    return this.#closed.promise;
  }
  get upgraded() {
    return this.#upgraded;
  }
  get secureTransport() {
    return this.#secure;
  }

  #maybeDone() {
    if (this.#readEnded && this.#writeEnded) this.#finish();
  }

  #finish() {
    if (this.#done) return;
    this.#done = true;
    PromisePrototypeThen(this.#rid, (id) => core.tryClose(id), () => {});
    this.#closed.resolve(undefined);
  }

  #fail(e) {
    if (this.#done) return;
    this.#done = true;
    // As workerd: a socket that never opened reads as ended.
    this.#readController.close();
    this.#writeController.error(e);
    this.#closed.reject(e);
  }

  close() {
    if (!this.#done) {
      const closing = new TypeError("This WritableStream belongs to an object that is closing.");
      if (!this.#writeEnded) this.#writeController.error(closing);
      if (!this.#readEnded) {
        try {
          this.#readController.close();
        } catch {
          // already closing
        }
      }
      this.#readEnded = this.#writeEnded = true;
      this.#finish();
    }
    return this.#closed.promise;
  }

  startTls(options) {
    if (this.#secure !== "starttls") {
      throw new TypeError(
        "The `secureTransport` socket option must be set to 'starttls' for startTls to be used.",
      );
    }
    if (this.#upgraded) throw new TypeError("Can't call startTls more than once.");
    this.#upgraded = true;
    const hostname = options?.expectedServerHostname ?? hostOf(this.#address);
    const tls = PromisePrototypeThen(this.#rid, (id) => {
      core.cancelRead(id);
      return op_tls_start({ rid: id, hostname, caCerts: [], alpnProtocols: null }, null)[0];
    });
    // This socket's streams are done with: the connection is the new one's.
    this.#done = true;
    return new Socket(kCreate, tls, this.#address, "on", this.#allowHalfOpen);
  }
}
// `[object Socket]`, as workerd's class shows.
ObjectDefineProperty(Socket.prototype, SymbolToStringTag, { value: "Socket", configurable: true });

function hostOf(address) {
  const colon = StringPrototypeLastIndexOf(address, ":");
  let host = StringPrototypeSlice(address, 0, colon);
  if (StringPrototypeStartsWith(host, "[")) host = StringPrototypeSlice(host, 1, -1);
  return host;
}

// The host's limits on outbound connections (set by the cellhost glue):
// `gate(open)` spends a subrequest of the current event (throwing past the
// budget) and runs `open` once the event has a free connection slot, held
// until the promise `open` returns settles (the socket's close).
let gate = (open) => open();

export function setConnectionGate(g) {
  gate = g;
}

/** A socket to a target that refused the connection (a Durable Object
 * stub's connect(): objects take no connections), failing as workerd's
 * does when its proxy answers with an error status. */
export function refusedSocket(address, options) {
  const { hostname, port } = parseAddress(address);
  const hint = port === 80 || port === 443
    ? ". It looks like you might be trying to connect to a HTTP-based service \u2014 consider using fetch instead"
    : "";
  const rid = PromiseReject(new Error(FAILED + hint));
  const shown = StringPrototypeIncludes(hostname, ":") ? `[${hostname}]:${port}` : `${hostname}:${port}`;
  const secure = options?.secureTransport === undefined ? "off" : String(options.secureTransport);
  return new Socket(kCreate, rid, shown, secure, options?.allowHalfOpen === true);
}

export function connect(address, options) {
  const { hostname, port } = parseAddress(address);
  const secure = options?.secureTransport === undefined ? "off" : String(options.secureTransport);
  if (secure !== "off" && secure !== "on" && secure !== "starttls") {
    throw new TypeError(`Unsupported value in secureTransport socket option: ${secure}`);
  }
  const allowHalfOpen = options?.allowHalfOpen === true;
  const opened = deferred();
  let socket;
  PromisePrototypeThen(
    gate(async () => {
      try {
        opened.resolve(await op_socket_connect(hostname, port));
      } catch (e) {
        opened.reject(
          ObjectPrototypeIsPrototypeOf(Error.prototype, e) && StringPrototypeIncludes(e.message, "egress policy")
            ? new Error(e.message)
            : new Error(FAILED),
        );
        return;
      }
      await PromisePrototypeThen(socket.closed, undefined, () => {});
    }),
    undefined,
    () => {},
  );
  let rid = opened.promise;
  if (secure === "on") {
    rid = PromisePrototypeThen(
      rid,
      (id) => op_tls_start({ rid: id, hostname, caCerts: [], alpnProtocols: null }, null)[0],
    );
  }
  const shown = StringPrototypeIncludes(hostname, ":") ? `[${hostname}]:${port}` : `${hostname}:${port}`;
  socket = new Socket(kCreate, rid, shown, secure, allowHalfOpen);
  return socket;
}

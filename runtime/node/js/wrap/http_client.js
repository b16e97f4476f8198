// The node:http(s) client as workerd has it: a request is one fetch() made
// when the request ends (no sockets, no agent pooling), the response an
// IncomingMessage over the fetch body (http_server.js's class, which the
// server's requests share). Shared by the node:http and
// node:https wrappers: src/wrap.rs puts this file in front of each.
import { Writable } from "node:stream";
import { IncomingMessage, fromResponse, nodeError } from "cellhost-node:_http_server";
import { Buffer } from "node:buffer";

const notImplementedOptions = ["maxHeaderSize", "createConnection", "lookup", "socketPath"];

// Node's argument forms: (url[, options][, cb]) or (options[, cb]).
function normalize(input, options, cb) {
  if (typeof input === "string" || input instanceof URL) {
    const u = typeof input === "string" ? new URL(input) : input;
    const fromUrl = {
      protocol: u.protocol,
      hostname: u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname,
      port: u.port || undefined,
      path: `${u.pathname || "/"}${u.search}`,
      auth: u.username || u.password ? `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}` : undefined,
    };
    if (typeof options === "function") {
      cb = options;
      options = {};
    }
    options = { ...fromUrl, ...(options ?? {}) };
  } else {
    if (typeof options === "function") cb = options;
    options = { ...(input ?? {}) };
  }
  return { options, cb };
}

function clientFor(defaultProtocol, defaultPort) {
  class ClientRequest extends Writable {
    #headers = new Map(); // lower-case name -> [name as given, value]
    #body = [];
    #abort = new AbortController();
    #timer;
    constructor(input, options, cb) {
      // Not destroyed at finish: the fetch is still to answer.
      super({ decodeStrings: true, autoDestroy: false });
      ({ options, cb } = normalize(input, options, cb));
      for (const o of notImplementedOptions) {
        if (options[o] !== undefined) throw nodeError(Error, "ERR_OPTION_NOT_IMPLEMENTED", `The options.${o} option is not implemented`);
      }
      const protocol = options.protocol ?? defaultProtocol;
      if (protocol !== defaultProtocol) {
        throw nodeError(TypeError, "ERR_INVALID_PROTOCOL", `Protocol "${protocol}" not supported. Expected "${defaultProtocol}"`);
      }
      const path = options.path ?? "/";
      if (/[^\u0021-\u00ff]/.test(path)) {
        throw nodeError(TypeError, "ERR_UNESCAPED_CHARACTERS", "Request path contains unescaped characters");
      }
      if (!path.startsWith("/") && !path.startsWith("?") && path !== "*") {
        throw nodeError(TypeError, "ERR_INVALID_ARG_VALUE", `The property 'options.path' must be a path-only request target. Received '${path}'`);
      }
      if (path.startsWith("//")) {
        throw nodeError(TypeError, "ERR_INVALID_ARG_VALUE", `The property 'options.path' must be a path-only request target. Received '${path}'`);
      }
      this.method = (options.method ?? "GET").toUpperCase();
      this.path = path;
      this.host = options.hostname ?? (options.host ? String(options.host).replace(/:\d+$/, "") : "localhost");
      this.protocol = protocol;
      this.port = options.port === undefined ? String(defaultPort) : String(options.port);
      this.socket = null;
      this.reusedSocket = false;
      this.headersSent = false;
      this.agent = options.agent;
      const given = options.headers;
      if (Array.isArray(given)) {
        for (let i = 0; i + 1 < given.length; i += 2) this.setHeader(given[i], given[i + 1]);
      } else if (given) {
        for (const name of Object.keys(given)) this.setHeader(name, given[name]);
      }
      if (options.setHost !== false && !this.hasHeader("host")) {
        const h = this.host.includes(":") ? `[${this.host}]` : this.host;
        this.setHeader("Host", Number(this.port) === defaultPort ? h : `${h}:${this.port}`);
      }
      if (options.auth && !this.hasHeader("authorization")) {
        this.setHeader("Authorization", `Basic ${Buffer.from(options.auth).toString("base64")}`);
      }
      if (options.timeout !== undefined) this.setTimeout(options.timeout);
      if (options.signal) {
        options.signal.addEventListener("abort", () => this.destroy(options.signal.reason), { once: true });
      }
      if (cb) this.once("response", cb);
    }
    setHeader(name, value) {
      if (this.headersSent) throw nodeError(Error, "ERR_HTTP_HEADERS_SENT", "Cannot set headers after they are sent to the client");
      this.#headers.set(String(name).toLowerCase(), [String(name), value]);
      return this;
    }
    getHeader(name) {
      return this.#headers.get(String(name).toLowerCase())?.[1];
    }
    hasHeader(name) {
      return this.#headers.has(String(name).toLowerCase());
    }
    removeHeader(name) {
      this.#headers.delete(String(name).toLowerCase());
    }
    getHeaders() {
      const out = { __proto__: null };
      for (const [k, [, v]] of this.#headers) out[k] = v;
      return out;
    }
    getHeaderNames() {
      return [...this.#headers.keys()];
    }
    getRawHeaderNames() {
      return [...this.#headers.values()].map(([n]) => n);
    }
    flushHeaders() {}
    setNoDelay() {}
    setSocketKeepAlive() {}
    addTrailers() {
      throw nodeError(Error, "ERR_METHOD_NOT_IMPLEMENTED", "The addTrailers() method is not implemented");
    }
    setTimeout(ms, cb) {
      if (cb) this.once("timeout", cb);
      clearTimeout(this.#timer);
      if (ms > 0) {
        this.#timer = setTimeout(() => {
          this.emit("timeout");
          this.#abort.abort();
        }, ms);
      }
      return this;
    }
    abort() {
      this.aborted = true;
      this.destroy();
    }
    _write(chunk, encoding, callback) {
      this.#body.push(typeof chunk === "string" ? Buffer.from(chunk, encoding) : chunk);
      callback();
    }
    _final(callback) {
      this.headersSent = true;
      const base = new URL(`${this.protocol}//${this.host.includes(":") ? `[${this.host}]` : this.host}`);
      base.port = this.port;
      const url = new URL(this.path, base);
      const headers = [...this.#headers.values()].map(([n, v]) => [n, Array.isArray(v) ? v.join(", ") : String(v)]);
      const body = this.method === "GET" || this.method === "HEAD" || this.#body.length === 0
        ? null
        : new Blob(this.#body, { type: this.getHeader("content-type") ?? "" });
      callback();
      globalThis.fetch(url, { method: this.method, headers, body, signal: this.#abort.signal, redirect: "manual" }).then(
        (response) => {
          clearTimeout(this.#timer);
          const res = fromResponse(response);
          res.req = this;
          res.once("end", () => queueMicrotask(() => this.emit("close")));
          this.res = res;
          this.emit("response", res);
        },
        (e) => {
          clearTimeout(this.#timer);
          if (!this.destroyed) this.destroy(e);
        },
      );
    }
    _destroy(err, callback) {
      clearTimeout(this.#timer);
      this.#abort.abort(err ?? undefined);
      callback(err);
    }
  }

  function request(input, options, cb) {
    return new ClientRequest(input, options, cb);
  }
  function get(input, options, cb) {
    const req = new ClientRequest(input, options, cb);
    req.end();
    return req;
  }
  return { ClientRequest, IncomingMessage, request, get };
}

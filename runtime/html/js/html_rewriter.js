// HTMLRewriter as workerd offers it, on lol_html (src/lib.rs runs it on a
// thread of its own). Tokens are thin: each call on one is answered by the
// rewriter thread while the token's handler runs (sync or async).
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayBuffer,
  Error,
  ArrayBufferIsView,
  ArrayPrototypeMap,
  ArrayPrototypeSlice,
  ArrayPrototypePush,
  JSONParse,
  JSONStringify,
  ObjectPrototypeIsPrototypeOf,
  PromisePrototypeThen,
  RegExpPrototypeExec,
  SafeFinalizationRegistry,
  SafeWeakRef,
  String,
  Symbol,
  SymbolIterator,
  SymbolToStringTag,
  TypeError,
  Uint8Array,
} = primordials;
const {
  op_html_call,
  op_html_check,
  op_html_check_selector,
  op_html_close,
  op_html_done,
  op_html_end,
  op_html_next,
  op_html_poll,
  op_html_start,
  op_html_write,
} = core.ops;
const { Response } = core.loadExtScript("ext:deno_fetch/23_response.js");
const { ReadableStream } = core.loadExtScript("ext:deno_web/06_streams.js");
// Called unbound: Deno's timers insist on `this` being undefined or globalThis.
const { setTimeout: denoSetTimeout } = core.loadExtScript("ext:deno_web/02_timers.js");

const STALE =
  "This content token is no longer valid. Content tokens are only valid during the execution of the relevant content handler.";

// A token's link to the rewriter thread: its transform and its handler's
// sequence number; `live` ends when the handler is done.
class Link {
  constructor(rid, seq) {
    this.rid = rid;
    this.seq = seq;
    this.live = true;
  }
  call(method, ...args) {
    if (!this.live) throw new TypeError(STALE);
    return JSONParse(op_html_call(this.rid, JSONStringify([this.seq, method, ...args])));
  }
}

function contentArgs(content, options) {
  if (typeof content === "object" && content !== null &&
    (ObjectPrototypeIsPrototypeOf(ReadableStream.prototype, content) ||
      ObjectPrototypeIsPrototypeOf(Response.prototype, content))) {
    throw new TypeError(
      "HTMLRewriter streaming content (a ReadableStream or Response) is not supported by cellhost yet; pass a string",
    );
  }
  return [String(content), options?.html === true];
}

const kLink = Symbol("link");

class Element {
  constructor(link, info) {
    this[kLink] = link;
    this.namespaceURI = info.namespaceURI;
  }
  get tagName() {
    return this[kLink].call("tagName");
  }
  set tagName(name) {
    this[kLink].call("setTagName", String(name));
  }
  get removed() {
    return this[kLink].call("removed");
  }
  get attributes() {
    return this[kLink].call("attributes")[SymbolIterator]();
  }
  getAttribute(name) {
    return this[kLink].call("getAttribute", String(name));
  }
  hasAttribute(name) {
    return this[kLink].call("hasAttribute", String(name));
  }
  setAttribute(name, value) {
    this[kLink].call("setAttribute", String(name), String(value));
    return this;
  }
  removeAttribute(name) {
    this[kLink].call("removeAttribute", String(name));
    return this;
  }
  onEndTag(handler) {
    if (typeof handler !== "function") {
      throw new TypeError("Failed to execute 'onEndTag' on 'Element': parameter 1 is not of type 'Function'.");
    }
    const run = this[kRun];
    const id = run.endTags.length;
    ArrayPrototypePush(run.endTags, handler);
    this[kLink].call("onEndTag", id);
  }
}
const kRun = Symbol("run");

class EndTag {
  constructor(link) {
    this[kLink] = link;
  }
  get name() {
    return this[kLink].call("name");
  }
  set name(name) {
    this[kLink].call("setName", String(name));
  }
}

class Text {
  constructor(link, info) {
    this[kLink] = link;
    this.text = info.text;
    this.lastInTextNode = info.last;
  }
  get removed() {
    return this[kLink].call("removed");
  }
}

class Comment {
  constructor(link) {
    this[kLink] = link;
  }
  get text() {
    return this[kLink].call("text");
  }
  set text(text) {
    this[kLink].call("setText", String(text));
  }
  get removed() {
    return this[kLink].call("removed");
  }
}

class Doctype {
  constructor(link, info) {
    this[kLink] = link;
    this.name = info.name;
    this.publicId = info.publicId;
    this.systemId = info.systemId;
  }
  get removed() {
    return this[kLink].call("removed");
  }
}

class DocumentEnd {
  constructor(link) {
    this[kLink] = link;
  }
}

// The methods tokens share: each is a call on the rewriter thread that
// answers the token itself. Content ones take `(content, { html })`.
// Defined as class methods are (named, not enumerable).
function share(C, content, plain) {
  const define = (m, methods) =>
    primordials.ObjectDefineProperty(C.prototype, m, {
      value: methods[m],
      writable: true,
      configurable: true,
    });
  for (const m of content) {
    define(m, {
      [m](c, options) {
        this[kLink].call(m, ...contentArgs(c, options));
        return this;
      },
    });
  }
  for (const m of plain) {
    define(m, {
      [m]() {
        this[kLink].call(m);
        return this;
      },
    });
  }
}
share(Element, ["before", "after", "prepend", "append", "replace", "setInnerContent"], [
  "remove",
  "removeAndKeepContent",
]);
share(EndTag, ["before", "after"], ["remove"]);
share(Text, ["before", "after", "replace"], ["remove"]);
share(Comment, ["before", "after", "replace"], ["remove"]);
share(Doctype, [], ["remove"]);
share(DocumentEnd, ["append"], []);

for (const C of [Element, EndTag, Text, Comment, Doctype, DocumentEnd]) {
  primordials.ObjectDefineProperty(C.prototype, SymbolToStringTag, {
    value: C.name,
    configurable: true,
  });
}

/** Rewritten bodies: the source's Content-Length (which the response keeps,
 * as workerd's does) no longer frames them; they are sent chunked. */
export const unframedBodies = new primordials.SafeWeakSet();

// A stream nobody reads to the end still lets its rewriter thread go.
const abandoned = new SafeFinalizationRegistry((rid) => op_html_close(rid));

function charsetOf(headers) {
  const type = headers.get("content-type") ?? "";
  const m = RegExpPrototypeExec(/;\s*charset\s*=\s*"?([^";\s]+)"?/i, type);
  return m ? m[1] : "utf-8";
}

export class HTMLRewriter {
  #selectors = [];
  #documents = [];

  on(selector, handlers) {
    selector = String(selector);
    op_html_check_selector(selector);
    ArrayPrototypePush(this.#selectors, { selector, handlers });
    return this;
  }

  onDocument(handlers) {
    ArrayPrototypePush(this.#documents, handlers);
    return this;
  }

  transform(response) {
    if (!ObjectPrototypeIsPrototypeOf(Response.prototype, response)) {
      throw new TypeError("Failed to execute 'transform' on 'HTMLRewriter': parameter 1 is not of type 'Response'.");
    }
    const init = { status: response.status, statusText: response.statusText, headers: response.headers };
    const source = response.body;
    if (source === null) return new Response(null, init);
    const has = (h, k) => typeof h?.[k] === "function";
    const spec = {
      selectors: ArrayPrototypeMap(this.#selectors, ({ selector, handlers }) => ({
        selector,
        element: has(handlers, "element"),
        comments: has(handlers, "comments"),
        text: has(handlers, "text"),
      })),
      documents: ArrayPrototypeMap(this.#documents, (h) => ({
        doctype: has(h, "doctype"),
        comments: has(h, "comments"),
        text: has(h, "text"),
        end: has(h, "end"),
      })),
      encoding: charsetOf(response.headers),
    };
    const specText = JSONStringify(spec);
    op_html_check(specText); // a charset lol_html lacks fails here, at once
    const run = {
      rid: undefined, // the rewriter thread starts at the first read
      spec: specText,
      selectors: ArrayPrototypeMap(this.#selectors, (s) => s.handlers),
      documents: ArrayPrototypeSlice(this.#documents),
      endTags: [],
      reader: source.getReader(),
      failure: undefined,
      closed: false,
      body: undefined,
    };
    const finish = () => {
      if (run.closed) return;
      run.closed = true;
      if (run.rid !== undefined) {
        abandoned.unregister(run);
        op_html_close(run.rid);
      }
    };
    const body = new ReadableStream({
      pull: (controller) => {
        if (run.rid === undefined) {
          run.rid = op_html_start(run.spec);
          abandoned.register(run.body.deref(), run.rid, run);
        }
        return pump(run, controller, finish);
      },
      // As workerd: the source hears of it a turn later, as an Error.
      cancel: (reason) => {
        finish();
        const error = ObjectPrototypeIsPrototypeOf(Error.prototype, reason)
          ? reason
          : new Error(String(reason));
        denoSetTimeout(() => PromisePrototypeThen(run.reader.cancel(error), undefined, () => {}), 0);
      },
    }, { highWaterMark: 0 });
    run.body = new SafeWeakRef(body);
    unframedBodies.add(body);
    return new Response(body, init);
  }
}

function toBytes(chunk) {
  if (ObjectPrototypeIsPrototypeOf(Uint8Array.prototype, chunk)) return chunk;
  if (ArrayBufferIsView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (ObjectPrototypeIsPrototypeOf(ArrayBuffer.prototype, chunk)) return new Uint8Array(chunk);
  throw new TypeError("This TransformStream is being used as a byte stream, but received a string on its writable side. If you wish to write a string, you'll probably want to explicitly UTF-8-encode it with TextEncoder.");
}

// Runs the rewriter until it has output for the reader (or ends).
async function pump(run, controller, finish) {
  try {
    for (;;) {
      const ev = op_html_poll(run.rid) ?? await op_html_next(run.rid);
      switch (ev.kind) {
        case "output":
          controller.enqueue(ev.data);
          return;
        case "ready": {
          const { value, done } = await run.reader.read();
          if (done) op_html_end(run.rid);
          else op_html_write(run.rid, toBytes(value));
          continue;
        }
        case "done":
          finish();
          controller.close();
          return;
        case "error":
          throw run.failure ?? new TypeError(`Parser error: ${JSONParse(ev.info)}`);
        case "gone":
          throw run.failure ?? new TypeError("The HTMLRewriter stopped unexpectedly.");
        default:
          await dispatch(run, ev.kind, JSONParse(ev.info));
      }
    }
  } catch (e) {
    finish();
    PromisePrototypeThen(run.reader.cancel(e), undefined, () => {});
    controller.error(e);
  }
}

const TOKENS = {
  element: Element,
  comments: Comment,
  text: Text,
  doctype: Doctype,
  end: DocumentEnd,
  endTag: EndTag,
};

// Calls the user's handler for one token and tells the thread when it (and
// the promise it returned) is done; a throw fails the transform with it.
async function dispatch(run, kind, info) {
  const link = new Link(run.rid, info.seq);
  const token = new TOKENS[kind](link, info);
  let fn, self;
  if (kind === "endTag") {
    fn = run.endTags[info.id];
  } else {
    self = info.doc ? run.documents[info.group] : run.selectors[info.group];
    fn = self[kind];
  }
  if (kind === "element") token[kRun] = run;
  let ok = false;
  try {
    await fn.call(self, token);
    ok = true;
  } catch (e) {
    run.failure = e;
  } finally {
    link.live = false;
    op_html_done(run.rid, ok);
  }
}

// Where Deno's Web-platform extensions part from the specs and workerd
// follows them, as the Web Platform Tests found (wpt/, wpt/expectations.json
// lists what is left). Runs after 00_globals.js has built the global scope,
// at snapshot time.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayIsArray,
  ArrayPrototypeForEach,
  FunctionPrototypeCall,
  ObjectDefineProperty,
  ObjectGetOwnPropertyDescriptor,
  ObjectPrototypeIsPrototypeOf,
  ReflectApply,
  TypedArrayPrototypeGetByteLength,
  TypedArrayPrototypeSlice,
} = primordials;
const { URL, ReadableStream, MessagePort } = globalThis;
const { InnerBody } = core.loadExtScript("ext:deno_fetch/22_body.js");

// A blob: URL's origin is its inner URL's only when that is http(s) (the
// URL spec's origin of a blob URL); otherwise it is opaque ("null").
{
  const desc = ObjectGetOwnPropertyDescriptor(URL.prototype, "origin");
  const inner = desc.get;
  ObjectDefineProperty(URL.prototype, "origin", {
    ...desc,
    get: ObjectGetOwnPropertyDescriptor({
      get origin() {
        const origin = FunctionPrototypeCall(inner, this);
        if (this.protocol !== "blob:") return origin;
        let path;
        try {
          path = new URL(this.pathname);
        } catch {
          return "null";
        }
        return path.protocol === "http:" || path.protocol === "https:" ? path.origin : "null";
      },
    }, "origin").get,
  });
}

// ReadableStream.from() takes any iterable, a string included (its code
// points become the chunks), as workerd does.
{
  const from = ReadableStream.from;
  ObjectDefineProperty(ReadableStream, "from", {
    ...ObjectGetOwnPropertyDescriptor(ReadableStream, "from"),
    value: {
      from(asyncIterable) {
        if (typeof asyncIterable === "string") {
          // deno-lint-ignore no-new-wrappers
          asyncIterable = new primordials.String(asyncIterable);
        }
        return ReflectApply(from, this, arguments.length ? [asyncIterable] : []);
      },
    }.from,
  });
}

// A body given as a string or bytes, read as a stream, is a byte stream as
// in workerd, so that BYOB readers work on `new Response("x").body`. (Deno
// makes it a default stream.) The bytes are copied: a byte stream takes
// ownership of what it enqueues, and a clone shares the static source.
{
  const desc = ObjectGetOwnPropertyDescriptor(InnerBody.prototype, "stream");
  const get = desc.get;
  ObjectDefineProperty(InnerBody.prototype, "stream", {
    ...desc,
    get: ObjectGetOwnPropertyDescriptor({
      get stream() {
        const s = this.streamOrStatic;
        if (!ObjectPrototypeIsPrototypeOf(ReadableStream.prototype, s) && !s.consumed) {
          const body = s.body;
          this.streamOrStatic = new ReadableStream({
            __proto__: null,
            type: "bytes",
            pull(controller) {
              const bytes = typeof body === "string" ? core.encode(body) : TypedArrayPrototypeSlice(body);
              if (TypedArrayPrototypeGetByteLength(bytes) > 0) controller.enqueue(bytes);
              controller.close();
            },
          }, { __proto__: null, highWaterMark: 0 });
        }
        return FunctionPrototypeCall(get, this);
      },
    }, "stream").get,
  });
}

// structuredClone(value, { transfer }) detaches what it transfers: the
// clone owns the bytes, the originals read as empty afterwards.
{
  const clone = globalThis.structuredClone;
  const transferBuffer = ArrayBuffer.prototype.transfer;
  const detachedGetter = ObjectGetOwnPropertyDescriptor(ArrayBuffer.prototype, "detached").get;
  globalThis.structuredClone = {
    structuredClone(value, options) {
      const out = ReflectApply(clone, this, arguments);
      const list = options?.transfer;
      if (ArrayIsArray(list)) {
        ArrayPrototypeForEach(list, (b) => {
          if (
            ObjectPrototypeIsPrototypeOf(ArrayBuffer.prototype, b) &&
            !FunctionPrototypeCall(detachedGetter, b)
          ) {
            FunctionPrototypeCall(transferBuffer, b);
          }
        });
      }
      return out;
    },
  }.structuredClone;
}

// A MessagePort carries copies only: a transfer list is refused with
// workerd's error (deno_web would fail in its serializer, with internal
// words).
{
  const desc = ObjectGetOwnPropertyDescriptor(MessagePort.prototype, "postMessage");
  const post = desc.value;
  ObjectDefineProperty(MessagePort.prototype, "postMessage", {
    ...desc,
    value: {
      postMessage(_message, transferOrOptions) {
        const list = ArrayIsArray(transferOrOptions) ? transferOrOptions : transferOrOptions?.transfer;
        if (list != null && list.length > 0) throw new Error("Transfer list is not supported");
        return ReflectApply(post, this, arguments);
      },
    }.postMessage,
  });
}

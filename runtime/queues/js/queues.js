// Queues as the Worker sees them: producers (`env.Q.send`, `sendBatch`) with
// workerd's content types and checks, and the consumer's MessageBatch with
// ack/retry bookkeeping as workerd keeps it. Storage and delivery:
// src/lib.rs.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayBufferIsView,
  ArrayPrototypeIncludes,
  ArrayPrototypeMap,
  ArrayPrototypePush,
  Date,
  JSONParse,
  JSONStringify,
  MathMax,
  ObjectFreeze,
  StringPrototypeToLowerCase,
  TypeError,
  Uint8Array,
} = primordials;
const { op_queue_send, op_cellhost_log } = core.ops;

const TYPES = ["text", "bytes", "json", "v8"];
const encoder = new TextEncoder();

function contentType(t) {
  const lower = StringPrototypeToLowerCase(`${t}`);
  if (!ArrayPrototypeIncludes(TYPES, lower)) {
    throw new TypeError(`Unsupported queue message content type: ${t}`);
  }
  return lower;
}

function serialize(body, type) {
  switch (type) {
    case "text":
      if (typeof body !== "string") {
        throw new TypeError(`Content Type "text" requires a value of type string, but received: ${typeof body}`);
      }
      return encoder.encode(body);
    case "bytes":
      if (!ArrayBufferIsView(body)) {
        throw new TypeError(`Content Type "bytes" requires a value of type ArrayBufferView, but received: ${typeof body}`);
      }
      return new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice();
    case "json":
      return encoder.encode(JSONStringify(body));
    default:
      return core.serialize(body);
  }
}

function deserialize(bytes, type) {
  switch (type) {
    case "text":
      return new TextDecoder().decode(bytes);
    case "bytes":
      return bytes;
    case "json":
      return JSONParse(new TextDecoder().decode(bytes));
    default:
      return core.deserialize(bytes);
  }
}

function messageId() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  let s = "";
  for (const x of b) s += (x < 16 ? "0" : "") + x.toString(16);
  return s;
}

function delayMs(seconds) {
  return seconds === undefined ? 0 : MathMax(0, +seconds) * 1000;
}

async function enqueue(queue, items) {
  const meta = [];
  let total = 0;
  for (const i of items) total += i.bytes.byteLength;
  const bodies = new Uint8Array(total);
  let at = 0;
  for (const i of items) {
    bodies.set(i.bytes, at);
    at += i.bytes.byteLength;
    ArrayPrototypePush(meta, { id: messageId(), len: i.bytes.byteLength, contentType: i.type, delayMs: i.delay });
  }
  const { 0: count, 1: bytes, 2: oldest } = JSONParse(await op_queue_send(queue, JSONStringify(meta), bodies));
  // What Cloudflare answers: the queue's backlog after the send.
  const metrics = { backlogCount: count, backlogBytes: bytes };
  if (oldest !== null) metrics.oldestMessageTimestamp = new Date(oldest);
  return { metadata: { metrics } };
}

class WorkerQueue {
  #queue;
  constructor(queue) {
    this.#queue = queue;
  }

  async send(body, options) {
    if (body === undefined) throw new TypeError("Message body cannot be undefined");
    const type = options?.contentType === undefined ? "v8" : contentType(options.contentType);
    return enqueue(this.#queue, [{ bytes: serialize(body, type), type, delay: delayMs(options?.delaySeconds) }]);
  }

  async sendBatch(messages, options) {
    const list = [...messages];
    if (list.length === 0) throw new TypeError("sendBatch() requires at least one message");
    const items = ArrayPrototypeMap(list, (m) => {
      if (m.body === undefined) throw new TypeError("Message body cannot be undefined");
      const type = m.contentType === undefined ? "v8" : contentType(m.contentType);
      return {
        bytes: serialize(m.body, type),
        type,
        delay: delayMs(m.delaySeconds ?? options?.delaySeconds),
      };
    });
    return enqueue(this.#queue, items);
  }
}

export function queueProducer(queue) {
  return new WorkerQueue(queue);
}

function warn(msg) {
  op_cellhost_log(2, `${msg}\n`);
}

class Message {
  #id;
  #timestamp;
  #body;
  #attempts;
  #result;
  constructor(m, result) {
    this.#id = m.id;
    this.#timestamp = new Date(m.timestamp);
    this.#body = deserialize(new Uint8Array(m.body), m.contentType);
    this.#attempts = m.attempts;
    this.#result = result;
  }
  get id() {
    return this.#id;
  }
  get timestamp() {
    return this.#timestamp;
  }
  get body() {
    return this.#body;
  }
  get attempts() {
    return this.#attempts;
  }
  retry(options) {
    const r = this.#result;
    if (r.ack_all) {
      return warn(`Received a call to retry() on message ${this.#id} after ackAll() was already called. Calling retry() on a message after calling ackAll() has no effect.`);
    }
    if (ArrayPrototypeIncludes(r.acks, this.#id)) {
      return warn(`Received a call to retry() on message ${this.#id} after ack() was already called. Calling retry() on a message after calling ack() has no effect.`);
    }
    const delay = options?.delaySeconds;
    const at = r.retries.findIndex((x) => x[0] === this.#id);
    if (at >= 0) r.retries[at] = [this.#id, delay ?? r.retries[at][1]];
    else ArrayPrototypePush(r.retries, [this.#id, delay ?? null]);
  }
  ack() {
    const r = this.#result;
    if (r.ack_all) return;
    if (r.retry_all) {
      return warn(`Received a call to ack() on message ${this.#id} after retryAll() was already called. Calling ack() on a message after calling retryAll() has no effect.`);
    }
    if (r.retries.some((x) => x[0] === this.#id)) {
      return warn(`Received a call to ack() on message ${this.#id} after retry() was already called. Calling ack() on a message after calling retry() has no effect.`);
    }
    if (!ArrayPrototypeIncludes(r.acks, this.#id)) ArrayPrototypePush(r.acks, this.#id);
  }
}

class MessageBatch {
  #queue;
  #messages;
  #result;
  constructor(queue, messages, result) {
    this.#queue = queue;
    this.#messages = messages;
    this.#result = result;
  }
  get queue() {
    return this.#queue;
  }
  get messages() {
    return this.#messages;
  }
  ackAll() {
    this.#result.ack_all = true;
  }
  retryAll(options) {
    this.#result.retry_all = true;
    this.#result.retry_all_delay = options?.delaySeconds ?? null;
  }
}

/** The batch a consumer job carries, and the outcome its calls fill in. */
export function makeBatch(json) {
  const b = JSONParse(json);
  const result = { ok: false, ack_all: false, retry_all: false, retry_all_delay: null, acks: [], retries: [] };
  const messages = ObjectFreeze(ArrayPrototypeMap(b.messages, (m) => new Message(m, result)));
  return { batch: new MessageBatch(b.queue, messages, result), result };
}

export function outcomeJson(result) {
  return JSONStringify(result);
}


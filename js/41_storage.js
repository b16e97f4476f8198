// The storage API of a Durable Object over its cell's SQLite database:
// ctx.storage (KV, transactions, alarms), storage.kv (synchronous KV) and
// storage.sql with its cursors. Writes join the isolate's implicit
// transaction (see 40_cell.js).
import { core, primordials } from "ext:core/mod.js";
import { KEY } from "ext:cellhost/01_keys.js";

const {
  ArrayIsArray,
  DatePrototype,
  DatePrototypeGetTime,
  MathFloor,
  MathMax,
  NumberIsFinite,
  ArrayPrototypeSort,
  Error,
  MapPrototypeSet,
  ObjectPrototypeIsPrototypeOf,
  ObjectKeys,
  PromiseReject,
  NumberPrototypeToString,
  StringPrototypePadStart,
  StringPrototypeRepeat,
  PromiseResolve,
  SafeFinalizationRegistry,
  SymbolIterator,
  TypeError,
} = primordials;
const {
  op_cell_sync,
  op_pitr_current,
  op_pitr_for_time,
  op_pitr_schedule,
  op_kv_get,
  op_kv_put,
  op_kv_put_many,
  op_kv_delete,
  op_kv_list,
  op_kv_delete_all,
  op_sql_exec,
  op_sql_cursor_close,
  op_sql_cursor_next,
  op_sql_database_size,
  op_txn_savepoint,
  op_txn_finish,
  op_alarm_get,
  op_alarm_set,
  op_alarm_delete,
} = core.ops;

// -- storage -----------------------------------------------------------------

export function handle(cell) {
  if (cell.broken !== null) throw cell.broken;
  if (cell.handle === 0) throw new Error("Durable Object storage is no longer accessible.");
  return cell.handle;
}

function ser(value) {
  try {
    return core.serialize(value, { forStorage: true });
  } catch (e) {
    throw new DOMException(e?.message ?? `${e}`, "DataCloneError");
  }
}

function de(bytes) {
  return core.deserialize(bytes, { forStorage: true });
}

// Async storage methods: synchronous SQLite underneath, so they return
// settled promises (no other event can interleave) and errors reject.
const NO_PITR = "This Durable Object's storage back-end does not implement point-in-time recovery.";

function settle(f) {
  try {
    return PromiseResolve(f());
  } catch (e) {
    return PromiseReject(e);
  }
}

function byUtf8(a, b) {
  // SQLite orders keys by their UTF-8 bytes.
  const x = new TextEncoder().encode(a[0]);
  const y = new TextEncoder().encode(b[0]);
  for (let i = 0; i < x.length && i < y.length; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

function compileList(opts) {
  opts ??= {};
  if (opts.start !== undefined && opts.startAfter !== undefined) {
    throw new TypeError("list() cannot be called with both start and startAfter values.");
  }
  if (opts.limit !== undefined && !(opts.limit > 0)) {
    throw new TypeError("List limit must be positive.");
  }
  const s = (v) => (v === undefined ? null : `${v}`);
  return [s(opts.start), s(opts.startAfter), s(opts.end), s(opts.prefix), !!opts.reverse, opts.limit ?? null];
}

export class DurableObjectStorage {
  #cell;
  #sql = null;
  #kv = null;
  constructor(key, cell) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
  }
  get(keys) {
    return settle(() => {
      const h = handle(this.#cell);
      if (ArrayIsArray(keys)) {
        const found = [];
        for (const k of keys) {
          const v = op_kv_get(h, `${k}`);
          if (v !== null) found.push([`${k}`, de(v)]);
        }
        ArrayPrototypeSort(found, byUtf8);
        return new Map(found);
      }
      const v = op_kv_get(h, `${keys}`);
      return v === null ? undefined : de(v);
    });
  }
  put(key, value, options) {
    return settle(() => {
      const h = handle(this.#cell);
      if (key !== null && typeof key === "object") {
        if (value !== undefined && (value === null || typeof value !== "object")) {
          throw new TypeError(
            "put() may only be called with a single key-value pair and optional options as put(key, value, options) or with multiple key-value pairs and optional options as put(entries, options)",
          );
        }
        const entries = [];
        for (const k of ObjectKeys(key)) {
          if (key[k] !== undefined) entries.push([k, ser(key[k])]);
        }
        op_kv_put_many(h, entries);
        return;
      }
      if (value === undefined) throw new TypeError("put() called with undefined value.");
      op_kv_put(h, `${key}`, ser(value));
    });
  }
  delete(keys) {
    return settle(() => {
      const h = handle(this.#cell);
      if (ArrayIsArray(keys)) {
        let n = 0;
        for (const k of keys) if (op_kv_delete(h, `${k}`)) n++;
        return n;
      }
      return op_kv_delete(h, `${keys}`);
    });
  }
  list(options) {
    return settle(() => {
      const h = handle(this.#cell);
      const rows = op_kv_list(h, ...compileList(options));
      const m = new Map();
      for (const { 0: k, 1: v } of rows) MapPrototypeSet(m, k, de(v));
      return m;
    });
  }
  deleteAll() {
    return settle(() => {
      if (this.#cell.txnDepth > 0) throw new Error("Cannot call deleteAll() within a transaction");
      op_kv_delete_all(handle(this.#cell));
    });
  }
  transactionSync(callback) {
    const h = handle(this.#cell);
    const depth = op_txn_savepoint(h);
    this.#cell.txnDepth = (this.#cell.txnDepth ?? 0) + 1;
    try {
      const r = callback();
      op_txn_finish(h, depth, true);
      return r;
    } catch (e) {
      op_txn_finish(h, depth, false);
      throw e;
    } finally {
      this.#cell.txnDepth--;
    }
  }
  async transaction(callback) {
    const h = handle(this.#cell);
    const depth = op_txn_savepoint(h);
    this.#cell.txnDepth = (this.#cell.txnDepth ?? 0) + 1;
    let rolledBack = false;
    const txn = {
      get: (k) => this.get(k),
      put: (k, v, o) => this.put(k, v, o),
      delete: (k) => this.delete(k),
      list: (o) => this.list(o),
      deleteAll: () => PromiseReject(new Error("Cannot call deleteAll() within a transaction")),
      getAlarm: (o) => this.getAlarm(o),
      setAlarm: (t, o) => this.setAlarm(t, o),
      deleteAlarm: (o) => this.deleteAlarm(o),
      rollback: () => {
        if (!rolledBack) {
          rolledBack = true;
          op_txn_finish(h, depth, false);
        }
      },
    };
    try {
      const r = await callback(txn);
      if (!rolledBack) op_txn_finish(h, depth, true);
      return r;
    } catch (e) {
      if (!rolledBack) op_txn_finish(h, depth, false);
      throw e;
    } finally {
      this.#cell.txnDepth--;
    }
  }
  sync() {
    // Resolves once every write made so far is committed and fsynced.
    handle(this.#cell);
    return op_cell_sync().then(() => undefined);
  }
  get sql() {
    return this.#sql ??= new SqlStorage(KEY, this.#cell);
  }
  // workerd lets code (tests, mostly) replace it.
  set sql(value) {
    this.#sql = value;
  }
  get kv() {
    if (!this.#cell.cls.sqlite) {
      throw new Error(
        "The storage.kv (synchronous KV) API is only available for SQLite-backed Durable Objects, i.e. those declared with `new_sqlite_classes` in a migration.",
      );
    }
    return this.#kv ??= new SyncKvStorage(KEY, this.#cell);
  }
  // Point-in-time recovery (SQLite-backed objects): bookmarks name states
  // of the cell's history, a local log or the bucket's LTX chains (see
  // runtime/ext/src/pitr.rs). Each call first lets earlier writes commit.
  // KV-backed objects answer as workerd's local storage does: a per-object
  // sequence, and no recovery.
  getCurrentBookmark() {
    const cell = this.#cell;
    if (!cell.cls.sqlite) {
      return settle(() => {
        handle(cell);
        const n = NumberPrototypeToString(cell.bookmarks++, 16);
        return `00000000-${StringPrototypePadStart(n, 8, "0")}-00000000-${StringPrototypeRepeat("0", 32)}`;
      });
    }
    return (async () => {
      handle(cell);
      await op_cell_sync();
      return op_pitr_current(handle(cell));
    })();
  }
  getBookmarkForTime(timestamp) {
    const cell = this.#cell;
    if (!cell.cls.sqlite) return PromiseReject(new Error(NO_PITR));
    return (async () => {
      const ms = ObjectPrototypeIsPrototypeOf(DatePrototype, timestamp)
        ? DatePrototypeGetTime(timestamp)
        : Number(timestamp);
      if (!NumberIsFinite(ms)) throw new TypeError("getBookmarkForTime() expects a Date or a number of milliseconds since the epoch.");
      handle(cell);
      await op_cell_sync();
      return await op_pitr_for_time(handle(cell), ms);
    })();
  }
  onNextSessionRestoreBookmark(bookmark) {
    const cell = this.#cell;
    if (!cell.cls.sqlite) return PromiseReject(new Error(NO_PITR));
    return (async () => {
      if (typeof bookmark !== "string") throw new TypeError("onNextSessionRestoreBookmark() expects a bookmark string.");
      handle(cell);
      await op_cell_sync();
      // The state before the restore: restoring to it undoes this one.
      const undo = op_pitr_current(handle(cell));
      await op_pitr_schedule(handle(cell), bookmark);
      // Committed before the caller can ctx.abort() the session.
      await op_cell_sync();
      return undo;
    })();
  }
  getAlarm(_options) {
    return settle(() => storedAlarm(this.#cell));
  }
  setAlarm(time, _options) {
    return settle(() => setAlarm(this.#cell, time));
  }
  deleteAlarm(_options) {
    return settle(() => {
      op_alarm_delete(handle(this.#cell));
    });
  }
}

// The alarm a running alarm() fired reads as none (unless re-armed).
function storedAlarm(cell) {
  const row = op_alarm_get(handle(cell));
  if (row === null) return null;
  if (cell.alarmRunning !== null && row[2] === cell.alarmRunning[2]) return null;
  return row[0];
}

function setAlarm(cell, time) {
  let ms;
  if (ObjectPrototypeIsPrototypeOf(DatePrototype, time)) ms = DatePrototypeGetTime(time);
  else if (typeof time === "number") ms = time;
  else {
    throw new TypeError(
      "Failed to execute 'setAlarm' on 'DurableObjectStorage': parameter 1 is not of type 'date'.",
    );
  }
  if (!NumberIsFinite(ms)) {
    throw new TypeError("The value cannot be converted because it is not a valid Date.");
  }
  if (ms <= 0) throw new TypeError("setAlarm() cannot be called with an alarm time <= 0");
  if (cell.facet !== null) throw new Error("Alarms of Durable Object facets are not supported by cellhost yet");
  // Allowed in the constructor (no instance yet) whatever the class.
  if (cell.instance !== null && typeof cell.instance.alarm !== "function") {
    throw new TypeError(
      "Your Durable Object class must have an alarm() handler in order to call setAlarm()",
    );
  }
  const h = handle(cell);
  // Past times fire at once.
  ms = MathMax(MathFloor(ms), Date.now());
  if (storedAlarm(cell) === ms) return; // the same time: no write at all
  op_alarm_set(h, cell.ns, cell.hex, cell.name, ms);
}

class SyncKvStorage {
  #cell;
  constructor(key, cell) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
  }
  get(key) {
    const v = op_kv_get(handle(this.#cell), `${key}`);
    return v === null ? undefined : de(v);
  }
  put(key, value) {
    op_kv_put(handle(this.#cell), `${key}`, ser(value));
  }
  delete(key) {
    return op_kv_delete(handle(this.#cell), `${key}`);
  }
  // One entry per step, each resuming after the last key returned, so the
  // iterator sees later writes and does not hold anything open; a newer
  // list() call invalidates older iterators (workerd allows only one).
  list(options) {
    const cell = this.#cell;
    // Taken now, not at the first next(): this call invalidates older ones.
    const generation = cell.kvListGeneration = (cell.kvListGeneration ?? 0) + 1;
    return kvListSteps(cell, generation, compileList(options));
  }
}

function* kvListSteps(cell, generation, compiled) {
  {
    const { 0: start, 1: startAfter, 2: end, 3: prefix, 4: reverse, 5: limit } = compiled;
    let last = null;
    for (let n = 0; limit === null || n < limit; n++) {
      if (cell.kvListGeneration !== generation) {
        throw new Error(
          "kv.list() iterator was invalidated because a new call to kv.list() was started. Only one kv.list() iterator can exist at a time.",
        );
      }
      const rows = last === null
        ? op_kv_list(handle(cell), start, startAfter, end, prefix, reverse, 1)
        : reverse
        ? op_kv_list(handle(cell), start, startAfter, last, prefix, true, 1)
        : op_kv_list(handle(cell), null, last, end, prefix, false, 1);
      if (rows.length === 0) return;
      last = rows[0][0];
      yield [last, de(rows[0][1])];
    }
  }
}

// -- SQL ---------------------------------------------------------------------

function sqlHandle(cell) {
  if (!cell.cls.sqlite) {
    throw new Error(
      "SQL is not enabled for this Durable Object class. To enable it, set `enableSql = true` in your workerd config for the class. If using wrangler, make sure the class is declared in a `new_sqlite_classes` migration.",
    );
  }
  return handle(cell);
}

function binding(v) {
  if (v === null || v === undefined || typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "bigint") throw new TypeError("Cannot convert a BigInt value to a number");
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return v;
  return `${v}`; // WebIDL string coercion: true -> "true", 1n -> "1"
}

class SqlStorage {
  #cell;
  constructor(key, cell) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#cell = cell;
  }
  exec(query, ...bindings) {
    const h = sqlHandle(this.#cell);
    const out = op_sql_exec(h, `${query}`, bindings.map(binding));
    return new SqlStorageCursor(KEY, out, h);
  }
  get databaseSize() {
    return op_sql_database_size(sqlHandle(this.#cell));
  }
}

// A cursor dropped before its end closes its statement in SQLite.
const openCursors = new SafeFinalizationRegistry(([h, id]) => op_sql_cursor_close(h, id));

class SqlStorageCursor {
  #columns;
  #rows;
  // Rows read and written just after the step that gave each row, flat.
  #counts;
  #pos = 0;
  // The statement's final [read, written], once it has no rows left.
  #end;
  #h;
  #id;
  constructor(key, out, h) {
    if (key !== KEY) throw new TypeError("Illegal constructor");
    this.#columns = out[0];
    this.#rows = out[1];
    this.#counts = out[2];
    this.#end = out[3];
    this.#h = h;
    this.#id = out[4];
    if (this.#id) openCursors.register(this, [h, this.#id], this);
  }
  get columnNames() {
    return this.#columns;
  }
  // workerd's cursor steps one row past those it has handed out, so its
  // counts are those of the step that gave the next row, or the final ones.
  #count(k) {
    if (this.#have(1)) return this.#counts[2 * this.#pos + k];
    return this.#end ? this.#end[k] : 0;
  }
  get rowsRead() {
    return this.#count(0);
  }
  get rowsWritten() {
    return this.#count(1);
  }
  #object(row) {
    const o = {};
    for (let i = 0; i < this.#columns.length; i++) o[this.#columns[i]] = row[i];
    return o;
  }
  // At least `n` rows not yet handed out, as far as the statement has them:
  // a read's rows come from SQLite a batch at a time (op_sql_cursor_next).
  #have(n) {
    while (this.#rows.length - this.#pos < n && this.#id) {
      const [rows, counts, end] = op_sql_cursor_next(this.#h, this.#id);
      // (one() looks one row ahead across a batch's end)
      const kept = [];
      const keptCounts = [];
      for (let i = this.#pos; i < this.#rows.length; i++) {
        kept[kept.length] = this.#rows[i];
        keptCounts[keptCounts.length] = this.#counts[2 * i];
        keptCounts[keptCounts.length] = this.#counts[2 * i + 1];
      }
      for (let i = 0; i < rows.length; i++) kept[kept.length] = rows[i];
      for (let i = 0; i < counts.length; i++) keptCounts[keptCounts.length] = counts[i];
      this.#rows = kept;
      this.#counts = keptCounts;
      this.#pos = 0;
      if (end) {
        this.#end = end;
        openCursors.unregister(this);
        this.#id = 0;
      }
    }
    return this.#rows.length - this.#pos >= n;
  }
  next() {
    if (!this.#have(1)) return { done: true, value: undefined };
    return { done: false, value: this.#object(this.#rows[this.#pos++]) };
  }
  toArray() {
    const out = [];
    while (this.#have(1)) out.push(this.#object(this.#rows[this.#pos++]));
    return out;
  }
  one() {
    if (!this.#have(1)) throw new Error("Expected exactly one result from SQL query, but got no results.");
    if (this.#have(2)) throw new Error("Expected exactly one result from SQL query, but got multiple results.");
    return this.#object(this.#rows[this.#pos++]);
  }
  *raw() {
    while (this.#have(1)) yield this.#rows[this.#pos++];
  }
  [SymbolIterator]() {
    return this;
  }
}

// A D1 database binding (`env.DB`) with the API and messages of workerd's
// D1 binding: prepared statements (bind, first, all, raw, run), batch,
// exec, sessions with bookmarks. Each call is one transaction run by
// src/lib.rs; its answer is shaped here as D1's wire answers are.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayBufferIsView,
  ArrayFrom,
  ArrayIsArray,
  ArrayPrototypeEvery,
  ArrayPrototypeMap,
  ArrayPrototypePush,
  Error,
  JSONParse,
  JSONStringify,
  ObjectFromEntries,
  ObjectPrototypeIsPrototypeOf,
  StringPrototypeLocaleCompare,
  StringPrototypeSplit,
  StringPrototypeTrim,
  Uint8Array,
} = primordials;
const { op_d1_query } = core.ops;

const FIRST_PRIMARY = "first-primary";
const FIRST_UNCONSTRAINED = "first-unconstrained";

function d1Error(prefix, message) {
  return new Error(`${prefix}: ${message}`, { cause: new Error(message) });
}

/** One call to the database: the per-query results, or the error thrown. */
async function query(id, session, queries) {
  const answer = JSONParse(await op_d1_query(id, JSONStringify(queries)));
  if (answer.error !== undefined) return { error: answer.error };
  session?._updateBookmark(answer.bookmark);
  return { results: answer.results };
}

function objects(r) {
  return ArrayPrototypeMap(
    r.rows,
    (row) => ObjectFromEntries(ArrayPrototypeMap(row, (cell, i) => [r.columns[i], cell])),
  );
}

function result(r) {
  return { success: true, meta: r.meta, results: objects(r) };
}

class D1PreparedStatement {
  #db;
  #session;
  constructor(db, session, statement, params) {
    this.#db = db;
    this.#session = session;
    this.statement = statement;
    this.params = params ?? [];
  }

  bind(...values) {
    const params = ArrayPrototypeMap(values, (v) => {
      const t = typeof v;
      if (t === "number" || t === "string") return v;
      if (t === "boolean") return v ? 1 : 0;
      if (t === "object") {
        if (v === null) return v;
        if (ArrayIsArray(v) && ArrayPrototypeEvery(v, (b) => typeof b === "number" && b >= 0 && b < 256)) {
          return v;
        }
        if (ObjectPrototypeIsPrototypeOf(ArrayBuffer.prototype, v)) return ArrayFrom(new Uint8Array(v));
        if (ArrayBufferIsView(v)) return ArrayFrom(v);
      }
      throw d1Error("D1_TYPE_ERROR", `Type '${t}' not supported for value '${v}'`);
    });
    return new D1PreparedStatement(this.#db, this.#session, this.statement, params);
  }

  async #one() {
    const r = await query(this.#db, this.#session, [{ sql: this.statement, params: this.params }]);
    if (r.error !== undefined) throw d1Error("D1_ERROR", r.error);
    return r.results[0];
  }

  async first(colName) {
    const rows = objects(await this.#one());
    if (rows.length === 0) return null;
    const row = rows[0];
    if (colName !== undefined) {
      if (row[colName] === undefined) {
        throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${colName})`, {
          cause: new Error("Column not found"),
        });
      }
      return row[colName];
    }
    return row;
  }

  async all() {
    return result(await this.#one());
  }

  async run() {
    return result(await this.#one());
  }

  async raw(options) {
    const r = await this.#one();
    const out = [];
    if (options?.columnNames) ArrayPrototypePush(out, r.columns);
    for (const row of r.rows) ArrayPrototypePush(out, row);
    return out;
  }

}

async function batch(id, session, statements) {
  const queries = ArrayPrototypeMap(statements, (s) => ({ sql: s.statement, params: s.params }));
  const r = await query(id, session, queries);
  if (r.error !== undefined) throw d1Error("D1_ERROR", r.error);
  return ArrayPrototypeMap(r.results, result);
}

class D1DatabaseSession {
  #id;
  #bookmark;
  constructor(id, bookmarkOrConstraint) {
    this.#id = id;
    const b = StringPrototypeTrim(bookmarkOrConstraint);
    if (b === "") throw new Error("D1_SESSION_ERROR: invalid bookmark or constraint");
    this.#bookmark = b;
  }

  _updateBookmark(next) {
    const current = this.getBookmark();
    if (current === null || StringPrototypeLocaleCompare(current, next) < 0) this.#bookmark = next;
  }

  getBookmark() {
    if (this.#bookmark === FIRST_PRIMARY || this.#bookmark === FIRST_UNCONSTRAINED) return null;
    return this.#bookmark;
  }

  prepare(sql) {
    return new D1PreparedStatement(this.#id, this, sql);
  }

  async batch(statements) {
    return batch(this.#id, this, statements);
  }

}

class D1Database {
  #id;
  constructor(id) {
    this.#id = id;
  }

  prepare(sql) {
    return new D1PreparedStatement(this.#id, null, sql);
  }

  async batch(statements) {
    return batch(this.#id, null, statements);
  }

  // Each line is a statement; all of them run as one transaction.
  async exec(sql) {
    const lines = StringPrototypeSplit(StringPrototypeTrim(sql), "\n");
    const r = await query(this.#id, null, ArrayPrototypeMap(lines, (l) => ({ sql: l })));
    if (r.error !== undefined) {
      const message = `Error in line 1: ${lines[0]}: ${r.error}`;
      throw d1Error("D1_EXEC_ERROR", message);
    }
    let duration = 0;
    for (const q of r.results) duration += q.meta.duration;
    return { count: r.results.length, duration };
  }

  withSession(constraintOrBookmark) {
    let c = constraintOrBookmark?.trim();
    if (c === undefined || c === null || c === "") c = FIRST_UNCONSTRAINED;
    return new D1DatabaseSession(this.#id, c);
  }

  async dump() {
    throw new Error("D1_DUMP_ERROR: dump() is not supported by cellhost (it is deprecated on D1 too); use `wrangler d1 export`-style SQL from the database file");
  }

}

export function d1Database(id) {
  return new D1Database(id);
}

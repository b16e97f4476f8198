// The fault lab's worker (see tests/faultlab.rs): a SQL-backed counter per
// name, as examples/counter, with two more ways to reach it.
//   POST /increment?name=N         adds one, replies in the same turn
//   POST /increment?name=N&wait=1  adds one, replies a turn later (after the
//                                  turn's commit, as most apps do)
//   POST /poison?name=N            adds one in a turn whose commit must fail
//                                  (a deferred foreign key left violated),
//                                  then replies a turn later: never a 200
//   GET  /?name=N                  the count
import { DurableObject } from "cloudflare:workers";

const later = () => new Promise((r) => setTimeout(r, 1));

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY)");
    this.sql.exec("CREATE TABLE IF NOT EXISTS child (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id))");
  }

  bump() {
    return this.sql
      .exec("INSERT INTO counter (id, value) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET value = value + 1 RETURNING value")
      .one().value;
  }

  async increment(wait) {
    const value = this.bump();
    if (wait) await later();
    return value;
  }

  async poison() {
    const value = this.bump();
    this.ctx.storage.transactionSync(() => {
      this.sql.exec("PRAGMA defer_foreign_keys = ON");
      this.sql.exec("INSERT INTO child (p) VALUES (-1)");
    });
    await later();
    return value;
  }

  get() {
    return this.sql.exec("SELECT value FROM counter WHERE id = 1").toArray()[0]?.value ?? 0;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const counter = env.COUNTER.getByName(url.searchParams.get("name") ?? "default");
    const post = request.method === "POST";
    if (post && url.pathname === "/increment") {
      return new Response(String(await counter.increment(url.searchParams.has("wait"))));
    }
    if (post && url.pathname === "/poison") {
      return new Response(String(await counter.poison()));
    }
    if (request.method === "GET" && url.pathname === "/") {
      return new Response(String(await counter.get()));
    }
    return new Response("not found", { status: 404 });
  },
};

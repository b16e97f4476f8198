// A SQL-backed counter per name. POST /increment?name=N adds one and returns
// the new count; GET /?name=N returns the count.
import { DurableObject } from "cloudflare:workers";

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)");
  }

  increment() {
    return this.sql
      .exec("INSERT INTO counter (id, value) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET value = value + 1 RETURNING value")
      .one().value;
  }

  get() {
    return this.sql.exec("SELECT value FROM counter WHERE id = 1").toArray()[0]?.value ?? 0;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const name = url.searchParams.get("name") ?? "default";
    const counter = env.COUNTER.getByName(name);
    if (request.method === "POST" && url.pathname === "/increment") {
      return new Response(String(await counter.increment()));
    }
    if (request.method === "GET" && url.pathname === "/") {
      return new Response(String(await counter.get()));
    }
    return new Response("not found", { status: 404 });
  },
};

// A table of 1 KiB rows per object, for restores of a large database:
// POST /fill?n=N adds N rows, GET /row?id=I reads one, POST /set?id=I&v=V
// rewrites one, GET /count counts them.
import { DurableObject } from "cloudflare:workers";

export class Rows extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, v TEXT NOT NULL, pad TEXT NOT NULL)");
  }

  fill(n) {
    const start = this.sql.exec("SELECT count(*) AS n FROM rows").one().n;
    for (let i = start; i < start + n; i++) {
      this.sql.exec("INSERT INTO rows (id, v, pad) VALUES (?, ?, ?)", i, `v${i}`, "x".repeat(1000) + i);
    }
    return start + n;
  }

  row(id) {
    return this.sql.exec("SELECT v FROM rows WHERE id = ?", id).toArray()[0]?.v ?? "none";
  }

  set(id, v) {
    this.sql.exec("UPDATE rows SET v = ? WHERE id = ?", v, id);
    return v;
  }

  count() {
    return this.sql.exec("SELECT count(*) AS n FROM rows").one().n;
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (k) => url.searchParams.get(k);
    const rows = env.ROWS.getByName(q("name") ?? "big");
    switch (url.pathname) {
      case "/fill": return new Response(String(await rows.fill(Number(q("n")))));
      case "/row": return new Response(String(await rows.row(Number(q("id")))));
      case "/set": return new Response(String(await rows.set(Number(q("id")), q("v"))));
      case "/count": return new Response(String(await rows.count()));
    }
    return new Response("not found", { status: 404 });
  },
};

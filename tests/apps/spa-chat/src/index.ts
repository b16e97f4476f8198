import { DurableObject, WorkerEntrypoint } from "cloudflare:workers";

interface Env {
  ASSETS: Fetcher;
  ROOMS: DurableObjectNamespace<Room>;
  MODERATION: Service<Moderation>;
}

type Props = { banned: string[] };

export class Moderation extends WorkerEntrypoint<Env, Props> {
  async review(author: string, text: string): Promise<{ ok: boolean; text: string }> {
    if (this.ctx.props.banned.includes(author)) return { ok: false, text };
    return { ok: true, text: text.replace(/darn/g, "d**n") };
  }
}

export class Room extends DurableObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, author TEXT, text TEXT)",
    );
  }
  async post(author: string, text: string): Promise<number> {
    this.ctx.storage.sql.exec("INSERT INTO messages (author, text) VALUES (?, ?)", author, text);
    return this.ctx.storage.sql.exec("SELECT count(*) AS n FROM messages").one().n as number;
  }
  async list(): Promise<{ author: string; text: string }[]> {
    return this.ctx.storage.sql
      .exec<{ author: string; text: string }>("SELECT author, text FROM messages ORDER BY id")
      .toArray();
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const m = url.pathname.match(/^\/api\/rooms\/([^/]+)\/messages$/);
    if (m) {
      const room = env.ROOMS.getByName(m[1]);
      if (request.method === "POST") {
        const { author, text } = (await request.json()) as { author: string; text: string };
        const verdict = await env.MODERATION.review(author, text);
        if (!verdict.ok) return Response.json({ error: "banned" }, { status: 403 });
        return Response.json({ count: await room.post(author, verdict.text) });
      }
      return Response.json(await room.list());
    }
    if (url.pathname === "/api/shell") {
      // The client shell through the binding, as a server-rendering Worker would.
      const shell = await env.ASSETS.fetch(new URL("/", request.url));
      const html = await shell.text();
      return new Response(html.replace("<title>chat</title>", "<title>chat (ssr)</title>"), {
        headers: { "content-type": "text/html" },
      });
    }
    return new Response("not found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;

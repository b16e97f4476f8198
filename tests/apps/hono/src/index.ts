import { Hono } from "hono";
import { DurableObject } from "cloudflare:workers";

type Env = { COUNTER: DurableObjectNamespace<Counter> };

export class Counter extends DurableObject<Env> {
  async increment(by: number): Promise<number> {
    const value = ((await this.ctx.storage.get<number>("n")) ?? 0) + by;
    await this.ctx.storage.put("n", value);
    return value;
  }
  async read(): Promise<number> {
    return (await this.ctx.storage.get<number>("n")) ?? 0;
  }
}

const app = new Hono<{ Bindings: Env }>();
app.get("/", (c) => c.text(`hono on ${navigator.userAgent}`));
app.post("/counter/:name", async (c) => {
  const by = Number(c.req.query("by") ?? "1");
  const stub = c.env.COUNTER.getByName(c.req.param("name"));
  return c.json({ value: await stub.increment(by) });
});
app.get("/counter/:name", async (c) =>
  c.json({ value: await c.env.COUNTER.getByName(c.req.param("name")).read() }),
);
app.get("/throw", () => {
  throw new Error("handler failed");
});
app.notFound((c) => c.json({ error: "not found", path: c.req.path }, 404));
app.onError((err, c) => c.json({ error: err.message }, 500));

export default app;

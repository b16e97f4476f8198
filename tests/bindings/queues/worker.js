// @request GET /send
// @request GET /errors
// @request GET /wait?n=9
// Queues: messages of each content type through a consumer, a retried
// message, one that exhausts its retries into the dead-letter queue.
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const out = [];
    const t = async (name, f) => {
      try {
        out.push(`${name}: ${JSON.stringify(await f())}`);
      } catch (e) {
        out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
      }
    };
    if (u.pathname === "/send") {
      await t("type", () => [typeof env.JOBS.send, typeof env.JOBS.sendBatch]);
      await t("v8", async () => {
        const r = await env.JOBS.send({ kind: "v8", n: 1 });
        // The backlog is this queue's (wrangler dev's broker answers zeros).
        return [Object.keys(r), Object.keys(r.metadata), typeof r.metadata.metrics.backlogCount, typeof r.metadata.metrics.backlogBytes];
      });
      const shape = (r) => Object.keys(r.metadata.metrics).filter((k) => k !== "oldestMessageTimestamp");
      await t("json", async () => shape(await env.JOBS.send({ kind: "json" }, { contentType: "json" })));
      await t("text", async () => shape(await env.JOBS.send("plain text", { contentType: "text" })));
      await t("bytes", async () => shape(await env.JOBS.send(new Uint8Array([1, 2, 3]), { contentType: "bytes" })));
      await t("batch", async () => shape(await env.JOBS.sendBatch([{ body: "b1", contentType: "text" }, { body: { kind: "b2" }, contentType: "json" }, { body: "retry-once", contentType: "text" }])));
      await t("dlq", async () => shape(await env.JOBS.send("always-fail", { contentType: "text" })));
      await t("delayed", async () => shape(await env.JOBS.send("delayed", { contentType: "text", delaySeconds: 1 })));
    }
    if (u.pathname === "/errors") {
      await t("undefined", () => env.JOBS.send(undefined));
      await t("bad-type", () => env.JOBS.send("x", { contentType: "yaml" }));
      await t("text-not-string", () => env.JOBS.send(5, { contentType: "text" }));
      await t("bytes-not-view", () => env.JOBS.send("x", { contentType: "bytes" }));
      await t("empty-batch", () => env.JOBS.sendBatch([]));
      await t("batch-undefined", () => env.JOBS.sendBatch([{ body: undefined }]));
    }
    if (u.pathname === "/wait") {
      const n = Number(u.searchParams.get("n"));
      let keys = [];
      for (let i = 0; i < 150; i++) {
        keys = (await env.SEEN.list()).keys.map((k) => k.name);
        if (keys.length >= n) break;
        await scheduler.wait(100);
      }
      const seen = [];
      for (const k of keys) seen.push(`${k} => ${await env.SEEN.get(k)}`);
      return new Response(seen.join("\n"));
    }
    return new Response(out.join("\n"));
  },

  async queue(batch, env) {
    for (const m of batch.messages) {
      const b = m.body;
      // A "bytes" body is a Uint8Array on workerd (queue.c++), an
      // ArrayBuffer through wrangler dev's local broker: both read the same.
      const desc = b instanceof Uint8Array || b instanceof ArrayBuffer ? `bytes ${[...new Uint8Array(b)]}` : JSON.stringify(b);
      if (batch.queue === "jobs-dlq") {
        await env.SEEN.put(`dlq:${desc}`, `attempts=${m.attempts} ${typeof m.id} ${m.timestamp instanceof Date}`);
        continue;
      }
      if (b === "retry-once" && m.attempts === 1) {
        m.retry();
        continue;
      }
      if (b === "always-fail") {
        m.retry();
        continue;
      }
      await env.SEEN.put(`${batch.queue}:${desc}`, `attempts=${m.attempts}`);
      m.ack();
    }
  },
};

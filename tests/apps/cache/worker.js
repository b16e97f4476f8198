// The Cache API scenario: what is stored, for how long, and how a lookup
// answers (Vary, conditional and range requests), step by step.
export default {
  async fetch(req) {
    const out = [];
    const base = "https://cache.test";
    const c = caches.default;
    const named = await caches.open("other");
    const show = async (label, p) => {
      try {
        const r = await p;
        if (r === undefined || typeof r === "boolean") { out.push([label, String(r)]); return; }
        const h = {};
        for (const k of ["cf-cache-status", "content-range", "content-length", "etag", "x-v", "content-type"]) if (r.headers.get(k) !== null) h[k] = r.headers.get(k);
        out.push([label, r.status, h, await r.text()]);
      } catch (e) { out.push([label, e.name, e.message]); }
    };
    const put = (path, body, headers, status = 200) => show(`put ${path}`, c.put(`${base}${path}`, new Response(body, { status, headers })));
    await put("/a", "alpha body", { "cache-control": "max-age=60", etag: '"v1"', "x-v": "1", "content-type": "text/plain" });
    await show("match /a", c.match(`${base}/a`));
    await show("match /a named", named.match(`${base}/a`));
    await show("match /a post", c.match(new Request(`${base}/a`, { method: "POST" })));
    await show("match /a post ignoreMethod", c.match(new Request(`${base}/a`, { method: "POST" }), { ignoreMethod: true }));
    await show("inm hit", c.match(new Request(`${base}/a`, { headers: { "if-none-match": '"v1"' } })));
    await show("inm weak", c.match(new Request(`${base}/a`, { headers: { "if-none-match": 'W/"v1"' } })));
    await show("inm miss", c.match(new Request(`${base}/a`, { headers: { "if-none-match": '"v2"' } })));
    await show("range", c.match(new Request(`${base}/a`, { headers: { range: "bytes=0-4" } })));
    await show("range suffix", c.match(new Request(`${base}/a`, { headers: { range: "bytes=-4" } })));
    await show("range open", c.match(new Request(`${base}/a`, { headers: { range: "bytes=6-" } })));
    await show("range bad", c.match(new Request(`${base}/a`, { headers: { range: "bytes=100-200" } })));
    await put("/lm", "lm", { "cache-control": "max-age=60", "last-modified": "Tue, 14 Nov 2023 22:13:20 GMT" });
    await show("ims newer", c.match(new Request(`${base}/lm`, { headers: { "if-modified-since": "Wed, 15 Nov 2023 00:00:00 GMT" } })));
    await show("ims older", c.match(new Request(`${base}/lm`, { headers: { "if-modified-since": "Mon, 13 Nov 2023 00:00:00 GMT" } })));
    for (const [p, h] of [["/nostore", "no-store, max-age=60"], ["/private", "private, max-age=60"], ["/nocache", "no-cache"], ["/zero", "max-age=0"], ["/none", null], ["/smax", "s-maxage=60"], ["/public", "public"]]) {
      await put(p, "x", h ? { "cache-control": h } : {});
      await show(`match ${p}`, c.match(`${base}${p}`));
    }
    await put("/500", "err", { "cache-control": "max-age=60" }, 500);
    await show("match /500", c.match(`${base}/500`));
    await put("/404", "nf", { "cache-control": "max-age=60" }, 404);
    await show("match /404", c.match(`${base}/404`));
    await put("/cookie", "c", { "cache-control": "max-age=60", "set-cookie": "a=b" });
    await show("match /cookie", c.match(`${base}/cookie`));
    await put("/expires", "e", { expires: new Date(Date.now() + 60000).toUTCString() });
    await show("match /expires", c.match(`${base}/expires`));
    await put("/expired", "e", { expires: new Date(Date.now() - 60000).toUTCString() });
    await show("match /expired", c.match(`${base}/expired`));
    await put("/short", "s", { "cache-control": "max-age=1" });
    await show("match /short", c.match(`${base}/short`));
    await new Promise((r) => setTimeout(r, 2100));
    await show("match /short later", c.match(`${base}/short`));
    await show("vary put", c.put(new Request(`${base}/v`, { headers: { accept: "text/html" } }), new Response("html", { headers: { "cache-control": "max-age=60", vary: "Accept" } })));
    await show("vary same", c.match(new Request(`${base}/v`, { headers: { accept: "text/html" } })));
    await show("vary other", c.match(new Request(`${base}/v`, { headers: { accept: "application/json" } })));
    await show("vary none", c.match(`${base}/v`));
    await show("replace", c.put(`${base}/a`, new Response("second", { headers: { "cache-control": "max-age=60" } })));
    await show("match replaced", c.match(`${base}/a`));
    await show("delete post", c.delete(new Request(`${base}/a`, { method: "POST" })));
    await show("delete", c.delete(`${base}/a`));
    await show("delete again", c.delete(`${base}/a`));
    await show("match deleted", c.match(`${base}/a`));
    await show("named put", named.put(`${base}/n`, new Response("named", { headers: { "cache-control": "max-age=60" } })));
    await show("named match", named.match(`${base}/n`));
    await show("default match named", c.match(`${base}/n`));
    await show("put 204", c.put(`${base}/204`, new Response(null, { status: 204, headers: { "cache-control": "max-age=60" } })));
    await show("match 204", c.match(`${base}/204`));
    await show("stream body", c.put(`${base}/s`, new Response(new ReadableStream({ start(ctl) { ctl.enqueue(new TextEncoder().encode("str")); ctl.enqueue(new TextEncoder().encode("eam")); ctl.close(); } }), { headers: { "cache-control": "max-age=60" } })));
    await show("match stream", c.match(`${base}/s`));
    return Response.json(out, { headers: { "x-run": "1" } });
  },
};

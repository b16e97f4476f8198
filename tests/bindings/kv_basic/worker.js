// @request GET /put
// @request GET /get
// @request GET /types
// @request GET /metadata
// @request GET /bulk
// @request GET /list
// @request GET /delete
// @request GET /isolation
// KV: values of every type in and out, metadata, bulk reads, listing with
// prefixes, limits and cursors, deletes, and namespaces kept apart.
const out = [];
const t = async (name, f) => {
  try {
    const v = await f();
    out.push(`${name}: ${v instanceof Map ? JSON.stringify([...v]) : JSON.stringify(v)}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
  }
};

export default {
  async fetch(req, env) {
    out.length = 0;
    const { KV, OTHER } = env;
    switch (new URL(req.url).pathname) {
      case "/put":
        await t("type", () => [typeof KV, Object.prototype.toString.call(KV), typeof KV.get, typeof KV.list]);
        await t("string", () => KV.put("a", "alpha"));
        await t("number", () => KV.put("n", 42));
        await t("bytes", () => KV.put("b", new Uint8Array([1, 2, 3, 250])));
        await t("buffer", () => KV.put("ab", new Uint8Array([9, 8]).buffer));
        await t("view", () => KV.put("dv", new DataView(new Uint8Array([5, 6, 7]).buffer, 1)));
        await t("stream", () => KV.put("s", new Response("streamed value").body));
        await t("json", () => KV.put("j", JSON.stringify({ x: [1, 2], y: "z" })));
        await t("meta", () => KV.put("m", "with meta", { metadata: { tag: "t1", n: 2 } }));
        await t("ttl", () => KV.put("ttl", "soon gone", { expirationTtl: 3600, metadata: { a: 1 } }));
        await t("unicode", () => KV.put("ключ/ü", "значение"));
        await t("empty", () => KV.put("e", ""));
        await t("overwrite", async () => {
          await KV.put("o", "one");
          await KV.put("o", "two");
          return KV.get("o");
        });
        for (let i = 0; i < 12; i++) await KV.put(`list/${String(i).padStart(2, "0")}`, `v${i}`);
        break;
      case "/get":
        await t("string", () => KV.get("a"));
        await t("number", () => KV.get("n"));
        await t("missing", () => KV.get("nope"));
        await t("missing-typed", () => KV.get("nope", "arrayBuffer"));
        await t("options-object", () => KV.get("a", { type: "text", cacheTtl: 60 }));
        await t("unicode", () => KV.get("ключ/ü"));
        await t("empty", () => KV.get("e"));
        await t("stream-text", () => KV.get("s"));
        break;
      case "/types":
        await t("json", () => KV.get("j", "json"));
        await t("json-object", () => KV.get("j", { type: "json" }));
        await t("arrayBuffer", async () => {
          const b = await KV.get("b", "arrayBuffer");
          return [b instanceof ArrayBuffer, [...new Uint8Array(b)]];
        });
        await t("view", async () => [...new Uint8Array(await KV.get("dv", "arrayBuffer"))]);
        await t("buffer", async () => [...new Uint8Array(await KV.get("ab", "arrayBuffer"))]);
        await t("stream", async () => {
          const s = await KV.get("s", "stream");
          return [s instanceof ReadableStream, await new Response(s).text()];
        });
        await t("bytes-as-text", () => KV.get("b"));
        await t("bad-json", () => KV.get("a", "json"));
        await t("bad-type", () => KV.get("a", "blob"));
        break;
      case "/metadata":
        await t("with", () => KV.getWithMetadata("m"));
        await t("without", () => KV.getWithMetadata("a"));
        await t("missing", () => KV.getWithMetadata("nope"));
        await t("typed", () => KV.getWithMetadata("j", "json"));
        await t("ttl", async () => {
          const r = await KV.getWithMetadata("ttl");
          return [r.value, r.metadata, Object.keys(r)];
        });
        break;
      case "/bulk":
        await t("text", () => KV.get(["a", "n", "nope", "e"]));
        await t("json", () => KV.get(["j"], "json"));
        await t("meta", () => KV.getWithMetadata(["m", "a", "nope"]));
        await t("meta-json", () => KV.getWithMetadata(["j"], { type: "json" }));
        await t("dupes", () => KV.get(["a", "a"]));
        await t("bad-type", () => KV.get(["a"], "arrayBuffer"));
        await t("bad-json", () => KV.get(["a"], "json"));
        await t("none", () => KV.get([]));
        await t("too-many", () => KV.get(Array.from({ length: 101 }, (_, i) => `k${i}`)));
        await t("empty-key", () => KV.get(["a", ""]));
        break;
      case "/list":
        await t("all-names", async () => (await KV.list()).keys.map((k) => k.name));
        await t("shape", async () => {
          const r = await KV.list({ prefix: "m" });
          return r;
        });
        await t("ttl-key", async () => {
          const r = await KV.list({ prefix: "ttl" });
          return r.keys.map((k) => [k.name, typeof k.expiration, k.metadata]);
        });
        await t("prefix", async () => (await KV.list({ prefix: "list/0" })).keys.map((k) => k.name));
        await t("pages", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await KV.list({ prefix: "list/", limit: 5, cursor });
            pages.push([r.keys.map((k) => k.name), r.list_complete, typeof r.cursor]);
            cursor = r.cursor;
          } while (cursor !== undefined);
          return pages;
        });
        await t("exact-limit", async () => {
          const r = await KV.list({ prefix: "list/", limit: 12 });
          return [r.keys.length, r.list_complete, Object.keys(r)];
        });
        await t("limit-0", async () => (await KV.list({ prefix: "list/", limit: 0 })).keys.length);
        await t("limit-1001", () => KV.list({ limit: 1001 }));
        await t("no-match", () => KV.list({ prefix: "zzz" }));
        break;
      case "/delete":
        await t("delete", () => KV.delete("a"));
        await t("after", () => KV.get("a"));
        await t("delete-missing", () => KV.delete("nope"));
        await t("list-after", async () => (await KV.list({ prefix: "a" })).keys.map((k) => k.name));
        break;
      case "/isolation":
        await t("other-empty", () => OTHER.get("n"));
        await t("other-put", () => OTHER.put("n", "other"));
        await t("kv-unchanged", () => KV.get("n"));
        await t("other-list", async () => (await OTHER.list()).keys.map((k) => k.name));
        break;
    }
    return new Response(out.join("\n"));
  },
};

// @request GET /empty
// @request GET /setup
// @request GET /shape
// @request GET /prefix
// @request GET /delimiter
// @request GET /pages
// @request GET /start-after
// @request GET /include
// @request GET /other
// R2 list: order, prefixes, delimiters, limits and cursors, startAfter,
// what `include` adds to listed objects, and buckets kept apart. Cursors
// are shown as they are: wrangler dev's are base64 of the last key passed.
const out = [];
const t = async (name, f) => {
  try {
    out.push(`${name}: ${JSON.stringify(await f())}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
  }
};
// A list result with its keys, prefixes, flag and cursor.
const brief = (r) => [r.objects.map((o) => o.key), r.delimitedPrefixes, r.truncated, r.cursor ?? "-"];
const keys = [
  "apple", "Apple", "APPLE", "banana", "b", "ba", "bb",
  "10", "9", "1", "01", "_x", "-y", "~z", " sp",
  "é", "e", "f", "ё", "日本", "🐴", "z", "\uFF21", "\uE000",
  "dir/a", "dir/b", "dir/sub/c", "dir/sub/d", "dir/sub/deeper/e", "dir/", "dir//double",
  "dirt", "dir-x", "logs/2024/01/a", "logs/2024/02/b", "logs/2025/01/c", "logs/readme",
  "p:a", "p:b", "p:c:d",
];

export default {
  async fetch(req, env) {
    out.length = 0;
    const { BUCKET, OTHER } = env;
    switch (new URL(req.url).pathname) {
      case "/empty":
        await t("list", () => BUCKET.list());
        await t("keys", async () => Object.keys(await BUCKET.list()));
        await t("prefix", () => BUCKET.list({ prefix: "a" }));
        await t("delimiter", () => BUCKET.list({ delimiter: "/" }));
        await t("limit", () => BUCKET.list({ limit: 1 }));
        await t("undefined-options", () => BUCKET.list(undefined));
        await t("empty-options", () => BUCKET.list({}));
        break;
      case "/setup":
        for (const k of keys) await BUCKET.put(k, `value of ${k}`);
        await BUCKET.put("meta/both", "m", {
          httpMetadata: { contentType: "text/plain", cacheControl: "no-cache", cacheExpiry: new Date("2031-05-06T07:08:09.000Z") },
          customMetadata: { tag: "one", n: "1" },
        });
        await BUCKET.put("meta/http", "mm", { httpMetadata: { contentLanguage: "de" } });
        await BUCKET.put("meta/custom", "mmm", { customMetadata: { only: "custom" } });
        await BUCKET.put("meta/none", "mmmm");
        await t("count", async () => (await BUCKET.list()).objects.length);
        break;
      case "/shape":
        await t("result-keys", async () => Object.keys(await BUCKET.list({ limit: 2 })));
        await t("result-keys-complete", async () => Object.keys(await BUCKET.list({ prefix: "meta/" })));
        await t("order", async () => (await BUCKET.list()).objects.map((o) => o.key));
        await t("object-keys", async () => Object.keys((await BUCKET.list({ prefix: "meta/both" })).objects[0]));
        await t("object-types", async () => {
          const o = (await BUCKET.list({ prefix: "meta/both" })).objects[0];
          return [o.constructor.name, Object.keys(o).map((k) => [k, typeof o[k]]), typeof o.writeHttpMetadata, "body" in o];
        });
        await t("object", async () => {
          const o = (await BUCKET.list({ prefix: "meta/both" })).objects[0];
          return [o.key, o.size, o.etag, o.httpEtag, o.checksums.toJSON(), o.httpMetadata, o.customMetadata, o.range, o.storageClass, typeof o.version, o.uploaded instanceof Date];
        });
        await t("sizes", async () => (await BUCKET.list({ prefix: "meta/" })).objects.map((o) => [o.key, o.size, o.etag]));
        await t("version-matches-head", async () => {
          const o = (await BUCKET.list({ prefix: "meta/none" })).objects[0];
          const h = await BUCKET.head("meta/none");
          return [o.version === h.version, o.uploaded.getTime() === h.uploaded.getTime()];
        });
        break;
      case "/prefix":
        await t("a", async () => brief(await BUCKET.list({ prefix: "a" })));
        await t("A", async () => brief(await BUCKET.list({ prefix: "A" })));
        await t("b", async () => brief(await BUCKET.list({ prefix: "b" })));
        await t("dir", async () => brief(await BUCKET.list({ prefix: "dir" })));
        await t("dir/", async () => brief(await BUCKET.list({ prefix: "dir/" })));
        await t("dir/sub/", async () => brief(await BUCKET.list({ prefix: "dir/sub/" })));
        await t("exact", async () => brief(await BUCKET.list({ prefix: "dir/sub/c" })));
        await t("unicode", async () => brief(await BUCKET.list({ prefix: "日" })));
        await t("none", async () => brief(await BUCKET.list({ prefix: "nothing-here" })));
        await t("empty-string", async () => (await BUCKET.list({ prefix: "" })).objects.length);
        await t("percent", async () => brief(await BUCKET.list({ prefix: "%" })));
        await t("like-wildcard", async () => brief(await BUCKET.list({ prefix: "_" })));
        break;
      case "/delimiter":
        await t("root", async () => brief(await BUCKET.list({ delimiter: "/" })));
        await t("dir/", async () => brief(await BUCKET.list({ prefix: "dir/", delimiter: "/" })));
        await t("dir/sub/", async () => brief(await BUCKET.list({ prefix: "dir/sub/", delimiter: "/" })));
        await t("dir-no-slash", async () => brief(await BUCKET.list({ prefix: "dir", delimiter: "/" })));
        await t("logs/", async () => brief(await BUCKET.list({ prefix: "logs/", delimiter: "/" })));
        await t("logs/2024/", async () => brief(await BUCKET.list({ prefix: "logs/2024/", delimiter: "/" })));
        await t("colon", async () => brief(await BUCKET.list({ prefix: "p:", delimiter: ":" })));
        await t("multi-char", async () => brief(await BUCKET.list({ prefix: "logs/", delimiter: "/0" })));
        await t("limit-with-delimiter", async () => brief(await BUCKET.list({ prefix: "dir/", delimiter: "/", limit: 2 })));
        await t("pages-with-delimiter", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await BUCKET.list({ prefix: "logs/", delimiter: "/", limit: 1, cursor });
            pages.push(brief(r));
            cursor = r.truncated ? r.cursor : undefined;
          } while (cursor !== undefined && pages.length < 10);
          return pages;
        });
        await t("root-pages", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await BUCKET.list({ delimiter: "/", limit: 10, cursor });
            pages.push(brief(r));
            cursor = r.truncated ? r.cursor : undefined;
          } while (cursor !== undefined && pages.length < 10);
          return pages;
        });
        break;
      case "/pages":
        await t("limit-1", async () => brief(await BUCKET.list({ limit: 1 })));
        await t("limit-5", async () => brief(await BUCKET.list({ limit: 5 })));
        await t("limit-exact", async () => brief(await BUCKET.list({ prefix: "meta/", limit: 4 })));
        await t("limit-more", async () => brief(await BUCKET.list({ prefix: "meta/", limit: 5 })));
        await t("limit-1000", async () => brief(await BUCKET.list({ prefix: "meta/", limit: 1000 })));
        await t("cursor-type", async () => {
          const r = await BUCKET.list({ limit: 3 });
          return [typeof r.cursor, r.cursor.length > 0, r.truncated];
        });
        await t("complete-cursor", async () => {
          const r = await BUCKET.list({ prefix: "meta/" });
          return [r.truncated, "cursor" in r, r.cursor];
        });
        await t("page-all", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await BUCKET.list({ limit: 7, cursor });
            pages.push([r.objects.map((o) => o.key), r.truncated, typeof r.cursor]);
            cursor = r.truncated ? r.cursor : undefined;
          } while (cursor !== undefined && pages.length < 20);
          return pages;
        });
        await t("page-prefix", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await BUCKET.list({ prefix: "dir/", limit: 2, cursor });
            pages.push([r.objects.map((o) => o.key), r.truncated]);
            cursor = r.truncated ? r.cursor : undefined;
          } while (cursor !== undefined && pages.length < 20);
          return pages;
        });
        await t("cursor-values", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await BUCKET.list({ limit: 10, cursor });
            pages.push([r.objects.at(-1).key, r.cursor ?? "-", r.truncated]);
            cursor = r.truncated ? r.cursor : undefined;
          } while (cursor !== undefined && pages.length < 20);
          return pages;
        });
        await t("crafted-cursor", async () => brief(await BUCKET.list({ prefix: "dir/", cursor: btoa("dir/b") })));
        await t("cursor-outside-prefix", async () => brief(await BUCKET.list({ prefix: "dir/", cursor: btoa("a") })));
        await t("cursor-past-prefix", async () => brief(await BUCKET.list({ prefix: "dir/", cursor: btoa("e") })));
        await t("empty-cursor", async () => (await BUCKET.list({ cursor: "" })).objects.length);
        await t("garbage-cursor", async () => brief(await BUCKET.list({ cursor: "garbage" })));
        await t("cursor-and-start-after", async () => brief(await BUCKET.list({ prefix: "dir/", cursor: btoa("dir/a"), startAfter: "dir/sub/c" })));
        await t("cursor-reuse", async () => {
          const r = await BUCKET.list({ prefix: "dir/", limit: 2 });
          const a = await BUCKET.list({ prefix: "dir/", limit: 2, cursor: r.cursor });
          const b = await BUCKET.list({ prefix: "dir/", limit: 2, cursor: r.cursor });
          return [a.objects.map((o) => o.key), b.objects.map((o) => o.key)];
        });
        await t("cursor-sees-new-keys", async () => {
          const r = await BUCKET.list({ prefix: "dir/", limit: 2 });
          await BUCKET.put("dir/aa", "late");
          await BUCKET.put("dir/zz", "late");
          const rest = await BUCKET.list({ prefix: "dir/", cursor: r.cursor });
          await BUCKET.delete(["dir/aa", "dir/zz"]);
          return [r.objects.map((o) => o.key), rest.objects.map((o) => o.key)];
        });
        await t("pages-after-delete", async () => {
          const r = await BUCKET.list({ prefix: "p:", limit: 1 });
          await BUCKET.delete("p:b");
          const rest = await BUCKET.list({ prefix: "p:", cursor: r.cursor });
          await BUCKET.put("p:b", "value of p:b");
          return [r.objects.map((o) => o.key), rest.objects.map((o) => o.key), rest.truncated];
        });
        break;
      case "/start-after":
        await t("banana", async () => brief(await BUCKET.list({ startAfter: "banana", limit: 5 })));
        await t("between", async () => brief(await BUCKET.list({ startAfter: "dir/aaa", prefix: "dir/" })));
        await t("exact-key", async () => brief(await BUCKET.list({ startAfter: "dir/sub/c", prefix: "dir/" })));
        await t("before-prefix", async () => brief(await BUCKET.list({ startAfter: "a", prefix: "dir/" })));
        await t("after-all", async () => brief(await BUCKET.list({ startAfter: "\u{10ffff}" })));
        await t("empty-string", async () => (await BUCKET.list({ startAfter: "" })).objects.length);
        await t("with-delimiter", async () => brief(await BUCKET.list({ startAfter: "dir/b", prefix: "dir/", delimiter: "/" })));
        await t("with-delimiter-in-prefix", async () => brief(await BUCKET.list({ startAfter: "dir/sub/", prefix: "dir/", delimiter: "/" })));
        await t("with-limit-pages", async () => {
          const pages = [];
          let cursor;
          do {
            const r = await BUCKET.list({ startAfter: "logs/2024/01/a", prefix: "logs/", limit: 2, cursor });
            pages.push([r.objects.map((o) => o.key), r.truncated]);
            cursor = r.truncated ? r.cursor : undefined;
          } while (cursor !== undefined && pages.length < 10);
          return pages;
        });
        break;
      case "/include": {
        const view = (r) => r.objects.map((o) => [o.key, Object.keys(o), o.httpMetadata, o.customMetadata]);
        await t("without", async () => view(await BUCKET.list({ prefix: "meta/" })));
        await t("both", async () => view(await BUCKET.list({ prefix: "meta/", include: ["httpMetadata", "customMetadata"] })));
        await t("http", async () => view(await BUCKET.list({ prefix: "meta/", include: ["httpMetadata"] })));
        await t("custom", async () => view(await BUCKET.list({ prefix: "meta/", include: ["customMetadata"] })));
        await t("empty", async () => view(await BUCKET.list({ prefix: "meta/", include: [] })));
        await t("cache-expiry", async () => {
          const o = (await BUCKET.list({ prefix: "meta/both", include: ["httpMetadata"] })).objects[0];
          return o.httpMetadata.cacheExpiry instanceof Date;
        });
        await t("write-http-metadata", async () => {
          const o = (await BUCKET.list({ prefix: "meta/both", include: ["httpMetadata"] })).objects[0];
          const h = new Headers();
          o.writeHttpMetadata(h);
          return [...h];
        });
        await t("write-http-metadata-without", async () => {
          const o = (await BUCKET.list({ prefix: "meta/both" })).objects[0];
          const h = new Headers();
          o.writeHttpMetadata(h);
          return [...h];
        });
        await t("include-caps-limit", async () => {
          for (let i = 0; i < 105; i++) await BUCKET.put(`many/${String(i).padStart(3, "0")}`, "m");
          const a = await BUCKET.list({ prefix: "many/", include: ["customMetadata"] });
          const b = await BUCKET.list({ prefix: "many/", include: ["httpMetadata"], limit: 500 });
          const c = await BUCKET.list({ prefix: "many/", limit: 500 });
          const d = await BUCKET.list({ prefix: "many/", include: ["httpMetadata"], limit: 3 });
          await BUCKET.delete(Array.from({ length: 105 }, (_, i) => `many/${String(i).padStart(3, "0")}`));
          return [[a.objects.length, a.truncated, a.cursor], [b.objects.length, b.truncated], [c.objects.length, c.truncated], [d.objects.length, d.truncated, d.cursor]];
        });
        await t("bad-include", () => BUCKET.list({ include: ["bogus"] }));
        await t("include-string", () => BUCKET.list({ include: "httpMetadata" }));
        break;
      }
      case "/other":
        await t("other-empty", async () => brief(await OTHER.list()));
        await t("other-put", async () => (await OTHER.put("apple", "other apple")).key);
        await t("other-list", async () => brief(await OTHER.list()));
        await t("bucket-apple", async () => (await BUCKET.get("apple")).text());
        await t("other-apple", async () => (await OTHER.get("apple")).text());
        await t("other-get-missing", async () => OTHER.get("banana"));
        await t("other-delete", async () => {
          await OTHER.delete("apple");
          return [brief(await OTHER.list()), (await BUCKET.head("apple"))?.key];
        });
        await t("bucket-count", async () => (await BUCKET.list()).objects.length);
        break;
    }
    return new Response(out.join("\n"));
  },
};

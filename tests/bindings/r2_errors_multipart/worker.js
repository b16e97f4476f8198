// @request GET /keys
// @request GET /options
// @request GET /metadata-size
// @request GET /mp-basic
// @request GET /mp-sizes
// @request GET /mp-complete-errors
// @request GET /mp-abort
// @request GET /mp-resume-start
// @request GET /mp-resume-finish
// @request GET /mp-overwrite
// R2's checks and limits as wrangler dev words them, and multipart uploads:
// parts, completion (wrangler dev holds parts to R2's 5 MiB minimum),
// aborts, resuming across requests, and the errors of each. Upload ids and
// part etags are random: shown by type and length only.
const out = [];
const t = async (name, f) => {
  try {
    out.push(`${name}: ${JSON.stringify(await f())}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
  }
};
const MiB = 1024 * 1024;
const MIN = 5 * MiB;
const fill = (n, byte) => new Uint8Array(n).fill(byte);
const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
const md5 = async (b) => hex(await crypto.subtle.digest("MD5", b));
// A completed or fetched object without what changes from run to run.
const show = (o) =>
  o && {
    key: o.key,
    size: o.size,
    etag: o.etag,
    httpEtag: o.httpEtag,
    checksums: o.checksums.toJSON(),
    httpMetadata: o.httpMetadata,
    customMetadata: o.customMetadata,
    range: o.range,
    version: [typeof o.version, o.version.length],
    uploaded: o.uploaded instanceof Date,
  };
const part = (p) => [Object.keys(p), p.partNumber, typeof p.etag, p.etag.length, /^[A-Za-z0-9_-]+$/.test(p.etag)];

export default {
  async fetch(req, env) {
    out.length = 0;
    const { BUCKET, OTHER } = env;
    switch (new URL(req.url).pathname) {
      case "/keys": {
        const k1024 = "k".repeat(1024);
        const k1025 = "k".repeat(1025);
        const u1026 = "ж".repeat(513);
        await t("put-1024", async () => (await BUCKET.put(k1024, "ok")).size);
        await t("get-1024", async () => (await BUCKET.get(k1024)).text());
        await t("put-1025", () => BUCKET.put(k1025, "v"));
        await t("get-1025", () => BUCKET.get(k1025));
        await t("head-1025", () => BUCKET.head(k1025));
        await t("delete-1025", () => BUCKET.delete(k1025));
        await t("delete-array-1025", () => BUCKET.delete(["fine", k1025]));
        await t("put-utf8-1026-bytes", () => BUCKET.put(u1026, "v"));
        await t("put-utf8-1024-bytes", async () => (await BUCKET.put("ж".repeat(512), "v")).key.length);
        await t("list-prefix-1025", async () => (await BUCKET.list({ prefix: k1025 })).objects.length);
        await t("list-start-after-1025", async () => (await BUCKET.list({ startAfter: k1025 })).objects.length);
        await t("mp-create-1025", () => BUCKET.createMultipartUpload(k1025));
        await t("put-undefined-key", async () => (await BUCKET.put(undefined, "u")).key);
        await t("get-null-key", async () => (await BUCKET.get(null))?.key ?? null);
        await t("put-object-key", async () => (await BUCKET.put({}, "o")).key);
        await t("no-args-get", () => BUCKET.get());
        await t("no-args-put", () => BUCKET.put());
        await t("delete-no-args", () => BUCKET.delete());
        await t("delete-number-array", () => BUCKET.delete([1, 2]));
        await t("listed", async () => (await BUCKET.list()).objects.map((o) => (o.key.length > 40 ? `${o.key[0]}×${o.key.length}` : o.key)));
        break;
      }
      case "/options":
        await BUCKET.put("r", "0123456789");
        await t("limit-0", () => BUCKET.list({ limit: 0 }));
        await t("limit-1001", () => BUCKET.list({ limit: 1001 }));
        await t("limit-negative", async () => { const r = await BUCKET.list({ limit: -1 }); return [r.objects.length, r.truncated]; });
        await t("limit-fraction", async () => (await BUCKET.list({ limit: 1.5 })).objects.length);
        await t("limit-string", async () => (await BUCKET.list({ limit: "1" })).objects.length);
        await t("limit-nan", () => BUCKET.list({ limit: "x" }));
        await t("limit-1000", async () => (await BUCKET.list({ limit: 1000 })).truncated);
        await t("list-not-object", () => BUCKET.list("x"));
        await t("prefix-number", async () => (await BUCKET.list({ prefix: 1 })).objects.length);
        await t("include-number", () => BUCKET.list({ include: [1] }));
        await t("range-string-offset", async () => (await BUCKET.get("r", { range: { offset: "2" } }))?.text());
        await t("range-nan", () => BUCKET.get("r", { range: { offset: "x" } }));
        await t("range-negative-length", () => BUCKET.get("r", { range: { offset: 1, length: -1 } }));
        await t("range-negative-suffix", () => BUCKET.get("r", { range: { suffix: -2 } }));
        await t("range-length-suffix", () => BUCKET.get("r", { range: { length: 2, suffix: 2 } }));
        await t("range-offset-past", () => BUCKET.get("r", { range: { offset: 20 } }));
        await t("range-string", () => BUCKET.get("r", { range: "bytes=0-1" }));
        await t("range-fraction", async () => (await BUCKET.get("r", { range: { offset: 1.5, length: 2 } }))?.text());
        await t("get-options-string", () => BUCKET.get("r", "x"));
        await t("put-options-string", () => BUCKET.put("r2", "v", "x"));
        await t("http-metadata-string", () => BUCKET.put("r2", "v", { httpMetadata: "text/plain" }));
        await t("http-metadata-number-field", async () => (await BUCKET.put("r2", "v", { httpMetadata: { contentType: 5 } }))?.httpMetadata);
        await t("cache-expiry-string", () => BUCKET.put("r2", "v", { httpMetadata: { cacheExpiry: "2030-01-01" } }));
        await t("cache-expiry-number", async () => (await BUCKET.put("r2", "v", { httpMetadata: { cacheExpiry: 1e12 } }))?.httpMetadata);
        await t("custom-metadata-string", () => BUCKET.put("r2", "v", { customMetadata: "x" }));
        await t("custom-metadata-nested", async () => (await BUCKET.put("r2", "v", { customMetadata: { a: { b: 1 } } }))?.customMetadata);
        await t("custom-metadata-array", async () => (await BUCKET.put("r2", "v", { customMetadata: ["a", "b"] }))?.customMetadata);
        await t("custom-metadata-null-value", async () => (await BUCKET.put("r2", "v", { customMetadata: { a: null } }))?.customMetadata);
        await t("only-if-number", () => BUCKET.put("r2", "v", { onlyIf: 5 }));
        await t("two-checksums", () => BUCKET.put("r2", "v", { md5: new ArrayBuffer(16), sha256: new ArrayBuffer(32) }));
        await t("storage-class", async () => (await BUCKET.put("r2", "v", { storageClass: "Standard" }))?.storageClass);
        await t("storage-class-ia", async () => (await BUCKET.put("r2", "v", { storageClass: "InfrequentAccess" }))?.storageClass);
        await t("storage-class-bad", async () => (await BUCKET.put("r2", "v", { storageClass: "Glacier" }))?.storageClass);
        await t("ssec-key-bad", () => BUCKET.put("r2", "v", { ssecKey: "short" }));
        await t("mp-http-metadata-string", () => BUCKET.createMultipartUpload("m", { httpMetadata: "x" }));
        await t("mp-custom-metadata-string", () => BUCKET.createMultipartUpload("m", { customMetadata: "x" }));
        break;
      case "/metadata-size": {
        const size = async (customMetadata) => {
          const o = await BUCKET.put("ms", "v", { customMetadata });
          return Object.values(o.customMetadata).reduce((n, v) => n + v.length, 0);
        };
        await t("2048-ascii", () => size({ k: "v".repeat(2047) }));
        await t("2049-ascii", () => size({ k: "v".repeat(2048) }));
        await t("many-keys-2048", () => size(Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`k${String(i).padStart(3, "0")}`, "vvvv"]))));
        await t("many-keys-2049", () => size(Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`k${String(i).padStart(3, "0")}`, i ? "vvvv" : "vvvvv"]))));
        await t("latin1-1024", () => size({ é: "é".repeat(1023) }));
        await t("latin1-1025", () => size({ é: "é".repeat(1024) }));
        await t("wide-2048-bytes", () => size({ k: "ж".repeat(1023) }));
        await t("wide-2050-bytes", () => size({ k: "ж".repeat(1024) }));
        await t("mixed-wide", () => size({ k: "v".repeat(1000), w: "ж" }));
        await t("mp-too-large", async () => {
          const u = await BUCKET.createMultipartUpload("mp/meta", { customMetadata: { k: "v".repeat(3000) } });
          return typeof u.uploadId;
        });
        await t("after", async () => Object.keys((await BUCKET.head("ms"))?.customMetadata ?? {}).length);
        break;
      }
      case "/mp-basic": {
        const http = { contentType: "application/octet-stream", cacheControl: "private", cacheExpiry: new Date("2033-03-03T03:03:03.000Z") };
        const u = await BUCKET.createMultipartUpload("mp/basic", { httpMetadata: http, customMetadata: { who: "mp" } });
        await t("upload", () => [u.constructor.name, Object.keys(u), u.key, typeof u.uploadId, u.uploadId.length, /^[A-Za-z0-9_-]+$/.test(u.uploadId)]);
        await t("methods", () => ["uploadPart", "abort", "complete"].map((m) => typeof u[m]));
        await t("not-listed-yet", async () => (await BUCKET.list({ prefix: "mp/" })).objects.length);
        await t("not-gettable-yet", () => BUCKET.head("mp/basic"));
        const p1 = await u.uploadPart(1, fill(MIN, 97));
        const p2 = await u.uploadPart(2, fill(MIN, 98).buffer);
        const p3 = await u.uploadPart(3, "the tail");
        await t("parts", () => [part(p1), part(p2), part(p3), p1.etag !== p2.etag]);
        await t("still-not-listed", async () => (await BUCKET.list({ prefix: "mp/" })).objects.length);
        const done = await u.complete([p1, p2, p3]);
        await t("complete", () => [done.constructor.name, show(done)]);
        await t("etag-shape", () => [/^[0-9a-f]{32}-3$/.test(done.etag), done.httpEtag === `"${done.etag}"`]);
        await t("etag-is-md5-of-md5s", async () => {
          const md5s = await Promise.all([fill(MIN, 97), fill(MIN, 98), new TextEncoder().encode("the tail")].map((b) => crypto.subtle.digest("MD5", b)));
          const joined = new Uint8Array(48);
          md5s.forEach((m, i) => joined.set(new Uint8Array(m), i * 16));
          return done.etag === `${await md5(joined)}-3`;
        });
        await t("head", async () => show(await BUCKET.head("mp/basic")));
        await t("get", async () => {
          const o = await BUCKET.get("mp/basic");
          const b = new Uint8Array(await o.arrayBuffer());
          return [b.length, b[0], b[MIN - 1], b[MIN], b[2 * MIN - 1], new TextDecoder().decode(b.subarray(2 * MIN)), await md5(b), show(o).etag];
        });
        await t("range-across-parts", async () => {
          const o = await BUCKET.get("mp/basic", { range: { offset: MIN - 2, length: 4 } });
          return [o.range, [...new Uint8Array(await o.arrayBuffer())]];
        });
        await t("range-into-tail", async () => {
          const o = await BUCKET.get("mp/basic", { range: { offset: 2 * MIN - 1, length: 5 } });
          return [o.range, [...new Uint8Array(await o.arrayBuffer())]];
        });
        await t("suffix", async () => (await BUCKET.get("mp/basic", { range: { suffix: 4 } })).text());
        await t("listed", async () => (await BUCKET.list({ prefix: "mp/", include: ["httpMetadata", "customMetadata"] })).objects.map(show));
        await t("conditional", async () => {
          const o = await BUCKET.get("mp/basic", { onlyIf: { etagMatches: done.etag }, range: { offset: 0, length: 1 } });
          return [o.range, await o.text()];
        });
        await t("complete-again", () => u.complete([p1, p2, p3]));
        await t("upload-after-complete", () => u.uploadPart(4, "late"));
        await t("abort-after-complete", () => u.abort());
        await t("still-there", async () => (await BUCKET.head("mp/basic"))?.size);
        await t("single-part", async () => {
          const v = await BUCKET.createMultipartUpload("mp/single");
          const p = await v.uploadPart(1, "just one small part");
          const o = await v.complete([p]);
          return [o.size, o.etag, o.checksums.toJSON(), o.httpMetadata, o.customMetadata, await (await BUCKET.get("mp/single")).text()];
        });
        await t("part-types", async () => {
          const v = await BUCKET.createMultipartUpload("mp/types");
          const parts = [];
          parts.push(await v.uploadPart(1, new Blob([fill(MIN, 49)])));
          parts.push(await v.uploadPart(2, new Response(fill(MIN, 50)).body));
          parts.push(await v.uploadPart(3, new Uint8Array([51, 52]).buffer));
          const o = await v.complete(parts);
          const b = new Uint8Array(await (await BUCKET.get("mp/types")).arrayBuffer());
          return [o.size, o.etag, b[0], b[MIN], b[2 * MIN], b[2 * MIN + 1]];
        });
        await t("unknown-length-part", async () => {
          const v = await BUCKET.createMultipartUpload("mp/stream");
          const s = new ReadableStream({ start(c) { c.enqueue(new Uint8Array([1])); c.close(); } });
          return v.uploadPart(1, s);
        });
        break;
      }
      case "/mp-sizes": {
        const attempt = async (key, sizes, order) => {
          const u = await BUCKET.createMultipartUpload(key);
          const parts = [];
          for (let i = 0; i < sizes.length; i++) parts.push(await u.uploadPart(i + 1, fill(sizes[i], 65 + i)));
          try {
            const o = await u.complete((order ?? parts.map((_, i) => i)).map((i) => parts[i]));
            return ["completed", o.size, o.etag];
          } catch (e) {
            return [`threw ${e.constructor.name}: ${e.message}`, (await BUCKET.head(key))?.size ?? null];
          }
        };
        await t("two-small", () => attempt("s/two-small", [10, 10]));
        await t("small-then-min", () => attempt("s/small-then-min", [10, MIN]));
        await t("min-minus-1", () => attempt("s/min-minus-1", [MIN - 1, 10]));
        await t("min-then-small", () => attempt("s/min-then-small", [MIN, 10]));
        await t("min-then-empty", () => attempt("s/min-then-empty", [MIN, 0]));
        await t("min-min", () => attempt("s/min-min", [MIN, MIN]));
        await t("unequal", () => attempt("s/unequal", [MIN + 1, MIN, 5]));
        await t("last-bigger", () => attempt("s/last-bigger", [MIN, MIN + 1]));
        await t("out-of-order", () => attempt("s/out-of-order", [MIN, MIN], [1, 0]));
        await t("out-of-order-small-first", () => attempt("s/ooo-small", [MIN, 7], [1, 0]));
        await t("empty-single", () => attempt("s/empty-single", [0]));
        await t("subset", () => attempt("s/subset", [MIN, 3, 4], [0, 2]));
        await t("out-of-order-content", async () => {
          const o = await BUCKET.get("s/out-of-order", { range: { offset: MIN - 1, length: 2 } });
          return o && [...new Uint8Array(await o.arrayBuffer())];
        });
        await t("retry-after-failed-complete", async () => {
          const u = await BUCKET.createMultipartUpload("s/retry");
          const a = await u.uploadPart(1, "aaa");
          const b = await u.uploadPart(2, "bbb");
          let first;
          try {
            await u.complete([a, b]);
          } catch (e) {
            first = e.message;
          }
          const o = await u.complete([a]);
          return [first, o.size, await (await BUCKET.get("s/retry")).text()];
        });
        await t("listed", async () => (await BUCKET.list({ prefix: "s/" })).objects.map((o) => [o.key, o.size]));
        break;
      }
      case "/mp-complete-errors": {
        const u = await BUCKET.createMultipartUpload("e/one");
        const p1 = await u.uploadPart(1, "first");
        const p1b = await u.uploadPart(1, "first, again");
        await t("reupload-new-etag", () => p1.etag !== p1b.etag);
        await t("wrong-etag", () => u.complete([{ partNumber: 1, etag: "not-the-etag" }]));
        await t("stale-etag", () => u.complete([p1]));
        await t("missing-part", () => u.complete([{ partNumber: 2, etag: p1b.etag }]));
        await t("duplicate-part", () => u.complete([p1b, p1b]));
        await t("bad-part-shape", () => u.complete([{ part: 1, etag: p1b.etag }]));
        await t("not-array", () => u.complete(p1b));
        await t("part-number-0", () => u.uploadPart(0, "x"));
        await t("part-number-10001", () => u.uploadPart(10001, "x"));
        await t("part-number-10000", async () => part(await u.uploadPart(10000, "x")));
        await t("part-number-string", async () => part(await u.uploadPart("2", "x")));
        await t("part-number-nan", () => u.uploadPart("x", "x"));
        await t("part-value-number", () => u.uploadPart(3, 5));
        const v = await BUCKET.createMultipartUpload("e/two");
        const q = await v.uploadPart(1, "second upload");
        await t("other-upload-etag", () => u.complete([q]));
        await t("empty-list", async () => {
          const o = await u.complete([]);
          return [o.size, o.etag, await (await BUCKET.get("e/one")).text()];
        });
        await t("complete-after-complete", () => u.complete([p1b]));
        await t("uses-latest-part", async () => {
          const o = await v.complete([q]);
          return [o.size, await (await BUCKET.get("e/two")).text()];
        });
        await t("resume-unknown-id", async () => {
          const w = BUCKET.resumeMultipartUpload("e/three", "no-such-upload");
          return [w.key, w.uploadId];
        });
        await t("unknown-id-upload-part", () => BUCKET.resumeMultipartUpload("e/three", "no-such-upload").uploadPart(1, "x"));
        await t("unknown-id-complete", () => BUCKET.resumeMultipartUpload("e/three", "no-such-upload").complete([]));
        await t("unknown-id-abort", () => BUCKET.resumeMultipartUpload("e/three", "no-such-upload").abort());
        await t("resume-no-id", () => BUCKET.resumeMultipartUpload("e/three"));
        await t("wrong-key-upload-part", async () => {
          const w = await BUCKET.createMultipartUpload("e/four");
          return BUCKET.resumeMultipartUpload("e/other", w.uploadId).uploadPart(1, "x");
        });
        await t("wrong-key-complete", async () => {
          const w = await BUCKET.createMultipartUpload("e/five");
          const p = await w.uploadPart(1, "x");
          return BUCKET.resumeMultipartUpload("e/other", w.uploadId).complete([p]);
        });
        await t("listed", async () => (await BUCKET.list({ prefix: "e/" })).objects.map((o) => [o.key, o.size]));
        break;
      }
      case "/mp-abort": {
        const u = await BUCKET.createMultipartUpload("a/one");
        const p = await u.uploadPart(1, "part before abort");
        await t("abort", () => u.abort());
        await t("abort-again", () => u.abort());
        await t("upload-after-abort", () => u.uploadPart(2, "late part"));
        await t("complete-after-abort", () => u.complete([p]));
        await t("nothing-stored", () => BUCKET.head("a/one"));
        await t("resume-aborted", () => BUCKET.resumeMultipartUpload("a/one", u.uploadId).uploadPart(1, "x"));
        await t("abort-untouched-upload", async () => {
          const v = await BUCKET.createMultipartUpload("a/two");
          return v.abort();
        });
        await t("abort-keeps-existing-object", async () => {
          await BUCKET.put("a/three", "existing");
          const v = await BUCKET.createMultipartUpload("a/three");
          await v.uploadPart(1, "replacement");
          await v.abort();
          return (await BUCKET.get("a/three")).text();
        });
        await t("listed", async () => (await BUCKET.list({ prefix: "a/" })).objects.map((o) => o.key));
        break;
      }
      case "/mp-resume-start": {
        const u = await BUCKET.createMultipartUpload("r/resumed", { customMetadata: { step: "start" }, httpMetadata: new Headers({ "content-type": "text/plain" }) });
        const p1 = await u.uploadPart(1, fill(MIN, 120));
        await OTHER.put("state", JSON.stringify({ uploadId: u.uploadId, p1 }));
        await t("started", () => [u.key, part(p1)]);
        await t("other-bucket", async () => (await OTHER.list()).objects.map((o) => o.key));
        break;
      }
      case "/mp-resume-finish": {
        const { uploadId, p1 } = await (await OTHER.get("state")).json();
        const u = BUCKET.resumeMultipartUpload("r/resumed", uploadId);
        await t("resumed", () => [u.constructor.name, Object.keys(u), u.key, u.uploadId === uploadId]);
        const p2 = await u.uploadPart(2, "the end");
        await t("part-2", () => part(p2));
        await t("complete", async () => show(await u.complete([p1, p2])));
        await t("get", async () => {
          const o = await BUCKET.get("r/resumed");
          const b = new Uint8Array(await o.arrayBuffer());
          return [b.length, b[0], b[MIN - 1], new TextDecoder().decode(b.subarray(MIN)), await md5(b), o.httpMetadata, o.customMetadata];
        });
        await t("resume-after-complete", () => BUCKET.resumeMultipartUpload("r/resumed", uploadId).uploadPart(3, "x"));
        break;
      }
      case "/mp-overwrite":
        await t("put-over-multipart", async () => {
          const o = await BUCKET.put("mp/basic", "small now");
          return [o.size, o.etag, await (await BUCKET.get("mp/basic")).text()];
        });
        await t("multipart-over-put", async () => {
          await BUCKET.put("mp/over", "plain");
          const u = await BUCKET.createMultipartUpload("mp/over");
          const o = await u.complete([await u.uploadPart(1, "multi")]);
          return [o.etag, await (await BUCKET.get("mp/over")).text()];
        });
        await t("delete-multipart", async () => {
          await BUCKET.delete(["r/resumed", "mp/types"]);
          return [await BUCKET.head("r/resumed"), await BUCKET.get("mp/types")];
        });
        await t("two-uploads-same-key", async () => {
          const a = await BUCKET.createMultipartUpload("mp/race");
          const b = await BUCKET.createMultipartUpload("mp/race");
          const pa = await a.uploadPart(1, "from a");
          const pb = await b.uploadPart(1, "from b");
          await b.complete([pb]);
          await a.complete([pa]);
          return [a.uploadId !== b.uploadId, await (await BUCKET.get("mp/race")).text()];
        });
        await t("listed", async () => (await BUCKET.list()).objects.map((o) => [o.key.length > 40 ? `${o.key[0]}×${o.key.length}` : o.key, o.size]));
        break;
    }
    return new Response(out.join("\n"));
  },
};

// @request GET /put
// @request POST /upload a request body, uploaded as it came
// @request GET /get
// @request GET /meta
// @request GET /object
// @request GET /range
// @request GET /keys
// @request GET /delete
// R2: values of every type in and out, the body readers, HTTP and custom
// metadata, the object's own shape, ranges, odd keys, deletes. What differs
// between runs (version, uploaded) is shown by its type only.
const out = [];
const t = async (name, f) => {
  try {
    out.push(`${name}: ${JSON.stringify(await f())}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
  }
};
// An R2Object without what changes from run to run.
const show = (o) =>
  o === null || o === undefined
    ? o
    : {
        key: o.key,
        size: o.size,
        etag: o.etag,
        httpEtag: o.httpEtag,
        checksums: o.checksums.toJSON(),
        httpMetadata: o.httpMetadata,
        customMetadata: o.customMetadata,
        range: o.range,
        storageClass: o.storageClass,
        version: [typeof o.version, o.version.length],
        uploaded: o.uploaded instanceof Date,
      };
const bytes = async (b) => [...new Uint8Array(await b)];

export default {
  async fetch(req, env) {
    out.length = 0;
    const { BUCKET, OTHER } = env;
    switch (new URL(req.url).pathname) {
      case "/put":
        await t("type", () => [typeof BUCKET, Object.prototype.toString.call(BUCKET), typeof BUCKET.get, typeof BUCKET.put, typeof BUCKET.createMultipartUpload]);
        await t("string", async () => show(await BUCKET.put("str", "hello")));
        await t("buffer", async () => show(await BUCKET.put("buf", new Uint8Array([0, 1, 2, 255]).buffer)));
        await t("uint8", async () => show(await BUCKET.put("u8", new Uint8Array([104, 105, 33]))));
        await t("subarray", async () => show(await BUCKET.put("sub", new Uint8Array([1, 2, 3, 4, 5, 6]).subarray(2, 5))));
        await t("dataview", async () => show(await BUCKET.put("dv", new DataView(new Uint8Array([7, 8, 9, 10]).buffer, 1, 2))));
        await t("fixed-stream", async () => {
          const { readable, writable } = new FixedLengthStream(12);
          const w = writable.getWriter();
          const p = BUCKET.put("fls", readable);
          await w.write(new TextEncoder().encode("fixed "));
          await w.write(new TextEncoder().encode("len"));
          await w.write(new TextEncoder().encode("gth"));
          await w.close();
          return show(await p);
        });
        await t("request-body", async () => show(await BUCKET.put("reqbody", new Request("http://x/", { method: "POST", body: "from a request" }).body)));
        await t("response-body", async () => show(await BUCKET.put("resbody", new Response("from a response").body)));
        await t("unknown-length-stream", async () => {
          const s = new ReadableStream({
            start(c) {
              c.enqueue(new TextEncoder().encode("abc"));
              c.close();
            },
          });
          return show(await BUCKET.put("nolen", s));
        });
        await t("blob", async () => show(await BUCKET.put("blob", new Blob(["blob ", "parts"], { type: "text/x-blob" }))));
        await t("null", async () => show(await BUCKET.put("null", null)));
        await t("empty", async () => show(await BUCKET.put("empty", "")));
        await t("undefined", async () => show(await BUCKET.put("undef")));
        await t("json-text", async () => show(await BUCKET.put("json", JSON.stringify({ a: [1, 2], b: "ü" }))));
        await t("unicode-value", async () => show(await BUCKET.put("uni", "žluťoučký kůň 🐴")));
        await t("number", async () => show(await BUCKET.put("num", 42)));
        await t("object", async () => show(await BUCKET.put("obj", { a: 1 })));
        await t("nolen-after", async () => show(await BUCKET.head("nolen")));
        break;
      case "/upload":
        await t("incoming-body", async () => show(await BUCKET.put("incoming", req.body)));
        await t("incoming-read", async () => (await BUCKET.get("incoming")).text());
        break;
      case "/get":
        await t("text", async () => (await BUCKET.get("str")).text());
        await t("json", async () => (await BUCKET.get("json")).json());
        await t("bad-json", async () => (await BUCKET.get("str")).json());
        await t("arrayBuffer", async () => {
          const b = await (await BUCKET.get("buf")).arrayBuffer();
          return [b instanceof ArrayBuffer, b.byteLength, [...new Uint8Array(b)]];
        });
        await t("bytes", async () => {
          const o = await BUCKET.get("u8");
          const b = await o.bytes();
          return [b instanceof Uint8Array, [...b]];
        });
        await t("blob", async () => {
          const b = await (await BUCKET.get("blob")).blob();
          return [b instanceof Blob, b.size, b.type, await b.text()];
        });
        await t("blob-typed", async () => {
          await BUCKET.put("typed", "<p>hi</p>", { httpMetadata: { contentType: "text/html" } });
          const b = await (await BUCKET.get("typed")).blob();
          return [b.size, b.type, await b.text()];
        });
        await t("body-stream", async () => {
          const o = await BUCKET.get("fls");
          return [o.body instanceof ReadableStream, o.bodyUsed, await new Response(o.body).text(), o.bodyUsed];
        });
        await t("read-twice", async () => {
          const o = await BUCKET.get("str");
          await o.text();
          return o.text();
        });
        await t("subarray", async () => bytes((await BUCKET.get("sub")).arrayBuffer()));
        await t("dataview", async () => bytes((await BUCKET.get("dv")).arrayBuffer()));
        await t("request-body", async () => (await BUCKET.get("reqbody")).text());
        await t("response-body", async () => (await BUCKET.get("resbody")).text());
        await t("null", async () => {
          const o = await BUCKET.get("null");
          return [o.size, await o.text()];
        });
        await t("empty", async () => {
          const o = await BUCKET.get("empty");
          return [o.size, await o.arrayBuffer().then((b) => b.byteLength)];
        });
        await t("undefined", async () => (await BUCKET.get("undef"))?.size);
        await t("unicode-value", async () => (await BUCKET.get("uni")).text());
        await t("number", async () => (await BUCKET.get("num"))?.text());
        await t("missing", () => BUCKET.get("nope"));
        await t("missing-head", () => BUCKET.head("nope"));
        await t("as-response", async () => {
          const o = await BUCKET.get("str");
          const r = new Response(o.body, { headers: { etag: o.httpEtag } });
          return [r.headers.get("etag"), await r.text()];
        });
        break;
      case "/meta": {
        const http = {
          contentType: "application/json; charset=utf-8",
          contentLanguage: "cs-CZ",
          contentDisposition: 'attachment; filename="a.json"',
          contentEncoding: "identity",
          cacheControl: "max-age=60",
          cacheExpiry: new Date("2030-01-02T03:04:05.000Z"),
        };
        await t("put-object-form", async () => show(await BUCKET.put("m1", "{}", { httpMetadata: http, customMetadata: { owner: "ann", "x-y": "z z", empty: "", ünï: "cødé" } })));
        await t("get-object-form", async () => {
          const o = await BUCKET.get("m1");
          return [o.httpMetadata, o.customMetadata, Object.keys(o.httpMetadata), o.httpMetadata.cacheExpiry instanceof Date];
        });
        await t("head-object-form", async () => {
          const o = await BUCKET.head("m1");
          return [o.httpMetadata, o.customMetadata];
        });
        await t("put-headers-form", async () => {
          const h = new Headers({
            "Content-Type": "text/csv",
            "Content-Language": "en",
            "Content-Disposition": "inline",
            "Content-Encoding": "gzip",
            "Cache-Control": "no-store",
            Expires: "Wed, 21 Oct 2037 07:28:00 GMT",
            "X-Other": "ignored",
          });
          return show(await BUCKET.put("m2", "a,b", { httpMetadata: h }));
        });
        await t("get-headers-form", async () => {
          const o = await BUCKET.get("m2");
          return [o.httpMetadata, o.httpMetadata.cacheExpiry instanceof Date, await o.text()];
        });
        await t("write-http-metadata", async () => {
          const o = await BUCKET.head("m1");
          const h = new Headers({ "x-keep": "1", "content-type": "overwritten/please" });
          const r = o.writeHttpMetadata(h);
          return [r, [...h]];
        });
        await t("write-http-metadata-headers-form", async () => {
          const o = await BUCKET.get("m2");
          const h = new Headers();
          o.writeHttpMetadata(h);
          return [...h];
        });
        await t("write-http-metadata-none", async () => {
          const h = new Headers({ a: "b" });
          (await BUCKET.head("str")).writeHttpMetadata(h);
          return [...h];
        });
        await t("write-http-metadata-object", async () => {
          const o = await BUCKET.head("m1");
          return o.writeHttpMetadata({});
        });
        await t("partial-http", async () => {
          await BUCKET.put("m3", "x", { httpMetadata: { contentType: "image/png" } });
          return (await BUCKET.head("m3")).httpMetadata;
        });
        await t("no-metadata", async () => {
          const o = await BUCKET.head("str");
          return [o.httpMetadata, o.customMetadata];
        });
        await t("unknown-http-field", async () => {
          await BUCKET.put("m4", "x", { httpMetadata: { contentType: "a/b", bogus: "x" } });
          return (await BUCKET.head("m4")).httpMetadata;
        });
        await t("custom-number", async () => {
          await BUCKET.put("m5", "x", { customMetadata: { n: 5 } });
          return (await BUCKET.head("m5")).customMetadata;
        });
        await t("overwrite-drops-metadata", async () => {
          await BUCKET.put("m1", "new");
          const o = await BUCKET.get("m1");
          return [o.httpMetadata, o.customMetadata, await o.text()];
        });
        break;
      }
      case "/object": {
        const put = await BUCKET.put("shape", "shape!", { customMetadata: { k: "v" } });
        const got = await BUCKET.get("shape");
        const head = await BUCKET.head("shape");
        const desc = (o) => [
          Object.keys(o),
          Object.keys(o).map((k) => typeof o[k]),
          ["writeHttpMetadata", "body", "bodyUsed", "text", "json", "arrayBuffer", "blob", "bytes"].map((k) => typeof o[k]),
        ];
        await t("put-shape", () => desc(put));
        await t("get-shape", () => desc(got));
        await t("head-shape", () => desc(head));
        await t("get-own-property", () => Object.hasOwn(got, "key"));
        await t("body-is-own", () => Object.hasOwn(got, "body"));
        await t("get", () => show(got));
        await t("etag", () => [put.etag, put.httpEtag, put.httpEtag === `"${put.etag}"`, got.etag === put.etag, head.etag === put.etag]);
        await t("version-same", () => [put.version === got.version, got.version === head.version, /^[0-9a-f]+$/.test(got.version)]);
        await t("uploaded", () => [put.uploaded instanceof Date, put.uploaded.getTime() === got.uploaded.getTime(), Math.abs(Date.now() - got.uploaded.getTime()) < 60000]);
        await t("checksums", () => {
          const c = got.checksums;
          return [Object.keys(c), c.md5 instanceof ArrayBuffer, [...new Uint8Array(c.md5)].map((b) => b.toString(16).padStart(2, "0")).join(""), c.sha1, c.sha256, c.toJSON(), typeof c.toJSON];
        });
        await t("json-keys", () => Object.keys(JSON.parse(JSON.stringify(got))));
        await t("json-keys-head", () => Object.keys(JSON.parse(JSON.stringify(head))));
        await t("storage-class", () => [put.storageClass, got.storageClass, head.storageClass]);
        await t("range-head", () => head.range);
        await t("range-put", () => put.range);
        await t("range-get", () => got.range);
        await t("ssec", () => [got.ssecKeyMd5, "ssecKeyMd5" in got]);
        await t("size", async () => [(await BUCKET.head("uni")).size, (await BUCKET.head("buf")).size, (await BUCKET.head("empty")).size]);
        await t("md5-empty", async () => (await BUCKET.head("empty")).checksums.toJSON());
        break;
      }
      case "/range": {
        await BUCKET.put("r", "0123456789");
        const rg = async (range) => {
          const o = await BUCKET.get("r", { range });
          return o === null ? null : [o.range, o.size, await o.text()];
        };
        await t("offset-length", () => rg({ offset: 2, length: 3 }));
        await t("offset", () => rg({ offset: 7 }));
        await t("length", () => rg({ length: 4 }));
        await t("suffix", () => rg({ suffix: 3 }));
        await t("suffix-big", () => rg({ suffix: 50 }));
        await t("length-big", () => rg({ offset: 8, length: 50 }));
        await t("offset-end", () => rg({ offset: 10 }));
        await t("offset-past", () => rg({ offset: 11 }));
        await t("length-0", () => rg({ offset: 3, length: 0 }));
        await t("suffix-0", () => rg({ suffix: 0 }));
        await t("empty-object", () => rg({}));
        await t("offset-suffix", () => rg({ offset: 1, suffix: 2 }));
        await t("negative", () => rg({ offset: -1 }));
        await t("header-range", () => rg(new Headers({ Range: "bytes=1-3" })));
        await t("header-open", () => rg(new Headers({ Range: "bytes=6-" })));
        await t("header-suffix", () => rg(new Headers({ Range: "bytes=-2" })));
        await t("header-big", () => rg(new Headers({ Range: "bytes=5-100" })));
        await t("header-none", () => rg(new Headers({ "x-a": "b" })));
        await t("header-multi", () => rg(new Headers({ Range: "bytes=0-1,4-5" })));
        await t("header-bad-unit", () => rg(new Headers({ Range: "items=0-1" })));
        await t("header-inverted", () => rg(new Headers({ Range: "bytes=5-2" })));
        await t("head-range", async () => (await BUCKET.head("r")).range);
        await t("full-get-range", async () => (await BUCKET.get("r")).range);
        await t("unicode-range", async () => {
          const o = await BUCKET.get("uni", { range: { offset: 0, length: 3 } });
          return [...new Uint8Array(await o.arrayBuffer())];
        });
        await t("empty-object-range", async () => {
          const o = await BUCKET.get("empty", { range: { offset: 0 } });
          return o === null ? null : [o.range, await o.text()];
        });
        await t("missing-range", () => BUCKET.get("nope", { range: { offset: 1 } }));
        break;
      }
      case "/keys": {
        const keys = ["ключ/ü", "emoji 🐴", "a/b/c", "dir/", "dir/x", "../up", "a/../b", ".", "..", " lead and trail ", "tab\tin", "q?x=1&y=#h", "%2F", "back\\slash", "x".repeat(1024)];
        for (const k of keys) {
          await t(`put ${JSON.stringify(k.length > 40 ? k.slice(0, 8) + "…" + k.length : k)}`, async () => {
            const o = await BUCKET.put(k, `v:${k.slice(0, 10)}`);
            const g = await BUCKET.get(k);
            return [o.key === k, g.key === k, await g.text()];
          });
        }
        await t("empty-key", async () => show(await BUCKET.put("", "v")));
        await t("get-empty-key", async () => show(await BUCKET.get("")));
        await t("distinct-dir", async () => [(await BUCKET.head("dir")) === null, (await BUCKET.head("dir/"))?.key]);
        await t("number-key", async () => {
          await BUCKET.put(123, "num key");
          return [(await BUCKET.head("123"))?.key, await (await BUCKET.get(123)).text()];
        });
        await t("listed", async () => {
          const r = await BUCKET.list({ limit: 1000 });
          return r.objects.map((o) => (o.key.length > 40 ? o.key.length : o.key));
        });
        break;
      }
      case "/delete":
        await t("overwrite", async () => {
          const a = await BUCKET.put("ow", "first");
          const b = await BUCKET.put("ow", "second value");
          const g = await BUCKET.get("ow");
          return [a.etag !== b.etag, a.version !== b.version, g.version === b.version, g.size, await g.text()];
        });
        await t("delete-one", () => BUCKET.delete("ow"));
        await t("after-one", () => BUCKET.get("ow"));
        await t("delete-missing", () => BUCKET.delete("never-there"));
        await t("delete-array", () => BUCKET.delete(["str", "buf", "u8", "never-there"]));
        await t("after-array", async () => Promise.all(["str", "buf", "u8"].map((k) => BUCKET.head(k))));
        await t("delete-empty-array", () => BUCKET.delete([]));
        await t("delete-unicode", () => BUCKET.delete("ключ/ü"));
        await t("after-unicode", () => BUCKET.head("ключ/ü"));
        await t("put-after-delete", async () => {
          await BUCKET.put("ow", "again");
          return (await BUCKET.get("ow")).text();
        });
        await t("other-untouched", async () => {
          await OTHER.put("str", "other side");
          await BUCKET.delete("str");
          return [await (await OTHER.get("str")).text(), await BUCKET.head("str")];
        });
        await t("remaining", async () => (await BUCKET.list({ limit: 1000 })).objects.map((o) => (o.key.length > 40 ? o.key.length : o.key)));
        break;
    }
    return new Response(out.join("\n"));
  },
};

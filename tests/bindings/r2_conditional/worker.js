// @request GET /setup
// @request GET /get-object
// @request GET /get-headers
// @request GET /put
// @request GET /checksums
// R2 conditional requests (onlyIf as an object and as Headers) on get, put
// and head, what a failed condition returns, and checksums given on put.
// Times are taken from the object itself, so that each comparison comes out
// the same whenever it runs.
const out = [];
const t = async (name, f) => {
  try {
    out.push(`${name}: ${JSON.stringify(await f())}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
  }
};
const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
const digest = async (alg, s) => crypto.subtle.digest(alg, new TextEncoder().encode(s));
// What a conditional get gave: its body, or the object without one, or null.
const got = async (o) => {
  if (o === null) return null;
  if ("body" in o) return ["body", o.constructor.name, await o.text()];
  return ["no body", o.constructor.name, o.key, o.etag, o.size, typeof o.text, o.range ?? "-", Object.keys(o).length];
};
const PAST = new Date("2001-02-03T04:05:06.000Z");
const FUTURE = new Date("2099-02-03T04:05:06.000Z");

export default {
  async fetch(req, env) {
    out.length = 0;
    const { BUCKET } = env;
    switch (new URL(req.url).pathname) {
      case "/setup":
        await t("put", async () => (await BUCKET.put("c", "conditional body")).etag);
        await t("put-other", async () => (await BUCKET.put("d", "another")).etag);
        break;
      case "/get-object": {
        const h = await BUCKET.head("c");
        const E = h.etag;
        const at = h.uploaded.getTime();
        const g = async (onlyIf, key = "c") => got(await BUCKET.get(key, { onlyIf }));
        await t("none", () => g(undefined));
        await t("empty", () => g({}));
        await t("match", () => g({ etagMatches: E }));
        await t("match-wrong", () => g({ etagMatches: "0123456789abcdef0123456789abcdef" }));
        await t("match-quoted", () => g({ etagMatches: `"${E}"` }));
        await t("match-weak", () => g({ etagMatches: `W/"${E}"` }));
        await t("match-star", () => g({ etagMatches: "*" }));
        await t("match-list", () => g({ etagMatches: `"nope", "${E}"` }));
        await t("match-list-unquoted", () => g({ etagMatches: `nope, ${E}` }));
        await t("match-upper", () => g({ etagMatches: E.toUpperCase() }));
        await t("match-empty", () => g({ etagMatches: "" }));
        await t("none-match", () => g({ etagDoesNotMatch: E }));
        await t("none-match-wrong", () => g({ etagDoesNotMatch: "nope" }));
        await t("none-match-quoted", () => g({ etagDoesNotMatch: `"${E}"` }));
        await t("none-match-weak", () => g({ etagDoesNotMatch: `W/"${E}"` }));
        await t("none-match-star", () => g({ etagDoesNotMatch: "*" }));
        await t("before-future", () => g({ uploadedBefore: FUTURE }));
        await t("before-past", () => g({ uploadedBefore: PAST }));
        await t("before-exact", () => g({ uploadedBefore: new Date(at) }));
        await t("before-plus-1ms", () => g({ uploadedBefore: new Date(at + 1) }));
        await t("after-past", () => g({ uploadedAfter: PAST }));
        await t("after-future", () => g({ uploadedAfter: FUTURE }));
        await t("after-exact", () => g({ uploadedAfter: new Date(at) }));
        await t("after-minus-1ms", () => g({ uploadedAfter: new Date(at - 1) }));
        await t("match-and-before-past", () => g({ etagMatches: E, uploadedBefore: PAST }));
        await t("wrong-match-and-before-future", () => g({ etagMatches: "nope", uploadedBefore: FUTURE }));
        await t("none-match-and-after-future", () => g({ etagDoesNotMatch: "nope", uploadedAfter: FUTURE }));
        await t("none-match-hit-and-after-past", () => g({ etagDoesNotMatch: E, uploadedAfter: PAST }));
        await t("match-and-none-match", () => g({ etagMatches: E, etagDoesNotMatch: E }));
        await t("match-and-none-match-other", () => g({ etagMatches: E, etagDoesNotMatch: "nope" }));
        await t("all-pass", () => g({ etagMatches: E, etagDoesNotMatch: "nope", uploadedBefore: FUTURE, uploadedAfter: PAST }));
        await t("missing-key-match", () => g({ etagMatches: E }, "missing"));
        await t("missing-key-none-match", () => g({ etagDoesNotMatch: E }, "missing"));
        await t("with-range-pass", async () => got(await BUCKET.get("c", { onlyIf: { etagMatches: E }, range: { offset: 3, length: 4 } })));
        await t("with-range-fail", async () => got(await BUCKET.get("c", { onlyIf: { etagMatches: "nope" }, range: { offset: 3, length: 4 } })));
        await t("failed-object", async () => {
          const o = await BUCKET.get("c", { onlyIf: { etagDoesNotMatch: E } });
          return [Object.keys(o), o.httpEtag, o.checksums.toJSON(), o.version === h.version, o.uploaded.getTime() === at, typeof o.writeHttpMetadata, o.range];
        });
        await t("date-as-number", () => g({ uploadedBefore: at + 1 }));
        await t("date-as-string", () => g({ uploadedBefore: FUTURE.toISOString() }));
        await t("bad-etag-type", () => g({ etagMatches: 5 }));
        await t("onlyIf-string", async () => got(await BUCKET.get("c", { onlyIf: "nope" })));
        await t("head-ignores-options", async () => (await BUCKET.head("c", { onlyIf: { etagMatches: "nope" } }))?.key);
        break;
      }
      case "/get-headers": {
        const h = await BUCKET.head("c");
        const E = h.etag;
        const at = h.uploaded.getTime();
        const sec = Math.floor(at / 1000) * 1000;
        const g = async (init) => got(await BUCKET.get("c", { onlyIf: new Headers(init) }));
        await t("no-headers", () => g({}));
        await t("unrelated", () => g({ "x-a": "b" }));
        await t("if-match", () => g({ "If-Match": `"${E}"` }));
        await t("if-match-unquoted", () => g({ "If-Match": E }));
        await t("if-match-wrong", () => g({ "If-Match": '"nope"' }));
        await t("if-match-star", () => g({ "If-Match": "*" }));
        await t("if-match-list", () => g({ "If-Match": `"a", "${E}"` }));
        await t("if-match-weak", () => g({ "If-Match": `W/"${E}"` }));
        await t("if-none-match", () => g({ "If-None-Match": `"${E}"` }));
        await t("if-none-match-weak", () => g({ "If-None-Match": `W/"${E}"` }));
        await t("if-none-match-star", () => g({ "If-None-Match": "*" }));
        await t("if-none-match-wrong", () => g({ "If-None-Match": '"nope"' }));
        await t("if-none-match-list", () => g({ "If-None-Match": `"a", "${E}"` }));
        await t("if-modified-since-past", () => g({ "If-Modified-Since": PAST.toUTCString() }));
        await t("if-modified-since-future", () => g({ "If-Modified-Since": FUTURE.toUTCString() }));
        await t("if-modified-since-same-second", () => g({ "If-Modified-Since": new Date(at).toUTCString() }));
        await t("if-modified-since-second-before", () => g({ "If-Modified-Since": new Date(sec - 1000).toUTCString() }));
        await t("if-unmodified-since-future", () => g({ "If-Unmodified-Since": FUTURE.toUTCString() }));
        await t("if-unmodified-since-past", () => g({ "If-Unmodified-Since": PAST.toUTCString() }));
        await t("if-unmodified-since-same-second", () => g({ "If-Unmodified-Since": new Date(at).toUTCString() }));
        await t("if-unmodified-since-second-after", () => g({ "If-Unmodified-Since": new Date(sec + 1000).toUTCString() }));
        await t("if-match-and-unmodified-past", () => g({ "If-Match": `"${E}"`, "If-Unmodified-Since": PAST.toUTCString() }));
        await t("if-none-match-and-modified-future", () => g({ "If-None-Match": '"nope"', "If-Modified-Since": FUTURE.toUTCString() }));
        await t("bad-date", () => g({ "If-Modified-Since": "not a date" }));
        await t("iso-date", () => g({ "If-Unmodified-Since": PAST.toISOString() }));
        await t("range-and-condition", async () => {
          const headers = new Headers({ "If-Match": `"${E}"`, Range: "bytes=0-3" });
          const o = await BUCKET.get("c", { onlyIf: headers, range: headers });
          return [o.range, await o.text()];
        });
        break;
      }
      case "/put": {
        const before = await BUCKET.head("c");
        const E = before.etag;
        const p = async (key, value, onlyIf) => {
          const o = await BUCKET.put(key, value, { onlyIf });
          const now = await BUCKET.get(key);
          return [o === null ? null : [o.constructor.name, o.etag], now === null ? null : await now.text()];
        };
        await t("match-pass", () => p("c", "second body", { etagMatches: E }));
        await t("match-stale", () => p("c", "third body", { etagMatches: E }));
        await t("none-match-star-existing", () => p("c", "fourth", { etagDoesNotMatch: "*" }));
        await t("none-match-star-new", () => p("fresh", "created", { etagDoesNotMatch: "*" }));
        await t("none-match-star-again", () => p("fresh", "created again", { etagDoesNotMatch: "*" }));
        await t("match-missing-key", () => p("absent1", "x", { etagMatches: E }));
        await t("match-star-missing-key", () => p("absent2", "x", { etagMatches: "*" }));
        await t("after-missing-key", () => p("absent3", "x", { uploadedAfter: PAST }));
        await t("before-missing-key", () => p("absent4", "x", { uploadedBefore: PAST }));
        await t("none-match-missing-key", () => p("absent5", "x", { etagDoesNotMatch: E }));
        await t("before-past", () => p("d", "d2", { uploadedBefore: PAST }));
        await t("before-future", () => p("d", "d3", { uploadedBefore: FUTURE }));
        await t("after-future", () => p("d", "d4", { uploadedAfter: FUTURE }));
        await t("headers-if-none-match-star", async () => {
          const o = await BUCKET.put("d", "d5", { onlyIf: new Headers({ "If-None-Match": "*" }) });
          return [o, await (await BUCKET.get("d")).text()];
        });
        await t("headers-if-match", async () => {
          const cur = await BUCKET.head("d");
          const o = await BUCKET.put("d", "d6", { onlyIf: new Headers({ "If-Match": cur.httpEtag }) });
          return [o?.etag, await (await BUCKET.get("d")).text()];
        });
        await t("headers-if-match-wrong", async () => {
          const o = await BUCKET.put("d", "d7", { onlyIf: new Headers({ "If-Match": '"nope"' }) });
          return [o, await (await BUCKET.get("d")).text()];
        });
        await t("failed-put-keeps-object", async () => {
          const a = await BUCKET.head("d");
          await BUCKET.put("d", "d8", { onlyIf: { etagMatches: "nope" }, customMetadata: { x: "y" } });
          const b = await BUCKET.head("d");
          return [a.version === b.version, b.customMetadata];
        });
        await t("listed", async () => (await BUCKET.list()).objects.map((o) => o.key));
        break;
      }
      case "/checksums": {
        const body = "checksummed";
        const md5 = await digest("MD5", body);
        const sha1 = await digest("SHA-1", body);
        const sha256 = await digest("SHA-256", body);
        const sha384 = await digest("SHA-384", body);
        const sha512 = await digest("SHA-512", body);
        const zero = (n) => new Uint8Array(n).buffer;
        const put = async (opts) => {
          const o = await BUCKET.put("ck", body, opts);
          return [o.etag, o.checksums.toJSON()];
        };
        await t("md5-buffer", () => put({ md5 }));
        await t("md5-hex", () => put({ md5: hex(md5) }));
        await t("md5-view", () => put({ md5: new Uint8Array(md5) }));
        await t("md5-wrong", () => put({ md5: zero(16) }));
        await t("md5-wrong-hex", () => put({ md5: "00".repeat(16) }));
        await t("md5-short", () => put({ md5: zero(15) }));
        await t("md5-not-hex", () => put({ md5: "zz".repeat(16) }));
        await t("md5-uppercase-hex", () => put({ md5: hex(md5).toUpperCase() }));
        await t("sha1", () => put({ sha1 }));
        await t("sha1-hex", () => put({ sha1: hex(sha1) }));
        await t("sha1-wrong", () => put({ sha1: zero(20) }));
        await t("sha1-short", () => put({ sha1: zero(16) }));
        await t("sha256", () => put({ sha256 }));
        await t("sha256-wrong", () => put({ sha256: "ab".repeat(32) }));
        await t("sha384", () => put({ sha384 }));
        await t("sha384-wrong", () => put({ sha384: zero(48) }));
        await t("sha512", () => put({ sha512 }));
        await t("sha512-wrong", () => put({ sha512: zero(64) }));
        await t("two-checksums", () => put({ md5, sha1 }));
        await t("checksum-number", () => put({ sha1: 5 }));
        await t("wrong-keeps-old", async () => {
          try {
            await BUCKET.put("ck", "a new body", { sha256: zero(32) });
          } catch {}
          return (await BUCKET.get("ck")).text();
        });
        await t("stored-sha256", async () => {
          await BUCKET.put("ck2", body, { sha256 });
          const o = await BUCKET.get("ck2");
          const c = o.checksums;
          return [c.toJSON(), c.sha256 instanceof ArrayBuffer, hex(c.sha256), c.md5 && hex(c.md5), c.sha1 ?? null];
        });
        await t("stored-sha1-head", async () => {
          await BUCKET.put("ck3", body, { sha1: hex(sha1) });
          return (await BUCKET.head("ck3")).checksums.toJSON();
        });
        await t("listed-checksums", async () => (await BUCKET.list({ prefix: "ck" })).objects.map((o) => [o.key, o.checksums.toJSON()]));
        await t("stream-sha256", async () => {
          const o = await BUCKET.put("ck4", new Response(body).body, { sha256: hex(sha256) });
          return o.checksums.toJSON();
        });
        await t("stream-sha256-wrong", async () => BUCKET.put("ck5", new Response(body).body, { sha256: zero(32) }));
        await t("after-stream-wrong", () => BUCKET.head("ck5"));
        break;
      }
    }
    return new Response(out.join("\n"));
  },
};

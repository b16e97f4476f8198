// KV's checks and limits, as workerd words them (its own checks and its
// local KV service's answers).
export default {
  async fetch(req, env) {
    const { KV } = env;
    const out = [];
    const t = async (name, f) => {
      try {
        out.push(`${name}: ${JSON.stringify(await f())}`);
      } catch (e) {
        out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
      }
    };
    const now = Math.floor(Date.now() / 1000);
    await t("get-empty", () => KV.get(""));
    await t("get-dot", () => KV.get("."));
    await t("get-dotdot", () => KV.get(".."));
    await t("get-long", () => KV.get("x".repeat(513)));
    await t("get-512", () => KV.get("x".repeat(512)));
    await t("get-long-utf8", () => KV.get("é".repeat(257)));
    await t("put-empty", () => KV.put("", "v"));
    await t("put-long", () => KV.put("y".repeat(600), "v"));
    await t("delete-empty", () => KV.delete(""));
    await t("delete-dot", () => KV.delete("."));
    await t("cache-ttl-low", () => KV.get("k", { cacheTtl: 10 }));
    await t("cache-ttl-ok", () => KV.get("k", { cacheTtl: 30 }));
    await t("ttl-low", () => KV.put("k", "v", { expirationTtl: 30 }));
    await t("ttl-zero", () => KV.put("k", "v", { expirationTtl: 0 }));
    await t("ttl-neg", () => KV.put("k", "v", { expirationTtl: -5 }));
    await t("ttl-ok", () => KV.put("k", "v", { expirationTtl: 60 }));
    await t("exp-past", async () => {
      try {
        await KV.put("k", "v", { expiration: now - 10 });
      } catch (e) {
        return e.message.replace(String(now - 10), "PAST");
      }
    });
    await t("exp-soon", async () => {
      try {
        await KV.put("k", "v", { expiration: now + 30 });
      } catch (e) {
        return e.message.replace(String(now + 30), "SOON");
      }
    });
    await t("exp-ok", () => KV.put("k2", "v", { expiration: now + 120 }));
    await t("meta-big", () => KV.put("k", "v", { metadata: { s: "m".repeat(1100) } }));
    await t("meta-1024", () => KV.put("k", "v", { metadata: "m".repeat(1022) }));
    await t("meta-null", () => KV.put("k3", "v", { metadata: null }));
    await t("meta-null-read", () => KV.getWithMetadata("k3"));
    await t("value-object", () => KV.put("k", { a: 1 }));
    await t("value-array", () => KV.put("k", [1, 2]));
    await t("value-null", () => KV.put("k", null));
    await t("value-big", () => KV.put("k", new Uint8Array(25 * 1024 * 1024 + 1)));
    await t("list-prefix-long", () => KV.list({ prefix: "p".repeat(513) }));
    await t("list-2000", () => KV.list({ limit: 2000 }));
    await t("key-coerced", async () => {
      await KV.put(123, "num-key");
      return KV.get("123");
    });
    return new Response(out.join("\n"));
  },
};

// @request GET /fetch
// @request POST /echo hello from front
// @request GET /rpc
// @request GET /errors
// Service bindings to another Worker run beside this one: fetch() to its
// default export, JS RPC to a named entrypoint with props, values copied,
// errors arriving with their class and message.
const out = [];
const t = async (name, f) => {
  try {
    out.push(`${name}: ${JSON.stringify(await f())}`);
  } catch (e) {
    out.push(`${name}: threw ${e?.constructor?.name}: ${e?.message}`);
  }
};

export default {
  async fetch(req, env) {
    out.length = 0;
    const path = new URL(req.url).pathname;
    if (path === "/fetch") {
      await t("type", () => [typeof env.BACK, Object.prototype.toString.call(env.BACK), typeof env.BACK.fetch]);
      await t("fetch", async () => {
        const r = await env.BACK.fetch("http://back/hello?x=1", { headers: { "x-from": "front" } });
        return [r.status, r.headers.get("x-back"), await r.text()];
      });
      await t("status", async () => (await env.BACK.fetch("http://back/missing")).status);
    } else if (path === "/echo") {
      const r = await env.BACK.fetch("http://back/echo", { method: "POST", body: req.body });
      out.push(await r.text());
    } else if (path === "/rpc") {
      await t("greet", () => env.GREETER.greet("ann"));
      await t("props", () => env.GREETER.props());
      await t("values", () => env.GREETER.echo({ n: 1, list: [1, "two"], when: new Date(0), bytes: new Uint8Array([1, 2]), map: new Map([["k", "v"]]) }));
      await t("property", async () => await env.GREETER.version);
      await t("default-rpc", () => env.BACK.add(2, 3));
    } else if (path === "/errors") {
      await t("throws", () => env.GREETER.fail("bad input"));
      await t("range", () => env.GREETER.failRange());
      await t("missing", () => env.GREETER.nope());
      await t("fetch-throws", async () => (await env.BACK.fetch("http://back/throw")).status);
    }
    return new Response(out.join("\n"));
  },
};

// The Worker beside the assets in tests/assets/*: answers what the router
// gives it, and reaches the assets through env.ASSETS.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/api/")) {
      return Response.json({ worker: url.pathname, method: request.method });
    }
    if (url.pathname.startsWith("/binding-") || url.pathname === "/via-binding") {
      if (env.ASSETS === undefined) return new Response("no ASSETS binding", { status: 501 });
    }
    if (url.pathname === "/via-binding") {
      const r = await env.ASSETS.fetch(new URL("/notes.txt", request.url));
      return new Response(`${r.status} ${r.headers.get("content-type")} ${r.headers.get("x-notes")} ${await r.text()}`);
    }
    if (url.pathname === "/binding-404") {
      const r = await env.ASSETS.fetch(new URL("/nope/x", request.url));
      return new Response(`${r.status} [${await r.text()}]`);
    }
    if (url.pathname === "/binding-redirect") {
      const r = await env.ASSETS.fetch(new URL("/about.html?q=1", request.url));
      return new Response(`${r.status} ${r.headers.get("location")}`);
    }
    if (url.pathname === "/binding-head") {
      const r = await env.ASSETS.fetch(new URL("/data.json", request.url), { method: "HEAD" });
      return new Response(`${r.status} ${r.headers.get("content-type")} [${await r.text()}]`);
    }
    if (url.pathname === "/binding-request") {
      const r = await env.ASSETS.fetch(new Request(new URL("/assets/style.css", request.url), request));
      return new Response(`${r.status} ${r.headers.get("x-asset")} ${await r.text()}`);
    }
    if (url.pathname === "/binding-type") {
      return new Response(`${typeof env.ASSETS} ${typeof env.ASSETS?.fetch}`);
    }
    return new Response(`worker fallback ${request.method} ${url.pathname}`);
  },
};

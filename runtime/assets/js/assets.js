// env.ASSETS: a Fetcher whose fetch() is answered by the assets resolver in
// Rust (src/binding.rs), as the server answers requests before the Worker.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayPrototypeIncludes,
  ArrayPrototypePush,
  ObjectFreeze,
  SymbolToStringTag,
  TypeError,
} = primordials;
const { op_assets_fetch } = core.ops;
const { Request } = core.loadExtScript("ext:deno_fetch/23_request.js");
const { Response } = core.loadExtScript("ext:deno_fetch/23_response.js");

const STATUS_TEXT = {
  301: "Moved Permanently",
  302: "Found",
  303: "See Other",
  304: "Not Modified",
  307: "Temporary Redirect",
  308: "Permanent Redirect",
  404: "Not Found",
  405: "Method Not Allowed",
};

const REDIRECTS = [301, 302, 303, 307, 308];

async function send(request) {
  const headers = [];
  for (const pair of request.headers) ArrayPrototypePush(headers, [pair[0], pair[1]]);
  const r = await op_assets_fetch(request.method, request.url, headers);
  return new Response(r.body ?? null, {
    status: r.status,
    statusText: STATUS_TEXT[r.status] ?? "",
    headers: r.headers,
  });
}

class Fetcher {
  // As a service binding's fetch(): redirects are followed unless the
  // request says `redirect: "manual"`.
  async fetch(input, init) {
    let request = new Request(input, init);
    for (let hops = 0; ; hops++) {
      const response = await send(request);
      const location = response.headers.get("location");
      if (
        request.redirect !== "follow" || location === null ||
        !ArrayPrototypeIncludes(REDIRECTS, response.status)
      ) {
        return response;
      }
      if (hops === 20) throw new TypeError("Too many redirects.");
      const method = request.method === "HEAD" ? "HEAD" : "GET";
      request = new Request(new URL(location, request.url), {
        method,
        headers: request.headers,
      });
    }
  }
  get [SymbolToStringTag]() {
    return "Fetcher";
  }
}

export function assetsBinding() {
  return ObjectFreeze(new Fetcher());
}

// node:https with workerd's export names; its client is http_client.js's
// fetch() wrapper (this file follows it, see src/wrap.rs), its server
// node:http's with TLS contexts refused, the rest deno_node's.
import * as m from "node:https";
import { Server as HttpServer } from "cellhost-node:_http_server";

const client = clientFor("https:", 443);
export const { request, get } = client;
export const { Agent, globalAgent } = m;

const refuse = (what) => () => {
  throw nodeError(Error, "ERR_METHOD_NOT_IMPLEMENTED", `The ${what} method is not implemented`);
};
export class Server extends HttpServer {}
for (const what of ["addContext", "getTicketKeys", "setSecureContext", "setTicketKeys"]) {
  Server.prototype[what] = refuse(what);
}
export function createServer(options, requestListener) {
  if (!globalThis.Cloudflare?.compatibilityFlags?.enable_nodejs_http_server_modules) refuse("createServer")();
  return new Server(options, requestListener);
}
export default { ...m.default, request, get, Server, createServer };

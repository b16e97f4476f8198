// node:https with workerd's export names; its client is http_client.js's
// fetch() wrapper (this file follows it, see src/wrap.rs), its server
// node:http's with TLS contexts refused, the rest deno_node's.
import * as m from "node:https";
import { Server as HttpServer, notImplemented, serverOn } from "cellhost-node:_http_server";

const client = clientFor("https:", 443);
export const { request, get } = client;
export const { Agent, globalAgent } = m;

export class Server extends HttpServer {}
for (const what of ["addContext", "getTicketKeys", "setSecureContext", "setTicketKeys"]) {
  Server.prototype[what] = () => {
    throw notImplemented(what);
  };
}
export function createServer(options, requestListener) {
  if (!serverOn) throw notImplemented("createServer");
  return new Server(options, requestListener);
}
export default { ...m.default, request, get, Server, createServer };

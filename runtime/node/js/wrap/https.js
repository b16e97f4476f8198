// node:https with workerd's export names; its client is http_client.js's
// fetch() wrapper (this file follows it, see src/wrap.rs), the rest is
// deno_node's.
import * as m from "node:https";

const client = clientFor("https:", 443);
export const { request, get } = client;
export const { Agent, Server, createServer, globalAgent } = m;
export default { ...m.default, request, get };

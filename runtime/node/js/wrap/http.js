// node:http with workerd's export names: its client is http_client.js's
// fetch() wrapper (this file follows it, see src/wrap.rs), its server
// http_server.js's port table, the rest deno_node's.
import * as m from "node:http";
import * as server from "cellhost-node:_http_server";

const client = clientFor("http:", 80);
export const { ClientRequest, request, get } = client;
// IncomingMessage: http_client.js imports it from the same module.
export { IncomingMessage };
export const { Server, ServerResponse, _connectionListener, createServer } = server;
export const {
  Agent, METHODS, OutgoingMessage, STATUS_CODES, globalAgent, maxHeaderSize, setMaxIdleHTTPParsers,
  validateHeaderName, validateHeaderValue,
} = m;
export const { CloseEvent, MessageEvent, WebSocket } = globalThis;
// deno_node's additions workerd does not have.
const { ServerImpl: _impl, setGlobalProxyFromEnv: _proxy, ...base } = m.default;
export default {
  ...base,
  ...client,
  IncomingMessage,
  Server,
  ServerResponse,
  _connectionListener,
  createServer,
  CloseEvent,
  MessageEvent,
  WebSocket,
};

// node:http with workerd's export names; its client is http_client.js's
// fetch() wrapper (this file follows it, see src/wrap.rs), the rest is
// deno_node's.
import * as m from "node:http";

const client = clientFor("http:", 80);
export const { ClientRequest, IncomingMessage, request, get } = client;
export const {
  Agent, METHODS, OutgoingMessage, STATUS_CODES, Server, ServerResponse, _connectionListener, createServer,
  globalAgent, maxHeaderSize, setMaxIdleHTTPParsers, validateHeaderName, validateHeaderValue,
} = m;
export const { CloseEvent, MessageEvent, WebSocket } = globalThis;
export default {
  ...m.default,
  ...client,
  CloseEvent,
  MessageEvent,
  WebSocket,
};

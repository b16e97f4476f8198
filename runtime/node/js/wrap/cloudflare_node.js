// cloudflare:node: a node:http server's fetch handler (served for that
// specifier by the host's loader; see http_server.js).
export { handleAsNodeRequest, httpServerHandler } from "cellhost-node:_http_server";

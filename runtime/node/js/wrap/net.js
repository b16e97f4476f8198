// node:net as a Worker has it: outbound sockets only (as workerd, whose
// net.connect() rides on connect()). Listening is refused at once, by name;
// deno_node's server would fail later, inside a callback, and never settle.
import * as m from "node:net";
export * from "node:net";

function refuse() {
  throw new Error("net.createServer() / net.Server: listening for connections is not supported in a Worker (cellhost)");
}
export const createServer = refuse;
export class Server {
  constructor() {
    refuse();
  }
}
// The default export is deno_node's own object (node:http builds on its
// Server); only createServer is replaced there.
if (m.default) m.default.createServer = createServer;
export default m.default;

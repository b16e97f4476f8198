// What the stub modules take from deno_node's internals, which only an
// extension module can reach (registered as node:cellhost/internals in
// src/lib.rs; a Worker cannot name it: runtime/host/src/node.rs).
import { internals } from "ext:core/mod.js";

// node:http2's constants alone: the rest of deno_node's node:http2 calls ops
// a Worker has not.
export const http2Constants = {
  ...internals.cellhostLoad("ext:deno_node/internal/http2/constants.ts"),
};
export default { http2Constants };

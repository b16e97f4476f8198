// node:stream/consumers with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:stream/consumers";
export const { arrayBuffer, blob, buffer, json, text } = m;
export default m.default;

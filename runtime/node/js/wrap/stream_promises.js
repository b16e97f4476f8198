// node:stream/promises with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:stream/promises";
const added = {
  promises: { pipeline: m.pipeline, finished: m.finished },
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (m.default && !(k in m.default)) m.default[k] = added[k];
export const { promises } = added;
export const { finished, pipeline } = m;
export default m.default;

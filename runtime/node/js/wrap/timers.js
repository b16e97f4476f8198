// node:timers with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:timers";
const deprecated = (what) => () => {
  throw new Error(`${what} (deprecated in Node.js) is not supported in a Worker (cellhost)`);
};
function timeoutClass() {
  const t = m.setTimeout(() => {}, 0);
  m.clearTimeout(t);
  return t.constructor;
}
const added = {
  Timeout: timeoutClass(),
  active: deprecated("timers.active()"),
  enroll: deprecated("timers.enroll()"),
  unenroll: deprecated("timers.unenroll()"),
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (m.default && !(k in m.default)) m.default[k] = added[k];
export const { Timeout, active, enroll, unenroll } = added;
export const { clearImmediate, clearInterval, clearTimeout, promises, setImmediate, setInterval, setTimeout } = m;
export default m.default;

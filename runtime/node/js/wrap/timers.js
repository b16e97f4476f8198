// node:timers with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:timers";
function timeoutClass() {
  const t = m.setTimeout(() => {}, 0);
  m.clearTimeout(t);
  return t.constructor;
}
const Timeout = timeoutClass();
// Node's deprecated timer list API, as workerd keeps it: active() refreshes
// a Timeout, unenroll() clears one, enroll() is refused.
const added = {
  Timeout,
  active(timer) {
    if (timer instanceof Timeout) timer.refresh();
  },
  enroll() {
    throw new Error("Not implemented. Please use setTimeout() instead.");
  },
  unenroll(timer) {
    if (timer instanceof Timeout || typeof timer === "number") m.clearTimeout(timer);
  },
};
// The default export (often an object of the same functions) gets them too.
for (const k of ["active", "enroll", "unenroll"]) if (m.default && !(k in m.default)) m.default[k] = added[k];
export const { active, enroll, unenroll } = added;
export { Timeout };
export const { clearImmediate, clearInterval, clearTimeout, promises, setImmediate, setInterval, setTimeout } = m;
export default m.default;

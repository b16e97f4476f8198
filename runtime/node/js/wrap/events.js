// node:events with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:events";
const added = {
  captureRejections: m.EventEmitter.captureRejections,
  usingDomains: false,
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (m.default && !(k in m.default)) m.default[k] = added[k];
export const { captureRejections, usingDomains } = added;
export const { EventEmitter, EventEmitterAsyncResource, addAbortListener, captureRejectionSymbol, defaultMaxListeners, errorMonitor, getEventListeners, getMaxListeners, listenerCount, on, once, setMaxListeners } = m;
export default m.default;

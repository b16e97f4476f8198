// node:diagnostics_channel with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:diagnostics_channel";
const added = {
  TracingChannel: m.tracingChannel("cellhost:TracingChannel").constructor,
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (m.default && !(k in m.default)) m.default[k] = added[k];
export const { TracingChannel } = added;
export const { Channel, channel, hasSubscribers, subscribe, tracingChannel, unsubscribe } = m;
export default m.default;

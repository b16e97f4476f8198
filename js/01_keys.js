// Keys shared by the glue modules. Unregistered symbols created once while
// the snapshot is built: user code can neither name them (no Symbol.for
// entry) nor reach them (no global property holds them).

// The key the runtime passes to constructors user code must not call
// (DurableObjectState, DurableObjectId, WebSocket internals, ...).
export const KEY = Symbol("illegal constructor");
// WebSocket internals: the endpoint handed to a 101 response, and its state.
export const kTake = Symbol("ws take");
export const kState = Symbol("ws state");
// On an error: the fleet node that owns the Durable Object this node was
// refused (a refusal safe to retry there; the edge answers 503).
export const kOwner = Symbol("owner node");
// On an error: the owner a forwarded call could not get an answer from (the
// call may have run there; the edge answers 503 without claiming a refusal).
export const kUnreachable = Symbol("unreachable owner");

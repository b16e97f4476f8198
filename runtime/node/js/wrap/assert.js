// node:assert with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:assert";
export const { Assert, AssertionError, deepEqual, deepStrictEqual, doesNotMatch, doesNotReject, doesNotThrow, equal, fail, ifError, match, notDeepEqual, notDeepStrictEqual, notEqual, notStrictEqual, ok, partialDeepStrictEqual, rejects, strict, strictEqual, throws } = m;
// workerd has no CallTracker (deprecated in Node.js, DEP0173).
delete m.default.CallTracker;
export default m.default;

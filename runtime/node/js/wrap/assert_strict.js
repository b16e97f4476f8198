// node:assert/strict with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:assert/strict";
import { Assert as assertClass } from "node:assert";
const added = {
  Assert: assertClass,
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (m.default && !(k in m.default)) m.default[k] = added[k];
export const { Assert } = added;
export const { AssertionError, deepEqual, deepStrictEqual, doesNotMatch, doesNotReject, doesNotThrow, equal, fail, ifError, match, notDeepEqual, notDeepStrictEqual, notEqual, notStrictEqual, ok, partialDeepStrictEqual, rejects, strict, strictEqual, throws } = m;
export default m.default;

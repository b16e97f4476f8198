// node:path with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import * as m from "node:path";
// (See path_cwd.js, which precedes this file.)
export const { basename, delimiter, dirname, extname, format, isAbsolute, join, matchesGlob, normalize, parse, posix, relative, resolve, sep, toNamespacedPath, win32 } = m.posix;
export default m.default;

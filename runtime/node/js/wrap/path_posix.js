// node:path/posix with workerd's export names (no _makeLong); see src/wrap.rs.
import * as m from "node:path";
export const { basename, delimiter, dirname, extname, format, isAbsolute, join, matchesGlob, normalize, parse, posix, relative, resolve, sep, toNamespacedPath, win32 } = m.posix;
export default m.posix;

// node:url with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import { core } from "ext:core/mod.js";
// Registered as node:url itself (src/lib.rs): built on the script behind
// deno_node's synthetic module, which deno_core would link ahead of any loader.
const m = core.loadExtScript("ext:deno_node/url.ts");
const added = {
  toPathIfFileURL: (u) => (u instanceof URL || (u != null && typeof u === "object" && typeof u.href === "string" && typeof u.protocol === "string") ? m.fileURLToPath(u) : u),
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (!(k in (m.default ?? m))) (m.default ?? m)[k] = added[k];
export const { toPathIfFileURL } = added;
export const { URL, URLSearchParams, Url, domainToASCII, domainToUnicode, fileURLToPath, format, parse, pathToFileURL, resolve, resolveObject, urlToHttpOptions } = m;
export default m.default ?? m;

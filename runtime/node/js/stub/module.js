// node:module as workerd has it: createRequire gives a require() of the
// Node.js built-ins (each imported above by the generated table `loaded`,
// see ../../src/stub.rs); the loader internals throw
// ERR_METHOD_NOT_IMPLEMENTED.
import { notImplemented, unimplemented } from "cellhost-node:_errors";
import { builtinModules } from "cellhost-node:_names";

export { builtinModules };
export const globalPaths = [];
export const _cache = { __proto__: null };
export const _pathCache = { __proto__: null };
export const _extensions = {
  ".js": unimplemented("module._extensions.js"),
  ".json": unimplemented("module._extensions.json"),
  ".node": unimplemented("module._extensions.node"),
};
export const constants = Object.freeze({
  __proto__: null,
  compileCacheStatus: Object.freeze({ __proto__: null, FAILED: 0, ENABLED: 1, ALREADY_ENABLED: 2, DISABLED: 3 }),
});

const PREFIX_ONLY = ["sqlite", "test"];

export function isBuiltin(specifier) {
  const s = `${specifier}`;
  if (s.startsWith("node:")) {
    const name = s.slice(5);
    return builtinModules.includes(name) || PREFIX_ONLY.includes(name);
  }
  return builtinModules.includes(s);
}

export function createRequire(path) {
  const p = `${path}`;
  if (!p.startsWith("/") && !p.startsWith("file:")) {
    const e = new TypeError(
      `The argument 'path' must be a file URL object, a file URL string, or an absolute path string. Received '${p}'`,
    );
    e.code = "ERR_INVALID_ARG_VALUE";
    throw e;
  }
  function require(specifier) {
    const s = `${specifier}`;
    const name = s.startsWith("node:") ? s.slice(5) : PREFIX_ONLY.includes(s) ? null : s;
    if (name === "module") return Module;
    const ns = name === null ? undefined : loaded[name];
    if (ns === undefined) throw new Error(`No such module "${s}".`);
    return ns.default ?? ns;
  }
  require.resolve = unimplemented("module.createRequire.resolve");
  require.resolve.paths = unimplemented("module.createRequire.resolve.paths");
  require.cache = { __proto__: null };
  require.extensions = _extensions;
  require.main = undefined;
  return require;
}

export function enableCompileCache() {}
export function flushCompileCache() {}
export function getCompileCacheDir() {
  return undefined;
}
export function getSourceMapsSupport() {
  return Object.freeze({ __proto__: null, enabled: false, nodeModules: false, generatedCode: false });
}
export const register = unimplemented("module.register");
export const registerHooks = unimplemented("module.registerHooks");
export const runMain = unimplemented("module.runMain");
export const syncBuiltinESMExports = unimplemented("module.syncBuiltinESMExports");
export const wrap = unimplemented("module.wrap");
export const _debug = unimplemented("module._debug");
export const _findPath = unimplemented("module._findPath");
export const _initPaths = unimplemented("module._initPaths");
export const _load = unimplemented("module._load");
export const _preloadModules = unimplemented("module._preloadModules");
export const _resolveFilename = unimplemented("module._resolveFilename");
export const _resolveLookupPaths = unimplemented("module._resolveLookupPaths");
export const _nodeModulePaths = unimplemented("module._nodeModulePaths");
export const findSourceMap = unimplemented("module.findSourceMap");
export const findPackageJSON = unimplemented("module.findPackageJSON");
export const setSourceMapsSupport = unimplemented("module.setSourceMapsSupport");
export const stripTypeScriptTypes = unimplemented("module.stripTypeScriptTypes");
export function SourceMap() {
  throw notImplemented("module.SourceMap");
}
export function Module() {
  throw notImplemented("module.Module");
}
Object.assign(Module, {
  register, constants, enableCompileCache, findPackageJSON, flushCompileCache, getCompileCacheDir,
  stripTypeScriptTypes, findSourceMap, SourceMap, getSourceMapsSupport, setSourceMapsSupport, createRequire,
  builtinModules, globalPaths, isBuiltin, runMain, syncBuiltinESMExports, wrap, registerHooks, _cache, _debug,
  _extensions, _findPath, _initPaths, _load, _pathCache, _preloadModules, _resolveFilename, _resolveLookupPaths,
  _nodeModulePaths, Module,
});
export default Module;

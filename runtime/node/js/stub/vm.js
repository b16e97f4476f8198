// node:vm as workerd has it: a Worker compiles no code at run time, so a
// Script can be made but not run; contexts are plain objects.
import { Buffer } from "node:buffer";
import { notImplemented, unimplemented, validateObject, validateString } from "cellhost-node:_errors";

export const constants = Object.freeze({
  __proto__: null,
  USE_MAIN_CONTEXT_DEFAULT_LOADER: Symbol("vm_dynamic_import_main_context_default"),
  DONT_CONTEXTIFY: Symbol("vm_context_no_contextify"),
});

export function isContext(object) {
  if (object === null || typeof object !== "object") throw new TypeError(`The "object" argument must be of type object.`);
  return false;
}

export class Script {
  cachedDataRejected = undefined;
  cachedDataProduced = undefined;
  cachedData = undefined;
  sourceMapURL = undefined;
  constructor(code, options = {}) {
    if (typeof options !== "string") validateObject(options, "options");
  }
  createCachedData() {
    return Buffer.alloc(0);
  }
}
Script.prototype.runInThisContext = unimplemented("runInThisContext");
Script.prototype.runInContext = unimplemented("runInThisContext");
Script.prototype.runInNewContext = unimplemented("runInThisContext");

export function createContext(contextObject = {}) {
  return contextObject;
}
export function createScript(code, options) {
  return new Script(code, options);
}
export const runInContext = unimplemented("runInThisContext");
export const runInNewContext = unimplemented("runInThisContext");
export const runInThisContext = unimplemented("runInThisContext");
export function compileFunction(code) {
  validateString(code, "code");
  throw notImplemented("compileFunction");
}
export const measureMemory = unimplemented("measureMemory");

export default {
  Script, createContext, createScript, runInContext, runInNewContext, runInThisContext, isContext,
  compileFunction, measureMemory, constants,
};

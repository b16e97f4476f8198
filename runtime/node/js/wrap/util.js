// node:util with workerd's export names (a wrapper over deno_node's module;
// see src/wrap.rs). Generated from workerd 1.20261117's namespace, additions by hand.
import { core } from "ext:core/mod.js";
// Registered as node:util itself (src/lib.rs): built on the script behind
// deno_node's synthetic module, which deno_core would link ahead of any loader.
const m = core.loadExtScript("ext:deno_node/util.ts");
import { Buffer as NodeBuffer } from "node:buffer";
import * as utilTypes from "node:util/types";
// workerd keeps these names and refuses the calls.
const notImplemented = (what) => () => {
  const e = new Error(`The ${what} method is not implemented`);
  e.code = "ERR_METHOD_NOT_IMPLEMENTED";
  throw e;
};
const added = {
  _errnoException: notImplemented("_errnoException"),
  _exceptionWithHostPort: notImplemented("_exceptionWithHostPort"),
  getCallSite: m.getCallSites,
  isBoolean: (v) => typeof v === "boolean",
  isBuffer: (v) => NodeBuffer.isBuffer(v),
  isDate: (v) => utilTypes.isDate(v),
  isError: (v) => utilTypes.isNativeError(v) || v instanceof Error,
  isFunction: (v) => typeof v === "function",
  isNull: (v) => v === null,
  isNullOrUndefined: (v) => v == null,
  isNumber: (v) => typeof v === "number",
  isObject: (v) => v !== null && typeof v === "object",
  isPrimitive: (v) => v === null || (typeof v !== "object" && typeof v !== "function"),
  isRegExp: (v) => utilTypes.isRegExp(v),
  isString: (v) => typeof v === "string",
  isSymbol: (v) => typeof v === "symbol",
  isUndefined: (v) => v === undefined,
};
// The default export (often an object of the same functions) gets them too.
for (const k in added) if (!(k in (m.default ?? m))) (m.default ?? m)[k] = added[k];
export const { _errnoException, _exceptionWithHostPort, getCallSite, isBoolean, isBuffer, isDate, isError, isFunction, isNull, isNullOrUndefined, isNumber, isObject, isPrimitive, isRegExp, isString, isSymbol, isUndefined } = added;
export const { MIMEParams, MIMEType, TextDecoder, TextEncoder, _extend, aborted, callbackify, convertProcessSignalToExitCode, debug, debuglog, deprecate, diff, format, formatWithOptions, getCallSites, getSystemErrorMap, getSystemErrorMessage, getSystemErrorName, inherits, inspect, isArray, isDeepStrictEqual, log, parseArgs, parseEnv, promisify, setTraceSigInt, stripVTControlCharacters, styleText, toUSVString, transferableAbortController, transferableAbortSignal, types } = m;
export default m.default ?? m;

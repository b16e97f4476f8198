// node:repl as workerd has it: no terminal to read from.
import { inspect } from "node:util";
import { notImplemented, unimplemented } from "cellhost-node:_errors";
import { builtinModules as all } from "cellhost-node:_names";

export const builtinModules = all.filter((m) => !m.startsWith("_"));
export const _builtinLibs = builtinModules;
export const REPL_MODE_SLOPPY = Symbol("repl-sloppy");
export const REPL_MODE_STRICT = Symbol("repl-strict");
export class Recoverable extends SyntaxError {
  constructor(err) {
    super();
    this.err = err;
  }
}
export class REPLServer {
  constructor() {
    throw notImplemented("REPLServer");
  }
}
export const start = unimplemented("start");
export const writer = inspect;
export default { REPLServer, REPL_MODE_SLOPPY, REPL_MODE_STRICT, Recoverable, _builtinLibs, builtinModules, start, writer };

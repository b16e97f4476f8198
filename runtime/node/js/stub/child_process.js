// node:child_process as workerd has it: a Worker starts no processes, so
// every entry point throws ERR_METHOD_NOT_IMPLEMENTED (after checking its
// arguments where workerd does).
import { EventEmitter } from "node:events";
import { notImplemented, unimplemented, validateFunction, validateObject, validateString } from "cellhost-node:_errors";

export class ChildProcess extends EventEmitter {
  constructor() {
    super();
    throw notImplemented("child_process.ChildProcess");
  }
  kill() {
    return false;
  }
  send() {
    return false;
  }
  disconnect() {}
  ref() {}
  unref() {}
  [Symbol.dispose]() {
    this.kill();
  }
}

export const _forkChild = unimplemented("child_process._forkChild");
export const execFile = unimplemented("child_process.execFile");
export const execFileSync = unimplemented("child_process.execFileSync");
export const execSync = unimplemented("child_process.execSync");
export const spawn = unimplemented("child_process.spawn");

export function exec(command, options, callback) {
  validateString(command, "command");
  if (options != null) validateObject(options, "options");
  if (callback != null) validateFunction(callback, "callback");
  throw notImplemented("child_process.exec");
}

export function fork(_modulePath, args, options) {
  if (args != null && typeof args === "object" && !Array.isArray(args)) options = args;
  if (options != null) validateObject(options, "options");
  throw notImplemented("child_process.fork");
}

export function spawnSync(command) {
  validateString(command, "command");
  throw notImplemented("child_process.spawnSync");
}

export default { ChildProcess, _forkChild, exec, execFile, execFileSync, execSync, fork, spawn, spawnSync };

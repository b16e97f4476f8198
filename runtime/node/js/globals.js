// The globals `nodejs_compat` adds to a Worker's scope, as workerd does:
// Buffer, process, global, setImmediate and clearImmediate. Loaded and
// installed by the host before the Worker's code, only for a Worker with the
// flag. (Not evaluated into the snapshot: deno_core 0.413 misplaces the
// sources of lazily loaded modules evaluated there: their functions then
// compile from another file's text.)
import { Buffer } from "node:buffer";
import process from "node:process";
import { clearImmediate, setImmediate } from "node:timers";

// workerd's process.nextTick is a microtask, in order with promise
// callbacks (Node and Deno run the whole tick queue before them).
process.nextTick = (callback, ...args) => queueMicrotask(() => callback(...args));

// A Worker's working directory is workerd's bundle directory; it has no
// other to change to.
process.cwd = () => "/bundle";
process.chdir = () => {
  throw new Error("process.chdir() is not supported in a Worker (cellhost)");
};

// node:process's bootstrap binds node's stdio streams onto the global
// console; workerd's console has no such properties, and a Worker no stdio.
delete globalThis.console._stdout;
delete globalThis.console._stderr;

export function install() {
  const define = (name, value) =>
    Object.defineProperty(globalThis, name, {
      value,
      writable: true,
      configurable: true,
      enumerable: true,
    });
  define("Buffer", Buffer);
  define("process", process);
  define("global", globalThis);
  define("setImmediate", setImmediate);
  define("clearImmediate", clearImmediate);
}

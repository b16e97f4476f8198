// The globals `nodejs_compat` adds to a Worker's scope, as workerd does:
// Buffer, process, global, setImmediate and clearImmediate. Installed by the
// host before the Worker's code, only for a Worker with the flag. Each
// module behind them is loaded on first use, so a Worker that never touches
// them pays neither the start-up time nor the memory.
import { core, internals } from "ext:core/mod.js";

function lazy(name, load) {
  const define = (value) =>
    Object.defineProperty(globalThis, name, {
      value,
      writable: true,
      configurable: true,
      enumerable: true,
    });
  Object.defineProperty(globalThis, name, {
    configurable: true,
    enumerable: true,
    get() {
      const value = load();
      define(value);
      return value;
    },
    set: define,
  });
}

const module = (specifier) => core.createLazyLoader(specifier)();

export function install() {
  lazy("Buffer", () => module("node:buffer").Buffer);
  lazy("process", () => module("node:process").default);
  // workerd's: 0 ms timers in setTimeout's queue (js/05_timers.js).
  lazy("setImmediate", () => internals.workersTimers.setImmediate);
  lazy("clearImmediate", () => internals.workersTimers.clearImmediate);
  Object.defineProperty(globalThis, "global", {
    value: globalThis,
    writable: true,
    configurable: true,
    enumerable: true,
  });
}

// node:test as workerd has it: no test runner, but the mock tracker works
// (mock.fn, mock.method), which libraries use outside tests too.
import { unimplemented } from "cellhost-node:_errors";

export class MockFunctionContext {
  #calls = [];
  #impl;
  #once = new Map();
  #restore;
  constructor(impl, restore) {
    this.#impl = impl;
    this.#restore = restore;
  }
  get calls() {
    return this.#calls.slice();
  }
  callCount() {
    return this.#calls.length;
  }
  mockImplementation(impl) {
    this.#impl = impl;
  }
  mockImplementationOnce(impl, onCall) {
    this.#once.set(onCall ?? this.#calls.length, impl);
  }
  resetCalls() {
    this.#calls = [];
  }
  restore() {
    this.#restore?.();
  }
  /** Runs one call of the mocked function, recording it. */
  _call(self, args, target) {
    const impl = this.#once.get(this.#calls.length) ?? this.#impl;
    this.#once.delete(this.#calls.length);
    const call = { arguments: args, error: undefined, result: undefined, stack: new Error(), target, this: self };
    this.#calls.push(call);
    try {
      call.result = target !== undefined ? Reflect.construct(impl, args, target) : Reflect.apply(impl, self, args);
      return call.result;
    } catch (e) {
      call.error = e;
      throw e;
    }
  }
}

function mocked(impl, restore) {
  const ctx = new MockFunctionContext(impl, restore);
  const fn = function (...args) {
    return ctx._call(this, args, new.target);
  };
  Object.defineProperty(fn, "mock", { value: ctx, enumerable: false });
  return fn;
}

export class MockTracker {
  #made = [];
  fn(original = function () {}, implementation = original) {
    const f = mocked(implementation);
    this.#made.push(f.mock);
    return f;
  }
  method(object, name, implementation, options) {
    if (implementation !== null && typeof implementation === "object") {
      options = implementation;
      implementation = undefined;
    }
    const desc = Object.getOwnPropertyDescriptor(object, name);
    const key = options?.getter ? "get" : options?.setter ? "set" : "value";
    const original = desc?.[key] ?? object[name];
    const f = mocked(implementation ?? original, () => {
      if (desc) Object.defineProperty(object, name, desc);
      else delete object[name];
    });
    Object.defineProperty(object, name, { ...desc, configurable: true, [key]: f });
    this.#made.push(f.mock);
    return f;
  }
  getter(object, name, implementation, options) {
    return this.method(object, name, implementation, { ...options, getter: true });
  }
  setter(object, name, implementation, options) {
    return this.method(object, name, implementation, { ...options, setter: true });
  }
  reset() {
    this.restoreAll();
    this.#made = [];
  }
  restoreAll() {
    for (const m of this.#made) m.restore();
  }
}
MockTracker.prototype.module = unimplemented("mock.module");

export const mock = new MockTracker();
export default { MockFunctionContext, MockTracker, mock };

// node:domain as workerd has it: domains that do nothing (run calls the
// function, bind and intercept return it). `create` is a Domain, not a
// function, exactly as on workerd.
import { EventEmitter } from "node:events";

export class Domain extends EventEmitter {
  members = undefined;
  _errorHandler(e) {
    throw e;
  }
  enter() {}
  exit() {}
  add() {}
  remove() {}
  run(fn, ...args) {
    return Reflect.apply(fn, this, args);
  }
  intercept(cb) {
    return cb;
  }
  bind(cb) {
    return cb;
  }
}

export function createDomain() {
  return new Domain();
}
export const create = createDomain();
export const active = null;
export default { Domain, active, createDomain, create };

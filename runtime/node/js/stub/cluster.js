// node:cluster as workerd has it: always the primary, with no workers; fork
// and the setup calls throw ERR_METHOD_NOT_IMPLEMENTED.
import { EventEmitter } from "node:events";
import { unimplemented } from "cellhost-node:_errors";

export const SCHED_NONE = 1;
export const SCHED_RR = 2;
export const isMaster = true;
export const isPrimary = true;
export const isWorker = false;
export const schedulingPolicy = SCHED_RR;
export const settings = {};
export const workers = {};
export const fork = unimplemented("cluster.fork");
export const disconnect = unimplemented("cluster.disconnect");
export const setupPrimary = unimplemented("cluster.setupPrimary");
// workerd's own name for it.
export const setupMaster = unimplemented("cluster.setupWorker");

export class Worker extends EventEmitter {
  _connected = false;
  id = 0;
  get process() {
    return globalThis.process;
  }
  get exitedAfterDisconnect() {
    return this._connected;
  }
  isConnected() {
    return this._connected;
  }
  isDead() {
    return true;
  }
  send() {
    return false;
  }
  kill() {
    this._connected = false;
  }
  destroy() {
    this._connected = false;
  }
  disconnect() {
    this._connected = false;
    return this;
  }
}

class Cluster extends EventEmitter {
  Worker = Worker;
  isMaster = isMaster;
  isPrimary = isPrimary;
  isWorker = isWorker;
  SCHED_NONE = SCHED_NONE;
  SCHED_RR = SCHED_RR;
  schedulingPolicy = SCHED_RR;
  settings = settings;
  workers = workers;
  setupPrimary(s) {
    setupPrimary(s);
  }
  setupMaster(s) {
    setupMaster(s);
  }
  disconnect() {
    disconnect();
  }
  fork(env) {
    return fork(env);
  }
}

export const _events = [];
export const _eventsCount = 0;
export const _maxListeners = 0;
export default new Cluster();

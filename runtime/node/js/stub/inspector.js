// node:inspector as workerd has it: nothing to attach to; a Session cannot
// be made, the rest does nothing.
import { EventEmitter } from "node:events";
import { notImplemented, unimplemented } from "cellhost-node:_errors";

const noop = () => {};
export const console = Object.fromEntries(
  [
    "debug", "error", "info", "log", "warn", "dir", "dirxml", "table", "trace", "group", "groupCollapsed",
    "groupEnd", "clear", "count", "countReset", "assert", "profile", "profileEnd", "time", "timeLog", "timeStamp",
  ].map((k) => [k, noop]),
);
export function close() {}
export function open() {
  return { [Symbol.dispose]: () => Promise.resolve() };
}
export function url() {
  return undefined;
}
export function waitForDebugger() {}

export class Session extends EventEmitter {
  constructor() {
    super();
    throw notImplemented("Session");
  }
  connect() {
    throw notImplemented("Session.connect");
  }
  connectToMainThread() {
    throw notImplemented("Session.connectToMainThread");
  }
  disconnect() {
    throw notImplemented("Session.disconnect");
  }
  post() {
    throw notImplemented("Session.post");
  }
}

export const Network = Object.fromEntries(
  [
    "requestWillBeSent", "dataReceived", "dataSent", "responseReceived", "loadingFinished", "loadingFailed",
    "webSocketCreated", "webSocketHandshakeResponseReceived", "webSocketClosed",
  ].map((k) => [k, unimplemented(`Network.${k}`)]),
);

export default { Session, close, console, open, url, waitForDebugger, Network };

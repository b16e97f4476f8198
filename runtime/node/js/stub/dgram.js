// node:dgram as workerd 1.20261117 has it: sockets that send and receive
// nothing (every method is a no-op).
import { EventEmitter } from "node:events";
import { validateFunction, validateObject } from "cellhost-node:_errors";

export function Socket(type, callback) {
  EventEmitter.call(this);
  if (typeof type === "string") type = { type };
  validateObject(type, "type");
  if (callback !== undefined) validateFunction(callback, "callback");
  return this;
}
Object.setPrototypeOf(Socket.prototype, EventEmitter.prototype);
Object.setPrototypeOf(Socket, EventEmitter);

const self = function () {
  return this;
};
const nothing = () => {};
const zero = () => 0;
Object.assign(Socket.prototype, {
  bind: self,
  close: self,
  ref: self,
  unref: self,
  connect: nothing,
  disconnect: nothing,
  send: nothing,
  sendto: nothing,
  setBroadcast: nothing,
  setTTL: nothing,
  setMulticastTTL: nothing,
  setMulticastLoopback: nothing,
  setMulticastInterface: nothing,
  addMembership: nothing,
  dropMembership: nothing,
  addSourceSpecificMembership: nothing,
  dropSourceSpecificMembership: nothing,
  setRecvBufferSize: nothing,
  setSendBufferSize: nothing,
  address: () => ({}),
  remoteAddress: () => ({}),
  getRecvBufferSize: zero,
  getSendBufferSize: zero,
  getSendQueueSize: zero,
  getSendQueueCount: zero,
  async [Symbol.asyncDispose]() {},
});

export function createSocket(type, callback) {
  return new Socket(type, callback);
}
export default { createSocket, Socket };

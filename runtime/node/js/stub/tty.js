// node:tty as workerd has it: no descriptor is a terminal.
import { Socket } from "cellhost-node:net";

export function isatty() {
  return false;
}

export function ReadStream(fd) {
  this.fd = fd;
  this.isRaw = false;
  this.isTTY = false;
  return this;
}
Object.setPrototypeOf(ReadStream.prototype, Socket.prototype);
Object.setPrototypeOf(ReadStream, Socket);
ReadStream.prototype.setRawMode = function (mode) {
  this.isRaw = mode;
  return this;
};

export function WriteStream(fd) {
  this.fd = fd;
  this.columns = 0;
  this.rows = 0;
  return this;
}
Object.setPrototypeOf(WriteStream.prototype, Socket.prototype);
Object.setPrototypeOf(WriteStream, Socket);
const callsBack = (...fns) => {
  const cb = fns.find((f) => typeof f === "function");
  if (cb) cb();
  return false;
};
Object.assign(WriteStream.prototype, {
  isTTY: true,
  getColorDepth: () => 8,
  hasColors: () => false,
  _refreshSize() {},
  cursorTo: (_x, y, cb) => callsBack(y, cb),
  moveCursor: (_dx, _dy, cb) => callsBack(cb),
  clearLine: (_dir, cb) => callsBack(cb),
  clearScreenDown: (cb) => callsBack(cb),
  getWindowSize() {
    return [this.columns ?? 0, this.rows ?? 0];
  },
});

export default { isatty, ReadStream, WriteStream };

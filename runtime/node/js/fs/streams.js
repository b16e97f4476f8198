// fs.ReadStream and fs.WriteStream, as workerd's internal_fs_streams: Node
// streams whose I/O goes through the callback API (or a FileHandle).
import { Buffer } from "node:buffer";
import { Readable, Writable, finished } from "node:stream";
import { fileURLToPath } from "node:url";
import {
  ERR_INVALID_ARG_VALUE,
  ERR_METHOD_NOT_IMPLEMENTED,
  ERR_MISSING_ARGS,
  ERR_OUT_OF_RANGE,
  ERR_STREAM_DESTROYED,
  ERR_SYSTEM_ERROR,
  parseFileMode,
  validateAbortSignal,
  validateBoolean,
  validateFunction,
  validateObject,
  validateString,
  validateThisInternalField,
  validateUint32,
} from "ext:cellhost_node/fs/errors.js";
import { getValidatedFd, isEncoding, isFileHandle } from "ext:cellhost_node/fs/utils.js";

const kFs = Symbol("kFs");
const kIsPerformingIO = Symbol("kIsPerformingIO");
const kIoDone = Symbol("kIoDone");
const kHandle = Symbol("kHandle");

const report = (e) => {
  if (typeof globalThis.reportError === "function") globalThis.reportError(e);
  else
    queueMicrotask(() => {
      throw e;
    });
};

const redirect = new WeakMap();
const me = (s) => redirect.get(s) ?? s;
const isClass = (f) => /^class[\s{]/.test(Function.prototype.toString.call(f));

// Runs the stream base constructor on `self` (an old-style function
// constructor) or, when the base is a class, builds the object with it and
// carries self's fields over.
function initBase(Base, self, options, NewTarget) {
  if (!isClass(Base)) {
    Reflect.apply(Base, self, [options]);
    return self;
  }
  const obj = Reflect.construct(Base, [options], NewTarget);
  for (const key of Reflect.ownKeys(self)) obj[key] = self[key];
  redirect.set(self, obj);
  return obj;
}

function toPathIfFileURL(url) {
  return url instanceof URL && url.protocol === "file:" ? fileURLToPath(url) : url;
}

function errorOrDestroy(stream, err) {
  const r = stream._readableState;
  const w = stream._writableState;
  if ((w && w.destroyed) || (r && r.destroyed)) return;
  if ((r && r.autoDestroy) || (w && w.autoDestroy)) stream.destroy(err);
  else if (err) stream.emit("error", err);
}

export function createStreams(callbackFs, normalizePath) {
  const fs = callbackFs;
  const lazyFs = async () => fs;
  const guard = (cb, ...args) => {
    try {
      cb?.(...args);
    } catch (e) {
      report(e);
    }
  };

  const kDefaultFsOperations = {
    open(path, flags = "r", mode = 0o666, cb) {
      let callback;
      if (typeof flags === "function") callback = flags;
      else if (typeof mode === "function") callback = mode;
      else if (typeof cb === "function") callback = cb;
      else throw new ERR_MISSING_ARGS("fs.open callback");
      validateFunction(callback, "fs.open callback");
      const openFlags = typeof flags === "function" ? "r" : flags;
      const openMode = typeof mode === "function" ? 0o666 : mode;
      const done = (err, fd) => (err ? guard(callback, err) : guard(callback, null, fd));
      lazyFs().then((f) => {
        try {
          f.open(path, openFlags, openMode, done);
        } catch (err) {
          done(err);
        }
      }, done);
    },
    close(fd, cb = () => {}) {
      lazyFs().then(
        (f) => f.close(fd, (err) => (err ? guard(cb, err) : guard(cb, null))),
        (err) => guard(cb, err),
      );
    },
    fsync(fd, cb = () => {}) {
      lazyFs().then(
        (f) => f.fsync(fd, (err) => (err ? guard(cb, err) : guard(cb, null))),
        (err) => guard(cb, err),
      );
    },
    read(fd, buffer, offset, length, position, cb) {
      lazyFs().then(
        (f) => f.read(fd, buffer, offset, length, position, (err, n, buf) => (err ? guard(cb, err) : guard(cb, null, n, buf))),
        (err) => guard(cb, err),
      );
    },
    write(fd, buffer, offset, length, position, cb) {
      lazyFs().then(
        (f) => f.write(fd, buffer, offset, length, position, (err, n, buf) => (err ? guard(cb, err) : guard(cb, null, n, buf))),
        (err) => guard(cb, err),
      );
    },
    writev(fd, buffers, position, cb) {
      lazyFs().then(
        (f) => f.writev(fd, buffers, position, (err, n, bufs) => (err ? guard(cb, err) : guard(cb, null, n, bufs))),
        (err) => guard(cb, err),
      );
    },
  };

  function construct(callback) {
    const stream = this;
    if (typeof stream.fd === "number") {
      callback(null);
      return;
    }
    if (typeof stream.open === "function") {
      const orgEmit = stream.emit;
      stream.emit = function (...args) {
        if (args[0] === "open") {
          this.emit = orgEmit;
          callback(null);
          Reflect.apply(orgEmit, this, args);
        } else if (args[0] === "error") {
          this.emit = orgEmit;
          callback(args[1]);
        } else {
          Reflect.apply(orgEmit, this, args);
        }
        return true;
      };
      stream.open();
      return;
    }
    stream[kFs].open(stream.path, stream.flags, stream.mode, (er, fd) => {
      if (er) {
        callback(er);
        return;
      }
      if (fd === undefined) {
        callback(new ERR_INVALID_ARG_VALUE("fd", "undefined"));
        return;
      }
      stream.fd = fd;
      callback(null);
      stream.emit("open", stream.fd);
      stream.emit("ready");
    });
  }

  function getValidatedFsOptions(ops) {
    validateObject(ops, "options.fs");
    if (isFileHandle(ops)) {
      const handle = ops;
      const last = (args) => args[args.length - 1];
      return {
        open() {
          throw new ERR_METHOD_NOT_IMPLEMENTED("open()");
        },
        close(...args) {
          handle.close().then(() => last(args)(null), (err) => last(args)(err));
        },
        fsync(...args) {
          handle.sync().then(() => last(args)(null), (err) => last(args)(err));
        },
        read(...args) {
          handle.read(...args.slice(1, -1)).then((r) => last(args)(null, r.bytesRead, r.buffer), (err) => last(args)(err));
        },
        write(...args) {
          handle.write(...args.slice(1, -1)).then((r) => last(args)(null, r.bytesWritten, r.buffer), (err) => last(args)(err));
        },
        writev(...args) {
          handle.writev(...args.slice(1, -1)).then((r) => last(args)(null, r.bytesWritten, r.buffers), (err) => last(args)(err));
        },
      };
    }
    const d = kDefaultFsOperations;
    const { open = d.open, close = d.close, fsync = d.fsync, read = d.read, write = d.write, writev = d.writev } = ops;
    validateFunction(open, "options.fs.open");
    validateFunction(read, "options.fs.read");
    validateFunction(close, "options.fs.close");
    validateFunction(fsync, "options.fs.fsync");
    validateFunction(write, "options.fs.write");
    validateFunction(writev, "options.fs.writev");
    return { open, close, fsync, read, write, writev };
  }

  function readImpl(n) {
    n = this.pos !== undefined ? Math.min(this.end - this.pos + 1, n) : Math.min(this.end - this.bytesRead + 1, n);
    if (n <= 0) {
      this.push(null);
      return;
    }
    const buf = Buffer.allocUnsafeSlow(n);
    this[kIsPerformingIO] = true;
    if (this.fd == null) {
      this.push(null);
      return;
    }
    this[kFs].read(this.fd, buf, 0, n, this.pos, (er, bytesRead, b) => {
      this[kIsPerformingIO] = false;
      if (this.destroyed) {
        this.emit(kIoDone, er);
        return;
      }
      if (er) {
        errorOrDestroy(this, er);
        return;
      }
      if (b == null) {
        errorOrDestroy(this, new ERR_INVALID_ARG_VALUE("buf", "null"));
        return;
      }
      if (bytesRead != null && bytesRead > 0) {
        if (this.pos !== undefined) this.pos += bytesRead;
        this.bytesRead += bytesRead;
        if (bytesRead !== b.byteLength) {
          const dst = Buffer.allocUnsafeSlow(bytesRead);
          Buffer.from(b.buffer, b.byteOffset, bytesRead).copy(dst, 0, 0, bytesRead);
          b = dst;
        }
        this.push(b);
      } else {
        this.push(null);
      }
    });
  }

  function actualClose(stream, err, cb) {
    if (stream.fd == null) return;
    stream[kFs].close(stream.fd, (er) => cb(er || err));
    stream.fd = null;
  }

  function closeImpl(stream, err, cb) {
    if (stream.fd == null) cb(err);
    else if (stream.flush) stream[kFs].fsync(stream.fd, (flushErr) => actualClose(stream, err || flushErr, cb));
    else actualClose(stream, err, cb);
  }

  function destroyImpl(err, cb) {
    if (this[kIsPerformingIO]) this.once(kIoDone, (er) => closeImpl(this, err || er, cb));
    else closeImpl(this, err, cb);
  }

  function commonOptions(self, options, isWrite) {
    if (options === null) options = {};
    else if (typeof options === "string") options = { encoding: options };
    validateObject(options, "options");
    return options;
  }

  function adoptFd(self, fd, ops) {
    if (fd == null) return false;
    if (isFileHandle(fd)) {
      if (ops !== kDefaultFsOperations) throw new ERR_METHOD_NOT_IMPLEMENTED("FileHandle with fs");
      self[kHandle] = fd;
      self[kFs] = getValidatedFsOptions(fd);
      fd.on("close", () => me(self).close());
      self.fd = fd.fd || null;
    } else {
      self.fd = getValidatedFd(fd);
    }
    return true;
  }

  function ReadStream(path, options = {}) {
    if (!(this instanceof ReadStream)) return new ReadStream(path, options);
    options = commonOptions(this, options, false);
    const {
      encoding = null,
      autoClose = true,
      emitClose = true,
      start = 0,
      end = Infinity,
      highWaterMark = 64 * 1024,
      signal = null,
      flags = "r",
      fd = null,
      mode = 0o666,
      fs: ops = kDefaultFsOperations,
    } = options;
    if (encoding !== "buffer" && encoding !== null && !isEncoding(encoding)) throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    validateBoolean(autoClose, "options.autoClose");
    validateBoolean(emitClose, "options.emitClose");
    validateUint32(start, "options.start");
    if (end !== Infinity) {
      validateUint32(end, "options.end");
      if (start > end) throw new ERR_OUT_OF_RANGE("start", `<= "end" (here: ${end})`, start);
    }
    validateUint32(highWaterMark, "options.highWaterMark");
    if (signal != null) validateAbortSignal(signal, "options.signal");
    validateString(flags, "options.flags");
    parseFileMode(mode, "options.mode", 0o666);
    this[kFs] = getValidatedFsOptions(ops);
    if (!adoptFd(this, fd, ops)) {
      this.fd = null;
      this.path = toPathIfFileURL(normalizePath(path));
      this.flags = options.flags === undefined ? "r" : options.flags;
      this.mode = options.mode === undefined ? 0o666 : options.mode;
    }
    this.start = start;
    this.end = end;
    this.pos = start;
    this.bytesRead = 0;
    this[kIsPerformingIO] = false;
    const self = this;
    return initBase(
      Readable,
      this,
      {
        highWaterMark,
        encoding,
        emitClose,
        autoDestroy: autoClose,
        signal,
        construct(cb) {
          return construct.call(me(self), cb);
        },
        read(n) {
          return readImpl.call(me(self), n);
        },
        destroy(err, cb) {
          return destroyImpl.call(me(self), err, cb);
        },
      },
      new.target || ReadStream,
    );
  }
  Object.setPrototypeOf(ReadStream.prototype, Readable.prototype);
  Object.setPrototypeOf(ReadStream, Readable);
  Object.defineProperty(ReadStream.prototype, "autoClose", {
    get() {
      validateThisInternalField(this, kFs, "ReadStream");
      return this._readableState?.autoDestroy || false;
    },
    set(val) {
      validateThisInternalField(this, kFs, "ReadStream");
      if (this._readableState !== undefined) this._readableState.autoDestroy = val;
    },
  });
  ReadStream.prototype.close = function (cb = (_err) => {}) {
    if (typeof cb === "function") finished(this, cb);
    this.destroy();
  };
  Object.defineProperty(ReadStream.prototype, "pending", {
    get() {
      return this.fd === null;
    },
    configurable: true,
  });

  function writeAll(data, size, pos, cb, retries = 0) {
    if (this.fd == null) return cb(new ERR_INVALID_ARG_VALUE("fd", "null"));
    this[kFs].write(this.fd, data, 0, size, pos, (er, bytesWritten, buffer) => {
      if (er?.code === "EAGAIN") {
        er = null;
        bytesWritten = 0;
      }
      if (this.destroyed || er) return cb(er || new ERR_STREAM_DESTROYED("write"));
      bytesWritten = bytesWritten ?? 0;
      this.bytesWritten += bytesWritten;
      retries = bytesWritten ? 0 : retries + 1;
      size -= bytesWritten;
      pos += bytesWritten;
      if (retries > 5) cb(new ERR_SYSTEM_ERROR("write failed"));
      else if (size) {
        if (buffer == null) {
          cb(null);
          return;
        }
        const buf = typeof buffer === "string" ? Buffer.from(buffer) : Buffer.from(buffer.buffer, buffer.byteOffset, buffer.byteLength);
        writeAll.call(this, buf.slice(bytesWritten), size, pos, cb, retries);
      } else cb(null);
    });
  }

  function writevAll(chunks, size, pos, cb, retries = 0) {
    if (this.fd == null) return cb(new ERR_INVALID_ARG_VALUE("fd", "null"));
    this[kFs].writev(this.fd, chunks, this.pos, (er, bytesWritten, buffers) => {
      if (er?.code === "EAGAIN") {
        er = null;
        bytesWritten = 0;
      }
      if (this.destroyed || er) return cb(er || new ERR_STREAM_DESTROYED("writev"));
      bytesWritten = bytesWritten ?? 0;
      this.bytesWritten += bytesWritten;
      retries = bytesWritten ? 0 : retries + 1;
      size -= bytesWritten;
      pos += bytesWritten;
      if (retries > 5) cb(new ERR_SYSTEM_ERROR("writev failed"));
      else if (size) {
        buffers ??= [];
        const bufs = buffers.map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength));
        if (buffers.length === 0) {
          cb(null);
          return;
        }
        writevAll.call(this, [Buffer.concat(bufs).slice(bytesWritten)], size, pos, cb, retries);
      } else cb(null);
    });
  }

  function writeImpl(data, encodingOrCallback, cb) {
    let callback;
    let encoding = null;
    if (typeof encodingOrCallback === "function") callback = encodingOrCallback;
    else if (encodingOrCallback != null) {
      encoding = encodingOrCallback;
      if (cb !== undefined) callback = cb;
    }
    validateFunction(callback, "write callback");
    if (typeof data === "string") data = Buffer.from(data, encoding);
    this[kIsPerformingIO] = true;
    writeAll.call(this, data, data.byteLength, this.pos, (er) => {
      this[kIsPerformingIO] = false;
      if (this.destroyed) {
        callback(er);
        this.emit(kIoDone, er);
        return;
      }
      callback(er);
    });
    if (this.pos !== undefined) this.pos += data.byteLength;
  }

  function writevImpl(data, callback) {
    let size = 0;
    const chunks = data.map((d) => {
      size += d.chunk.length;
      return d.chunk;
    });
    this[kIsPerformingIO] = true;
    writevAll.call(this, chunks, size, this.pos, (er) => {
      this[kIsPerformingIO] = false;
      if (this.destroyed) {
        callback(er);
        this.emit(kIoDone, er);
        return;
      }
      callback(er);
    });
    if (this.pos !== undefined) this.pos += size;
  }

  function WriteStream(path, options = {}) {
    if (!(this instanceof WriteStream)) return new WriteStream(path, options);
    options = commonOptions(this, options, true);
    const {
      encoding = null,
      autoClose = true,
      emitClose = true,
      start = 0,
      highWaterMark = 64 * 1024,
      signal = null,
      flags = "w",
      fd = null,
      mode = 0o666,
      fs: ops = kDefaultFsOperations,
    } = options;
    let { flush = false } = options;
    if (encoding !== "buffer" && encoding !== null && !isEncoding(encoding)) throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    validateBoolean(autoClose, "options.autoClose");
    validateBoolean(emitClose, "options.emitClose");
    if (flush === null) flush = false;
    validateBoolean(flush, "options.flush");
    validateUint32(start, "options.start");
    validateUint32(highWaterMark, "options.highWaterMark");
    if (signal != null) validateAbortSignal(signal, "options.signal");
    validateString(flags, "options.flags");
    parseFileMode(mode, "options.mode", 0o666);
    this[kFs] = getValidatedFsOptions(ops);
    this.flush = flush;
    if (!adoptFd(this, fd, ops)) {
      this.fd = null;
      this.path = toPathIfFileURL(normalizePath(path));
      this.flags = options.flags === undefined ? "w" : options.flags;
      this.mode = options.mode === undefined ? 0o666 : options.mode;
    }
    this.start = start;
    this.pos = start;
    this.bytesRead = 0;
    this.bytesWritten = 0;
    this[kIsPerformingIO] = false;
    const self = this;
    const out = initBase(
      Writable,
      this,
      {
        highWaterMark,
        encoding,
        emitClose,
        autoDestroy: autoClose,
        signal,
        construct(cb) {
          return construct.call(me(self), cb);
        },
        write(chunk, enc, cb) {
          return writeImpl.call(me(self), chunk, enc, cb);
        },
        writev(chunks, cb) {
          return writevImpl.call(me(self), chunks, cb);
        },
        destroy(err, cb) {
          return destroyImpl.call(me(self), err, cb);
        },
      },
      new.target || WriteStream,
    );
    if (encoding != null && encoding !== "buffer") out.setDefaultEncoding(encoding);
    return out;
  }
  Object.setPrototypeOf(WriteStream.prototype, Writable.prototype);
  Object.setPrototypeOf(WriteStream, Writable);
  Object.defineProperty(WriteStream.prototype, "autoClose", {
    get() {
      validateThisInternalField(this, kFs, "WriteStream");
      return this._writableState?.autoDestroy || false;
    },
    set(val) {
      validateThisInternalField(this, kFs, "WriteStream");
      if (this._writableState !== undefined) this._writableState.autoDestroy = val;
    },
  });
  WriteStream.prototype.close = function (cb = (_err) => {}) {
    if (cb) {
      if (this.closed) {
        queueMicrotask(() => cb(null));
        return;
      }
      this.on("close", cb);
    }
    if (!this.autoClose) this.on("finish", () => this.destroy());
    this.end();
  };
  WriteStream.prototype.destroySoon = WriteStream.prototype.end;
  Object.defineProperty(WriteStream.prototype, "pending", {
    get() {
      return this.fd === null;
    },
    configurable: true,
  });

  function createReadStream(path, options = {}) {
    return new ReadStream(path, options);
  }
  function createWriteStream(path, options = {}) {
    return new WriteStream(path, options);
  }

  return { ReadStream, WriteStream, createReadStream, createWriteStream };
}

// The callback node:fs API, as workerd's internal_fs_callback: arguments are
// checked synchronously, the operation runs synchronously, and the callback
// gets the outcome from a microtask.
import { Buffer } from "node:buffer";
import {
  ERR_EBADF,
  ERR_EEXIST,
  ERR_ENOENT,
  ERR_INVALID_ARG_TYPE,
  ERR_INVALID_ARG_VALUE,
  ERR_UNSUPPORTED_OPERATION,
  isArrayBufferView,
  parseFileMode,
  validateBoolean,
  validateObject,
  validateOneOf,
  validateUint32,
} from "ext:cellhost_node/fs/errors.js";
import {
  constants as C,
  getDate,
  getValidatedFd,
  isEncoding,
  stringToFlags,
  validateBufferArray,
  validatePosition,
  validateWriteArgs,
} from "ext:cellhost_node/fs/utils.js";

// Node's optional middle argument: (path, callback) or (path, options,
// callback); `missing` stands in for the options left out.
function optionsOr(optionsOrCallback, callback, missing) {
  return typeof optionsOrCallback === "function" ? [missing, optionsOrCallback] : [optionsOrCallback, callback];
}

export function createCallback(ctx, sync) {
  const { cffs, normalizePath, v } = ctx;

  function errorOnly(fn, callback) {
    if (typeof callback !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], callback);
    try {
      fn();
      queueMicrotask(() => callback(null));
    } catch (err) {
      queueMicrotask(() => callback(err));
    }
  }

  function singleArg(fn, callback) {
    if (typeof callback !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], callback);
    try {
      const result = fn();
      queueMicrotask(() => callback(null, result));
    } catch (err) {
      queueMicrotask(() => callback(err));
    }
  }

  function access(path, modeOrCallback = C.F_OK, callback) {
    let mode;
    [mode, callback] = optionsOr(modeOrCallback, callback, C.F_OK);
    const { path: p, mode: m } = v.validateAccessArgs(path, mode);
    errorOnly(() => sync.accessSyncImpl(p, m, true), callback);
  }

  function exists(path, callback) {
    queueMicrotask(() => callback(sync.existsSync(path)));
  }

  function appendFile(path, data, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { encoding: "utf8", mode: 0o666, flag: "a", flush: false });
    writeFile(path, data, options, callback);
  }

  function chmod(path, mode, callback) {
    const { pathOrFd } = v.validateChmodArgs(path, mode);
    errorOnly(() => {
      if (cffs.stat(pathOrFd, { followSymlinks: true }) == null) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "chmod" });
    }, callback);
  }

  function chown(path, uid, gid, callback) {
    const { pathOrFd } = v.validateChownArgs(path, uid, gid);
    errorOnly(() => {
      if (cffs.stat(pathOrFd, { followSymlinks: true }) == null) throw new ERR_ENOENT(path?.pathname, { syscall: "chown" });
    }, callback);
  }

  function close(fd, callback = () => {}) {
    fd = getValidatedFd(fd);
    errorOnly(() => sync.closeSync(fd), callback);
  }

  function copyFile(src, dest, modeOrCallback = 0, callback) {
    let mode;
    [mode, callback] = optionsOr(modeOrCallback, callback, 0);
    const s = normalizePath(src);
    const d = normalizePath(dest);
    validateOneOf(mode, "mode", [0, C.COPYFILE_EXCL, C.COPYFILE_FICLONE_FORCE, C.COPYFILE_FICLONE]);
    if (mode & C.COPYFILE_FICLONE_FORCE) throw new ERR_UNSUPPORTED_OPERATION();
    if (mode & C.COPYFILE_EXCL && sync.existsSync(dest)) throw new ERR_EEXIST({ syscall: "copyFile", path: d.pathname });
    errorOnly(() => sync.copyFileSync(s, d, mode), callback);
  }

  function cp(src, dest, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    const opts = sync.validateCpOptions(options);
    src = normalizePath(src);
    dest = normalizePath(dest);
    errorOnly(() => cffs.cp(src, dest, opts), callback);
  }

  function fchmod(fd, mode, callback) {
    fd = getValidatedFd(fd);
    parseFileMode(mode, "mode");
    errorOnly(() => sync.fchmodSync(fd, mode), callback);
  }

  function fchown(fd, uid, gid, callback) {
    const { pathOrFd } = v.validateChownArgs(fd, uid, gid);
    errorOnly(() => {
      if (cffs.stat(pathOrFd, { followSymlinks: false }) == null) throw new ERR_EBADF({ syscall: "fchown" });
    }, callback);
  }

  function fdatasync(fd, callback) {
    getValidatedFd(fd);
    errorOnly(() => sync.fdatasyncSync(fd), callback);
  }

  function fstat(fd, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { bigint: false });
    v.validateStatArgs(fd, options, true);
    singleArg(() => sync.fstatSync(fd, options), callback);
  }

  function fsync(fd, callback = () => {}) {
    getValidatedFd(fd);
    errorOnly(() => sync.fsyncSync(fd), callback);
  }

  function ftruncate(fd, lenOrCallback, callback) {
    let len;
    [len, callback] = optionsOr(lenOrCallback, callback, 0);
    fd = getValidatedFd(fd);
    validateUint32(len, "len");
    errorOnly(() => sync.ftruncateSync(fd, len), callback);
  }

  function futimes(fd, atime, mtime, callback) {
    fd = getValidatedFd(fd);
    atime = getDate(atime);
    mtime = getDate(mtime);
    errorOnly(() => sync.futimesSync(fd, atime, mtime), callback);
  }

  function lchmod(path, mode, callback) {
    const { pathOrFd } = v.validateChmodArgs(path, mode);
    errorOnly(() => {
      if (cffs.stat(pathOrFd, { followSymlinks: false }) == null) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "lchmod" });
    }, callback);
  }

  function lchown(path, uid, gid, callback) {
    const { pathOrFd } = v.validateChownArgs(path, uid, gid);
    errorOnly(() => {
      if (cffs.stat(pathOrFd, { followSymlinks: false }) == null) throw new ERR_ENOENT(path?.pathname, { syscall: "lchown" });
    }, callback);
  }

  function lutimes(path, atime, mtime, callback) {
    atime = getDate(atime);
    mtime = getDate(mtime);
    path = normalizePath(path);
    errorOnly(() => sync.lutimesSync(path, atime, mtime), callback);
  }

  function link(src, dest, callback) {
    const s = normalizePath(src);
    const d = normalizePath(dest);
    errorOnly(() => sync.linkSync(s, d), callback);
  }

  function lstat(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { bigint: false });
    const { pathOrFd, bigint, throwIfNoEntry } = v.validateStatArgs(path, options);
    singleArg(() => sync.lstatSync(pathOrFd, { bigint, throwIfNoEntry }), callback);
  }

  function mkdir(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    const { path: p, recursive } = v.validateMkDirArgs(path, options);
    singleArg(() => sync.mkdirSync(p, { recursive }), callback);
  }

  function mkdtemp(prefix, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    if (typeof options === "string" || options == null) options = { encoding: options };
    validateObject(options, "options");
    const { encoding = null } = options;
    if (encoding !== null && encoding !== "buffer" && !isEncoding(encoding)) throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    singleArg(() => sync.mkdtempSync(prefix, options), callback);
  }

  function open(path, flagsOrCallback = "r", modeOrCallback = 0o666, callback) {
    let flags;
    let mode;
    if (typeof flagsOrCallback === "function") {
      callback = flagsOrCallback;
      flags = "r";
      mode = 0o666;
    } else if (typeof modeOrCallback === "function") {
      callback = modeOrCallback;
      flags = flagsOrCallback;
      mode = 0o666;
    } else {
      flags = flagsOrCallback;
      mode = modeOrCallback;
    }
    path = normalizePath(path);
    mode = parseFileMode(mode, "mode");
    flags = stringToFlags(flags);
    singleArg(() => sync.openSync(path, flags, mode), callback);
  }

  function opendir(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { encoding: "utf8", bufferSize: 32, recursive: false });
    const { path: p, encoding, recursive } = v.validateOpendirArgs(path, options);
    singleArg(() => sync.opendirSync(p, { encoding, recursive }), callback);
  }

  // fs.read(fd, buffer, offset, length, position, cb), fs.read(fd, cb),
  // fs.read(fd, buffer, cb), fs.read(fd, buffer, options, cb) and
  // fs.read(fd, options, cb).
  function read(fd, bufferOptionsOrCallback, offsetOptionsOrCallback, lengthOrCallback, position, callback) {
    let cb;
    let buffer;
    let offset = 0;
    let length;
    let pos = null;
    const arg = bufferOptionsOrCallback;
    if (typeof arg === "function") {
      cb = arg;
      buffer = Buffer.alloc(16384);
      length = buffer.byteLength;
    } else if (arg != null && typeof arg === "object" && !isArrayBufferView(arg)) {
      const { buffer: b = Buffer.alloc(16384), offset: o = 0, length: l = b.byteLength - o, position: p = null } = arg;
      if (!isArrayBufferView(b)) throw new ERR_INVALID_ARG_TYPE("options.buffer", ["Buffer", "TypedArray", "DataView"], b);
      validateUint32(o, "options.offset");
      validateUint32(l, "options.length");
      validatePosition(p, "options.position");
      buffer = b;
      offset = o;
      length = l;
      pos = p;
      if (typeof offsetOptionsOrCallback !== "function") {
        throw new ERR_INVALID_ARG_TYPE("callback", ["function"], offsetOptionsOrCallback);
      }
      cb = offsetOptionsOrCallback;
    } else {
      buffer = arg;
      if (!isArrayBufferView(buffer)) throw new ERR_INVALID_ARG_TYPE("buffer", ["Buffer", "TypedArray", "DataView"], buffer);
      length = buffer.byteLength;
      offset = 0;
      if (typeof offsetOptionsOrCallback === "function") {
        cb = offsetOptionsOrCallback;
      } else if (typeof offsetOptionsOrCallback === "object" && !(offsetOptionsOrCallback instanceof Number)) {
        const { offset: o = 0, length: l = buffer.byteLength - o, position: p = null } = offsetOptionsOrCallback;
        validateUint32(o, "options.offset");
        validateUint32(l, "options.length");
        validatePosition(p, "options.position");
        offset = o;
        length = l;
        pos = p;
        if (typeof lengthOrCallback !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], lengthOrCallback);
        cb = lengthOrCallback;
      } else {
        offset = typeof offsetOptionsOrCallback === "number" ? offsetOptionsOrCallback : 0;
        if (typeof lengthOrCallback === "function") {
          cb = lengthOrCallback;
          pos = null;
          length = buffer.byteLength - offset;
        } else {
          length = lengthOrCallback ?? buffer.byteLength - offset;
          validateUint32(position, "position");
          pos = position;
          cb = callback;
        }
      }
    }
    if (typeof cb !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], cb);
    if (!isArrayBufferView(buffer)) throw new ERR_INVALID_ARG_TYPE("buffer", ["Buffer", "TypedArray", "DataView"], buffer);
    if (offset < 0 || length < 0 || (length !== 0 && offset + length > buffer.byteLength)) {
      throw new ERR_INVALID_ARG_VALUE("offset", "must be >= 0 and <= buffer.length");
    }
    if (buffer.byteLength === 0 || length === 0) {
      queueMicrotask(() => cb(null, 0, buffer));
      return;
    }
    try {
      const bytesRead = sync.readSync(fd, buffer, { offset, length, position: pos });
      queueMicrotask(() => cb(null, bytesRead, buffer));
    } catch (err) {
      queueMicrotask(() => cb(err));
    }
  }

  function readdir(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { encoding: "utf8", withFileTypes: false, recursive: false });
    const { path: p, recursive, withFileTypes, encoding } = v.validateReaddirArgs(path, options);
    singleArg(() => sync.readdirSync(p, { recursive, withFileTypes, encoding }), callback);
  }

  function encodingOptions(options, def) {
    if (typeof options === "string" || options == null) options = { encoding: options };
    validateObject(options, "options");
    const { encoding = def } = options;
    if (encoding !== null && encoding !== "buffer" && !isEncoding(encoding)) throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    return { options, encoding };
  }

  function readFile(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    ({ options } = encodingOptions(options, null));
    singleArg(() => sync.readFileSync(path, options), callback);
  }

  function readlink(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    if (typeof options === "string" || options == null) options = { encoding: options };
    const p = normalizePath(path);
    const { encoding } = encodingOptions(options, "utf8");
    singleArg(() => sync.readlinkSync(p, { encoding }), callback);
  }

  function readv(fd, buffers, positionOrCallback, callback) {
    if (typeof positionOrCallback === "function") {
      callback = positionOrCallback;
      positionOrCallback = null;
    }
    if (typeof callback !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], callback);
    validatePosition(positionOrCallback, "position");
    try {
      const n = sync.readvSync(fd, buffers, positionOrCallback);
      queueMicrotask(() => callback(null, n, buffers));
    } catch (err) {
      queueMicrotask(() => callback(err));
    }
  }

  function realpath(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    const { encoding } = encodingOptions(options, "utf8");
    const p = normalizePath(path);
    singleArg(() => sync.realpathSync(p, { encoding }), callback);
  }
  realpath.native = realpath;

  function rename(oldPath, newPath, callback) {
    const o = normalizePath(oldPath);
    const n = normalizePath(newPath);
    errorOnly(() => sync.renameSync(o, n), callback);
  }

  function rmdir(path, optionsOrCallback, callback) {
    let options;
    let cb = callback;
    if (typeof optionsOrCallback === "function") {
      cb = optionsOrCallback;
      options = {};
    } else {
      options = optionsOrCallback;
    }
    const { path: p, recursive } = v.validateRmDirArgs(path, options);
    errorOnly(() => sync.rmdirSync(p, { recursive }), cb);
  }

  function rm(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    const { path: p, recursive, force } = v.validateRmArgs(path, options);
    errorOnly(() => sync.rmSync(p, { recursive, force }), callback);
  }

  function stat(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { bigint: false });
    const { pathOrFd, bigint, throwIfNoEntry } = v.validateStatArgs(path, options);
    singleArg(() => sync.statSync(pathOrFd, { bigint, throwIfNoEntry }), callback);
  }

  function statfs(path, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { bigint: false });
    const p = normalizePath(path);
    if (options !== undefined) {
      validateObject(options, "options");
      const { bigint } = options;
      if (bigint !== undefined) validateBoolean(bigint, "options.bigint");
    }
    singleArg(() => sync.statfsSync(p, options), callback);
  }

  function symlink(target, path, typeOrCallback, callback) {
    let type;
    [type, callback] = optionsOr(typeOrCallback, callback, null);
    const t = normalizePath(target);
    const p = normalizePath(path);
    if (type != null) validateOneOf(type, "type", ["dir", "file", "junction", null]);
    errorOnly(() => sync.symlinkSync(t, p, type), callback);
  }

  function truncate(path, lenOrCallback, callback) {
    let len;
    [len, callback] = optionsOr(lenOrCallback, callback, 0);
    const p = normalizePath(path);
    validateUint32(len, "len");
    errorOnly(() => sync.truncateSync(p, len), callback);
  }

  function unlink(path, callback) {
    const p = normalizePath(path);
    errorOnly(() => sync.unlinkSync(p), callback);
  }

  function utimes(path, atime, mtime, callback) {
    atime = getDate(atime);
    mtime = getDate(mtime);
    const p = normalizePath(path);
    errorOnly(() => sync.utimesSync(p, atime, mtime), callback);
  }

  function write(fd, buffer, offsetOptionsPositionOrCallback, encodingLengthOrCallback, positionOrCallback, callback) {
    let offsetOrOptions;
    let lengthOrEncoding;
    let position;
    if (typeof offsetOptionsPositionOrCallback === "function") {
      callback = offsetOptionsPositionOrCallback;
      offsetOrOptions = undefined;
    } else {
      offsetOrOptions = offsetOptionsPositionOrCallback;
    }
    if (typeof encodingLengthOrCallback === "function") {
      callback = encodingLengthOrCallback;
      lengthOrEncoding = undefined;
    } else {
      lengthOrEncoding = encodingLengthOrCallback;
    }
    if (typeof positionOrCallback === "function") {
      callback = positionOrCallback;
      position = undefined;
    } else {
      position = positionOrCallback;
    }
    if (typeof callback !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], callback);
    if (typeof buffer === "string") {
      let encoding = "utf8";
      if (typeof lengthOrEncoding === "string") {
        encoding = lengthOrEncoding;
        lengthOrEncoding = undefined;
      }
      buffer = Buffer.from(buffer, encoding);
    }
    const r = validateWriteArgs(fd, buffer, offsetOrOptions, lengthOrEncoding, position);
    try {
      const written = sync.writevSync(r.fd, r.buffer, r.position);
      queueMicrotask(() => callback(null, written, buffer));
    } catch (err) {
      queueMicrotask(() => callback(err));
    }
  }

  function writeFile(path, data, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, { encoding: "utf8", mode: 0o666, flag: "w", flush: false });
    const { path: p, data: d, append, exclusive } = v.validateWriteFileArgs(path, data, options);
    singleArg(() => cffs.writeAll(p, d, { append, exclusive }), callback);
  }

  function writev(fd, buffers, positionOrCallback, callback) {
    if (typeof positionOrCallback === "function") {
      callback = positionOrCallback;
      positionOrCallback = null;
    }
    if (typeof callback !== "function") throw new ERR_INVALID_ARG_TYPE("callback", ["function"], callback);
    fd = getValidatedFd(fd);
    validateBufferArray(buffers);
    validatePosition(positionOrCallback, "position");
    try {
      const written = sync.writevSync(fd, buffers, positionOrCallback);
      queueMicrotask(() => callback(null, written, buffers));
    } catch (err) {
      queueMicrotask(() => callback(err));
    }
  }

  function unwatchFile() {
    throw new ERR_UNSUPPORTED_OPERATION();
  }
  function watch() {
    throw new ERR_UNSUPPORTED_OPERATION();
  }
  function watchFile() {
    throw new ERR_UNSUPPORTED_OPERATION();
  }

  function glob(pattern, optionsOrCallback, callback) {
    let options;
    [options, callback] = optionsOr(optionsOrCallback, callback, {});
    if (callback === undefined) throw new ERR_INVALID_ARG_TYPE("callback", ["function"], callback);
    singleArg(() => sync.globSync(pattern, options), callback);
  }

  // In the order of a module namespace (sorted), as `...callbackMethods`
  // spreads them into workerd's default export.
  return {
    access,
    appendFile,
    chmod,
    chown,
    close,
    copyFile,
    cp,
    exists,
    fchmod,
    fchown,
    fdatasync,
    fstat,
    fsync,
    ftruncate,
    futimes,
    glob,
    lchmod,
    lchown,
    link,
    lstat,
    lutimes,
    mkdir,
    mkdtemp,
    open,
    opendir,
    read,
    readFile,
    readdir,
    readlink,
    readv,
    realpath,
    rename,
    rm,
    rmdir,
    stat,
    statfs,
    symlink,
    truncate,
    unlink,
    unwatchFile,
    utimes,
    watch,
    watchFile,
    write,
    writeFile,
    writev,
  };
}

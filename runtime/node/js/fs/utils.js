// node:fs argument handling and the Stats, Dirent and Dir classes, as
// workerd's internal_fs_utils / internal_fs.
import { Buffer } from "node:buffer";
import {
  ERR_BUFFER_OUT_OF_BOUNDS,
  ERR_DIR_CLOSED,
  ERR_INVALID_ARG_TYPE,
  ERR_INVALID_ARG_VALUE,
  ERR_MISSING_ARGS,
  ERR_OUT_OF_RANGE,
  isArrayBufferView,
  parseFileMode,
  validateBoolean,
  validateEncoding,
  validateFunction,
  validateInt32,
  validateInteger,
  validateObject,
  validateString,
  validateUint32,
} from "ext:cellhost_node/fs/errors.js";

const kConstants = {
    UV_FS_SYMLINK_DIR: 1,
    UV_FS_SYMLINK_JUNCTION: 2,
    O_RDONLY: 0,
    O_WRONLY: 1,
    O_RDWR: 2,
    UV_DIRENT_UNKNOWN: 0,
    UV_DIRENT_FILE: 1,
    UV_DIRENT_DIR: 2,
    UV_DIRENT_LINK: 3,
    UV_DIRENT_FIFO: 4,
    UV_DIRENT_SOCKET: 5,
    UV_DIRENT_CHAR: 6,
    UV_DIRENT_BLOCK: 7,
    EXTENSIONLESS_FORMAT_JAVASCRIPT: 0,
    EXTENSIONLESS_FORMAT_WASM: 1,
    S_IFMT: 61440,
    S_IFREG: 32768,
    S_IFDIR: 16384,
    S_IFCHR: 8192,
    S_IFBLK: 24576,
    S_IFIFO: 4096,
    S_IFLNK: 40960,
    S_IFSOCK: 49152,
    O_CREAT: 64,
    O_EXCL: 128,
    UV_FS_O_FILEMAP: 0,
    O_NOCTTY: 256,
    O_TRUNC: 512,
    O_APPEND: 1024,
    O_DIRECTORY: 65536,
    O_NOATIME: 262144,
    O_NOFOLLOW: 131072,
    O_SYNC: 1052672,
    O_DSYNC: 4096,
    O_DIRECT: 16384,
    O_NONBLOCK: 2048,
    S_IRWXU: 448,
    S_IRUSR: 256,
    S_IWUSR: 128,
    S_IXUSR: 64,
    S_IRWXG: 56,
    S_IRGRP: 32,
    S_IWGRP: 16,
    S_IXGRP: 8,
    S_IRWXO: 7,
    S_IROTH: 4,
    S_IWOTH: 2,
    S_IXOTH: 1,
    F_OK: 0,
    R_OK: 4,
    W_OK: 2,
    X_OK: 1,
    UV_FS_COPYFILE_EXCL: 1,
    COPYFILE_EXCL: 1,
    UV_FS_COPYFILE_FICLONE: 2,
    COPYFILE_FICLONE: 2,
    UV_FS_COPYFILE_FICLONE_FORCE: 4,
    COPYFILE_FICLONE_FORCE: 4,
};

// A frozen stand-in for a module namespace object: null prototype, names
// sorted, tagged "Module".
export function namespaceOf(values) {
  const ns = Object.create(null);
  for (const k of Object.keys(values).sort()) ns[k] = values[k];
  Object.defineProperty(ns, Symbol.toStringTag, { value: "Module" });
  return Object.freeze(ns);
}

export const constants = namespaceOf(kConstants);

const C = constants;
export const kBadge = Symbol("kBadge");
export const kFileHandle = Symbol("kFileHandle");

export function isFileHandle(object) {
  return typeof object === "object" && object !== null && Reflect.has(object, kFileHandle);
}

export function getDate(time) {
  if (typeof time === "number") return new Date(time);
  if (typeof time === "bigint") return new Date(Number(time));
  if (typeof time === "string") return new Date(time);
  if (time instanceof Date) return time;
  throw new ERR_INVALID_ARG_TYPE("time", ["string", "number", "bigint", "Date"], time);
}

export function makeNormalizePath(getCwd) {
  return function normalizePath(path, encoding = "utf8") {
    if (typeof path === "string") {
      // the usual case
    } else if (path instanceof URL) {
      return path;
    } else if (Buffer.isBuffer(path)) {
      path = path.toString(encoding);
    } else {
      throw new ERR_INVALID_ARG_TYPE("path", ["string", "Buffer", "URL"], path);
    }
    if (path.indexOf("\0") !== -1) throw new ERR_INVALID_ARG_VALUE("path", path, "must not contain null bytes");
    path = path.replace(/[#?]/g, encodeURIComponent);
    path = path.replace(/\/\//g, "/");
    return new URL(path, path.startsWith("/") ? "file://" : `file://${getCwd()}/`);
  };
}

export const kMaxUserId = 2 ** 32 - 1;

export function getValidatedFd(fd, propName = "fd") {
  if (Object.is(fd, -0)) return 0;
  validateInt32(fd, propName, 0);
  return fd;
}

export function validatePosition(position, name) {
  if (typeof position === "number") validateUint32(position, name);
  else if (typeof position !== "bigint" && position !== null) throw new ERR_INVALID_ARG_TYPE(name, ["integer", "bigint", "null"], position);
}

export function validateBufferArray(buffers, propName = "buffer") {
  if (!Array.isArray(buffers)) throw new ERR_INVALID_ARG_TYPE(propName, "ArrayBufferView[]", buffers);
  for (const b of buffers) if (!isArrayBufferView(b)) throw new ERR_INVALID_ARG_TYPE(propName, "ArrayBufferView[]", buffers);
  return buffers;
}

const kFlags = {
  r: C.O_RDONLY,
  rs: C.O_RDONLY | C.O_SYNC,
  sr: C.O_RDONLY | C.O_SYNC,
  "r+": C.O_RDWR,
  "rs+": C.O_RDWR | C.O_SYNC,
  "sr+": C.O_RDWR | C.O_SYNC,
  w: C.O_TRUNC | C.O_CREAT | C.O_WRONLY,
  wx: C.O_TRUNC | C.O_CREAT | C.O_WRONLY | C.O_EXCL,
  xw: C.O_TRUNC | C.O_CREAT | C.O_WRONLY | C.O_EXCL,
  "w+": C.O_TRUNC | C.O_CREAT | C.O_RDWR,
  "wx+": C.O_TRUNC | C.O_CREAT | C.O_RDWR | C.O_EXCL,
  "xw+": C.O_TRUNC | C.O_CREAT | C.O_RDWR | C.O_EXCL,
  a: C.O_APPEND | C.O_CREAT | C.O_WRONLY,
  ax: C.O_APPEND | C.O_CREAT | C.O_WRONLY | C.O_EXCL,
  xa: C.O_APPEND | C.O_CREAT | C.O_WRONLY | C.O_EXCL,
  as: C.O_APPEND | C.O_CREAT | C.O_WRONLY | C.O_SYNC,
  sa: C.O_APPEND | C.O_CREAT | C.O_WRONLY | C.O_SYNC,
  "a+": C.O_APPEND | C.O_CREAT | C.O_RDWR,
  "ax+": C.O_APPEND | C.O_CREAT | C.O_RDWR | C.O_EXCL,
  "xa+": C.O_APPEND | C.O_CREAT | C.O_RDWR | C.O_EXCL,
  "as+": C.O_APPEND | C.O_CREAT | C.O_RDWR | C.O_SYNC,
  "sa+": C.O_APPEND | C.O_CREAT | C.O_RDWR | C.O_SYNC,
};

export function stringToFlags(flags, name = "flags") {
  if (typeof flags === "number") {
    validateInt32(flags, name);
    return flags;
  }
  if (flags == null) return C.O_RDONLY;
  if (typeof flags === "string" && Object.prototype.hasOwnProperty.call(kFlags, flags)) return kFlags[flags];
  throw new ERR_INVALID_ARG_VALUE("flags", flags);
}

function validateMode(mode, type = "access") {
  let min = 0;
  let max = C.F_OK | C.W_OK | C.R_OK | C.X_OK;
  let def = C.F_OK;
  if (type === "copyFile") {
    max = C.COPYFILE_EXCL | C.COPYFILE_FICLONE | C.UV_FS_COPYFILE_FICLONE_FORCE;
    def = mode || 0;
  }
  mode ??= def;
  validateInteger(mode, "mode", min, max);
  return mode;
}

export function isEncoding(encoding) {
  return typeof encoding === "string" && Buffer.isEncoding(encoding);
}

export function makeValidators(normalizePath) {
  return {
    validateAccessArgs(rawPath, mode) {
      return { path: normalizePath(rawPath), mode: validateMode(mode) };
    },
    validateChownArgs(pathOrFd, uid, gid) {
      validateInteger(uid, "uid", -1, kMaxUserId);
      validateInteger(gid, "gid", -1, kMaxUserId);
      if (typeof pathOrFd === "number") return { pathOrFd: getValidatedFd(pathOrFd, "fd"), uid, gid };
      return { pathOrFd: normalizePath(pathOrFd), uid, gid };
    },
    validateStatArgs(path, options = {}, isfstat = false) {
      validateObject(options, "options");
      const { bigint = false, throwIfNoEntry = true } = options;
      validateBoolean(bigint, "options.bigint");
      validateBoolean(throwIfNoEntry, "options.throwIfNoEntry");
      if (typeof path === "number") return { pathOrFd: getValidatedFd(path, "fd"), bigint, throwIfNoEntry };
      if (isfstat) throw new ERR_INVALID_ARG_TYPE("fd", "number", path);
      return { pathOrFd: normalizePath(path), bigint, throwIfNoEntry };
    },
    validateChmodArgs(pathOrFd, mode) {
      const actualMode = parseFileMode(mode, "mode");
      if (typeof pathOrFd === "number") return { pathOrFd: getValidatedFd(pathOrFd, "fd"), mode: actualMode };
      return { pathOrFd: normalizePath(pathOrFd), mode: actualMode };
    },
    validateMkDirArgs(path, options) {
      let opts;
      if (typeof options === "number") opts = { mode: options };
      else {
        validateObject(options, "options");
        opts = options;
      }
      const { recursive = false, mode = 0o777 } = opts;
      validateBoolean(recursive, "options.recursive");
      parseFileMode(mode, "mode");
      return { path: normalizePath(path), recursive };
    },
    validateRmArgs(path, options) {
      validateObject(options, "options");
      const { force = false, maxRetries = 0, recursive = false, retryDelay = 0 } = options;
      validateBoolean(force, "options.force");
      validateUint32(maxRetries, "options.maxRetries");
      validateBoolean(recursive, "options.recursive");
      validateUint32(retryDelay, "options.retryDelay");
      return { path: normalizePath(path), recursive, force };
    },
    validateRmDirArgs(path, options) {
      validateObject(options, "options");
      const { maxRetries = 0, recursive = false, retryDelay = 0 } = options;
      validateUint32(maxRetries, "options.maxRetries");
      validateBoolean(recursive, "options.recursive");
      validateUint32(retryDelay, "options.retryDelay");
      return { path: normalizePath(path), recursive };
    },
    validateReaddirArgs(path, options) {
      if (typeof options === "string" || options == null) options = { encoding: options };
      validateObject(options, "options");
      const { encoding = "utf8", withFileTypes = false, recursive = false } = options;
      if (encoding !== "buffer" && !isEncoding(encoding)) throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
      validateBoolean(withFileTypes, "options.withFileTypes");
      validateBoolean(recursive, "options.recursive");
      return { path: normalizePath(path), encoding, withFileTypes, recursive };
    },
    validateOpendirArgs(path, options) {
      validateObject(options, "options");
      const { encoding = "utf8", bufferSize = 32, recursive = false } = options;
      if (!isEncoding(encoding) && encoding !== "buffer") throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
      validateUint32(bufferSize, "options.bufferSize");
      validateBoolean(recursive, "options.recursive");
      return { path: normalizePath(path), encoding, recursive };
    },
    validateWriteFileArgs(path, data, options) {
      path = typeof path === "number" ? getValidatedFd(path) : normalizePath(path);
      if (typeof options === "string" || options == null) options = { encoding: options };
      validateObject(options, "options");
      const { encoding = "utf8", mode = 0o666, flag = "w", flush = false } = options;
      if (encoding !== "buffer" && !isEncoding(encoding)) throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
      validateBoolean(flush, "options.flush");
      parseFileMode(mode, "options.mode", 0o666);
      const newFlag = stringToFlags(flag);
      const append = Boolean(newFlag & C.O_APPEND);
      const write = Boolean(newFlag & C.O_WRONLY || newFlag & C.O_RDWR) || append;
      const exclusive = Boolean(newFlag & C.O_EXCL);
      if (!write) throw new ERR_INVALID_ARG_VALUE("flag", flag, "must be indicate write or append");
      if (typeof data === "string") data = Buffer.from(data, encoding);
      if (!isArrayBufferView(data)) throw new ERR_INVALID_ARG_TYPE("data", ["string", "Buffer", "TypedArray", "DataView"], data);
      return { path, data, append, exclusive };
    },
  };
}

export function validateWriteArgs(fd, buffer, offsetOrOptions, length, position) {
  fd = getValidatedFd(fd);
  let offset = offsetOrOptions;
  if (isArrayBufferView(buffer)) {
    if (typeof offsetOrOptions === "object" && offsetOrOptions != null) {
      ({ offset = 0, length, position = null } = offsetOrOptions);
      offset ??= 0;
      validateInteger(offset, "offset", 0);
    } else {
      if (offset != null) validateInteger(offset, "offset", 0);
      offset ??= 0;
      position ??= null;
    }
    validatePosition(position, "position");
    if (offset > buffer.byteLength) throw new ERR_BUFFER_OUT_OF_BOUNDS("offset");
    length ??= buffer.byteLength - offset;
    validateInteger(length, "length", 0);
    if (length > buffer.byteLength - offset) throw new ERR_BUFFER_OUT_OF_BOUNDS("length");
    return { fd, buffer: [Buffer.from(buffer.buffer, buffer.byteOffset + offset, length)], position };
  }
  if (typeof buffer !== "string") throw new ERR_INVALID_ARG_TYPE("buffer", ["string", "Buffer", "TypedArray", "DataView"], buffer);
  validatePosition(offsetOrOptions, "position");
  position = offsetOrOptions;
  validateEncoding(buffer, length);
  return { fd, buffer: [Buffer.from(buffer, length)], position };
}

export function validateReadArgs(fd, buffer, offsetOrOptions, length, position) {
  fd = getValidatedFd(fd);
  if (!isArrayBufferView(buffer)) throw new ERR_INVALID_ARG_TYPE("buffer", ["Buffer", "TypedArray", "DataView"], buffer);
  let actualOffset;
  let actualLength;
  let actualPosition = position;
  if (offsetOrOptions != null && typeof offsetOrOptions === "object") {
    const { offset = 0, length = buffer.byteLength - offset, position = null } = offsetOrOptions;
    actualOffset = offset;
    actualLength = length;
    actualPosition = position;
  } else if (typeof offsetOrOptions === "number") {
    actualOffset = offsetOrOptions;
    actualLength = length ?? buffer.byteLength - offsetOrOptions;
    actualPosition = position;
  } else {
    throw new ERR_INVALID_ARG_TYPE("offset", ["number", "object"], offsetOrOptions);
  }
  validateUint32(actualOffset, "offset");
  validateUint32(actualLength, "length");
  validatePosition(actualPosition, "position");
  if (actualLength === 0) return { fd, buffer: [], length: 0, position: actualPosition };
  if (actualOffset + actualLength > buffer.byteLength) {
    throw new ERR_OUT_OF_RANGE("length", `<= ${buffer.byteLength - actualOffset}`, actualLength);
  }
  return {
    fd,
    buffer: [Buffer.from(buffer.buffer, buffer.byteOffset + actualOffset, actualLength)],
    length: actualLength,
    position: actualPosition,
  };
}

export { validateMode };

// ---------------------------------------------------------------------------
// Stats

export class Stats {
  dev;
  ino;
  mode;
  nlink;
  uid;
  gid;
  rdev;
  size;
  blksize;
  blocks;
  atimeMs;
  mtimeMs;
  ctimeMs;
  birthtimeMs;
  atimeNs;
  mtimeNs;
  ctimeNs;
  birthtimeNs;
  atime;
  mtime;
  ctime;
  birthtime;
  constructor(badge, stat, options) {
    if (badge !== kBadge) throw new TypeError("Illegal constructor");
    this.mode = 0o444;
    if (stat.writable) this.mode |= 0o222;
    if (stat.device) this.mode |= C.S_IFCHR;
    else if (stat.type === "file") this.mode |= C.S_IFREG;
    else if (stat.type === "directory") this.mode |= C.S_IFDIR;
    else if (stat.type === "symlink") this.mode |= C.S_IFLNK;
    if (options.bigint) {
      this.dev = BigInt(stat.device);
      this.size = BigInt(stat.size);
      this.mode = BigInt(this.mode);
      this.atimeNs = 0n;
      this.mtimeNs = stat.lastModified;
      this.ctimeNs = stat.lastModified;
      this.birthtimeNs = stat.created;
      this.atimeMs = this.atimeNs / 1000000n;
      this.mtimeMs = this.mtimeNs / 1000000n;
      this.ctimeMs = this.ctimeNs / 1000000n;
      this.birthtimeMs = this.birthtimeNs / 1000000n;
      this.atime = new Date(Number(this.atimeMs));
      this.mtime = new Date(Number(this.mtimeMs));
      this.ctime = new Date(Number(this.ctimeMs));
      this.birthtime = new Date(Number(this.birthtimeMs));
      this.ino = 0n;
      this.nlink = 1n;
      this.uid = 0n;
      this.gid = 0n;
      this.rdev = 0n;
      this.blksize = 0n;
      this.blocks = 0n;
    } else {
      this.dev = Number(stat.device);
      this.size = stat.size;
      this.atimeMs = 0;
      this.mtimeMs = Number(stat.lastModified) / 1_000_000;
      this.ctimeMs = Number(stat.lastModified) / 1_000_000;
      this.birthtimeMs = Number(stat.created) / 1_000_000;
      this.atime = new Date(this.atimeMs);
      this.mtime = new Date(this.mtimeMs);
      this.ctime = new Date(this.ctimeMs);
      this.birthtime = new Date(this.birthtimeMs);
      this.ino = 0;
      this.nlink = 1;
      this.uid = 0;
      this.gid = 0;
      this.rdev = 0;
      this.blksize = 0;
      this.blocks = 0;
    }
  }
  isBlockDevice() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFBLK;
  }
  isCharacterDevice() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFCHR;
  }
  isDirectory() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFDIR;
  }
  isFIFO() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFIFO;
  }
  isFile() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFREG;
  }
  isSocket() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFSOCK;
  }
  isSymbolicLink() {
    return (Number(this.mode) & C.S_IFMT) === C.S_IFLNK;
  }
}

// ---------------------------------------------------------------------------
// Dirent and Dir

const kType = Symbol("type");

export class Dirent {
  name;
  parentPath;
  [kType];
  constructor(name, type, path) {
    this.name = name;
    this.parentPath = path;
    this[kType] = type;
  }
  isDirectory() {
    return this[kType] === C.UV_DIRENT_DIR;
  }
  isFile() {
    return this[kType] === C.UV_DIRENT_FILE;
  }
  isBlockDevice() {
    return this[kType] === C.UV_DIRENT_BLOCK;
  }
  isCharacterDevice() {
    return this[kType] === C.UV_DIRENT_CHAR;
  }
  isSymbolicLink() {
    return this[kType] === C.UV_DIRENT_LINK;
  }
  isFIFO() {
    return this[kType] === C.UV_DIRENT_FIFO;
  }
  isSocket() {
    return this[kType] === C.UV_DIRENT_SOCKET;
  }
}

export class Dir {
  #handle;
  #encoding;
  #path;
  constructor(handle, path, options) {
    if (handle == null) throw new ERR_MISSING_ARGS("handle");
    this.#handle = handle;
    this.#path = path;
    validateObject(options, "options");
    const { encoding = "utf8" } = options;
    validateString(encoding, "options.encoding");
    this.#encoding = encoding;
  }
  get path() {
    return this.#path;
  }
  read(callback) {
    if (typeof callback === "function") {
      validateFunction(callback, "callback");
      try {
        const ent = this.readSync();
        queueMicrotask(() => callback(null, ent));
      } catch (err) {
        queueMicrotask(() => callback(err, null));
      }
      return;
    }
    try {
      return Promise.resolve(this.readSync());
    } catch (err) {
      return Promise.reject(err);
    }
  }
  readSync() {
    if (this.#handle === undefined) throw new ERR_DIR_CLOSED();
    const ent = this.#handle.shift();
    if (ent == null) return null;
    const buf = Buffer.from(ent.name);
    if (this.#encoding === "buffer") return new Dirent(buf, ent.type, ent.parentPath);
    return new Dirent(buf.toString(this.#encoding != null ? this.#encoding : undefined), ent.type, ent.parentPath);
  }
  close(callback) {
    this.closeSync();
    if (typeof callback === "function") {
      validateFunction(callback, "callback");
      queueMicrotask(() => callback(null));
      return undefined;
    }
    return Promise.resolve();
  }
  closeSync() {
    if (this.#handle === undefined) throw new ERR_DIR_CLOSED();
    this.#handle = undefined;
  }
  async *entries() {
    for (;;) {
      const ent = await this.read();
      if (ent == null) return;
      yield ent;
    }
  }
  [Symbol.asyncIterator]() {
    return this.entries();
  }
  async [Symbol.asyncDispose]() {
    await this.close();
  }
  [Symbol.dispose]() {
    this.closeSync();
  }
}

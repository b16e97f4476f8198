// The synchronous node:fs API, as workerd's internal_fs_sync.
import { Buffer } from "node:buffer";
import {
  ERR_EBADF,
  ERR_EEXIST,
  ERR_EINVAL,
  ERR_ENOENT,
  ERR_INVALID_ARG_TYPE,
  ERR_INVALID_ARG_VALUE,
  ERR_UNSUPPORTED_OPERATION,
  bufferToString,
  parseFileMode,
  validateBoolean,
  validateObject,
  validateOneOf,
  validateString,
  validateUint32,
} from "ext:cellhost_node/fs/errors.js";
import {
  Dir,
  Dirent,
  Stats,
  constants as C,
  getDate,
  getValidatedFd,
  isEncoding,
  kBadge,
  stringToFlags,
  validateBufferArray,
  validatePosition,
  validateReadArgs,
  validateWriteArgs,
} from "ext:cellhost_node/fs/utils.js";
import { globWalk } from "ext:cellhost_node/fs/glob.js";

export function createSync(ctx) {
  const { cffs, normalizePath, getCwd, v } = ctx;

  function accessSyncImpl(path, mode, followSymlinks) {
    if (mode & C.X_OK) throw new ERR_ENOENT(path.pathname, { syscall: "access" });
    const stat = cffs.stat(path, { followSymlinks });
    if (stat == null || (mode & C.W_OK && !stat.writable)) throw new ERR_ENOENT(path.pathname, { syscall: "access" });
  }

  function accessSync(path, mode = C.F_OK) {
    const { path: p, mode: m } = v.validateAccessArgs(path, mode);
    accessSyncImpl(p, m, true);
  }

  function appendFileSync(path, data, options = {}) {
    if (typeof options === "string" || options == null) options = { encoding: options };
    const { encoding = "utf8", mode = 0o666, flag = "a", flush = false } = options ?? {};
    return writeFileSync(path, data, { encoding, mode, flag, flush });
  }

  function chmodSync(path, mode) {
    const { pathOrFd } = v.validateChmodArgs(path, mode);
    if (cffs.stat(pathOrFd, { followSymlinks: true }) == null) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "chmod" });
  }

  function chownSync(path, uid, gid) {
    const { pathOrFd } = v.validateChownArgs(path, uid, gid);
    if (cffs.stat(pathOrFd, { followSymlinks: true }) == null) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "chown" });
  }

  function closeSync(fd) {
    cffs.close(getValidatedFd(fd));
  }

  function copyFileSync(src, dest, mode = 0) {
    validateOneOf(mode, "mode", [0, C.COPYFILE_EXCL, C.COPYFILE_FICLONE_FORCE, C.COPYFILE_FICLONE]);
    if (mode & C.COPYFILE_FICLONE_FORCE) throw new ERR_UNSUPPORTED_OPERATION();
    if (mode & C.COPYFILE_EXCL && existsSync(dest)) {
      throw new ERR_EEXIST({ syscall: "copyFile", path: normalizePath(dest).pathname });
    }
    cffs.renameOrCopy(normalizePath(src), normalizePath(dest), { copy: true });
  }

  function validateCpOptions(options) {
    validateObject(options, "options");
    const {
      dereference = false,
      errorOnExist = false,
      force = true,
      mode = 0,
      preserveTimestamps = false,
      recursive = false,
      verbatimSymlinks = false,
    } = options;
    validateBoolean(dereference, "options.dereference");
    validateBoolean(errorOnExist, "options.errorOnExist");
    validateBoolean(force, "options.force");
    validateBoolean(preserveTimestamps, "options.preserveTimestamps");
    validateBoolean(recursive, "options.recursive");
    validateBoolean(verbatimSymlinks, "options.verbatimSymlinks");
    validateUint32(mode, "options.mode");
    if (mode & C.COPYFILE_FICLONE_FORCE) {
      throw new ERR_INVALID_ARG_VALUE("options.mode", "COPYFILE_FICLONE_FORCE is not supported");
    }
    if (options.filter !== undefined) {
      if (typeof options.filter !== "function") throw new ERR_INVALID_ARG_TYPE("options.filter", "function", options.filter);
      throw new ERR_UNSUPPORTED_OPERATION();
    }
    return { deferenceSymlinks: dereference, recursive, force, errorOnExist };
  }

  function cpSync(src, dest, options = {}) {
    const opts = validateCpOptions(options);
    cffs.cp(normalizePath(src), normalizePath(dest), opts);
  }

  function existsSync(path) {
    try {
      accessSync(path);
      return true;
    } catch {
      return false;
    }
  }

  function fdCheck(fd, syscall) {
    if (cffs.stat(fd, { followSymlinks: true }) == null) throw new ERR_EBADF({ syscall });
  }

  function fchmodSync(fd, mode) {
    fd = getValidatedFd(fd);
    parseFileMode(mode, "mode");
    fdCheck(fd, "fchmod");
  }

  function fchownSync(fd, uid, gid) {
    const { pathOrFd } = v.validateChownArgs(fd, uid, gid);
    fdCheck(pathOrFd, "fchown");
  }

  function fdatasyncSync(fd) {
    fd = getValidatedFd(fd);
    fdCheck(fd, "datasync");
  }

  function fstatSync(fd, options = {}) {
    validateObject(options, "options");
    const { pathOrFd, bigint } = v.validateStatArgs(fd, options, true);
    const stat = cffs.stat(pathOrFd, { followSymlinks: true });
    if (stat == null) throw new ERR_EBADF({ syscall: "stat" });
    return new Stats(kBadge, stat, { bigint });
  }

  function fsyncSync(fd) {
    fd = getValidatedFd(fd);
    fdCheck(fd, "sync");
  }

  function ftruncateSync(fd, len = 0) {
    validateUint32(len, "len");
    cffs.truncate(getValidatedFd(fd), len);
  }

  function futimesSync(fd, atime, mtime) {
    atime = getDate(atime);
    mtime = getDate(mtime);
    cffs.setLastModified(getValidatedFd(fd), mtime, {});
  }

  function lchmodSync(path, mode) {
    const { pathOrFd } = v.validateChmodArgs(path, mode);
    if (cffs.stat(pathOrFd, { followSymlinks: false }) == null) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "lchmod" });
  }

  function lchownSync(path, uid, gid) {
    const { pathOrFd } = v.validateChownArgs(path, uid, gid);
    // workerd names the raw argument's pathname here.
    if (cffs.stat(pathOrFd, { followSymlinks: false }) == null) throw new ERR_ENOENT(path?.pathname, { syscall: "lchown" });
  }

  function lutimesSync(path, atime, mtime) {
    atime = getDate(atime);
    mtime = getDate(mtime);
    cffs.setLastModified(normalizePath(path), mtime, { followSymlinks: false });
  }

  function linkSync(existingPath, newPath) {
    cffs.link(normalizePath(newPath), normalizePath(existingPath), { symbolic: false });
  }

  function lstatSync(path, options = {}) {
    const { pathOrFd, bigint, throwIfNoEntry } = v.validateStatArgs(path, options);
    const stat = cffs.stat(pathOrFd, { followSymlinks: false });
    if (stat == null) {
      if (throwIfNoEntry) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "lstat" });
      return undefined;
    }
    return new Stats(kBadge, stat, { bigint });
  }

  function mkdirSync(path, options = {}) {
    const { path: p, recursive } = v.validateMkDirArgs(path, options);
    return cffs.mkdir(p, { recursive, tmp: false });
  }

  function mkdtempSync(prefix, options = {}) {
    if (typeof options === "string" || options == null) options = { encoding: options };
    validateObject(options, "options");
    const { encoding = "utf8" } = options;
    if (!isEncoding(encoding) && encoding !== "buffer") throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    prefix = normalizePath(prefix, encoding);
    const ret = cffs.mkdir(normalizePath(prefix), { recursive: false, tmp: true });
    if (ret === undefined) throw new ERR_EINVAL({ syscall: "mkdtemp" });
    return ret;
  }

  function opendirSync(path, options = {}) {
    const { path: p, encoding, recursive } = v.validateOpendirArgs(path, options);
    const handles = cffs.readdir(p, { recursive });
    return new Dir(handles, path, { encoding });
  }

  function openSync(path, flags = "r", mode = 0o666) {
    parseFileMode(mode, "mode", 0o666);
    const f = stringToFlags(flags);
    return cffs.open(normalizePath(path), {
      read: !(f & C.O_WRONLY) || Boolean(f & C.O_RDWR),
      write: Boolean(f & C.O_WRONLY) || Boolean(f & C.O_RDWR),
      append: Boolean(f & C.O_APPEND),
      create: Boolean(f & C.O_CREAT),
      exclusive: Boolean(f & C.O_EXCL),
      truncate: Boolean(f & C.O_TRUNC),
      followSymlinks: true,
    });
  }

  function readdirSync(path, options = {}) {
    if (typeof options === "string" || options == null) options = { encoding: options };
    const { path: p, encoding, withFileTypes, recursive } = v.validateReaddirArgs(path, options);
    const handles = cffs.readdir(p, { recursive });
    if (withFileTypes) {
      if (encoding === "buffer") return handles.map((h) => new Dirent(Buffer.from(h.name), h.type, h.parentPath));
      return handles.map((h) => new Dirent(h.name, h.type, h.parentPath));
    }
    if (encoding === "buffer") return handles.map((h) => Buffer.from(h.name));
    return handles.map((h) => bufferToString(Buffer.from(h.name), encoding));
  }

  function readFileSync(pathOrFd, options = {}) {
    if (typeof options === "string" || options == null) options = { encoding: options };
    validateObject(options, "options");
    const { encoding = null, flag = "r" } = options;
    if (encoding !== null && encoding !== "buffer" && !isEncoding(encoding)) {
      throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    }
    stringToFlags(flag);
    const u8 = typeof pathOrFd === "number" ? cffs.readAll(getValidatedFd(pathOrFd)) : cffs.readAll(normalizePath(pathOrFd));
    const buf = Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
    if (typeof encoding === "string") return bufferToString(buf, encoding);
    return buf;
  }

  function linkTarget(path, options, failIfNotSymlink) {
    if (typeof options === "string" || options == null) options = { encoding: options };
    validateObject(options, "options");
    const { encoding = "utf8" } = options;
    if (!isEncoding(encoding) && encoding !== "buffer") throw new ERR_INVALID_ARG_VALUE("options.encoding", encoding);
    const dest = Buffer.from(cffs.readLink(normalizePath(path), { failIfNotSymlink }));
    if (typeof encoding === "string") return bufferToString(dest, encoding);
    return dest;
  }

  function readlinkSync(path, options = {}) {
    return linkTarget(path, options, true);
  }

  function readSync(fd, buffer, offsetOrOptions = {}, length, position = null) {
    const r = validateReadArgs(fd, buffer, offsetOrOptions, length, position);
    if (r.length === 0 || buffer.byteLength === 0) return 0;
    return readvSync(r.fd, r.buffer, r.position);
  }

  function readvSync(fd, buffers, position = null) {
    fd = getValidatedFd(fd);
    validateBufferArray(buffers);
    validatePosition(position, "position");
    if (buffers.length === 0) return 0;
    return cffs.read(fd, buffers, { position });
  }

  function realpathSync(p, options = {}) {
    return linkTarget(p, options, false);
  }
  realpathSync.native = realpathSync;

  function renameSync(src, dest) {
    cffs.renameOrCopy(normalizePath(src), normalizePath(dest), { copy: false });
  }

  function rmdirSync(path, options = {}) {
    const { path: p, recursive } = v.validateRmDirArgs(path, options);
    cffs.rm(p, { recursive, force: false, dironly: true });
  }

  function rmSync(path, options = {}) {
    const { path: p, recursive, force } = v.validateRmArgs(path, options);
    cffs.rm(p, { recursive, force, dironly: false });
  }

  function statSync(path, options = {}) {
    const { pathOrFd, bigint, throwIfNoEntry } = v.validateStatArgs(path, options);
    const stat = cffs.stat(pathOrFd, { followSymlinks: true });
    if (stat == null) {
      if (throwIfNoEntry) throw new ERR_ENOENT(pathOrFd.pathname, { syscall: "stat" });
      return undefined;
    }
    return new Stats(kBadge, stat, { bigint });
  }

  function statfsSync(path, options = {}) {
    normalizePath(path);
    validateObject(options, "options");
    const { bigint = false } = options;
    validateBoolean(bigint, "options.bigint");
    const z = bigint ? 0n : 0;
    return { type: z, bsize: z, blocks: z, bfree: z, bavail: z, files: z, ffree: z };
  }

  function symlinkSync(target, path, type = null) {
    validateOneOf(type, "type", ["dir", "file", "junction", null]);
    cffs.link(normalizePath(path), normalizePath(target), { symbolic: true });
  }

  function truncateSync(path, len = 0) {
    validateUint32(len, "len");
    cffs.truncate(normalizePath(path), len);
  }

  function unlinkSync(path) {
    cffs.unlink(normalizePath(path));
  }

  function utimesSync(path, atime, mtime) {
    atime = getDate(atime);
    mtime = getDate(mtime);
    cffs.setLastModified(normalizePath(path), mtime, { followSymlinks: true });
  }

  function writeFileSync(path, data, options = {}) {
    const { path: p, data: d, append, exclusive } = v.validateWriteFileArgs(path, data, options);
    return cffs.writeAll(p, d, { append, exclusive });
  }

  function writeSync(fd, buffer, offsetOrOptions = null, length, position) {
    const r = validateWriteArgs(fd, buffer, offsetOrOptions, length, position);
    return writevSync(r.fd, r.buffer, r.position);
  }

  function writevSync(fd, buffers, position = null) {
    fd = getValidatedFd(fd);
    validateBufferArray(buffers);
    validatePosition(position, "position");
    if (buffers.length === 0) return 0;
    return cffs.write(fd, buffers, { position });
  }

  function globSync(pattern, options = {}) {
    const patterns = typeof pattern === "string" ? [pattern] : [...pattern];
    for (const p of patterns) validateString(p, "pattern");
    if (typeof options !== "object" || options === null) validateObject(options, "options");
    const cwdOption = options.cwd;
    const cwd = cwdOption instanceof URL ? cwdOption.pathname : (cwdOption ?? getCwd());
    validateString(cwd, "options.cwd");
    const found = globWalk(cffs, normalizePath, patterns, cwd, options.exclude);
    const withFileTypes = options.withFileTypes ?? false;
    const excludeFn = typeof options.exclude === "function" ? options.exclude : undefined;
    const out = [];
    for (const [relPath, entry] of found) {
      if (!relPath) continue;
      if (withFileTypes) {
        const parts = relPath.split("/");
        const name = parts.pop() ?? "";
        const parentPath = cwd + (parts.length ? "/" + parts.join("/") : "");
        const dirent = new Dirent(name, entry.handle?.type ?? 0, parentPath);
        if (excludeFn && excludeFn(dirent)) continue;
        out.push(dirent);
      } else {
        if (excludeFn && excludeFn(relPath)) continue;
        out.push(relPath);
      }
    }
    return out;
  }

  function openAsBlob(path, options = {}) {
    normalizePath(path);
    validateObject(options, "options");
    const { type = "" } = options;
    validateString(type, "options.type");
    return cffs.openAsBlob(normalizePath(path), { type });
  }

  return {
    accessSyncImpl,
    validateCpOptions,
    accessSync,
    existsSync,
    appendFileSync,
    chmodSync,
    chownSync,
    closeSync,
    copyFileSync,
    cpSync,
    fchmodSync,
    fchownSync,
    fdatasyncSync,
    fstatSync,
    fsyncSync,
    ftruncateSync,
    futimesSync,
    globSync,
    lchmodSync,
    lchownSync,
    lutimesSync,
    linkSync,
    lstatSync,
    mkdirSync,
    mkdtempSync,
    opendirSync,
    openSync,
    readdirSync,
    readFileSync,
    readlinkSync,
    readSync,
    readvSync,
    realpathSync,
    renameSync,
    rmdirSync,
    rmSync,
    statSync,
    statfsSync,
    symlinkSync,
    truncateSync,
    unlinkSync,
    utimesSync,
    writeFileSync,
    writeSync,
    writevSync,
    openAsBlob,
  };
}

// node:fs/promises, as workerd's internal_fs_promises: each function runs
// the synchronous operation inside a promise; FileHandle wraps an fd.
import { Buffer } from "node:buffer";
import { EventEmitter } from "node:events";
import { ERR_EBADF, isArrayBufferView, validateBoolean, validateObject, validateUint32 } from "ext:cellhost_node/fs/errors.js";
import { constants, kBadge, kFileHandle, namespaceOf, validatePosition } from "ext:cellhost_node/fs/utils.js";

// Promise.try: call now, settle with the outcome.
const attempt = (fn) => new Promise((resolve) => resolve(fn()));

export function createPromises(ctx, sync, streams) {
  const { cffs } = ctx;
  let FileHandle;

  const fchmod = (fd, mode) => attempt(() => void sync.fchmodSync(fd, mode));
  const fchown = (fd, uid, gid) => attempt(() => void sync.fchownSync(fd, uid, gid));
  const fdatasync = (fd) => attempt(() => void sync.fdatasyncSync(fd));
  const fsync = (fd) => attempt(() => void sync.fsyncSync(fd));
  const fstat = (fd, options = {}) => attempt(() => sync.fstatSync(fd, options));
  const ftruncate = (fd, len = 0) => attempt(() => void sync.ftruncateSync(fd, len));
  const futimes = (fd, atime, mtime) => attempt(() => void sync.futimesSync(fd, atime, mtime));

  function access(path, mode = constants.F_OK) {
    return attempt(() => void sync.accessSync(path, mode));
  }
  function appendFile(path, data, options = {}) {
    return attempt(() => void sync.appendFileSync(path, data, options));
  }
  function chmod(path, mode) {
    return attempt(() => void sync.chmodSync(path, mode));
  }
  function chown(path, uid, gid) {
    return attempt(() => void sync.chownSync(path, uid, gid));
  }
  function copyFile(src, dest, mode) {
    return attempt(() => void sync.copyFileSync(src, dest, mode));
  }
  function cp(src, dest, options) {
    return attempt(() => void sync.cpSync(src, dest, options));
  }
  function lchmod(path, mode) {
    return attempt(() => void sync.lchmodSync(path, mode));
  }
  function lchown(path, uid, gid) {
    return attempt(() => void sync.lchownSync(path, uid, gid));
  }
  function lutimes(path, atime, mtime) {
    return attempt(() => void sync.lutimesSync(path, atime, mtime));
  }
  function link(existingPath, newPath) {
    return attempt(() => void sync.linkSync(existingPath, newPath));
  }
  function lstat(path, options = {}) {
    return attempt(() => sync.lstatSync(path, options));
  }
  function mkdir(path, options = {}) {
    return attempt(() => sync.mkdirSync(path, options));
  }
  function mkdtemp(prefix, options = {}) {
    return attempt(() => sync.mkdtempSync(prefix, options));
  }
  function open(path, flags, mode) {
    return attempt(() => new FileHandle(kBadge, sync.openSync(path, flags, mode)));
  }
  function opendir(path, options = {}) {
    return attempt(() => sync.opendirSync(path, options));
  }
  function readdir(path, options = {}) {
    return attempt(() => sync.readdirSync(path, options));
  }
  function readFile(path, options = {}) {
    return attempt(() => sync.readFileSync(path, options));
  }
  function readlink(path, options = {}) {
    return attempt(() => sync.readlinkSync(path, options));
  }
  function realpath(path, options = {}) {
    return attempt(() => sync.realpathSync(path, options));
  }
  function rename(oldPath, newPath) {
    return attempt(() => void sync.renameSync(oldPath, newPath));
  }
  function rmdir(path, options) {
    return attempt(() => void sync.rmdirSync(path, options));
  }
  function rm(path, options = {}) {
    return attempt(() => void sync.rmSync(path, options));
  }
  function stat(path, options = {}) {
    return attempt(() => sync.statSync(path, options));
  }
  function statfs(path, options = {}) {
    return attempt(() => sync.statfsSync(path, options));
  }
  function symlink(target, path, type = null) {
    return attempt(() => void sync.symlinkSync(target, path, type));
  }
  function truncate(path, len = 0) {
    return attempt(() => void sync.truncateSync(path, len));
  }
  function unlink(path) {
    return attempt(() => void sync.unlinkSync(path));
  }
  function utimes(path, atime, mtime) {
    return attempt(() => void sync.utimesSync(path, atime, mtime));
  }
  function watch() {
    throw new Error("Not implemented");
  }
  function writeFile(path, data, options = {}) {
    return attempt(() => void sync.writeFileSync(path, data, options));
  }
  async function* glob(pattern, options = {}) {
    const results = await Promise.resolve(sync.globSync(pattern, options));
    for (const result of results) yield result;
  }

  const closed = () => new ERR_EBADF({ syscall: "stat" });

  FileHandle = class FileHandle extends EventEmitter {
    #fd;
    #handle;
    [kFileHandle] = true;
    constructor(badge, fd) {
      if (badge !== kBadge) throw new TypeError("Illegal constructor");
      super();
      this.#fd = fd;
      this.#handle = cffs.getFdHandle(fd);
    }
    get fd() {
      return this.#fd;
    }
    async appendFile(data, options = {}) {
      if (this.#fd === undefined) throw closed();
      await appendFile(this.#fd, data, options);
    }
    async chmod(mode) {
      if (this.#fd === undefined) throw closed();
      await fchmod(this.#fd, mode);
    }
    async chown(uid, gid) {
      if (this.#fd === undefined) throw closed();
      await fchown(this.#fd, uid, gid);
    }
    async datasync() {
      if (this.#fd === undefined) throw closed();
      await fdatasync(this.#fd);
    }
    async sync() {
      if (this.#fd === undefined) throw closed();
      await fsync(this.#fd);
    }
    read(bufferOrOptions = {}, offsetOrOptions = {}, length, position = null) {
      try {
        if (this.#fd === undefined) throw closed();
        let options;
        if (isArrayBufferView(bufferOrOptions)) {
          if (typeof offsetOrOptions === "number") {
            options = {
              buffer: bufferOrOptions,
              offset: offsetOrOptions,
              length: length ?? bufferOrOptions.byteLength - offsetOrOptions,
              position: position ?? null,
            };
          } else {
            options = { buffer: bufferOrOptions, ...offsetOrOptions };
          }
        } else {
          options = bufferOrOptions;
        }
        const { buffer = Buffer.alloc(16384), offset = 0, length: len = buffer.byteLength - offset, position: pos = null } = options;
        validateUint32(offset, "offset");
        validateUint32(len, "length");
        validatePosition(pos, "position");
        const bytesRead = sync.readSync(this.#fd, buffer, offset, len, pos);
        return Promise.resolve({ bytesRead, buffer });
      } catch (err) {
        return Promise.reject(err);
      }
    }
    readv(buffers, position = null) {
      try {
        if (this.#fd === undefined) throw closed();
        const bytesRead = sync.readvSync(this.#fd, buffers, position);
        return Promise.resolve({ bytesRead, buffers });
      } catch (err) {
        return Promise.reject(err);
      }
    }
    async readFile(options = {}) {
      if (this.#fd === undefined) throw closed();
      return await readFile(this.#fd, options);
    }
    readLines(_options = {}) {
      if (this.#fd === undefined) throw closed();
      throw new Error("not implemented");
    }
    async stat(options = {}) {
      if (this.#fd === undefined) throw closed();
      return await fstat(this.#fd, options);
    }
    async truncate(len = 0) {
      if (this.#fd === undefined) throw closed();
      await ftruncate(this.#fd, len);
    }
    async utimes(atime, mtime) {
      if (this.#fd === undefined) throw closed();
      await futimes(this.#fd, atime, mtime);
    }
    write(buffer, offsetPositionOrOptions = null, lengthOrEncoding, position = null) {
      try {
        if (this.#fd === undefined) throw closed();
        if (typeof buffer === "string") buffer = Buffer.from(buffer, lengthOrEncoding);
        const bytesWritten = sync.writeSync(this.#fd, buffer, offsetPositionOrOptions, lengthOrEncoding, position);
        return Promise.resolve({ bytesWritten, buffer });
      } catch (err) {
        return Promise.reject(err);
      }
    }
    writev(buffers, position = null) {
      try {
        if (this.#fd === undefined) throw closed();
        const bytesWritten = sync.writevSync(this.#fd, buffers, position);
        return Promise.resolve({ bytesWritten, buffers });
      } catch (err) {
        return Promise.reject(err);
      }
    }
    writeFile(data, options = {}) {
      try {
        if (this.#fd === undefined) throw closed();
        const bytesWritten = sync.writeFileSync(this.#fd, data, options);
        return Promise.resolve({ bytesWritten, buffer: isArrayBufferView(data) ? data : Buffer.from(data, options) });
      } catch (err) {
        return Promise.reject(err);
      }
    }
    close() {
      try {
        this.#handle?.close();
        this.#fd = undefined;
        this.#handle = undefined;
        this.emit("close");
        return Promise.resolve();
      } catch (err) {
        return Promise.reject(err);
      }
    }
    async [Symbol.asyncDispose]() {
      await this.close();
    }
    readableWebStream(options = {}) {
      if (this.#fd === undefined) throw closed();
      validateObject(options, "options");
      const { autoClose = true } = options;
      validateBoolean(autoClose, "options.autoClose");
      return readableWebStream(this, { autoClose });
    }
    createReadStream(options = {}) {
      return streams.createReadStream("", { ...options, fd: this });
    }
    createWriteStream(_options = {}) {
      return streams.createWriteStream("", { ..._options, fd: this });
    }
  };

  function readableWebStream(fh, { autoClose }) {
    const readFn = fh.read.bind(fh);
    let controller;
    const ondone = async () => {
      if (autoClose) await fh.close();
    };
    const readable = new ReadableStream({
      type: "bytes",
      autoAllocateChunkSize: 16384,
      start(c) {
        controller = c;
      },
      async pull(c) {
        const req = c.byobRequest;
        const view = req.view;
        const { bytesRead } = await readFn(view, view.byteOffset, view.byteLength);
        if (bytesRead === 0) {
          c.close();
          await ondone();
        }
        req.respond(bytesRead);
      },
      async cancel() {
        await ondone();
      },
    });
    fh.once("close", () => {
      controller.close();
    });
    return readable;
  }

  return namespaceOf({
    FileHandle,
    access,
    appendFile,
    chmod,
    chown,
    constants,
    copyFile,
    cp,
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
    readFile,
    readdir,
    readlink,
    realpath,
    rename,
    rm,
    rmdir,
    stat,
    statfs,
    symlink,
    truncate,
    unlink,
    utimes,
    watch,
    writeFile,
  });
}

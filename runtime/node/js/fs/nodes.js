// The nodes of node:fs's virtual file system, as workerd's worker-fs.c++:
// directories (entries in kj::HashMap order), files (bytes, the /dev devices,
// stdio), symbolic links, and the FsError values operations fail with.
import { uvError } from "ext:cellhost_node/fs/errors.js";

export const MAX_U32 = 0xffffffff;
export const BLOB_SIZE_LIMIT = 128 * 1024 * 1024;
export const STDIO_MAX_WRITE = 16 * 1024;
export const MAX_SYMLINK_DEPTH = 256;
export const NS_PER_MS = 1000000n;

// UV_DIRENT_* types readdir hands back.
export const DIRENT_FILE = 1;
export const DIRENT_DIR = 2;
export const DIRENT_LINK = 3;
export const DIRENT_CHAR = 6;

// workerd's FsError values.
export class FsError {
  constructor(kind) {
    this.kind = kind;
  }
}
export const NOT_DIRECTORY = new FsError("NOT_DIRECTORY");
export const NOT_EMPTY = new FsError("NOT_EMPTY");
export const READ_ONLY = new FsError("READ_ONLY");
export const NOT_PERMITTED = new FsError("NOT_PERMITTED");
export const NOT_PERMITTED_ON_DIRECTORY = new FsError("NOT_PERMITTED_ON_DIRECTORY");
export const ALREADY_EXISTS = new FsError("ALREADY_EXISTS");
export const FAILED = new FsError("FAILED");
export const INVALID_PATH = new FsError("INVALID_PATH");
export const FILE_SIZE_LIMIT_EXCEEDED = new FsError("FILE_SIZE_LIMIT_EXCEEDED");
export const SYMLINK_DEPTH_EXCEEDED = new FsError("SYMLINK_DEPTH_EXCEEDED");

const kFsErrorCodes = {
  NOT_DIRECTORY: ["ENOTDIR"],
  NOT_EMPTY: ["ENOTEMPTY"],
  READ_ONLY: ["EPERM"],
  TOO_MANY_OPEN_FILES: ["EMFILE"],
  ALREADY_EXISTS: ["EEXIST"],
  NOT_SUPPORTED: ["ENOSYS"],
  NOT_PERMITTED: ["EPERM"],
  NOT_PERMITTED_ON_DIRECTORY: ["EISDIR"],
  FAILED: ["EIO"],
  INVALID_PATH: ["EINVAL", "Invalid path"],
  FILE_SIZE_LIMIT_EXCEEDED: ["EPERM", "File size limit exceeded"],
  SYMLINK_DEPTH_EXCEEDED: ["ELOOP", "symlink depth exceeded"],
};

export function fsErr(err, syscall, path) {
  const [code, message] = kFsErrorCodes[err.kind] || ["EPERM"];
  return uvError(code, syscall, message, path);
}

// A directory's entries, in kj::HashMap order: insertion order, except that
// erasing moves the last entry into the hole.
export class Entries {
  constructor() {
    this.names = [];
    this.items = [];
    this.index = new Map();
  }
  get size() {
    return this.names.length;
  }
  get(name) {
    const i = this.index.get(name);
    return i === undefined ? undefined : this.items[i];
  }
  insert(name, item) {
    this.index.set(name, this.names.length);
    this.names.push(name);
    this.items.push(item);
  }
  erase(name) {
    const i = this.index.get(name);
    if (i === undefined) return false;
    const last = this.names.length - 1;
    this.index.delete(name);
    if (i !== last) {
      this.names[i] = this.names[last];
      this.items[i] = this.items[last];
      this.index.set(this.names[i], i);
    }
    this.names.pop();
    this.items.pop();
    return true;
  }
  list() {
    return this.names.map((n, i) => [n, this.items[i]]);
  }
}

export class Dir {
  constructor(writable) {
    this.writable = writable;
    this.entries = new Entries();
  }
  real() {
    return this;
  }
}

// /tmp and /bundle stand in for a directory found when used: the current
// request's tmp tree, and the bundle built on first use.
export class ProxyDir {
  constructor(get) {
    this.real = get;
  }
}

export class Link {
  constructor(target) {
    this.target = target; // path segments from the root
  }
  stat() {
    return { type: "symlink", size: 0, lastModified: 0n, created: 0n, writable: false, device: false };
  }
}

export const isDir = (n) => n instanceof Dir || n instanceof ProxyDir;
export const isFile = (n) => n instanceof File;
export const isLink = (n) => n instanceof Link;
export const isErr = (n) => n instanceof FsError;

// A file: "regular" (bytes; writable unless it is a bundle module), one of
// the devices, or stdio.
export class File {
  constructor(kind, bytes, writable) {
    this.kind = kind;
    this.buf = bytes || new Uint8Array(0);
    this.size = this.buf.length;
    this.writable = writable;
    this.mtime = 0n;
    this.core = null;
    this.fd = -1;
  }
  stat() {
    if (this.kind === "regular") {
      return { type: "file", size: this.size, lastModified: this.mtime, created: 0n, writable: this.writable, device: false };
    }
    return { type: "file", size: 0, lastModified: 0n, created: 0n, writable: true, device: this.kind !== "stdio" };
  }
  read(offset, out) {
    switch (this.kind) {
      case "regular": {
        if (offset >= this.size || out.length === 0) return 0;
        const n = Math.min(out.length, this.size - offset);
        out.set(this.buf.subarray(offset, offset + n));
        return n;
      }
      case "zero":
      case "full":
        out.fill(0);
        return out.length;
      case "random":
        if (!this.core.inRequest()) return 0;
        for (let i = 0; i < out.length; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(out.length, i + 65536)));
        return out.length;
      default:
        return 0;
    }
  }
  write(offset, data) {
    switch (this.kind) {
      case "regular": {
        if (data.length > BLOB_SIZE_LIMIT) return FILE_SIZE_LIMIT_EXCEEDED;
        const end = offset + data.length;
        if (end > BLOB_SIZE_LIMIT) return FILE_SIZE_LIMIT_EXCEEDED;
        if (!this.writable) return READ_ONLY;
        if (end > this.size) {
          const err = this.resize(end);
          if (err) return err;
        }
        this.buf.set(data, offset);
        return data.length;
      }
      case "null":
      case "zero":
        return data.length;
      case "stdio": {
        const n = Math.min(data.length, STDIO_MAX_WRITE);
        if (n === 0) return 0;
        if (this.fd !== 0) this.core.host.write(this.fd, data.slice(0, n));
        return n;
      }
      default:
        return NOT_PERMITTED;
    }
  }
  resize(size) {
    switch (this.kind) {
      case "regular": {
        if (!this.writable) return READ_ONLY;
        if (size === this.size) return undefined;
        if (size > BLOB_SIZE_LIMIT) return FILE_SIZE_LIMIT_EXCEEDED;
        if (size > this.buf.length) {
          const grown = new Uint8Array(Math.min(BLOB_SIZE_LIMIT, Math.max(size, this.buf.length * 2, 64)));
          grown.set(this.buf.subarray(0, this.size));
          this.buf = grown;
        } else if (size < this.size) {
          this.buf.fill(0, size, this.size);
        }
        this.size = size;
        return undefined;
      }
      case "null":
      case "zero":
        return undefined;
      default:
        return NOT_PERMITTED;
    }
  }
  setLastModified(ns) {
    if (this.kind === "regular") {
      if (this.writable) this.mtime = ns;
      return undefined;
    }
    return this.kind === "random" || this.kind === "stdio" ? NOT_PERMITTED : undefined;
  }
  clone() {
    if (this.kind !== "regular") return this;
    if (this.size > BLOB_SIZE_LIMIT) return FILE_SIZE_LIMIT_EXCEEDED;
    return new File("regular", this.buf.slice(0, this.size), true);
  }
  replace(other) {
    if (this.kind === "regular") {
      if (!this.writable) return READ_ONLY;
      const st = other.stat();
      const bytes = new Uint8Array(st.size);
      other.read(0, bytes);
      this.buf = bytes;
      this.size = bytes.length;
      this.mtime = st.lastModified;
      return undefined;
    }
    return this.kind === "null" || this.kind === "zero" ? undefined : NOT_PERMITTED;
  }
  readAllBytes() {
    const size = this.stat().size;
    const out = new Uint8Array(size);
    if (size > 0) this.read(0, out);
    return out;
  }
}

// kj::Path::eval of a '/'-separated string onto base segments.
export function evalPath(base, str) {
  const out = base.slice();
  for (const part of str.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return out;
}

// kj::Path::parse / eval as process.chdir uses them: a failure there is a
// KJ exception, which reaches JS as an opaque internal error.
export function internalError() {
  const id = Array.from(crypto.getRandomValues(new Uint8Array(24)), (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("");
  return new Error(`internal error; reference = ${id}`);
}
export function kjEval(base, str, parse) {
  if (parse && str.startsWith("/")) throw internalError();
  const out = str.startsWith("/") ? [] : base.slice();
  for (const part of str.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (out.length === 0) throw internalError();
      out.pop();
    } else {
      if (part.includes("\0")) throw internalError();
      out.push(part);
    }
  }
  return out;
}

// The decoding NORMALIZE_PATH gives: percent-escapes of characters that need
// none become the characters.
export function normalizePercent(pathname) {
  return pathname.replace(/%([0-9A-Fa-f]{2})/g, (m, hex) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return /[A-Za-z0-9\-._~]/.test(c) ? c : m;
  });
}

export function bytesOf(view) {
  return view instanceof Uint8Array ? view : new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

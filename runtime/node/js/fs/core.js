// The virtual file system behind node:fs, as workerd's (worker-fs.c++ and
// the cloudflare-internal:filesystem module, filesystem.c++): a read-only
// root holding /bundle (the Worker's modules), /tmp (writable, one tree per
// request) and /dev (null, zero, full, random). createCore(host) returns the
// operations node:fs is written on; paths come in as file: URLs, failures
// leave as workerd's C++ errors (plain Error, own syscall/code[/path]).
import { uvError } from "ext:cellhost_node/fs/errors.js";
import { createCp } from "ext:cellhost_node/fs/cp.js";
import {
  ALREADY_EXISTS,
  BLOB_SIZE_LIMIT,
  DIRENT_CHAR,
  DIRENT_DIR,
  DIRENT_FILE,
  DIRENT_LINK,
  Dir,
  FAILED,
  File,
  INVALID_PATH,
  Link,
  MAX_SYMLINK_DEPTH,
  MAX_U32,
  NOT_DIRECTORY,
  NOT_EMPTY,
  NOT_PERMITTED,
  NOT_PERMITTED_ON_DIRECTORY,
  NS_PER_MS,
  ProxyDir,
  READ_ONLY,
  SYMLINK_DEPTH_EXCEEDED,
  bytesOf,
  evalPath,
  fsErr,
  isDir,
  isErr,
  isFile,
  isLink,
  kjEval,
  normalizePercent,
} from "ext:cellhost_node/fs/nodes.js";

export function createCore(host) {
  const core = { host, inRequest: () => host.scope() !== undefined && host.scope() !== null };

  // ----- per-request state (the tmp tree and the cwd) ------------------------
  const scopes = new WeakMap();
  const primitiveScopes = new Map();
  let topState = null;
  let sawRequest = false;
  const newState = () => ({ dir: new Dir(true), cwd: ["bundle"] });
  function state() {
    const s = host.scope();
    if (s === undefined || s === null) {
      if (topState === null) topState = newState();
      return topState;
    }
    if (!sawRequest) {
      sawRequest = true;
      topState = null;
    }
    // An object keys a WeakMap entry; a primitive id (not expected) a Map one.
    const map = typeof s === "object" || typeof s === "function" ? scopes : primitiveScopes;
    let st = map.get(s);
    if (st === undefined) {
      st = newState();
      map.set(s, st);
    }
    return st;
  }

  // ----- the tree ------------------------------------------------------------
  let bundleDir = null;
  function buildBundle() {
    const dir = new Dir(false);
    let modules = [];
    try {
      modules = host.bundle() || [];
    } catch {
      modules = [];
    }
    for (const [name, bytes] of modules) {
      let url;
      try {
        url = new URL(name, "file:///");
      } catch {
        continue;
      }
      if (url.protocol !== "file:") continue;
      const segs = evalPath([], url.pathname.slice(1));
      if (segs.length === 0 || segs.length > 1024) continue;
      let d = dir;
      let ok = true;
      for (let i = 0; i < segs.length - 1 && ok; i++) {
        let next = d.entries.get(segs[i]);
        if (next === undefined) {
          next = new Dir(false);
          d.entries.insert(segs[i], next);
        }
        if (next instanceof Dir) d = next;
        else ok = false;
      }
      const last = segs[segs.length - 1];
      if (!ok || d.entries.get(last) !== undefined) continue;
      const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
      d.entries.insert(last, new File("regular", data, false));
    }
    return dir;
  }

  const devDir = new Dir(false);
  for (const kind of ["null", "zero", "full", "random"]) {
    const f = new File(kind, null, true);
    f.core = core;
    devDir.entries.insert(kind, f);
  }
  const root = new Dir(false);
  root.entries.insert("bundle", new ProxyDir(() => (bundleDir ??= buildBundle())));
  root.entries.insert("tmp", new ProxyDir(() => state().dir));
  root.entries.insert("dev", devDir);

  const real = (d) => d.real();

  // SymbolicLinkRecursionGuardScope: the outermost scope on the stack holds
  // the links seen while one resolution runs.
  let seen = null;
  function guarded(fn) {
    const outer = seen === null;
    if (outer) seen = new Set();
    try {
      return fn();
    } finally {
      if (outer) seen = null;
    }
  }
  function checkSeen(link) {
    if (seen === null) return undefined;
    if (seen.has(link)) return SYMLINK_DEPTH_EXCEEDED;
    seen.add(link);
    return seen.size > MAX_SYMLINK_DEPTH ? SYMLINK_DEPTH_EXCEEDED : undefined;
  }
  const resolveLink = (link) => tryOpen(root, link.target, 0, {});

  function dirSelfStat(d) {
    return { type: "directory", size: 0, lastModified: 0n, created: 0n, writable: real(d).writable, device: false };
  }

  // Directory::stat(path): a Stat, an FsError or undefined.
  function dirStat(d, path, i = 0) {
    d = real(d);
    if (i === path.length) return dirSelfStat(d);
    const found = d.entries.get(path[i]);
    if (found === undefined) return undefined;
    if (isFile(found)) return i === path.length - 1 ? found.stat() : undefined;
    if (isDir(found)) return dirStat(found, path, i + 1);
    return guarded(() => {
      const err = checkSeen(found);
      if (err) return err;
      const r = resolveLink(found);
      if (r === undefined) return undefined;
      if (isFile(r)) return r.stat();
      if (isDir(r)) return dirStat(r, path, i + 1);
      return r;
    });
  }

  // Directory::tryOpen(path, {createAs, followLinks}).
  function tryOpen(d, path, i, opts) {
    const follow = opts.followLinks !== false;
    d = real(d);
    if (i === path.length) return d;
    const found = d.entries.get(path[i]);
    if (found !== undefined) {
      if (i === path.length - 1) {
        if (!isLink(found) || !follow) return found;
        return guarded(() => checkSeen(found) || resolveLink(found));
      }
      if (isFile(found)) return undefined;
      if (isDir(found)) return tryOpen(found, path, i + 1, opts);
      if (!follow) return undefined;
      return guarded(() => {
        const err = checkSeen(found);
        if (err) return err;
        const r = resolveLink(found);
        if (r === undefined || isFile(r)) return undefined;
        if (isDir(r)) return tryOpen(r, path, i + 1, opts);
        return r;
      });
    }
    if (opts.createAs) {
      if (!d.writable) return READ_ONLY;
      return tryCreate(d, path, i, opts.createAs);
    }
    return undefined;
  }

  function tryCreate(d, path, i, type) {
    if (i === path.length - 1) {
      const node = type === "file" ? new File("regular", null, true) : new Dir(true);
      d.entries.insert(path[i], node);
      return node;
    }
    const sub = new Dir(true);
    const r = tryOpen(sub, path, i + 1, { createAs: type });
    if (r !== undefined) d.entries.insert(path[i], sub);
    return r;
  }

  function validName(name) {
    return name !== "" && name !== "." && name !== ".." && !name.includes("/");
  }

  function add(d, name, item) {
    d = real(d);
    if (!d.writable) return NOT_PERMITTED;
    if (!validName(name)) return INVALID_PATH;
    if (d.entries.get(name) !== undefined) return ALREADY_EXISTS;
    d.entries.insert(name, item);
    return undefined;
  }

  function remove(d, path, recursive, i = 0) {
    d = real(d);
    if (!d.writable) return READ_ONLY;
    if (i === path.length) return false;
    const found = d.entries.get(path[i]);
    if (found === undefined) return false;
    if (isDir(found)) {
      if (i === path.length - 1) {
        if (real(found).entries.size > 0 && !recursive) return NOT_EMPTY;
        return d.entries.erase(path[i]);
      }
      return remove(found, path, recursive, i + 1);
    }
    if (i !== path.length - 1) return NOT_DIRECTORY;
    return d.entries.erase(path[i]);
  }

  const resolve = (segs, followLinks = true) => tryOpen(root, segs, 0, { followLinks });

  function statOf(node) {
    if (isDir(node)) return dirSelfStat(node);
    return node.stat();
  }

  // ----- paths -----------------------------------------------------------------
  // NormalizedFilePath: the URL a path arrives as, checked.
  function norm(url) {
    if (!(url instanceof URL)) throw new TypeError("File path must be a file: URL");
    const u = new URL(url.href);
    if (u.protocol !== "file:") throw new TypeError("File path must be a file: URL");
    if (u.host !== "") throw new Error("File path must not have a host");
    const pathname = normalizePercent(u.pathname);
    if (pathname.length > 4096) throw new Error("File path is too long");
    let slashes = 0;
    for (let i = 0; i < pathname.length; i++) if (pathname[i] === "/") slashes++;
    if (slashes > 48) throw new Error("File path has too many segments");
    const segs = evalPath([], pathname.slice(1));
    const cut = pathname.lastIndexOf("/");
    const base = pathname.slice(0, cut + 1);
    return { pathname, segs, base, baseSegs: evalPath([], base.slice(1)), name: pathname.slice(cut + 1) };
  }
  const toStr = (segs) => "/" + segs.join("/");

  // ----- file descriptors ------------------------------------------------------
  const opened = new Map();
  let nextFd = 3;
  let tmpCounter = 0;

  function getStdio(fd) {
    let o = opened.get(fd);
    if (o === undefined) {
      const f = new File("stdio", null, true);
      f.core = core;
      f.fd = fd;
      o = { fd, read: true, write: true, append: true, node: f, position: 0 };
      opened.set(fd, o);
    }
    return o;
  }
  function tryGetFd(fd) {
    if (fd <= 2) return getStdio(fd);
    return opened.get(fd);
  }

  function positionOf(position, fallback, syscall) {
    if (position === null || position === undefined) return fallback;
    if (BigInt(position) > BigInt(MAX_U32)) throw uvError("EINVAL", syscall, "position out of range");
    return Number(position);
  }

  // kj::Date from a JS Date or number (milliseconds), as a BigInt of ns.
  function toNs(date) {
    const ms = date instanceof Date ? date.getTime() : typeof date === "number" ? date : NaN;
    if (!Number.isFinite(ms)) throw new TypeError("The value cannot be converted because it is not a valid Date.");
    const ns = ms * 1e6;
    if (!(ns < 9223372036854775807)) throw new TypeError("This API doesn't support dates after 2189.");
    if (!(ns > -9223372036854775808)) throw new TypeError("This API doesn't support dates before 1687.");
    return BigInt(Math.trunc(ms)) * NS_PER_MS;
  }

  // ----- the operations (cloudflare-internal:filesystem) -----------------------
  const fs = {
    stat(pathOrFd, options = {}) {
      if (typeof pathOrFd === "number") {
        const o = tryGetFd(pathOrFd);
        if (o === undefined) throw uvError("EBADF", "fstat");
        return statOf(o.node);
      }
      const n = norm(pathOrFd);
      const r = resolve(n.segs, options.followSymlinks ?? true);
      if (r === undefined) return undefined;
      if (isErr(r)) throw fsErr(r, "stat");
      return statOf(r);
    },

    setLastModified(pathOrFd, date, options = {}) {
      const ns = toNs(date);
      let node;
      if (typeof pathOrFd === "number") {
        const o = tryGetFd(pathOrFd);
        if (o === undefined) throw uvError("EBADF", "futimes");
        node = o.node;
      } else {
        const n = norm(pathOrFd);
        node = resolve(n.segs, options.followSymlinks ?? true);
        if (node === undefined) throw uvError("ENOENT", "utimes", undefined, n.pathname);
        if (isErr(node)) throw fsErr(node, "futimes");
      }
      if (isFile(node)) {
        const err = node.setLastModified(ns);
        if (err) throw fsErr(err, "futimes");
      }
    },

    truncate(pathOrFd, size) {
      let node;
      if (typeof pathOrFd === "number") {
        const o = tryGetFd(pathOrFd);
        if (o === undefined) throw uvError("EBADF", "ftruncate");
        node = o.node;
      } else {
        const n = norm(pathOrFd);
        node = resolve(n.segs);
        if (node === undefined) throw uvError("ENOENT", "ftruncate", undefined, n.pathname);
        if (isErr(node)) throw fsErr(node, "ftruncate");
      }
      if (isDir(node)) throw uvError("EISDIR", "ftruncate");
      if (isLink(node)) throw uvError("EINVAL", "ftruncate");
      const err = node.resize(size);
      if (err) throw fsErr(err, "ftruncate");
    },

    readLink(path, options) {
      const n = norm(path);
      const r = resolve(n.segs, false);
      if (r === undefined) throw uvError("ENOENT", "readlink", undefined, n.pathname);
      if (isErr(r)) throw fsErr(r, "readlink", n.pathname);
      if (isLink(r)) return toStr(r.target);
      if (options.failIfNotSymlink) throw uvError("EINVAL", "readlink");
      return toStr(n.segs);
    },

    // link(from, to): from is the new entry, to the target.
    link(from, to, options) {
      const f = norm(from);
      const t = norm(to);
      const existing = resolve(f.segs);
      if (existing !== undefined) {
        if (isErr(existing)) throw fsErr(existing, "link");
        throw uvError("EEXIST", "link", "File already exists");
      }
      if (f.name === "") throw uvError("EINVAL", "link", "Invalid filename");
      const parent = resolve(f.baseSegs);
      if (parent === undefined) throw uvError("ENOENT", "link", "Directory does not exist", t.pathname);
      if (!isDir(parent)) throw uvError("EINVAL", "link", "Not a directory");
      if (options.symbolic) {
        const err = add(parent, f.name, new Link(t.segs));
        if (err) throw fsErr(err, "link");
        return;
      }
      const target = resolve(t.segs, false);
      if (target === undefined) throw uvError("ENOENT", "link", "File not found", t.pathname);
      if (isErr(target)) throw fsErr(target, "link");
      if (isDir(target)) throw uvError("EPERM", "link", "Cannot hardlink to a directory");
      const err = add(parent, f.name, target);
      if (err) throw fsErr(err, "link");
    },

    unlink(path) {
      const n = norm(path);
      const parent = resolve(n.baseSegs);
      if (parent === undefined) throw uvError("ENOENT", "unlink", "File not found", n.name);
      if (!isDir(parent)) throw uvError("ENOTDIR", "unlink", "Parent path is not a directory");
      const st = dirStat(parent, [n.name]);
      if (st === undefined) throw uvError("ENOENT", "unlink", "File not found", n.name);
      if (isErr(st)) throw fsErr(st, "unlink");
      if (st.type === "directory") throw uvError("EISDIR", "unlink", "Cannot unlink a directory");
      const r = remove(parent, [n.name], false);
      if (isErr(r)) throw fsErr(r, "unlink");
    },

    open(path, options) {
      const n = norm(path);
      const fail = (err) => fsErr(err, "open", n.pathname);
      if (options.exclusive && options.create) {
        const st = dirStat(root, n.segs);
        if (st !== undefined) {
          if (isErr(st)) throw fail(st);
          throw uvError("EEXIST", "open", undefined, n.pathname);
        }
      }
      let node = tryOpen(root, n.segs, 0, { followLinks: options.followSymlinks });
      if (isErr(node)) throw fail(node);
      if (node === undefined) {
        if (!options.create) throw uvError("ENOENT", "open", undefined, n.pathname);
        const parent = resolve(n.baseSegs);
        if (parent === undefined) throw uvError("ENOENT", "open", undefined, n.pathname);
        if (isErr(parent)) throw fail(parent);
        if (!isDir(parent)) throw uvError("ENOTDIR", "open", undefined, n.pathname);
        if (!real(parent).writable) throw uvError("EPERM", "open", undefined, n.pathname);
        node = tryOpen(root, n.segs, 0, { createAs: "file", followLinks: options.followSymlinks });
        if (node === undefined) throw fail(FAILED);
        if (isErr(node)) throw fail(node);
      }
      if (isFile(node)) {
        if (options.write && !node.stat().writable) throw fail(NOT_PERMITTED);
        if (options.truncate && options.write && node.stat().size > 0) {
          const err = node.resize(0);
          if (err) throw fail(err);
        }
      } else if (isDir(node)) {
        if (options.write) throw fail(NOT_PERMITTED_ON_DIRECTORY);
      } else if (options.write) {
        throw fail(NOT_PERMITTED);
      }
      const fd = nextFd++;
      opened.set(fd, { fd, read: !!options.read, write: !!options.write, append: !!options.append, node, position: 0 });
      return fd;
    },

    close(fd) {
      if (fd <= 2) return;
      opened.delete(fd);
    },

    write(fd, buffers, options = {}) {
      const o = tryGetFd(fd);
      if (o === undefined) throw uvError("EBADF", "write");
      const node = o.node;
      if (isDir(node)) throw uvError("EISDIR", "write");
      if (isLink(node)) throw uvError("EINVAL", "write");
      let pos = o.append ? node.stat().size : positionOf(options.position, o.position, "write");
      let total = 0;
      for (const b of buffers) {
        const r = node.write(pos, bytesOf(b));
        if (isErr(r)) throw fsErr(r, "write");
        pos += r;
        total += r;
      }
      if ((options.position === null || options.position === undefined) && !o.append) o.position += total;
      return total;
    },

    read(fd, buffers, options = {}) {
      const o = tryGetFd(fd);
      if (o === undefined || !o.read) throw uvError("EBADF", "read");
      const node = o.node;
      if (isDir(node)) throw uvError("EISDIR", "read");
      if (isLink(node)) throw uvError("EINVAL", "read");
      let pos = positionOf(options.position, o.position, "read");
      let total = 0;
      for (const b of buffers) {
        const view = bytesOf(b);
        const r = node.read(pos, view);
        pos += r;
        total += r;
        if (r < view.length) break;
      }
      if (options.position === null || options.position === undefined) o.position += total;
      return total;
    },

    readAll(pathOrFd) {
      if (typeof pathOrFd === "number") {
        const o = tryGetFd(pathOrFd);
        if (o === undefined || !o.read || !isFile(o.node)) throw uvError("EBADF", "fread");
        try {
          return o.node.readAllBytes();
        } finally {
          o.position = o.node.stat().size;
        }
      }
      const n = norm(pathOrFd);
      const r = resolve(n.segs);
      if (r === undefined) throw uvError("ENOENT", "readAll", undefined, n.pathname);
      if (isErr(r)) throw fsErr(r, "readAll");
      if (isDir(r)) throw uvError("EISDIR", "readAll");
      return r.readAllBytes();
    },

    writeAll(pathOrFd, data, options) {
      const bytes = bytesOf(data);
      if (typeof pathOrFd === "number") {
        const o = tryGetFd(pathOrFd);
        if (o === undefined || !o.write || !isFile(o.node)) throw uvError("EBADF", "fwrite");
        const file = o.node;
        const st = file.stat();
        if (!st.writable) throw uvError("EPERM", "fwrite");
        try {
          if (o.append || options.append) return fs.write(pathOrFd, [bytes], { position: st.size });
          const err = file.resize(bytes.length);
          if (err) throw fsErr(err, "fwriteAll");
          const r = file.write(0, bytes);
          if (isErr(r)) throw fsErr(r, "fwriteAll");
          return r;
        } finally {
          o.position = file.stat().size;
        }
      }
      const n = norm(pathOrFd);
      const node = resolve(n.segs);
      if (node !== undefined) {
        if (options.exclusive) throw uvError("EEXIST", "writeAll", "file already exists");
        if (isErr(node)) throw fsErr(node, "writeAll");
        if (isDir(node)) throw uvError("EISDIR", "writeAll");
        if (isLink(node)) throw uvError("EINVAL", "writeAll");
        const st = node.stat();
        if (!st.writable) throw uvError("EPERM", "writeAll");
        if (options.append) {
          const r = node.write(st.size, bytes);
          if (isErr(r)) throw fsErr(r, "writeAll");
          return r;
        }
        const err = node.resize(bytes.length);
        if (err) throw fsErr(err, "writeAll");
        const r = node.write(0, bytes);
        if (isErr(r)) throw fsErr(r, "writeAll");
        return r;
      }
      const parent = resolve(n.baseSegs);
      if (parent === undefined) throw uvError("ENOENT", "writeAll", undefined, n.pathname);
      if (isErr(parent)) throw fsErr(parent, "writeAll");
      if (isFile(parent)) throw uvError("ENOTDIR", "writeAll");
      if (isLink(parent)) throw uvError("EINVAL", "writeAll");
      if (!real(parent).writable) throw uvError("EPERM", "writeAll");
      const file = new File("regular", new Uint8Array(Math.min(bytes.length, BLOB_SIZE_LIMIT)), true);
      const r = file.write(0, bytes);
      if (isErr(r)) throw fsErr(r, "writeAll");
      const err = add(parent, n.name, file);
      if (err) throw fsErr(err, "writeAll");
      return r;
    },

    renameOrCopy(src, dest, options) {
      const s = norm(src);
      const d = norm(dest);
      const op = options.copy ? "copy" : "rename";
      const destNode = resolve(d.segs);
      if (isErr(destNode)) throw fsErr(destNode, "rename");
      const destParent = resolve(d.baseSegs);
      if (destParent === undefined) throw uvError("ENOENT", op, undefined, d.name);
      if (isErr(destParent)) throw fsErr(destParent, op);
      if (!isDir(destParent)) throw uvError("ENOTDIR", op);
      let srcParent;
      if (!options.copy) {
        srcParent = resolve(s.baseSegs);
        if (srcParent === undefined) throw uvError("ENOENT", op, undefined, s.name);
        if (isErr(srcParent)) throw fsErr(srcParent, op);
        if (!isDir(srcParent)) throw uvError("ENOTDIR", op);
        if (!real(srcParent).writable) throw uvError("EPERM", op);
      }
      const srcNode = resolve(s.segs);
      if (srcNode === undefined) throw uvError("ENOENT", op, undefined, s.pathname);
      if (isErr(srcNode)) throw fsErr(srcNode, op);
      if (options.copy && isDir(srcNode)) throw uvError("EISDIR", op);
      if (destNode !== undefined) {
        if (s.pathname === d.pathname) return;
        if (isDir(destNode) && !isDir(srcNode)) throw uvError("EISDIR", op);
        if (!isDir(destNode) && isDir(srcNode)) throw uvError("ENOTDIR", op);
        if (isDir(destNode) && real(destNode).entries.size > 0) throw uvError("ENOTEMPTY", op);
      }
      if (isDir(srcNode) && d.pathname.startsWith(s.pathname.endsWith("/") ? s.pathname : s.pathname + "/")) {
        throw uvError("EINVAL", op);
      }
      let item = srcNode;
      if (options.copy) {
        item = srcNode.clone();
        if (isErr(item)) throw fsErr(item, "cp");
      }
      if (destNode !== undefined) {
        const r = remove(destParent, [d.name], true);
        if (isErr(r)) throw fsErr(r, op);
      }
      const err = add(destParent, d.name, item);
      if (err) throw fsErr(err, op);
      if (srcParent !== undefined) {
        const r = remove(srcParent, [s.name], true);
        if (isErr(r)) throw fsErr(r, "rename");
      }
    },

    mkdir(path, options) {
      const n = norm(path);
      const existing = resolve(n.segs, false);
      if (existing !== undefined) {
        if (isDir(existing)) return undefined;
        if (isErr(existing)) throw fsErr(existing, "mkdir");
        throw uvError("EEXIST", "mkdir");
      }
      if (options.recursive) {
        const parts = n.segs.slice(0, -1);
        const name = n.segs[n.segs.length - 1];
        let current = root;
        const currentPath = [];
        let created;
        for (const part of parts) {
          currentPath.push(part);
          const node = tryOpen(current, [part], 0, {});
          if (node !== undefined) {
            if (isErr(node)) throw fsErr(node, "mkdir");
            if (!isDir(node)) throw uvError("ENOTDIR", "mkdir");
            current = node;
            continue;
          }
          if (!real(current).writable) throw uvError("EPERM", "mkdir");
          const dir = new Dir(true);
          const err = add(current, part, dir);
          if (err) throw fsErr(err, "mkdir");
          current = dir;
          created ??= toStr(currentPath);
        }
        const err = add(current, name, new Dir(true));
        if (err) throw fsErr(err, "mkdir");
        return created;
      }
      const parent = resolve(n.baseSegs);
      if (parent === undefined) throw uvError("ENOENT", "mkdir", undefined, n.name);
      if (isErr(parent)) throw fsErr(parent, "mkdir", n.name);
      if (!isDir(parent)) throw uvError("ENOTDIR", "mkdir");
      if (!real(parent).writable) throw uvError("EPERM", "mkdir");
      if (options.tmp) {
        if (tmpCounter >= MAX_U32) throw uvError("EPERM", "mkdir", "Too many temporary directories created");
        const name = n.name + tmpCounter++;
        const err = add(parent, name, new Dir(true));
        if (err) throw fsErr(err, "mkdir");
        return n.base + name;
      }
      const err = add(parent, n.name, new Dir(true));
      if (err) throw fsErr(err, "mkdir");
      return undefined;
    },

    rm(path, options) {
      const n = norm(path);
      const parent = resolve(n.baseSegs);
      if (parent === undefined) throw uvError("ENOENT", "rm", undefined, n.name);
      if (!isDir(parent)) throw uvError("ENOTDIR", "rm", undefined, n.name);
      if (!real(parent).writable) throw uvError("EPERM", "rm");
      if (options.dironly) {
        const st = dirStat(parent, [n.name]);
        if (st === undefined) throw uvError("ENOENT", "rm", undefined, n.name);
        if (isErr(st)) throw fsErr(st, "rm");
        if (st.type !== "directory") throw uvError("ENOTDIR", "rm");
      }
      const r = remove(parent, [n.name], !!options.recursive);
      if (isErr(r)) throw fsErr(r, "rm", n.name);
    },

    readdir(path, options) {
      const n = norm(path);
      const node = resolve(n.segs, false);
      if (node === undefined) throw uvError("ENOENT", "readdir", undefined, n.pathname);
      if (isErr(node)) throw fsErr(node, "readdir", n.pathname);
      if (isFile(node)) throw uvError("ENOTDIR", "readdir", undefined, n.pathname);
      if (isLink(node)) throw uvError("EINVAL", "readdir", undefined, n.pathname);
      const out = [];
      readdirImpl(node, n.segs, !!options.recursive, out);
      return out;
    },

    getFdHandle(fd) {
      let open = true;
      return {
        close() {
          if (open) {
            open = false;
            opened.delete(fd);
          }
        },
      };
    },

    cp(src, dest, options) {
      cpImpl(norm(src), norm(dest), options);
    },

    openAsBlob(path, options) {
      const n = norm(path);
      const node = resolve(n.segs);
      if (node === undefined || isErr(node)) throw uvError("ENOENT", "open", undefined, n.pathname);
      if (isDir(node)) throw uvError("EISDIR", "open");
      if (isLink(node)) throw uvError("EINVAL", "open");
      return new Blob([node.readAllBytes()], { type: options.type ?? "" });
    },

    getCwd() {
      return toStr(state().cwd);
    },

    setCwd(path) {
      if (path.length > 4096) throw uvError("ENAMETOOLONG", "chdir", undefined, path);
      if (path.length === 0) throw uvError("ENOENT", "chdir", undefined, path);
      const st = state();
      const resolved = path.startsWith("/") ? kjEval([], path.slice(1), true) : kjEval(st.cwd, path, false);
      const s = dirStat(root, resolved);
      const shown = resolved.join("/");
      if (s === undefined || isErr(s)) throw uvError("ENOENT", "chdir", undefined, shown);
      if (s.type !== "directory") throw uvError("ENOTDIR", "chdir", undefined, shown);
      st.cwd = resolved;
    },
  };

  const cpImpl = createCp({ root, tryOpen, resolve, resolveLink, add, remove, real, toStr });

  function readdirImpl(dir, segs, recursive, out) {
    const parentPath = toStr(segs);
    for (const [key, item] of real(dir).entries.list()) {
      const childSegs = segs.concat([key]);
      const name = recursive ? childSegs.join("/") : key;
      if (isFile(item)) {
        out.push({ name, parentPath, type: item.stat().device ? DIRENT_CHAR : DIRENT_FILE });
      } else if (isDir(item)) {
        out.push({ name, parentPath, type: DIRENT_DIR });
        if (recursive) readdirImpl(item, childSegs, recursive, out);
      } else {
        out.push({ name, parentPath, type: DIRENT_LINK });
        if (recursive) {
          guarded(() => {
            const err = checkSeen(item);
            if (err) throw fsErr(err, "readdir");
            const target = resolveLink(item);
            if (target === undefined || isFile(target)) return;
            if (isErr(target)) throw fsErr(target, "readdir");
            readdirImpl(target, childSegs, recursive, out);
          });
        }
      }
    }
  }
  return fs;
}

// fs.cp / fs.cpSync over the tree, as workerd's cpImpl (filesystem.c++).
import { nodeException, uvError } from "ext:cellhost_node/fs/errors.js";
import { Dir, fsErr, isDir, isErr, isFile, isLink } from "ext:cellhost_node/fs/nodes.js";

// t: the tree operations of createCore (root, tryOpen, resolve, resolveLink,
// add, remove, real, toStr). Returns cp(src, dest, options) on normalized
// paths.
export function createCp(t) {
  const { root, tryOpen, resolve, resolveLink, add, remove, real, toStr } = t;

  function openDestParent(d) {
    const r = tryOpen(root, d.baseSegs, 0, { createAs: "directory" });
    if (r === undefined || isLink(r)) throw uvError("EINVAL", "cp");
    if (isErr(r)) throw fsErr(r, "cp");
    if (isFile(r)) throw uvError("ENOTDIR", "cp");
    return r;
  }
  function cpLink(link, d) {
    const dir = openDestParent(d);
    const r = remove(dir, [d.name], false);
    if (isErr(r)) throw fsErr(r, "cp");
    const err = add(dir, d.name, link);
    if (err) throw fsErr(err, "cp");
  }
  function cpFile(file, d) {
    const dir = openDestParent(d);
    const r = remove(dir, [d.name], false);
    if (isErr(r)) throw fsErr(r, "cp");
    const cloned = file.clone();
    if (isErr(cloned)) throw fsErr(cloned, "cp");
    const err = add(dir, d.name, cloned);
    if (err) throw fsErr(err, "cp");
  }
  function cpAdd(dest, name, item) {
    const err = add(dest, name, item);
    if (err) throw fsErr(err, "cp");
  }
  function cpRemove(dest, name) {
    const r = remove(dest, [name], false);
    if (isErr(r)) throw fsErr(r, "cp");
  }
  function cpClone(file) {
    const c = file.clone();
    if (isErr(c)) throw fsErr(c, "cp");
    return c;
  }
  function cpDir(src, dest, options) {
    if (!real(dest).writable) throw uvError("EPERM", "cp", "Destination directory is not writable");
    if (real(src) === real(dest)) throw uvError("EINVAL", "cp", "Source and destination directories are the same");
    for (const [name, item] of real(src).entries.list()) {
      const existing = tryOpen(dest, [name], 0, { followLinks: options.deferenceSymlinks });
      if (isErr(existing)) throw fsErr(existing, "cp");
      if (isFile(item)) {
        if (existing === undefined) cpAdd(dest, name, cpClone(item));
        else if (isFile(existing) || isLink(existing)) {
          if (existing === item) continue;
          if (options.force) {
            cpRemove(dest, name);
            cpAdd(dest, name, cpClone(item));
          } else if (options.errorOnExist) {
            throw uvError("EEXIST", "cp", `Destination already exists: ${name}`);
          }
        } else {
          throw uvError("EISDIR", "cp", `Cannot copy file to directory: ${name}`);
        }
      } else if (isDir(item)) {
        if (existing === undefined) {
          const sub = new Dir(true);
          cpAdd(dest, name, sub);
          cpDir(item, sub, options);
        } else if (isFile(existing)) {
          throw uvError("ENOTDIR", "cp", `Cannot copy directory to file: ${name}`);
        } else if (isDir(existing)) {
          cpDir(item, existing, options);
        } else {
          throw uvError("EISDIR", "cp", `Cannot copy directory to symbolic link: ${name}`);
        }
      } else if (existing === undefined) {
        cpAdd(dest, name, item);
      } else if (isDir(existing)) {
        throw uvError("EISDIR", "cp", `Cannot copy link to directory: ${name}`);
      } else if (existing !== item) {
        if (options.force) {
          cpRemove(dest, name);
          cpAdd(dest, name, item);
        } else if (options.errorOnExist) {
          throw uvError("EEXIST", "cp", `Destination already exists: ${name}`);
        }
      }
    }
  }
  function cpImpl(s, d, options) {
    if (s.pathname === d.pathname) throw new Error("Source and destination paths must not be the same");
    const prefix = s.pathname.endsWith("/") ? s.pathname : s.pathname + "/";
    if (d.pathname.length > prefix.length && d.pathname.startsWith(prefix)) {
      throw nodeException("ERR_FS_CP_EINVAL", `Cannot copy '${s.pathname}' to a subdirectory of itself, '${d.pathname}'`);
    }
    const follow = options.deferenceSymlinks;
    const get = (x) => {
      const r = resolve(x.segs, follow);
      if (isErr(r)) throw fsErr(r, "cp");
      return r;
    };
    const srcNode = get(s);
    const destNode = get(d);
    if (srcNode === undefined) throw uvError("ENOENT", "cp", undefined, s.pathname);
    if (isFile(srcNode)) {
      if (destNode === undefined) return cpFile(srcNode, d);
      if (isDir(destNode)) throw nodeException("ERR_FS_CP_NON_DIR_TO_DIR");
      if (isLink(destNode) && follow) {
        const target = resolveLink(destNode);
        if (target === undefined) throw uvError("ENOENT", "cp", undefined, toStr(destNode.target));
        if (isErr(target)) throw fsErr(target, "cp");
        if (isDir(target)) throw uvError("EISDIR", "cp");
        const err = target.replace(cpClone(srcNode));
        if (err) throw fsErr(err, "cp");
        return;
      }
      if (options.force) return cpFile(srcNode, d);
      if (options.errorOnExist) throw nodeException("ERR_FS_CP_EEXIST");
      return;
    }
    if (isDir(srcNode)) {
      if (!options.recursive) throw nodeException("ERR_FS_EISDIR");
      if (destNode === undefined) {
        const r = tryOpen(root, d.segs, 0, { createAs: "directory" });
        if (r === undefined || isLink(r)) throw uvError("EINVAL", "cp");
        if (isErr(r)) throw fsErr(r, "cp");
        if (isFile(r)) throw uvError("ENOTDIR", "cp");
        return cpDir(srcNode, r, options);
      }
      if (isFile(destNode)) throw nodeException("ERR_FS_CP_DIR_TO_NON_DIR");
      if (isDir(destNode)) return cpDir(srcNode, destNode, options);
      throw uvError("ENOTDIR", "cp");
    }
    if (destNode === undefined) return cpLink(srcNode, d);
    if (isDir(destNode)) throw uvError("ENOTDIR", "cp");
    if (options.force) return cpLink(srcNode, d);
    if (options.errorOnExist) throw nodeException("ERR_FS_CP_EEXIST");
  }

  return cpImpl;
}

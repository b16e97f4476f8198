// node:fs/promises: node:fs's promises (node_fs.js), one instance.
import { promises } from "node:cellhost/fs";

export const {
  FileHandle, access, appendFile, chmod, chown, constants, copyFile, cp, glob, lchmod, lchown,
  link, lstat, lutimes, mkdir, mkdtemp, open, opendir, readFile, readdir, readlink, realpath,
  rename, rm, rmdir, stat, statfs, symlink, truncate, unlink, utimes, watch, writeFile,
} = promises;
// A copy, as workerd's: not the same object as fs.promises.
export default { ...promises };

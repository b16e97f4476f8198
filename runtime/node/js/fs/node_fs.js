// node:fs for a Worker: workerd's in-memory file system (vfs.js) over what
// the runtime gives it: the Worker's modules under /bundle (read when first
// looked at), a /tmp per event (request) and fd 1/2 output to the log.
// A Worker's import of node:fs resolves here (runtime/host/src/node.rs).
import { core, internals } from "ext:core/mod.js";
import { createFs } from "ext:cellhost_node/fs/vfs.js";

const { op_node_bundle_names, op_node_bundle_read, op_cellhost_log } = core.ops;
const { TextDecoder } = core.loadExtScript("ext:deno_web/08_text_encoding.js");
const decoder = new TextDecoder();

const host = {
  bundle: () => op_node_bundle_names().map((name) => [name, op_node_bundle_read(name)]),
  scope: () => internals.currentEvent?.(),
  write(fd, data) {
    const text = typeof data === "string" ? data : decoder.decode(data);
    op_cellhost_log(fd === 2 ? 3 : 1, text);
  },
};

const { fs, promises, cwd, chdir } = createFs(host);
// process.cwd()/chdir() are node:fs's (js/deno.js asks once node:fs loads).
internals.cellhostFsCwd = { cwd, chdir };
export { promises };
export const {
  Dir, Dirent, F_OK, FileReadStream, FileWriteStream, R_OK, ReadStream, Stats, W_OK, WriteStream,
  X_OK, access, accessSync, appendFile, appendFileSync, chmod, chmodSync, chown, chownSync, close,
  closeSync, constants, copyFile, copyFileSync, cp, cpSync, createReadStream, createWriteStream,
  exists, existsSync, fchmod, fchmodSync, fchown, fchownSync, fdatasync, fdatasyncSync, fstat,
  fstatSync, fsync, fsyncSync, ftruncate, ftruncateSync, futimes, futimesSync, glob, globSync,
  lchmod, lchmodSync, lchown, lchownSync, link, linkSync, lstat, lstatSync, lutimes, lutimesSync,
  mkdir, mkdirSync, mkdtemp, mkdtempSync, open, openAsBlob, openSync, opendir, opendirSync, read,
  readFile, readFileSync, readSync, readdir, readdirSync, readlink, readlinkSync, readv, readvSync,
  realpath, realpathSync, rename, renameSync, rm, rmSync, rmdir, rmdirSync, stat, statSync, statfs,
  statfsSync, symlink, symlinkSync, truncate, truncateSync, unlink, unlinkSync, unwatchFile,
  utimes, utimesSync, watch, watchFile, write, writeFile, writeFileSync, writeSync, writev,
  writevSync,
} = fs;
export default fs;

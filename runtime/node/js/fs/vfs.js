// node:fs and node:fs/promises as workerd 1.20261117 gives them: an
// in-memory file system with the Worker's modules read-only under /bundle, a
// per-request writable /tmp and the /dev devices.
//
// createFs(host) -> { fs, promises, cwd, chdir }
//   host.bundle()  -> [[name, Uint8Array], ...]: the Worker's modules, read
//                     once, on first use of /bundle
//   host.scope()   -> an object naming the current request (the same object
//                     for the whole request), or undefined outside one
//   host.write(fd, Uint8Array): output written to fd 1 or 2
//   fs       the object of node:fs's exports (its default export; the
//            module's named exports are these keys plus `default`)
//   promises node:fs/promises' exports (fs.promises is this object; the
//            module's default export is a copy, {...promises})
//   cwd(), chdir(dir): process.cwd()/process.chdir(), per request
import { validateString } from "ext:cellhost_node/fs/errors.js";
import { createCallback } from "ext:cellhost_node/fs/callback.js";
import { createCore } from "ext:cellhost_node/fs/core.js";
import { createPromises } from "ext:cellhost_node/fs/promises.js";
import { createStreams } from "ext:cellhost_node/fs/streams.js";
import { createSync } from "ext:cellhost_node/fs/sync.js";
import { Dir, Dirent, Stats, constants, makeNormalizePath, makeValidators } from "ext:cellhost_node/fs/utils.js";

export function createFs(host) {
  const cffs = createCore(host);
  const getCwd = () => cffs.getCwd();
  const normalizePath = makeNormalizePath(getCwd);
  const ctx = { cffs, normalizePath, getCwd, v: makeValidators(normalizePath) };
  const sync = createSync(ctx);
  const callbacks = createCallback(ctx, sync);
  const { ReadStream, WriteStream, createReadStream, createWriteStream } = createStreams(callbacks, normalizePath);
  const promises = createPromises(ctx, sync, { createReadStream, createWriteStream });
  const { F_OK, R_OK, W_OK, X_OK } = constants;

  // In the order of workerd's default export.
  const fs = {
    constants,
    F_OK,
    R_OK,
    W_OK,
    X_OK,
    promises,
    Dirent,
    Dir,
    Stats,
    ...callbacks,
    accessSync: sync.accessSync,
    existsSync: sync.existsSync,
    appendFileSync: sync.appendFileSync,
    chmodSync: sync.chmodSync,
    chownSync: sync.chownSync,
    closeSync: sync.closeSync,
    copyFileSync: sync.copyFileSync,
    cpSync: sync.cpSync,
    fchmodSync: sync.fchmodSync,
    fchownSync: sync.fchownSync,
    fdatasyncSync: sync.fdatasyncSync,
    fstatSync: sync.fstatSync,
    fsyncSync: sync.fsyncSync,
    ftruncateSync: sync.ftruncateSync,
    futimesSync: sync.futimesSync,
    globSync: sync.globSync,
    lchmodSync: sync.lchmodSync,
    lchownSync: sync.lchownSync,
    lutimesSync: sync.lutimesSync,
    linkSync: sync.linkSync,
    lstatSync: sync.lstatSync,
    mkdirSync: sync.mkdirSync,
    mkdtempSync: sync.mkdtempSync,
    opendirSync: sync.opendirSync,
    openSync: sync.openSync,
    readdirSync: sync.readdirSync,
    readFileSync: sync.readFileSync,
    readlinkSync: sync.readlinkSync,
    readSync: sync.readSync,
    readvSync: sync.readvSync,
    realpathSync: sync.realpathSync,
    renameSync: sync.renameSync,
    rmdirSync: sync.rmdirSync,
    rmSync: sync.rmSync,
    statSync: sync.statSync,
    statfsSync: sync.statfsSync,
    symlinkSync: sync.symlinkSync,
    truncateSync: sync.truncateSync,
    unlinkSync: sync.unlinkSync,
    utimesSync: sync.utimesSync,
    writeFileSync: sync.writeFileSync,
    writeSync: sync.writeSync,
    writevSync: sync.writevSync,
    WriteStream,
    ReadStream,
    FileWriteStream: WriteStream,
    FileReadStream: ReadStream,
    createReadStream,
    createWriteStream,
    openAsBlob: sync.openAsBlob,
  };

  return {
    fs,
    promises,
    cwd: getCwd,
    chdir(directory) {
      validateString(directory, "directory");
      cffs.setCwd(directory);
    },
  };
}

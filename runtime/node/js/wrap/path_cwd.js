// workerd's path.resolve (and so path.relative) resolves relative paths
// against "/", where deno_node's uses process.cwd() ("/bundle", node:fs's
// working directory): deno_node's posix functions are wrapped once, on the
// object node:path, node:path/posix and `path.posix` share.
const patched = Symbol.for("cellhost.path.cwd");
if (!m.posix[patched]) {
  const { resolve, relative } = m.posix;
  const fromRoot = (...args) => {
    for (let i = args.length - 1; i >= 0; i--) {
      // A non-string: deno_node's resolve throws for it, naming its index.
      if (typeof args[i] !== "string") return resolve(...args);
      if (args[i][0] === "/") return resolve(...args);
    }
    return resolve("/", ...args);
  };
  m.posix.resolve = fromRoot;
  m.posix.relative = (from, to) => {
    if (typeof from === "string" && typeof to === "string") {
      return relative(fromRoot(from), fromRoot(to));
    }
    try {
      return relative(from, to);
    } catch (e) {
      // deno_node names either argument "path"; workerd "from" and "to".
      if (e?.code === "ERR_INVALID_ARG_TYPE") {
        e.message = e.message.replace('"path"', typeof from !== "string" ? '"from"' : '"to"');
      }
      throw e;
    }
  };
  m.posix[patched] = true;
}

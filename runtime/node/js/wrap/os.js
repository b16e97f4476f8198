// node:os as workerd has it: a Worker sees no host, so every answer is a
// fixed value (workerd 1.20261117's), not deno_node's (which asks the host's
// kernel). `constants` stay deno_node's Linux tables.
import * as m from "node:os";

function argType(name, value) {
  const got = value === undefined ? "Received undefined" : `Received type ${typeof value} (${typeof value === "string" ? `'${value}'` : String(value)})`;
  const e = new TypeError(`The "${name}" argument must be of type number. ${got}`);
  e.code = "ERR_INVALID_ARG_TYPE";
  return e;
}

const os = {
  EOL: "\n",
  devNull: "/dev/null",
  constants: m.constants,
  availableParallelism: () => 1,
  arch: () => "x64",
  cpus: () => [],
  endianness: () => "LE",
  freemem: () => 0,
  getPriority(pid) {
    if (pid !== undefined && typeof pid !== "number") throw argType("pid", pid);
    return 0;
  },
  homedir: () => "/tmp/",
  hostname: () => "localhost",
  loadavg: () => [0, 0, 0],
  machine: () => "x86_64",
  networkInterfaces: () => ({}),
  platform: () => "linux",
  release: () => "",
  setPriority(pid, priority) {
    if (typeof pid !== "number") throw argType("pid", pid);
    if (priority !== undefined && typeof priority !== "number") throw argType("priority", priority);
  },
  tmpdir: () => "/tmp/",
  totalmem: () => 0,
  type: () => "Linux",
  uptime: () => 0,
  userInfo: () => ({}),
  version: () => "",
};
export const {
  EOL, devNull, constants, availableParallelism, arch, cpus, endianness, freemem, getPriority, homedir,
  hostname, loadavg, machine, networkInterfaces, platform, release, setPriority, tmpdir, totalmem, type,
  uptime, userInfo, version,
} = os;
export default os;

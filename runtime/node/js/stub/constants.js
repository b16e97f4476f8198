// node:constants: Node's deprecated union of the os, fs and crypto constants.
import { constants as os } from "node:os";
import { constants as fs } from "node:fs";
import { constants as crypto } from "node:crypto";
const constants = { ...os.dlopen, ...os.errno, ...os.priority, ...os.signals, ...fs, ...crypto };
export default constants;

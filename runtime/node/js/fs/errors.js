// node:fs errors and argument checks, shaped as workerd's: the Node-style
// errors its JS layer throws (ERR_* classes, NodeSyscallError) and the plain
// `Error`s with syscall/code[/path][/dest] its C++ layer throws.
import { Buffer } from "node:buffer";

// ---------------------------------------------------------------------------
// A small util.inspect, enough for the values argument errors quote.

const kMeta = [];
for (let i = 0; i < 0x20; i++) kMeta[i] = "\\x" + i.toString(16).toUpperCase().padStart(2, "0");
kMeta[8] = "\\b";
kMeta[9] = "\\t";
kMeta[10] = "\\n";
kMeta[12] = "\\f";
kMeta[13] = "\\r";

function quoteString(s) {
  let q = "'";
  if (s.includes("'")) {
    if (!s.includes('"')) q = '"';
    else if (!s.includes("`") && !s.includes("${")) q = "`";
  }
  let out = "";
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch === q || ch === "\\") out += "\\" + ch;
    else if (c < 0x20) out += kMeta[c];
    else if (c === 0x7f) out += "\\x7F";
    else out += ch;
  }
  return q + out + q;
}

const kIdent = /^[a-zA-Z_][a-zA-Z_0-9]*$/;

export function inspect(v, opts = {}, depth = 0) {
  const maxDepth = opts.depth === undefined ? 2 : opts.depth;
  switch (typeof v) {
    case "string":
      return quoteString(v);
    case "number":
      return Object.is(v, -0) ? "-0" : String(v);
    case "bigint":
      return `${v}n`;
    case "boolean":
    case "undefined":
      return String(v);
    case "symbol":
      return v.toString();
    case "function": {
      const isClass = Function.prototype.toString.call(v).startsWith("class");
      const base = `[${isClass ? "class" : "Function"}${v.name ? `: ${v.name}` : " (anonymous)"}]`;
      return base;
    }
  }
  if (v === null) return "null";
  if (Buffer.isBuffer(v)) {
    const hex = [...v.subarray(0, 50)].map((b) => b.toString(16).padStart(2, "0"));
    return `<Buffer${hex.length ? " " + hex.join(" ") : ""}${v.length > 50 ? ` ... ${v.length - 50} more bytes` : ""}>`;
  }
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? "Invalid Date" : v.toISOString();
  if (v instanceof RegExp) return String(v);
  if (v instanceof Error) return v.stack || String(v);
  const proto = Object.getPrototypeOf(v);
  const ctor = proto === null ? null : proto.constructor && proto.constructor.name;
  if (maxDepth !== null && depth > maxDepth) return Array.isArray(v) ? "[Array]" : `[${ctor || "Object"}]`;
  if (Array.isArray(v)) {
    if (v.length === 0) return "[]";
    const items = v.slice(0, 100).map((x) => inspect(x, opts, depth + 1));
    if (v.length > 100) items.push(`... ${v.length - 100} more items`);
    return `[ ${items.join(", ")} ]`;
  }
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
    const items = [...v].slice(0, 100).map((x) => inspect(x));
    return `${ctor}(${v.length}) ${items.length ? `[ ${items.join(", ")} ]` : "[]"}`;
  }
  const keys = Object.keys(v);
  const prefix = proto === null ? "[Object: null prototype] " : ctor && ctor !== "Object" ? ctor + " " : "";
  if (keys.length === 0) return `${prefix}{}`;
  const items = keys.map((k) => `${kIdent.test(k) ? k : quoteString(k)}: ${inspect(v[k], opts, depth + 1)}`);
  return `${prefix}{ ${items.join(", ")} }`;
}

// ---------------------------------------------------------------------------
// Node-style errors (workerd's node-internal:internal_errors).

const kTypes = ["string", "function", "number", "object", "Function", "Object", "boolean", "bigint", "symbol"];
const classRegExp = /^([A-Z][a-z0-9]*)+$/;

export class NodeErrorAbstraction extends Error {
  code;
  constructor(name, code, message) {
    super(message);
    this.code = code;
    this.name = name;
  }
  toString() {
    return `${this.name} [${this.code}]: ${this.message}`;
  }
}

export class NodeError extends NodeErrorAbstraction {
  constructor(code, message) {
    super(Error.prototype.name, code, message);
  }
}

function ownToString() {
  return `${this.name} [${this.code}]: ${this.message}`;
}

export class NodeRangeError extends NodeErrorAbstraction {
  constructor(code, message) {
    super(RangeError.prototype.name, code, message);
    Object.setPrototypeOf(this, RangeError.prototype);
    this.toString = ownToString;
  }
}

export class NodeTypeError extends NodeErrorAbstraction {
  constructor(code, message) {
    super(TypeError.prototype.name, code, message);
    Object.setPrototypeOf(this, TypeError.prototype);
    this.toString = ownToString;
  }
}

function joinList(list, word) {
  if (list.length > 2) {
    const last = list.pop();
    return `${list.join(", ")}, ${word}${last}`;
  }
  return list.length === 2 ? `${list[0]} ${word}${list[1]}` : `${list[0]}`;
}

function invalidArgTypeMessage(name, expected) {
  expected = Array.isArray(expected) ? expected : [expected];
  let msg = "The ";
  if (name.endsWith(" argument")) msg += `${name} `;
  else msg += `"${name}" ${name.includes(".") ? "property" : "argument"} `;
  msg += "must be ";
  const types = [];
  const instances = [];
  const other = [];
  for (const value of expected) {
    if (kTypes.includes(value)) types.push(value.toLowerCase());
    else if (classRegExp.test(value)) instances.push(value);
    else other.push(value);
  }
  if (instances.length > 0) {
    const pos = types.indexOf("object");
    if (pos !== -1) {
      types.splice(pos, 1);
      instances.push("Object");
    }
  }
  if (types.length > 0) {
    if (types.length > 2) msg += `one of type ${joinList(types, "or ")}`;
    else if (types.length === 2) msg += `one of type ${types[0]} or ${types[1]}`;
    else msg += `of type ${types[0]}`;
    if (instances.length > 0 || other.length > 0) msg += " or ";
  }
  if (instances.length > 0) {
    if (instances.length > 2) msg += `an instance of ${joinList(instances, "or ")}`;
    else {
      msg += `an instance of ${instances[0]}`;
      if (instances.length === 2) msg += ` or ${instances[1]}`;
    }
    if (other.length > 0) msg += " or ";
  }
  if (other.length > 0) {
    if (other.length > 2) msg += `one of ${joinList(other, "or ")}`;
    else if (other.length === 2) msg += `one of ${other[0]} or ${other[1]}`;
    else {
      if (other[0].toLowerCase() !== other[0]) msg += "an ";
      msg += `${other[0]}`;
    }
  }
  return msg;
}

function receivedHelper(input) {
  if (input == null) return ` Received ${input}`;
  if (typeof input === "function" && input.name) return ` Received function ${input.name}`;
  if (typeof input === "object") {
    if (input.constructor && input.constructor.name) return ` Received an instance of ${input.constructor.name}`;
    return ` Received ${inspect(input, { depth: -1 })}`;
  }
  let inspected = inspect(input);
  if (inspected.length > 25) inspected = `${inspected.slice(0, 25)}...`;
  return ` Received type ${typeof input} (${inspected})`;
}

function addNumericalSeparator(val) {
  let res = "";
  let i = val.length;
  const start = val[0] === "-" ? 1 : 0;
  for (; i >= start + 4; i -= 3) res = `_${val.slice(i - 3, i)}${res}`;
  return `${val.slice(0, i)}${res}`;
}

export class ERR_INVALID_ARG_TYPE extends NodeTypeError {
  constructor(name, expected, actual) {
    super("ERR_INVALID_ARG_TYPE", `${invalidArgTypeMessage(name, expected)}.${receivedHelper(actual)}`);
  }
}

export class ERR_INVALID_ARG_VALUE extends NodeTypeError {
  constructor(name, value, reason = "is invalid") {
    const type = name.includes(".") ? "property" : "argument";
    super("ERR_INVALID_ARG_VALUE", `The ${type} '${name}' ${reason}. Received ${inspect(value)}`);
  }
}

export class ERR_OUT_OF_RANGE extends RangeError {
  code = "ERR_OUT_OF_RANGE";
  constructor(str, range, input, replaceDefaultBoolean = false) {
    let msg = replaceDefaultBoolean ? str : `The value of "${str}" is out of range.`;
    let received;
    if (Number.isInteger(input) && Math.abs(input) > 2 ** 32) {
      received = addNumericalSeparator(String(input));
    } else if (typeof input === "bigint") {
      received = String(input);
      if (input > 2n ** 32n || input < -(2n ** 32n)) received = addNumericalSeparator(received);
      received += "n";
    } else {
      received = inspect(input);
    }
    msg += ` It must be ${range}. Received ${received}`;
    super(msg);
    const { name } = this;
    this.name = `${name} [${this.code}]`;
    this.stack; // eslint-disable-line no-unused-expressions
    this.name = name;
  }
}

export class ERR_BUFFER_OUT_OF_BOUNDS extends NodeRangeError {
  constructor(name) {
    super("ERR_BUFFER_OUT_OF_BOUNDS", name ? `"${name}" is outside of buffer bounds` : "Attempt to access memory outside buffer bounds");
  }
}

export class ERR_UNKNOWN_ENCODING extends NodeTypeError {
  constructor(x) {
    super("ERR_UNKNOWN_ENCODING", `Unknown encoding: ${x}`);
  }
}

export class ERR_MISSING_ARGS extends NodeTypeError {
  constructor(...args) {
    let msg = "The ";
    const len = args.length;
    const wrap = (a) => `"${a}"`;
    args = args.map((a) => (Array.isArray(a) ? a.map(wrap).join(" or ") : wrap(a)));
    if (len === 1) msg += `${args[0]} argument`;
    else if (len === 2) msg += `${args[0]} and ${args[1]} arguments`;
    else msg += `${args.slice(0, len - 1).join(", ")}, and ${args[len - 1]} arguments`;
    super("ERR_MISSING_ARGS", `${msg} must be specified`);
  }
}

export class ERR_METHOD_NOT_IMPLEMENTED extends NodeError {
  constructor(name) {
    super("ERR_METHOD_NOT_IMPLEMENTED", `The ${typeof name === "symbol" ? name.description : name} method is not implemented`);
  }
}

export class ERR_STREAM_DESTROYED extends NodeError {
  constructor(name) {
    super("ERR_STREAM_DESTROYED", `Cannot call ${typeof name === "symbol" ? name.description : name} after a stream was destroyed`);
  }
}

export class ERR_SYSTEM_ERROR extends NodeError {
  constructor(message) {
    super("ERR_SYSTEM_ERROR", message);
  }
}

export class ERR_INVALID_THIS extends NodeTypeError {
  constructor(x) {
    super("ERR_INVALID_THIS", `Value of "this" must be of type ${x}`);
  }
}

export class ERR_UNSUPPORTED_OPERATION extends NodeError {
  constructor() {
    super("ERR_UNSUPPORTED_OPERATION", "The requested operation is unsupported");
  }
}

export class ERR_DIR_CLOSED extends NodeError {
  constructor() {
    super("ERR_DIR_CLOSED", "Directory is closed");
  }
}

export class NodeSyscallError extends NodeError {
  syscall;
  errno;
  constructor(code, message, syscall) {
    super(code, message);
    this.syscall = syscall;
  }
}

export class ERR_ENOENT extends NodeSyscallError {
  path;
  constructor(path, options) {
    super("ENOENT", `no such file or directory, ${options.syscall} '${path}'`, options.syscall);
    this.path = path;
    this.errno = -2;
  }
}

export class ERR_EBADF extends NodeSyscallError {
  constructor(options) {
    super("EBADF", "Bad file descriptor", options.syscall);
    this.errno = -9;
  }
}

export class ERR_EINVAL extends NodeSyscallError {
  path;
  constructor(options) {
    super("EINVAL", options.path ? `invalid argument, ${options.syscall} '${options.path}'` : "invalid argument", options.syscall);
    if (options.path !== undefined) this.path = options.path;
    this.errno = -22;
  }
}

export class ERR_EEXIST extends NodeSyscallError {
  path;
  constructor(options) {
    super("EEXIST", options.path ? `file already exists, ${options.syscall} '${options.path}'` : "file already exists", options.syscall);
    if (options.path !== undefined) this.path = options.path;
    this.errno = -17;
  }
}

// ---------------------------------------------------------------------------
// The errors workerd's C++ layer throws: a plain Error whose own keys are
// syscall, code[, path][, dest] (libuv's names and messages, no errno).

const kUvMessages = {
  EACCES: "permission denied",
  EBADF: "bad file descriptor",
  EEXIST: "file already exists",
  EFBIG: "file too large",
  EINVAL: "invalid argument",
  EISDIR: "illegal operation on a directory",
  ELOOP: "too many symbolic links encountered",
  EMFILE: "too many open files",
  ENAMETOOLONG: "name too long",
  ENOENT: "no such file or directory",
  ENOSYS: "function not implemented",
  ENOTDIR: "not a directory",
  ENOTEMPTY: "directory not empty",
  EPERM: "operation not permitted",
  EIO: "input/output error",
};

export function uvError(code, syscall, message, path, dest) {
  const hasPath = path !== undefined && path !== null && path !== "";
  let msg = message;
  if (msg === undefined || msg === null) {
    msg = kUvMessages[code];
    if (hasPath) msg += `, ${syscall} '${path}'`;
  }
  const e = new Error(msg);
  e.syscall = syscall;
  e.code = code;
  if (hasPath) e.path = path;
  if (dest !== undefined && dest !== null && dest !== "") e.dest = dest;
  return e;
}

const kNodeExceptionMessages = {
  ERR_FS_CP_EEXIST: "File already exists",
  ERR_FS_CP_DIR_TO_NON_DIR: "Cannot copy directory to non-directory",
  ERR_FS_CP_EINVAL: "Invalid cp operation",
  ERR_FS_CP_NON_DIR_TO_DIR: "Cannot copy non-directory to directory",
  ERR_FS_EISDIR: "Expected a file but found a directory",
};

export function nodeException(code, message) {
  const e = new Error(message ?? kNodeExceptionMessages[code]);
  e.code = code;
  return e;
}

// ---------------------------------------------------------------------------
// Validators (workerd's node-internal:validators).

export const isArrayBufferView = (v) => ArrayBuffer.isView(v);

export function validateInteger(value, name, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER) {
  if (typeof value !== "number") throw new ERR_INVALID_ARG_TYPE(name, "number", value);
  if (!Number.isInteger(value)) throw new ERR_OUT_OF_RANGE(name, "an integer", value);
  if (value < min || value > max) throw new ERR_OUT_OF_RANGE(name, `>= ${min} && <= ${max}`, value);
}

export function validateObject(value, name) {
  if (value === null || Array.isArray(value) || typeof value !== "object") throw new ERR_INVALID_ARG_TYPE(name, "Object", value);
}

export function validateInt32(value, name, min = -2147483648, max = 2147483647) {
  if (typeof value !== "number" || value !== (value | 0)) {
    if (typeof value !== "number") throw new ERR_INVALID_ARG_TYPE(name, "number", value);
    if (!Number.isInteger(value)) throw new ERR_OUT_OF_RANGE(name, "an integer", value);
    throw new ERR_OUT_OF_RANGE(name, `>= ${min} && <= ${max}`, value);
  }
  if (value < min || value > max) throw new ERR_OUT_OF_RANGE(name, `>= ${min} && <= ${max}`, value);
}

export function validateUint32(value, name, positive) {
  if (value !== value >>> 0) {
    if (typeof value !== "number") throw new ERR_INVALID_ARG_TYPE(name, "number", value);
    if (!Number.isInteger(value)) throw new ERR_OUT_OF_RANGE(name, "an integer", value);
    throw new ERR_OUT_OF_RANGE(name, `>= ${positive ? 1 : 0} && < 4294967296`, value);
  }
  if (positive && value === 0) throw new ERR_OUT_OF_RANGE(name, ">= 1 && < 4294967296", value);
}

export function validateString(value, name) {
  if (typeof value !== "string") throw new ERR_INVALID_ARG_TYPE(name, "string", value);
}

export function validateBoolean(value, name) {
  if (typeof value !== "boolean") throw new ERR_INVALID_ARG_TYPE(name, "boolean", value);
}

export function validateFunction(value, name) {
  if (typeof value !== "function") throw new ERR_INVALID_ARG_TYPE(name, "Function", value);
}

export function validateOneOf(value, name, oneOf) {
  if (!oneOf.includes(value)) {
    const allowed = oneOf.map((v) => (typeof v === "string" ? `'${v}'` : String(v))).join(", ");
    throw new ERR_INVALID_ARG_VALUE(name, value, "must be one of: " + allowed);
  }
}

export function validateAbortSignal(signal, name) {
  if (signal !== undefined && (signal === null || typeof signal !== "object" || !("aborted" in signal))) {
    throw new ERR_INVALID_ARG_TYPE(name, "AbortSignal", signal);
  }
}

export function validateThisInternalField(object, fieldKey, className) {
  if (typeof object !== "object" || object === null || !Object.prototype.hasOwnProperty.call(object, fieldKey)) {
    throw new ERR_INVALID_THIS(className);
  }
}

const kHexEncodings = new Set(["hex"]);
export function validateEncoding(data, encoding) {
  const normalized = typeof encoding === "string" ? encoding.toLowerCase() : encoding;
  if (kHexEncodings.has(normalized) && data.length % 2 !== 0) {
    throw new ERR_INVALID_ARG_VALUE("encoding", encoding, `is invalid for data of length ${data.length}`);
  }
}

const kOctal = /^[0-7]+$/;
export function parseFileMode(value, name, def) {
  if (def != null) value ??= def;
  if (typeof value === "string") {
    if (!kOctal.test(value)) throw new ERR_INVALID_ARG_VALUE(name, value, "must be a 32-bit unsigned integer or an octal string");
    value = Number.parseInt(value, 8);
  }
  validateUint32(value, name);
  return value;
}

// buf.toString(encoding) as workerd's Buffer answers it: 'buffer' is not an
// encoding there.
export function bufferToString(buf, encoding) {
  if (encoding === "buffer" || (encoding !== undefined && !Buffer.isEncoding(encoding))) throw new ERR_UNKNOWN_ENCODING(encoding);
  return buf.toString(encoding);
}

// node:dns, part 2 of 4 (see dns.js): errors and argument checks.
// ---------------------------------------------------------------------------
// Errors (the shapes of workerd's internal_errors).

class NodeErrorAbstraction extends Error {
  constructor(name, code, message) {
    super(message);
    this.code = code;
    this.name = name;
  }
  toString() {
    return `${this.name} [${this.code}]: ${this.message}`;
  }
}

class NodeError extends NodeErrorAbstraction {
  constructor(code, message) {
    super(Error.prototype.name, code, message);
  }
}

class NodeTypeError extends NodeErrorAbstraction {
  constructor(code, message) {
    super(TypeError.prototype.name, code, message);
    // workerd re-parents these onto TypeError.prototype and gives them an own
    // toString.
    Object.setPrototypeOf(this, TypeError.prototype);
    this.toString = function () {
      return `${this.name} [${this.code}]: ${this.message}`;
    };
  }
}

class ERR_OPTION_NOT_IMPLEMENTED extends NodeError {
  constructor(name) {
    super("ERR_OPTION_NOT_IMPLEMENTED", `The ${name} option is not implemented`);
  }
}

class ERR_FALSY_VALUE_REJECTION extends NodeError {
  constructor(reason) {
    super("ERR_FALSY_VALUE_REJECTION", "Promise was rejected with falsy value");
    this.reason = reason;
  }
}

class DnsError extends NodeError {
  constructor(hostname, code, syscall) {
    super(code, `${syscall} ${code} ${hostname}`);
    this.errno = undefined;
    this.hostname = hostname;
    this.syscall = syscall;
  }
}

// A small stand-in for util.inspect, enough for argument-error messages.
function quoteString(s) {
  let q = "'";
  if (s.includes("'")) {
    if (!s.includes('"')) q = '"';
    else if (!s.includes("`") && !s.includes("${")) q = "`";
  }
  let out = "";
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === q || ch === "\\") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (ch === "\v") out += "\\x0B";
    else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).toUpperCase().padStart(2, "0");
    else out += ch;
  }
  return q + out + q;
}

function inspect(v, depth = 0) {
  switch (typeof v) {
    case "string":
      return quoteString(v);
    case "number":
      return Object.is(v, -0) ? "-0" : String(v);
    case "bigint":
      return `${v}n`;
    case "undefined":
    case "boolean":
      return String(v);
    case "symbol":
      return v.toString();
    case "function": {
      const kind = /^class\s/.test(Function.prototype.toString.call(v)) ? "class" : "Function";
      return v.name ? `[${kind}: ${v.name}]` : `[${kind} (anonymous)]`;
    }
  }
  if (v === null) return "null";
  if (Array.isArray(v)) {
    if (depth > 2) return "[Array]";
    if (v.length === 0) return "[]";
    return `[ ${v.map((x) => inspect(x, depth + 1)).join(", ")} ]`;
  }
  if (depth > 2) return "[Object]";
  const keys = Object.keys(v);
  const ctor = Object.getPrototypeOf(v) === null ? "[Object: null prototype] " : "";
  if (keys.length === 0) return `${ctor}{}`;
  const parts = keys.map((k) => {
    const key = /^[A-Za-z_$][\w$]*$/.test(k) ? k : quoteString(k);
    return `${key}: ${inspect(v[k], depth + 1)}`;
  });
  return `${ctor}{ ${parts.join(", ")} }`;
}

const kTypes = ["string", "function", "number", "object", "Function", "Object", "boolean", "bigint", "symbol"];
const classRegExp = /^([A-Z][a-z0-9]*)+$/;

function describeExpected(name, expected) {
  expected = Array.isArray(expected) ? expected : [expected];
  let msg = "The ";
  if (name.endsWith(" argument")) msg += `${name} `;
  else msg += `"${name}" ${name.includes(".") ? "property" : "argument"} `;
  msg += "must be ";
  const types = [];
  const instances = [];
  const other = [];
  for (const value of expected) {
    if (kTypes.includes(value)) types.push(value.toLocaleLowerCase());
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
    if (types.length > 2) {
      const last = types.pop();
      msg += `one of type ${types.join(", ")}, or ${last}`;
    } else if (types.length === 2) {
      msg += `one of type ${types[0]} or ${types[1]}`;
    } else {
      msg += `of type ${types[0]}`;
    }
    if (instances.length > 0 || other.length > 0) msg += " or ";
  }
  if (instances.length > 0) {
    if (instances.length > 2) {
      const last = instances.pop();
      msg += `an instance of ${instances.join(", ")}, or ${last}`;
    } else {
      msg += `an instance of ${instances[0]}`;
      if (instances.length === 2) msg += ` or ${instances[1]}`;
    }
    if (other.length > 0) msg += " or ";
  }
  if (other.length > 0) {
    if (other.length > 2) {
      const last = other.pop();
      msg += `one of ${other.join(", ")}, or ${last}`;
    } else if (other.length === 2) {
      msg += `one of ${other[0]} or ${other[1]}`;
    } else {
      if (other[0].toLowerCase() !== other[0]) msg += "an ";
      msg += `${other[0]}`;
    }
  }
  return msg;
}

function describeReceived(input) {
  if (input == null) return ` Received ${input}`;
  if (typeof input === "function" && input.name) return ` Received function ${input.name}`;
  if (typeof input === "object") {
    if (input.constructor?.name) return ` Received an instance of ${input.constructor.name}`;
    return ` Received ${inspect(input, 3)}`;
  }
  let shown = inspect(input);
  if (shown.length > 25) shown = `${shown.slice(0, 25)}...`;
  return ` Received type ${typeof input} (${shown})`;
}

function invalidArgType(name, expected, actual) {
  return new NodeTypeError("ERR_INVALID_ARG_TYPE", `${describeExpected(name, expected)}.${describeReceived(actual)}`);
}

function invalidArgValue(name, value, reason = "is invalid") {
  const kind = name.includes(".") ? "property" : "argument";
  return new NodeTypeError("ERR_INVALID_ARG_VALUE", `The ${kind} '${name}' ${reason}. Received ${inspect(value)}`);
}

function validateString(value, name) {
  if (typeof value !== "string") throw invalidArgType(name, "string", value);
}
function validateNumber(value, name) {
  if (typeof value !== "number") throw invalidArgType(name, "number", value);
}
function validateBoolean(value, name) {
  if (typeof value !== "boolean") throw invalidArgType(name, "boolean", value);
}
function validateFunction(value, name) {
  if (typeof value !== "function") throw invalidArgType(name, "Function", value);
}
function validateOneOf(value, name, allowed) {
  if (!allowed.includes(value)) {
    const list = allowed.map((v) => (typeof v === "string" ? `'${v}'` : String(v))).join(", ");
    throw invalidArgValue(name, value, "must be one of: " + list);
  }
}

// workerd's process.nextTick is queueMicrotask.
function nextTick(fn, ...args) {
  queueMicrotask(() => fn(...args));
}

// ---------------------------------------------------------------------------
// IP literals (internal_net isIP).

const v4Seg = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
const v4Str = `(?:${v4Seg}\\.){3}${v4Seg}`;
const IPv4Reg = new RegExp(`^${v4Str}$`);
const v6Seg = "(?:[0-9a-fA-F]{1,4})";
const IPv6Reg = new RegExp(
  "^(?:" +
    `(?:${v6Seg}:){7}(?:${v6Seg}|:)|` +
    `(?:${v6Seg}:){6}(?:${v4Str}|:${v6Seg}|:)|` +
    `(?:${v6Seg}:){5}(?::${v4Str}|(?::${v6Seg}){1,2}|:)|` +
    `(?:${v6Seg}:){4}(?:(?::${v6Seg}){0,1}:${v4Str}|(?::${v6Seg}){1,3}|:)|` +
    `(?:${v6Seg}:){3}(?:(?::${v6Seg}){0,2}:${v4Str}|(?::${v6Seg}){1,4}|:)|` +
    `(?:${v6Seg}:){2}(?:(?::${v6Seg}){0,3}:${v4Str}|(?::${v6Seg}){1,5}|:)|` +
    `(?:${v6Seg}:){1}(?:(?::${v6Seg}){0,4}:${v4Str}|(?::${v6Seg}){1,6}|:)|` +
    `(?::(?:(?::${v6Seg}){0,5}:${v4Str}|(?::${v6Seg}){1,7}|:))` +
    ")(?:%[0-9a-zA-Z-.:]{1,})?$",
);

function ipFamily(input) {
  const s = typeof input === "string" ? input : `${input}`;
  if (IPv4Reg.test(s)) return 4;
  if (IPv6Reg.test(s)) return 6;
  return 0;
}


// Node.js-style errors for the modules workerd provides without their
// function (see ../../src/stub.rs): a call throws what workerd throws.

export function notImplemented(what) {
  const e = new Error(`The ${what} method is not implemented`);
  e.code = "ERR_METHOD_NOT_IMPLEMENTED";
  return e;
}

/** A function that throws workerd's ERR_METHOD_NOT_IMPLEMENTED for `what`. */
export function unimplemented(what) {
  return function () {
    throw notImplemented(what);
  };
}

function received(value) {
  if (value === undefined || value === null) return `Received ${value}`;
  if (typeof value === "function") return `Received function ${value.name}`;
  if (typeof value === "object") {
    const name = value.constructor?.name;
    return name ? `Received an instance of ${name}` : "Received [object]";
  }
  let shown = typeof value === "string" ? `'${value.slice(0, 25)}'` : String(value);
  if (typeof value === "string" && value.length > 25) shown = `${shown.slice(0, -1)}...'`;
  return `Received type ${typeof value} (${shown})`;
}

/** ERR_INVALID_ARG_TYPE: `name` must be of type `type`. */
export function argType(name, type, value) {
  const what = name.includes(".") ? "property" : "argument";
  const e = new TypeError(`The "${name}" ${what} must be of type ${type}. ${received(value)}`);
  e.code = "ERR_INVALID_ARG_TYPE";
  return e;
}

export function validateString(value, name) {
  if (typeof value !== "string") throw argType(name, "string", value);
}

export function validateObject(value, name) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw argType(name, "object", value);
  }
}

export function validateFunction(value, name) {
  if (typeof value !== "function") throw argType(name, "function", value);
}

// Request/Response formData() as workerd parses a body (its form-data.c++):
// parts are delimited by LF--boundary, a CR before the LF is optional, and
// header blocks end at CR?LF CR?LF, so bodies written with bare LFs parse
// too. deno_fetch's parser wants CRLF throughout and rejects those bodies.
import { core, primordials } from "ext:core/mod.js";

const {
  ArrayPrototypePush,
  ObjectDefineProperty,
  PromisePrototypeThen,
  PromiseReject,
  StringPrototypeToLowerCase,
  TypedArrayPrototypeSubarray,
  TypeError,
} = primordials;
const mimesniff = core.loadExtScript("ext:deno_web/01_mimesniff.js");
const { FormData } = core.loadExtScript("ext:deno_fetch/21_formdata.js");
const { File } = core.loadExtScript("ext:deno_web/09_file.js");
const { TextDecoder, TextEncoder } = core.loadExtScript("ext:deno_web/08_text_encoding.js");
const { URLSearchParams } = core.loadExtScript("ext:deno_web/00_url.js");

const utf8 = new TextDecoder();
// Before 2021-11-03 (formdata_parser_supports_files off) a file part is
// read as a string, as workerd did then.
let filesAsStrings = false;

/** The Worker's flags (see 10_dispatch.js's prepare). */
export function formDataFlags(flags) {
  filesAsStrings = !flags.formdata_parser_supports_files;
}

/** The index of `needle` in `hay` from `from`, or -1. */
function find(hay, needle, from) {
  const first = needle[0];
  const last = hay.length - needle.length;
  outer: for (let i = hay.indexOf(first, from); i !== -1 && i <= last; i = hay.indexOf(first, i + 1)) {
    for (let j = 1; j < needle.length; j++) {
      if (hay[i + j] !== needle[j]) continue outer;
    }
    return i;
  }
  return -1;
}

/** The end of the first CR?LF CR?LF in `b` from `at`, or -1. */
function headerEnd(b, at) {
  for (let i = b.indexOf(10, at); i !== -1; i = b.indexOf(10, i + 1)) {
    let j = i + 1;
    if (b[j] === 13) j++;
    if (b[j] === 10) return j + 1;
  }
  return -1;
}

/** kj's HTTP header block parse: `Name: value` lines, names are tokens. */
function parseHeaders(text) {
  const headers = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line === "") continue;
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) {
      throw new TypeError("FormData part had invalid headers.");
    }
    const key = StringPrototypeToLowerCase(name);
    if (!headers.has(key)) headers.set(key, line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, ""));
  }
  return headers;
}

/** workerd's Content-Disposition grammar: a token, then `; name="value"`
 * parameters (quoted, non-empty, `\c` reads as `c`); parsing stops at the
 * first thing that is not a parameter. null if there is no token. */
const DISPOSITION = /^[ \t\r\n]*([A-Za-z0-9_-]+)[ \t\r\n]*/;
const PARAM = /;[ \t\r\n]*([A-Za-z0-9_-]+)[ \t\r\n]*=[ \t\r\n]*"((?:[^"\n\\]|\\[^\n])+)"[ \t\r\n]*/y;
function parseDisposition(s) {
  const head = DISPOSITION.exec(s);
  if (head === null) return null;
  const params = [];
  PARAM.lastIndex = head[0].length;
  for (let m = PARAM.exec(s); m !== null; m = PARAM.exec(s)) {
    ArrayPrototypePush(params, [m[1], m[2].replace(/\\([^])/g, "$1")]);
  }
  return { type: head[1], params };
}

function parseMultipart(bytes, boundary, form) {
  // kj compares the boundary's UTF-8 bytes.
  const delimiter = new TextEncoder().encode(`\n--${boundary}`);
  let at = find(bytes, TypedArrayPrototypeSubarray(delimiter, 1), 0);
  if (at === -1 || at + delimiter.length - 1 >= bytes.length) {
    throw new TypeError("No initial boundary string (or you have a truncated message).");
  }
  at += delimiter.length - 1;
  for (;;) {
    // After a boundary: (CR)LF and another part, or "--" and the end.
    if (bytes[at] === 10) at += 1;
    else if (bytes[at] === 13 && bytes[at + 1] === 10) at += 2;
    else if (bytes[at] === 45 && bytes[at + 1] === 45) return;
    else throw new TypeError("Boundary string was not succeeded by CRLF, LF, or '--'.");
    const end = headerEnd(bytes, at);
    if (end === -1) throw new TypeError("No multipart message header termination found.");
    const headers = parseHeaders(utf8.decode(TypedArrayPrototypeSubarray(bytes, at, end)));
    at = end;
    const disposition = headers.get("content-disposition");
    if (disposition === undefined) {
      throw new TypeError("No valid Content-Disposition header found in FormData part.");
    }
    const parsed = parseDisposition(disposition);
    if (parsed === null) throw new TypeError("Invalid Content-Disposition header found in FormData part.");
    if (parsed.type !== "form-data") {
      throw new TypeError(
        `Content-Disposition header for FormData part must have the value "form-data", possibly followed by parameters. Got: "${parsed.type}"`,
      );
    }
    let name;
    let filename;
    for (const [key, value] of parsed.params) {
      if (key === "name") name = value;
      else if (key === "filename") filename = value;
    }
    if (name === undefined) throw new TypeError("Content-Disposition header in FormData part is missing a name.");
    const next = find(bytes, delimiter, at);
    if (next === -1 || next + delimiter.length >= bytes.length) {
      throw new TypeError("No subsequent boundary string after multipart message.");
    }
    // The CR of a CRLF before the delimiter is not the part's.
    const stop = next > at && bytes[next - 1] === 13 ? next - 1 : next;
    const data = TypedArrayPrototypeSubarray(bytes, at, stop);
    if (filename === undefined || filesAsStrings) {
      form.append(name, utf8.decode(data));
    } else {
      form.append(name, new File([data.slice()], filename, { type: headers.get("content-type") ?? "" }));
    }
    at = next + delimiter.length;
  }
}

/** The FormData a body of `contentType` holds (workerd's FormData::parse). */
export function parseFormData(contentType, bytes) {
  const mime = mimesniff.parseMimeType(contentType);
  const essence = mime === null ? null : mimesniff.essence(mime);
  const form = new FormData();
  if (essence === "multipart/form-data") {
    const boundary = mime.parameters.get("boundary");
    if (boundary === undefined) {
      throw new TypeError(
        "No boundary string in Content-Type header. The multipart/form-data MIME type requires a boundary parameter, e.g. 'Content-Type: multipart/form-data; boundary=\"abcd\"'. See RFC 7578, section 4.",
      );
    }
    parseMultipart(bytes, boundary, form);
    return form;
  }
  if (essence === "application/x-www-form-urlencoded") {
    const charset = mime.parameters.get("charset");
    if (charset !== undefined && !["utf-8", "utf8", "unicode-1-1-utf-8"].includes(StringPrototypeToLowerCase(charset))) {
      throw new TypeError("Non-utf-8 application/x-www-form-urlencoded body.");
    }
    for (const [name, value] of new URLSearchParams(utf8.decode(bytes))) form.append(name, value);
    return form;
  }
  throw new TypeError(
    "Unrecognized Content-Type header value. FormData can only parse the following MIME types: multipart/form-data, application/x-www-form-urlencoded",
  );
}

/** Puts workerd's formData() on Request and Response (before `Body` copies
 * their members). */
export function workerdFormData(Request, Response) {
  for (const C of [Request, Response]) {
    const bytes = C.prototype.bytes;
    ObjectDefineProperty(C.prototype, "formData", {
      __proto__: null,
      value: function formData() {
        // workerd's order: a used body, then the Content-Type, then the read.
        if (this.bodyUsed) {
          return PromiseReject(
            new TypeError("Body has already been used. It can only be used once. Use tee() first if you need to read it twice."),
          );
        }
        const type = this.headers.get("content-type");
        if (type === null) {
          return PromiseReject(new TypeError("Parsing a Body as FormData requires a Content-Type header."));
        }
        return PromisePrototypeThen(bytes.call(this), (body) => parseFormData(type, body));
      },
      writable: true,
      configurable: true,
      enumerable: true,
    });
  }
}

//! Build-time edits to Deno's own extension JS (host/build.rs applies them
//! to the snapshot's sources and the residual ones alike), where workerd's
//! behaviour differs from Deno's in a line and no hook exists.

/// (file, [(from, to)]): each `from` must be there; every occurrence is
/// replaced, in order.
const EDITS: &[(&str, &[(&str, &str)])] = &[
  // 27_eventsource.js: the stream request goes through the
  // Worker's fetch path (output gate, subrequest budget: js/00_globals.js's
  // `internals.eventSourceFetch`), events carry the stream's origin (not its
  // URL), errors are ErrorEvents, a URL that does not parse fails with
  // workerd's message, and `EventSource.from(stream)` reads a Worker's stream.
  (
    "ext:deno_fetch/27_eventsource.js",
    &[
      (
        "res = await mainFetch(req, true, this.#abortController.signal);",
        "res = this.#source !== undefined ? streamResponse(this.#source) : await internals.eventSourceFetch(mainFetch, req, this.#abortController.signal);",
      ),
      (
        "origin: res.url(),",
        "origin: this.#source !== undefined ? null : new URL(res.url()).origin,",
      ),
      (
        "  defineEventHandler,\n  EventTarget,",
        "  defineEventHandler,\n  ErrorEvent,\n  EventTarget,",
      ),
      (
        "throw new DOMException(e.message, \"SyntaxError\");",
        "throw new DOMException(`Cannot open an EventSource to '${url}'. The URL is invalid.`, \"SyntaxError\");",
      ),
      (
        "const { core, primordials } = __bootstrap;",
        "const { core, primordials, internals } = __bootstrap;",
      ),
      // EventSource.from(stream), workerd's: events parsed from a stream the
      // Worker has; open at once (no open event), no URL, origin null, and
      // when the stream ends an error with readyState CLOSED, no reconnection.
      (
        "const { TransformStream } = core.loadExtScript(\"ext:deno_web/06_streams.js\");",
        "const { TransformStream, ReadableStreamPrototype } = core.loadExtScript(\"ext:deno_web/06_streams.js\");\n\
       let fromStream;\n\
       const streamResponse = (stream) => ({ aborted: false, type: \"default\", status: 200, \
       headerList: [[\"content-type\", \"text/event-stream\"]], body: { stream }, url: () => null });",
      ),
      (
        "  constructor(url, eventSourceInitDict = { __proto__: null }) {",
        "  #source;\n\
       static from(stream) {\n\
         if (!ObjectPrototypeIsPrototypeOf(ReadableStreamPrototype, stream)) {\n\
           throw new TypeError(\"Failed to execute 'from' on 'EventSource': parameter 1 is not of type 'JsReadableStream'.\");\n\
         }\n\
         fromStream = stream;\n\
         return new EventSource(\"\");\n\
       }\n\
       constructor(url, eventSourceInitDict = { __proto__: null }) {",
      ),
      (
        "    this[webidl.brand] = webidl.brand;",
        "    this[webidl.brand] = webidl.brand;\n\
       if (fromStream !== undefined) {\n\
         this.#source = fromStream;\n\
         fromStream = undefined;\n\
         this.#url = \"\";\n\
         this.#withCredentials = false;\n\
         this.#readyState = OPEN;\n\
         this.#loop();\n\
         return;\n\
       }",
      ),
      (
        "          setIsTrusted(event, true);",
        "          setIsTrusted(event, true);\n\
                 if (this.#source !== undefined) ObjectDefineProperties(event, { origin: { value: null } });",
      ),
      (
        "    const req = newInnerRequest(",
        "    const req = this.#source !== undefined ? null : newInnerRequest(",
      ),
      (
        "    this.dispatchEvent(new Event(\"open\"));",
        "    if (this.#source === undefined) this.dispatchEvent(new Event(\"open\"));",
      ),
      (
        "      // The connection is reestablished below\n    }\n\n    this.#reestablishConnection();",
        "      // The connection is reestablished below\n    }\n\n    if (this.#source !== undefined) this.#failConnection();\n    else this.#reestablishConnection();",
      ),
      // Its error events are ErrorEvents, as workerd's.
      ("new Event(\"error\")", "new ErrorEvent(\"error\")"),
    ],
  ),
  // The rest: lines of Deno's Web JS where workerd throws another error or
  // none: its messages (an app shows them, a test compares them), TRACE
  // taken as a method, and FormData serialized as workerd's form-data.c++
  // does (names escaped `"`→%22, LF→%0A, `\`→`\\`, one ending in `\`
  // refused; values as given).
  (
    "ext:deno_fetch/20_headers.js",
    &[
      (
        "throw new TypeError(`Invalid header name: \"${name}\"`);",
        "throw new TypeError(\"Invalid header name.\");",
      ),
      (
        "throw new TypeError(`Invalid header value: \"${value}\"`);",
        "throw new TypeError(\"Invalid header value.\");",
      ),
      (
        "\"Cannot change header: headers are immutable\"",
        "\"Can't modify immutable headers.\"",
      ),
      (
        "\"Cannot change headers: headers are immutable\"",
        "\"Can't modify immutable headers.\"",
      ),
    ],
  ),
  (
    "ext:deno_fetch/23_request.js",
    &[
      (
        "    case \"CONNECT\":\n    case \"TRACE\":\n",
        "    case \"CONNECT\":\n",
      ),
      (
        "      const parsedURL = new URL(input, baseURL);",
        "      let parsedURL;\n\
         try {\n\
           parsedURL = new URL(input, baseURL);\n\
         } catch {\n\
           throw new TypeError(`Invalid URL: ${input}`);\n\
         }",
      ),
    ],
  ),
  (
    "ext:deno_fetch/23_response.js",
    &[(
      "throw new RangeError(`Invalid redirect status code: ${status}`);",
      "throw new RangeError(`${status} is not a redirect status code. It must be one of: 301, 302, 303, 307, or 308.`);",
    )],
  ),
  (
    "ext:deno_fetch/21_formdata.js",
    &[
      (
        "const ESCAPE_PATTERN = new SafeRegExp(/([\\n\\r\"])/g);",
        "const ESCAPE_PATTERN = new SafeRegExp(/([\\n\"\\\\])/g);",
      ),
      ("  \"\\r\": \"%0D\",\n", "  \"\\\\\": \"\\\\\\\\\",\n"),
      (
        "function escape(str, isFilename) {\n  return StringPrototypeReplace(\n    isFilename\n      ? str\n      : StringPrototypeReplace(str, ESCAPE_FILENAME_PATTERN, \"\\r\\n\"),\n    ESCAPE_PATTERN,",
        "function escape(str) {\n  if (str[str.length - 1] === \"\\\\\") {\n    throw new TypeError(\"Name or filename can't end with backslash\");\n  }\n  return StringPrototypeReplace(\n    str,\n    ESCAPE_PATTERN,",
      ),
      (
        "          StringPrototypeReplace(\n            value,\n            FORM_DETA_SERIALIZE_PATTERN,\n            CRLF,\n          ) + CRLF,",
        "          value + CRLF,",
      ),
    ],
  ),
  (
    "ext:deno_web/00_url.js",
    &[(
      "      `Invalid URL: '${href}'` +\n        (maybeBase ? ` with base '${maybeBase}'` : \"\"),",
      "      \"Invalid URL string.\",",
    )],
  ),
  // The event constructors check their arguments as workerd's do: a type
  // is required, an init that is not an object is refused by its type's
  // name, and a null init is none.
  (
    "ext:deno_web/02_event.js",
    &[
      (
        "class Event {",
        "function checkEventArguments(args, name, init) {\n\
           if (args.length === 0) {\n\
             throw new TypeError(`Failed to construct '${name}': constructor parameter 1 is not of type 'string'.`);\n\
           }\n\
           const d = args[1];\n\
           if (d !== undefined && d !== null && typeof d !== \"object\" && typeof d !== \"function\") {\n\
             throw new TypeError(`Failed to construct '${name}': constructor parameter 2 is not of type '${init}'.`);\n\
           }\n\
         }\n\
         class Event {",
      ),
      (
        "    webidl.requiredArguments(\n      arguments.length,\n      1,\n      \"Failed to construct 'Event'\",\n    );",
        "    checkEventArguments(arguments, \"Event\", \"Init\");\n    eventInitDict ??= { __proto__: null };",
      ),
      (
        "    super(type, eventInitDict);\n    webidl.requiredArguments(\n      arguments.length,\n      1,\n      \"Failed to construct 'CustomEvent'\",\n    );\n    const { detail } = eventInitDict;",
        "    checkEventArguments(arguments, \"CustomEvent\", \"CustomEventInit\");\n    eventInitDict ??= { __proto__: null };\n    super(type, eventInitDict);\n    const { detail } = eventInitDict;",
      ),
      (
        "      error,\n    } = { __proto__: null },\n  ) {\n    super(type, {",
        "      error,\n    } = { __proto__: null },\n  ) {\n    checkEventArguments(arguments, \"ErrorEvent\", \"ErrorEventInit\");\n    super(type, {",
      ),
      (
        "    reason = \"\",\n  } = { __proto__: null }) {\n    super(type, {",
        "    reason = \"\",\n  } = { __proto__: null }) {\n    checkEventArguments(arguments, \"CloseEvent\", \"Initializer\");\n    super(type, {",
      ),
      (
        "  constructor(type, eventInitDict) {\n    super(type, {\n      bubbles: eventInitDict?.bubbles ?? false,",
        "  constructor(type, eventInitDict) {\n    checkEventArguments(arguments, \"MessageEvent\", \"Initializer\");\n    super(type, {\n      bubbles: eventInitDict?.bubbles ?? false,",
      ),
    ],
  ),
  (
    "ext:deno_web/05_base64.js",
    &[
      (
        "    return op_base64_atob(data);\n  } catch (e) {\n    if (ObjectPrototypeIsPrototypeOf(TypeErrorPrototype, e)) {\n      throw new DOMException(\n        \"Failed to decode base64: invalid character\",",
        "    return op_base64_atob(data);\n  } catch (e) {\n    if (ObjectPrototypeIsPrototypeOf(TypeErrorPrototype, e) || e?.name === \"InvalidCharacterError\") {\n      throw new DOMException(\n        \"atob() called with invalid base64-encoded data. (Only whitespace, '+', '/', alphanumeric ASCII, and up to two terminal '=' signs when the input data length is divisible by 4 are allowed.)\",",
      ),
      (
        "        \"Cannot encode string: string contains characters outside of the Latin1 range\",",
        "        \"btoa() can only operate on characters in the Latin1 (ISO/IEC 8859-1) range.\",",
      ),
      (
        "  const prefix = \"Failed to execute 'atob'\";\n  webidl.requiredArguments(arguments.length, 1, prefix);",
        "  const prefix = \"Failed to execute 'atob'\";\n  if (arguments.length === 0) {\n    throw new TypeError(\"Failed to execute 'atob' on 'ServiceWorkerGlobalScope': parameter 1 is not of type 'string'.\");\n  }",
      ),
      (
        "  const prefix = \"Failed to execute 'btoa'\";\n  webidl.requiredArguments(arguments.length, 1, prefix);",
        "  const prefix = \"Failed to execute 'btoa'\";\n  if (arguments.length === 0) {\n    throw new TypeError(\"Failed to execute 'btoa' on 'ServiceWorkerGlobalScope': parameter 1 is not of type 'String'.\");\n  }",
      ),
    ],
  ),
  (
    "ext:deno_web/08_text_encoding.js",
    &[(
      "          err.code = \"ERR_ENCODING_NOT_SUPPORTED\";",
      "          err.code = \"ERR_ENCODING_NOT_SUPPORTED\";\n          err.message = `\"${label}\" is not a valid encoding.`;",
    )],
  ),
];

/// `code` with the edits for the file `name`, if it has any.
pub fn prepare(name: &str, code: &str) -> Option<String> {
  let (_, edits) = EDITS.iter().find(|(n, _)| *n == name)?;
  let mut out = code.to_string();
  for (from, to) in *edits {
    assert!(out.contains(from), "{name} no longer has `{from}`");
    out = out.replace(from, to);
  }
  Some(out)
}

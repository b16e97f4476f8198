//! Build-time edits to Deno's own extension JS (host/build.rs applies them
//! to the snapshot's sources and the residual ones alike), where workerd's
//! behaviour differs from Deno's in a line and no hook exists.

/// `ext:deno_fetch/27_eventsource.js`: the stream request goes through the
/// Worker's fetch path (output gate, subrequest budget: js/00_globals.js's
/// `internals.eventSourceFetch`), events carry the stream's origin (not its
/// URL), errors are ErrorEvents, a URL that does not parse fails with
/// workerd's message, and `EventSource.from(stream)` reads a Worker's stream.
pub fn prepare(name: &str, code: &str) -> Option<String> {
  if name != "ext:deno_fetch/27_eventsource.js" {
    return None;
  }
  let edits = [
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
  ];
  let mut out = code.to_string();
  for (from, to) in edits {
    assert!(
      out.contains(from),
      "27_eventsource.js no longer has `{from}`"
    );
    out = out.replacen(from, to, 1);
  }
  // Its error events are ErrorEvents, as workerd's.
  Some(out.replace("new Event(\"error\")", "new ErrorEvent(\"error\")"))
}

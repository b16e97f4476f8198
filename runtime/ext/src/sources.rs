//! Build-time edits to Deno's own extension JS (host/build.rs applies them
//! to the snapshot's sources and the residual ones alike), where workerd's
//! behaviour differs from Deno's in a line and no hook exists.

/// `ext:deno_fetch/27_eventsource.js`: the stream request goes through the
/// Worker's fetch path (output gate, subrequest budget: js/00_globals.js's
/// `internals.eventSourceFetch`), events carry the stream's origin (not its
/// URL), errors are ErrorEvents, and a URL that does not parse fails with
/// workerd's message.
pub fn prepare(name: &str, code: &str) -> Option<String> {
  if name != "ext:deno_fetch/27_eventsource.js" {
    return None;
  }
  let edits = [
    (
      "res = await mainFetch(req, true, this.#abortController.signal);",
      "res = await internals.eventSourceFetch(mainFetch, req, this.#abortController.signal);",
    ),
    ("origin: res.url(),", "origin: new URL(res.url()).origin,"),
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

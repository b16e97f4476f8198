//! `HTMLRewriter` on lol_html, Cloudflare's streaming rewriter (the one
//! workerd uses).
//!
//! lol_html calls its handlers synchronously, but a Worker's handlers may be
//! async. So each transform runs its rewriter on a thread of its own: when
//! a handler is due, the thread sends the event to the isolate and waits;
//! the handler's calls on the token (`setAttribute`, `append`, …) are
//! answered by that thread against the real lol_html token, so every
//! behaviour and error is lol_html's own; when the handler (and the promise
//! it returned) is done, parsing goes on.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;

use deno_core::convert::Uint8Array;
use deno_core::{OpState, Resource, ResourceId, ToV8, op2};
use deno_error::JsErrorBox;
use lol_html::html_content::{
  Comment, ContentType, Doctype, DocumentEnd, Element, EndTag, TextChunk,
};
use lol_html::{
  AsciiCompatibleEncoding, DocumentContentHandlers, ElementContentHandlers, HandlerResult,
  HtmlRewriter, Selector, Settings,
};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

deno_core::extension!(
  cellhost_html,
  deps = [deno_web, deno_fetch],
  ops = [
    op_html_check,
    op_html_check_selector,
    op_html_start,
    op_html_write,
    op_html_end,
    op_html_next,
    op_html_poll,
    op_html_call,
    op_html_done,
    op_html_close,
  ],
  esm = [dir "js", "html_rewriter.js"],
);

/// What the isolate sends the rewriter thread.
enum ToThread {
  Chunk(Vec<u8>),
  End,
  /// A call on the current token: `[seq, method, ...args]` as JSON.
  Call(String),
  /// The current handler finished; `false`: it threw (the transform fails).
  Done(bool),
}

/// What the rewriter thread sends the isolate.
struct Event {
  kind: &'static str,
  info: Option<String>,
  data: Option<Vec<u8>>,
}

/// The rewriter thread's end of the link.
struct Link {
  events: UnboundedSender<Event>,
  inbox: mpsc::Receiver<ToThread>,
  answers: mpsc::Sender<Result<String, String>>,
  out: RefCell<Vec<u8>>,
  seq: std::cell::Cell<u64>,
}

/// How long one side spins for the other's next message before it sleeps.
/// A handler event and its calls bounce between two threads; a futex wake
/// per hop would cost more than the parsing (tens of µs on each side), and
/// the other side is usually only microseconds away.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

fn spin_recv<T>(rx: &mpsc::Receiver<T>) -> Result<T, mpsc::RecvError> {
  let start = std::time::Instant::now();
  loop {
    match rx.try_recv() {
      Ok(v) => return Ok(v),
      Err(mpsc::TryRecvError::Disconnected) => return Err(mpsc::RecvError),
      Err(mpsc::TryRecvError::Empty) if start.elapsed() < SPIN => std::hint::spin_loop(),
      Err(mpsc::TryRecvError::Empty) => return rx.recv(),
    }
  }
}

const STALE: &str = "This content token is no longer valid. Content tokens are only valid during the execution of the relevant content handler.";

impl Link {
  fn send(&self, kind: &'static str, info: Option<Value>, data: Option<Vec<u8>>) {
    let _ = self.events.send(Event {
      kind,
      info: info.map(|v| v.to_string()),
      data,
    });
  }

  fn flush(&self) {
    let out = std::mem::take(&mut *self.out.borrow_mut());
    if !out.is_empty() {
      self.send("output", None, Some(out));
    }
  }

  /// Hands a token to the isolate and answers its calls on it until its
  /// handler is done.
  fn handle(
    &self,
    kind: &'static str,
    mut info: Value,
    mut apply: impl FnMut(&str, &[Value]) -> Result<Value, String>,
  ) -> HandlerResult {
    self.flush();
    let seq = self.seq.get() + 1;
    self.seq.set(seq);
    info["seq"] = json!(seq);
    self.send(kind, Some(info), None);
    loop {
      match spin_recv(&self.inbox) {
        Ok(ToThread::Call(call)) => {
          let answer = parse_call(&call).and_then(|(s, method, args)| {
            if s != seq {
              return Err(STALE.to_string());
            }
            apply(&method, &args).map(|v| v.to_string())
          });
          let _ = self.answers.send(answer);
        }
        Ok(ToThread::Done(true)) => return Ok(()),
        Ok(ToThread::Done(false)) => return Err("a content handler threw".into()),
        Ok(_) | Err(_) => return Err("the rewritten stream was abandoned".into()),
      }
    }
  }
}

fn parse_call(call: &str) -> Result<(u64, String, Vec<Value>), String> {
  let v: Vec<Value> = serde_json::from_str(call).map_err(|e| e.to_string())?;
  match v.as_slice() {
    [Value::Number(s), Value::String(m), rest @ ..] => {
      Ok((s.as_u64().unwrap_or(0), m.clone(), rest.to_vec()))
    }
    _ => Err("malformed HTMLRewriter call".into()),
  }
}

fn text_arg(args: &[Value], i: usize) -> String {
  match args.get(i) {
    Some(Value::String(s)) => s.clone(),
    _ => String::new(),
  }
}

/// `(content, { html })` of before/after/append/…
fn content(args: &[Value]) -> (String, ContentType) {
  let html = matches!(args.get(1), Some(Value::Bool(true)));
  let ty = if html {
    ContentType::Html
  } else {
    ContentType::Text
  };
  (text_arg(args, 0), ty)
}

fn unknown(method: &str) -> Result<Value, String> {
  Err(format!("HTMLRewriter: unknown token method {method}"))
}

fn apply_element(
  el: &mut Element<'_, '_>,
  link: &Rc<Link>,
  method: &str,
  args: &[Value],
) -> Result<Value, String> {
  let (c, ty) = content(args);
  match method {
    "tagName" => return Ok(json!(el.tag_name())),
    "setTagName" => el.set_tag_name(&c).map_err(|e| e.to_string())?,
    "removed" => return Ok(json!(el.removed())),
    "attributes" => {
      let pairs: Vec<_> = el
        .attributes()
        .iter()
        .map(|a| [a.name(), a.value()])
        .collect();
      return Ok(json!(pairs));
    }
    "getAttribute" => return Ok(json!(el.get_attribute(&c))),
    "hasAttribute" => return Ok(json!(el.has_attribute(&c))),
    "setAttribute" => el
      .set_attribute(&c, &text_arg(args, 1))
      .map_err(|e| e.to_string())?,
    "removeAttribute" => el.remove_attribute(&c),
    "before" => el.before(&c, ty),
    "after" => el.after(&c, ty),
    "prepend" => el.prepend(&c, ty),
    "append" => el.append(&c, ty),
    "replace" => el.replace(&c, ty),
    "setInnerContent" => el.set_inner_content(&c, ty),
    "remove" => el.remove(),
    "removeAndKeepContent" => el.remove_and_keep_content(),
    "onEndTag" => {
      let id = args.first().and_then(Value::as_u64).unwrap_or(0);
      let link = link.clone();
      let handler = Box::new(move |end: &mut EndTag<'_>| {
        let info = json!({ "id": id, "name": end.name() });
        link.handle("endTag", info, |m, a| apply_end_tag(end, m, a))
      });
      // workerd keeps only the latest end tag handler of an element.
      let handlers = el
        .end_tag_handlers()
        .ok_or_else(|| "No end tag.".to_string())?;
      handlers.clear();
      handlers.push(handler);
    }
    _ => return unknown(method),
  }
  Ok(Value::Null)
}

fn apply_end_tag(end: &mut EndTag<'_>, method: &str, args: &[Value]) -> Result<Value, String> {
  let (c, ty) = content(args);
  match method {
    "name" => return Ok(json!(end.name())),
    "setName" => end.set_name_str(c),
    "before" => end.before(&c, ty),
    "after" => end.after(&c, ty),
    "remove" => end.remove(),
    _ => return unknown(method),
  }
  Ok(Value::Null)
}

fn apply_text(t: &mut TextChunk<'_>, method: &str, args: &[Value]) -> Result<Value, String> {
  let (c, ty) = content(args);
  match method {
    "removed" => return Ok(json!(t.removed())),
    "before" => t.before(&c, ty),
    "after" => t.after(&c, ty),
    "replace" => t.replace(&c, ty),
    "remove" => t.remove(),
    _ => return unknown(method),
  }
  Ok(Value::Null)
}

fn apply_comment(cm: &mut Comment<'_>, method: &str, args: &[Value]) -> Result<Value, String> {
  let (c, ty) = content(args);
  match method {
    "text" => return Ok(json!(cm.text())),
    "setText" => cm.set_text(&c).map_err(|e| e.to_string())?,
    "removed" => return Ok(json!(cm.removed())),
    "before" => cm.before(&c, ty),
    "after" => cm.after(&c, ty),
    "replace" => cm.replace(&c, ty),
    "remove" => cm.remove(),
    _ => return unknown(method),
  }
  Ok(Value::Null)
}

fn apply_doctype(d: &mut Doctype<'_>, method: &str, _args: &[Value]) -> Result<Value, String> {
  match method {
    "removed" => return Ok(json!(d.removed())),
    "remove" => d.remove(),
    _ => return unknown(method),
  }
  Ok(Value::Null)
}

fn apply_end(end: &mut DocumentEnd<'_>, method: &str, args: &[Value]) -> Result<Value, String> {
  let (c, ty) = content(args);
  match method {
    "append" => end.append(&c, ty),
    _ => return unknown(method),
  }
  Ok(Value::Null)
}

/// Which handlers a `.on(selector, …)` / `.onDocument(…)` object has.
#[derive(Default)]
struct Spec {
  selectors: Vec<(Selector, [bool; 3])>,
  documents: Vec<[bool; 4]>,
  encoding: Option<AsciiCompatibleEncoding>,
}

fn parse_spec(spec: &str) -> Result<Spec, JsErrorBox> {
  let v: Value = serde_json::from_str(spec).map_err(|e| JsErrorBox::type_error(e.to_string()))?;
  let flags = |v: &Value, keys: &[&str]| -> Vec<bool> {
    keys
      .iter()
      .map(|k| v[*k].as_bool().unwrap_or(false))
      .collect()
  };
  let mut out = Spec::default();
  for s in v["selectors"].as_array().into_iter().flatten() {
    let sel = s["selector"].as_str().unwrap_or_default();
    let f = flags(s, &["element", "comments", "text"]);
    out
      .selectors
      .push((parse_selector(sel)?, [f[0], f[1], f[2]]));
  }
  for d in v["documents"].as_array().into_iter().flatten() {
    let f = flags(d, &["doctype", "comments", "text", "end"]);
    out.documents.push([f[0], f[1], f[2], f[3]]);
  }
  let label = v["encoding"].as_str().unwrap_or("utf-8");
  let encoding = encoding_rs::Encoding::for_label(label.trim().as_bytes())
    .and_then(AsciiCompatibleEncoding::new)
    .ok_or_else(|| {
      JsErrorBox::type_error(format!(
        "Parser error: HTMLRewriter cannot rewrite a body in charset \"{label}\"."
      ))
    })?;
  out.encoding = Some(encoding);
  Ok(out)
}

fn parse_selector(sel: &str) -> Result<Selector, JsErrorBox> {
  sel
    .parse::<Selector>()
    .map_err(|e| JsErrorBox::type_error(format!("Parser error: {e}")))
}

/// The comment handler of selector (or document handler) `group`.
fn on_comments(
  link: &Rc<Link>,
  group: usize,
  doc: bool,
) -> impl FnMut(&mut Comment<'_>) -> HandlerResult + 'static {
  let l = link.clone();
  move |c: &mut Comment<'_>| {
    let info = json!({ "group": group, "doc": doc });
    l.handle("comments", info, |m, a| apply_comment(c, m, a))
  }
}

/// The text handler of selector (or document handler) `group`.
fn on_text(
  link: &Rc<Link>,
  group: usize,
  doc: bool,
) -> impl FnMut(&mut TextChunk<'_>) -> HandlerResult + 'static {
  let l = link.clone();
  move |t: &mut TextChunk<'_>| {
    let info =
      json!({ "group": group, "doc": doc, "text": t.as_str(), "last": t.last_in_text_node() });
    l.handle("text", info, |m, a| apply_text(t, m, a))
  }
}

/// The rewriter thread: builds the handlers, then feeds lol_html the chunks
/// the isolate sends until the end (or until the isolate lets go).
fn run(spec: Spec, link: Rc<Link>) {
  let mut settings = Settings::new().with_strict(false);
  if let Some(enc) = spec.encoding {
    settings = settings.with_encoding(enc);
  }
  for (group, (selector, [element, comments, text])) in spec.selectors.into_iter().enumerate() {
    let mut h = ElementContentHandlers::default();
    if element {
      let l = link.clone();
      h = h.element(move |el: &mut Element<'_, '_>| {
        let info = json!({ "group": group, "namespaceURI": el.namespace_uri() });
        let l2 = l.clone();
        l.handle("element", info, |m, a| apply_element(el, &l2, m, a))
      });
    }
    if comments {
      h = h.comments(on_comments(&link, group, false));
    }
    if text {
      h = h.text(on_text(&link, group, false));
    }
    settings = settings.append_element_content_handler((Cow::Owned(selector), h));
  }
  for (group, [doctype, comments, text, end]) in spec.documents.into_iter().enumerate() {
    let mut h = DocumentContentHandlers::default();
    if doctype {
      let l = link.clone();
      h = h.doctype(move |d: &mut Doctype<'_>| {
        let info = json!({
          "group": group, "doc": true,
          "name": d.name(), "publicId": d.public_id(), "systemId": d.system_id(),
        });
        l.handle("doctype", info, |m, a| apply_doctype(d, m, a))
      });
    }
    if comments {
      h = h.comments(on_comments(&link, group, true));
    }
    if text {
      h = h.text(on_text(&link, group, true));
    }
    if end {
      let l = link.clone();
      h = h.end(move |e: &mut DocumentEnd<'_>| {
        let info = json!({ "group": group, "doc": true });
        l.handle("end", info, |m, a| apply_end(e, m, a))
      });
    }
    settings = settings.append_document_content_handler(h);
  }
  let sink_link = link.clone();
  let mut rewriter = HtmlRewriter::new(settings, move |c: &[u8]| {
    sink_link.out.borrow_mut().extend_from_slice(c)
  });
  link.send("ready", None, None);
  loop {
    match spin_recv(&link.inbox) {
      Ok(ToThread::Chunk(bytes)) => {
        if let Err(e) = rewriter.write(&bytes) {
          link.flush();
          link.send("error", Some(json!(e.to_string())), None);
          return;
        }
        link.flush();
        link.send("ready", None, None);
      }
      Ok(ToThread::End) => {
        let result = rewriter.end();
        link.flush();
        match result {
          Ok(()) => link.send("done", None, None),
          Err(e) => link.send("error", Some(json!(e.to_string())), None),
        }
        return;
      }
      // A call on a token whose handler already returned.
      Ok(ToThread::Call(_)) => {
        let _ = link.answers.send(Err(STALE.to_string()));
      }
      Ok(ToThread::Done(_)) => {}
      Err(_) => return, // the isolate let go of the stream
    }
  }
}

/// The isolate's end: one per `transform()`.
struct Rewriter {
  /// Taken on close, so the thread sees the isolate let go.
  to_thread: RefCell<Option<mpsc::Sender<ToThread>>>,
  answers: mpsc::Receiver<Result<String, String>>,
  events: RefCell<Option<UnboundedReceiver<Event>>>,
}

impl Resource for Rewriter {
  fn name(&self) -> Cow<'_, str> {
    "htmlRewriter".into()
  }
}

fn rewriter(state: &OpState, rid: ResourceId) -> Result<Rc<Rewriter>, JsErrorBox> {
  state
    .resource_table
    .get::<Rewriter>(rid)
    .map_err(JsErrorBox::from_err)
}

fn post(state: &OpState, rid: ResourceId, msg: ToThread) -> Result<(), JsErrorBox> {
  let res = rewriter(state, rid)?;
  let sent = match res.to_thread.borrow().as_ref() {
    Some(tx) => tx.send(msg).is_ok(),
    None => false,
  };
  if sent {
    Ok(())
  } else {
    Err(JsErrorBox::type_error(
      "The HTMLRewriter's stream has ended.",
    ))
  }
}

/// `.on(selector, …)` refuses a selector lol_html cannot match, at once.
#[op2(fast)]
fn op_html_check_selector(#[string] selector: &str) -> Result<(), JsErrorBox> {
  parse_selector(selector).map(|_| ())
}

/// `transform()` refuses what the rewriter could not start with, at once.
#[op2(fast)]
fn op_html_check(#[string] spec: &str) -> Result<(), JsErrorBox> {
  parse_spec(spec).map(|_| ())
}

/// Starts a rewriter thread for one transform; events come from
/// `op_html_next`, starting with "ready" (send the first chunk).
#[op2(fast)]
#[smi]
fn op_html_start(state: &mut OpState, #[string] spec: &str) -> Result<ResourceId, JsErrorBox> {
  let spec = parse_spec(spec)?; // errors surface here, not on the thread
  let (to_thread, inbox) = mpsc::channel();
  let (answer_tx, answers) = mpsc::channel();
  let (event_tx, events) = unbounded_channel();
  std::thread::Builder::new()
    .name("html-rewriter".into())
    .spawn(move || {
      let link = Rc::new(Link {
        events: event_tx,
        inbox,
        answers: answer_tx,
        out: RefCell::new(Vec::new()),
        seq: std::cell::Cell::new(0),
      });
      run(spec, link);
    })
    .map_err(|e| JsErrorBox::generic(format!("HTMLRewriter could not start: {e}")))?;
  Ok(state.resource_table.add(Rewriter {
    to_thread: RefCell::new(Some(to_thread)),
    answers,
    events: RefCell::new(Some(events)),
  }))
}

#[op2(fast)]
fn op_html_write(
  state: &mut OpState,
  #[smi] rid: ResourceId,
  #[buffer] chunk: &[u8],
) -> Result<(), JsErrorBox> {
  post(state, rid, ToThread::Chunk(chunk.to_vec()))
}

#[op2(fast)]
fn op_html_end(state: &mut OpState, #[smi] rid: ResourceId) -> Result<(), JsErrorBox> {
  post(state, rid, ToThread::End)
}

#[derive(ToV8)]
struct HtmlEvent {
  /// "ready", "output", "done", "error", or a handler's kind.
  kind: &'static str,
  info: Option<String>,
  data: Option<Uint8Array>,
}

fn to_js(ev: Option<Event>) -> HtmlEvent {
  match ev {
    Some(e) => HtmlEvent {
      kind: e.kind,
      info: e.info,
      data: e.data.map(Into::into),
    },
    None => HtmlEvent {
      kind: "gone",
      info: None,
      data: None,
    },
  }
}

/// The rewriter thread's next event if it comes within the spin; `null`:
/// wait for it with `op_html_next` (without holding the isolate).
#[op2]
fn op_html_poll(
  state: &mut OpState,
  #[smi] rid: ResourceId,
) -> Result<Option<HtmlEvent>, JsErrorBox> {
  let res = rewriter(state, rid)?;
  let mut slot = res.events.borrow_mut();
  let Some(rx) = slot.as_mut() else {
    return Err(JsErrorBox::generic(
      "HTMLRewriter events are already being read",
    ));
  };
  let start = std::time::Instant::now();
  loop {
    match rx.try_recv() {
      Ok(e) => return Ok(Some(to_js(Some(e)))),
      Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return Ok(Some(to_js(None))),
      Err(_) if start.elapsed() < SPIN => std::hint::spin_loop(),
      Err(_) => return Ok(None),
    }
  }
}

/// The rewriter thread's next event ("gone" if it stopped without a word).
#[op2]
async fn op_html_next(
  state: Rc<RefCell<OpState>>,
  #[smi] rid: ResourceId,
) -> Result<HtmlEvent, JsErrorBox> {
  let res = rewriter(&state.borrow(), rid)?;
  let Some(mut rx) = res.events.borrow_mut().take() else {
    return Err(JsErrorBox::generic(
      "HTMLRewriter events are already being read",
    ));
  };
  let ev = rx.recv().await;
  *res.events.borrow_mut() = Some(rx);
  Ok(to_js(ev))
}

/// A call on the current token, answered by the rewriter thread (which is
/// waiting in that token's handler) as JSON.
#[op2]
#[string]
fn op_html_call(
  state: &mut OpState,
  #[smi] rid: ResourceId,
  #[string] call: String,
) -> Result<String, JsErrorBox> {
  post(state, rid, ToThread::Call(call)).map_err(|_| JsErrorBox::type_error(STALE))?;
  match spin_recv(&rewriter(state, rid)?.answers) {
    Ok(Ok(v)) => Ok(v),
    // workerd words lol_html's refusals so.
    Ok(Err(e)) if e == STALE => Err(JsErrorBox::type_error(e)),
    Ok(Err(e)) => Err(JsErrorBox::type_error(format!("Parser error: {e}"))),
    Err(_) => Err(JsErrorBox::type_error(STALE)),
  }
}

#[op2(fast)]
fn op_html_done(state: &mut OpState, #[smi] rid: ResourceId, ok: bool) -> Result<(), JsErrorBox> {
  post(state, rid, ToThread::Done(ok))
}

/// Lets go of the rewriter: its thread ends at its next wait.
#[op2(fast)]
fn op_html_close(state: &mut OpState, #[smi] rid: ResourceId) {
  if let Ok(res) = state.resource_table.take::<Rewriter>(rid) {
    res.to_thread.borrow_mut().take();
  }
}

//! `cellhost run` as a user meets it: formats, configuration, streaming,
//! keep-alive, limits and the errors a user can act on.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;

fn tmpdir(name: &str) -> PathBuf {
  tempdir(&format!("run-{name}"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
  let p = dir.join(name);
  std::fs::create_dir_all(p.parent().unwrap()).unwrap();
  std::fs::write(&p, text).unwrap();
  p
}

#[test]
fn example_hello_serves() {
  let ch = Cellhost::start(&repo_root().join("examples/hello"), &[]);
  let r = get(ch.addr, "/there");
  assert_eq!(r.status, 200);
  assert_eq!(r.text(), "Hello from cellhost at /there\n");
}

#[test]
fn wrangler_jsonc_vars_and_dev_vars() {
  let d = tmpdir("jsonc");
  write(
    &d,
    "src/index.js",
    "export default { fetch(r, env) { return new Response(`${env.A}|${env.N}|${env.OBJ.k}|${env.SECRET}`) } }",
  );
  write(
    &d,
    "wrangler.jsonc",
    r#"{
      // comments are allowed
      "name": "j", "main": "src/index.js", "compatibility_date": "2026-11-01",
      "compatibility_flags": ["nodejs_compat_v2"],
      "vars": { "A": "a", "N": 3, "OBJ": { "k": "v" }, "SECRET": "not this" }, /* trailing comma: */
    }"#,
  );
  write(&d, ".dev.vars", "SECRET=\"from dev vars\"\n");
  let ch = Cellhost::start(&d, &[]);
  assert_eq!(get(ch.addr, "/").text(), "a|3|v|from dev vars");
}

#[test]
fn config_keys_cellhost_does_not_act_on_are_never_silent() {
  let d = tmpdir("keys");
  write(
    &d,
    "index.js",
    "export default { fetch() { return new Response('up') } }",
  );
  let base = "name = \"k\"\nmain = \"index.js\"\ncompatibility_date = \"2026-11-01\"\n";
  // A binding the Worker would see stops the start, by name.
  write(
    &d,
    "wrangler.toml",
    &format!("{base}[[vectorize]]\nbinding = \"V\"\nindex_name = \"x\"\n"),
  );
  let (code, out) = cellhost_fails(&d);
  assert_eq!(code, Some(1), "{out}");
  assert!(
    out.contains("`vectorize` (Vectorize bindings) is not supported"),
    "{out}"
  );
  // Settings that change nothing here, and unknown keys, are warnings.
  write(
    &d,
    "wrangler.toml",
    &format!(
      "{base}compatibility_flags = [\"fetcher_has_get_put_delete\", \"made_up_flag\", \"url_original\"]\n\
       workers_dev = true\nmade_up_key = 1\n[observability]\nenabled = true\n"
    ),
  );
  let ch = Cellhost::start(&d, &[]);
  assert_eq!(get(ch.addr, "/").text(), "up");
  let log = ch.log();
  for key in [
    "`workers_dev` is ignored",
    "`observability` is ignored",
    "unknown key `made_up_key`",
    "unknown compatibility flag `made_up_flag` is ignored (workerd has no such flag)",
    "`url_original` is workerd's, but cellhost does not read it",
    "`fetcher_has_get_put_delete`: get/put/delete on service bindings not supported",
  ] {
    assert!(log.contains(key), "{key}: {log}");
  }
}

#[test]
fn syntax_error_exits_with_location() {
  let d = tmpdir("syntax");
  let f = write(
    &d,
    "bad.js",
    "export default {\n  fetch() {\n    return new Response(;\n  }\n}\n",
  );
  let (code, out) = cellhost_fails(&f);
  assert_ne!(code, Some(0));
  assert!(out.contains("SyntaxError"), "{out}");
  assert!(out.contains("bad.js:3:"), "no file:line:column in: {out}");
}

#[test]
fn missing_default_export_is_named() {
  let d = tmpdir("nodefault");
  let f = write(&d, "w.js", "export const x = 1;\n");
  let (code, out) = cellhost_fails(&f);
  assert_ne!(code, Some(0));
  assert!(out.contains("no default export"), "{out}");
}

#[test]
fn missing_fetch_handler_is_named() {
  let d = tmpdir("nofetch");
  let f = write(&d, "w.js", "export default { scheduled() {} };\n");
  let ch = Cellhost::start(&f, &[]);
  assert!(
    ch.wait_log("no fetch() handler", Duration::from_secs(5)),
    "{}",
    ch.log()
  );
  assert_eq!(get(ch.addr, "/").status, 500);
  assert!(
    ch.wait_log(
      "Handler does not export a fetch() function.",
      Duration::from_secs(5)
    ),
    "{}",
    ch.log()
  );
}

/// A request nothing can settle any more is cancelled as workerd cancels
/// it (a 500, the reason logged), even when another request could have
/// settled it later; an object's request waiting for the object's next
/// request (a long poll) is left waiting, as on workerd.
#[test]
fn a_hung_request_is_cancelled_but_an_objects_long_poll_waits() {
  let worker = r#"
import { DurableObject } from "cloudflare:workers";
let waiters = [];
export class Obj extends DurableObject {
  waiters = [];
  async fetch(req) {
    if (new URL(req.url).pathname === "/wait") {
      return new Response("got " + await new Promise((r) => this.waiters.push(r)));
    }
    const n = this.waiters.length;
    this.waiters.forEach((r) => r("msg"));
    this.waiters = [];
    return new Response("woke " + n);
  }
}
export default {
  async fetch(req, env) {
    const { pathname } = new URL(req.url);
    if (pathname === "/swait") return new Response("got " + await new Promise((r) => waiters.push(r)));
    if (pathname === "/spost") {
      const n = waiters.length;
      waiters.forEach((r) => r("msg"));
      return new Response("woke " + n);
    }
    return env.OBJ.getByName("room").fetch(req);
  },
};
"#;
  let d = project("hung", worker, OBJ_BINDING);
  let ch = Cellhost::start(&d, &["--isolates", "1"]);
  let addr = ch.addr;
  let waiting = std::thread::spawn(move || get(addr, "/wait"));
  std::thread::sleep(Duration::from_millis(500));
  assert_eq!(get(addr, "/post").text(), "woke 1");
  let r = waiting.join().unwrap();
  assert_eq!((r.status, r.text().as_str()), (200, "got msg"));
  // Nothing but /spost could settle /swait, and it is not sent until
  // /swait is answered: once the isolate has nothing else pending (the
  // object's timers count), /swait is hung.
  let r = get(addr, "/swait");
  assert_eq!(
    (r.status, r.text().as_str()),
    (500, "Internal Server Error")
  );
  assert!(
    ch.wait_log(
      "had hung and would never generate a response",
      Duration::from_secs(5)
    ),
    "{}",
    ch.log()
  );
  // The cancelled request's resolver is still in the array; settling it
  // later reaches no one.
  assert_eq!(get(addr, "/spost").text(), "woke 1");
}

#[test]
fn uncaught_exception_logs_stack_and_returns_500() {
  let d = tmpdir("throw");
  let f = write(
    &d,
    "w.js",
    "function inner() { throw new RangeError('deep') }\nexport default { fetch() { inner() } };\n",
  );
  let ch = Cellhost::start(&f, &[]);
  assert_eq!(get(ch.addr, "/").status, 500);
  assert!(
    ch.wait_log("RangeError: deep", Duration::from_secs(5)),
    "{}",
    ch.log()
  );
  assert!(
    ch.log().contains("at inner"),
    "no stack in log: {}",
    ch.log()
  );
}

#[test]
fn missing_workers_apis_fail_loudly() {
  let d = tmpdir("missing");
  let f2 = write(
    &d,
    "node.js",
    "import fs from 'node:fs';\nexport default { fetch() { return new Response('x') } };",
  );
  let (code, out) = cellhost_fails(&f2);
  assert_ne!(code, Some(0));
  assert!(out.contains("node:fs"), "{out}");
}

#[test]
fn console_goes_to_the_host_log() {
  let d = tmpdir("console");
  let f = write(
    &d,
    "w.js",
    "export default { fetch() { console.log('hello-from-js', {a: 1}); console.error('bad-thing'); return new Response('ok') } };",
  );
  let ch = Cellhost::start(&f, &[]);
  assert_eq!(get(ch.addr, "/").text(), "ok");
  assert!(
    ch.wait_log("hello-from-js { a: 1 }", Duration::from_secs(5)),
    "{}",
    ch.log()
  );
  assert!(
    ch.wait_log("bad-thing", Duration::from_secs(5)),
    "{}",
    ch.log()
  );
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
  let d = tmpdir("keepalive");
  let f = write(
    &d,
    "w.js",
    "let n = 0; export default { fetch() { return new Response(String(++n)) } };",
  );
  let ch = Cellhost::start(&f, &["--isolates", "1"]);
  let mut s = TcpStream::connect(ch.addr).unwrap();
  s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
  for i in 1..=20 {
    write!(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with(&format!("\r\n\r\n{i}")), "{text}");
  }
}

#[test]
fn streams_request_and_response_bodies() {
  let d = tmpdir("stream");
  // Echoes the body back through a stream, chunk by chunk, as it arrives.
  let f = write(
    &d,
    "w.js",
    "export default { fetch(req) { return new Response(req.body) } };",
  );
  let ch = Cellhost::start(&f, &[]);
  let mut s = TcpStream::connect(ch.addr).unwrap();
  s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
  write!(
    s,
    "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"
  )
  .unwrap();
  s.flush().unwrap();
  // The first chunk comes back before the request body has ended.
  let mut got = Vec::new();
  let mut buf = [0u8; 4096];
  while !String::from_utf8_lossy(&got).contains("first") {
    let n = s.read(&mut buf).unwrap();
    assert!(n > 0, "connection closed early");
    got.extend_from_slice(&buf[..n]);
  }
  write!(s, "6\r\nsecond\r\n0\r\n\r\n").unwrap();
  while !String::from_utf8_lossy(&got).contains("\r\n0\r\n\r\n") {
    let n = s.read(&mut buf).unwrap();
    assert!(n > 0, "connection closed early");
    got.extend_from_slice(&buf[..n]);
  }
  let r = parse_response(&got).unwrap();
  assert_eq!(r.text(), "firstsecond");

  // A large body round-trips intact.
  let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
  let r = request(ch.addr, "POST", "/", &[], &big).unwrap();
  assert_eq!(r.body.len(), big.len());
  assert!(r.body == big);
}

#[test]
fn wait_until_work_finishes_after_the_response() {
  let up = upstream();
  let d = tmpdir("waituntil");
  let f = write(
    &d,
    "w.js",
    &format!(
      "export default {{ fetch(req, env, ctx) {{ ctx.passThroughOnException(); ctx.waitUntil((async () => {{ await new Promise(r => setTimeout(r, 300)); const r = await fetch('http://{up}/late'); console.log('waitUntil done', r.status) }})()); return new Response('early') }} }};"
    ),
  );
  let ch = Cellhost::start(&f, &[]);
  assert_eq!(get(ch.addr, "/").text(), "early");
  assert!(!ch.log().contains("waitUntil done"));
  assert!(
    ch.wait_log("waitUntil done 200", Duration::from_secs(5)),
    "{}",
    ch.log()
  );
}

#[test]
fn cpu_limit_ends_the_request_and_recycles_the_isolate() {
  let d = tmpdir("cpu");
  let f = write(
    &d,
    "w.js",
    "let boots = (globalThis.boots ?? 0) + 1; export default { fetch(req) { if (new URL(req.url).pathname === '/spin') { for (;;) {} } return new Response('fine ' + boots) } };",
  );
  let ch = Cellhost::start(&f, &["--isolates", "2", "--cpu-ms", "200"]);
  let spin = request(ch.addr, "GET", "/spin", &[], b"").unwrap();
  assert_eq!(spin.status, 500);
  assert!(
    ch.wait_log(
      "exceeded the CPU time limit of 200 ms",
      Duration::from_secs(5)
    ),
    "{}",
    ch.log()
  );
  // The process and the other requests are unharmed, on both isolates.
  for _ in 0..10 {
    let r = get(ch.addr, "/");
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("fine"));
  }
}

#[test]
fn heap_limit_ends_the_request_and_recycles_the_isolate() {
  let d = tmpdir("heap");
  let f = write(
    &d,
    "w.js",
    "export default { fetch(req) { if (new URL(req.url).pathname === '/hog') { const a = []; for (;;) a.push(new Array(1e5).fill(a.length)); } return new Response('fine') } };",
  );
  let ch = Cellhost::start(&f, &["--isolates", "1", "--memory-mb", "64"]);
  let hog = request(ch.addr, "GET", "/hog", &[], b"").unwrap();
  assert_eq!(hog.status, 500);
  assert!(
    ch.wait_log("exceeded its heap limit of 64 MiB", Duration::from_secs(10)),
    "{}",
    ch.log()
  );
  assert_eq!(get(ch.addr, "/").text(), "fine");
}

#[test]
fn requests_spread_over_isolates() {
  let d = tmpdir("spread");
  let f = write(
    &d,
    "w.js",
    "const id = crypto.randomUUID(); export default { fetch() { return new Response(id) } };",
  );
  let ch = Cellhost::start(&f, &["--isolates", "2"]);
  let mut seen = std::collections::HashSet::new();
  for _ in 0..40 {
    seen.insert(get(ch.addr, "/").text());
  }
  assert_eq!(seen.len(), 2, "requests reached {} isolates", seen.len());
}

#[test]
fn rust_log_controls_tracing() {
  let d = tmpdir("rustlog");
  let f = write(
    &d,
    "w.js",
    "export default { fetch() { console.log('quiet-please'); return new Response('ok') } };",
  );
  let mut child = std::process::Command::new(cellhost_bin())
    .args(["run", f.to_str().unwrap(), "--listen", "127.0.0.1:0"])
    .env("RUST_LOG", "error")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
  let mut line = String::new();
  std::io::BufRead::read_line(
    &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
    &mut line,
  )
  .unwrap();
  let addr = line
    .split("http://")
    .nth(1)
    .unwrap()
    .split_whitespace()
    .next()
    .unwrap()
    .parse()
    .unwrap();
  assert_eq!(get(addr, "/").text(), "ok");
  std::thread::sleep(Duration::from_millis(200));
  child.kill().unwrap();
  let out = child.wait_with_output().unwrap();
  assert!(!String::from_utf8_lossy(&out.stderr).contains("quiet-please"));
}

#[test]
fn cloudflare_email_builds_messages_and_unknown_cloudflare_modules_are_named() {
  let d = tmpdir("cf-modules");
  let f = write(
    &d,
    "w.js",
    "import { EmailMessage } from 'cloudflare:email';\nexport default { fetch() { const m = new EmailMessage('a@example.com', 'b@example.com', 'Subject: hi\\r\\n\\r\\nbody'); return new Response([m.from, m.to, m instanceof EmailMessage, typeof m.raw].join(' ')) } };",
  );
  let ch = Cellhost::start(&f, &[]);
  assert_eq!(
    get(ch.addr, "/").text(),
    "a@example.com b@example.com true undefined"
  );
  drop(ch);
  let f2 = write(
    &d,
    "ai.js",
    "import { x } from 'cloudflare:ai';\nexport default { fetch() { return new Response('x') } };",
  );
  let (code, out) = cellhost_fails(&f2);
  assert_ne!(code, Some(0));
  assert!(
    out.contains("cloudflare:ai") && out.contains("not supported"),
    "{out}"
  );
}

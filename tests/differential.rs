//! Differential tests: every fixture under tests/fixtures runs on Cloudflare's
//! workerd (npm `workerd`, pinned in tests/package.json) and on cellhost, with
//! the same bytes and the same requests; status, selected headers and body
//! must be equal.
//!
//! A fixture is `NAME.js` (or a directory `NAME/` with `worker.js` and the
//! modules it imports, typed by extension as wrangler's default rules type
//! them: `.js` ES module, `.txt`/`.html`/`.sql` Text, `.bin` Data, `.wasm`
//! CompiledWasm, `.json` JSON). Directives in `// @` comments at the top:
//!   `// @request METHOD PATH [BODY]`  a request to send (default `GET /`)
//!   `// @ws PATH [MSG | MSG ...]`     a WebSocket session: connect, send the
//!                                     messages (`!close CODE REASON` sends a
//!                                     Close, `!wait` pauses 200 ms), then
//!                                     record what arrives until the close
//!   `// @header NAME: VALUE`          a request header for every request
//!   `// @compare NAME[,NAME]`         response headers to compare (default content-type)
//!   `// @var NAME=VALUE`              a text binding; `$UPSTREAM` expands to the
//!                                     loopback echo server's origin
//!   `// @do BINDING=Class`             a Durable Object namespace (SQLite-backed
//!                                     unless `// @kv-class Class`), unique key
//!                                     `<fixture name>-<Class>` on both runtimes
//!   `// @do =Class`                   a namespace no binding names (ctx.exports)
//!   `// @service BINDING[=Entry] [JSON]` a service binding to the fixture itself
//!                                     (a named entrypoint, props as JSON)
//!   `// @divergence TEXT`             a documented, accepted difference (not compared)
//!   `// @isolates N`                  cellhost's isolate count (default 2; 1 when the
//!                                     fixture keeps state across requests, as
//!                                     workerd's single isolate does)
//!
//! `FIXTURES=SUBSTRING` runs only the fixtures whose names contain it.

mod support;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::*;

struct Fixture {
  name: String,
  main: PathBuf,
  modules: Vec<PathBuf>,
  requests: Vec<(String, String, String)>,
  headers: Vec<(String, String)>,
  compare: Vec<String>,
  vars: Vec<(String, String)>,
  dos: Vec<(String, String)>,
  kv_classes: Vec<String>,
  isolates: String,
  /// Service bindings to the fixture itself: (binding, entrypoint, props JSON).
  services: Vec<(String, Option<String>, Option<String>)>,
}

fn fixtures() -> Vec<Fixture> {
  let dir = repo_root().join("tests/fixtures");
  let mut out = Vec::new();
  let mut entries: Vec<_> = std::fs::read_dir(&dir)
    .unwrap()
    .map(|e| e.unwrap().path())
    .collect();
  entries.sort();
  for path in entries {
    let (name, main, modules) = if path.is_dir() {
      let mut modules = module_files(&path);
      modules.sort();
      (
        path.file_name().unwrap().to_string_lossy().into_owned(),
        path.join("worker.js"),
        modules,
      )
    } else if path.extension().is_some_and(|e| e == "js") {
      (
        path.file_stem().unwrap().to_string_lossy().into_owned(),
        path.clone(),
        vec![path.clone()],
      )
    } else {
      continue;
    };
    let src = std::fs::read_to_string(&main).unwrap();
    let mut f = Fixture {
      name,
      main,
      modules,
      requests: vec![],
      headers: vec![],
      compare: vec!["content-type".into()],
      vars: vec![],
      dos: vec![],
      kv_classes: vec![],
      isolates: "2".into(),
      services: vec![],
    };
    for line in src.lines() {
      let Some(d) = line.trim().strip_prefix("// @") else {
        continue;
      };
      let (key, rest) = d.split_once(' ').unwrap_or((d, ""));
      match key {
        "request" => {
          let mut p = rest.splitn(3, ' ');
          let m = p.next().unwrap().to_string();
          let path = p.next().unwrap_or("/").to_string();
          f.requests
            .push((m, path, p.next().unwrap_or("").to_string()));
        }
        // A WebSocket session: messages to send, separated by " | ".
        "ws" => {
          let (path, msgs) = rest.split_once(' ').unwrap_or((rest, ""));
          f.requests.push(("WS".into(), path.into(), msgs.into()));
        }
        "header" => {
          let (k, v) = rest.split_once(':').unwrap();
          f.headers.push((k.trim().into(), v.trim().into()));
        }
        "compare" => f
          .compare
          .extend(rest.split(',').map(|s| s.trim().to_ascii_lowercase())),
        "do" => {
          let (k, v) = rest.split_once('=').unwrap();
          f.dos.push((k.trim().into(), v.trim().into()));
        }
        "kv-class" => f.kv_classes.push(rest.trim().into()),
        // `// @service BINDING[=Entrypoint] [PROPS-JSON]`
        "service" => {
          let (target, props) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
          let (binding, ep) = match target.split_once('=') {
            Some((b, e)) => (b.to_string(), Some(e.to_string())),
            None => (target.to_string(), None),
          };
          let props = (!props.trim().is_empty()).then(|| props.trim().to_string());
          f.services.push((binding, ep, props));
        }
        "isolates" => f.isolates = rest.trim().to_string(),
        "divergence" => {}
        "var" => {
          let (k, v) = rest.split_once('=').unwrap();
          f.vars.push((k.trim().into(), v.trim().into()));
        }
        other => panic!("{}: unknown directive // @{other}", f.name),
      }
    }
    if f.requests.is_empty() {
      f.requests.push(("GET".into(), "/".into(), String::new()));
    }
    out.push(f);
  }
  out
}

fn module_files(dir: &Path) -> Vec<PathBuf> {
  let mut out = Vec::new();
  for e in std::fs::read_dir(dir).unwrap() {
    let p = e.unwrap().path();
    if p.is_dir() {
      out.extend(module_files(&p));
    } else if module_kind(&p).is_some() {
      out.push(p);
    }
  }
  out
}

/// workerd's module kind for a fixture file, by wrangler's default rules.
fn module_kind(p: &Path) -> Option<&'static str> {
  Some(match p.extension()?.to_str()? {
    "js" => "esModule",
    "txt" | "html" | "sql" => "text",
    "bin" => "data",
    "wasm" => "wasm",
    "json" => "json",
    _ => return None,
  })
}

fn is_module(src: &str) -> bool {
  cellhost_host::WorkerSpec::detect_format(src) == cellhost_host::Format::Module
}

fn capnp_string(s: &str) -> String {
  format!("{s:?}")
}

/// One workerd process serving every fixture, each on its own port.
fn start_workerd(fixtures: &[Fixture], upstream: &str, tmp: &Path) -> (Child, Vec<SocketAddr>) {
  let mut cfg = String::from("using Workerd = import \"/workerd/workerd.capnp\";\n");
  let mut services =
    vec!["(name = \"net\", network = (allow = [\"public\", \"private\", \"local\"]))".to_string()];
  let mut sockets = Vec::new();
  let mut addrs = Vec::new();
  let mut workers = String::new();
  // Hold every port until all are chosen, so no two fixtures get the same one.
  let held: Vec<std::net::TcpListener> = fixtures
    .iter()
    .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
    .collect();
  for (i, f) in fixtures.iter().enumerate() {
    let port = held[i].local_addr().unwrap().port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    addrs.push(addr);
    services.push(format!("(name = \"s{i}\", worker = .w{i})"));
    sockets.push(format!(
      "(name = \"k{i}\", address = \"{addr}\", http = (), service = \"s{i}\")"
    ));
    // workerd embeds files relative to its config: copy the fixture next to it.
    let base = f.main.parent().unwrap();
    let embed = |m: &Path| {
      let rel = Path::new(&format!("w{i}")).join(m.strip_prefix(base).unwrap());
      std::fs::create_dir_all(tmp.join(&rel).parent().unwrap()).unwrap();
      std::fs::copy(m, tmp.join(&rel)).unwrap();
      capnp_string(&rel.to_string_lossy())
    };
    let src = std::fs::read_to_string(&f.main).unwrap();
    let code = if is_module(&src) {
      // workerd takes the first module as the main one.
      let mut mods: Vec<&PathBuf> = f.modules.iter().filter(|m| **m != f.main).collect();
      mods.insert(0, &f.main);
      let mods: Vec<String> = mods
        .into_iter()
        .map(|m| {
          let name = m.strip_prefix(base).unwrap().to_string_lossy().into_owned();
          format!(
            "(name = {}, {} = embed {})",
            capnp_string(&name),
            module_kind(m).unwrap(),
            embed(m)
          )
        })
        .collect();
      format!("modules = [{}]", mods.join(", "))
    } else {
      format!("serviceWorkerScript = embed {}", embed(&f.main))
    };
    let mut bindings: Vec<String> = f
      .vars
      .iter()
      .map(|(k, v)| {
        format!(
          "(name = {}, text = {})",
          capnp_string(k),
          capnp_string(&v.replace("$UPSTREAM", upstream))
        )
      })
      .collect();
    for (binding, ep, props) in &f.services {
      let mut designator = format!("name = \"s{i}\"");
      if let Some(ep) = ep {
        write!(designator, ", entrypoint = {}", capnp_string(ep)).unwrap();
      }
      if let Some(p) = props {
        write!(designator, ", props = (json = {})", capnp_string(p)).unwrap();
      }
      bindings.push(format!(
        "(name = {}, service = ({designator}))",
        capnp_string(binding)
      ));
    }
    let mut do_config = String::new();
    if !f.dos.is_empty() {
      let store = tmp.join(format!("do{i}"));
      std::fs::create_dir_all(&store).unwrap();
      services.push(format!(
        "(name = \"do{i}\", disk = (path = {}, writable = true))",
        capnp_string(&store.to_string_lossy())
      ));
      let nss: Vec<String> = f
        .dos
        .iter()
        .map(|(_, class)| {
          let sql = !f.kv_classes.contains(class);
          format!(
            "(className = {}, uniqueKey = {}, enableSql = {sql})",
            capnp_string(class),
            capnp_string(&format!("{}-{class}", f.name))
          )
        })
        .collect();
      for (binding, class) in f.dos.iter().filter(|(b, _)| !b.is_empty()) {
        bindings.push(format!(
          "(name = {}, durableObjectNamespace = {})",
          capnp_string(binding),
          capnp_string(class)
        ));
      }
      do_config = format!(
        ", durableObjectNamespaces = [{}], durableObjectStorage = (localDisk = \"do{i}\")",
        nss.join(", ")
      );
    }
    writeln!(
      workers,
      "const w{i} :Workerd.Worker = ({code}, compatibilityDate = \"2026-11-01\", bindings = [{}], globalOutbound = \"net\"{do_config});",
      bindings.join(", ")
    )
    .unwrap();
  }
  writeln!(
    cfg,
    "const config :Workerd.Config = (services = [{}], sockets = [{}]);\n{workers}",
    services.join(", "),
    sockets.join(", ")
  )
  .unwrap();
  let path = tmp.join("config.capnp");
  std::fs::write(&path, cfg).unwrap();
  drop(held);
  // --experimental: Durable Object facets are behind it in workerd serve.
  let child = Command::new(workerd_bin())
    .arg("serve")
    .arg("--experimental")
    .arg(&path)
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(tmp.join("workerd.log")).unwrap())
    .spawn()
    .expect("starting workerd");
  for a in &addrs {
    if !wait_port(*a, Duration::from_secs(20)) {
      let log = std::fs::read_to_string(tmp.join("workerd.log")).unwrap_or_default();
      panic!("workerd did not listen on {a}:\n{log}");
    }
  }
  (child, addrs)
}

/// A wrangler.toml for cellhost that points at the fixture file.
fn cellhost_dir(f: &Fixture, upstream: &str, tmp: &Path) -> PathBuf {
  let dir = tmp.join(&f.name);
  std::fs::create_dir_all(&dir).unwrap();
  let mut toml = format!(
    "name = {:?}\nmain = {:?}\ncompatibility_date = \"2026-11-01\"\n[vars]\n",
    f.name,
    f.main.to_string_lossy()
  );
  for (k, v) in &f.vars {
    writeln!(toml, "{k} = {:?}", v.replace("$UPSTREAM", upstream)).unwrap();
  }
  for (binding, class) in f.dos.iter().filter(|(b, _)| !b.is_empty()) {
    writeln!(
      toml,
      "[[durable_objects.bindings]]\nname = {binding:?}\nclass_name = {class:?}"
    )
    .unwrap();
  }
  for (binding, ep, props) in &f.services {
    writeln!(
      toml,
      "[[services]]\nbinding = {binding:?}\nservice = {:?}",
      f.name
    )
    .unwrap();
    if let Some(ep) = ep {
      writeln!(toml, "entrypoint = {ep:?}").unwrap();
    }
    if let Some(p) = props {
      let v: serde_json::Value = serde_json::from_str(p).expect("props: JSON");
      writeln!(toml, "props = {}", toml_inline(&v)).unwrap();
    }
  }
  if !f.dos.is_empty() {
    let (sql, kv): (Vec<_>, Vec<_>) = f
      .dos
      .iter()
      .map(|(_, c)| c.clone())
      .partition(|c| !f.kv_classes.contains(c));
    writeln!(
      toml,
      "[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = {sql:?}\nnew_classes = {kv:?}"
    )
    .unwrap();
  }
  std::fs::write(dir.join("wrangler.toml"), toml).unwrap();
  dir
}

/// A JSON value as a TOML inline value (strings keep JSON's escapes, which
/// TOML's basic strings share).
fn toml_inline(v: &serde_json::Value) -> String {
  use serde_json::Value;
  match v {
    Value::Object(m) => format!(
      "{{ {} }}",
      m.iter()
        .map(|(k, v)| format!("{} = {}", Value::from(k.as_str()), toml_inline(v)))
        .collect::<Vec<_>>()
        .join(", ")
    ),
    Value::Array(a) => format!(
      "[{}]",
      a.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
    ),
    Value::Null => panic!("TOML has no null"),
    other => other.to_string(),
  }
}

fn summarize(r: &Resp, compare: &[String]) -> String {
  let mut s = format!("{}", r.status);
  for h in compare {
    write!(s, " | {h}: {}", r.header(h).unwrap_or("-")).unwrap();
  }
  write!(s, " | {}", r.text()).unwrap();
  s
}

#[test]
fn fixtures_match_workerd() {
  let mut fixtures = fixtures();
  assert!(fixtures.len() >= 25, "only {} fixtures", fixtures.len());
  // While developing: `FIXTURES=do_alarm cargo test --test differential`.
  if let Ok(only) = std::env::var("FIXTURES") {
    fixtures.retain(|f| f.name.contains(&only));
  }
  let tmp = std::env::temp_dir().join(format!("cellhost-diff-{}", std::process::id()));
  std::fs::create_dir_all(&tmp).unwrap();
  let upstream = format!("http://{}", upstream());
  let (mut workerd, waddrs) = start_workerd(&fixtures, &upstream, &tmp);
  let mut failures = Vec::new();
  let mut compared = 0;
  for (f, waddr) in fixtures.iter().zip(&waddrs) {
    let data = tmp.join(format!("{}-data", f.name));
    let ch = Cellhost::start(
      &cellhost_dir(f, &upstream, &tmp),
      &["--isolates", &f.isolates, "--data", data.to_str().unwrap()],
    );
    for (method, path, body) in &f.requests {
      let headers: Vec<(&str, &str)> = f
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
      let run = |addr| {
        if method == "WS" {
          return ws_session(addr, path, body);
        }
        request(addr, method, path, &headers, body.as_bytes())
          .map(|r| summarize(&r, &f.compare))
          .unwrap_or_else(|e| format!("error {e}"))
      };
      let want = run(*waddr);
      let got = run(ch.addr);
      compared += 1;
      if want != got {
        failures.push(format!(
          "{} {method} {path}\n  workerd:  {want}\n  cellhost: {got}\n  log: {}",
          f.name,
          ch.log()
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join(" / ")
        ));
      }
    }
  }
  let alive = workerd.try_wait().map(|s| s.is_none()).unwrap_or(false);
  let _ = workerd.kill();
  let _ = workerd.wait();
  let wlog = std::fs::read_to_string(tmp.join("workerd.log")).unwrap_or_default();
  if !alive {
    failures.push(format!("workerd exited during the run; its log:\n{wlog}"));
  }
  let _ = std::fs::remove_dir_all(&tmp);
  println!(
    "{} fixtures, {compared} requests compared, {} differ",
    fixtures.len(),
    failures.len()
  );
  assert!(
    failures.is_empty(),
    "differences from workerd:\n{}",
    failures.join("\n")
  );
}

/// One WebSocket session; its transcript: what arrived, in order, and how
/// the connection ended.
fn ws_session(addr: SocketAddr, path: &str, msgs: &str) -> String {
  use tokio_tungstenite::tungstenite::protocol::CloseFrame;
  use tokio_tungstenite::tungstenite::stream::MaybeTlsStream;
  use tokio_tungstenite::tungstenite::{Error, Message, connect};
  let (mut ws, resp) = match connect(format!("ws://{addr}{path}")) {
    Ok(c) => c,
    Err(Error::Http(r)) => return format!("refused {}", r.status()),
    Err(e) => return format!("connect error: {e}"),
  };
  if let MaybeTlsStream::Plain(s) = ws.get_mut() {
    // workerd on a loaded machine has taken over 1.5 s to answer a Close.
    s.set_read_timeout(Some(Duration::from_millis(3000)))
      .unwrap();
  }
  let mut out = vec![format!("{}", resp.status().as_u16())];
  for m in msgs.split(" | ").map(str::trim).filter(|m| !m.is_empty()) {
    let sent = if m == "!wait" {
      std::thread::sleep(Duration::from_millis(200));
      Ok(())
    } else if let Some(rest) = m.strip_prefix("!close") {
      let rest = rest.trim();
      let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
      ws.close(Some(CloseFrame {
        code: code.parse::<u16>().unwrap_or(1000).into(),
        reason: reason.to_string().into(),
      }))
    } else if let Some(hex) = m.strip_prefix("!binary ") {
      let bytes = hex
        .split(',')
        .map(|b| b.trim().parse::<u8>().unwrap())
        .collect::<Vec<u8>>();
      ws.send(Message::binary(bytes))
    } else {
      ws.send(Message::text(m))
    };
    if let Err(e) = sent {
      out.push(format!("send error {e}"));
      break;
    }
  }
  loop {
    match ws.read() {
      Ok(Message::Text(t)) => out.push(format!("text {t}")),
      Ok(Message::Binary(b)) => out.push(format!("binary {:?}", b.to_vec())),
      Ok(Message::Close(f)) => out.push(format!(
        "close {}",
        f.map(|f| format!("{} {}", u16::from(f.code), f.reason))
          .unwrap_or_default()
      )),
      Ok(_) => {}
      Err(Error::ConnectionClosed | Error::AlreadyClosed) => break,
      Err(Error::Io(e))
        if matches!(
          e.kind(),
          std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) =>
      {
        out.push("idle".into());
        break;
      }
      Err(e) => {
        out.push(format!("ended: {e}"));
        break;
      }
    }
  }
  out.join(" ; ")
}

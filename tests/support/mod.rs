//! Helpers shared by the integration tests: start `cellhost` and workerd,
//! speak plain HTTP/1.1 to them, and run a loopback upstream server.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
  Path::new(env!("CARGO_MANIFEST_DIR"))
    .join("../..")
    .canonicalize()
    .unwrap()
}

/// The binary under test: this build's, or `CELLHOST_BIN` (to run the same
/// tests, the fault lab above all, against another build, e.g. an older one).
/// The reference runtime, workerd (npm, pinned in tests/package.json).
pub fn workerd_bin() -> PathBuf {
  let p = repo_root().join("tests/node_modules/.bin/workerd");
  assert!(
    p.exists(),
    "workerd is not installed: run `npm ci --prefix tests` (scripts/test.sh does this)"
  );
  p
}

pub fn cellhost_bin() -> PathBuf {
  std::env::var_os("CELLHOST_BIN")
    .map(PathBuf::from)
    .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cellhost")))
}

/// A running `cellhost run`; killed on drop. Its stderr is collected.
pub struct Cellhost {
  pub child: Child,
  pub addr: SocketAddr,
  pub log: Arc<Mutex<String>>,
}

impl Cellhost {
  pub fn start(path: &Path, extra: &[&str]) -> Cellhost {
    Self::try_start(path, extra).unwrap_or_else(|e| panic!("cellhost run {}: {e}", path.display()))
  }

  pub fn try_start(path: &Path, extra: &[&str]) -> Result<Cellhost, String> {
    Self::try_start_env(path, extra, &[])
  }

  pub fn try_start_env(
    path: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
  ) -> Result<Cellhost, String> {
    let mut args = vec!["run", path.to_str().unwrap()];
    args.extend(extra);
    Self::try_start_cmd(&args, env)
  }

  /// `cellhost ARGS --listen 127.0.0.1:0` (a `run` or a `node`), once it
  /// printed the address it serves on.
  pub fn try_start_cmd(args: &[&str], env: &[(&str, &str)]) -> Result<Cellhost, String> {
    let (cmd, extra) = args.split_at(1.min(args.len()));
    let (path, extra) = match cmd.first() {
      Some(&"run") => extra.split_at(1.min(extra.len())),
      _ => (&[][..], extra),
    };
    let mut child = Command::new(cellhost_bin())
      .args(cmd)
      .args(path)
      .args(["--listen", "127.0.0.1:0"])
      .args(extra)
      .envs(env.iter().copied())
      .env(
        "RUST_LOG",
        std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
      )
      .stdout(Stdio::piped())
      .stderr(Stdio::piped())
      .spawn()
      .map_err(|e| e.to_string())?;
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    std::thread::spawn(move || {
      for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        let mut s = sink.lock().unwrap();
        s.push_str(&line);
        s.push('\n');
      }
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
      let mut rest = String::new();
      let _ = stdout.read_to_string(&mut rest);
    });
    let Some(addr) = line
      .split("http://")
      .nth(1)
      .and_then(|r| r.split_whitespace().next())
    else {
      let _ = child.wait();
      std::thread::sleep(Duration::from_millis(100));
      return Err(format!("did not start: {line}{}", log.lock().unwrap()));
    };
    let addr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    Ok(Cellhost { child, addr, log })
  }

  pub fn log(&self) -> String {
    self.log.lock().unwrap().clone()
  }

  /// Waits until the log contains `needle` (the log is written by a thread).
  pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
      if self.log().contains(needle) {
        return true;
      }
      std::thread::sleep(Duration::from_millis(20));
    }
    false
  }
}

impl Drop for Cellhost {
  fn drop(&mut self) {
    let _ = self.child.kill();
    let _ = self.child.wait();
  }
}

/// Runs `cellhost run` expecting it to fail at start; returns (exit code, stderr).
pub fn cellhost_fails(path: &Path) -> (Option<i32>, String) {
  // Its own data directory: tests run in parallel, and one process holds a
  // data directory at a time.
  let dir = if path.is_dir() {
    path
  } else {
    path.parent().unwrap()
  };
  // A start that does not fail would serve forever: give up after 30 s.
  let child = Command::new(cellhost_bin())
    .arg("run")
    .arg(path)
    .args(["--listen", "127.0.0.1:0", "--data"])
    .arg(dir.join(".data"))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
  let pid = child.id();
  let (tx, rx) = std::sync::mpsc::channel();
  std::thread::spawn(move || {
    if rx.recv_timeout(Duration::from_secs(30)).is_err() {
      let _ = Command::new("kill").arg(pid.to_string()).status();
    }
  });
  let out = child.wait_with_output().unwrap();
  let _ = tx.send(());
  let text = String::from_utf8_lossy(&out.stdout).to_string()
    + String::from_utf8_lossy(&out.stderr).as_ref();
  (out.status.code(), text)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resp {
  pub status: u16,
  pub headers: Vec<(String, String)>,
  pub body: Vec<u8>,
}

impl Resp {
  pub fn header(&self, name: &str) -> Option<&str> {
    self
      .headers
      .iter()
      .find(|(k, _)| k.eq_ignore_ascii_case(name))
      .map(|(_, v)| v.as_str())
  }

  pub fn text(&self) -> String {
    String::from_utf8_lossy(&self.body).into_owned()
  }
}

/// One request on a fresh connection (`Connection: close`).
pub fn request(
  addr: SocketAddr,
  method: &str,
  path: &str,
  headers: &[(&str, &str)],
  body: &[u8],
) -> std::io::Result<Resp> {
  let mut s = TcpStream::connect(addr)?;
  // Longer than the 30 s blockConcurrencyWhile limit a test waits out.
  s.set_read_timeout(Some(Duration::from_secs(90)))?;
  let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
  for (k, v) in headers {
    req.push_str(&format!("{k}: {v}\r\n"));
  }
  if !body.is_empty() || method == "POST" || method == "PUT" {
    req.push_str(&format!("Content-Length: {}\r\n", body.len()));
  }
  req.push_str("\r\n");
  s.write_all(req.as_bytes())?;
  s.write_all(body)?;
  // Read until the response is complete, not until the peer closes: some
  // servers (wrangler dev) keep the connection a while after `close`.
  let mut raw = Vec::new();
  let mut buf = [0u8; 16384];
  loop {
    let n = s.read(&mut buf)?;
    if n == 0 {
      break;
    }
    raw.extend_from_slice(&buf[..n]);
    if response_complete(&raw, method == "HEAD") {
      break;
    }
  }
  parse_response(&raw).ok_or_else(|| {
    std::io::Error::other(format!("bad response: {:?}", String::from_utf8_lossy(&raw)))
  })
}

/// Whether `raw` holds a whole response: its head, then the body its
/// framing announces (none for HEAD, 1xx, 204 and 304).
fn response_complete(raw: &[u8], head_request: bool) -> bool {
  let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
    return false;
  };
  let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
  let status: u16 = head
    .split(' ')
    .nth(1)
    .and_then(|s| s.parse().ok())
    .unwrap_or(0);
  if head_request || status < 200 || status == 204 || status == 304 {
    return true;
  }
  let body = &raw[end + 4..];
  let header = |name: &str| {
    head
      .split("\r\n")
      .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
  };
  if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
    return dechunk(body).is_some();
  }
  match header("content-length:").and_then(|v| v.parse::<usize>().ok()) {
    Some(n) => body.len() >= n,
    None => false,
  }
}

pub fn get(addr: SocketAddr, path: &str) -> Resp {
  request(addr, "GET", path, &[], b"").unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

pub fn parse_response(raw: &[u8]) -> Option<Resp> {
  let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
  let head = std::str::from_utf8(&raw[..end]).ok()?;
  let mut lines = head.split("\r\n");
  let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
  let headers: Vec<(String, String)> = lines
    .filter_map(|l| l.split_once(':'))
    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
    .collect();
  let mut body = raw[end + 4..].to_vec();
  let chunked = headers
    .iter()
    .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
  if chunked {
    body = dechunk(&body)?;
  }
  Some(Resp {
    status,
    headers,
    body,
  })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
  let mut out = Vec::new();
  loop {
    let line_end = data.windows(2).position(|w| w == b"\r\n")?;
    let size =
      usize::from_str_radix(std::str::from_utf8(&data[..line_end]).ok()?.trim(), 16).ok()?;
    data = &data[line_end + 2..];
    if size == 0 {
      return Some(out);
    }
    out.extend_from_slice(data.get(..size)?);
    data = data.get(size + 2..)?;
  }
}

/// Copies a directory tree (fixtures into a scratch directory).
pub fn copy_dir(from: &Path, to: &Path) {
  std::fs::create_dir_all(to).unwrap();
  for e in std::fs::read_dir(from).unwrap() {
    let e = e.unwrap();
    let dest = to.join(e.file_name());
    if e.file_type().unwrap().is_dir() {
      copy_dir(&e.path(), &dest);
    } else {
      std::fs::copy(e.path(), &dest).unwrap();
    }
  }
}

/// A fresh scratch directory of this test process.
pub fn tempdir(name: &str) -> PathBuf {
  let d = std::env::temp_dir().join(format!("cellhost-{name}-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&d);
  std::fs::create_dir_all(&d).unwrap();
  d
}

pub fn free_port() -> u16 {
  TcpListener::bind("127.0.0.1:0")
    .unwrap()
    .local_addr()
    .unwrap()
    .port()
}

/// The TCP ports a process listens on, from its open sockets' inodes and
/// the kernel's socket tables.
pub fn listening_ports(pid: u32) -> Vec<u16> {
  let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
    .unwrap()
    .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
    .filter_map(|l| {
      let l = l.to_string_lossy().into_owned();
      Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
    })
    .collect();
  let mut ports = Vec::new();
  for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
    let Ok(text) = std::fs::read_to_string(table) else {
      continue;
    };
    for line in text.lines().skip(1) {
      let f: Vec<&str> = line.split_whitespace().collect();
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; the inode is
      // the tenth field.
      if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
        let port = f[1].rsplit(':').next().unwrap();
        ports.push(u16::from_str_radix(port, 16).unwrap());
      }
    }
  }
  ports
}

pub fn wait_port(addr: SocketAddr, timeout: Duration) -> bool {
  let end = Instant::now() + timeout;
  while Instant::now() < end {
    if TcpStream::connect(addr).is_ok() {
      return true;
    }
    std::thread::sleep(Duration::from_millis(25));
  }
  false
}

/// A loopback HTTP server for outbound fetch tests: answers every request
/// with a JSON echo of method, path, a few headers and the body (paths
/// under /sse: a short server-sent event stream).
pub fn upstream() -> SocketAddr {
  let l = TcpListener::bind("127.0.0.1:0").unwrap();
  let addr = l.local_addr().unwrap();
  std::thread::spawn(move || {
    for s in l.incoming().map_while(Result::ok) {
      std::thread::spawn(move || {
        let _ = echo(s);
      });
    }
  });
  addr
}

fn echo(mut s: TcpStream) -> std::io::Result<()> {
  let mut r = BufReader::new(s.try_clone()?);
  loop {
    let mut first = String::new();
    if r.read_line(&mut first)? == 0 {
      return Ok(());
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    let mut xtest = String::new();
    loop {
      let mut l = String::new();
      r.read_line(&mut l)?;
      let l = l.trim_end();
      if l.is_empty() {
        break;
      }
      if let Some((k, v)) = l.split_once(':') {
        let k = k.trim().to_ascii_lowercase();
        if k == "content-length" {
          len = v.trim().parse().unwrap_or(0);
        } else if k == "x-test" {
          xtest = v.trim().to_string();
        }
      }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    if path == "/redirect" {
      // A redirect to the echo (redirect-mode fixtures).
      write!(
        s,
        "HTTP/1.1 302 Found\r\nlocation: /redirected\r\ncontent-length: 0\r\n\r\n"
      )?;
      continue;
    }
    if path.starts_with("/sse") {
      // A server-sent event stream (EventSource fixtures), then the end.
      let events = "retry: 50\nid: 7\ndata: one\n\nevent: tick\ndata: t\n\n: a comment\ndata: two\ndata: lines\n\nid\ndata: three\r\n\r\n";
      write!(
        s,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{events}",
        events.len()
      )?;
      continue;
    }
    let json = format!(
      "{{\"method\":{:?},\"path\":{:?},\"x-test\":{:?},\"body\":{:?}}}",
      method,
      path,
      xtest,
      String::from_utf8_lossy(&body)
    );
    write!(
      s,
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-upstream: yes\r\ncontent-length: {}\r\n\r\n{}",
      json.len(),
      json
    )?;
  }
}

/// A Worker project in a fresh temporary folder: `worker.js` and a
/// wrangler.toml named `name` with `extra_toml` appended.
#[allow(dead_code)]
pub fn project(name: &str, worker: &str, extra_toml: &str) -> PathBuf {
  let d = std::env::temp_dir().join(format!("cellhost-{}-{name}", std::process::id()));
  let _ = std::fs::remove_dir_all(&d);
  std::fs::create_dir_all(&d).unwrap();
  std::fs::write(d.join("worker.js"), worker).unwrap();
  std::fs::write(
    d.join("wrangler.toml"),
    format!(
      "name = \"{name}\"\nmain = \"worker.js\"\ncompatibility_date = \"2026-11-01\"\n{extra_toml}"
    ),
  )
  .unwrap();
  d
}

/// wrangler.toml lines binding the SQLite-backed class `Obj` as `OBJ`.
#[allow(dead_code)]
pub const OBJ_BINDING: &str = "[[durable_objects.bindings]]\nname = \"OBJ\"\nclass_name = \"Obj\"\n\
  [[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"Obj\"]\n";

/// `wrangler dev` (tests/node_modules) serving the project in `dir`, with
/// `extra` arguments; killed with its workerd when dropped.
pub struct WranglerDev(Child);

impl Drop for WranglerDev {
  fn drop(&mut self) {
    // SAFETY: kill(2) on the process group this test started.
    unsafe {
      libc::kill(-(self.0.id() as i32), libc::SIGKILL);
    }
    let _ = self.0.wait();
  }
}

pub fn wrangler_dev(dir: &Path, extra: &[&str]) -> (WranglerDev, SocketAddr) {
  use std::os::unix::process::CommandExt;
  let wrangler = repo_root().join("tests/node_modules/.bin/wrangler");
  assert!(
    wrangler.exists(),
    "wrangler is not installed: run `npm ci --prefix tests`"
  );
  // Now and then wrangler dev starts and prints nothing, never listening
  // (seen after several runs in a row on a 2-core machine); a fresh start
  // comes up within seconds, so a stuck one is replaced, three times at most.
  let mut tries = Vec::new();
  for attempt in 0..3 {
    let port = free_port();
    let out = dir.join(format!("wrangler-dev-{attempt}.log"));
    let child = Command::new(&wrangler)
      .args(["dev", "--ip", "127.0.0.1", "--port", &port.to_string()])
      .args(extra)
      .current_dir(dir)
      .env("WRANGLER_SEND_METRICS", "false")
      .env("CI", "true")
      .stdin(Stdio::null())
      .stdout(std::fs::File::create(&out).unwrap())
      .stderr(std::fs::File::create(dir.join(format!("wrangler-dev-{attempt}.err"))).unwrap())
      .process_group(0)
      .spawn()
      .expect("starting wrangler dev");
    let dev = WranglerDev(child);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    if wait_port(addr, Duration::from_secs(30)) {
      return (dev, addr);
    }
    eprintln!("wrangler dev: try {attempt} did not listen on {addr}; starting it again");
    tries.push(std::fs::read_to_string(&out).unwrap_or_default());
  }
  panic!("wrangler dev did not listen in 3 tries: {tries:?}");
}

/// The `// @request METHOD PATH [BODY]` lines of a Worker (default `GET /`).
#[allow(dead_code)]
pub fn requests(worker: &Path) -> Vec<(String, String, String)> {
  let src = std::fs::read_to_string(worker).unwrap();
  let mut out: Vec<(String, String, String)> = src
    .lines()
    .filter_map(|l| l.trim().strip_prefix("// @request "))
    .map(|r| {
      let mut p = r.splitn(3, ' ');
      (
        p.next().unwrap().to_string(),
        p.next().unwrap_or("/").to_string(),
        p.next().unwrap_or("").to_string(),
      )
    })
    .collect();
  if out.is_empty() {
    out.push(("GET".into(), "/".into(), String::new()));
  }
  out
}

/// A request's answer as compared between runtimes: status, content type, body.
#[allow(dead_code)]
pub fn answer(addr: std::net::SocketAddr, (m, path, body): &(String, String, String)) -> String {
  match request(addr, m, path, &[], body.as_bytes()) {
    Ok(r) => format!(
      "{} | {} | {}",
      r.status,
      r.header("content-type").unwrap_or("-"),
      r.text()
    ),
    Err(e) => format!("error: {e}"),
  }
}

/// Fleet nodes on one bucket in a scratch folder `<tmp>/cellhost-<tag>-<pid>`
/// (`file://<folder>/bucket` unless set otherwise), each with its data in
/// `data-<node>`, 3 s leases and one isolate; `extra` flags and `env` go to
/// every node (the S3 endpoint and keys, say); `worker` is what `run` serves.
#[allow(dead_code)]
pub struct Bucketed {
  pub dir: PathBuf,
  pub bucket: String,
  pub worker: PathBuf,
  pub extra: Vec<String>,
  pub env: Vec<(String, String)>,
}

#[allow(dead_code)]
impl Bucketed {
  pub fn new(tag: &str, worker: PathBuf) -> Bucketed {
    let dir = std::env::temp_dir().join(format!("cellhost-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bucket")).unwrap();
    Bucketed {
      bucket: format!("file://{}", dir.join("bucket").display()),
      dir,
      worker,
      extra: vec![],
      env: vec![],
    }
  }

  /// `cellhost run <worker>` as node `node`.
  pub fn run(&self, node: &str) -> Cellhost {
    self.start(&["run", self.worker.to_str().unwrap()], node)
  }

  pub fn data(&self, node: &str) -> PathBuf {
    self.dir.join(format!("data-{node}"))
  }

  /// `cellhost ARGS` (`run PATH` or `node`) as node `node` of this fleet.
  pub fn start(&self, args: &[&str], node: &str) -> Cellhost {
    let data = self.data(node);
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
      "--data",
      data.to_str().unwrap(),
      "--bucket",
      &self.bucket,
      "--node",
      node,
      "--lease-ttl-ms",
      "3000",
      "--isolates",
      "1",
    ]);
    all.extend(self.extra.iter().map(String::as_str));
    let env: Vec<(&str, &str)> = self
      .env
      .iter()
      .map(|(k, v)| (k.as_str(), v.as_str()))
      .collect();
    Cellhost::try_start_cmd(&all, &env).unwrap_or_else(|e| panic!("node {node}: {e}"))
  }
}

/// A clean stop (SIGTERM): the node drains and releases its cells; it must
/// exit with 0.
pub fn sigterm(ch: &mut Cellhost) {
  let pid = ch.child.id().to_string();
  std::process::Command::new("kill")
    .args(["-TERM", &pid])
    .status()
    .unwrap();
  assert_eq!(ch.child.wait().unwrap().code(), Some(0), "{}", ch.log());
}

/// The counter example's `POST /increment?name=NAME`: the new count, or
/// `None` when the node did not answer 200.
pub fn incr(ch: &Cellhost, name: &str) -> Option<u64> {
  match request(
    ch.addr,
    "POST",
    &format!("/increment?name={name}"),
    &[],
    b"",
  ) {
    Ok(r) if r.status == 200 => Some(r.text().parse().unwrap()),
    _ => None,
  }
}

/// The counter example's `GET /?name=NAME`.
pub fn count(ch: &Cellhost, name: &str) -> Option<u64> {
  match request(ch.addr, "GET", &format!("/?name={name}"), &[], b"") {
    Ok(r) if r.status == 200 => Some(r.text().parse().unwrap()),
    _ => None,
  }
}

/// A JSON record of a local (`file://`) bucket: its files start with a
/// small header.
pub fn bucket_json(path: &Path) -> Option<serde_json::Value> {
  let b = std::fs::read(path).ok()?;
  serde_json::from_slice(&b[b.iter().position(|&c| c == b'{')?..]).ok()
}

//! Nothing acknowledged is lost: a client increments counters while the node
//! is SIGKILLed at random moments and restarted on the same data directory;
//! every count a response acknowledged must still be there afterwards.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use support::*;

/// A small deterministic PRNG (xorshift) so a failing run can be replayed.
struct Rng(u64);
impl Rng {
  fn next(&mut self) -> u64 {
    self.0 ^= self.0 << 13;
    self.0 ^= self.0 >> 7;
    self.0 ^= self.0 << 17;
    self.0
  }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
  let kills: usize = std::env::var("CELLHOST_CRASH_KILLS")
    .ok()
    .and_then(|v| v.parse().ok())
    .unwrap_or(100);
  let seed: u64 = std::env::var("CELLHOST_CRASH_SEED")
    .ok()
    .and_then(|v| v.parse().ok())
    .unwrap_or(0x5eed);
  let mut rng = Rng(seed | 1);
  let data = std::env::temp_dir().join(format!("cellhost-crash-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&data);
  let example = repo_root().join("examples/counter");
  let names = ["a", "b", "c"];
  // The highest count each counter acknowledged to a client.
  let acked: Arc<Vec<AtomicU64>> = Arc::new(names.iter().map(|_| AtomicU64::new(0)).collect());
  let mut total_acks = 0u64;
  for round in 0..kills {
    let ch = Cellhost::start(
      &example,
      &["--data", data.to_str().unwrap(), "--isolates", "2"],
    );
    // Everything acknowledged before must have survived the last kill.
    for (i, n) in names.iter().enumerate() {
      let r = get(ch.addr, &format!("/?name={n}"));
      let have: u64 = r
        .text()
        .parse()
        .unwrap_or_else(|_| panic!("round {round}: {}", r.text()));
      let want = acked[i].load(Ordering::SeqCst);
      assert!(
        have >= want,
        "seed {seed} round {round}: counter {n} is {have}, but {want} was acknowledged"
      );
    }
    // Clients write until the kill; the kill lands at a random moment.
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..4 {
      let (stop, acked, addr) = (stop.clone(), acked.clone(), ch.addr);
      let name_idx = c % names.len();
      clients.push(std::thread::spawn(move || {
        let mut acks = 0u64;
        while !stop.load(Ordering::SeqCst) {
          let path = format!("/increment?name={}", ["a", "b", "c"][name_idx]);
          match request(addr, "POST", &path, &[], b"") {
            Ok(r) if r.status == 200 => {
              let v: u64 = r.text().parse().unwrap();
              acked[name_idx].fetch_max(v, Ordering::SeqCst);
              acks += 1;
            }
            _ => break, // the node died under us: not acknowledged
          }
        }
        acks
      }));
    }
    std::thread::sleep(Duration::from_millis(5 + rng.next() % 60));
    let mut ch = ch;
    let _ = ch.child.kill(); // SIGKILL
    let _ = ch.child.wait();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
      total_acks += c.join().unwrap();
    }
  }
  let ch = Cellhost::start(&example, &["--data", data.to_str().unwrap()]);
  for (i, n) in names.iter().enumerate() {
    let have: u64 = get(ch.addr, &format!("/?name={n}")).text().parse().unwrap();
    assert!(
      have >= acked[i].load(Ordering::SeqCst),
      "final: counter {n} lost acknowledged writes"
    );
  }
  println!("{kills} SIGKILLs, {total_acks} acknowledged increments, none lost (seed {seed})");
  assert!(
    total_acks > kills as u64,
    "too few writes were acknowledged to mean anything"
  );
  drop(ch);
  let _ = std::fs::remove_dir_all(&data);
}

/// An outbound effect that reveals a write (here a fetch carrying the new
/// count) leaves only after the write is durable: whatever the upstream saw
/// must still be there after a SIGKILL.
#[test]
fn outbound_fetch_never_reveals_a_write_that_is_lost() {
  use std::io::{BufRead, BufReader, Write};
  use std::net::TcpListener;
  let seen = Arc::new(AtomicU64::new(0));
  let l = TcpListener::bind("127.0.0.1:0").unwrap();
  let up = l.local_addr().unwrap();
  let s2 = seen.clone();
  std::thread::spawn(move || {
    for stream in l.incoming().map_while(Result::ok) {
      let seen = s2.clone();
      std::thread::spawn(move || {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut stream = stream;
        loop {
          let mut first = String::new();
          if r.read_line(&mut first).unwrap_or(0) == 0 {
            return;
          }
          if let Some(v) = first
            .split("v=")
            .nth(1)
            .and_then(|x| x.split_whitespace().next())
          {
            seen.fetch_max(v.parse().unwrap_or(0), Ordering::SeqCst);
          }
          loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
              break;
            }
          }
          let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        }
      });
    }
  });
  let dir = std::env::temp_dir().join(format!("cellhost-crash-fetch-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&dir);
  std::fs::create_dir_all(&dir).unwrap();
  std::fs::write(
    dir.join("worker.js"),
    format!(
      "import {{ DurableObject }} from 'cloudflare:workers';
export class C extends DurableObject {{
  constructor(ctx, env) {{ super(ctx, env); ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, v INTEGER)'); }}
  async inc() {{
    const v = this.ctx.storage.sql.exec('INSERT INTO c VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET v = v + 1 RETURNING v').one().v;
    await fetch('http://{up}/seen?v=' + v);
    return v;
  }}
  get() {{ return this.ctx.storage.sql.exec('SELECT v FROM c').toArray()[0]?.v ?? 0; }}
}}
export default {{ async fetch(r, env) {{
  const s = env.C.getByName('x');
  return new Response(String(new URL(r.url).pathname === '/inc' ? await s.inc() : await s.get()));
}} }};"
    ),
  )
  .unwrap();
  std::fs::write(
    dir.join("wrangler.toml"),
    "name = \"f\"\nmain = \"worker.js\"\n[[durable_objects.bindings]]\nname = \"C\"\nclass_name = \"C\"\n[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"C\"]\n",
  )
  .unwrap();
  let data = dir.join("data");
  let mut rng = Rng(0xfeed);
  for round in 0..30 {
    let ch = Cellhost::start(&dir, &["--data", data.to_str().unwrap()]);
    let have: u64 = get(ch.addr, "/get").text().parse().unwrap();
    let shown = seen.load(Ordering::SeqCst);
    assert!(
      have >= shown,
      "round {round}: the upstream saw count {shown}, but only {have} survived"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
      .map(|_| {
        let (stop, addr) = (stop.clone(), ch.addr);
        std::thread::spawn(move || {
          while !stop.load(Ordering::SeqCst) {
            if request(addr, "POST", "/inc", &[], b"").is_err() {
              break;
            }
          }
        })
      })
      .collect();
    std::thread::sleep(Duration::from_millis(10 + rng.next() % 50));
    let mut ch = ch;
    let _ = ch.child.kill();
    let _ = ch.child.wait();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
      c.join().unwrap();
    }
  }
  assert!(
    seen.load(Ordering::SeqCst) > 30,
    "too few effects to mean anything"
  );
  let _ = std::fs::remove_dir_all(&dir);
}

/// A WebSocket frame that reveals a write leaves only after the write is
/// durable: every count a frame showed survives a SIGKILL.
#[test]
fn websocket_frames_never_reveal_a_write_that_is_lost() {
  use tokio_tungstenite::tungstenite::stream::MaybeTlsStream;
  use tokio_tungstenite::tungstenite::{Message, connect};
  let dir = std::env::temp_dir().join(format!("cellhost-crash-ws-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&dir);
  std::fs::create_dir_all(&dir).unwrap();
  std::fs::write(
    dir.join("worker.js"),
    "import { DurableObject } from 'cloudflare:workers';
export class C extends DurableObject {
  constructor(ctx, env) { super(ctx, env); ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, v INTEGER)'); }
  async fetch(r) {
    if (new URL(r.url).pathname === '/get') return new Response(String(this.ctx.storage.sql.exec('SELECT v FROM c').toArray()[0]?.v ?? 0));
    const [client, server] = Object.values(new WebSocketPair());
    this.ctx.acceptWebSocket(server);
    return new Response(null, { status: 101, webSocket: client });
  }
  webSocketMessage(ws) {
    ws.send(String(this.ctx.storage.sql.exec('INSERT INTO c VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET v = v + 1 RETURNING v').one().v));
  }
}
export default { fetch(r, env) { return env.C.getByName('x').fetch(r); } };",
  )
  .unwrap();
  std::fs::write(
    dir.join("wrangler.toml"),
    "name = \"w\"\nmain = \"worker.js\"\n[[durable_objects.bindings]]\nname = \"C\"\nclass_name = \"C\"\n[[migrations]]\ntag = \"v1\"\nnew_sqlite_classes = [\"C\"]\n",
  )
  .unwrap();
  let data = dir.join("data");
  let shown = Arc::new(AtomicU64::new(0));
  let mut rng = Rng(0xbeef);
  let mut frames = 0u64;
  for round in 0..30 {
    let ch = Cellhost::start(&dir, &["--data", data.to_str().unwrap()]);
    let have: u64 = get(ch.addr, "/get").text().parse().unwrap();
    let want = shown.load(Ordering::SeqCst);
    assert!(
      have >= want,
      "round {round}: a frame showed count {want}, but only {have} survived"
    );
    let (shown2, addr) = (shown.clone(), ch.addr);
    let client = std::thread::spawn(move || {
      let mut n = 0u64;
      let Ok((mut ws, _)) = connect(format!("ws://{addr}/ws")) else {
        return n;
      };
      if let MaybeTlsStream::Plain(s) = ws.get_mut() {
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
      }
      loop {
        // Pipelined: several writes in flight, each answered by a frame.
        for _ in 0..8 {
          if ws.send(Message::text("inc")).is_err() {
            return n;
          }
        }
        for _ in 0..8 {
          match ws.read() {
            Ok(Message::Text(t)) => {
              shown2.fetch_max(t.parse().unwrap(), Ordering::SeqCst);
              n += 1;
            }
            _ => return n, // the node died: nothing more was shown
          }
        }
      }
    });
    std::thread::sleep(Duration::from_millis(20 + rng.next() % 60));
    let mut ch = ch;
    let _ = ch.child.kill();
    let _ = ch.child.wait();
    frames += client.join().unwrap();
  }
  assert!(frames > 30, "too few frames to mean anything: {frames}");
  println!("30 SIGKILLs, {frames} frames revealed writes, none lost");
  let _ = std::fs::remove_dir_all(&dir);
}

//! The fault lab's traffic: clients driving counters through the nodes,
//! and the poller that records every node's lease records (see
//! `faultlab.rs`).

use super::*;
pub(crate) fn http(
  addr: SocketAddr,
  method: &str,
  path: &str,
  timeout: Duration,
) -> Result<support::Resp, String> {
  let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
    .map_err(|e| format!("connect: {e}"))?;
  s.set_read_timeout(Some(timeout))
    .map_err(|e| e.to_string())?;
  s.set_write_timeout(Some(timeout))
    .map_err(|e| e.to_string())?;
  let len = if method == "GET" {
    ""
  } else {
    "Content-Length: 0\r\n"
  };
  write!(
    s,
    "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{len}\r\n"
  )
  .map_err(|e| format!("write: {e}"))?;
  let mut raw = Vec::new();
  s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
  parse_response(&raw).ok_or_else(|| format!("bad response {:?}", String::from_utf8_lossy(&raw)))
}

pub(crate) struct Shared {
  pub(crate) names: Vec<String>,
  pub(crate) objects: Vec<String>,
  pub(crate) addrs: Mutex<Vec<Option<SocketAddr>>>,
  pub(crate) ops: Mutex<Vec<Op>>,
  /// Per object: the send time of the latest acknowledged increment.
  pub(crate) last_ack: Vec<AtomicU64>,
  pub(crate) stop_clients: AtomicBool,
  pub(crate) stop_poller: AtomicBool,
  pub(crate) leases: Mutex<Vec<BTreeSet<u64>>>,
  /// When the poller first saw each lease record (expiry → ms), per node.
  pub(crate) lease_seen: Mutex<Vec<std::collections::BTreeMap<u64, u64>>>,
  pub(crate) poll_gap_max_ms: AtomicU64,
  pub(crate) poison_permille: u64,
}

impl Shared {
  pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
    self.names.iter().position(|n| n == name)
  }

  /// One request to node `node`, recorded in the history; `None` when the
  /// node is down (nothing sent).
  pub(crate) fn call(
    &self,
    client: usize,
    object: usize,
    node: usize,
    kind: Kind,
    timeout: Duration,
  ) -> Option<Op> {
    let addr = self.addrs.lock().unwrap()[node]?;
    let name = &self.objects[object];
    let (method, path) = match kind {
      // Even clients are answered in the increment's turn, odd ones a turn
      // later.
      Kind::Incr if client.is_multiple_of(2) => ("POST", format!("/increment?name={name}")),
      Kind::Incr => ("POST", format!("/increment?name={name}&wait=1")),
      Kind::Poison => ("POST", format!("/poison?name={name}")),
      Kind::Read => ("GET", format!("/?name={name}")),
    };
    let t0 = now_us();
    let r = http(addr, method, &path, timeout);
    let t1 = now_us();
    let outcome = match r {
      Ok(r) if r.status == 200 => match r.text().trim().parse() {
        Ok(v) => Outcome::Ok(v),
        Err(_) => Outcome::Error(format!("200 with body {:?}", r.text())),
      },
      Ok(r) if r.status == 503 && r.header("x-cellhost-owner").is_some() => {
        Outcome::Refused(r.header("x-cellhost-owner").map(str::to_string))
      }
      Ok(r) => Outcome::Status(r.status),
      Err(e) => Outcome::Error(e),
    };
    let op = Op {
      client,
      object,
      node,
      kind,
      t0,
      t1,
      outcome,
    };
    if kind == Kind::Incr && op.value().is_some() {
      self.last_ack[object].fetch_max(t0, Ordering::SeqCst);
    }
    self.ops.lock().unwrap().push(op.clone());
    Some(op)
  }

  pub(crate) fn up_nodes(&self) -> Vec<usize> {
    let addrs = self.addrs.lock().unwrap();
    (0..addrs.len()).filter(|&i| addrs[i].is_some()).collect()
  }
}

/// A client: increments (most), reads (one in five) and poisoned increments
/// (`poison_permille` of the rest) on random objects, half of them on the first (so that turns
/// of one object overlap rounds in flight); sends each to the node that last
/// answered for the object or named itself its owner, else to a random node.
pub(crate) fn client(shared: Arc<Shared>, id: usize, mut rng: Rng) {
  let mut hint: Vec<Option<usize>> = vec![None; shared.objects.len()];
  let mut retry: Option<(usize, Kind)> = None;
  while !shared.stop_clients.load(Ordering::SeqCst) {
    let (object, kind) = retry.take().unwrap_or_else(|| {
      let kind = if rng.chance(200) {
        Kind::Read
      } else if rng.chance(shared.poison_permille) {
        Kind::Poison
      } else {
        Kind::Incr
      };
      let object = if rng.chance(500) {
        0
      } else {
        rng.below(shared.objects.len() as u64) as usize
      };
      (object, kind)
    });
    let up = shared.up_nodes();
    if up.is_empty() {
      std::thread::sleep(Duration::from_millis(50));
      continue;
    }
    let node = match hint[object] {
      Some(n) if up.contains(&n) => n,
      _ => up[rng.below(up.len() as u64) as usize],
    };
    let Some(op) = shared.call(id, object, node, kind, Duration::from_secs(5)) else {
      continue;
    };
    match &op.outcome {
      Outcome::Ok(_) => hint[object] = Some(node),
      Outcome::Refused(owner) => {
        let owner = owner.as_deref().and_then(|o| shared.node_index(o));
        hint[object] = owner.filter(|&o| o != node);
        if hint[object].is_some() {
          // Straight to the owner it named.
          retry = Some((object, kind));
          continue;
        }
        std::thread::sleep(Duration::from_millis(rng.range(50, 150)));
      }
      _ => {
        hint[object] = None;
        std::thread::sleep(Duration::from_millis(rng.range(50, 150)));
      }
    }
    std::thread::sleep(Duration::from_millis(rng.range(5, 30)));
  }
}

/// Reads every node's lease record every 50 ms (100 ms on S3), keeping
/// every `expires_ms` seen.
pub(crate) fn lease_poller(shared: Arc<Shared>, reader: LeaseReader, every_ms: u64) {
  let every = Duration::from_millis(every_ms);
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let mut last = Instant::now();
  while !shared.stop_poller.load(Ordering::SeqCst) {
    for (i, name) in shared.names.iter().enumerate() {
      if let Some(e) = reader.expires_ms(&rt, name) {
        shared.leases.lock().unwrap()[i].insert(e);
        let seen = now_us() / 1000;
        shared.lease_seen.lock().unwrap()[i]
          .entry(e)
          .or_insert(seen);
      }
    }
    let gap = last.elapsed().as_millis() as u64;
    shared.poll_gap_max_ms.fetch_max(gap, Ordering::Relaxed);
    last = Instant::now();
    std::thread::sleep(every);
  }
}

// ---------------------------------------------------------------------------
// Nodes and the lab.

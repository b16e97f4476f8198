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

//! The simulator's seeds as tests.
//!
//! Environment:
//! * `CELLHOST_SIM_SEEDS` — seeds of the correct protocol: `N` (0..N) or
//!   `A..B`; default 0..100000.
//! * `CELLHOST_SIM_FLAW_SEEDS` — the most seeds each broken variant may need
//!   before a checker catches it; default 100000 (each search stops at its
//!   first catch, so this is a ceiling, not a cost).
//! * `CELLHOST_SIM_SEED` — replay one seed and print its trace, with
//!   `CELLHOST_SIM_FLAW=<name>` to replay a broken variant:
//!   `CELLHOST_SIM_SEED=7 cargo test -p cellhost-logic --test sim replay -- --nocapture`

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cellhost_logic::sim::{Flaw, Report, SimConfig, Stats, run};

fn env_u64(name: &str) -> Option<u64> {
  let v = std::env::var(name).ok()?;
  Some(
    v.trim()
      .parse()
      .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
  )
}

fn seed_range() -> Range<u64> {
  match std::env::var("CELLHOST_SIM_SEEDS") {
    Err(_) => 0..100_000,
    Ok(v) => match v.split_once("..") {
      Some((a, b)) => {
        a.trim().parse().expect("seed range start")..b.trim().parse().expect("seed range end")
      }
      None => {
        0..v
          .trim()
          .parse()
          .expect("CELLHOST_SIM_SEEDS is a count or A..B")
      }
    },
  }
}

fn threads() -> u64 {
  std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

fn replay_hint(r: &Report) -> String {
  let flaw = r
    .flaw
    .map_or(String::new(), |f| format!("CELLHOST_SIM_FLAW={f} "));
  format!(
    "replay: {flaw}CELLHOST_SIM_SEED={} cargo test -p cellhost-logic --test sim replay -- --nocapture",
    r.seed
  )
}

struct Sweep {
  failures: Vec<Report>,
  stats: Stats,
  profiles: BTreeMap<&'static str, u64>,
  seeds: u64,
  took: Duration,
}

/// Runs `seeds` on every core. With `first_only`, stops once the lowest
/// failing seed is known (threads skip seeds above the best found so far).
fn sweep(seeds: Range<u64>, flaw: Option<Flaw>, first_only: bool) -> Sweep {
  let start = Instant::now();
  let best = AtomicU64::new(u64::MAX);
  let out = Mutex::new(Sweep {
    failures: Vec::new(),
    stats: Stats::default(),
    profiles: BTreeMap::new(),
    seeds: 0,
    took: Duration::ZERO,
  });
  let k = threads();
  std::thread::scope(|s| {
    for t in 0..k {
      let (seeds, best, out) = (seeds.clone(), &best, &out);
      s.spawn(move || {
        let mut stats = Stats::default();
        let mut profiles = BTreeMap::new();
        let mut failures = Vec::new();
        let mut n = 0;
        let mut seed = seeds.start + t;
        while seed < seeds.end && !(first_only && seed > best.load(Ordering::Relaxed)) {
          let r = run(&SimConfig {
            seed,
            flaw,
            trace: false,
          });
          n += 1;
          stats.add(&r.stats);
          *profiles.entry(r.profile).or_insert(0) += 1;
          if !r.ok() {
            best.fetch_min(seed, Ordering::Relaxed);
            failures.push(r);
          }
          seed += k;
        }
        let mut o = out.lock().unwrap();
        o.stats.add(&stats);
        o.seeds += n;
        for (p, c) in profiles {
          *o.profiles.entry(p).or_insert(0) += c;
        }
        o.failures.extend(failures);
      });
    }
  });
  let mut o = out.into_inner().unwrap();
  o.failures.sort_by_key(|r| r.seed);
  o.took = start.elapsed();
  o
}

#[test]
fn correct_protocol_holds_on_every_seed() {
  let seeds = seed_range();
  let s = sweep(seeds.clone(), None, false);
  println!(
    "correct protocol: {} seeds ({:?}) in {:.1?} on {} threads: {} failing",
    s.seeds,
    seeds,
    s.took,
    threads(),
    s.failures.len()
  );
  println!("profiles: {:?}", s.profiles);
  println!("{:?}", s.stats);
  for r in s.failures.iter().take(10) {
    println!("{r}\n  {}", replay_hint(r));
  }
  assert!(
    s.failures.is_empty(),
    "the correct protocol failed on {} seeds",
    s.failures.len()
  );
  // The faults must actually happen, or a silent sweep proves nothing.
  if s.seeds >= 1_000 {
    let st = &s.stats;
    for (what, n) in [
      ("acks", st.acks),
      ("takeovers", st.takeovers),
      ("releases", st.releases),
      ("fences", st.fences),
      ("crashes", st.crashes),
      ("pauses", st.pauses),
      ("freezes", st.freezes),
      ("broken cells", st.broken_cells),
      ("ambiguous answers", st.ambiguous),
      ("wakes from the wake index", st.wakes),
      ("uploads answered out of order", st.uploads_out_of_order),
      ("uploads failed for good", st.failed_uploads),
      ("uploads landed above a failed one", st.landed_above_refused),
      ("paged activations", st.paged),
    ] {
      assert!(
        n > s.seeds / 100,
        "too few {what}: {n} in {} seeds",
        s.seeds
      );
    }
  }
}

#[test]
fn every_broken_variant_is_caught() {
  let budget = env_u64("CELLHOST_SIM_FLAW_SEEDS").unwrap_or(100_000);
  let mut missed = Vec::new();
  for flaw in Flaw::ALL {
    let s = sweep(0..budget, Some(flaw), true);
    match s.failures.first() {
      Some(r) => {
        let v = &r.violations[0];
        println!(
          "flaw={flaw}: caught at seed={} ({} profile, {} seeds, {:.1?}) by {}: {}",
          r.seed, r.profile, s.seeds, s.took, v.check, v.detail
        );
      }
      None => {
        println!("flaw={flaw}: NOT caught in {budget} seeds ({:.1?})", s.took);
        missed.push(flaw);
      }
    }
  }
  assert!(
    missed.is_empty(),
    "broken variants no checker caught: {missed:?}"
  );
}

/// Replays `CELLHOST_SIM_SEED` (default 1) with its trace.
#[test]
fn replay() {
  let seed = env_u64("CELLHOST_SIM_SEED").unwrap_or(1);
  let flaw = std::env::var("CELLHOST_SIM_FLAW").ok().map(|f| {
    Flaw::parse(&f).unwrap_or_else(|| {
      let names: Vec<_> = Flaw::ALL.iter().map(|f| f.name()).collect();
      panic!("unknown CELLHOST_SIM_FLAW={f:?}; one of {names:?}")
    })
  });
  let r = run(&SimConfig {
    seed,
    flaw,
    trace: true,
  });
  if std::env::var("CELLHOST_SIM_SEED").is_ok() {
    for line in &r.trace {
      println!("{line}");
    }
  }
  println!("{r}\n{:?}", r.stats);
  assert!(!r.trace.is_empty());
  if flaw.is_none() {
    assert!(r.ok(), "{r}");
  }
}

#[test]
fn seeds_replay_exactly() {
  for seed in 0..200 {
    for flaw in [
      None,
      Some(Flaw::AckWithoutReread),
      Some(Flaw::TakeoverIgnoresLease),
    ] {
      let a = run(&SimConfig {
        seed,
        flaw,
        trace: true,
      });
      let b = run(&SimConfig {
        seed,
        flaw,
        trace: true,
      });
      let c = run(&SimConfig {
        seed,
        flaw,
        trace: false,
      });
      assert_eq!(a.trace, b.trace, "seed={seed}");
      // Tracing must not change what happens.
      assert_eq!(a.stats, c.stats, "seed={seed}");
      assert_eq!(a.violations, c.violations, "seed={seed}");
    }
  }
}

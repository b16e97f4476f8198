//! Objects placed on the isolate of their first caller
//! ([`cellhost_logic::place`]) under the seeded simulator: one instance and
//! the order of calls for every seed, and each broken variant of the I/O
//! shell caught. `CELLHOST_SIM_SEED=S` with `--nocapture` replays one.

use cellhost_logic::sim::place::{PlaceFlaw, run_place};

const SEEDS: u64 = 3_000;

#[test]
fn every_seed_keeps_one_instance_and_the_order_of_calls() {
  let (mut calls, mut moves, mut releases, mut in_place) = (0, 0, 0, 0);
  for seed in 0..SEEDS {
    let s = run_place(seed, None).unwrap_or_else(|e| panic!("{e}"));
    calls += s.calls;
    moves += s.moves;
    releases += s.releases;
    in_place += s.in_place;
  }
  // The runs exercised what they check: objects were released and built
  // again on other isolates, and calls were handed over in place.
  eprintln!(
    "{SEEDS} seeds: {calls} calls, {in_place} in place, {releases} releases, {moves} moves"
  );
  assert!(calls > 100 * SEEDS && moves > SEEDS && releases > SEEDS && in_place > 10 * SEEDS);
}

#[test]
fn each_broken_variant_is_caught() {
  for flaw in PlaceFlaw::ALL {
    let caught = (0..10_000).find_map(|seed| run_place(seed, Some(flaw)).err());
    let e = caught.unwrap_or_else(|| panic!("{flaw:?} was never caught"));
    eprintln!("{flaw:?}: {e}");
  }
}

#[test]
fn replay() {
  let Some(seed) = std::env::var("CELLHOST_SIM_SEED").ok() else {
    return;
  };
  let seed: u64 = seed.parse().unwrap();
  eprintln!("seed {seed}: {:?}", run_place(seed, None));
}

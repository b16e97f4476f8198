//! The in-process version switch ([`cellhost_logic::handover`]) under the
//! seeded simulator: correct for every seed, and each broken variant of
//! its I/O shell caught. `CELLHOST_HANDOVER_SEEDS=N` runs seeds 0..N
//! (default 3000); `CELLHOST_SIM_SEED=S` with `--nocapture` replays one.

use cellhost_logic::sim::handover::{HandoverFlaw, run_handover};

fn seeds() -> u64 {
  std::env::var("CELLHOST_HANDOVER_SEEDS")
    .ok()
    .map(|v| v.parse().expect("CELLHOST_HANDOVER_SEEDS is a number"))
    .unwrap_or(3_000)
}

#[test]
fn every_seed_keeps_one_instance_and_the_order_of_calls() {
  let (mut calls, mut switches, mut moved) = (0, 0, 0);
  for seed in 0..seeds() {
    let s = run_handover(seed, None).unwrap_or_else(|e| panic!("{e}"));
    calls += s.calls;
    switches += s.switches;
    moved += s.handed_over;
  }
  // The runs exercised what they check.
  assert!(switches > seeds() && moved > seeds() && calls > 100 * seeds());
  eprintln!(
    "{} seeds: {calls} calls, {switches} switches, {moved} objects handed over",
    seeds()
  );
}

#[test]
fn each_broken_variant_is_caught() {
  for flaw in HandoverFlaw::ALL {
    let caught = (0..10_000).find_map(|seed| run_handover(seed, Some(flaw)).err());
    let e = caught.unwrap_or_else(|| panic!("{flaw:?} was never caught"));
    eprintln!("{flaw:?}: {}", e.lines().next().unwrap());
  }
}

#[test]
fn replay() {
  let Some(seed) = std::env::var("CELLHOST_SIM_SEED").ok() else {
    return;
  };
  let seed: u64 = seed.parse().unwrap();
  match run_handover(seed, None) {
    Ok(s) => eprintln!("seed {seed}: {s:?}"),
    Err(e) => eprintln!("{e}"),
  }
}

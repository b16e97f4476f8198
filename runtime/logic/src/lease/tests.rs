use super::*;
use crate::StoreError;

const CFG: LeaseConfig = LeaseConfig {
  ttl_ms: 10_000,
  margin_ms: 2_000,
};

fn tok(s: &str) -> Token {
  Token::new(s)
}

/// A keeper that holds a lease written at local time 1000 as version "v1".
fn serving() -> LeaseKeeper {
  let (mut k, s) = LeaseKeeper::start(CFG, "n1", "10.0.0.1:9000", 0);
  assert_eq!(s, LeaseStep::Read);
  let LeaseStep::Create(l) = k.on_read(Ok(None), 1_000) else {
    panic!()
  };
  assert_eq!(l.expires_ms, 11_000);
  assert_eq!(
    k.on_write(WriteAnswer::Applied(tok("v1")), 1_010),
    LeaseStep::Wait { until_ms: 4_333 }
  );
  k
}

fn foreign() -> NodeLease {
  NodeLease {
    node: "n1".into(),
    expires_ms: 99_999,
    address: "10.9.9.9:1".into(),
    load: 0,
    log: String::new(),
  }
}

fn staging_error() -> WriteAnswer {
  WriteAnswer::Failed(StoreError(
    "staging nodes/n1.json: Not a directory (os error 20)".into(),
  ))
}

/// The local time a `Wait` asks to be woken at; panics on anything else.
fn wait_until(s: LeaseStep) -> u64 {
  match s {
    LeaseStep::Wait { until_ms } => until_ms,
    s => panic!("expected a wait, got {s:?}"),
  }
}

#[test]
fn timing() {
  let c = LeaseConfig::default();
  assert_eq!((c.ttl_ms, c.margin_ms), (10_000, 2_000));
  assert_eq!(c.renew_every_ms(), 3_333);
  assert_eq!(c.expiry(5_000), 15_000);
  assert_eq!(c.fence_deadline(15_000), 13_000);
  assert_eq!(c.fence_deadline(1_000), 0);
  assert_eq!((c.retry_base_ms(), c.retry_cap_ms()), (50, 1_000));
  assert!(c.check().is_ok());
  assert!(
    LeaseConfig {
      ttl_ms: 3_000,
      margin_ms: 2_000
    }
    .check()
    .is_err()
  );
  assert!(
    LeaseConfig {
      ttl_ms: 3_000,
      margin_ms: 0
    }
    .check()
    .is_err()
  );
  assert!(can_acknowledge(12_999, 13_000));
  assert!(!can_acknowledge(13_000, 13_000));
  assert_eq!(lease_key("n1"), "nodes/n1.json");
}

#[test]
fn backoff_grows_with_jitter_from_the_seed() {
  let mut a = Backoff::new(50, 1_000, 1);
  let delays: Vec<u64> = (0..8).map(|i| a.delay_ms(i)).collect();
  for (i, d) in delays.iter().enumerate() {
    let step = (50u64 << i).min(1_000);
    assert!((step / 2..=step).contains(d), "retry {i}: {d} ms");
  }
  // The same seed repeats itself; another one does not retry in step.
  let mut same = Backoff::new(50, 1_000, 1);
  assert_eq!((0..8).map(|i| same.delay_ms(i)).collect::<Vec<_>>(), delays);
  let mut other = Backoff::new(50, 1_000, 2);
  assert_ne!(
    (0..8).map(|i| other.delay_ms(i)).collect::<Vec<_>>(),
    delays
  );
  assert_ne!(name_seed(&["n1"]), name_seed(&["n2"]));
}

#[test]
fn renews_every_third_and_fences_at_the_deadline() {
  let mut k = serving();
  assert!(k.can_ack(8_999));
  assert_eq!(k.deadline_ms(), 9_000);
  assert_eq!(k.tick(4_000), LeaseStep::Wait { until_ms: 4_333 });
  let LeaseStep::Cas { lease, token } = k.tick(4_333) else {
    panic!()
  };
  assert_eq!((lease.expires_ms, token), (14_333, tok("v1")));
  // No second request while one is in flight.
  assert_eq!(k.tick(5_000), LeaseStep::Wait { until_ms: 9_000 });
  assert_eq!(
    k.on_write(WriteAnswer::Applied(tok("v2")), 4_400),
    LeaseStep::Wait { until_ms: 7_666 }
  );
  assert_eq!(k.deadline_ms(), 12_333);
  // Renewals stop arriving: the watchdog fences at the deadline, terminally.
  let LeaseStep::Cas { .. } = k.tick(7_666) else {
    panic!()
  };
  assert!(k.can_ack(12_332));
  assert_eq!(k.fence_line(), None);
  assert_eq!(k.tick(12_333), LeaseStep::Fence(FenceReason::Watchdog));
  assert!(!k.can_ack(12_333));
  assert!(k.is_fenced());
  let line = k.fence_line().unwrap();
  assert_eq!(
    line,
    "SELF-FENCE: node_lease_watchdog_fence: node n1: a lease request sent 4667 ms ago is \
     unanswered at the fence deadline; exiting with code 3"
  );
  // The late answer does not revive it.
  let s = k.on_write(WriteAnswer::Applied(tok("v3")), 12_400);
  assert_eq!(s, LeaseStep::Fence(FenceReason::Watchdog));
  assert!(!k.can_ack(12_400));
}

#[test]
fn a_renewal_answered_after_the_deadline_fences() {
  let mut k = serving();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  let s = k.on_write(WriteAnswer::Applied(tok("v2")), 9_000);
  assert_eq!(s, LeaseStep::Fence(FenceReason::Watchdog));
  let line = k.fence_line().unwrap();
  assert!(line.contains("came after the fence deadline"), "{line}");
}

#[test]
fn ambiguous_renewal_reconciles_by_reading() {
  let mut k = serving();
  let LeaseStep::Cas { lease: l2, .. } = k.tick(4_333) else {
    panic!()
  };
  assert_eq!(k.on_write(WriteAnswer::Ambiguous, 4_500), LeaseStep::Read);
  // It happened: adopt it.
  assert_eq!(
    k.on_read(Ok(Some((l2.clone(), tok("v2")))), 4_600),
    LeaseStep::Wait { until_ms: 7_666 }
  );
  assert_eq!(k.held(), Some(&l2));

  // It did not happen: renew again from the version we hold, after a pause.
  let mut k = serving();
  let LeaseStep::Cas { lease: l2, .. } = k.tick(4_333) else {
    panic!()
  };
  k.on_write(WriteAnswer::Ambiguous, 4_500);
  let held = k.held().unwrap().clone();
  let at = wait_until(k.on_read(Ok(Some((held, tok("v1")))), 4_600));
  assert!((4_625..=4_650).contains(&at), "retry at {at}");
  let LeaseStep::Cas { lease: l3, token } = k.tick(at) else {
    panic!()
  };
  assert_eq!(token, tok("v1"));
  assert!(l3.expires_ms > l2.expires_ms);
  // ... and the first write landed late: the retry is rejected, and the
  // record found is one of ours.
  assert_eq!(k.on_write(WriteAnswer::Rejected, 4_700), LeaseStep::Read);
  assert!(matches!(
    k.on_read(Ok(Some((l2.clone(), tok("v2")))), 4_800),
    LeaseStep::Wait { .. }
  ));
  assert_eq!(k.held(), Some(&l2));
  assert!(k.can_ack(4_800));
}

/// Issue 10: a store that fails every write for a while (each renewal
/// ambiguous, the record unchanged on re-read) is not another writer. The
/// keeper retries with growing pauses, never fences before the deadline,
/// and at the deadline says what happened.
#[test]
fn ambiguous_renewals_of_an_unchanged_record_retry_until_the_deadline() {
  let mut k = serving();
  let held = k.held().unwrap().clone();
  let mut now = 4_333;
  let mut pauses = Vec::new();
  let mut step = k.tick(now);
  while now < 9_000 {
    let LeaseStep::Cas { token, .. } = step else {
      panic!("at {now}: expected a renewal, got {step:?}")
    };
    assert_eq!(token, tok("v1"));
    k.note("put nodes/n1.json: connection reset by peer");
    assert_eq!(k.on_write(WriteAnswer::Ambiguous, now + 5), LeaseStep::Read);
    let at = wait_until(k.on_read(Ok(Some((held.clone(), tok("v1")))), now + 10));
    assert!(k.can_ack(now + 10), "fenced at {now}");
    pauses.push(at.min(9_000) - (now + 10));
    now = at;
    step = k.tick(now);
  }
  assert!(pauses.len() >= 6, "retries: {pauses:?}");
  assert!(pauses[0] >= 25 && pauses[3] > pauses[0], "{pauses:?}");
  assert_eq!(step, LeaseStep::Fence(FenceReason::Watchdog));
  let line = k.fence_line().unwrap();
  assert!(
    line.starts_with("SELF-FENCE: node_lease_watchdog_fence: node n1: lease renewal failed for "),
    "{line}"
  );
  assert!(
    line.contains("last: a lease write's answer was lost: put nodes/n1.json: connection reset"),
    "{line}"
  );
  assert!(line.contains("the fence deadline passed"), "{line}");
}

/// A write that provably did not happen is sent again after a pause; the
/// node serves on, and a renewal that applies clears the trouble.
#[test]
fn failed_renewals_back_off_and_recover() {
  let mut k = serving();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  let first = wait_until(k.on_write(staging_error(), 4_340));
  assert!((4_365..=4_390).contains(&first), "{first}");
  let LeaseStep::Cas { token, .. } = k.tick(first) else {
    panic!()
  };
  assert_eq!(token, tok("v1"));
  let second = wait_until(k.on_write(staging_error(), first + 5));
  assert!(second - (first + 5) >= 50, "{first} {second}");
  assert!(k.can_ack(second));
  let LeaseStep::Cas { lease, .. } = k.tick(second) else {
    panic!()
  };
  k.on_write(WriteAnswer::Applied(tok("v2")), second + 5);
  assert_eq!(k.held(), Some(&lease));
  assert_eq!(k.deadline_ms(), lease.expires_ms - 2_000);
  // The next renewal fails once and then the process stalls: the fence
  // names the failure of this streak only.
  let due = k.next_wakeup();
  let LeaseStep::Cas { .. } = k.tick(due) else {
    panic!()
  };
  k.on_write(staging_error(), due + 1);
  assert_eq!(
    k.tick(k.deadline_ms()),
    LeaseStep::Fence(FenceReason::Watchdog)
  );
  let line = k.fence_line().unwrap();
  let want = format!(
    "lease renewal failed for {} ms (1 attempt; last: staging nodes/n1.json: Not a directory \
     (os error 20)); the fence deadline passed",
    k.deadline_ms() - (due + 1)
  );
  assert!(line.contains(&want), "{line}");
}

#[test]
fn missing_or_foreign_record_fences_at_once() {
  let mut k = serving();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  assert_eq!(k.on_write(WriteAnswer::Rejected, 4_400), LeaseStep::Read);
  assert_eq!(
    k.on_read(Ok(None), 4_500),
    LeaseStep::Fence(FenceReason::RecordMissing)
  );
  let line = k.fence_line().unwrap();
  assert!(
    line.starts_with(
      "SELF-FENCE: node_lease_record_missing_fence: node n1: the node lease record is missing"
    ),
    "{line}"
  );

  let mut k = serving();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  k.on_write(WriteAnswer::Rejected, 4_400);
  assert_eq!(
    k.on_read(Ok(Some((foreign(), tok("vx")))), 4_500),
    LeaseStep::Fence(FenceReason::RecordMismatch)
  );

  // After an ambiguous renewal, and after failed ones: another writer's
  // record fences at once, and the line says what it holds.
  let mut k = serving();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  let at = wait_until(k.on_write(staging_error(), 4_340));
  let LeaseStep::Cas { .. } = k.tick(at) else {
    panic!()
  };
  k.on_write(WriteAnswer::Ambiguous, at + 5);
  assert_eq!(
    k.on_read(Ok(Some((foreign(), tok("vx")))), at + 10),
    LeaseStep::Fence(FenceReason::RecordMismatch)
  );
  let line = k.fence_line().unwrap();
  assert_eq!(
    line,
    "SELF-FENCE: node_lease_record_mismatch_fence: node n1: the node lease record was replaced: \
     it now holds expires_ms 99999 and address 10.9.9.9:1 (version vx), which this node did not \
     write (its own record: expires_ms 11000); exiting with code 3"
  );
}

#[test]
fn a_rejected_renewal_of_an_unchanged_record_retries() {
  let mut k = serving();
  let held = k.held().unwrap().clone();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  assert_eq!(k.on_write(WriteAnswer::Rejected, 4_400), LeaseStep::Read);
  let at = wait_until(k.on_read(Ok(Some((held, tok("v1")))), 4_500));
  assert!(at > 4_500 && at < 9_000, "{at}");
  assert!(matches!(k.tick(at), LeaseStep::Cas { .. }));
}

#[test]
fn read_errors_retry_until_the_deadline() {
  let mut k = serving();
  let LeaseStep::Cas { .. } = k.tick(4_333) else {
    panic!()
  };
  k.on_write(WriteAnswer::Ambiguous, 4_400);
  let e = Err(StoreError("timeout".into()));
  let at = wait_until(k.on_read(e.clone(), 4_500));
  assert!(at > 4_500 && at <= 5_500, "{at}");
  assert_eq!(k.tick(at), LeaseStep::Read);
  assert_eq!(k.on_read(e, 8_990), LeaseStep::Wait { until_ms: 9_000 });
  assert_eq!(k.tick(9_000), LeaseStep::Fence(FenceReason::Watchdog));
  let line = k.fence_line().unwrap();
  assert!(
    line.contains(
      "lease renewal failed for 4600 ms (3 attempts; last: reading the lease record: timeout)"
    ),
    "{line}"
  );
}

#[test]
fn startup_writes_over_a_previous_process() {
  let (mut k, _) = LeaseKeeper::start(CFG, "n1", "a", 0);
  let old = NodeLease {
    node: "n1".into(),
    expires_ms: 500,
    address: "a".into(),
    load: 0,
    log: String::new(),
  };
  let LeaseStep::Cas { token, .. } = k.on_read(Ok(Some((old, tok("old")))), 1_000) else {
    panic!()
  };
  assert_eq!(token, tok("old"));
  assert!(!k.can_ack(1_000));
  assert_eq!(k.on_write(WriteAnswer::Rejected, 1_100), LeaseStep::Read);
  assert!(matches!(k.on_read(Ok(None), 1_200), LeaseStep::Create(_)));
  assert!(matches!(
    k.on_write(WriteAnswer::Applied(tok("v")), 1_300),
    LeaseStep::Wait { .. }
  ));
  assert!(k.can_ack(1_300));
}

/// A store outage at startup delays the first lease; it is no mismatch.
#[test]
fn startup_waits_out_a_store_outage() {
  let (mut k, _) = LeaseKeeper::start(CFG, "n1", "a", 0);
  k.set_jitter_seed(7);
  let mut now = 1_000;
  let mut step = k.on_read(Err(StoreError("connect".into())), now);
  for i in 0..10 {
    now = wait_until(step);
    assert_eq!(k.tick(now), LeaseStep::Read);
    let LeaseStep::Create(_) = k.on_read(Ok(None), now) else {
      panic!()
    };
    step = if i % 2 == 0 {
      k.on_write(staging_error(), now)
    } else {
      assert_eq!(k.on_write(WriteAnswer::Ambiguous, now), LeaseStep::Read);
      k.on_read(Ok(None), now)
    };
    assert!(!k.is_fenced());
  }
  now = wait_until(step);
  assert_eq!(k.tick(now), LeaseStep::Read);
  let LeaseStep::Create(_) = k.on_read(Ok(None), now) else {
    panic!()
  };
  k.on_write(WriteAnswer::Applied(tok("v")), now);
  assert!(k.can_ack(now));
}

/// Another process of this node keeps writing the record at startup.
#[test]
fn startup_contention_fences_and_says_so() {
  let (mut k, _) = LeaseKeeper::start(CFG, "n1", "a", 0);
  let mut s = k.on_read(Ok(None), 1_000);
  for _ in 0..STARTUP_ROUNDS {
    assert!(matches!(s, LeaseStep::Create(_) | LeaseStep::Cas { .. }));
    assert_eq!(k.on_write(WriteAnswer::Rejected, 1_000), LeaseStep::Read);
    s = k.on_read(Ok(Some((foreign(), tok("vx")))), 1_000);
  }
  assert_eq!(
    k.on_write(WriteAnswer::Rejected, 1_000),
    LeaseStep::Fence(FenceReason::RecordMismatch)
  );
  let line = k.fence_line().unwrap();
  assert!(
    line.contains("is another process of node n1 running?"),
    "{line}"
  );
}

#[test]
fn release_retires_the_lease_and_stops_acknowledging() {
  let mut k = serving();
  let LeaseStep::Retire { lease, token } = k.release() else {
    panic!()
  };
  assert_eq!(
    (lease.expires_ms, lease.node.as_str(), token),
    (0, "n1", tok("v1"))
  );
  assert!(!k.can_ack(1_500));
  assert_eq!(k.tick(50_000), LeaseStep::Wait { until_ms: u64::MAX });
}

#[test]
fn fence_lines() {
  let line = FenceReason::RecordMismatch.log_line("n7");
  assert!(
    line.starts_with("SELF-FENCE: node_lease_record_mismatch_fence: node n7"),
    "{line}"
  );
  assert_eq!(FenceReason::Watchdog.event(), "node_lease_watchdog_fence");
  assert_eq!(
    FenceReason::RecordMissing.event(),
    "node_lease_record_missing_fence"
  );
  assert_eq!(FENCE_EXIT_CODE, 3);
}

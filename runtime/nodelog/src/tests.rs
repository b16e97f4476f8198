use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

fn tmp() -> PathBuf {
  static N: AtomicU32 = AtomicU32::new(0);
  let d = std::env::temp_dir().join(format!(
    "cellhost-nodelog-{}-{}",
    std::process::id(),
    N.fetch_add(1, Ordering::Relaxed)
  ));
  let _ = std::fs::remove_dir_all(&d);
  d
}

fn b(epoch: u32, seq: u64) -> Batch<Entry> {
  Batch {
    epoch,
    seq,
    entries: vec![format!("e{epoch}.{seq}").into_bytes(), vec![0; 3]],
  }
}

fn ranged(t: Tail<Entry>) -> (Vec<EpochTail>, bool) {
  match t {
    Tail::Ranged { epochs, whole } => (epochs, whole),
    Tail::Entries(_) => panic!("entries"),
  }
}

use cellhost_logic::ensemble::follower::EpochTail as ET;
type EpochTail = ET<Entry>;

#[test]
fn batches_seal_and_prunes_survive_a_restart() {
  let d = tmp();
  let mut l = NodeLog::open(&d).unwrap();
  for s in 1..=3 {
    assert_eq!(
      l.append("n1", "s1", b(1, s)).unwrap(),
      AppendAnswer::Stored { through: s }
    );
  }
  assert_eq!(
    l.append("n1", "s1", b(1, 5)).unwrap(),
    AppendAnswer::Gap { through: 3 }
  );
  l.prune("n1", "s1", 1, 1).unwrap();
  l.append("n1", "s2", b(1, 1)).unwrap();
  l.seal("n1", "s2").unwrap();
  drop(l);
  let mut l = NodeLog::open(&d).unwrap();
  let (epochs, whole) = ranged(l.tail("n1", "s1", TailFormat::Ranged).unwrap());
  assert!(whole);
  assert_eq!(
    (epochs[0].pruned, epochs[0].through, epochs[0].certified),
    (1, 3, true)
  );
  assert_eq!(epochs[0].batches, vec![b(1, 2), b(1, 3)]);
  assert_eq!(l.append("n1", "s2", b(1, 2)).unwrap(), AppendAnswer::Sealed);
  assert_eq!(
    l.append("n1", "s1", b(1, 4)).unwrap(),
    AppendAnswer::Stored { through: 4 }
  );
  assert!(
    l.append("../x", "s", b(1, 1)).is_err(),
    "names are path components"
  );
  let id = l.id().to_string();
  assert_eq!(id.len(), 16);
  drop(l);
  assert_eq!(
    NodeLog::open(&d).unwrap().id(),
    id,
    "the identity stays with the disk"
  );
  std::fs::remove_dir_all(&d).unwrap();
  assert_ne!(
    NodeLog::open(&d).unwrap().id(),
    id,
    "a wiped disk is a new log"
  );
}

#[test]
fn a_torn_batch_or_a_damaged_one_is_evidence() {
  let d = tmp();
  let mut l = NodeLog::open(&d).unwrap();
  for s in 1..=3 {
    l.append("n1", "s1", b(1, s)).unwrap();
  }
  drop(l);
  let path = d.join("n1/s1/log");
  let bytes = std::fs::read(&path).unwrap();
  let rec = bytes.len() / 3;
  // Torn: the last batch lost its tail.
  std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
  let mut l = NodeLog::open(&d).unwrap();
  let (epochs, _) = ranged(l.tail("n1", "s1", TailFormat::Ranged).unwrap());
  assert_eq!((epochs[0].through, epochs[0].certified), (2, false));
  assert!(
    l.tail("n1", "s1", TailFormat::Entries).is_err(),
    "CLT1 refuses what it cannot certify"
  );
  drop(l);
  // Damaged in the middle (a flipped body byte): a gap before a later batch.
  let mut rot = bytes.clone();
  rot[rec + HEADER + 2] ^= 0xff;
  std::fs::write(&path, &rot).unwrap();
  let mut l = NodeLog::open(&d).unwrap();
  let (epochs, _) = ranged(l.tail("n1", "s1", TailFormat::Ranged).unwrap());
  assert_eq!(
    (
      epochs[0].through,
      epochs[0].certified,
      epochs[0].batches.len()
    ),
    (1, false, 2)
  );
  // Valid data for the damaged batch covers the gap.
  assert_eq!(
    l.append("n1", "s1", b(1, 2)).unwrap(),
    AppendAnswer::Stored { through: 3 }
  );
  drop(l);
  // A damaged header: damage of unknown epoch, nothing certified.
  let mut rot = bytes.clone();
  rot[rec + 3] ^= 0xff;
  std::fs::write(&path, &rot).unwrap();
  let mut l = NodeLog::open(&d).unwrap();
  let (epochs, whole) = ranged(l.tail("n1", "s1", TailFormat::Ranged).unwrap());
  assert!(!whole && !epochs[0].certified);
  assert_eq!(epochs[0].through, 1);
}

#[test]
fn a_drained_log_is_rewritten_as_its_prune_marks() {
  let d = tmp();
  let mut l = NodeLog::open(&d).unwrap();
  let big = |seq| Batch {
    epoch: 1,
    seq,
    entries: vec![vec![7; 300 << 10]],
  };
  for s in 1..=4 {
    l.append("n1", "s1", big(s)).unwrap();
  }
  l.prune("n1", "s1", 1, 3).unwrap();
  let path = d.join("n1/s1/log");
  assert!(
    std::fs::metadata(&path).unwrap().len() > REWRITE_BYTES,
    "batch 4 is still held"
  );
  l.prune("n1", "s1", 1, 4).unwrap();
  assert!(std::fs::metadata(&path).unwrap().len() < 100);
  assert_eq!(
    l.append("n1", "s1", b(1, 5)).unwrap(),
    AppendAnswer::Stored { through: 5 }
  );
  drop(l);
  let mut l = NodeLog::open(&d).unwrap();
  let (epochs, _) = ranged(l.tail("n1", "s1", TailFormat::Ranged).unwrap());
  assert_eq!(
    (epochs[0].pruned, epochs[0].through, epochs[0].certified),
    (4, 5, true)
  );
}

#[test]
fn tails_round_trip_in_both_formats() {
  let d = tmp();
  let mut l = NodeLog::open(&d).unwrap();
  l.append("n1", "s1", b(1, 1)).unwrap();
  l.append("n1", "s1", b(2, 1)).unwrap();
  for f in [TailFormat::Entries, TailFormat::Ranged] {
    let t = l.tail("n1", "s1", f).unwrap();
    assert_eq!(decode_tail(&encode_tail(&t)).unwrap(), t);
  }
  assert!(decode_tail(b"CLT3").is_err());
  let a = encode_append("n1", "s1", "ab12", &b(3, 4));
  assert_eq!(
    decode_append(&a).unwrap(),
    ("n1".into(), "s1".into(), "ab12".into(), b(3, 4))
  );
  assert!(decode_append(&a[..5]).is_err());
  let mut bytes = encode_tail(&l.tail("n1", "s1", TailFormat::Ranged).unwrap());
  bytes.push(0);
  assert!(decode_tail(&bytes).is_err(), "trailing bytes");
}

#[test]
fn a_dropped_session_stays_sealed_and_never_passes_for_empty() {
  let d = tmp();
  let mut l = NodeLog::open(&d).unwrap();
  for s in 1..=3 {
    l.append("n1", "s1", b(1, s)).unwrap();
  }
  l.append("n1", "s2", b(1, 1)).unwrap();
  // An open session is never dropped.
  assert!(l.drop_sealed("n1", "s1").is_err());
  assert!(l.sealed_sessions().is_empty());
  l.seal("n1", "s1").unwrap();
  assert_eq!(l.sealed_sessions(), vec![("n1".into(), "s1".into())]);
  l.drop_sealed("n1", "s1").unwrap();
  assert!(l.sealed_sessions().is_empty());
  let file = d.join("n1/s1/log");
  assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
  for l in [&mut l, &mut NodeLog::open(&d).unwrap()] {
    // A stale owner's append, even one that would start an epoch, is refused.
    assert_eq!(l.append("n1", "s1", b(2, 1)).unwrap(), AppendAnswer::Sealed);
    let err = l.tail("n1", "s1", TailFormat::Ranged).unwrap_err();
    assert!(err.contains("dropped its copy"), "{err}");
    l.prune("n1", "s1", 1, 3).unwrap();
    // The other session is untouched.
    assert_eq!(
      ranged(l.tail("n1", "s2", TailFormat::Ranged).unwrap()).0[0]
        .batches
        .len(),
      1
    );
  }
  assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
  // A crash after the marker but before the truncation: the bytes are ignored.
  std::fs::write(&file, b"stale bytes").unwrap();
  let mut l = NodeLog::open(&d).unwrap();
  assert!(l.tail("n1", "s1", TailFormat::Ranged).is_err());
  assert!(l.sealed_sessions().is_empty());
}

//! A follower's node log for one owner session: which batches it stores,
//! what it refuses, and what it can certify when recovery asks for the tail.
//!
//! The owner numbers the batches of each log epoch from 1 and sends them to
//! every member in order. A follower stores batch `s` only when it holds
//! `s - 1` (or everything up to it was pruned), and answers with the
//! contiguous end it holds, so "stored through `s`" always means every
//! batch up to `s`. A sealed session refuses every append: that is what
//! stops a stale owner's fleet proofs once recovery has its tail.
//!
//! A restart rebuilds the state from what the disk holds
//! ([`SessionLog::restored`]): a damaged batch, or valid batches after a
//! missing one, is evidence that the follower cannot certify the range past
//! its contiguous end until valid data covers it. A failed directory read
//! is not evidence (the caller fails the request; a retry reads again).

use std::collections::BTreeMap;

/// One batch of an owner session: its log epoch, its number within that
/// epoch (from 1), and what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch<E> {
  pub epoch: u32,
  pub seq: u64,
  pub entries: Vec<E>,
}

/// A follower's answer to an append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendAnswer {
  /// Durable on this follower, with every batch of the epoch up to
  /// `through` (the caller fsyncs before it answers).
  Stored { through: u64 },
  /// The session was sealed by a recovery: no more fleet proofs.
  Sealed,
  /// The batch does not follow what the follower holds.
  Gap { through: u64 },
}

/// Which `/peer/log/tail` response a caller asked for (`tail_format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailFormat {
  /// `CLT1`: the entries only (a missing field, or `1`).
  Entries,
  /// `CLT2`: the entries with each log epoch's range evidence (`2`).
  Ranged,
}

/// Parses the request's `tail_format` field.
pub fn tail_format(field: Option<&str>) -> Result<TailFormat, String> {
  match field {
    None | Some("1") => Ok(TailFormat::Entries),
    Some("2") => Ok(TailFormat::Ranged),
    Some(other) => Err(format!(
      "unsupported tail_format {other:?} (1: CLT1, 2: CLT2)"
    )),
  }
}

/// What a follower holds of one log epoch, as a `CLT2` response says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochTail<E> {
  pub epoch: u32,
  /// Batches up to here were pruned: the owner had them in the bucket.
  pub pruned: u64,
  /// The contiguous end held.
  pub through: u64,
  /// Whether the follower vouches that no batch past `through` ever reached
  /// it durably. False after a damaged batch or a gap.
  pub certified: bool,
  pub batches: Vec<Batch<E>>,
}

/// A `/peer/log/tail` response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail<E> {
  /// `CLT1`: entries without range evidence.
  Entries(Vec<E>),
  /// `CLT2`. `whole` is false when damage of unknown epoch was found (a
  /// torn batch header): then no epoch, listed or not, is certified.
  Ranged {
    epochs: Vec<EpochTail<E>>,
    whole: bool,
  },
}

/// What a restart found on disk, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scanned<E> {
  Batch(Batch<E>),
  /// A batch whose checksum failed; its header named this epoch and number
  /// when `Some`.
  Damaged {
    at: Option<(u32, u64)>,
  },
  /// The owner's prune mark.
  Pruned {
    epoch: u32,
    through: u64,
  },
}

#[derive(Clone, Debug)]
struct EpochLog<E> {
  pruned: u64,
  through: u64,
  batches: BTreeMap<u64, Vec<E>>,
  /// Evidence of data once held past `through`: uncertain up to here.
  uncertain_to: u64,
}

impl<E> Default for EpochLog<E> {
  fn default() -> Self {
    EpochLog {
      pruned: 0,
      through: 0,
      batches: BTreeMap::new(),
      uncertain_to: 0,
    }
  }
}

impl<E: Clone> EpochLog<E> {
  fn absorb(&mut self) {
    while self.batches.contains_key(&(self.through + 1)) {
      self.through += 1;
    }
  }

  fn certified(&self) -> bool {
    self.uncertain_to <= self.through
  }
}

/// One owner session's log on a follower.
#[derive(Clone, Debug)]
pub struct SessionLog<E> {
  sealed: bool,
  epochs: BTreeMap<u32, EpochLog<E>>,
  /// Damage whose epoch is unknown.
  unknown_damage: bool,
}

impl<E: Clone> Default for SessionLog<E> {
  fn default() -> Self {
    SessionLog::new()
  }
}

impl<E: Clone> SessionLog<E> {
  pub fn new() -> Self {
    SessionLog {
      sealed: false,
      epochs: BTreeMap::new(),
      unknown_damage: false,
    }
  }

  pub fn is_sealed(&self) -> bool {
    self.sealed
  }

  /// The contiguous end held of log epoch `epoch`.
  fn through(&self, epoch: u32) -> u64 {
    self.epochs.get(&epoch).map_or(0, |l| l.through)
  }

  /// Whether [`SessionLog::append`] would store `b` anew: the caller writes
  /// it to disk first, so a failed write stores nothing.
  pub fn takes(&self, b: &Batch<E>) -> bool {
    !self.sealed && b.seq == self.through(b.epoch) + 1
  }

  /// Decides an append; on `Stored` the caller makes the batch durable
  /// before it answers.
  pub fn append(&mut self, b: Batch<E>) -> AppendAnswer {
    if self.sealed {
      return AppendAnswer::Sealed;
    }
    let log = self.epochs.entry(b.epoch).or_default();
    if b.seq <= log.through {
      // A resend of what it holds.
      return AppendAnswer::Stored {
        through: log.through,
      };
    }
    if b.seq != log.through + 1 {
      return AppendAnswer::Gap {
        through: log.through,
      };
    }
    log.batches.insert(b.seq, b.entries);
    log.through = b.seq;
    log.absorb();
    AppendAnswer::Stored {
      through: log.through,
    }
  }

  /// Seals the session (the caller persists it before answering).
  pub fn seal(&mut self) {
    self.sealed = true;
  }

  /// The owner has every batch of `epoch` up to `through` in the bucket.
  pub fn prune(&mut self, epoch: u32, through: u64) {
    let log = self.epochs.entry(epoch).or_default();
    log.pruned = log.pruned.max(through);
    log.batches = log.batches.split_off(&(log.pruned + 1));
    log.through = log.through.max(log.pruned);
    log.absorb();
  }

  /// Rebuilds the log from a scan of its files after a restart.
  pub fn restored(sealed: bool, scan: Vec<Scanned<E>>) -> Self {
    let mut s = SessionLog::new();
    s.sealed = sealed;
    for item in scan {
      match item {
        Scanned::Batch(b) => {
          let log = s.epochs.entry(b.epoch).or_default();
          if b.seq > log.pruned {
            log.uncertain_to = log.uncertain_to.max(b.seq);
            log.batches.insert(b.seq, b.entries);
          }
        }
        Scanned::Damaged {
          at: Some((epoch, seq)),
        } => {
          let log = s.epochs.entry(epoch).or_default();
          log.uncertain_to = log.uncertain_to.max(seq);
        }
        Scanned::Damaged { at: None } => s.unknown_damage = true,
        Scanned::Pruned { epoch, through } => {
          let log = s.epochs.entry(epoch).or_default();
          log.pruned = log.pruned.max(through);
        }
      }
    }
    for log in s.epochs.values_mut() {
      log.batches = log.batches.split_off(&(log.pruned + 1));
      log.through = log.pruned;
      log.absorb();
    }
    s
  }

  /// The tail recovery reads (after [`SessionLog::seal`]). An entries-only
  /// caller gets an error when the follower cannot certify what it holds,
  /// so an incomplete tail never passes for a complete one.
  pub fn tail(&self, format: TailFormat) -> Result<Tail<E>, String> {
    match format {
      TailFormat::Entries => {
        if self.unknown_damage || self.epochs.values().any(|l| !l.certified()) {
          return Err("this follower cannot certify its node log (a damaged batch or a gap); ask with tail_format 2".into());
        }
        let entries = (self.epochs.values())
          .flat_map(|l| l.batches.values().flatten().cloned())
          .collect();
        Ok(Tail::Entries(entries))
      }
      TailFormat::Ranged => {
        let epochs = (self.epochs.iter())
          .map(|(&epoch, l)| EpochTail {
            epoch,
            pruned: l.pruned,
            through: l.through,
            certified: l.certified() && !self.unknown_damage,
            batches: (l.batches.iter())
              .map(|(&seq, entries)| Batch {
                epoch,
                seq,
                entries: entries.clone(),
              })
              .collect(),
          })
          .collect();
        Ok(Tail::Ranged {
          epochs,
          whole: !self.unknown_damage,
        })
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn b(epoch: u32, seq: u64) -> Batch<u64> {
    Batch {
      epoch,
      seq,
      entries: vec![seq * 10],
    }
  }

  #[test]
  fn stores_in_order_refuses_gaps_and_seals() {
    let mut l = SessionLog::new();
    assert_eq!(l.append(b(1, 1)), AppendAnswer::Stored { through: 1 });
    assert_eq!(l.append(b(1, 3)), AppendAnswer::Gap { through: 1 });
    assert_eq!(l.append(b(1, 2)), AppendAnswer::Stored { through: 2 });
    assert_eq!(l.append(b(1, 1)), AppendAnswer::Stored { through: 2 });
    assert_eq!(l.append(b(2, 1)), AppendAnswer::Stored { through: 1 });
    l.seal();
    assert_eq!(l.append(b(1, 3)), AppendAnswer::Sealed);
    let Tail::Ranged { epochs, whole } = l.tail(TailFormat::Ranged).unwrap() else {
      panic!()
    };
    assert!(whole);
    assert_eq!(epochs.len(), 2);
    assert!(epochs.iter().all(|e| e.certified));
    assert_eq!(epochs[0].through, 2);
    assert_eq!(
      l.tail(TailFormat::Entries).unwrap(),
      Tail::Entries(vec![10, 20, 10])
    );
  }

  #[test]
  fn prune_keeps_the_rest_and_lets_a_late_member_continue() {
    let mut l = SessionLog::new();
    for s in 1..=3 {
      l.append(b(1, s));
    }
    l.prune(1, 2);
    let Tail::Ranged { epochs, .. } = l.tail(TailFormat::Ranged).unwrap() else {
      panic!()
    };
    assert_eq!((epochs[0].pruned, epochs[0].through), (2, 3));
    assert_eq!(epochs[0].batches.len(), 1);
    // A member that missed batches the bucket already has continues after them.
    let mut late = SessionLog::new();
    late.prune(1, 5);
    assert_eq!(late.append(b(1, 6)), AppendAnswer::Stored { through: 6 });
  }

  #[test]
  fn a_restart_keeps_evidence_of_damage_and_gaps() {
    let scan = vec![
      Scanned::Batch(b(1, 1)),
      Scanned::Damaged { at: Some((1, 2)) },
      Scanned::Batch(b(1, 3)),
      Scanned::Batch(b(2, 1)),
    ];
    let mut l = SessionLog::restored(false, scan);
    let Tail::Ranged { epochs, .. } = l.tail(TailFormat::Ranged).unwrap() else {
      panic!()
    };
    assert_eq!((epochs[0].through, epochs[0].certified), (1, false));
    assert!(epochs[1].certified);
    assert!(l.tail(TailFormat::Entries).is_err());
    // Valid data for the damaged batch covers the gap.
    assert_eq!(l.append(b(1, 2)), AppendAnswer::Stored { through: 3 });
    let Tail::Ranged { epochs, .. } = l.tail(TailFormat::Ranged).unwrap() else {
      panic!()
    };
    assert!(epochs[0].certified);
    // Damage of unknown epoch certifies nothing.
    let l = SessionLog::<u64>::restored(
      true,
      vec![Scanned::Batch(b(1, 1)), Scanned::Damaged { at: None }],
    );
    assert!(l.is_sealed());
    let Tail::Ranged { epochs, whole } = l.tail(TailFormat::Ranged).unwrap() else {
      panic!()
    };
    assert!(!whole && !epochs[0].certified);
  }

  #[test]
  fn tail_format_field() {
    assert_eq!(tail_format(None), Ok(TailFormat::Entries));
    assert_eq!(tail_format(Some("1")), Ok(TailFormat::Entries));
    assert_eq!(tail_format(Some("2")), Ok(TailFormat::Ranged));
    assert!(tail_format(Some("3")).is_err());
  }
}

//! The takeover recovery gate: before a cold activation restores a cell,
//! the prior owner's node-log session must be sealed and its acknowledged
//! tail be in the per-cell prefixes.
//!
//! [`Recovery`] runs it for one session (`log/<node>/<session>.json`):
//! - **absent** record: create it sealed (`If-None-Match: *`). The session
//!   creates its own record before its first fleet proof with the same
//!   condition, so once this create applied it never issues one;
//! - **sealed**: nothing to do;
//! - **open / recovering**: fence it (compare-and-swap to `recovering`, so
//!   the session can no longer add a log epoch), seal the members of every
//!   log epoch not yet drained and read their tails (`CLT2`), upload the
//!   union of what they hold, write the loss record for a range nobody could
//!   certify, and mark the record sealed.
//!
//! Why one certified member per log epoch suffices: a fleet proof needs
//! every member of its log epoch to store the batch, and a member stores in
//! order, so each member's contiguous range covers every acknowledged batch;
//! once that member is sealed, no later batch of the epoch can be
//! acknowledged. An entries-only (`CLT1`) answer proves neither
//! completeness nor loss: recovery waits for a member's range evidence.
//! When every member answered with ranges (or is known gone: its node log
//! is not the one the record names) and none certifies, the range past
//! the furthest contiguous end is reported lost (a torn batch is usually an
//! unacknowledged write, but recovery cannot tell) and recovery completes.

use std::collections::{BTreeMap, BTreeSet};

use super::follower::Tail;
use super::record::{LogRecord, LogState, PriorLog, prior_log};
use crate::{ReadResult, Token, WriteAnswer};

/// Default pause between recovery attempts (`CELLD_RECOVERY_RETRY_MS`).
pub const RECOVERY_RETRY_MS: u64 = 1_000;
/// Default attempts before the waiting requests fail with a resolve error
/// (`CELLD_RECOVERY_RETRIES`).
pub const RECOVERY_RETRIES: u32 = 240;

/// One member's answer to seal-and-tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberAnswer<E> {
  Tail(Tail<E>),
  /// An HTTP error, a timeout, an unreachable node: proves nothing, even
  /// when its lease has expired.
  Failed,
  /// The node answered with another node log than the one the record
  /// names: that log went with its disk, and no retry brings it back.
  Gone,
}

/// What recovery concluded from the members' answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<E> {
  /// These log epochs have no member with range evidence yet: ask again.
  Wait { epochs: Vec<u32> },
  /// Upload `entries`; `loss` lists, per log epoch nobody certified, the
  /// first batch number that is uncertified.
  Recovered {
    entries: Vec<E>,
    loss: Vec<(u32, u64)>,
  },
}

/// Decides from the answers of the members of `record`'s active log epochs.
pub fn decide<E: Clone + Ord>(
  record: &LogRecord,
  answers: &BTreeMap<String, MemberAnswer<E>>,
) -> Verdict<E> {
  let mut entries = BTreeSet::new();
  for a in answers.values() {
    match a {
      MemberAnswer::Tail(Tail::Entries(es)) => entries.extend(es.iter().cloned()),
      MemberAnswer::Tail(Tail::Ranged { epochs, .. }) => {
        for e in epochs {
          entries.extend(e.batches.iter().flat_map(|b| b.entries.iter().cloned()));
        }
      }
      MemberAnswer::Failed | MemberAnswer::Gone => {}
    }
  }
  let (mut wait, mut loss) = (Vec::new(), Vec::new());
  for epoch in record.active() {
    let mut certified = false;
    let mut all_ranged = true;
    let mut furthest = 0;
    for m in &epoch.members {
      match answers.get(m) {
        Some(MemberAnswer::Tail(Tail::Ranged { epochs, whole })) => {
          match epochs.iter().find(|t| t.epoch == epoch.n) {
            Some(t) => {
              certified |= t.certified;
              furthest = furthest.max(t.through);
            }
            // It never stored a batch of this epoch: certified empty
            // unless damage of unknown epoch could have been one.
            None => certified |= *whole,
          }
        }
        // Nothing to wait for, and nothing it vouches for.
        Some(MemberAnswer::Gone) => {}
        _ => all_ranged = false,
      }
    }
    if certified {
      continue;
    }
    if all_ranged && !epoch.members.is_empty() {
      loss.push((epoch.n, furthest + 1));
    } else {
      wait.push(epoch.n);
    }
  }
  if !wait.is_empty() {
    return Verdict::Wait { epochs: wait };
  }
  Verdict::Recovered {
    entries: entries.into_iter().collect(),
    loss,
  }
}

/// The next request of a [`Recovery`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryStep<E> {
  /// GET the session's record; answer with [`Recovery::on_record`].
  ReadRecord,
  /// Create the record with `If-None-Match: *`; answer with
  /// [`Recovery::on_write`].
  Create { record: LogRecord },
  /// Compare-and-swap the record; answer with [`Recovery::on_write`].
  Cas { record: LogRecord, token: Token },
  /// Seal these members' copies of the session and read their tails
  /// (`tail_format` 2); answer with [`Recovery::on_tails`].
  SealTails { members: Vec<String> },
  /// PUT these entries into their cells' prefixes (the keys the owner would
  /// have used); answer with [`Recovery::on_uploaded`].
  Upload { entries: Vec<E> },
  /// PUT the loss record (`loss_record_key`); answer with
  /// [`Recovery::on_uploaded`].
  WriteLoss { loss: Vec<(u32, u64)> },
  /// Pause this long, then perform `then`.
  Retry {
    after_ms: u64,
    then: Box<RecoveryStep<E>>,
  },
  /// The session is sealed: the activation may restore.
  Done {
    recovered: usize,
    loss: Vec<(u32, u64)>,
  },
  /// The retry budget is spent; the requirement stays.
  Failed(String),
}

#[derive(Clone, Debug)]
enum Phase {
  Reading,
  Creating,
  Fencing(LogRecord),
  Gathering(LogRecord, Token),
  Uploading(LogRecord, Token),
  Losing(LogRecord, Token),
  Sealing,
}

/// The recovery gate for one prior session, as a sans-IO machine.
#[derive(Clone, Debug)]
pub struct Recovery<E> {
  node: String,
  session: String,
  me: String,
  phase: Phase,
  attempts: u32,
  max_attempts: u32,
  retry_ms: u64,
  recovered: usize,
  loss: Vec<(u32, u64)>,
  entries: Vec<E>,
  /// The record whose log epochs this recovery sealed, gathered and
  /// uploaded; set once only the final compare-and-swap is left.
  gathered: Option<LogRecord>,
}

impl<E: Clone + Ord> Recovery<E> {
  /// Recovery by node `me` of `node`'s session `session`.
  pub fn new(
    node: &str,
    session: &str,
    me: &str,
    retry_ms: u64,
    max_attempts: u32,
  ) -> (Self, RecoveryStep<E>) {
    let r = Recovery {
      node: node.into(),
      session: session.into(),
      me: me.into(),
      phase: Phase::Reading,
      attempts: 0,
      max_attempts,
      retry_ms,
      recovered: 0,
      loss: Vec::new(),
      entries: Vec::new(),
      gathered: None,
    };
    (r, RecoveryStep::ReadRecord)
  }

  fn retry(&mut self, then: RecoveryStep<E>, why: &str) -> RecoveryStep<E> {
    self.attempts += 1;
    if self.attempts >= self.max_attempts {
      return RecoveryStep::Failed(format!(
        "recovery of node {}'s log session {} did not complete after {} attempts: {why}",
        self.node, self.session, self.attempts
      ));
    }
    RecoveryStep::Retry {
      after_ms: self.retry_ms,
      then: Box::new(then),
    }
  }

  fn reread(&mut self) -> RecoveryStep<E> {
    self.phase = Phase::Reading;
    RecoveryStep::ReadRecord
  }

  pub fn on_record(&mut self, r: ReadResult<LogRecord>) -> RecoveryStep<E> {
    let (record, token) = match r {
      Err(e) => return self.retry(RecoveryStep::ReadRecord, &e.to_string()),
      Ok(None) => {
        self.phase = Phase::Creating;
        return RecoveryStep::Create {
          record: LogRecord::sealed(&self.node, &self.session),
        };
      }
      Ok(Some(rt)) => rt,
    };
    match prior_log(Some(&record)) {
      PriorLog::Sealed => self.done(),
      PriorLog::Absent => unreachable!("a record was read"),
      // Another recovery fenced the record after this one gathered it: the
      // same log epochs, already recovered here, so seal it as it stands.
      PriorLog::NeedsRecovery
        if self
          .gathered
          .as_ref()
          .is_some_and(|g| g.epochs == record.epochs) =>
      {
        self.phase = Phase::Sealing;
        RecoveryStep::Cas {
          record: LogRecord {
            state: LogState::Sealed,
            ..record
          },
          token,
        }
      }
      PriorLog::NeedsRecovery => {
        self.gathered = None;
        let fenced = LogRecord {
          state: LogState::Recovering {
            by: self.me.clone(),
          },
          ..record
        };
        self.phase = Phase::Fencing(fenced.clone());
        RecoveryStep::Cas {
          record: fenced,
          token,
        }
      }
    }
  }

  fn done(&mut self) -> RecoveryStep<E> {
    RecoveryStep::Done {
      recovered: self.recovered,
      loss: self.loss.clone(),
    }
  }

  fn gather(&mut self, record: LogRecord, token: Token) -> RecoveryStep<E> {
    let members: BTreeSet<String> = record
      .active()
      .flat_map(|e| e.members.iter().cloned())
      .collect();
    self.phase = Phase::Gathering(record, token);
    if members.is_empty() {
      // Every log epoch drained: nothing outside the bucket.
      return self.on_tails(&BTreeMap::new());
    }
    RecoveryStep::SealTails {
      members: members.into_iter().collect(),
    }
  }

  pub fn on_write(&mut self, a: WriteAnswer) -> RecoveryStep<E> {
    let phase = std::mem::replace(&mut self.phase, Phase::Reading);
    match (phase, a) {
      (Phase::Creating, WriteAnswer::Applied(_)) => self.done(),
      (Phase::Fencing(record), WriteAnswer::Applied(token)) => self.gather(record, token),
      (Phase::Sealing, WriteAnswer::Applied(_)) => self.done(),
      // Another writer moved it, or it may have applied: read again.
      (
        Phase::Creating | Phase::Fencing(_) | Phase::Sealing,
        WriteAnswer::Rejected | WriteAnswer::Ambiguous,
      ) => self.reread(),
      (Phase::Creating | Phase::Fencing(_) | Phase::Sealing, WriteAnswer::Failed(e)) => {
        self.phase = Phase::Reading;
        self.retry(RecoveryStep::ReadRecord, &e.to_string())
      }
      (p, a) => panic!("write answer {a:?} in phase {p:?}"),
    }
  }

  pub fn on_tails(&mut self, answers: &BTreeMap<String, MemberAnswer<E>>) -> RecoveryStep<E> {
    let Phase::Gathering(record, token) = std::mem::replace(&mut self.phase, Phase::Reading) else {
      panic!("tails outside gathering");
    };
    match decide(&record, answers) {
      Verdict::Wait { epochs } => {
        let why = format!("no member of log epochs {epochs:?} returned its complete range");
        let members = record
          .active()
          .flat_map(|e| e.members.iter().cloned())
          .collect::<BTreeSet<_>>();
        self.phase = Phase::Gathering(record, token);
        self.retry(
          RecoveryStep::SealTails {
            members: members.into_iter().collect(),
          },
          &why,
        )
      }
      Verdict::Recovered { entries, loss } => {
        self.recovered = entries.len();
        self.loss = loss;
        self.entries = entries.clone();
        self.phase = Phase::Uploading(record, token);
        RecoveryStep::Upload { entries }
      }
    }
  }

  pub fn on_uploaded(&mut self, ok: bool) -> RecoveryStep<E> {
    match std::mem::replace(&mut self.phase, Phase::Reading) {
      Phase::Uploading(record, token) if !ok => {
        self.phase = Phase::Uploading(record, token);
        let entries = self.entries.clone();
        self.retry(
          RecoveryStep::Upload { entries },
          "an upload of the tail failed",
        )
      }
      Phase::Uploading(record, token) if !self.loss.is_empty() => {
        self.phase = Phase::Losing(record, token);
        RecoveryStep::WriteLoss {
          loss: self.loss.clone(),
        }
      }
      Phase::Losing(record, token) if !ok => {
        self.phase = Phase::Losing(record, token);
        self.retry(
          RecoveryStep::WriteLoss {
            loss: self.loss.clone(),
          },
          "the loss record could not be written",
        )
      }
      Phase::Uploading(record, token) | Phase::Losing(record, token) => {
        self.phase = Phase::Sealing;
        self.gathered = Some(record.clone());
        RecoveryStep::Cas {
          record: LogRecord {
            state: LogState::Sealed,
            ..record
          },
          token,
        }
      }
      p => panic!("upload answer in phase {p:?}"),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::ensemble::follower::{Batch, EpochTail};

  /// A record whose one log epoch (`members`) issued fleet proofs.
  fn rec(members: &[&str]) -> LogRecord {
    LogRecord::open("a", "a.1")
      .with_epoch(members.iter().map(|m| m.to_string()).collect())
      .with_active(1)
  }

  fn ranged(through: u64, certified: bool) -> MemberAnswer<u64> {
    MemberAnswer::Tail(Tail::Ranged {
      epochs: vec![EpochTail {
        epoch: 1,
        pruned: 0,
        through,
        certified,
        batches: (1..=through)
          .map(|seq| Batch {
            epoch: 1,
            seq,
            entries: vec![seq],
          })
          .collect(),
      }],
      whole: true,
    })
  }

  fn answers(a: Vec<(&str, MemberAnswer<u64>)>) -> BTreeMap<String, MemberAnswer<u64>> {
    a.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
  }

  #[test]
  fn one_certified_member_is_enough_entries_only_is_not() {
    let r = rec(&["b", "c"]);
    let v = decide(
      &r,
      &answers(vec![("b", ranged(2, true)), ("c", MemberAnswer::Failed)]),
    );
    assert_eq!(
      v,
      Verdict::Recovered {
        entries: vec![1, 2],
        loss: vec![]
      }
    );
    let v = decide(
      &r,
      &answers(vec![
        ("b", MemberAnswer::Tail(Tail::Entries(vec![1, 2, 3]))),
        ("c", MemberAnswer::Failed),
      ]),
    );
    assert_eq!(v, Verdict::Wait { epochs: vec![1] });
    // Nobody certifies, but all answered with ranges: the rest is a loss.
    let v = decide(
      &r,
      &answers(vec![("b", ranged(1, false)), ("c", ranged(3, false))]),
    );
    assert_eq!(
      v,
      Verdict::Recovered {
        entries: vec![1, 2, 3],
        loss: vec![(1, 4)]
      }
    );
    // A member whose disk is gone only counts as answered.
    let v = decide(
      &r,
      &answers(vec![("b", ranged(2, false)), ("c", MemberAnswer::Gone)]),
    );
    assert_eq!(
      v,
      Verdict::Recovered {
        entries: vec![1, 2],
        loss: vec![(1, 3)]
      }
    );
    // A member that never stored a batch of the epoch certifies it empty.
    let empty = MemberAnswer::Tail(Tail::Ranged {
      epochs: vec![],
      whole: true,
    });
    assert_eq!(
      decide(&r, &answers(vec![("c", empty)])),
      Verdict::Recovered {
        entries: vec![],
        loss: vec![]
      }
    );
  }

  #[test]
  fn the_gate_fences_gathers_uploads_and_seals() {
    let (mut m, s) = Recovery::<u64>::new("a", "a.1", "z", 1000, 3);
    assert_eq!(s, RecoveryStep::ReadRecord);
    // Absent: created sealed.
    let RecoveryStep::Create { record } = m.on_record(Ok(None)) else {
      panic!()
    };
    assert_eq!(record.state, LogState::Sealed);
    assert!(matches!(
      m.on_write(WriteAnswer::Applied(Token::new("1"))),
      RecoveryStep::Done { .. }
    ));

    let (mut m, _) = Recovery::<u64>::new("a", "a.1", "z", 1000, 3);
    let RecoveryStep::Cas { record, token } = m.on_record(Ok(Some((rec(&["b"]), Token::new("7")))))
    else {
      panic!()
    };
    assert_eq!(
      (record.state, token),
      (LogState::Recovering { by: "z".into() }, Token::new("7"))
    );
    let s = m.on_write(WriteAnswer::Applied(Token::new("8")));
    assert_eq!(
      s,
      RecoveryStep::SealTails {
        members: vec!["b".into()]
      }
    );
    let s = m.on_tails(&answers(vec![("b", MemberAnswer::Failed)]));
    let RecoveryStep::Retry { then, .. } = s else {
      panic!()
    };
    assert!(matches!(*then, RecoveryStep::SealTails { .. }));
    assert_eq!(
      m.on_tails(&answers(vec![("b", ranged(2, true))])),
      RecoveryStep::Upload {
        entries: vec![1, 2]
      }
    );
    let RecoveryStep::Cas { record, token } = m.on_uploaded(true) else {
      panic!()
    };
    assert_eq!((record.state, token), (LogState::Sealed, Token::new("8")));
    assert_eq!(
      m.on_write(WriteAnswer::Applied(Token::new("9"))),
      RecoveryStep::Done {
        recovered: 2,
        loss: vec![]
      }
    );
    // The retry budget runs out.
    let (mut m, _) = Recovery::<u64>::new("a", "a.1", "z", 1000, 2);
    assert!(matches!(
      m.on_record(Err(crate::StoreError("x".into()))),
      RecoveryStep::Retry { .. }
    ));
    assert!(matches!(
      m.on_record(Err(crate::StoreError("x".into()))),
      RecoveryStep::Failed(_)
    ));
  }

  /// Drives `m` from a SealTails step through a certified tail and the
  /// upload to its final compare-and-swap.
  fn gather_to_seal(m: &mut Recovery<u64>, s: RecoveryStep<u64>) -> (LogRecord, Token) {
    assert!(matches!(s, RecoveryStep::SealTails { .. }), "{s:?}");
    let s = m.on_tails(&answers(vec![("b", ranged(2, true))]));
    assert!(matches!(s, RecoveryStep::Upload { .. }), "{s:?}");
    let RecoveryStep::Cas { record, token } = m.on_uploaded(true) else {
      panic!()
    };
    assert_eq!(record.state, LogState::Sealed);
    (record, token)
  }

  #[test]
  fn an_epoch_that_never_proved_needs_none_of_its_members() {
    let inactive = LogRecord::open("a", "a.1").with_epoch(vec!["b".into()]);
    let (mut r, _) = Recovery::<u64>::new("a", "a.1", "x", 1000, 3);
    let _ = r.on_record(Ok(Some((inactive, Token::new("1")))));
    // Fenced: no member to ask, nothing to upload, and the record sealed.
    let step = r.on_write(WriteAnswer::Applied(Token::new("2")));
    assert_eq!(
      step,
      RecoveryStep::Upload { entries: vec![] },
      "an inactive epoch waited for its member"
    );
    let RecoveryStep::Cas { record, .. } = r.on_uploaded(true) else {
      panic!("not sealed")
    };
    assert_eq!(record.state, LogState::Sealed);
  }

  #[test]
  fn a_recovery_beaten_by_another_fence_seals_what_it_gathered() {
    let fenced_by = |by: &str| LogRecord {
      state: LogState::Recovering { by: by.into() },
      ..rec(&["b"])
    };
    let (mut a, _) = Recovery::<u64>::new("a", "a.1", "x", 1000, 3);
    let (mut b, _) = Recovery::<u64>::new("a", "a.1", "y", 1000, 3);
    // x fences and gathers; y fences over it before x's final write.
    assert!(matches!(
      a.on_record(Ok(Some((rec(&["b"]), Token::new("1"))))),
      RecoveryStep::Cas { .. }
    ));
    let s = a.on_write(WriteAnswer::Applied(Token::new("2")));
    let (_, t) = gather_to_seal(&mut a, s);
    assert_eq!(t, Token::new("2"));
    assert!(matches!(
      b.on_record(Ok(Some((fenced_by("x"), Token::new("2"))))),
      RecoveryStep::Cas { .. }
    ));
    let s = b.on_write(WriteAnswer::Applied(Token::new("3")));
    // x's seal loses; it reads y's fence over the same log epochs and seals
    // that, instead of fencing again (which would restart y in turn).
    assert_eq!(a.on_write(WriteAnswer::Rejected), RecoveryStep::ReadRecord);
    let RecoveryStep::Cas { record, token } =
      a.on_record(Ok(Some((fenced_by("y"), Token::new("3")))))
    else {
      panic!()
    };
    assert_eq!((record.state, token), (LogState::Sealed, Token::new("3")));
    assert!(matches!(
      a.on_write(WriteAnswer::Applied(Token::new("4"))),
      RecoveryStep::Done { recovered: 2, .. }
    ));
    // y finishes its own work, loses its seal and reads the record sealed.
    let _ = gather_to_seal(&mut b, s);
    assert_eq!(b.on_write(WriteAnswer::Rejected), RecoveryStep::ReadRecord);
    assert!(matches!(
      b.on_record(Ok(Some((LogRecord::sealed("a", "a.1"), Token::new("4"))))),
      RecoveryStep::Done { .. }
    ));

    // A record whose log epochs differ from those gathered is fenced and
    // gathered again.
    let (mut c, _) = Recovery::<u64>::new("a", "a.1", "x", 1000, 3);
    let _ = c.on_record(Ok(Some((rec(&["b"]), Token::new("1")))));
    let s = c.on_write(WriteAnswer::Applied(Token::new("2")));
    let _ = gather_to_seal(&mut c, s);
    assert_eq!(c.on_write(WriteAnswer::Ambiguous), RecoveryStep::ReadRecord);
    let other = LogRecord {
      state: LogState::Recovering { by: "y".into() },
      ..rec(&["b"]).with_epoch(vec!["d".into()])
    };
    let RecoveryStep::Cas { record, .. } = c.on_record(Ok(Some((other, Token::new("3"))))) else {
      panic!()
    };
    assert_eq!(record.state, LogState::Recovering { by: "x".into() });
  }
}

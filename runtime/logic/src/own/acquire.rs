//! Acquiring a cell: the sans-IO machine of one activation.

use super::*;
use crate::restore::{self, Chain, LtxKey};
use crate::{ReadResult, StoreError, Token, WriteAnswer};

/// The next store request of an acquisition, or its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireStep {
  /// GET `cells/<scope>/own.json`; answer with [`Acquire::on_own`].
  ReadOwn,
  /// Note the local clock, then GET `nodes/<node>.json`; answer with
  /// [`Acquire::on_lease`], passing the clock noted *before* the read.
  ReadLease {
    node: String,
  },
  /// LIST `cells/<scope>/ltx/`; answer with [`Acquire::on_ltx`].
  ListLtx,
  /// PUT `own.json` with `If-None-Match: *`; answer with [`Acquire::on_write`].
  Create {
    record: OwnRecord,
  },
  /// PUT `own.json` with `If-Match: token`; answer with [`Acquire::on_write`].
  Cas {
    record: OwnRecord,
    token: Token,
  },
  /// The cell is ours: restore `restore` (or start empty), never the local file.
  Acquired(Acquired),
  Failed(AcquireError),
}

/// A won cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acquired {
  pub epoch: u64,
  /// The version of our record: the condition of a later release.
  pub token: Token,
  /// The chain to restore; `None` starts the cell empty.
  pub restore: Option<Chain>,
}

#[derive(Clone, Debug)]
enum AcqState {
  ReadOwn,
  ReadLease { next: OwnRecord, token: Token },
  CheckLtx,
  Write { record: OwnRecord },
  Reconcile { wrote: OwnRecord },
  Restore { epoch: u64, token: Token },
  Done,
}

/// One activation of one cell on one node.
#[derive(Clone, Debug)]
pub struct Acquire {
  scope: String,
  node: String,
  state: AcqState,
  rounds: u32,
  now_ms: u64,
}

impl Acquire {
  /// Starts an activation of `scope` by `node`; the first step reads the
  /// record. `now_ms` is only used to date a lost-record refusal.
  pub fn new(scope: &str, node: &str, now_ms: u64) -> (Self, AcquireStep) {
    let a = Acquire {
      scope: scope.to_string(),
      node: node.to_string(),
      state: AcqState::ReadOwn,
      rounds: 0,
      now_ms,
    };
    (a, AcquireStep::ReadOwn)
  }

  pub fn node(&self) -> &str {
    &self.node
  }

  /// The answer to [`AcquireStep::ReadOwn`].
  pub fn on_own(&mut self, read: ReadResult<OwnRecord>, now_ms: u64) -> AcquireStep {
    self.now_ms = now_ms;
    let read = match read {
      Ok(r) => r,
      Err(e) => return self.fail(AcquireError::Store(e)),
    };
    match std::mem::replace(&mut self.state, AcqState::Done) {
      AcqState::Reconcile { wrote } => match read {
        // Our ambiguous write happened (or an identical one of an earlier
        // incarnation of this node, which is as good: nobody else writes
        // this node's name).
        Some((r, token)) if r == wrote => self.restore(r.epoch, token),
        other => self.decide(other),
      },
      AcqState::ReadOwn => self.decide(read),
      s => panic!("Acquire::on_own in state {s:?}"),
    }
  }

  /// The answer to [`AcquireStep::ReadLease`]. `read_started_ms` is the
  /// local clock read before the lease GET was sent; see
  /// [`owner_lease_expired`] for why it must not be the arrival time.
  pub fn on_lease(&mut self, read: ReadResult<NodeLease>, read_started_ms: u64) -> AcquireStep {
    let AcqState::ReadLease { next, token } = std::mem::replace(&mut self.state, AcqState::Done)
    else {
      panic!("Acquire::on_lease out of order");
    };
    let lease = match read {
      Ok(l) => l.map(|(l, _)| l),
      Err(e) => return self.fail(AcquireError::Store(e)),
    };
    // The record we read is still the one the token versions: the CAS fails
    // cleanly if it moved since.
    if owner_lease_expired(lease.as_ref(), read_started_ms) {
      self.write_cas(next, token)
    } else {
      let (class, id) = split_scope(&self.scope);
      let owner = lease.map(|l| l.node).unwrap_or_default();
      self.fail(AcquireError::OwnedElsewhere(CellOwnedElsewhereError {
        class: class.to_string(),
        id: id.to_string(),
        owner,
      }))
    }
  }

  /// The answer to [`AcquireStep::ListLtx`], in any order.
  pub fn on_ltx(&mut self, listing: Result<&[LtxKey], StoreError>) -> AcquireStep {
    let keys = match listing {
      Ok(k) => k,
      Err(e) => return self.fail(AcquireError::Store(e)),
    };
    match std::mem::replace(&mut self.state, AcqState::Done) {
      AcqState::CheckLtx => match restore::newest_epoch(keys) {
        Some(newest_epoch) => self.fail(AcquireError::RecordLost(OwnershipRecordLost {
          scope: self.scope.clone(),
          newest_epoch,
          retry_at_ms: self.now_ms + LOST_RECORD_REFUSAL_MS,
        })),
        None => {
          let record = OwnRecord::owned(self.node.clone(), 1);
          self.state = AcqState::Write {
            record: record.clone(),
          };
          AcquireStep::Create { record }
        }
      },
      AcqState::Restore { epoch, token } => AcquireStep::Acquired(Acquired {
        epoch,
        token,
        restore: restore::restore_chain(keys),
      }),
      s => panic!("Acquire::on_ltx in state {s:?}"),
    }
  }

  /// The answer to [`AcquireStep::Create`] or [`AcquireStep::Cas`].
  pub fn on_write(&mut self, answer: WriteAnswer) -> AcquireStep {
    let AcqState::Write { record } = std::mem::replace(&mut self.state, AcqState::Done) else {
      panic!("Acquire::on_write out of order");
    };
    match answer {
      WriteAnswer::Applied(token) => self.restore(record.epoch, token),
      // Someone else moved the record first: look again.
      WriteAnswer::Rejected => {
        self.state = AcqState::ReadOwn;
        AcquireStep::ReadOwn
      }
      // Maybe ours: read to find out, never write again blindly.
      WriteAnswer::Ambiguous => {
        self.state = AcqState::Reconcile { wrote: record };
        AcquireStep::ReadOwn
      }
    }
  }

  fn decide(&mut self, current: Option<(OwnRecord, Token)>) -> AcquireStep {
    self.rounds += 1;
    if self.rounds > MAX_ACQUIRE_ROUNDS {
      return self.fail(AcquireError::Contention {
        rounds: self.rounds - 1,
      });
    }
    let (record, token) = match current {
      Some((r, t)) => (Some(r), Some(t)),
      None => (None, None),
    };
    match claim(record.as_ref(), &self.node) {
      Claim::Create => {
        // Lost-record check before creating: LTX without a record must not
        // restart empty.
        self.state = AcqState::CheckLtx;
        AcquireStep::ListLtx
      }
      Claim::Raise(next) => self.write_cas(next, token.expect("a record has a token")),
      Claim::CheckLease { owner } => {
        let epoch = record.map_or(0, |r| r.epoch);
        let next = OwnRecord::owned(self.node.clone(), epoch + 1);
        self.state = AcqState::ReadLease {
          next,
          token: token.expect("a record has a token"),
        };
        AcquireStep::ReadLease { node: owner }
      }
    }
  }

  /// CAS `record` (the next epoch) over the record versioned `token`.
  fn write_cas(&mut self, record: OwnRecord, token: Token) -> AcquireStep {
    self.state = AcqState::Write {
      record: record.clone(),
    };
    AcquireStep::Cas { record, token }
  }

  fn restore(&mut self, epoch: u64, token: Token) -> AcquireStep {
    self.state = AcqState::Restore { epoch, token };
    AcquireStep::ListLtx
  }

  fn fail(&mut self, e: AcquireError) -> AcquireStep {
    self.state = AcqState::Done;
    AcquireStep::Failed(e)
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::lease::NodeLease;

  fn tok(s: &str) -> Token {
    Token::new(s)
  }

  fn lease(node: &str, expires_ms: u64) -> NodeLease {
    NodeLease::for_test(node, expires_ms)
  }

  #[test]
  fn first_activation_creates_epoch_one() {
    let (mut a, s) = Acquire::new("C:1", "a", 0);
    assert_eq!(s, AcquireStep::ReadOwn);
    assert_eq!(a.on_own(Ok(None), 0), AcquireStep::ListLtx);
    let s = a.on_ltx(Ok(&[]));
    assert_eq!(
      s,
      AcquireStep::Create {
        record: OwnRecord::owned("a", 1)
      }
    );
    assert_eq!(
      a.on_write(WriteAnswer::Applied(tok("v1"))),
      AcquireStep::ListLtx
    );
    let s = a.on_ltx(Ok(&[]));
    assert_eq!(
      s,
      AcquireStep::Acquired(Acquired {
        epoch: 1,
        token: tok("v1"),
        restore: None
      })
    );
  }

  #[test]
  fn every_activation_raises_the_epoch() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let s = a.on_own(Ok(Some((OwnRecord::owned("a", 4), tok("v4")))), 0);
    assert_eq!(
      s,
      AcquireStep::Cas {
        record: OwnRecord::owned("a", 5),
        token: tok("v4")
      }
    );
    assert_eq!(
      a.on_write(WriteAnswer::Applied(tok("v5"))),
      AcquireStep::ListLtx
    );
    let keys = [LtxKey::l0(4, 1), LtxKey::l0(4, 2)];
    match a.on_ltx(Ok(&keys)) {
      AcquireStep::Acquired(got) => {
        assert_eq!(got.epoch, 5);
        assert_eq!(got.restore.unwrap().keys, keys.to_vec());
      }
      s => panic!("{s:?}"),
    }
  }

  #[test]
  fn takeover_waits_for_the_owner_lease() {
    let (mut a, _) = Acquire::new("Counter:xyz", "a", 0);
    let s = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ReadLease { node: "b".into() });
    match a.on_lease(Ok(Some((lease("b", 1_000), tok("l")))), 999) {
      AcquireStep::Failed(AcquireError::OwnedElsewhere(e)) => {
        assert_eq!(
          e.to_string(),
          "Durable Object Counter/xyz is owned by another node"
        );
        assert_eq!(e.owner, "b");
      }
      s => panic!("{s:?}"),
    }
    let (mut a, _) = Acquire::new("Counter:xyz", "a", 0);
    a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    let s = a.on_lease(Ok(Some((lease("b", 1_000), tok("l")))), 1_000);
    assert_eq!(
      s,
      AcquireStep::Cas {
        record: OwnRecord::owned("a", 4),
        token: tok("v3")
      }
    );
    // A missing lease is a dead owner.
    let (mut a, _) = Acquire::new("Counter:xyz", "a", 0);
    a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert!(matches!(a.on_lease(Ok(None), 0), AcquireStep::Cas { .. }));
  }

  #[test]
  fn rejected_rereads_and_ambiguous_reconciles() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    assert_eq!(a.on_write(WriteAnswer::Rejected), AcquireStep::ReadOwn);
    // Someone else won epoch 3 and is alive.
    let s = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ReadLease { node: "b".into() });

    // Ambiguous, and the record is exactly what we wrote: ours.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    assert_eq!(a.on_write(WriteAnswer::Ambiguous), AcquireStep::ReadOwn);
    let s = a.on_own(Ok(Some((OwnRecord::owned("a", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ListLtx);
    assert!(matches!(
      a.on_ltx(Ok(&[])),
      AcquireStep::Acquired(Acquired { epoch: 3, .. })
    ));

    // Ambiguous, and it did not happen: decide again from what is there.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    a.on_write(WriteAnswer::Ambiguous);
    let s = a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    assert_eq!(
      s,
      AcquireStep::Cas {
        record: OwnRecord::owned("a", 3),
        token: tok("v2")
      }
    );
  }

  #[test]
  fn contention_gives_up() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let mut last = AcquireStep::ReadOwn;
    for i in 0..=MAX_ACQUIRE_ROUNDS as u64 {
      last = a.on_own(Ok(Some((OwnRecord::released(i), tok("v")))), 0);
      if let AcquireStep::Cas { .. } = last {
        assert_eq!(a.on_write(WriteAnswer::Rejected), AcquireStep::ReadOwn);
      }
    }
    assert_eq!(
      last,
      AcquireStep::Failed(AcquireError::Contention {
        rounds: MAX_ACQUIRE_ROUNDS
      })
    );
  }

  #[test]
  fn lost_record_is_refused_with_the_repair() {
    let (mut a, _) = Acquire::new("Counter:abc", "a", 5_000);
    assert_eq!(a.on_own(Ok(None), 5_000), AcquireStep::ListLtx);
    let keys = [LtxKey::l0(6, 1), LtxKey::l0(7, 1), LtxKey::l0(7, 2)];
    match a.on_ltx(Ok(&keys)) {
      AcquireStep::Failed(AcquireError::RecordLost(e)) => {
        assert_eq!(e.newest_epoch, 7);
        assert_eq!(e.retry_at_ms, 15_000);
        assert_eq!(e.repair(), OwnRecord::released(7));
        let msg = e.to_string();
        assert!(
          msg.starts_with(
            "ownership record lost: cells/Counter:abc/own.json is missing, but the bucket holds LTX"
          ),
          "{msg}"
        );
        assert!(msg.contains(r#"{"node": "", "epoch": 7}"#), "{msg}");
        assert!(msg.contains("10 s"), "{msg}");
      }
      s => panic!("{s:?}"),
    }
  }

  #[test]
  fn store_errors_end_the_attempt() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let e = StoreError("timeout".into());
    assert_eq!(
      a.on_own(Err(e.clone()), 0),
      AcquireStep::Failed(AcquireError::Store(e))
    );
  }
}

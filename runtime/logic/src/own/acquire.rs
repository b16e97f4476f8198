//! Acquiring a cell: the sans-IO machine of one activation.

use super::*;
use crate::lease::{Backoff, name_seed};
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
  /// The record about to be written over names another session, whose
  /// node log may hold acknowledged writes not yet in the bucket: pass the
  /// takeover recovery gate for it
  /// ([`crate::ensemble::recovery::Recovery`]), then answer with
  /// [`Acquire::on_recovered`]. The record is written over only after: an
  /// acquirer that died between its write and its recovery would leave the
  /// requirement behind a record naming only itself. A recovery that gives
  /// up fails the activation.
  Recover {
    node: String,
    session: String,
  },
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
  /// Another node the record named before ours (a takeover), if any.
  pub previous: Option<String>,
}

#[derive(Clone, Debug)]
enum AcqState {
  ReadOwn,
  ReadLease {
    next: OwnRecord,
    token: Token,
  },
  CheckLtx,
  /// `based_on`: the version the write is conditioned on (`None`: create).
  Write {
    record: OwnRecord,
    based_on: Option<Token>,
  },
  Reconcile {
    wrote: OwnRecord,
    based_on: Option<Token>,
  },
  /// Recovering the session of the record read, then writing `record`.
  Recover {
    record: OwnRecord,
    based_on: Token,
    session: (String, String),
  },
  Restore {
    epoch: u64,
    token: Token,
  },
  Done,
}

/// One activation of one cell on one node.
///
/// After a store failure or a lost race, the next step is to be performed
/// only after [`backoff_ms`](Self::backoff_ms): a pause that grows and is
/// jittered from a seed the caller injects
/// ([`set_jitter_seed`](Self::set_jitter_seed)).
#[derive(Clone, Debug)]
pub struct Acquire {
  scope: String,
  node: String,
  state: AcqState,
  /// Races lost to other writers.
  rounds: u32,
  /// Store failures in a row.
  failures: u32,
  now_ms: u64,
  backoff: Backoff,
  delay_ms: u64,
  /// The store's words for the next `on_write` (see [`Self::note`]).
  words: Option<String>,
  /// Why the write being reconciled is in doubt.
  doubt: Option<StoreError>,
  /// Another node the record named when it was last read.
  previous: Option<String>,
  /// This process's node-log session, written into the record.
  session: String,
  /// The record last read (`None`: absent).
  prior: Option<OwnRecord>,
  /// Sessions this acquisition sealed already.
  recovered: Vec<(String, String)>,
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
      failures: 0,
      now_ms,
      backoff: Backoff::new(
        RETRY_BASE_MS,
        RETRY_CAP_MS,
        name_seed(&[scope, node]) ^ now_ms,
      ),
      delay_ms: 0,
      words: None,
      doubt: None,
      previous: None,
      session: String::new(),
      prior: None,
      recovered: Vec::new(),
    };
    (a, AcquireStep::ReadOwn)
  }

  /// Names this process's node-log session in the record it writes.
  pub fn set_session(&mut self, session: &str) {
    self.session = session.to_string();
  }

  /// The answer to [`AcquireStep::Recover`]: the session is sealed.
  pub fn on_recovered(&mut self) -> AcquireStep {
    let AcqState::Recover {
      record,
      based_on,
      session,
    } = std::mem::replace(&mut self.state, AcqState::Done)
    else {
      panic!("Acquire::on_recovered out of order");
    };
    self.recovered.push(session);
    self.write(record, Some(based_on))
  }

  /// Writes `next` over the record just read, once the session it names
  /// passed the recovery gate.
  fn take_over(&mut self, next: OwnRecord, token: Token) -> AcquireStep {
    let owed = (self.prior.as_ref())
      .filter(|p| needs_recovery(p, &self.session))
      .map(|p| (p.node.clone(), p.session.clone()))
      .filter(|s| !self.recovered.contains(s));
    match owed {
      Some((node, session)) => {
        self.state = AcqState::Recover {
          record: next,
          based_on: token,
          session: (node.clone(), session.clone()),
        };
        AcquireStep::Recover { node, session }
      }
      None => self.write(next, Some(token)),
    }
  }

  /// Seeds the jitter of the retry pauses (the core draws no random number
  /// itself): give each acquisition a random seed, so that nodes that
  /// failed together do not retry together.
  pub fn set_jitter_seed(&mut self, seed: u64) {
    self.backoff.reseed(seed);
  }

  /// How long to wait before performing the step just returned: 0, or a
  /// pause after a store failure or a lost race, so that an outage is not
  /// met by a burst of requests.
  pub fn backoff_ms(&self) -> u64 {
    self.delay_ms
  }

  /// The store's own words for the answer about to be passed to
  /// [`on_write`](Self::on_write), e.g. an ambiguous write's error: a
  /// give-up message quotes them.
  pub fn note(&mut self, words: &str) {
    self.words = Some(words.to_string());
  }

  pub fn node(&self) -> &str {
    &self.node
  }

  /// The answer to [`AcquireStep::ReadOwn`].
  pub fn on_own(&mut self, read: ReadResult<OwnRecord>, now_ms: u64) -> AcquireStep {
    self.now_ms = now_ms;
    self.delay_ms = 0;
    let state = std::mem::replace(&mut self.state, AcqState::Done);
    let read = match read {
      Ok(r) => r,
      Err(e) => {
        // Nothing learned: read again after a pause, still reconciling if we were.
        self.state = state;
        return self.retry(e, AcquireStep::ReadOwn);
      }
    };
    match state {
      AcqState::Reconcile { wrote, based_on } => match read {
        // Our ambiguous write happened (or an identical one of an earlier
        // incarnation of this node, which is as good: nobody else writes
        // this node's name).
        Some((r, token)) if r == wrote => self.restore(r.epoch, token),
        // It did not happen (or not yet), and nobody else wrote: send it
        // again after a pause. Its condition still guards it.
        cur if cur.as_ref().map(|(_, t)| t) == based_on.as_ref() => {
          let why = self.doubt.take().unwrap_or_else(|| lost_answer(None));
          let step = self.write(wrote, based_on);
          self.retry(why, step)
        }
        other => {
          self.rounds += 1;
          if self.rounds >= MAX_ACQUIRE_ROUNDS {
            return self.contention();
          }
          self.decide(other)
        }
      },
      AcqState::ReadOwn => self.decide(read),
      s => panic!("Acquire::on_own in state {s:?}"),
    }
  }

  /// The answer to [`AcquireStep::ReadLease`]. `read_started_ms` is the
  /// local clock read before the lease GET was sent; see
  /// [`owner_lease_expired`] for why it must not be the arrival time.
  pub fn on_lease(&mut self, read: ReadResult<NodeLease>, read_started_ms: u64) -> AcquireStep {
    self.delay_ms = 0;
    let AcqState::ReadLease { next, token } = std::mem::replace(&mut self.state, AcqState::Done)
    else {
      panic!("Acquire::on_lease out of order");
    };
    let lease = match read {
      Ok(l) => l.map(|(l, _)| l),
      Err(e) => {
        // Start over after a pause: the record may have moved meanwhile.
        self.state = AcqState::ReadOwn;
        return self.retry(e, AcquireStep::ReadOwn);
      }
    };
    // The record we read is still the one the token versions: the CAS fails
    // cleanly if it moved since.
    if owner_lease_expired(lease.as_ref(), read_started_ms) {
      self.take_over(next, token)
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

  /// The answer to [`AcquireStep::ListLtx`], in any order, for a bucket
  /// without paged epochs.
  pub fn on_ltx(&mut self, listing: Result<&[LtxKey], StoreError>) -> AcquireStep {
    self.on_listing(listing.map(|k| (k, &[][..])))
  }

  /// The answer to [`AcquireStep::ListLtx`]: the objects and the markers of
  /// paged epochs ([`restore::paged`]), in any order.
  pub fn on_listing(
    &mut self,
    listing: Result<(&[LtxKey], &[restore::Marker]), StoreError>,
  ) -> AcquireStep {
    self.delay_ms = 0;
    let state = std::mem::replace(&mut self.state, AcqState::Done);
    let (keys, markers) = match listing {
      Ok(k) => k,
      Err(e) => {
        // After our write applied, list again; before it, start over.
        let step = match state {
          AcqState::Restore { .. } => {
            self.state = state;
            AcquireStep::ListLtx
          }
          _ => {
            self.state = AcqState::ReadOwn;
            AcquireStep::ReadOwn
          }
        };
        return self.retry(e, step);
      }
    };
    match state {
      AcqState::CheckLtx => {
        match restore::newest_epoch(keys).max(markers.iter().map(|m| m.epoch).max()) {
          Some(newest_epoch) => self.fail(AcquireError::RecordLost(OwnershipRecordLost {
            scope: self.scope.clone(),
            newest_epoch,
            retry_at_ms: self.now_ms + LOST_RECORD_REFUSAL_MS,
          })),
          None => self.write(OwnRecord::owned(self.node.clone(), 1), None),
        }
      }
      AcqState::Restore { epoch, token } => AcquireStep::Acquired(Acquired {
        epoch,
        token,
        restore: restore::linked_chain(keys, markers),
        previous: self.previous.clone(),
      }),
      s => panic!("Acquire::on_ltx in state {s:?}"),
    }
  }

  /// The answer to [`AcquireStep::Create`] or [`AcquireStep::Cas`].
  pub fn on_write(&mut self, answer: WriteAnswer) -> AcquireStep {
    self.delay_ms = 0;
    let words = self.words.take();
    let AcqState::Write { record, based_on } = std::mem::replace(&mut self.state, AcqState::Done)
    else {
      panic!("Acquire::on_write out of order");
    };
    match answer {
      WriteAnswer::Applied(token) => self.restore(record.epoch, token),
      // Someone else moved the record first: look again (after a pause
      // once races repeat, so that racers spread out).
      WriteAnswer::Rejected => {
        self.rounds += 1;
        if self.rounds >= MAX_ACQUIRE_ROUNDS {
          return self.contention();
        }
        if self.rounds > 1 {
          self.delay_ms = self.backoff.delay_ms(self.rounds - 2);
        }
        self.state = AcqState::ReadOwn;
        AcquireStep::ReadOwn
      }
      // Maybe ours: read to find out, never write again blindly.
      WriteAnswer::Ambiguous => {
        self.doubt = Some(lost_answer(words));
        self.state = AcqState::Reconcile {
          wrote: record,
          based_on,
        };
        AcquireStep::ReadOwn
      }
      // Nothing happened: the same write, after a pause.
      WriteAnswer::Failed(e) => {
        let step = self.write(record, based_on);
        self.retry(e, step)
      }
    }
  }

  fn decide(&mut self, current: Option<(OwnRecord, Token)>) -> AcquireStep {
    let (record, token) = match current {
      Some((r, t)) => (Some(r), Some(t)),
      None => (None, None),
    };
    self.previous = (record.as_ref())
      .map(|r| r.node.clone())
      .filter(|n| !n.is_empty() && *n != self.node);
    self.prior = record.clone();
    match claim(record.as_ref(), &self.node) {
      Claim::Create => {
        // Lost-record check before creating: LTX without a record must not
        // restart empty.
        self.state = AcqState::CheckLtx;
        AcquireStep::ListLtx
      }
      Claim::Raise(next) => self.take_over(next, token.expect("a record has a token")),
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

  /// Create `record`, or CAS it over the record versioned `based_on`.
  fn write(&mut self, record: OwnRecord, based_on: Option<Token>) -> AcquireStep {
    let record = record.in_session(&self.session);
    self.state = AcqState::Write {
      record: record.clone(),
      based_on: based_on.clone(),
    };
    match based_on {
      Some(token) => AcquireStep::Cas { record, token },
      None => AcquireStep::Create { record },
    }
  }

  /// A store failure: `step` again after a pause, or give up (the state
  /// for `step` is already set).
  fn retry(&mut self, e: StoreError, step: AcquireStep) -> AcquireStep {
    self.failures += 1;
    if self.failures >= MAX_STORE_FAILURES {
      return self.fail(AcquireError::Unavailable {
        failures: self.failures,
        last: e,
      });
    }
    self.delay_ms = self.backoff.delay_ms(self.failures - 1);
    step
  }

  fn contention(&mut self) -> AcquireStep {
    self.fail(AcquireError::Contention {
      rounds: self.rounds,
    })
  }

  fn restore(&mut self, epoch: u64, token: Token) -> AcquireStep {
    self.state = AcqState::Restore { epoch, token };
    AcquireStep::ListLtx
  }

  fn fail(&mut self, e: AcquireError) -> AcquireStep {
    self.state = AcqState::Done;
    self.delay_ms = 0;
    AcquireStep::Failed(e)
  }
}

/// Whether taking a cell over `prior` must pass the recovery gate: it names
/// an owner's session other than ours (a released record names none; a
/// cell is released only once its uploads cover every acknowledgement).
pub fn needs_recovery(prior: &OwnRecord, session: &str) -> bool {
  !prior.is_released() && !prior.session.is_empty() && prior.session != session
}

/// Why a write is in doubt: its answer was lost, in the store's words if
/// the caller passed them.
pub(super) fn lost_answer(words: Option<String>) -> StoreError {
  StoreError(match words {
    Some(w) => format!("a conditional write's answer was lost ({w}) and the record is unchanged"),
    None => "a conditional write's answer was lost and the record is unchanged".into(),
  })
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
        restore: None,
        previous: None,
      })
    );
  }

  #[test]
  fn a_record_naming_another_session_is_recovered_before_it_is_written_over() {
    // Another node's session, its lease expired: sealed before the write.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.set_session("a.2");
    let prior = OwnRecord::owned("b", 3).in_session("b.1");
    a.on_own(Ok(Some((prior, tok("v3")))), 0);
    let s = a.on_lease(Ok(Some((lease("b", 10), tok("l")))), 50);
    assert_eq!(
      s,
      AcquireStep::Recover {
        node: "b".into(),
        session: "b.1".into()
      }
    );
    let s = a.on_recovered();
    assert_eq!(
      s,
      AcquireStep::Cas {
        record: OwnRecord::owned("a", 4).in_session("a.2"),
        token: tok("v3")
      }
    );
    // A lost race: the new record is read, and its session sealed in turn;
    // one already sealed is not sealed again.
    assert_eq!(a.on_write(WriteAnswer::Rejected), AcquireStep::ReadOwn);
    let next = OwnRecord::owned("c", 4).in_session("c.9");
    a.on_own(Ok(Some((next, tok("v4")))), 0);
    let s = a.on_lease(Ok(Some((lease("c", 10), tok("l")))), 50);
    assert!(matches!(s, AcquireStep::Recover { session, .. } if session == "c.9"));
    assert!(matches!(a.on_recovered(), AcquireStep::Cas { .. }));
    assert_eq!(
      a.on_write(WriteAnswer::Applied(tok("v5"))),
      AcquireStep::ListLtx
    );
    // This node's previous process: its own predecessor.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.set_session("a.2");
    let s = a.on_own(
      Ok(Some((
        OwnRecord::owned("a", 3).in_session("a.1"),
        tok("v3"),
      ))),
      0,
    );
    assert!(matches!(s, AcquireStep::Recover { session, .. } if session == "a.1"));
    // The same session, a released record, or one without a session: none.
    for prior in [
      OwnRecord::owned("a", 3).in_session("a.2"),
      OwnRecord::released(3),
      OwnRecord::owned("a", 3),
    ] {
      let (mut a, _) = Acquire::new("C:1", "a", 0);
      a.set_session("a.2");
      let s = a.on_own(Ok(Some((prior, tok("v3")))), 0);
      assert!(matches!(s, AcquireStep::Cas { .. }), "{s:?}");
    }
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
    // The won cell names the node it was taken from.
    assert_eq!(
      a.on_write(WriteAnswer::Applied(tok("v4"))),
      AcquireStep::ListLtx
    );
    match a.on_ltx(Ok(&[])) {
      AcquireStep::Acquired(w) => assert_eq!(w.previous.as_deref(), Some("b")),
      s => panic!("{s:?}"),
    }
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

    // Ambiguous, and it did not happen: the same write again, after a pause.
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
    assert!(a.backoff_ms() > 0);

    // Ambiguous, and another writer moved the record: decide again at once.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    a.on_write(WriteAnswer::Ambiguous);
    let s = a.on_own(Ok(Some((OwnRecord::released(3), tok("v3b")))), 0);
    assert_eq!(
      s,
      AcquireStep::Cas {
        record: OwnRecord::owned("a", 4),
        token: tok("v3b")
      }
    );
    assert_eq!(a.backoff_ms(), 0);
  }

  #[test]
  fn contention_gives_up() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.set_jitter_seed(3);
    let mut delays = Vec::new();
    let mut last = AcquireStep::ReadOwn;
    for i in 0..MAX_ACQUIRE_ROUNDS as u64 {
      let s = a.on_own(Ok(Some((OwnRecord::released(i), tok(&format!("v{i}"))))), 0);
      assert!(matches!(s, AcquireStep::Cas { .. }), "{s:?}");
      last = a.on_write(WriteAnswer::Rejected);
      delays.push(a.backoff_ms());
    }
    assert_eq!(
      last,
      AcquireStep::Failed(AcquireError::Contention {
        rounds: MAX_ACQUIRE_ROUNDS
      })
    );
    assert_eq!(
      AcquireError::Contention { rounds: 8 }.to_string(),
      "ownership record kept changing: 8 writes in a row lost the race to another write"
    );
    // The first race is followed at once; repeated ones spread the racers.
    assert_eq!(delays[0], 0);
    assert!(delays[1..7].iter().all(|d| *d >= 25), "{delays:?}");
  }

  /// Issue 10: a store that fails every write (each answer ambiguous, the
  /// record unchanged on re-read) is not a record that keeps changing. The
  /// takeover retries the same write after growing pauses, and gives up
  /// naming the store.
  #[test]
  fn an_unchanged_record_after_ambiguous_writes_is_store_trouble() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let mut step = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert_eq!(step, AcquireStep::ReadLease { node: "b".into() });
    step = a.on_lease(Ok(None), 0);
    let mut delays = Vec::new();
    for _ in 0..MAX_STORE_FAILURES {
      assert_eq!(
        step,
        AcquireStep::Cas {
          record: OwnRecord::owned("a", 4),
          token: tok("v3")
        }
      );
      a.note("staging cells/C:1/own.json: Not a directory (os error 20)");
      assert_eq!(a.on_write(WriteAnswer::Ambiguous), AcquireStep::ReadOwn);
      assert_eq!(a.backoff_ms(), 0, "the reconciling read goes at once");
      step = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
      delays.push(a.backoff_ms());
    }
    let AcquireStep::Failed(e) = step else {
      panic!("{step:?}")
    };
    assert!(
      matches!(e, AcquireError::Unavailable { failures, .. } if failures == MAX_STORE_FAILURES),
      "{e:?}"
    );
    assert_eq!(
      e.to_string(),
      "the bucket failed 8 times in a row while this node took the cell (nobody else wrote the \
       ownership record); last: store error: a conditional write's answer was lost (staging \
       cells/C:1/own.json: Not a directory (os error 20)) and the record is unchanged"
    );
    // Growing, jittered pauses between the tries: 25-50 ms, then 50-100, …
    for (i, d) in delays[..7].iter().enumerate() {
      let step = (RETRY_BASE_MS << i).min(RETRY_CAP_MS);
      assert!(
        (step / 2..=step).contains(d),
        "try {i}: {d} ms in {delays:?}"
      );
    }
  }

  /// A write that provably did not happen is sent again, unchanged, after a
  /// pause; when the store comes back, the cell is taken.
  #[test]
  fn failed_writes_are_sent_again_after_a_pause() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    let cas = AcquireStep::Cas {
      record: OwnRecord::owned("a", 3),
      token: tok("v2"),
    };
    let err = || WriteAnswer::Failed(StoreError("connection refused".into()));
    assert_eq!(a.on_write(err()), cas);
    let d1 = a.backoff_ms();
    assert_eq!(a.on_write(err()), cas);
    let d2 = a.backoff_ms();
    assert!(
      (25..=50).contains(&d1) && (50..=100).contains(&d2),
      "{d1} {d2}"
    );
    assert_eq!(
      a.on_write(WriteAnswer::Applied(tok("v3"))),
      AcquireStep::ListLtx
    );
    assert_eq!(a.backoff_ms(), 0);
    assert!(matches!(
      a.on_ltx(Ok(&[])),
      AcquireStep::Acquired(Acquired { epoch: 3, .. })
    ));

    // A create, too; the last error is named when it gives up.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(None), 0);
    let mut s = a.on_ltx(Ok(&[]));
    for _ in 0..MAX_STORE_FAILURES {
      assert!(matches!(s, AcquireStep::Create { .. }), "{s:?}");
      s = a.on_write(err());
    }
    let AcquireStep::Failed(e) = s else {
      panic!("{s:?}")
    };
    assert!(
      e.to_string()
        .ends_with("last: store error: connection refused"),
      "{e}"
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
  fn store_errors_retry_then_give_up() {
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    let e = StoreError("timeout".into());
    // Reads: the record, the owner's lease, the listing; each after a pause.
    assert_eq!(a.on_own(Err(e.clone()), 0), AcquireStep::ReadOwn);
    assert!(a.backoff_ms() > 0);
    let s = a.on_own(Ok(Some((OwnRecord::owned("b", 3), tok("v3")))), 0);
    assert_eq!(s, AcquireStep::ReadLease { node: "b".into() });
    assert_eq!(a.on_lease(Err(e.clone()), 0), AcquireStep::ReadOwn);
    assert_eq!(a.on_own(Ok(None), 0), AcquireStep::ListLtx);
    assert_eq!(a.on_ltx(Err(e.clone())), AcquireStep::ReadOwn);
    let mut s = AcquireStep::ReadOwn;
    for _ in 3..MAX_STORE_FAILURES {
      assert_eq!(s, AcquireStep::ReadOwn);
      s = a.on_own(Err(e.clone()), 0);
    }
    assert_eq!(
      s,
      AcquireStep::Failed(AcquireError::Unavailable {
        failures: MAX_STORE_FAILURES,
        last: e.clone()
      })
    );

    // A listing that fails after our write applied is listed again.
    let (mut a, _) = Acquire::new("C:1", "a", 0);
    a.on_own(Ok(Some((OwnRecord::released(2), tok("v2")))), 0);
    a.on_write(WriteAnswer::Applied(tok("v3")));
    assert_eq!(a.on_ltx(Err(e)), AcquireStep::ListLtx);
    assert!(matches!(
      a.on_ltx(Ok(&[])),
      AcquireStep::Acquired(Acquired { epoch: 3, .. })
    ));
  }
}

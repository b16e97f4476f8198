//! Releasing a cell: only over a record that still names this node at this
//! epoch, so a late release cannot clear a newer owner's record.

use super::*;
use crate::lease::{Backoff, name_seed};
use crate::{ReadResult, StoreError, Token, WriteAnswer};

/// The next store request of a release, or its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseStep {
  /// PUT `own.json` = `record` with `If-Match: token`; answer with [`Release::on_write`].
  Cas {
    record: OwnRecord,
    token: Token,
  },
  /// GET `own.json`; answer with [`Release::on_own`].
  ReadOwn,
  Done(ReleaseOutcome),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
  /// The record is `{node: "", epoch}`: the next node takes the cell at once.
  Released,
  /// The record no longer names this node at this epoch: nothing to undo,
  /// and nothing was written over the newer record.
  Moved,
  /// A read failed; the record may still name us. Our lease expiring (or
  /// our next activation) frees it.
  Failed(StoreError),
}

/// Releasing one cell: CAS to `{node: "", epoch}` only over our own record.
/// Like [`super::Acquire`], a step that follows a store failure is to be
/// performed after [`backoff_ms`](Self::backoff_ms).
#[derive(Clone, Debug)]
pub struct Release {
  node: String,
  epoch: u64,
  /// The version the last CAS was conditioned on.
  token: Token,
  rounds: u32,
  failures: u32,
  backoff: Backoff,
  delay_ms: u64,
  words: Option<String>,
  doubt: Option<StoreError>,
}

impl Release {
  /// Starts a release of the record `{node, epoch}` we hold at version `token`.
  pub fn new(node: &str, epoch: u64, token: Token) -> (Self, ReleaseStep) {
    let r = Release {
      node: node.to_string(),
      epoch,
      token: token.clone(),
      rounds: 0,
      failures: 0,
      backoff: Backoff::new(
        RETRY_BASE_MS,
        RETRY_CAP_MS,
        name_seed(&[node, &token.0]) ^ epoch,
      ),
      delay_ms: 0,
      words: None,
      doubt: None,
    };
    (
      r,
      ReleaseStep::Cas {
        record: OwnRecord::released(epoch),
        token,
      },
    )
  }

  /// See [`super::Acquire::set_jitter_seed`].
  pub fn set_jitter_seed(&mut self, seed: u64) {
    self.backoff.reseed(seed);
  }

  /// How long to wait before performing the step just returned.
  pub fn backoff_ms(&self) -> u64 {
    self.delay_ms
  }

  /// The store's own words for the answer about to be passed to
  /// [`on_write`](Self::on_write).
  pub fn note(&mut self, words: &str) {
    self.words = Some(words.to_string());
  }

  /// The answer to [`ReleaseStep::Cas`]: a rejection or an ambiguous
  /// answer is settled by reading, since the CAS must not be repeated
  /// blindly; a failed write changed nothing and is sent again.
  pub fn on_write(&mut self, answer: WriteAnswer) -> ReleaseStep {
    self.delay_ms = 0;
    let words = self.words.take();
    match answer {
      WriteAnswer::Applied(_) => ReleaseStep::Done(ReleaseOutcome::Released),
      WriteAnswer::Rejected => ReleaseStep::ReadOwn,
      WriteAnswer::Ambiguous => {
        self.doubt = Some(super::acquire::lost_answer(words));
        ReleaseStep::ReadOwn
      }
      WriteAnswer::Failed(e) => {
        let step = self.cas(self.token.clone());
        self.retry(e, step)
      }
    }
  }

  /// The answer to [`ReleaseStep::ReadOwn`].
  pub fn on_own(&mut self, read: ReadResult<OwnRecord>) -> ReleaseStep {
    self.delay_ms = 0;
    match read {
      Err(e) => self.retry(e, ReleaseStep::ReadOwn),
      Ok(Some((r, token))) if r.names(&self.node, self.epoch) => {
        if token == self.token {
          // Our CAS did not happen, and nobody else wrote: again, after a pause.
          let why = self
            .doubt
            .take()
            .unwrap_or_else(|| super::acquire::lost_answer(None));
          let step = self.cas(token);
          return self.retry(why, step);
        }
        // Still ours at another version (our token was stale): retry with
        // the version just read.
        self.rounds += 1;
        if self.rounds > MAX_ACQUIRE_ROUNDS {
          return ReleaseStep::Done(ReleaseOutcome::Failed(StoreError(format!(
            "ownership record kept changing: {} writes in a row lost the race to another write",
            self.rounds - 1
          ))));
        }
        self.cas(token)
      }
      Ok(Some((r, _))) if r == OwnRecord::released(self.epoch) => {
        ReleaseStep::Done(ReleaseOutcome::Released)
      }
      Ok(_) => ReleaseStep::Done(ReleaseOutcome::Moved),
    }
  }

  fn cas(&mut self, token: Token) -> ReleaseStep {
    self.token = token.clone();
    ReleaseStep::Cas {
      record: OwnRecord::released(self.epoch),
      token,
    }
  }

  /// A store failure: `step` again after a pause, or give up naming it.
  fn retry(&mut self, e: StoreError, step: ReleaseStep) -> ReleaseStep {
    self.failures += 1;
    if self.failures >= MAX_STORE_FAILURES {
      return ReleaseStep::Done(ReleaseOutcome::Failed(StoreError(format!(
        "the bucket failed {} times in a row; last: {}",
        self.failures, e.0
      ))));
    }
    self.delay_ms = self.backoff.delay_ms(self.failures - 1);
    step
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn tok(s: &str) -> Token {
    Token::new(s)
  }

  #[test]
  fn release_only_over_our_own_record() {
    let (mut r, s) = Release::new("a", 5, tok("v5"));
    assert_eq!(
      s,
      ReleaseStep::Cas {
        record: OwnRecord::released(5),
        token: tok("v5")
      }
    );
    assert_eq!(
      r.on_write(WriteAnswer::Applied(tok("v6"))),
      ReleaseStep::Done(ReleaseOutcome::Released)
    );

    let (mut r, _) = Release::new("a", 5, tok("v5"));
    assert_eq!(r.on_write(WriteAnswer::Rejected), ReleaseStep::ReadOwn);
    let s = r.on_own(Ok(Some((OwnRecord::owned("b", 6), tok("v6")))));
    assert_eq!(s, ReleaseStep::Done(ReleaseOutcome::Moved));

    let (mut r, _) = Release::new("a", 5, tok("v5"));
    assert_eq!(r.on_write(WriteAnswer::Ambiguous), ReleaseStep::ReadOwn);
    let s = r.on_own(Ok(Some((OwnRecord::released(5), tok("v6")))));
    assert_eq!(s, ReleaseStep::Done(ReleaseOutcome::Released));

    let (mut r, _) = Release::new("a", 5, tok("stale"));
    r.on_write(WriteAnswer::Rejected);
    let s = r.on_own(Ok(Some((OwnRecord::owned("a", 5), tok("v5b")))));
    assert_eq!(
      s,
      ReleaseStep::Cas {
        record: OwnRecord::released(5),
        token: tok("v5b")
      }
    );
  }

  #[test]
  fn store_failures_retry_after_a_pause_then_give_up() {
    // A failed CAS is sent again, unchanged.
    let (mut r, cas) = Release::new("a", 5, tok("v5"));
    let err = || WriteAnswer::Failed(StoreError("connection refused".into()));
    assert_eq!(r.on_write(err()), cas);
    assert!(r.backoff_ms() > 0);
    assert_eq!(
      r.on_write(WriteAnswer::Applied(tok("v6"))),
      ReleaseStep::Done(ReleaseOutcome::Released)
    );

    // An ambiguous CAS whose record reads back unchanged: store trouble,
    // not a record that kept changing.
    let (mut r, cas) = Release::new("a", 5, tok("v5"));
    let mut s = cas.clone();
    for _ in 0..MAX_STORE_FAILURES {
      assert_eq!(s, cas);
      r.note("timeout");
      assert_eq!(r.on_write(WriteAnswer::Ambiguous), ReleaseStep::ReadOwn);
      s = r.on_own(Ok(Some((OwnRecord::owned("a", 5), tok("v5")))));
    }
    let ReleaseStep::Done(ReleaseOutcome::Failed(e)) = s else {
      panic!("{s:?}")
    };
    assert!(e.0.starts_with("the bucket failed 8 times in a row"), "{e}");
    assert!(e.0.contains("(timeout)"), "{e}");

    // Failed reads, too.
    let (mut r, _) = Release::new("a", 5, tok("v5"));
    r.on_write(WriteAnswer::Rejected);
    let e = StoreError("timeout".into());
    assert_eq!(r.on_own(Err(e.clone())), ReleaseStep::ReadOwn);
    assert!(r.backoff_ms() > 0);
    let s = r.on_own(Ok(Some((OwnRecord::released(5), tok("v6")))));
    assert_eq!(s, ReleaseStep::Done(ReleaseOutcome::Released));
  }
}

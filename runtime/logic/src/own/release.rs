//! Releasing a cell: only over a record that still names this node at this
//! epoch, so a late release cannot clear a newer owner's record.

use super::*;
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
#[derive(Clone, Debug)]
pub struct Release {
  node: String,
  epoch: u64,
  rounds: u32,
}

impl Release {
  /// Starts a release of the record `{node, epoch}` we hold at version `token`.
  pub fn new(node: &str, epoch: u64, token: Token) -> (Self, ReleaseStep) {
    let r = Release {
      node: node.to_string(),
      epoch,
      rounds: 0,
    };
    (
      r,
      ReleaseStep::Cas {
        record: OwnRecord::released(epoch),
        token,
      },
    )
  }

  /// The answer to [`ReleaseStep::Cas`]: anything but applied is settled by
  /// reading, since the CAS must not be repeated blindly.
  pub fn on_write(&mut self, answer: WriteAnswer) -> ReleaseStep {
    match answer {
      WriteAnswer::Applied(_) => ReleaseStep::Done(ReleaseOutcome::Released),
      WriteAnswer::Rejected | WriteAnswer::Ambiguous => ReleaseStep::ReadOwn,
    }
  }

  /// The answer to [`ReleaseStep::ReadOwn`].
  pub fn on_own(&mut self, read: ReadResult<OwnRecord>) -> ReleaseStep {
    match read {
      Err(e) => ReleaseStep::Done(ReleaseOutcome::Failed(e)),
      Ok(Some((r, token))) if r.names(&self.node, self.epoch) => {
        // Still ours (our token was stale, or the write was lost): retry
        // with the version just read.
        self.rounds += 1;
        if self.rounds > MAX_ACQUIRE_ROUNDS {
          return ReleaseStep::Done(ReleaseOutcome::Failed(StoreError(
            "ownership record kept changing".into(),
          )));
        }
        ReleaseStep::Cas {
          record: OwnRecord::released(self.epoch),
          token,
        }
      }
      Ok(Some((r, _))) if r == OwnRecord::released(self.epoch) => {
        ReleaseStep::Done(ReleaseOutcome::Released)
      }
      Ok(_) => ReleaseStep::Done(ReleaseOutcome::Moved),
    }
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
}

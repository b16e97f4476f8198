//! The node-log record `log/<node>/<session>.json`: one per process
//! session, created (conditionally) before the session's first fleet proof,
//! and the fence a takeover's recovery writes over it.

/// Where a session's record lives.
pub fn log_record_key(node: &str, session: &str) -> String {
  format!("log/{node}/{session}.json")
}

/// Where recovery reports a range it could not certify.
pub fn loss_record_key(node: &str, session: &str) -> String {
  format!("log/{node}/{session}.loss.json")
}

/// The state of a session's node log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogState {
  /// The session may issue fleet proofs.
  Open,
  /// A recovery fenced the record (compare-and-swap) and is gathering the
  /// tail; the session can no longer change it.
  Recovering { by: String },
  /// Recovery finished (or the record was created sealed, as a fence,
  /// before the session ever wrote it): nothing of the session remains
  /// outside the per-cell prefixes.
  Sealed,
}

/// One ensemble of a session: the followers every fleet proof of this log
/// epoch needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEpoch {
  pub n: u32,
  pub members: Vec<String>,
  /// A bucket proof covers everything acknowledged under this log epoch:
  /// recovery no longer needs any of its members.
  pub drained: bool,
  /// A fleet proof may have been issued under it: the owner records this
  /// before its first one. Until then every acknowledgement of the epoch
  /// was a bucket proof, and recovery needs none of its members (one that
  /// died before storing anything would otherwise hold the cell forever).
  pub active: bool,
}

/// The content of `log/<node>/<session>.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
  pub node: String,
  pub session: String,
  pub state: LogState,
  pub epochs: Vec<LogEpoch>,
}

impl LogRecord {
  pub fn open(node: &str, session: &str) -> Self {
    LogRecord {
      node: node.into(),
      session: session.into(),
      state: LogState::Open,
      epochs: Vec::new(),
    }
  }

  /// The fence a recovery creates when the session never wrote its record:
  /// the session's own conditional create then fails, so it never issues a
  /// fleet proof.
  pub fn sealed(node: &str, session: &str) -> Self {
    LogRecord {
      state: LogState::Sealed,
      ..LogRecord::open(node, session)
    }
  }

  /// The log epochs recovery must gather: active and not yet drained to
  /// the bucket.
  pub fn active(&self) -> impl Iterator<Item = &LogEpoch> {
    self.epochs.iter().filter(|e| e.active && !e.drained)
  }

  /// The log epochs not yet recorded drained.
  pub fn undrained(&self) -> impl Iterator<Item = &LogEpoch> {
    self.epochs.iter().filter(|e| !e.drained)
  }

  /// The record with log epoch `n` active.
  pub fn with_active(&self, n: u32) -> Self {
    let mut r = self.clone();
    for e in r.epochs.iter_mut().filter(|e| e.n == n) {
      e.active = true;
    }
    r
  }

  pub fn latest(&self) -> Option<&LogEpoch> {
    self.epochs.last()
  }

  /// The record with one more log epoch (`members`), numbered after the
  /// last.
  pub fn with_epoch(&self, members: Vec<String>) -> Self {
    let n = self.latest().map_or(1, |e| e.n + 1);
    let mut r = self.clone();
    r.epochs.push(LogEpoch {
      n,
      members,
      drained: false,
      active: false,
    });
    r
  }

  /// The record with the log epochs `drained` marked drained. A drained
  /// epoch other than the latest is dropped: recovery never needs it, and
  /// the latest keeps the numbering.
  pub fn with_drained(&self, drained: &[u32]) -> Self {
    let mut r = self.clone();
    for e in &mut r.epochs {
      e.drained |= drained.contains(&e.n);
    }
    let last = r.latest().map(|e| e.n);
    r.epochs.retain(|e| !e.drained || Some(e.n) == last);
    r
  }
}

/// What a cold activation learns from the prior owner's session record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriorLog {
  /// No record: the session never issued a fleet proof, but it still could;
  /// create the record sealed (conditionally) before trusting that.
  Absent,
  /// Recovery completed: nothing to gather.
  Sealed,
  /// Open or recovering: run recovery before any restore.
  NeedsRecovery,
}

pub fn prior_log(record: Option<&LogRecord>) -> PriorLog {
  match record.map(|r| &r.state) {
    None => PriorLog::Absent,
    Some(LogState::Sealed) => PriorLog::Sealed,
    Some(LogState::Open | LogState::Recovering { .. }) => PriorLog::NeedsRecovery,
  }
}

//! The one error type: every malformed input or misuse becomes a message naming what is wrong.

use std::fmt;

/// An LTX file, key or call that does not follow the format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LtxError {
  msg: String,
}

impl LtxError {
  pub(crate) fn new(msg: impl Into<String>) -> Self {
    Self { msg: msg.into() }
  }

  /// The same error with `ctx: ` in front, naming where it happened.
  pub(crate) fn context(self, ctx: &str) -> Self {
    Self {
      msg: format!("{ctx}: {}", self.msg),
    }
  }

  /// What is wrong, without the "ltx: " prefix that `Display` adds.
  pub fn message(&self) -> &str {
    &self.msg
  }
}

impl fmt::Display for LtxError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "ltx: {}", self.msg)
  }
}

impl std::error::Error for LtxError {}

pub type Result<T, E = LtxError> = std::result::Result<T, E>;

/// `Err(LtxError)` built with `format!` arguments.
macro_rules! bail {
  ($($arg:tt)*) => {
    return Err($crate::error::LtxError::new(format!($($arg)*)))
  };
}
pub(crate) use bail;

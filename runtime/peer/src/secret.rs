//! The fleet secret: 32 random bytes in `fleet/secret.json`, created once by
//! the first node (a conditional create, so two first nodes agree) and read
//! by every other. Whoever can read the bucket is a member of the fleet.

use cellhost_bucket::{Bucket, WriteOutcome};
use subtle::ConstantTimeEq;

pub const SECRET_KEY: &str = "fleet/secret.json";
/// The header a forwarded call carries the secret in (hex).
pub const SECRET_HEADER: &str = "x-cellhost-fleet-secret";

#[derive(Clone)]
pub struct Secret([u8; 32]);

impl std::fmt::Debug for Secret {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str("Secret(..)")
  }
}

impl Secret {
  /// Reads the fleet's secret, creating it if the bucket has none.
  pub async fn load_or_create(bucket: &Bucket) -> Result<Secret, String> {
    for _ in 0..5 {
      match bucket.get(SECRET_KEY).await {
        Ok(Some((bytes, _))) => return Self::parse(&bytes),
        Ok(None) => {}
        Err(e) => return Err(format!("reading {SECRET_KEY}: {e}")),
      }
      let mut fresh = [0u8; 32];
      random(&mut fresh)?;
      let body = serde_json::json!({ "secret": hex(&fresh) }).to_string();
      match bucket.create(SECRET_KEY, body.into_bytes()).await {
        WriteOutcome::Applied(_) => return Ok(Secret(fresh)),
        // Another node created it first, or we cannot tell: read it. A
        // failed write changed nothing: try again.
        WriteOutcome::Rejected | WriteOutcome::Ambiguous(_) | WriteOutcome::Failed(_) => continue,
        WriteOutcome::Unsupported(e) => {
          return Err(format!("creating {SECRET_KEY}: {e}"));
        }
      }
    }
    Err(format!("{SECRET_KEY} could not be created or read"))
  }

  fn parse(bytes: &[u8]) -> Result<Secret, String> {
    let bad = || format!("{SECRET_KEY} is not {{\"secret\": <64 hex digits>}}");
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| bad())?;
    let s = v.get("secret").and_then(|s| s.as_str()).ok_or_else(bad)?;
    let b = unhex(s).filter(|b| b.len() == 32).ok_or_else(bad)?;
    let mut out = [0u8; 32];
    out.copy_from_slice(&b);
    Ok(Secret(out))
  }

  pub fn header_value(&self) -> String {
    hex(&self.0)
  }

  /// Whether `presented` (the header's value) is the secret, compared in
  /// constant time.
  pub fn admits(&self, presented: Option<&[u8]>) -> bool {
    let Some(p) = presented
      .and_then(|p| std::str::from_utf8(p).ok())
      .and_then(unhex)
    else {
      return false;
    };
    p.len() == 32 && bool::from(p.as_slice().ct_eq(&self.0))
  }
}

fn random(buf: &mut [u8]) -> Result<(), String> {
  use std::io::Read;
  std::fs::File::open("/dev/urandom")
    .and_then(|mut f| f.read_exact(buf))
    .map_err(|e| format!("reading /dev/urandom: {e}"))
}

fn hex(b: &[u8]) -> String {
  b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
  if !s.len().is_multiple_of(2) {
    return None;
  }
  (0..s.len())
    .step_by(2)
    .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn only_the_secret_itself_is_admitted() {
    let s = Secret([7u8; 32]);
    let good = s.header_value();
    assert!(s.admits(Some(good.as_bytes())));
    assert!(!s.admits(None));
    assert!(!s.admits(Some(b"")));
    assert!(!s.admits(Some(&good.as_bytes()[..62])));
    let mut wrong = good.clone().into_bytes();
    wrong[63] = if wrong[63] == b'7' { b'8' } else { b'7' };
    assert!(!s.admits(Some(&wrong)));
    assert!(!s.admits(Some(b"zz")));
  }

  #[test]
  fn a_malformed_record_is_refused_by_name() {
    let e = Secret::parse(b"{\"secret\":\"abc\"}").unwrap_err();
    assert!(e.contains("fleet/secret.json"), "{e}");
  }
}

//! The storage test: no store publishes whether it honours conditional writes and ranges,
//! so we ask it. A store that accepts a write it must refuse cannot fence cells; that is a
//! [`ProbeFault`] and a node must not serve on it.

use std::fmt;
use std::time::Duration;

use crate::{Bucket, ByteRange, WriteOutcome};

/// Printed when the four conditional writes behaved.
pub const PROBE_OK_LINE: &str =
  "ok bucket conditional write (create, reject-create, update, reject-stale)";
const RANGE_OK_LINE: &str = "ok bucket ranged read (bounded, open-ended, suffix)";
const READ_ONLY_LINE: &str =
  "ok bucket read (list, get); conditional writes and ranged read not tested (--read-only)";
const ATTEMPTS: u32 = 3;
const RANGE_OBJECT_LEN: usize = 64 * 1024;

/// How the test ended when the store was not shown to be at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
  /// Every step behaved.
  Passed,
  /// `--read-only`: only reads were tried, and they worked.
  ReadOnly,
  /// Every attempt failed without a clear cause (network, auth, outage). A node starts
  /// anyway, with this warning, because an outage can end after startup.
  Inconclusive(String),
}

#[derive(Debug, Clone)]
pub struct ProbeReport {
  pub outcome: ProbeOutcome,
  pub attempts: u32,
  /// Lines for the operator, the success line first.
  pub lines: Vec<String>,
}

/// The store broke the contract: it applied a write it had to refuse, refused one it had to
/// apply, does not implement a required operation, or returned wrong bytes.
#[derive(Debug, Clone)]
pub struct ProbeFault {
  /// `create`, `reject-create`, `update`, `reject-stale`, `read-after-write` or
  /// `ranged-read`.
  pub step: &'static str,
  /// The store, as `Bucket::describe` names it.
  pub store: String,
  pub message: String,
}

impl fmt::Display for ProbeFault {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "the bucket {} is at fault: {}", self.store, self.message)
  }
}

impl std::error::Error for ProbeFault {}

/// Why one attempt stopped.
enum Stop {
  Fault(&'static str, String),
  /// No clear cause: try again with new objects.
  Unclear(String),
}

const NO_FENCE: &str = "cellhost cannot fence cells on it";

/// Runs the storage test on fresh `probe/…` objects: (1) create must apply, (2) a second
/// create must be rejected, (3) an update with the current version must apply, (4) an update
/// with the stale version from step 1 must be rejected; then a 64 KiB object is read back in
/// several ranges, byte for byte. Unclear failures retry the whole test, up to three
/// attempts. With `read_only` it only lists and reads.
pub async fn storage_test(bucket: &Bucket, read_only: bool) -> Result<ProbeReport, ProbeFault> {
  let mut last = String::new();
  for attempt in 1..=ATTEMPTS {
    let res = if read_only {
      read_attempt(bucket).await
    } else {
      write_attempt(bucket).await
    };
    match res {
      Ok(()) => {
        let (outcome, lines) = if read_only {
          (ProbeOutcome::ReadOnly, vec![READ_ONLY_LINE.to_string()])
        } else {
          (
            ProbeOutcome::Passed,
            vec![PROBE_OK_LINE.to_string(), RANGE_OK_LINE.to_string()],
          )
        };
        return Ok(ProbeReport {
          outcome,
          attempts: attempt,
          lines,
        });
      }
      Err(Stop::Fault(step, message)) => {
        return Err(ProbeFault {
          step,
          store: bucket.describe(),
          message,
        });
      }
      Err(Stop::Unclear(m)) => {
        tracing::warn!(
          "storage test attempt {attempt}/{ATTEMPTS} on {}: {m}",
          bucket.describe()
        );
        last = m;
        if attempt < ATTEMPTS {
          tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
        }
      }
    }
  }
  let warning = format!(
    "warning: the storage test of {} did not finish in {ATTEMPTS} attempts; the last error: {last}",
    bucket.describe()
  );
  Ok(ProbeReport {
    outcome: ProbeOutcome::Inconclusive(warning.clone()),
    attempts: ATTEMPTS,
    lines: vec![warning],
  })
}

/// Printed when a listing showed an object just written.
pub const LIST_OK_LINE: &str = "ok bucket list-after-write (needed by --ltx-retention-secs)";

/// The fifth property, which only epoch GC needs: a listing after a
/// successful write includes the written object. Writes, lists and
/// deletes one small `probe/` object. `Ok(false)`: the listing missed it.
pub async fn list_after_write(bucket: &Bucket) -> Result<bool, String> {
  let key = fresh_key("list");
  bucket
    .put(&key, "1")
    .await
    .map_err(|e| format!("write {key}: {e}"))?;
  let listed = bucket.list("probe").await;
  if let Err(e) = bucket.delete(&key).await {
    tracing::warn!("storage test: could not delete {key}: {e}");
  }
  let listed = listed.map_err(|e| format!("list probe/: {e}"))?;
  Ok(listed.iter().any(|o| o.key == key))
}

fn fresh_key(kind: &str) -> String {
  let nanos = std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .unwrap_or_default()
    .as_nanos();
  format!("probe/{kind}-{nanos}-{}", crate::unique_token())
}

async fn read_attempt(bucket: &Bucket) -> Result<(), Stop> {
  bucket
    .list("probe")
    .await
    .map_err(|e| Stop::Unclear(format!("list probe/: {e}")))?;
  match bucket.get(&fresh_key("absent")).await {
    Ok(None) => Ok(()),
    Ok(Some(_)) => Err(Stop::Fault(
      "read",
      "the store returned an object that was never written".into(),
    )),
    Err(e) => Err(Stop::Unclear(format!("get: {e}"))),
  }
}

async fn write_attempt(bucket: &Bucket) -> Result<(), Stop> {
  let key = fresh_key("cas");
  let res = conditional_steps(bucket, &key).await;
  // Best effort: a leftover probe object is small and never read.
  if let Err(e) = bucket.delete(&key).await {
    tracing::warn!("storage test: could not delete {key}: {e}");
  }
  res?;
  ranged_read(bucket).await
}

/// Reads `key` and stops unless it holds `want`.
async fn expect_body(
  bucket: &Bucket,
  key: &str,
  want: &str,
  step: &'static str,
) -> Result<(), Stop> {
  match bucket.get(key).await {
    Ok(Some((body, _))) if body.as_ref() == want.as_bytes() => Ok(()),
    Ok(Some((body, _))) => Err(Stop::Fault(
      step,
      format!(
        "the store returned {:?} where the last accepted write was {want:?} ({step}): it is not \
         read-after-write consistent or it wrote a rejected write; {NO_FENCE}",
        String::from_utf8_lossy(&body)
      ),
    )),
    Ok(None) => Err(Stop::Fault(
      step,
      format!("the store lost an accepted write ({step}): a read found no object; {NO_FENCE}"),
    )),
    Err(e) => Err(Stop::Unclear(format!("read back ({step}): {e}"))),
  }
}

fn unclear_or_fault(step: &'static str, what: &str, out: WriteOutcome) -> Stop {
  match out {
    WriteOutcome::Unsupported(m) => Stop::Fault(
      step,
      format!("the store does not support {what} ({step}): {m}; {NO_FENCE}"),
    ),
    WriteOutcome::Ambiguous(m) | WriteOutcome::Failed(m) => {
      Stop::Unclear(format!("{what} ({step}): {m}"))
    }
    other => Stop::Unclear(format!("{what} ({step}): unexpected {other:?}")),
  }
}

async fn conditional_steps(bucket: &Bucket, key: &str) -> Result<(), Stop> {
  let v1 = match bucket.create(key, "1").await {
    WriteOutcome::Applied(v) => v,
    WriteOutcome::Rejected => {
      return Err(Stop::Fault(
        "create",
        format!(
          "the store rejected a conditional create of an absent object (step 1: create); {NO_FENCE}"
        ),
      ));
    }
    other => return Err(unclear_or_fault("create", "a conditional create", other)),
  };
  expect_body(bucket, key, "1", "read-after-write").await?;

  match bucket.create(key, "2").await {
    WriteOutcome::Rejected => {}
    WriteOutcome::Applied(_) => {
      return Err(Stop::Fault(
        "reject-create",
        format!(
          "the store accepted a conditional create of an existing object (step 2: \
           reject-create): it ignores If-None-Match; {NO_FENCE}"
        ),
      ));
    }
    other => {
      return Err(unclear_or_fault(
        "reject-create",
        "a conditional create",
        other,
      ));
    }
  }
  expect_body(bucket, key, "1", "reject-create").await?;

  match bucket.cas(key, "3", &v1).await {
    WriteOutcome::Applied(_) => {}
    WriteOutcome::Rejected => {
      return Err(Stop::Fault(
        "update",
        format!(
          "the store rejected a conditional update carrying the current version (step 3: \
           update); {NO_FENCE}"
        ),
      ));
    }
    other => return Err(unclear_or_fault("update", "a conditional update", other)),
  }
  expect_body(bucket, key, "3", "update").await?;

  match bucket.cas(key, "4", &v1).await {
    WriteOutcome::Rejected => {}
    WriteOutcome::Applied(_) => {
      return Err(Stop::Fault(
        "reject-stale",
        format!(
          "the store accepted a conditional update carrying a stale version (step 4: \
           reject-stale): it ignores If-Match; {NO_FENCE}"
        ),
      ));
    }
    other => {
      return Err(unclear_or_fault(
        "reject-stale",
        "a conditional update",
        other,
      ));
    }
  }
  expect_body(bucket, key, "3", "reject-stale").await
}

/// Deterministic noise, so a wrong range cannot match by accident.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
  let mut x = seed | 1;
  (0..len)
    .map(|_| {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      (x >> 24) as u8
    })
    .collect()
}

async fn ranged_read(bucket: &Bucket) -> Result<(), Stop> {
  let key = fresh_key("range");
  let seed = std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .unwrap_or_default()
    .as_nanos() as u64;
  let data = pattern(seed, RANGE_OBJECT_LEN);
  if let Err(e) = bucket.put(&key, data.clone()).await {
    return Err(Stop::Unclear(format!("write the range object: {e}")));
  }
  let res = check_ranges(bucket, &key, &data).await;
  if let Err(e) = bucket.delete(&key).await {
    tracing::warn!("storage test: could not delete {key}: {e}");
  }
  res
}

async fn check_ranges(bucket: &Bucket, key: &str, data: &[u8]) -> Result<(), Stop> {
  let len = data.len() as u64;
  let ranges = [
    ByteRange::Bounded(0..1),
    ByteRange::Bounded(1000..5096),
    ByteRange::Bounded(len - 536..len),
    ByteRange::From(len - 4000),
    ByteRange::Suffix(1000),
  ];
  for r in ranges {
    let want = r.resolve(len).map_err(|e| Stop::Unclear(e.to_string()))?;
    let want = &data[want.start as usize..want.end as usize];
    let got = match bucket.get_range(key, r.clone()).await {
      Ok(b) => b,
      Err(e @ crate::Error::RangeIgnored(_)) => {
        return Err(Stop::Fault(
          "ranged-read",
          format!(
            "the store does not honour ranged reads (step 5: ranged read): {e}; cellhost \
             cannot restore cells from it"
          ),
        ));
      }
      Err(e) => return Err(Stop::Unclear(format!("ranged read {r:?}: {e}"))),
    };
    if got.as_ref() != want {
      let first_diff = got.iter().zip(want).position(|(a, b)| a != b);
      return Err(Stop::Fault(
        "ranged-read",
        format!(
          "the store returned wrong bytes for the range {r:?} of a {len}-byte object (step 5: \
           ranged read): {} bytes where {} were expected{}; cellhost cannot restore cells from it",
          got.len(),
          want.len(),
          first_diff
            .map(|i| format!(", first difference at byte {i}"))
            .unwrap_or_default()
        ),
      ));
    }
  }
  Ok(())
}

//! The storage test against good stores and against test doubles that break the contract.

mod common;

use std::sync::Arc;

use cellhost_bucket::{
  BoxFuture, Bucket, BucketOptions, ByteRange, Bytes, ObjectInfo, PROBE_OK_LINE, ProbeOutcome,
  Result, Store, Version, WriteOutcome, storage_test,
};
use common::TempDir;

#[tokio::test]
async fn local_bucket_passes() {
  let dir = TempDir::new("probe-ok");
  let b = Bucket::open(&dir.url(), &BucketOptions::default()).unwrap();
  let report = storage_test(&b, false).await.unwrap();
  assert_eq!(report.outcome, ProbeOutcome::Passed);
  assert_eq!(report.attempts, 1);
  assert_eq!(report.lines[0], PROBE_OK_LINE);
  assert_eq!(
    PROBE_OK_LINE,
    "ok bucket conditional write (create, reject-create, update, reject-stale)"
  );
  // The probe cleans up after itself.
  assert!(b.list("probe").await.unwrap().is_empty());
}

#[tokio::test]
async fn memory_bucket_passes_and_read_only_skips_writes() {
  let b = Bucket::memory();
  assert_eq!(
    storage_test(&b, false).await.unwrap().outcome,
    ProbeOutcome::Passed
  );
  let ro = storage_test(&b, true).await.unwrap();
  assert_eq!(ro.outcome, ProbeOutcome::ReadOnly);
  assert!(
    ro.lines[0].contains("not tested (--read-only)"),
    "{:?}",
    ro.lines
  );
}

/// What a broken store gets wrong.
#[derive(Clone, Copy, PartialEq)]
enum Flaw {
  /// create and cas become plain puts (s3rver, B2, …).
  IgnoreConditions,
  /// only If-Match is ignored.
  IgnoreIfMatch,
  /// ranged reads come back shifted by one byte.
  ShiftRanges,
  /// every conditional write times out.
  Unreachable,
}

struct Broken {
  inner: Bucket,
  flaw: Flaw,
}

impl Store for Broken {
  fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, Version)>>> {
    Box::pin(self.inner.get(key))
  }
  fn get_range<'a>(&'a self, key: &'a str, range: ByteRange) -> BoxFuture<'a, Result<Bytes>> {
    Box::pin(async move {
      if self.flaw != Flaw::ShiftRanges {
        return self.inner.get_range(key, range).await;
      }
      let (all, _) = self.inner.get(key).await?.unwrap();
      let r = range.resolve(all.len() as u64).unwrap();
      let start = (r.start as usize + 1).min(all.len());
      let end = (r.end as usize + 1).min(all.len());
      Ok(all.slice(start..end))
    })
  }
  fn put<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, Result<Version>> {
    Box::pin(self.inner.put(key, data))
  }
  fn create<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, WriteOutcome> {
    Box::pin(async move {
      match self.flaw {
        Flaw::IgnoreConditions => match self.inner.put(key, data).await {
          Ok(v) => WriteOutcome::Applied(v),
          Err(e) => WriteOutcome::Ambiguous(e.to_string()),
        },
        Flaw::Unreachable => WriteOutcome::Ambiguous("connection timed out".into()),
        _ => self.inner.create(key, data).await,
      }
    })
  }
  fn cas<'a>(
    &'a self,
    key: &'a str,
    data: Bytes,
    expected: &'a Version,
  ) -> BoxFuture<'a, WriteOutcome> {
    Box::pin(async move {
      match self.flaw {
        Flaw::IgnoreConditions | Flaw::IgnoreIfMatch => match self.inner.put(key, data).await {
          Ok(v) => WriteOutcome::Applied(v),
          Err(e) => WriteOutcome::Ambiguous(e.to_string()),
        },
        Flaw::Unreachable => WriteOutcome::Ambiguous("connection timed out".into()),
        _ => self.inner.cas(key, data, expected).await,
      }
    })
  }
  fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>> {
    Box::pin(self.inner.delete(key))
  }
  fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<ObjectInfo>>> {
    Box::pin(self.inner.list(prefix))
  }
  fn describe(&self) -> String {
    "broken://double".into()
  }
}

fn broken(flaw: Flaw) -> Bucket {
  Bucket::from_store(Arc::new(Broken {
    inner: Bucket::memory(),
    flaw,
  }))
}

#[tokio::test]
async fn store_ignoring_conditions_is_named_at_step_2() {
  let fault = storage_test(&broken(Flaw::IgnoreConditions), false)
    .await
    .unwrap_err();
  assert_eq!(fault.step, "reject-create");
  let text = fault.to_string();
  assert!(text.contains("broken://double"), "{text}");
  assert!(text.contains("step 2: reject-create"), "{text}");
  assert!(text.contains("ignores If-None-Match"), "{text}");
  assert!(text.contains("cannot fence cells"), "{text}");
}

#[tokio::test]
async fn store_ignoring_if_match_is_named_at_step_4() {
  let fault = storage_test(&broken(Flaw::IgnoreIfMatch), false)
    .await
    .unwrap_err();
  assert_eq!(fault.step, "reject-stale");
  assert!(
    fault.to_string().contains("step 4: reject-stale"),
    "{fault}"
  );
}

#[tokio::test]
async fn store_returning_wrong_ranges_is_named() {
  let fault = storage_test(&broken(Flaw::ShiftRanges), false)
    .await
    .unwrap_err();
  assert_eq!(fault.step, "ranged-read");
  assert!(fault.to_string().contains("wrong bytes"), "{fault}");
}

#[tokio::test]
async fn unclear_failures_retry_three_times_then_warn() {
  let report = storage_test(&broken(Flaw::Unreachable), false)
    .await
    .unwrap();
  assert_eq!(report.attempts, 3);
  match report.outcome {
    ProbeOutcome::Inconclusive(w) => assert!(w.contains("connection timed out"), "{w}"),
    other => panic!("expected Inconclusive, got {other:?}"),
  }
}

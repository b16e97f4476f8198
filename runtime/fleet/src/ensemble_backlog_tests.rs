//! The upload backlog's bound, against a bucket whose LTX uploads hang
//! until the test lets them through and a follower that stores every batch.

use std::sync::Arc;
use std::time::Duration;

use cellhost_bucket::{Bucket, ByteRange, Bytes, ObjectInfo, Store, Version, WriteOutcome};
use cellhost_logic::ensemble::follower::{AppendAnswer, Batch, Tail};
use cellhost_logic::lease::NodeLease;
use tokio::sync::watch;

use super::*;

/// A memory bucket whose PUTs under `cells/` wait until `open` says so.
struct Gated {
  inner: Bucket,
  open: watch::Receiver<bool>,
}

type StoreFuture<'a, T> = cellhost_bucket::BoxFuture<'a, T>;

impl Store for Gated {
  fn get<'a>(
    &'a self,
    key: &'a str,
  ) -> StoreFuture<'a, cellhost_bucket::Result<Option<(Bytes, Version)>>> {
    Box::pin(self.inner.get(key))
  }
  fn get_range<'a>(
    &'a self,
    key: &'a str,
    range: ByteRange,
  ) -> StoreFuture<'a, cellhost_bucket::Result<Bytes>> {
    Box::pin(self.inner.get_range(key, range))
  }
  fn put<'a>(
    &'a self,
    key: &'a str,
    data: Bytes,
  ) -> StoreFuture<'a, cellhost_bucket::Result<Version>> {
    Box::pin(async move {
      if key.starts_with("cells/") {
        let mut open = self.open.clone();
        let _ = open.wait_for(|o| *o).await;
      }
      self.inner.put(key, data).await
    })
  }
  fn create<'a>(&'a self, key: &'a str, data: Bytes) -> StoreFuture<'a, WriteOutcome> {
    Box::pin(self.inner.create(key, data))
  }
  fn cas<'a>(
    &'a self,
    key: &'a str,
    data: Bytes,
    expected: &'a Version,
  ) -> StoreFuture<'a, WriteOutcome> {
    Box::pin(self.inner.cas(key, data, expected))
  }
  fn delete<'a>(&'a self, key: &'a str) -> StoreFuture<'a, cellhost_bucket::Result<()>> {
    Box::pin(self.inner.delete(key))
  }
  fn list<'a>(
    &'a self,
    prefix: &'a str,
  ) -> StoreFuture<'a, cellhost_bucket::Result<Vec<ObjectInfo>>> {
    Box::pin(self.inner.list(prefix))
  }
  fn describe(&self) -> String {
    "gated://memory".into()
  }
}

/// A follower that stores every batch at once.
struct Stores;

impl LogTransport for Stores {
  fn append(
    &self,
    _: &str,
    _: &str,
    _: &str,
    _: &str,
    b: Batch<Entry>,
  ) -> BoxFuture<Result<AppendAnswer, String>> {
    Box::pin(async move { Ok(AppendAnswer::Stored { through: b.seq }) })
  }
  fn seal_tail(
    &self,
    _: &str,
    _: &str,
    _: &str,
    _: &str,
  ) -> BoxFuture<Result<Option<Tail<Entry>>, String>> {
    Box::pin(async { Ok(None) })
  }
  fn prune(
    &self,
    _: &str,
    _: &str,
    _: &str,
    _: &str,
    _: u32,
    _: u64,
  ) -> BoxFuture<Result<(), String>> {
    Box::pin(async { Ok(()) })
  }
}

fn round(txid: u64) -> Vec<Upload> {
  vec![Upload {
    scope: "Counter:aa".into(),
    epoch: 1,
    txid,
    bytes: vec![7; 1 << 20],
  }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_waits_while_the_bucket_is_too_far_behind() {
  let (open, gate) = watch::channel(false);
  let bucket = Bucket::from_store(Arc::new(Gated {
    inner: Bucket::memory(),
    open: gate,
  }));
  let mut ens = Ensemble::new(bucket, "a", "s1", DurabilityMode::Fleet);
  Arc::get_mut(&mut ens).unwrap().backlog_limit = 4 << 20;
  ens.set_transport(Arc::new(Stores));
  ens.set_live(vec![NodeLease {
    node: "b".into(),
    expires_ms: u64::MAX,
    address: "b:1".into(),
    load: 0,
    log: "lb".into(),
  }]);
  // Four rounds of 1 MiB are proven on the follower while none uploads.
  for t in 1..=4 {
    let r = tokio::time::timeout(Duration::from_secs(10), ens.publish(round(t))).await;
    assert_eq!(r.expect("a round with room waited"), Ok(()));
  }
  // The fifth has no room until an upload lands.
  let fifth = tokio::spawn({
    let ens = ens.clone();
    async move { ens.publish(round(5)).await }
  });
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert!(!fifth.is_finished(), "a round went past a full backlog");
  assert_eq!(*ens.backlog.lock().unwrap(), 4 << 20);
  open.send(true).unwrap();
  let r = tokio::time::timeout(Duration::from_secs(10), fifth).await;
  assert_eq!(r.expect("the round never got room").unwrap(), Ok(()));
  // Every upload lands and gives its room back.
  tokio::time::timeout(Duration::from_secs(10), ens.drained("Counter:aa", true))
    .await
    .expect("uploads never landed");
  assert_eq!(*ens.backlog.lock().unwrap(), 0);
}

/// A commit captured here holds its cell until its round is done with it:
/// an activation that did not wait could restore without a write that
/// round still acknowledges (a second instance in a new version of the
/// Worker, or the next instance after a reset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_is_not_taken_again_while_a_commit_of_it_is_on_its_way() {
  let ens = Ensemble::new(Bucket::memory(), "a", "s1", DurabilityMode::Fleet);
  let drained = |held| {
    let ens = ens.clone();
    async move {
      tokio::time::timeout(Duration::from_millis(200), ens.drained("Counter:aa", held))
        .await
        .is_ok()
    }
  };
  assert!(drained(true).await, "nothing captured: nothing to wait for");
  let hold = ens.hold("Counter:aa");
  let other = ens.hold("Counter:bb");
  assert!(!drained(true).await, "taken while a commit is on its way");
  assert!(drained(false).await, "a facet's wipe does not wait for it");
  let waiting = tokio::spawn({
    let ens = ens.clone();
    async move { ens.drained("Counter:aa", true).await }
  });
  tokio::time::sleep(Duration::from_millis(50)).await;
  assert!(!waiting.is_finished());
  drop(hold);
  tokio::time::timeout(Duration::from_secs(5), waiting)
    .await
    .expect("the round was done and the cell still waited")
    .unwrap();
  assert!(!ens.held.lock().unwrap().contains_key("Counter:aa"));
  assert!(ens.held.lock().unwrap().contains_key("Counter:bb"));
  drop(other);
  assert!(ens.held.lock().unwrap().is_empty());
}

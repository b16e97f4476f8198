//! The S3 path against a real S3-API server on loopback (moto). Sequential only: moto's
//! If-Match is check-then-write, not atomic, so races are tested on the directory bucket.
//! moto must be installed (`pip install "moto[server]"`); without it these tests fail.

mod common;

use cellhost_bucket::{
  Bucket, ByteRange, Error, PROBE_OK_LINE, ProbeOutcome, WriteOutcome, storage_test,
};
use common::{MOTO_BUCKET, Moto};

#[tokio::test]
async fn s3_against_moto() {
  let moto = Moto::start();
  let url = format!("s3://{MOTO_BUCKET}");
  let b = Bucket::open(&url, &moto.options()).unwrap();

  // The storage test passes on a store that honours the conditions.
  let report = storage_test(&b, false).await.unwrap();
  assert_eq!(report.outcome, ProbeOutcome::Passed, "{:?}", report.lines);
  assert_eq!(report.lines[0], PROBE_OK_LINE);
  assert!(
    b.list("probe").await.unwrap().is_empty(),
    "probe objects left behind"
  );
  assert_eq!(
    storage_test(&b, true).await.unwrap().outcome,
    ProbeOutcome::ReadOnly
  );

  // The contract, step by step, with a cell-scope key.
  let key = "cells/Room:a.b$c/own.json";
  let v1 = match b.create(key, "1").await {
    WriteOutcome::Applied(v) => v,
    other => panic!("create: {other:?}"),
  };
  assert!(v1.e_tag.is_some(), "S3 must return an etag");
  assert_eq!(b.create(key, "2").await, WriteOutcome::Rejected);
  let v2 = match b.cas(key, "3", &v1).await {
    WriteOutcome::Applied(v) => v,
    other => panic!("cas: {other:?}"),
  };
  assert_eq!(b.cas(key, "4", &v1).await, WriteOutcome::Rejected);
  let (body, v) = b.get(key).await.unwrap().unwrap();
  assert_eq!((body.as_ref(), v.e_tag), (&b"3"[..], v2.e_tag.clone()));
  // If-Match on an absent key: moto answers 404, the adapter a clean rejection.
  assert_eq!(
    b.cas("cells/Room:none/own.json", "x", &v2).await,
    WriteOutcome::Rejected
  );
  assert_eq!(b.get("cells/Room:none/own.json").await.unwrap(), None);

  // Ranges.
  let data: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
  b.put("blob", data.clone()).await.unwrap();
  assert_eq!(
    b.get_range("blob", 100..200).await.unwrap().as_ref(),
    &data[100..200]
  );
  assert_eq!(
    b.get_range("blob", ByteRange::Suffix(24))
      .await
      .unwrap()
      .as_ref(),
    &data[4976..]
  );
  assert_eq!(
    b.get_range("blob", ByteRange::From(4000))
      .await
      .unwrap()
      .as_ref(),
    &data[4000..]
  );
  assert!(matches!(
    b.get_range("nothing", 0..1).await,
    Err(Error::NotFound(_))
  ));
  let past = b.get_range("blob", 5000..5010).await;
  assert!(
    matches!(past, Err(Error::RangeNotSatisfiable(_))),
    "{past:?}"
  );

  // A prefix scopes every key, and listing strips it again.
  let scoped = Bucket::open(&format!("s3://{MOTO_BUCKET}/fleet-a"), &moto.options()).unwrap();
  assert!(matches!(
    scoped.create("nodes/n1.json", "x").await,
    WriteOutcome::Applied(_)
  ));
  assert!(b.get("fleet-a/nodes/n1.json").await.unwrap().is_some());
  let keys = common::listed(&scoped, "").await;
  assert_eq!(keys, ["nodes/n1.json"]);
  let all = common::listed(&b, "").await;
  assert_eq!(all, ["blob", key, "fleet-a/nodes/n1.json"]);
  // A restore's listings: directory names (a delimiter listing) and keys
  // after a key (S3's start-after), under the bucket prefix too.
  for k in [
    "ltx/e1/0000/1",
    "ltx/e1/0000/2",
    "ltx/e1/0000/3",
    "ltx/e2/0009/1",
  ] {
    scoped.put(k, "x").await.unwrap();
  }
  assert_eq!(scoped.list_dirs("ltx").await.unwrap(), ["e1", "e2"]);
  assert_eq!(scoped.list_dirs("ltx/e1").await.unwrap(), ["0000"]);
  assert_eq!(b.list_dirs("").await.unwrap(), ["cells", "fleet-a"]);
  assert_eq!(
    scoped
      .list_keys_after("ltx/e1/0000", "ltx/e1/0000/1")
      .await
      .unwrap(),
    ["ltx/e1/0000/2", "ltx/e1/0000/3"]
  );

  b.delete(key).await.unwrap();
  b.delete(key).await.unwrap();
  assert_eq!(b.get(key).await.unwrap(), None);
}

//! The directory bucket and the shared `Bucket` rules, on one process.

mod common;

use cellhost_bucket::{Bucket, BucketOptions, ByteRange, Error, WriteOutcome};
use common::TempDir;

fn open(dir: &TempDir) -> Bucket {
  Bucket::open(&dir.url(), &BucketOptions::default()).unwrap()
}

fn applied(o: WriteOutcome) -> cellhost_bucket::Version {
  match o {
    WriteOutcome::Applied(v) => v,
    other => panic!("expected Applied, got {other:?}"),
  }
}

/// The same contract on the directory bucket and on the in-memory store.
async fn contract(b: Bucket) {
  let v1 = applied(b.create("cells/A:1/own.json", "one").await);
  assert_eq!(
    b.create("cells/A:1/own.json", "two").await,
    WriteOutcome::Rejected
  );
  let (body, v) = b.get("cells/A:1/own.json").await.unwrap().unwrap();
  assert_eq!((body.as_ref(), &v), (&b"one"[..], &v1));

  let v2 = applied(b.cas("cells/A:1/own.json", "three", &v1).await);
  assert_ne!(v1, v2, "every write must carry a new version");
  assert_eq!(
    b.cas("cells/A:1/own.json", "stale", &v1).await,
    WriteOutcome::Rejected
  );
  assert_eq!(
    b.get("cells/A:1/own.json")
      .await
      .unwrap()
      .unwrap()
      .0
      .as_ref(),
    b"three"
  );
  // CAS on an absent key is a clean rejection and creates nothing.
  assert_eq!(
    b.cas("cells/A:2/own.json", "x", &v2).await,
    WriteOutcome::Rejected
  );
  assert_eq!(b.get("cells/A:2/own.json").await.unwrap(), None);

  // A plain put changes the version, so a CAS holding the old one fails.
  let v3 = b.put("cells/A:1/own.json", "four").await.unwrap();
  assert_ne!(v3, v2);
  assert_eq!(
    b.cas("cells/A:1/own.json", "five", &v2).await,
    WriteOutcome::Rejected
  );
  applied(b.cas("cells/A:1/own.json", "five", &v3).await);

  b.delete("cells/A:1/own.json").await.unwrap();
  b.delete("cells/A:1/own.json").await.unwrap();
  assert_eq!(b.get("cells/A:1/own.json").await.unwrap(), None);
  assert_eq!(
    b.cas("cells/A:1/own.json", "six", &v3).await,
    WriteOutcome::Rejected
  );
  applied(b.create("cells/A:1/own.json", "again").await);
}

#[tokio::test]
async fn local_contract() {
  let dir = TempDir::new("contract");
  contract(open(&dir)).await;
}

#[tokio::test]
async fn memory_contract() {
  contract(Bucket::memory()).await;
}

async fn ranges(b: Bucket) {
  let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
  b.put("blob", data.clone()).await.unwrap();
  let cases: [(ByteRange, std::ops::Range<usize>); 6] = [
    ((0..1).into(), 0..1),
    ((100..200).into(), 100..200),
    ((9_990..20_000).into(), 9_990..10_000),
    (ByteRange::From(9_000), 9_000..10_000),
    (ByteRange::Suffix(24), 9_976..10_000),
    (ByteRange::Suffix(50_000), 0..10_000),
  ];
  for (r, want) in cases {
    let got = b.get_range("blob", r.clone()).await.unwrap();
    assert_eq!(got.as_ref(), &data[want], "{r:?}");
  }
  assert!(matches!(
    b.get_range("blob", 10_000..10_010).await,
    Err(Error::RangeNotSatisfiable(_))
  ));
  assert!(matches!(
    b.get_range("nothing", 0..1).await,
    Err(Error::NotFound(_))
  ));
}

#[tokio::test]
async fn local_ranges() {
  let dir = TempDir::new("ranges");
  ranges(open(&dir)).await;
}

async fn listing(b: Bucket) {
  for k in ["a/2", "a/1", "a/b/c", "ab", "z"] {
    b.put(k, k.as_bytes().to_vec()).await.unwrap();
  }
  let keys = |v: Vec<cellhost_bucket::ObjectInfo>| v.into_iter().map(|o| o.key).collect::<Vec<_>>();
  assert_eq!(
    keys(b.list("").await.unwrap()),
    ["a/1", "a/2", "a/b/c", "ab", "z"]
  );
  // Whole-segment prefixes: "a" does not match "ab".
  assert_eq!(keys(b.list("a").await.unwrap()), ["a/1", "a/2", "a/b/c"]);
  assert_eq!(keys(b.list("a/b/").await.unwrap()), ["a/b/c"]);
  assert!(b.list("nope").await.unwrap().is_empty());
  // Keys only (the local store reads no object for them): the same keys.
  for p in ["", "a", "a/b/", "nope", "z"] {
    assert_eq!(
      b.list_keys(p).await.unwrap(),
      keys(b.list(p).await.unwrap()),
      "{p}"
    );
  }
  // Start-after listings and directory names (what a restore lists).
  assert_eq!(
    b.list_keys_after("a", "a/1").await.unwrap(),
    ["a/2", "a/b/c"]
  );
  assert_eq!(b.list_keys_after("", "ab").await.unwrap(), ["z"]);
  assert_eq!(b.list_dirs("").await.unwrap(), ["a"]);
  assert_eq!(b.list_dirs("a").await.unwrap(), ["b"]);
  assert!(b.list_dirs("z").await.unwrap().is_empty());
  assert!(b.list_dirs("nope").await.unwrap().is_empty());
  let one = &b.list("a/b").await.unwrap()[0];
  assert_eq!(one.size, 5);
  assert_eq!(
    Some(&one.version),
    b.get("a/b/c").await.unwrap().map(|(_, v)| v).as_ref()
  );
}

#[tokio::test]
async fn local_list_sorted_recursive() {
  let dir = TempDir::new("list");
  listing(open(&dir)).await;
}

#[tokio::test]
async fn memory_list_sorted_recursive() {
  listing(Bucket::memory()).await;
}

#[tokio::test]
async fn prefix_scopes_every_key() {
  let dir = TempDir::new("prefix");
  let url = format!("{}/fleet-a", dir.url());
  let root = open(&dir);
  let scoped = root.clone().with_prefix("fleet-a").unwrap();
  applied(scoped.create("nodes/n1.json", "x").await);
  assert!(dir.0.join("fleet-a/nodes/n1.json").is_file());
  assert!(root.get("nodes/n1.json").await.unwrap().is_none());
  assert!(root.get("fleet-a/nodes/n1.json").await.unwrap().is_some());
  let keys = common::listed(&scoped, "").await;
  assert_eq!(keys, ["nodes/n1.json"]);
  assert_eq!(scoped.list_keys("").await.unwrap(), ["nodes/n1.json"]);
  assert_eq!(scoped.list_keys("nodes").await.unwrap(), ["nodes/n1.json"]);
  // A file:// URL with a deeper path is simply a deeper root.
  let deeper = Bucket::open(&url, &BucketOptions::default()).unwrap();
  assert_eq!(
    deeper
      .get("nodes/n1.json")
      .await
      .unwrap()
      .unwrap()
      .0
      .as_ref(),
    b"x"
  );
  // Prefixes on remote-style buckets too.
  let mem = Bucket::memory().with_prefix("p/q/").unwrap();
  applied(mem.create("k", "v").await);
  assert_eq!(mem.list("").await.unwrap()[0].key, "k");
}

#[tokio::test]
async fn keys_are_validated() {
  let dir = TempDir::new("keys");
  let b = open(&dir);
  for bad in [
    "",
    "/abs",
    "a//b",
    "a/",
    "../escape",
    "a/../b",
    "a/./b",
    ".",
    ".cellhost-bucket/x",
    "a\\b",
    "a\nb",
  ] {
    assert!(
      matches!(b.put(bad, "x").await, Err(Error::InvalidKey(_))),
      "{bad:?}"
    );
    assert!(
      !matches!(b.create(bad, "x").await, WriteOutcome::Applied(_)),
      "{bad:?}"
    );
    assert!(
      matches!(b.get(bad).await, Err(Error::InvalidKey(_))),
      "{bad:?}"
    );
  }
  // The cell scope charset is fine, including ':' '$' and a leading '.' in a segment.
  applied(b.create("cells/Room:a.b-c_d$e/own.json", "x").await);
  applied(b.create("x/.hidden", "x").await);
  assert!(b.with_prefix("../up").is_err());
  // Nothing escaped the root.
  assert!(!dir.0.parent().unwrap().join("escape").exists());
}

#[tokio::test]
async fn bad_urls_are_refused() {
  let o = BucketOptions::default();
  for url in ["file://relative/path", "ftp://x", "s3://", "nonsense"] {
    assert!(
      matches!(Bucket::open(url, &o), Err(Error::InvalidUrl(_))),
      "{url}"
    );
  }
}

#[tokio::test]
async fn remote_urls_build_clients() {
  // Building a client touches no network; this checks the URL and option wiring.
  let o = BucketOptions {
    endpoint: Some("http://127.0.0.1:9".into()),
    region: Some("us-east-1".into()),
    config: vec![
      ("aws_access_key_id".into(), "k".into()),
      ("aws_secret_access_key".into(), "s".into()),
    ],
  };
  let b = Bucket::open("s3://bkt/some/prefix", &o).unwrap();
  assert!(b.describe().contains("s3://bkt"), "{}", b.describe());
  assert!(b.describe().contains("some/prefix/"), "{}", b.describe());
  let bad = BucketOptions {
    config: vec![("no_such_key".into(), "x".into())],
    ..o
  };
  assert!(Bucket::open("s3://bkt", &bad).is_err());
}

#[tokio::test]
async fn memory_ranges() {
  ranges(Bucket::memory()).await;
}

/// A staging failure happens before anything is linked or renamed into place, so the write
/// provably did not happen: `Failed` (retry), never `Ambiguous` (issue 10: a blip of the
/// staging directory fenced healthy nodes). Root ignores permissions, so the staging
/// directory is replaced by a regular file instead of made unwritable.
#[tokio::test]
async fn local_staging_failure_is_a_plain_failure() {
  let dir = TempDir::new("staging");
  let b = open(&dir);
  let v1 = applied(b.create("nodes/n1.json", "one").await);
  let tmp = dir.0.join(".cellhost-bucket").join("tmp");
  std::fs::remove_dir_all(&tmp).unwrap();
  std::fs::write(&tmp, "not a directory").unwrap();

  for (what, out) in [
    ("create", b.create("nodes/n2.json", "x").await),
    ("cas", b.cas("nodes/n1.json", "two", &v1).await),
  ] {
    match out {
      WriteOutcome::Failed(m) => assert!(m.contains("staging"), "{what}: {m}"),
      other => panic!("{what} with the staging directory gone: expected Failed, got {other:?}"),
    }
  }
  assert!(b.put("nodes/n3.json", "x").await.is_err());
  // Nothing reached the store.
  assert_eq!(b.get("nodes/n2.json").await.unwrap(), None);
  let (body, v) = b.get("nodes/n1.json").await.unwrap().unwrap();
  assert_eq!((body.as_ref(), &v), (&b"one"[..], &v1));

  // The store comes back: the same conditional writes now apply.
  std::fs::remove_file(&tmp).unwrap();
  std::fs::create_dir(&tmp).unwrap();
  applied(b.create("nodes/n2.json", "x").await);
  applied(b.cas("nodes/n1.json", "two", &v1).await);
}

/// A conditional write whose connection was never made did not reach the store: `Failed`.
#[tokio::test]
async fn remote_refused_connection_is_a_plain_failure() {
  // A port nobody listens on: the connection is refused before a byte is sent.
  let port = std::net::TcpListener::bind("127.0.0.1:0")
    .unwrap()
    .local_addr()
    .unwrap()
    .port();
  let o = BucketOptions {
    endpoint: Some(format!("http://127.0.0.1:{port}")),
    region: Some("us-east-1".into()),
    config: vec![
      ("aws_access_key_id".into(), "k".into()),
      ("aws_secret_access_key".into(), "s".into()),
    ],
  };
  let b = Bucket::open("s3://bkt", &o).unwrap();
  let v = cellhost_bucket::Version {
    e_tag: Some("\"e\"".into()),
    version: None,
  };
  for (what, out) in [
    ("create", b.create("nodes/n1.json", "x").await),
    ("cas", b.cas("nodes/n1.json", "x", &v).await),
  ] {
    assert!(
      matches!(out, WriteOutcome::Failed(_)),
      "{what} against a closed port: expected Failed, got {out:?}"
    );
  }
}

/// A bucket directory that goes away (here: the link the bucket is opened
/// through points at a regular file, then at nothing, as an unmounted or
/// moved volume would) fails every read. It never reads as empty: a restore
/// that listed an empty history would start a cell from nothing and lose
/// every acknowledged write (the fault lab's outage found this).
#[tokio::test]
async fn local_unreachable_root_fails_reads_and_never_reads_empty() {
  let dir = TempDir::new("unreachable");
  let real = dir.0.join("real");
  std::fs::create_dir(&real).unwrap();
  let link = dir.0.join("link");
  std::os::unix::fs::symlink(&real, &link).unwrap();
  let b = Bucket::open(
    &format!("file://{}", link.display()),
    &BucketOptions::default(),
  )
  .unwrap();
  b.put("cells/a/e1/0001.ltx", "frame").await.unwrap();

  let away = |to: &std::path::Path| {
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(to, &link).unwrap();
  };
  let file = dir.0.join("plain-file");
  std::fs::write(&file, "not a directory").unwrap();
  for to in [file.as_path(), dir.0.join("missing").as_path()] {
    away(to);
    let what = to.display();
    assert!(b.list("cells/a").await.is_err(), "list, link to {what}");
    assert!(b.list("").await.is_err(), "list all, link to {what}");
    assert!(
      b.list_keys("cells/a").await.is_err(),
      "list_keys, link to {what}"
    );
    assert!(
      b.list_keys_after("cells/a", "cells/a/e0").await.is_err(),
      "list_keys_after, link to {what}"
    );
    assert!(
      b.list_dirs("cells/a").await.is_err(),
      "list_dirs, link to {what}"
    );
    assert!(
      b.get("cells/a/e1/0001.ltx").await.is_err(),
      "get, link to {what}"
    );
    assert!(
      b.get("nodes/n1.json").await.is_err(),
      "get of an absent key, link to {what}"
    );
    match b.get_range("cells/a/e1/0001.ltx", 0..1).await {
      Err(Error::NotFound(_)) | Ok(_) => {
        panic!("get_range read as absent or present, link to {what}")
      }
      Err(_) => {}
    }
  }

  // Back: the same reads see the object, and absent keys read as absent.
  away(&real);
  let keys = common::listed(&b, "cells/a").await;
  assert_eq!(keys, ["cells/a/e1/0001.ltx"]);
  assert_eq!(b.list_dirs("cells/a").await.unwrap(), ["e1"]);
  assert_eq!(b.get("nodes/n1.json").await.unwrap(), None);
  assert!(b.list("cells/b").await.unwrap().is_empty());
  assert!(matches!(
    b.get_range("nodes/n1.json", 0..1).await,
    Err(Error::NotFound(_))
  ));
}

//! The fleet proof across real processes: an owner acknowledges writes
//! once its follower fsynced them to its node log, keeps acknowledging
//! while the bucket is cut off from it, and when it dies the node that
//! takes its cell over seals its log session and recovers those writes from
//! the follower's disk before it restores, and the follower then drops its
//! copy of the recovered session; a recovery whose only follower is down
//! waits for it within its budget (`--recovery-retry-ms`,
//! `--recovery-retries`). Also the `/peer/log/tail`
//! formats (`tail_format` absent or 1: `CLT1`, 2: `CLT2`, else 400) behind
//! the fleet secret.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

/// Counter nodes proving writes on their followers.
fn fleet_nodes(tag: &str) -> Bucketed {
  let mut f = Bucketed::new(tag, repo_root().join("examples/counter"));
  f.extra = vec!["--durability".into(), "fleet".into()];
  f
}

/// The directory of the only counter cell in the bucket.
fn cell_dir(bucket: &Path) -> std::path::PathBuf {
  let cells = std::fs::read_dir(bucket.join("cells")).unwrap();
  let mut dirs: Vec<_> = cells
    .flatten()
    .map(|e| e.path())
    .filter(|p| {
      p.file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("Counter:")
    })
    .collect();
  assert_eq!(dirs.len(), 1, "{dirs:?}");
  dirs.pop().unwrap()
}

fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
  let end = Instant::now() + within;
  loop {
    if let Some(v) = f() {
      return v;
    }
    assert!(Instant::now() < end, "{what}");
    std::thread::sleep(Duration::from_millis(50));
  }
}

/// Points `link` at `to`, atomically (a fresh link renamed over it).
fn point(link: &Path, to: &Path) {
  let tmp = link.with_extension("new");
  let _ = std::fs::remove_file(&tmp);
  std::os::unix::fs::symlink(to, &tmp).unwrap();
  std::fs::rename(&tmp, link).unwrap();
}

#[test]
fn fleet_acknowledged_writes_survive_the_owner_and_its_lost_uploads() {
  let f = fleet_nodes("ensemble");
  let bucket = f.dir.join("bucket");
  // Node a reaches the bucket through a link the test can cut.
  let link = f.dir.join("a-link");
  let blocker = f.dir.join("blocker");
  std::fs::write(&blocker, b"not a directory").unwrap();
  point(&link, &bucket);
  let b = f.run("b");
  let via_link = Bucketed {
    dir: f.dir.clone(),
    bucket: format!("file://{}", link.display()),
    worker: f.worker.clone(),
    extra: f.extra.clone(),
    env: vec![],
  };
  let a = via_link.run("a");
  let mut acked = 0;
  for _ in 0..20 {
    acked = incr(&a, "x").unwrap_or_else(|| panic!("{}", a.log()));
  }
  // Its status says it proves writes on b's node log.
  let telemetry = bucket.join("telemetry/nodes/a.json");
  wait_for(
    "a never reported a fleet proof",
    Duration::from_secs(10),
    || {
      bucket_json(&telemetry).filter(|t| {
        t["durability"]
          .as_str()
          .is_some_and(|d| d.starts_with("fleet (b@"))
      })
    },
  );
  let own = bucket_json(&cell_dir(&bucket).join("own.json"));
  let sessions: Vec<_> = std::fs::read_dir(f.data("b").join("nodelog/a"))
    .unwrap()
    .collect();
  assert_eq!(sessions.len(), 1, "b holds one log session of a");

  // The bucket goes away for a: its uploads and renewals fail, but until
  // its lease could lapse it still acknowledges, on b's fsyncs.
  point(&link, &blocker);
  let mut after_cut = 0;
  for _ in 0..200 {
    match incr(&a, "x") {
      Some(v) => {
        acked = v;
        after_cut += 1;
      }
      None => break,
    }
    if after_cut >= 10 {
      break;
    }
  }
  assert!(
    after_cut >= 5,
    "a acknowledged only {after_cut} writes without its bucket:\n{}",
    a.log()
  );
  drop(a); // SIGKILL: those writes are on b's disk only.
  let uploaded = std::fs::read_dir(cell_dir(&bucket).join(format!(
    "ltx/e{}",
    own.as_ref().map_or(1, |o| o["epoch"].as_u64().unwrap())
  )))
  .map_or(0, |d| d.count());
  assert!(
    uploaded < 21 + after_cut,
    "the cut uploads reached the bucket anyway ({uploaded} objects)"
  );

  // b takes x over once a's lease expired: it seals a's log session,
  // uploads what its own node log holds, and only then restores.
  let have = wait_for("b never served x", Duration::from_secs(20), || {
    count(&b, "x")
  });
  assert_eq!(have, acked, "acknowledged writes were lost:\n{}", b.log());
  let session = own.unwrap()["session"].as_str().unwrap().to_string();
  let record = bucket_json(&bucket.join(format!("log/a/{session}.json"))).expect("a's log record");
  assert_eq!(record["state"], "sealed", "{record}");
  assert_eq!(incr(&b, "x"), Some(acked + 1));
  // Its copy of a's recovered session is dropped; the directory stays,
  // sealed, as a tombstone.
  let copy = f.data("b").join("nodelog/a").join(&session);
  wait_for(
    "b kept its copy of a's recovered log session",
    Duration::from_secs(30),
    || copy.join("dropped").exists().then_some(()),
  );
  assert!(copy.join("sealed").exists());
  assert_eq!(std::fs::metadata(copy.join("log")).unwrap().len(), 0);
}

#[test]
fn the_tail_endpoint_speaks_clt1_and_clt2_behind_the_secret() {
  let f = fleet_nodes("tailfmt");
  let bucket = f.dir.join("bucket");
  let b = f.run("b");
  let a = f.run("a");
  // Whichever node owns x, the other one follows it.
  for _ in 0..3 {
    incr(&a, "x").unwrap_or_else(|| panic!("{}", a.log()));
  }
  let own = bucket_json(&cell_dir(&bucket).join("own.json")).unwrap();
  let (owner, session) = (
    own["node"].as_str().unwrap().to_string(),
    own["session"].as_str().unwrap().to_string(),
  );
  let follower = if owner == "a" { "b" } else { "a" };
  let lease = bucket_json(&bucket.join(format!("nodes/{follower}.json"))).unwrap();
  let addr: std::net::SocketAddr = lease["address"].as_str().unwrap().parse().unwrap();
  let secret = bucket_json(&bucket.join("fleet/secret.json")).unwrap()["secret"]
    .as_str()
    .unwrap()
    .to_string();
  let ask = |fmt: Option<serde_json::Value>, with_secret: bool| {
    let mut body = serde_json::json!({ "node": owner, "session": session });
    if let Some(f) = fmt {
      body["tail_format"] = f;
    }
    let headers: Vec<(&str, &str)> = if with_secret {
      vec![("x-cellhost-fleet-secret", secret.as_str())]
    } else {
      vec![]
    };
    request(
      addr,
      "POST",
      "/peer/log/tail",
      &headers,
      body.to_string().as_bytes(),
    )
    .unwrap()
  };
  assert_eq!(ask(None, false).status, 403);
  let r = ask(None, true);
  assert_eq!(
    (r.status, &r.body[..4]),
    (200, &b"CLT1"[..]),
    "{}",
    r.text()
  );
  let r = ask(Some("1".into()), true);
  assert_eq!(&r.body[..4], b"CLT1");
  let r = ask(Some("2".into()), true);
  assert_eq!((r.status, &r.body[..4]), (200, &b"CLT2"[..]));
  let r = ask(Some("3".into()), true);
  assert_eq!(r.status, 400, "{}", r.text());
  drop((a, b));
}

#[test]
fn a_recovery_waits_for_a_follower_within_its_budget() {
  let f = fleet_nodes("budget");
  let b = f.run("b");
  let a = f.run("a");
  let mut acked = 0;
  for _ in 0..10 {
    acked = incr(&a, "x").unwrap_or_else(|| panic!("{}", a.log()));
  }
  let bucket = f.dir.join("bucket");
  let own = bucket_json(&cell_dir(&bucket).join("own.json")).unwrap();
  assert_eq!(own["node"], "a");
  let session = own["session"].as_str().unwrap().to_string();
  let record = wait_for(
    "a never named b in its log record",
    Duration::from_secs(10),
    || bucket_json(&bucket.join(format!("log/a/{session}.json"))),
  );
  assert_eq!(record["state"], "open", "{record}");
  // The owner and its only follower die: a's session can be recovered only
  // from b's disk.
  drop(a);
  drop(b);
  let mut extra = f.extra.clone();
  extra.extend(["--recovery-retry-ms", "200", "--recovery-retries", "5"].map(String::from));
  let short = Bucketed {
    dir: f.dir.clone(),
    bucket: f.bucket.clone(),
    worker: f.worker.clone(),
    extra,
    env: vec![],
  };
  let c = short.run("c");
  // Once a's lease lapsed, c's activation waits on the recovery, which
  // gives up after its five attempts; nothing is served without it.
  let gave_up = "did not complete after 5 attempts";
  wait_for(
    "c's recovery never gave up",
    Duration::from_secs(30),
    || {
      assert_eq!(count(&c, "x"), None, "served without a's log:\n{}", c.log());
      c.log().contains(gave_up).then_some(())
    },
  );
  let record = bucket_json(&bucket.join(format!("log/a/{session}.json"))).unwrap();
  assert_ne!(record["state"], "sealed", "{record}");
  // b comes back with its disk: the next activation recovers from it.
  let b = f.run("b");
  let have = wait_for("c never served x", Duration::from_secs(30), || {
    count(&c, "x")
  });
  assert_eq!(have, acked, "{}\n{}", c.log(), b.log());
  let record = bucket_json(&bucket.join(format!("log/a/{session}.json"))).unwrap();
  assert_eq!(record["state"], "sealed", "{record}");
}

#[test]
fn a_follower_that_never_stored_a_batch_never_holds_a_cell_back() {
  let f = fleet_nodes("inactive");
  let bucket = f.dir.join("bucket");
  let b = f.run("b");
  let a = f.run("a");
  // b freezes with its lease live: a names it as its follower and sends it
  // a first batch that it never stores; a dies before anything is proven.
  let signal = |sig: &str, pid: u32| {
    std::process::Command::new("kill")
      .args([sig, &pid.to_string()])
      .status()
      .unwrap();
  };
  signal("-STOP", b.child.id());
  let addr = a.addr;
  std::thread::spawn(move || request(addr, "POST", "/increment?name=x", &[], b""));
  let record = wait_for("a never named b", Duration::from_secs(10), || {
    let dir = bucket.join("log/a");
    let f = std::fs::read_dir(dir).ok()?.flatten().next()?;
    bucket_json(&f.path()).filter(|r| r["epochs"][0]["members"][0].is_string())
  });
  assert_eq!(record["epochs"][0]["active"], false, "{record}");
  assert_eq!(record["epochs"][0]["drained"], false, "{record}");
  drop(a);
  signal("-KILL", b.child.id());
  drop(b);
  // c takes x once a's lease lapses: the epoch never proved a write, so
  // its recovery needs nothing from b, which is gone for good.
  let c = f.run("c");
  let have = wait_for("c never served x", Duration::from_secs(20), || {
    count(&c, "x")
  });
  assert!(have <= 1, "{}", c.log());
}

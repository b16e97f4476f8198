//! The fault lab's stores and the faults injected into them (see
//! `faultlab.rs`).

use super::*;
pub(crate) fn now_us() -> u64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .unwrap()
    .as_micros() as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoreKind {
  File,
  S3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultKind {
  Kill,
  KillWipe,
  StopCont,
  Term,
  Outage,
  Flaky,
  Partition,
  /// A node cut off from the store keeps acknowledging on its followers'
  /// fsyncs (its uploads fail) until it is SIGKILLed, before its fence:
  /// the writes only its followers hold must survive the takeover.
  PartitionKill,
  /// S3 only: one upload fails for good, later ones land.
  Gap,
  /// SIGTERM each node in turn and start it again at once.
  Rolling,
  /// `cellhost deploy` of a new version: each node switches to it in
  /// process, its objects moving at their idle points.
  Deploy,
}

impl FaultKind {
  pub(crate) const ALL: [FaultKind; 11] = [
    FaultKind::Kill,
    FaultKind::KillWipe,
    FaultKind::StopCont,
    FaultKind::Term,
    FaultKind::Outage,
    FaultKind::Flaky,
    FaultKind::Partition,
    FaultKind::PartitionKill,
    FaultKind::Gap,
    FaultKind::Rolling,
    FaultKind::Deploy,
  ];

  pub(crate) fn name(self) -> &'static str {
    match self {
      FaultKind::Kill => "kill",
      FaultKind::KillWipe => "kill+wipe",
      FaultKind::StopCont => "stop/cont",
      FaultKind::Term => "term",
      FaultKind::Outage => "outage",
      FaultKind::Flaky => "flaky",
      FaultKind::Partition => "partition",
      FaultKind::PartitionKill => "partition+kill",
      FaultKind::Gap => "upload gap",
      FaultKind::Rolling => "rolling restart",
      FaultKind::Deploy => "deploy",
    }
  }

  pub(crate) fn on_node(self) -> bool {
    !matches!(
      self,
      FaultKind::Outage
        | FaultKind::Flaky
        | FaultKind::Gap
        | FaultKind::Rolling
        | FaultKind::Deploy
    )
  }
}

// ---------------------------------------------------------------------------
// The store and its faults.

pub(crate) enum Store {
  File {
    bucket: PathBuf,
    views: PathBuf,
    blocker: PathBuf,
    flapper: Option<(Arc<AtomicBool>, JoinHandle<u64>)>,
    flaps: u64,
  },
  S3 {
    moto: bucket_common::Moto,
    proxies: Vec<Proxy>,
  },
}

/// Where the lab reads the lease records from, bypassing the faults: the
/// bucket itself (the real directory, or moto without a proxy).
#[derive(Clone)]
pub(crate) struct LeaseReader(pub(crate) cellhost_bucket::Bucket);

impl LeaseReader {
  pub(crate) fn expires_ms(&self, rt: &tokio::runtime::Runtime, node: &str) -> Option<u64> {
    let key = format!("nodes/{node}.json");
    let (bytes, _) = rt.block_on(self.0.get(&key)).ok()??;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    json["expires_ms"].as_u64()
  }
}

impl Store {
  pub(crate) fn new(kind: StoreKind, dir: &Path, nodes: usize, rng: &mut Rng) -> Store {
    match kind {
      StoreKind::File => {
        let bucket = dir.join("bucket");
        let views = dir.join("views");
        let blocker = dir.join("unreachable");
        std::fs::create_dir_all(&bucket).unwrap();
        std::fs::create_dir_all(&views).unwrap();
        std::fs::write(&blocker, b"a file where the bucket should be\n").unwrap();
        let s = Store::File {
          bucket,
          views,
          blocker,
          flapper: None,
          flaps: 0,
        };
        for i in 0..nodes {
          s.set_view(i, false);
        }
        s
      }
      StoreKind::S3 => {
        let moto = bucket_common::Moto::start();
        let upstream: SocketAddr = ([127, 0, 0, 1], moto.port).into();
        let serial = Arc::new(Mutex::new(()));
        let proxies = (0..nodes)
          .map(|i| Proxy::start(upstream, serial.clone(), rng.fork(100 + i as u64)))
          .collect();
        Store::S3 { moto, proxies }
      }
    }
  }

  pub(crate) fn lease_reader(&self) -> LeaseReader {
    let bucket = match self {
      Store::File { bucket, .. } => {
        cellhost_bucket::Bucket::open(&format!("file://{}", bucket.display()), &Default::default())
      }
      Store::S3 { moto, .. } => cellhost_bucket::Bucket::open(
        &format!("s3://{}", bucket_common::MOTO_BUCKET),
        &moto.options(),
      ),
    };
    LeaseReader(bucket.unwrap())
  }

  pub(crate) fn node_args(&self, i: usize) -> Vec<String> {
    match self {
      Store::File { views, .. } => vec![
        "--bucket".into(),
        format!("file://{}", views.join(format!("n{}", i + 1)).display()),
      ],
      Store::S3 { proxies, .. } => vec![
        "--bucket".into(),
        format!("s3://{}", bucket_common::MOTO_BUCKET),
        "--endpoint".into(),
        proxies[i].endpoint(),
        "--region".into(),
        "us-east-1".into(),
      ],
    }
  }

  /// The bucket without any node's fault in the way (for `cellhost deploy`).
  pub(crate) fn direct_args(&self) -> Vec<String> {
    match self {
      Store::File { bucket, .. } => vec!["--bucket".into(), format!("file://{}", bucket.display())],
      Store::S3 { moto, .. } => {
        let (url, mut flags, _) = moto.cellhost_args();
        flags.splice(0..0, ["--bucket".to_string(), url]);
        flags
      }
    }
  }

  pub(crate) fn env(&self) -> Vec<(&'static str, &'static str)> {
    match self {
      Store::File { .. } => vec![],
      Store::S3 { .. } => vec![
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
      ],
    }
  }

  /// Points node `i`'s view of a local bucket at the bucket, or at a file.
  pub(crate) fn set_view(&self, i: usize, broken: bool) {
    let Store::File {
      bucket,
      views,
      blocker,
      ..
    } = self
    else {
      return;
    };
    let link = views.join(format!("n{}", i + 1));
    let tmp = views.join(format!(".n{}.new", i + 1));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(if broken { blocker } else { bucket }, &tmp).unwrap();
    std::fs::rename(&tmp, &link).unwrap();
  }

  pub(crate) fn outage(&mut self, on: bool, nodes: usize) {
    match self {
      Store::File { .. } => {
        for i in 0..nodes {
          self.set_view(i, on);
        }
      }
      Store::S3 { proxies, .. } => {
        for p in proxies {
          p.set(if on { Mode::Outage } else { Mode::Pass });
        }
      }
    }
  }

  /// The kinds of fault this store can have: a file system cannot fail one
  /// chosen upload, so no upload gap on `file://`.
  pub(crate) fn kinds(&self) -> Vec<FaultKind> {
    let mut all = FaultKind::ALL.to_vec();
    if matches!(self, Store::File { .. }) {
      all.retain(|k| *k != FaultKind::Gap);
    }
    all
  }

  pub(crate) fn gap(&mut self, on: bool) {
    if let Store::S3 { proxies, .. } = self {
      for p in proxies {
        p.set(if on { Mode::Gap } else { Mode::Pass });
      }
    }
  }

  pub(crate) fn partition(&mut self, i: usize, on: bool) {
    match self {
      Store::File { .. } => self.set_view(i, on),
      Store::S3 { proxies, .. } => proxies[i].set(if on { Mode::Hold } else { Mode::Pass }),
    }
  }

  pub(crate) fn flaky(&mut self, on: bool, rng: &mut Rng) {
    match self {
      Store::File {
        bucket,
        flapper,
        flaps,
        ..
      } => {
        if on {
          let stop = Arc::new(AtomicBool::new(false));
          let (flag, meta, mut r) = (stop.clone(), bucket.join(".cellhost-bucket"), rng.fork(7));
          let handle = std::thread::spawn(move || flap_staging(&meta, &flag, &mut r));
          *flapper = Some((stop, handle));
        } else if let Some((stop, handle)) = flapper.take() {
          stop.store(true, Ordering::SeqCst);
          *flaps += handle.join().unwrap();
        }
      }
      Store::S3 { proxies, .. } => {
        // From mildly flaky to mostly failing: past the client's own
        // retries an upload fails for good while later ones land (the gap
        // the acknowledgement rule must not ack across).
        let fail_permille = [500, 750, 900][rng.below(3) as usize];
        let ltx_only = rng.chance(500);
        let delay_ms = rng.range(0, 60);
        for p in proxies {
          p.set(if on {
            Mode::Flaky {
              fail_permille,
              ambiguous_permille: 50,
              ltx_only,
              delay_ms,
            }
          } else {
            Mode::Pass
          });
        }
      }
    }
  }

  pub(crate) fn summary(&self) -> String {
    match self {
      Store::File { flaps, .. } => {
        format!(
          "store: file:// through per-node links; staging directory swapped away {flaps} times while flaky\n"
        )
      }
      Store::S3 { proxies, .. } => {
        let sum = |f: fn(&proxy::Stats) -> u64| proxies.iter().map(|p| f(p.stats())).sum::<u64>();
        format!(
          "store: moto behind {} fault proxies: {} requests, {} held, {} answered 503 (outage/flaky), {} PUTs applied but answered 500\n",
          proxies.len(),
          sum(|s| s.requests.load(Ordering::Relaxed)),
          sum(|s| s.held.load(Ordering::Relaxed)),
          sum(|s| s.refused.load(Ordering::Relaxed) + s.failed_puts.load(Ordering::Relaxed)),
          sum(|s| s.ambiguous_puts.load(Ordering::Relaxed)),
        )
      }
    }
  }
}

/// Flaky writes on a local bucket: in bursts of 20–120 ms, the staging
/// directory is swapped for a file (every write fails before it changes
/// anything), about a third of the time. Returns the number of bursts.
pub(crate) fn flap_staging(meta: &Path, stop: &AtomicBool, rng: &mut Rng) -> u64 {
  let staging = meta.join("tmp");
  let away = meta.join("tmp.away");
  let mut n = 0;
  while !stop.load(Ordering::SeqCst) {
    if rng.chance(350) && std::fs::rename(&staging, &away).is_ok() {
      let _ = std::fs::write(&staging, b"flaky\n");
      n += 1;
      std::thread::sleep(Duration::from_millis(rng.range(20, 120)));
      let _ = std::fs::remove_file(&staging);
      std::fs::rename(&away, &staging).unwrap();
    }
    std::thread::sleep(Duration::from_millis(rng.range(20, 120)));
  }
  n
}

// ---------------------------------------------------------------------------
// Clients.

//! `cellhost deploy`, `deployments`, `rollback` and `node`: versions of a
//! Worker in a fleet's bucket (runtime/deploy), and a node that serves
//! whatever `deploy/current.json` names, upgrading itself when it changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use cellhost_bucket::Bucket;
use cellhost_deploy::{Class, FileEntry, Manifest};

use crate::config;

#[derive(clap::Args)]
pub struct BucketArgs {
  /// The fleet's bucket (file:///abs/path, s3://NAME[/PREFIX], gs://…, az://…).
  #[arg(long)]
  pub bucket: String,
  /// S3 endpoint for R2, MinIO and other S3 APIs (http:// is allowed).
  #[arg(long)]
  pub endpoint: Option<String>,
  /// S3 region.
  #[arg(long)]
  pub region: Option<String>,
}

impl BucketArgs {
  pub fn open(&self) -> anyhow::Result<Bucket> {
    open_bucket(&self.bucket, &self.endpoint, &self.region)
  }
}

pub fn open_bucket(
  url: &str,
  endpoint: &Option<String>,
  region: &Option<String>,
) -> anyhow::Result<Bucket> {
  let opts = cellhost_bucket::BucketOptions {
    endpoint: endpoint.clone(),
    region: region.clone(),
    config: Vec::new(),
  };
  Ok(Bucket::open(url, &opts)?)
}

#[derive(clap::Args)]
pub struct DeployArgs {
  /// The Worker, as `cellhost run` takes it: a directory with a wrangler
  /// config (wrangler's `dist/` output and its config, or an unbundled
  /// project), or one .js file.
  pub path: PathBuf,
  #[command(flatten)]
  pub bucket: BucketArgs,
  /// A note kept with the version.
  #[arg(long)]
  pub message: Option<String>,
  /// Print one JSON object (version, changes) instead of text and progress.
  #[arg(long)]
  pub json: bool,
}

#[derive(clap::Args)]
pub struct DeploymentsArgs {
  #[command(flatten)]
  pub bucket: BucketArgs,
  #[arg(long)]
  pub json: bool,
}

#[derive(clap::Args)]
pub struct RollbackArgs {
  /// The version to serve again (`cellhost deployments` lists them).
  pub version: String,
  #[command(flatten)]
  pub bucket: BucketArgs,
  #[arg(long)]
  pub json: bool,
}

/// Starts the Worker in one isolate, without a bucket, as a node would:
/// a module that does not parse or load is refused before any upload, so
/// a fleet is never switched to a version its nodes cannot start.
fn loads(mut worker: config::Worker) -> anyhow::Result<()> {
  worker.spec.r2_buckets = crate::r2_buckets(&worker, (&None, &None), None, &[])?;
  let opts = cellhost_host::PoolOptions {
    isolates: 1,
    cpu_limit: Duration::from_secs(30),
    heap_limit_mb: 128,
    max_subrequests: 1000,
  };
  let quiet: cellhost_host::ThreadHook = std::sync::Arc::new(|_, _| Box::pin(async {}));
  cellhost_host::IsolatePool::start(worker.spec, opts, quiet)
    .map(|_| ())
    .map_err(|e| {
      anyhow::anyhow!(
        "the Worker does not load, so no node could serve it; nothing was uploaded: {e:#}"
      )
    })
}

fn rt() -> anyhow::Result<tokio::runtime::Runtime> {
  Ok(
    tokio::runtime::Builder::new_multi_thread()
      .worker_threads(2)
      .enable_all()
      .build()?,
  )
}

/// The manifest of the Worker at `path` and its files.
fn build(
  path: &Path,
  message: Option<String>,
) -> anyhow::Result<(Manifest, Vec<cellhost_deploy::LocalFile>, Vec<String>)> {
  let path = std::fs::canonicalize(path).with_context(|| format!("{}", path.display()))?;
  // Loaded as a node would load it: a config a node would refuse is
  // refused here, before anything is uploaded.
  let scratch = std::env::temp_dir().join(format!("cellhost-deploy-{}", std::process::id()));
  let worker = config::load(&path, &scratch).and_then(|w| {
    crate::bucket_mode_refusals(&w)?;
    let described = (
      w.name.clone(),
      w.spec.main.clone(),
      w.spec.rules.clone(),
      w.spec.durable_objects.clone(),
    );
    loads(w)?;
    Ok(described)
  });
  let _ = std::fs::remove_dir_all(&scratch);
  let (worker_name, main, rules, durable_objects) = worker?;
  let (root, entry) = if path.is_dir() {
    (path.clone(), ".".to_string())
  } else {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    (path.parent().unwrap().to_path_buf(), name)
  };
  if !main.starts_with(&root) {
    anyhow::bail!(
      "{}: main ({}) is outside the Worker's folder, so a node would not have it: deploy the folder that holds it",
      path.display(),
      main.display()
    );
  }
  let (mut files, skipped) = if path.is_dir() {
    cellhost_deploy::collect(&root).map_err(anyhow::Error::msg)?
  } else {
    let file = cellhost_deploy::LocalFile::new(entry.clone(), std::fs::read(&path)?);
    (vec![file], vec![])
  };
  files.sort_by(|a, b| a.path.cmp(&b.path));
  let entries: Vec<FileEntry> = files
    .iter()
    .map(|f| f.entry(rules.kind_of(&f.path).map(|k| k.name().to_string())))
    .collect();
  let described = if path.is_dir() {
    Some(config::describe(&root)?)
  } else {
    None
  };
  let content_hash = cellhost_deploy::content_hash(&entries);
  let created_ms = cellhost_fleet::now_ms();
  let manifest = Manifest {
    id: cellhost_deploy::version_id(created_ms, &content_hash),
    created_ms,
    message,
    content_hash,
    worker: worker_name,
    main: entry,
    compatibility_date: described
      .as_ref()
      .and_then(|d| d.compatibility_date.clone()),
    compatibility_flags: described
      .as_ref()
      .map(|d| d.compatibility_flags.clone())
      .unwrap_or_default(),
    classes: durable_objects
      .iter()
      .map(|n| Class {
        name: n.class_name.clone(),
        sqlite: n.sqlite,
      })
      .collect(),
    migration_tags: described
      .as_ref()
      .map(|d| d.migration_tags.clone())
      .unwrap_or_default(),
    bindings: described
      .map(|d| {
        d.bindings
          .into_iter()
          .map(|(name, kind)| cellhost_deploy::Binding { name, kind })
          .collect()
      })
      .unwrap_or_default(),
    files: entries,
  };
  let notes = skipped
    .iter()
    .map(|p| {
      let name = p.rsplit('/').next().unwrap_or(p);
      let why = cellhost_deploy::SKIPPED
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, w)| w);
      format!("not deployed: {p} ({why})")
    })
    .collect();
  Ok((manifest, files, notes))
}

pub fn deploy(args: DeployArgs) -> anyhow::Result<()> {
  let began = std::time::Instant::now();
  let bucket = args.bucket.open()?;
  let (manifest, files, notes) = build(&args.path, args.message.clone())?;
  let rt = rt()?;
  let current = rt
    .block_on(cellhost_deploy::read_current(&bucket))
    .map_err(anyhow::Error::msg)?;
  let previous = match &current {
    Some((c, _)) => Some(
      rt.block_on(cellhost_deploy::read_manifest(&bucket, &c.version))
        .map_err(anyhow::Error::msg)?,
    ),
    None => None,
  };
  if let Some(prev) = &previous {
    cellhost_deploy::check_migrations(prev, &manifest)
      .map_err(|e| anyhow::anyhow!("refused: {e}; nothing was uploaded"))?;
  }
  let changes = cellhost_deploy::changes(previous.as_ref(), &manifest);
  if !args.json {
    for n in &notes {
      eprintln!("{n}");
    }
  }
  let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
  let bar = if args.json {
    indicatif::ProgressBar::hidden()
  } else {
    let b = indicatif::ProgressBar::new(total);
    b.set_style(
      indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
        .expect("a valid template")
        .progress_chars("=> "),
    );
    b.set_message(format!("uploading {} files", files.len()));
    b
  };
  let progress = {
    let bar = bar.clone();
    move |n: u64| bar.inc(n)
  };
  rt.block_on(cellhost_deploy::upload(
    &bucket, &manifest, &files, &progress,
  ))
  .map_err(anyhow::Error::msg)?;
  bar.finish_and_clear();
  let now = cellhost_fleet::now_ms();
  let switched = rt
    .block_on(cellhost_deploy::switch(
      &bucket,
      &manifest.id,
      current.as_ref().map(|(c, v)| (c, v)),
      now,
    ))
    .map_err(anyhow::Error::msg)?;
  let ms = began.elapsed().as_millis();
  tracing::info!(
    target: "cellhost::events",
    event = "deploy.switched",
    version = manifest.id.as_str(),
    previous = switched.previous.as_deref().unwrap_or(""),
    files = manifest.files.len(),
    bytes = total,
    "deployed {}",
    manifest.id
  );
  if args.json {
    println!(
      "{}",
      serde_json::json!({
        "version": manifest.id,
        "previous": switched.previous,
        "content_hash": manifest.content_hash,
        "files": manifest.files.len(),
        "bytes": total,
        "changes": changes,
        "ms": ms,
      })
    );
  } else {
    for c in &changes {
      println!("  {c}");
    }
    println!(
      "deployed {} ({} files, {} bytes) in {ms} ms; the fleet's nodes switch to it now",
      manifest.id,
      manifest.files.len(),
      total
    );
  }
  Ok(())
}

pub fn deployments(args: DeploymentsArgs) -> anyhow::Result<()> {
  let bucket = args.bucket.open()?;
  let rt = rt()?;
  let current = rt
    .block_on(cellhost_deploy::read_current(&bucket))
    .map_err(anyhow::Error::msg)?;
  let versions = rt
    .block_on(cellhost_deploy::list_versions(&bucket))
    .map_err(anyhow::Error::msg)?;
  let current = current.map(|(c, _)| c.version);
  if args.json {
    let list: Vec<serde_json::Value> = versions
      .iter()
      .map(|m| {
        serde_json::json!({
          "version": m.id, "created_ms": m.created_ms, "message": m.message,
          "content_hash": m.content_hash, "files": m.files.len(),
          "current": Some(&m.id) == current.as_ref(),
        })
      })
      .collect();
    println!("{}", serde_json::Value::Array(list));
    return Ok(());
  }
  if versions.is_empty() {
    println!("no versions in {}", bucket.describe());
  }
  for m in &versions {
    let mark = if Some(&m.id) == current.as_ref() {
      "*"
    } else {
      " "
    };
    println!(
      "{mark} {}  {} files  {}",
      m.id,
      m.files.len(),
      m.message.as_deref().unwrap_or("")
    );
  }
  Ok(())
}

pub fn rollback(args: RollbackArgs) -> anyhow::Result<()> {
  let bucket = args.bucket.open()?;
  let rt = rt()?;
  let target = rt
    .block_on(cellhost_deploy::read_manifest(&bucket, &args.version))
    .map_err(anyhow::Error::msg)?;
  let current = rt
    .block_on(cellhost_deploy::read_current(&bucket))
    .map_err(anyhow::Error::msg)?;
  if let Some((c, _)) = &current {
    if c.version == target.id {
      anyhow::bail!("version {} is already current", target.id);
    }
    let now = rt
      .block_on(cellhost_deploy::read_manifest(&bucket, &c.version))
      .map_err(anyhow::Error::msg)?;
    cellhost_deploy::check_migrations(&now, &target)
      .map_err(|e| anyhow::anyhow!("refused: {e}; nothing was switched"))?;
  }
  let switched = rt
    .block_on(cellhost_deploy::switch(
      &bucket,
      &target.id,
      current.as_ref().map(|(c, v)| (c, v)),
      cellhost_fleet::now_ms(),
    ))
    .map_err(anyhow::Error::msg)?;
  tracing::info!(
    target: "cellhost::events",
    event = "deploy.rollback",
    version = target.id.as_str(),
    previous = switched.previous.as_deref().unwrap_or(""),
    "rolled back to {}",
    target.id
  );
  if args.json {
    println!(
      "{}",
      serde_json::json!({"version": target.id, "previous": switched.previous})
    );
  } else {
    println!(
      "serving {} again (was {}); the fleet's nodes switch to it now",
      target.id,
      switched.previous.as_deref().unwrap_or("nothing")
    );
  }
  Ok(())
}

/// The version a node serves: downloaded into `<data>/deploy/<id>/` from
/// the bucket; returns the path `cellhost run` takes and the version id.
/// Waits for a first deployment, and for a bucket that does not answer.
pub fn fetch_current(bucket: &Bucket, data: &Path) -> anyhow::Result<(PathBuf, String)> {
  let rt = rt()?;
  let mut said = None;
  loop {
    let got = rt.block_on(async {
      match cellhost_deploy::read_current(bucket).await {
        Ok(Some((c, _))) => download(bucket, &c.version, data)
          .await
          .map(|p| Some((p, c.version))),
        Ok(None) => Ok(None),
        Err(e) => Err(anyhow::Error::msg(e)),
      }
    });
    let why = match got {
      Ok(Some(v)) => return Ok(v),
      Ok(None) => "no deployment yet (cellhost deploy): waiting for one".to_string(),
      Err(e) => format!("cannot read the deployment ({e:#}): trying again"),
    };
    if said.as_ref() != Some(&why) {
      eprintln!("{}: {why}", bucket.describe());
      said = Some(why);
    }
    std::thread::sleep(Duration::from_millis(500));
  }
}

/// Watches `current.json` for the version a node should serve next.
pub struct Watcher {
  bucket: Bucket,
  pub serving: String,
  /// A version this node could not start: not tried again.
  rejected: Option<String>,
  poll_ms: u64,
  data: PathBuf,
}

impl Watcher {
  pub fn new(bucket: Bucket, serving: String, poll_ms: u64, data: PathBuf) -> Self {
    Watcher {
      bucket,
      serving,
      rejected: None,
      poll_ms,
      data,
    }
  }

  /// Resolves once `current.json` names another version than the one
  /// served (polled every `poll_ms`; a read that fails is tried again),
  /// downloaded into the data directory: its path and id.
  pub async fn next(&mut self) -> (PathBuf, String) {
    loop {
      tokio::time::sleep(Duration::from_millis(self.poll_ms)).await;
      let Ok(Some((c, _))) = cellhost_deploy::read_current(&self.bucket).await else {
        continue;
      };
      if c.version == self.serving || self.rejected.as_ref() == Some(&c.version) {
        continue;
      }
      match download(&self.bucket, &c.version, &self.data).await {
        Ok(path) => return (path, c.version),
        Err(e) => self.reject(&c.version, &e),
      }
    }
  }

  /// Version `v` cannot start on this node: it is refused by name (an
  /// event, `deploy.rejected`) and the node goes on serving what it serves,
  /// so a bad version does not take the fleet down one node after another.
  pub fn reject(&mut self, v: &str, e: &anyhow::Error) {
    tracing::error!(
      target: "cellhost::events",
      event = "deploy.rejected",
      version = v,
      serving = self.serving.as_str(),
      "version {v} cannot start on this node, so it keeps serving {}: {e:#}",
      self.serving
    );
    self.rejected = Some(v.to_string());
  }
}

/// Downloads version `id` into `data`; the path `run` would take.
async fn download(bucket: &Bucket, id: &str, data: &Path) -> anyhow::Result<PathBuf> {
  let manifest = cellhost_deploy::read_manifest(bucket, id)
    .await
    .map_err(anyhow::Error::msg)?;
  let dir = data.join("deploy").join(&manifest.id);
  cellhost_deploy::download(bucket, &manifest, &dir)
    .await
    .map_err(anyhow::Error::msg)?;
  Ok(if manifest.main == "." {
    dir
  } else {
    dir.join(&manifest.main)
  })
}

//! The `cellhost` command.

mod bindings;
mod config;
mod deploy;
mod flags;
mod keys;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
  name = "cellhost",
  version,
  about = "Run Cloudflare Workers on your own machines"
)]
struct Cli {
  #[command(subcommand)]
  command: Command,
  /// How the log is printed on stderr: `text`, or `json` (one object per
  /// line; the fleet's events carry a stable `event` field).
  #[arg(long, global = true, value_enum, default_value = "text")]
  log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
  Text,
  Json,
}

#[derive(Subcommand)]
enum Command {
  /// Serve a Worker: a .js module entry, or a directory with wrangler.toml / wrangler.jsonc.
  Run(Box<RunArgs>),
  /// Test a bucket: conditional create, reject-create, update, reject-stale, ranged read.
  Diagnose(DiagnoseArgs),
  /// Upload a Worker to a fleet's bucket as a new version and switch the
  /// fleet to it (deploy/current.json).
  Deploy(Box<deploy::DeployArgs>),
  /// List the versions in a fleet's bucket (* marks the current one).
  Deployments(deploy::DeploymentsArgs),
  /// Switch a fleet back to an earlier version.
  Rollback(deploy::RollbackArgs),
  /// One fleet node: serves the bucket's current deployment (no local copy
  /// of the code needed) and upgrades itself when it changes. Takes `run`'s
  /// options (`--bucket` and `--node` required), no Worker path.
  Node(Box<RunArgs>),
  /// D1 databases: `cellhost d1 migrations apply NAME`.
  D1 {
    #[command(subcommand)]
    command: D1Command,
  },
}

#[derive(Subcommand)]
enum D1Command {
  /// Migrations (wrangler's `migrations_dir`, default `migrations/`).
  Migrations {
    #[command(subcommand)]
    command: MigrationsCommand,
  },
}

#[derive(Subcommand)]
enum MigrationsCommand {
  /// Applies, in name order, the `.sql` files of the database's migrations
  /// folder not yet recorded in its migrations table, each in one
  /// transaction, to the database under `--data`.
  Apply(MigrationsArgs),
}

#[derive(clap::Args)]
struct MigrationsArgs {
  /// The database: its binding or database_name in the config.
  database: String,
  /// The Worker's directory (holding its wrangler config).
  #[arg(long, default_value = ".")]
  path: PathBuf,
  /// The data directory `cellhost run` uses.
  #[arg(long, default_value = ".cellhost")]
  data: PathBuf,
}

#[derive(clap::Args)]
struct RunArgs {
  /// The Worker: an entry .js file or a directory holding a wrangler config.
  /// More Workers after it run in the same process, reachable only through
  /// service bindings (as `wrangler dev -c A -c B`); each keeps its data in
  /// `<data>/workers/<name>`.
  #[arg(num_args = 0..)]
  paths: Vec<PathBuf>,
  /// Address to serve on (given twice, the last one counts).
  #[arg(long, default_value = "127.0.0.1:8787", overrides_with = "listen")]
  listen: SocketAddr,
  /// Isolate threads (default: one per core).
  #[arg(long)]
  isolates: Option<usize>,
  /// CPU time one request may use before its isolate is stopped and recycled.
  #[arg(long, default_value_t = 30_000)]
  cpu_ms: u64,
  /// Heap limit of one isolate, in MiB.
  #[arg(long, default_value_t = 128)]
  memory_mb: usize,
  /// Where Durable Objects keep their SQLite files.
  #[arg(long, default_value = ".cellhost")]
  data: PathBuf,
  /// A bucket shared by a fleet (file:///abs/path, s3://NAME[/PREFIX], gs://…, az://…):
  /// cells are owned one node at a time and every acknowledged write is in it.
  #[arg(long, requires = "node")]
  bucket: Option<String>,
  /// This node's name in the fleet (its lease is nodes/NAME.json).
  #[arg(long, requires = "bucket")]
  node: Option<String>,
  /// Where this fleet node takes calls forwarded by other nodes for the
  /// cells it owns (HTTP/2, fleet secret required). Port 0 picks one.
  #[arg(
    long,
    default_value = "127.0.0.1:0",
    requires = "bucket",
    overrides_with = "internal_listen"
  )]
  internal_listen: std::net::SocketAddr,
  /// The address other nodes reach the internal listener at (kept in the
  /// node lease); default: the address it is bound to.
  #[arg(long, requires = "bucket")]
  advertise: Option<String>,
  /// On SIGTERM a fleet node stops taking work and waits this long at most
  /// for the requests in flight before it hands its cells over.
  #[arg(long, default_value_t = 5_000, requires = "bucket")]
  drain_ms: u64,
  /// `cellhost node`: how often deploy/current.json is read for a new
  /// version.
  #[arg(long, default_value_t = 1_000, requires = "bucket")]
  deploy_poll_ms: u64,
  /// S3 endpoint for R2, MinIO and other S3 APIs (http:// is allowed);
  /// also used by `--r2` buckets on s3://.
  #[arg(long)]
  endpoint: Option<String>,
  /// S3 region.
  #[arg(long)]
  region: Option<String>,
  /// Where an R2 binding keeps its objects, as BINDING=URL (file:///abs/path,
  /// s3://NAME[/PREFIX], gs://…, az://…); repeatable. Default: the directory
  /// <data>/r2/<bucket_name>, or in bucket mode the fleet's bucket under
  /// r2/<bucket_name>.
  #[arg(long = "r2", value_name = "BINDING=URL")]
  r2: Vec<String>,
  /// The node lease's lifetime; it is renewed every third of it, and the
  /// node stops acknowledging a fifth of it before it expires.
  #[arg(long, default_value_t = 10_000)]
  lease_ttl_ms: u64,
  /// How often the node holding the waker role reads the wake index, to
  /// wake due alarms of cells whose owner stopped.
  #[arg(long, default_value_t = 30_000, requires = "bucket")]
  wake_poll_ms: u64,
  /// Epoch GC: the owner of a cell deletes the epochs of its LTX history
  /// that no restore reads once their last commit is this old (0: off,
  /// history is kept). Needs a bucket whose listings show an object just
  /// written (checked at start); point-in-time recovery then reaches back
  /// no further than this.
  #[arg(long, default_value_t = 0, requires = "bucket")]
  ltx_retention_secs: u64,
  /// How a fleet node proves a write durable before acknowledging it:
  /// `fleet` (one or two other live nodes fsync it to their node logs; the
  /// bucket upload follows in the background) or `bucket` (upload, then
  /// re-read the ownership record). A node with no other live node uses
  /// the bucket proof either way. `fleet` is the default, as the seeds say.
  #[arg(long, default_value = "fleet", requires = "bucket")]
  durability: cellhost_fleet::DurabilityMode,
  /// The takeover recovery gate: how long a failed recovery of a dead
  /// node's log session waits before it tries again (the waiting requests
  /// keep waiting).
  #[arg(long, default_value_t = cellhost_fleet::RECOVERY_RETRY_MS, requires = "bucket")]
  recovery_retry_ms: u64,
  /// How many recovery attempts the waiting requests sit through before
  /// they fail with a resolve error.
  #[arg(long, default_value_t = cellhost_fleet::RECOVERY_RETRIES, requires = "bucket")]
  recovery_retries: u32,
  /// A cell whose database in the bucket is at least this large (MiB)
  /// opens over the bucket's pages, fetching each on first use and the
  /// rest in the background, instead of downloading it first (0: every
  /// cell with data).
  #[arg(long, default_value_t = cellhost_fleet::PAGED_MIN_MB, requires = "bucket")]
  paged_min_mb: u64,
  /// Where the Worker's outbound connections (fetch, WebSocket clients) may
  /// go: `all` (as `wrangler dev`), `public` (no loopback, private,
  /// link-local or metadata addresses, checked after DNS and on every
  /// redirect) or `none`.
  #[arg(long, default_value = "all")]
  egress: cellhost_host::Egress,
  /// The largest request body accepted, in MiB (Cloudflare's default plan
  /// limit); larger ones get 413.
  #[arg(long, default_value_t = 100)]
  max_body_mb: u64,
  /// Fire the Worker's scheduled() handler on `GET /__scheduled?cron=…`
  /// (and wrangler's `/cdn-cgi/handler/scheduled?cron=…&time=…`), as
  /// `wrangler dev --test-scheduled` does; off by default, since anyone
  /// who reaches the port could fire it.
  #[arg(long)]
  test_scheduled: bool,
  /// Outbound requests (fetch, WebSocket clients, calls to Durable Objects)
  /// one event may make; past it they fail with "Too many subrequests."
  /// (Cloudflare's paid-plan limit; 0: no limit).
  #[arg(long, default_value_t = 1000)]
  max_subrequests: u32,
  /// How many days back a SQLite-backed Durable Object can be restored
  /// (`getBookmarkForTime`, `onNextSessionRestoreBookmark`); Cloudflare
  /// keeps 30. Without a bucket the history is a log beside each database,
  /// pruned past this; 0 keeps none (and those calls fail by name).
  #[arg(long, default_value_t = 30.0)]
  pitr_days: f64,
}

/// The point-in-time recovery window: `--pitr-days`, but no further back
/// than epoch GC keeps history.
fn pitr_days(args: &RunArgs) -> f64 {
  let gc_days = args.ltx_retention_secs as f64 / 86_400.0;
  if args.ltx_retention_secs > 0 && gc_days < args.pitr_days {
    tracing::info!(
      "point-in-time recovery reaches back {gc_days:.3} days (--ltx-retention-secs), not {} (--pitr-days)",
      args.pitr_days
    );
    return gc_days;
  }
  args.pitr_days
}

#[derive(clap::Args)]
struct DiagnoseArgs {
  /// The bucket: file:///abs/path, s3://NAME[/PREFIX], gs://NAME[/PREFIX] or az://NAME[/PREFIX].
  #[arg(long)]
  bucket: String,
  /// S3 endpoint for R2, MinIO and other S3 APIs (http:// is allowed).
  #[arg(long)]
  endpoint: Option<String>,
  /// S3 region.
  #[arg(long)]
  region: Option<String>,
  /// Only read: for a credential that cannot write (the conditional writes are skipped).
  #[arg(long)]
  read_only: bool,
}

fn main() {
  let cli = Cli::parse();
  let log = tracing_subscriber::fmt()
    .with_env_filter(
      tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    )
    .with_writer(std::io::stderr);
  match cli.log_format {
    LogFormat::Text => log.init(),
    LogFormat::Json => log.json().init(),
  }
  let result = match cli.command {
    Command::Run(args) => run(*args, None),
    Command::Deploy(args) => deploy::deploy(*args),
    Command::Deployments(args) => deploy::deployments(args),
    Command::Rollback(args) => deploy::rollback(args),
    Command::Node(args) => node(*args),
    Command::Diagnose(args) => diagnose(args),
    Command::D1 {
      command: D1Command::Migrations {
        command: MigrationsCommand::Apply(args),
      },
    } => d1_migrations_apply(args),
  };
  if let Err(e) = result {
    eprintln!("error: {e:#}");
    std::process::exit(1);
  }
}

fn d1_migrations_apply(args: MigrationsArgs) -> anyhow::Result<()> {
  let m = bindings::d1_migrations(&args.path, &args.database)?;
  let mut files: Vec<PathBuf> = std::fs::read_dir(&m.dir)
    .map_err(|e| anyhow::anyhow!("migrations folder {}: {e}", m.dir.display()))?
    .filter_map(|e| e.ok().map(|e| e.path()))
    .filter(|p| p.extension().is_some_and(|x| x == "sql"))
    .collect();
  files.sort();
  let mut migrations = Vec::new();
  for f in files {
    let name = f.file_name().unwrap().to_string_lossy().into_owned();
    let sql = std::fs::read_to_string(&f).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
    migrations.push((name, sql));
  }
  let applied = cellhost_d1::apply_migrations(&args.data, &m.id, &m.table, &migrations)
    .map_err(anyhow::Error::msg)?;
  if applied.is_empty() {
    println!(
      "No migrations to apply ({} in {}).",
      migrations.len(),
      m.dir.display()
    );
  }
  for name in applied {
    println!("applied {name}");
  }
  Ok(())
}

/// Exit codes: 0 the store passed, 1 the test could not finish (or bad arguments),
/// 2 the store is at fault.
fn diagnose(args: DiagnoseArgs) -> anyhow::Result<()> {
  let opts = cellhost_bucket::BucketOptions {
    endpoint: args.endpoint,
    region: args.region,
    config: Vec::new(),
  };
  let bucket = cellhost_bucket::Bucket::open(&args.bucket, &opts)?;
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()?;
  match rt.block_on(cellhost_bucket::storage_test(&bucket, args.read_only)) {
    Ok(report) => {
      for line in &report.lines {
        println!("{line}");
      }
      if let cellhost_bucket::ProbeOutcome::Inconclusive(_) = report.outcome {
        anyhow::bail!("the storage test of {} did not finish", bucket.describe());
      }
      if !args.read_only {
        // Only epoch GC needs it: a miss is a warning, not a failure.
        match rt.block_on(cellhost_bucket::list_after_write(&bucket)) {
          Ok(true) => println!("{}", cellhost_bucket::LIST_OK_LINE),
          Ok(false) => println!(
            "warning: a listing of {} missed an object just written: do not enable --ltx-retention-secs on it",
            bucket.describe()
          ),
          Err(e) => println!("warning: list-after-write not tested: {e}"),
        }
      }
      Ok(())
    }
    Err(fault) => {
      eprintln!("error: {fault}");
      std::process::exit(2);
    }
  }
}

/// `cellhost node`: the bucket's current version, served as `run --bucket`
/// serves a path, watched for the next one.
fn node(mut args: RunArgs) -> anyhow::Result<()> {
  let (Some(url), Some(_)) = (&args.bucket, &args.node) else {
    anyhow::bail!("cellhost node needs --bucket URL and --node NAME");
  };
  if !args.paths.is_empty() {
    anyhow::bail!(
      "cellhost node serves the bucket's current deployment and takes no Worker path (cellhost deploy PATH --bucket URL uploads one; cellhost run PATH --bucket URL serves a fixed one)"
    );
  }
  let bucket = deploy::open_bucket(url, &args.endpoint, &args.region)?;
  let (path, version) = deploy::fetch_current(&bucket, &args.data)?;
  tracing::info!(target: "cellhost::events", event = "deploy.serving", version = version.as_str(), "serving version {version}");
  args.paths = vec![path];
  run(args, Some((bucket, version)))
}

fn run(args: RunArgs, watch: Option<(cellhost_bucket::Bucket, String)>) -> anyhow::Result<()> {
  if args.paths.is_empty() {
    anyhow::bail!(
      "cellhost run needs the Worker: an entry .js file or a directory with a wrangler config"
    );
  }
  cellhost_host::set_egress(args.egress);
  let mut worker = config::load(&args.paths[0], &args.data)?;
  let mut others = Vec::new();
  for path in &args.paths[1..] {
    let name = config::load(path, &args.data)?.name;
    others.push(config::load(path, &args.data.join("workers").join(&name))?);
  }
  check_services(&worker, &others)?;
  if !others.is_empty() && args.bucket.is_some() {
    anyhow::bail!("several Workers in one process are not supported in bucket mode yet");
  }
  if args.bucket.is_some() {
    bucket_mode_refusals(&worker)?;
  }
  let mut fleet_bucket = None;
  let mut internal_peer = None;
  let fleet = match (&args.bucket, &args.node) {
    (Some(url), Some(node)) => {
      let opts = cellhost_bucket::BucketOptions {
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        config: Vec::new(),
      };
      let bucket = cellhost_bucket::Bucket::open(url, &opts)?;
      fleet_bucket = Some(bucket.clone());
      let cfg = cellhost_fleet::LeaseConfig {
        ttl_ms: args.lease_ttl_ms,
        margin_ms: args.lease_ttl_ms / 5,
      };
      let internal = std::net::TcpListener::bind(args.internal_listen).map_err(|e| {
        anyhow::anyhow!(
          "cannot listen on {} (--internal-listen): {e}",
          args.internal_listen
        )
      })?;
      let bound = internal.local_addr()?;
      let address = args.advertise.clone().unwrap_or_else(|| bound.to_string());
      let fleet = cellhost_fleet::Fleet::start(
        bucket,
        node,
        &address,
        cfg,
        args.wake_poll_ms,
        args.durability,
        // The node log's identity, in the lease: a node restarted without
        // its disk is a new follower, not an empty old one.
        &cellhost_nodelog::log_id(&args.data.join("nodelog")).map_err(|e| {
          anyhow::anyhow!(
            "the node log in {}: {e}",
            args.data.join("nodelog").display()
          )
        })?,
      )
      .map_err(anyhow::Error::msg)?;
      (fleet.set_recovery_budget(args.recovery_retry_ms, args.recovery_retries))
        .map_err(|e| anyhow::anyhow!("--recovery-retry-ms / --recovery-retries: {e}"))?;
      fleet.set_paged_min_mb(args.paged_min_mb);
      if args.ltx_retention_secs > 0 {
        (fleet.collect_epochs(args.ltx_retention_secs.saturating_mul(1000)))
          .map_err(anyhow::Error::msg)?;
      }
      let peer = cellhost_peer::Peer::start(fleet.clone()).map_err(anyhow::Error::msg)?;
      tracing::info!("node {node}: forwarded calls are taken on {address}");
      internal_peer = Some((peer, internal));
      Some(fleet)
    }
    _ => None,
  };
  worker.spec.fleet = fleet.clone();
  worker.spec.forward = internal_peer.as_ref().map(|(p, _)| {
    let f: std::sync::Arc<dyn cellhost_host::Forward> = p.clone();
    f
  });
  if !(args.pitr_days >= 0.0 && args.pitr_days.is_finite()) {
    anyhow::bail!("--pitr-days must be a number of days, 0 or more");
  }
  worker.spec.pitr_days = pitr_days(&args);
  worker.spec.r2_buckets = r2_buckets(
    &worker,
    (&args.endpoint, &args.region),
    fleet_bucket.clone(),
    &args.r2,
  )?;
  worker.spec.generation = watch.as_ref().map(|(_, v)| cellhost_host::Generation {
    version: v.clone(),
    after: None,
  });
  let isolates = args.isolates.unwrap_or_else(|| {
    std::thread::available_parallelism()
      .map(|n| n.get())
      .unwrap_or(1)
  });
  let limits = cellhost_server::Limits {
    max_body_bytes: args.max_body_mb.saturating_mul(1 << 20),
    test_scheduled: args.test_scheduled,
  };
  let gate = fleet.clone().map(|f| {
    let may: cellhost_server::AnswerGate = std::sync::Arc::new(move || f.can_ack());
    may
  });
  let listeners = cellhost_server::Listeners::bind(
    args.listen,
    isolates,
    limits,
    worker.spec.assets.clone(),
    gate,
  )?;
  let opts = cellhost_host::PoolOptions {
    isolates,
    cpu_limit: Duration::from_millis(args.cpu_ms),
    heap_limit_mb: args.memory_mb,
    max_subrequests: args.max_subrequests,
  };
  let name = worker.name.clone();
  let peers = (!others.is_empty()).then(cellhost_host::Peers::default);
  // The other Workers first: the first one's bindings may call them at once.
  for mut other in others {
    other.spec.r2_buckets = r2_buckets(&other, (&args.endpoint, &args.region), None, &[])?;
    other.spec.peers = peers.clone();
    other.spec.pitr_days = pitr_days(&args);
    let quiet: cellhost_host::ThreadHook = std::sync::Arc::new(|_, _| Box::pin(async {}));
    let name = other.name.clone();
    let queues = other.spec.queues.clone();
    let pool = cellhost_host::IsolatePool::start(other.spec, opts.clone(), quiet)?;
    if let Some(p) = &peers {
      p.register(&name, pool.inboxes());
    }
    wire_events(&pool, queues, other.consumers, other.crons);
    tracing::info!("{name} runs beside it, reachable through service bindings");
  }
  worker.spec.peers = peers.clone();
  let queues = worker.spec.queues.clone();
  let next_spec = worker.spec.clone();
  let mut pool = cellhost_host::IsolatePool::start(worker.spec, opts.clone(), listeners.hook())?;
  let peer = match internal_peer {
    Some((peer, internal)) => {
      if let Some((_, v)) = &watch {
        peer.set_version(v);
      }
      peer
        .serve(internal, pool.router(), args.data.clone())
        .map_err(anyhow::Error::msg)?;
      Some(peer)
    }
    None => None,
  };
  if let Some(p) = &peers {
    p.register(&name, pool.inboxes());
  }
  wire_events(&pool, queues, worker.consumers, worker.crons);
  // On a bucket, SIGINT/SIGTERM close the node cleanly: caught from before
  // it says it serves, so a SIGTERM right after that drains it (the
  // default action would kill it).
  let signals = match fleet {
    Some(_) => {
      use tokio::signal::unix::{SignalKind, signal};
      let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
      let _in = rt.enter();
      let (term, interrupt) = (
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
      );
      drop(_in);
      Some((rt, term, interrupt))
    }
    None => None,
  };
  println!(
    "cellhost: serving {name} on http://{} ({isolates} isolates)",
    listeners.addr
  );
  use std::io::Write;
  std::io::stdout().flush()?;
  let (Some(fleet), Some((rt, mut term, mut interrupt))) = (fleet, signals) else {
    loop {
      std::thread::park();
    }
  };
  let poll_ms = args.deploy_poll_ms.max(50);
  let mut watcher = watch
    .map(|(bucket, version)| deploy::Watcher::new(bucket, version, poll_ms, args.data.clone()));
  let upgrading = Upgrading {
    args: &args,
    opts,
    listeners: &listeners,
    peer: peer.as_deref(),
    template: next_spec,
  };
  rt.block_on(async {
    loop {
      let next = async {
        match &mut watcher {
          Some(w) => w.next().await,
          None => std::future::pending().await,
        }
      };
      tokio::select! {
        _ = interrupt.recv() => break,
        _ = term.recv() => break,
        (path, version) = next => {
          let w = watcher.as_mut().expect("a version came from the watcher");
          match upgrading.switch(&pool, &path, &version).await {
            Ok(next) => {
              pool = next;
              w.serving = version;
            }
            Err(e) => w.reject(&version, &e),
          }
        }
      }
    }
  });
  // The drain: no new connections, cells or forwarded calls (refused, so
  // callers retry elsewhere); the requests in flight finish (at most
  // --drain-ms) while the node still owns their cells; then the cells are
  // released and the lease retired.
  let began = std::time::Instant::now();
  fleet.drain();
  listeners.drain();
  let inflight = || listeners.inflight() + peer.as_ref().map_or(0, |p| p.inflight());
  let limit = Duration::from_millis(args.drain_ms);
  while inflight() > 0 && began.elapsed() < limit {
    std::thread::sleep(Duration::from_millis(10));
  }
  let left = inflight();
  if left > 0 {
    tracing::warn!(
      "drain: {left} requests still in flight after {} ms; handing the cells over anyway",
      args.drain_ms
    );
  }
  tracing::info!("drained in {} ms", began.elapsed().as_millis());
  fleet.shutdown();
  std::process::exit(0);
}

/// `cellhost node` moving to a new version in process.
struct Upgrading<'a> {
  args: &'a RunArgs,
  opts: cellhost_host::PoolOptions,
  listeners: &'a std::sync::Arc<cellhost_server::Listeners>,
  peer: Option<&'a cellhost_peer::Peer>,
  /// The first version's spec: what the node adds to every version's
  /// (fleet, forwarding, history, R2 on the bucket).
  template: cellhost_host::WorkerSpec,
}

impl Upgrading<'_> {
  /// Starts version `version` (downloaded at `path`) in new isolates beside
  /// `old`'s and switches to it: new connections, cells and alarms go to
  /// the new isolates at once; `old`'s cells follow each at its next idle
  /// point (hibernatable WebSockets with them), its requests in flight
  /// finish (at most --drain-ms), then its isolates stop. A version that
  /// cannot start here is refused and `old` keeps serving.
  async fn switch(
    &self,
    old: &cellhost_host::IsolatePool,
    path: &std::path::Path,
    version: &str,
  ) -> anyhow::Result<cellhost_host::IsolatePool> {
    let began = std::time::Instant::now();
    let mut worker = config::load(path, &self.args.data)?;
    bucket_mode_refusals(&worker)?;
    let t = &self.template;
    worker.spec.fleet = t.fleet.clone();
    worker.spec.forward = t.forward.clone();
    worker.spec.pitr_days = t.pitr_days;
    let bucket = t.fleet.as_ref().map(|f| f.bucket().clone());
    worker.spec.r2_buckets = r2_buckets(
      &worker,
      (&self.args.endpoint, &self.args.region),
      bucket,
      &self.args.r2,
    )?;
    worker.spec.generation = Some(cellhost_host::Generation {
      version: version.to_string(),
      after: Some(old.clone()),
    });
    let (spec, opts, hook) = (worker.spec, self.opts.clone(), self.listeners.hook());
    let next =
      tokio::task::spawn_blocking(move || cellhost_host::IsolatePool::start(spec, opts, hook))
        .await??;
    old.retire_into(&next).map_err(anyhow::Error::msg)?;
    self.listeners.retire_older();
    if let Some(p) = self.peer {
      p.set_router(next.router());
      p.set_version(version);
    }
    let node = self.args.node.as_deref().unwrap_or("");
    tracing::info!(target: "cellhost::events", event = "deploy.upgrade", node, version, "serving version {version}; the previous version's objects follow at their idle points");
    let gens = next.generations().expect("a deployed version's pool");
    let limit = Duration::from_millis(self.args.drain_ms);
    loop {
      let cells = gens.retiring_cells().unwrap_or(0);
      let requests = self.listeners.older_inflight();
      if cells == 0 && requests == 0 {
        break;
      }
      if began.elapsed() >= limit {
        tracing::warn!(
          "upgrade: {cells} objects and {requests} requests of the previous version still busy after {} ms; stopping it anyway",
          self.args.drain_ms
        );
        break;
      }
      tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Its isolates stop first: what they still queue goes to the new ones.
    old.stop();
    let stopping = std::time::Instant::now();
    while !old.stopped() && stopping.elapsed() < Duration::from_secs(5) {
      tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gens.finish_retire();
    tracing::info!(target: "cellhost::events", event = "deploy.upgraded", node, version, ms = began.elapsed().as_millis() as u64, "version {version} serves every object here");
    Ok(next)
  }
}

/// What bucket mode cannot serve yet, refused by name (at `run --bucket`,
/// `node` and `deploy`).
fn bucket_mode_refusals(worker: &config::Worker) -> anyhow::Result<()> {
  if worker.spec.assets.is_some() {
    anyhow::bail!(
      "`assets` is not supported in bucket mode yet: the directory would be served from this node's disk only (run without --bucket, or serve the files from R2)"
    );
  }
  if !worker.crons.is_empty() {
    anyhow::bail!(
      "`triggers.crons` are not supported in bucket mode yet: every node would fire them (run without --bucket)"
    );
  }
  if worker.spec.queues.is_some() {
    anyhow::bail!(
      "`queues` are not supported in bucket mode yet: their messages would live on this node's disk only (run without --bucket)"
    );
  }
  if !worker.spec.d1_databases.is_empty() {
    anyhow::bail!(
      "`d1_databases` are not supported in bucket mode yet: their data would live on this node's disk only (run without --bucket)"
    );
  }
  if !worker.spec.kv_namespaces.is_empty() {
    anyhow::bail!(
      "`kv_namespaces` are not supported in bucket mode yet: their data would live on this node's disk only (run without --bucket)"
    );
  }
  Ok(())
}

/// Every service binding names this Worker or one loaded beside it, and no
/// two Workers share a name.
fn check_services(first: &config::Worker, others: &[config::Worker]) -> anyhow::Result<()> {
  let all: Vec<&config::Worker> = std::iter::once(first).chain(others).collect();
  for (i, w) in all.iter().enumerate() {
    if all[..i].iter().any(|o| o.name == w.name) {
      anyhow::bail!(
        "two Workers are named {:?}: each Worker of a process needs its own name",
        w.name
      );
    }
  }
  for w in &all {
    for s in &w.spec.services {
      if let Some(target) = &s.worker
        && !all.iter().any(|o| &o.name == target)
      {
        anyhow::bail!(
          "Worker {:?}: service binding {} names Worker {target:?}, which is not running here: give its directory after this one (cellhost run {} <{target}'s directory>)",
          w.name,
          s.binding,
          "<this Worker>"
        );
      }
    }
  }
  Ok(())
}

/// Queue consumers and Cron Triggers of a Worker, fed to its pool.
fn wire_events(
  pool: &cellhost_host::IsolatePool,
  queues: Option<std::sync::Arc<cellhost_queues::QueueStore>>,
  mut consumers: Vec<cellhost_queues::Consumer>,
  crons: cellhost_cron::Crons,
) {
  if let Some(store) = queues {
    for c in consumers.drain(..) {
      let pool = pool.clone();
      let next = std::sync::atomic::AtomicUsize::new(0);
      store.consume(c, move |queue, batch| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = cellhost_host::QueueJob {
          queue: queue.to_string(),
          batch: cellhost_queues::batch_json(queue, batch),
          reply: tx,
        };
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !pool.dispatch(i, cellhost_host::Job::Queue(job)) {
          return None;
        }
        let reply = rx.blocking_recv().ok()?;
        let cellhost_host::ReplyBody::Full(body) = reply.body else {
          return None;
        };
        serde_json::from_slice(&body).ok()
      });
    }
  }
  if !crons.is_empty() {
    // Each firing goes to the next isolate; the outcome is logged.
    let pool = pool.clone();
    let next = std::sync::atomic::AtomicUsize::new(0);
    crons.spawn(move |cron, at| {
      let (tx, rx) = tokio::sync::oneshot::channel();
      let job = cellhost_host::ScheduledJob {
        cron: cron.clone(),
        scheduled_time_ms: at,
        reply: tx,
      };
      let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
      if !pool.dispatch(i, cellhost_host::Job::Scheduled(job)) {
        tracing::error!("cron {cron:?}: the isolate is gone");
        return;
      }
      std::thread::spawn(move || {
        if let Ok(reply) = rx.blocking_recv() {
          tracing::info!(
            "cron {cron:?} at {at}: {}",
            if reply.status == 200 {
              "ok"
            } else {
              "exception"
            }
          );
        }
      });
    });
  }
}

/// Opens each R2 binding's bucket: `--r2 BINDING=URL` (`flags`), else the
/// fleet's bucket under `r2/<bucket_name>`, else the Worker's
/// `<data>/r2/<bucket_name>`.
fn r2_buckets(
  worker: &config::Worker,
  (endpoint, region): (&Option<String>, &Option<String>),
  fleet: Option<cellhost_bucket::Bucket>,
  flags: &[String],
) -> anyhow::Result<Option<std::sync::Arc<cellhost_r2::R2Buckets>>> {
  let mut urls = std::collections::HashMap::new();
  for s in flags {
    let Some((binding, url)) = s.split_once('=') else {
      anyhow::bail!("--r2 {s}: expected BINDING=URL");
    };
    if !worker.r2_buckets.iter().any(|(b, _)| b == binding) {
      anyhow::bail!("--r2 {s}: the Worker has no R2 binding named {binding}");
    }
    urls.insert(binding.to_string(), url.to_string());
  }
  if worker.r2_buckets.is_empty() {
    return Ok(None);
  }
  let opts = cellhost_bucket::BucketOptions {
    endpoint: endpoint.clone(),
    region: region.clone(),
    config: Vec::new(),
  };
  let mut out = cellhost_r2::R2Buckets::default();
  for (binding, name) in &worker.r2_buckets {
    let bucket = match (urls.get(binding), &fleet) {
      (Some(url), _) => cellhost_bucket::Bucket::open(url, &opts)?,
      (None, Some(f)) => f.clone().with_prefix(&format!("r2/{name}"))?,
      (None, None) => {
        let dir = worker.spec.data_dir.join("r2");
        std::fs::create_dir_all(&dir)?;
        let dir = std::fs::canonicalize(&dir)?;
        cellhost_bucket::Bucket::open(&format!("file://{}", dir.display()), &opts)?
          .with_prefix(name)?
      }
    };
    tracing::info!(
      "R2 binding {binding} (bucket {name}): {}",
      bucket.describe()
    );
    out
      .0
      .insert(binding.clone(), cellhost_r2::R2Bucket::new(bucket));
  }
  Ok(Some(std::sync::Arc::new(out)))
}

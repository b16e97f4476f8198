//! The fleet's node-to-node channel. A call for a cell another live node
//! owns (`stub.fetch()`, an RPC call, a WebSocket upgrade) is forwarded to
//! that node's internal listener over HTTP/2 and answered from there; the
//! owner serves it as a local call. Calls carry the fleet secret
//! (`fleet/secret.json`), checked in constant time.
//!
//! A forwarded call is never replayed: if the owner cannot be reached or
//! its stream breaks, the caller gets a retryable error naming the owner
//! (a 503 with `Retry-After` at the edge when uncaught), since the call may
//! have run there. Stubs and `RpcTarget`s cannot cross nodes (a stub names
//! an isolate of one process): the owner refuses them with a
//! `DataCloneError` that says so.

mod client;
mod forward;
mod log;
mod operator;
mod secret;
mod server;
mod wire;

use std::sync::Arc;

use cellhost_fleet::Fleet;

pub use secret::{SECRET_HEADER, SECRET_KEY, Secret};
pub use wire::FORWARD_PATH;

/// This node's end of the channel: the forwarding client (the stubs'
/// `Forward`) and the internal listener.
pub struct Peer {
  inner: Arc<Inner>,
}

struct Inner {
  fleet: Arc<Fleet>,
  secret: Secret,
  client: Arc<client::Client>,
  /// The follower's node log (`<data>/nodelog`), opened by `serve`.
  nodelog: std::sync::OnceLock<Arc<std::sync::Mutex<cellhost_nodelog::NodeLog>>>,
  rt: tokio::runtime::Runtime,
  /// Forwarded calls being answered now.
  inflight: std::sync::atomic::AtomicUsize,
  /// The deployment this node serves (`cellhost node`), for the page.
  version: std::sync::Mutex<Option<String>>,
  /// Where forwarded calls go: the isolates of the version served now.
  router: std::sync::Mutex<Option<cellhost_ext::Router>>,
}

impl std::fmt::Debug for Peer {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(f, "Peer({})", self.inner.fleet.node())
  }
}

impl Peer {
  /// Reads (or creates) the fleet secret and starts the channel's runtime.
  pub fn start(fleet: Arc<Fleet>) -> Result<Arc<Peer>, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
      .worker_threads(2)
      .thread_name("cellhost-peer")
      .enable_all()
      .build()
      .map_err(|e| e.to_string())?;
    let bucket = fleet.bucket().clone();
    let secret = rt.block_on(async move { Secret::load_or_create(&bucket).await })?;
    let client = Arc::new(client::Client::default());
    fleet.set_log_transport(Arc::new(log::LogClient {
      client: client.clone(),
      secret: secret.clone(),
      node: fleet.node().to_string(),
    }));
    Ok(Arc::new(Peer {
      inner: Arc::new(Inner {
        fleet,
        secret,
        client,
        nodelog: Default::default(),
        rt,
        inflight: Default::default(),
        version: Default::default(),
        router: Default::default(),
      }),
    }))
  }

  /// Forwarded calls being answered now (a drain waits for them).
  pub fn inflight(&self) -> usize {
    self
      .inner
      .inflight
      .load(std::sync::atomic::Ordering::SeqCst)
  }

  /// The deployment version this node serves.
  pub fn set_version(&self, v: &str) {
    *self.inner.version.lock().unwrap() = Some(v.to_string());
  }

  /// Forwarded calls go through `router` from now on (a new version's
  /// isolates; its namespace table names the classes callers send).
  pub fn set_router(&self, router: cellhost_ext::Router) {
    *self.inner.router.lock().unwrap() = Some(router);
  }

  /// Serves forwarded calls on `listener` (the node's `--internal-listen`),
  /// into this node's isolates through `router`, and the operator page
  /// (`data_dir`: where the cells' databases are). Also reports this node
  /// (`telemetry/nodes/<node>.json`) when its figures change (at least every 30 s) for the other nodes' pages.
  pub fn serve(
    &self,
    listener: std::net::TcpListener,
    router: cellhost_ext::Router,
    data_dir: std::path::PathBuf,
  ) -> Result<(), String> {
    // The node log opens before the listener serves: a restarted node
    // answers followers' seal and tail calls from what its disk holds.
    let log = cellhost_nodelog::NodeLog::open(&data_dir.join("nodelog")).map_err(|e| {
      format!(
        "opening the node log in {}: {e}",
        data_dir.join("nodelog").display()
      )
    })?;
    let log = Arc::new(std::sync::Mutex::new(log));
    let _ = self.inner.nodelog.set(log.clone());
    self
      .inner
      .rt
      .spawn(drop_recovered(self.inner.fleet.clone(), log));
    let page = operator::Page {
      router: router.clone(),
      data_dir,
    };
    self.set_router(router);
    server::spawn(self.inner.clone(), listener, Arc::new(page))?;
    let inner = self.inner.clone();
    let started_ms = cellhost_fleet::now_ms();
    self.inner.rt.spawn(async move {
      // A PUT only when something changed, or every 30 s (when it was
      // last reported is on the page): a store request costs.
      let mut last: Option<(serde_json::Value, u64)> = None;
      loop {
        let f = &inner.fleet;
        let version = inner.version.lock().unwrap().clone();
        let now = cellhost_fleet::now_ms();
        let info = serde_json::json!({
          "node": f.node(),
          "version": version,
          "started_ms": started_ms,
          "held_cells": f.held_count(),
          // The fleet proof and its followers, or the bucket proof.
          "durability": match f.durability() {
            cellhost_fleet::Durability::Fleet { members } => format!("fleet ({})", members.join(", ")),
            cellhost_fleet::Durability::Bucket => "bucket".to_string(),
          },
          "inflight": inner.inflight.load(std::sync::atomic::Ordering::Relaxed),
        });
        if last
          .as_ref()
          .is_none_or(|(v, at)| *v != info || now >= at + 30_000)
        {
          let mut body = info.clone();
          body["updated_ms"] = now.into();
          let key = format!("telemetry/nodes/{}.json", f.node());
          // Best effort: a failed report is tried on the next round.
          if f
            .bucket()
            .put(&key, body.to_string().into_bytes())
            .await
            .is_ok()
          {
            last = Some((info, now));
          }
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
      }
    });
    Ok(())
  }
}

/// How often a follower looks for sealed sessions it may drop.
const DROP_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Frees the follower's copies of sessions whose recovery completed (their
/// bucket record says `sealed`), keeping each as a tombstone
/// ([`cellhost_nodelog::NodeLog::drop_sealed`]): without this every dead
/// session's batches stayed on every follower's disk for good.
async fn drop_recovered(fleet: Arc<Fleet>, log: Arc<std::sync::Mutex<cellhost_nodelog::NodeLog>>) {
  loop {
    tokio::time::sleep(DROP_EVERY).await;
    let sealed = log.lock().unwrap().sealed_sessions();
    for (node, session) in sealed {
      // An unreadable record is asked again next time.
      if !matches!(fleet.log_session_sealed(&node, &session).await, Ok(true)) {
        continue;
      }
      let log = log.clone();
      let (n, s) = (node.clone(), session.clone());
      match tokio::task::spawn_blocking(move || log.lock().unwrap().drop_sealed(&n, &s)).await {
        Ok(Ok(())) => {
          tracing::info!("dropped this follower's copy of {node}'s recovered log session {session}")
        }
        Ok(Err(e)) => tracing::warn!("dropping {node}'s log session {session}: {e}"),
        Err(e) => tracing::warn!("dropping {node}'s log session {session}: {e}"),
      }
    }
  }
}

//! Isolate threads: one `JsRuntime` per OS thread on a current-thread tokio
//! runtime. Work reaches a thread through its inbox channel, so a later
//! Durable Object can be pinned to one thread by sending to that thread only.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cellhost_ext::{Cells, Inbox, Job, Router, SyncFailure, Wake, set};
use deno_core::{JsRuntime, ModuleSpecifier, PollEventLoopOptions, RuntimeOptions, v8};
use tokio::sync::mpsc;

use crate::loader::Loader;
use crate::snapshot::{RESIDUAL_ESM, RESIDUAL_JS, SNAPSHOT};
use crate::watchdog::{self, Watch};
use crate::{Format, WorkerSpec};

#[derive(Clone, Debug)]
pub struct PoolOptions {
  pub isolates: usize,
  pub cpu_limit: Duration,
  pub heap_limit_mb: usize,
}

/// Runs on every isolate thread once its isolate is up (the server's accept
/// loop, so connections are served on the thread that runs their JavaScript).
pub type ThreadHook =
  Arc<dyn Fn(usize, IsolatePool) -> Pin<Box<dyn Future<Output = ()>>> + Send + Sync>;

/// Handles to every isolate thread.
#[derive(Clone)]
pub struct IsolatePool {
  inboxes: Arc<Vec<mpsc::UnboundedSender<Job>>>,
}

impl IsolatePool {
  /// Starts the isolate threads and loads the Worker in each. Fails with the
  /// load error (syntax error, missing export, ...) if any isolate cannot
  /// start, before anything is served.
  pub fn start(spec: WorkerSpec, opts: PoolOptions, hook: ThreadHook) -> anyhow::Result<Self> {
    let spec = Arc::new(spec);
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..opts.isolates.max(1) {
      let (tx, rx) = mpsc::unbounded_channel();
      senders.push(tx);
      receivers.push(rx);
    }
    let inboxes = Arc::new(senders);
    let router = Router {
      isolates: inboxes.clone(),
      namespaces: Arc::new(spec.durable_objects.clone()),
    };
    // Alarms exist only for Durable Objects: a plain Worker writes nothing.
    let wake = if router.namespaces.is_empty() {
      None
    } else {
      Some(
        Wake::start(&spec.data_dir, router.clone(), spec.fleet.clone())
          .map_err(anyhow::Error::msg)?,
      )
    };
    let pool = IsolatePool { inboxes };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    for (index, rx) in receivers.into_iter().enumerate() {
      let (spec, opts, hook, pool, ready) = (
        spec.clone(),
        opts.clone(),
        hook.clone(),
        pool.clone(),
        ready_tx.clone(),
      );
      let (router, wake) = (router.clone(), wake.clone());
      std::thread::Builder::new()
        .name(format!("cellhost-isolate-{index}"))
        .spawn(move || thread_main(index, spec, opts, rx, ready, hook, pool, router, wake))?;
    }
    drop(ready_tx);
    for _ in 0..pool.len() {
      match ready_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => anyhow::bail!("{e}"),
        Err(_) => anyhow::bail!("an isolate thread exited during start-up"),
      }
    }
    Ok(pool)
  }

  pub fn len(&self) -> usize {
    self.inboxes.len()
  }

  pub fn is_empty(&self) -> bool {
    self.inboxes.is_empty()
  }

  /// Queues a job on isolate `index`; false if that thread is gone.
  pub fn dispatch(&self, index: usize, job: Job) -> bool {
    self.inboxes[index % self.inboxes.len()].send(job).is_ok()
  }
}

#[allow(clippy::too_many_arguments)]
fn thread_main(
  index: usize,
  spec: Arc<WorkerSpec>,
  opts: PoolOptions,
  rx: mpsc::UnboundedReceiver<Job>,
  ready: std::sync::mpsc::Sender<Result<(), String>>,
  hook: ThreadHook,
  pool: IsolatePool,
  router: Router,
  wake: Option<Wake>,
) {
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let local = tokio::task::LocalSet::new();
  local.block_on(&rt, async move {
    let watch = Watch::new();
    watch.register_thread();
    watchdog::watch(watch.clone(), opts.cpu_limit);
    let inbox = Rc::new(Inbox::new(rx));
    let mut ready = Some(ready);
    loop {
      match boot(index, &spec, &opts, &inbox, &watch, &router, &wake).await {
        Ok(mut js) => {
          if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
            tokio::task::spawn_local(hook(index, pool.clone()));
          }
          let reason = drive(&mut js, &watch, &inbox).await;
          tracing::error!(isolate = index, "{reason}; the isolate is recycled");
          inbox.fail_in_flight(&reason);
        }
        Err(e) => {
          if let Some(ready) = ready.take() {
            let _ = ready.send(Err(e));
            return;
          }
          tracing::error!(isolate = index, "restarting the isolate failed: {e}");
          tokio::time::sleep(Duration::from_secs(1)).await;
        }
      }
    }
  });
}

/// Creates an isolate from the snapshot and evaluates the Worker in it.
async fn boot(
  index: usize,
  spec: &WorkerSpec,
  opts: &PoolOptions,
  inbox: &Rc<Inbox>,
  watch: &Arc<Watch>,
  router: &Router,
  wake: &Option<Wake>,
) -> Result<JsRuntime, String> {
  let heap = opts.heap_limit_mb << 20;
  let mut js = JsRuntime::try_new(RuntimeOptions {
    module_loader: Some(Rc::new(Loader)),
    extensions: set::for_runtime(),
    startup_snapshot: Some(SNAPSHOT),
    residual_lazy_js_sources: RESIDUAL_JS,
    residual_lazy_esm_sources: RESIDUAL_ESM,
    create_params: Some(v8::CreateParams::default().heap_limits(0, heap)),
    ..Default::default()
  })
  .map_err(|e| format!("creating an isolate: {e}"))?;
  js.lazy_init_extensions(set::runtime_args())
    .map_err(|e| e.to_string())?;
  {
    let state = js.op_state();
    let mut state = state.borrow_mut();
    set::put_permissions(&mut state);
    state.put(inbox.clone());
    state.put(router.clone());
    state.put(Cells::new(spec.data_dir.clone(), spec.fleet.clone()));
    if let Some(wake) = wake {
      state.put(wake.clone());
    }
  }
  watch.set_isolate(js.v8_isolate().thread_safe_handle());
  let w = watch.clone();
  js.add_near_heap_limit_callback(move |current, _initial| {
    w.kill(format!(
      "the isolate exceeded its heap limit of {} MiB",
      heap >> 20
    ));
    // Headroom so the termination itself can run.
    current + (64 << 20)
  });

  let url = ModuleSpecifier::from_file_path(&spec.main)
    .map_err(|_| format!("{}: not an absolute path", spec.main.display()))?;
  let ns = match spec.format {
    Format::Module => {
      let id = js
        .load_main_es_module(&url)
        .await
        .map_err(|e| e.to_string())?;
      let eval = js.mod_evaluate(id);
      js.with_event_loop_future(eval, PollEventLoopOptions::default())
        .await
        .map_err(|e| e.to_string())?;
      Some(js.get_module_namespace(id).map_err(|e| e.to_string())?)
    }
    Format::ServiceWorker => {
      let code =
        std::fs::read_to_string(&spec.main).map_err(|e| format!("{}: {e}", spec.main.display()))?;
      js.execute_script(url.to_string(), code)
        .map_err(|e| e.to_string())?;
      None
    }
  };

  let config = serde_json::json!({
    "main": spec.main.file_name().map(|n| n.to_string_lossy().to_string()),
    "env": spec.env,
    "isolate": index,
    "durableObjects": spec.durable_objects.iter().map(|d| serde_json::json!({
      "binding": d.binding,
      "className": d.class_name,
      "uniqueKey": d.unique_key,
      "sqlite": d.sqlite,
    })).collect::<Vec<_>>(),
  })
  .to_string();
  let (boot_fn, args) = {
    let f = js
      .execute_script("[cellhost:boot]", "globalThis[Symbol.for('cellhost.boot')]")
      .map_err(|e| e.to_string())?;
    deno_core::scope!(scope, &mut js);
    let f = v8::Local::new(scope, f);
    let f = v8::Local::<v8::Function>::try_from(f).map_err(|e| e.to_string())?;
    let ns: v8::Local<v8::Value> = match &ns {
      Some(ns) => v8::Local::new(scope, ns).into(),
      None => v8::null(scope).into(),
    };
    let config = v8::String::new(scope, &config).unwrap();
    (
      v8::Global::new(scope, f),
      [
        v8::Global::new(scope, ns),
        v8::Global::new(scope, v8::Local::<v8::Value>::from(config)),
      ],
    )
  };
  let call = js.call_with_args(&boot_fn, &args);
  js.with_event_loop_future(call, PollEventLoopOptions::default())
    .await
    .map_err(|e| e.to_string())?;
  Ok(js)
}

/// A durability round in flight, and its result once it is known.
type Round = (
  u64,
  tokio::task::JoinHandle<Result<(), SyncFailure>>,
  Option<Result<(), SyncFailure>>,
);

/// Durability rounds that may run at once: the next round's fsync (and,
/// on a bucket, its uploads and re-reads) overlaps the previous one's, but
/// replies are released strictly in round order.
const ROUNDS_IN_FLIGHT: usize = 2;

/// Group commit, second half: each round covers every WAL appended to (and
/// every LTX object captured) since the previous round started; when a round
/// and all rounds before it completed, the replies waiting for those commits
/// leave.
fn durability(
  cx: &mut std::task::Context<'_>,
  cells: &mut Cells,
  inbox: &Inbox,
  syncing: &mut VecDeque<Round>,
) {
  loop {
    for (_, task, done) in syncing.iter_mut() {
      if done.is_none()
        && let std::task::Poll::Ready(r) = Pin::new(task).poll(cx)
      {
        *done = Some(r.unwrap_or_else(|e| {
          Err(SyncFailure {
            message: format!("Durable Object reset because its durability round failed: {e}"),
            cells: Vec::new(),
          })
        }));
      }
    }
    while syncing.front().is_some_and(|(_, _, done)| done.is_some()) {
      let (round, _, done) = syncing.pop_front().expect("checked");
      settle(cells, inbox, round, done.expect("checked"));
    }
    if syncing.len() >= ROUNDS_IN_FLIGHT {
      return;
    }
    match cells.take_unsynced() {
      // Idle otherwise (one request at a time): fsync on this thread, which
      // saves two thread wake-ups on the path of the reply. Under load the
      // round runs beside the event loop instead.
      Some(batch) if syncing.is_empty() && !batch.has_uploads() && !inbox.has_queued() => {
        let round = batch.round;
        settle(cells, inbox, round, batch.run());
      }
      Some(batch) => {
        let round = batch.round;
        let task = tokio::task::spawn_blocking(move || batch.run());
        syncing.push_back((round, task, None));
      }
      None => {
        // Rounds with nothing to sync (only failed commits) are settled.
        if syncing.is_empty() && cells.committed() > cells.durable() {
          let round = cells.committed();
          cells.mark_durable(round);
          inbox.release_held(round, None);
        }
        return;
      }
    }
  }
}

/// A finished round: its replies leave, or on failure turn into errors and
/// its cells are reset.
fn settle(cells: &mut Cells, inbox: &Inbox, round: u64, result: Result<(), SyncFailure>) {
  cells.mark_durable(round);
  match result {
    Ok(()) => inbox.release_held(round, None),
    Err(f) => {
      tracing::error!("{}", f.message);
      cells.fail_cells(&f.cells, &f.message);
      inbox.release_held(round, Some((&f.message, true)));
    }
  }
}

/// Runs the isolate's event loop until the watchdog terminates it; returns
/// the reason. Uncaught errors are logged and the isolate keeps serving.
///
/// After every turn, the writes all cells made in it are committed together
/// (group commit), and only then the output they could reveal is released.
async fn drive(js: &mut JsRuntime, watch: &Watch, inbox: &Inbox) -> String {
  let state = js.op_state();
  let mut syncing: VecDeque<Round> = VecDeque::new();
  loop {
    let result = poll_fn(|cx| {
      watch.enter();
      let r = js.poll_event_loop(cx, PollEventLoopOptions::default());
      watch.leave();
      let mut st = state.borrow_mut();
      let cells = st.borrow_mut::<Cells>();
      let failed = cells.commit_all();
      if !failed.is_empty() {
        let reason = failed
          .iter()
          .map(|(_, e)| e.as_str())
          .collect::<Vec<_>>()
          .join("; ");
        tracing::error!("commit failed: {reason}");
        let (msg, reset) = Cells::commit_failure(&reason);
        inbox.release_held(cells.committed(), Some((&msg, reset)));
      }
      durability(cx, cells, inbox, &mut syncing);
      r
    })
    .await;
    if let Some(reason) = watch.take_kill() {
      return reason;
    }
    match result {
      Ok(()) => return "the isolate's event loop ended".into(),
      Err(e) => tracing::error!(target: "worker", "Uncaught {e}"),
    }
  }
}

//! Isolate threads: one `JsRuntime` per OS thread on a current-thread tokio
//! runtime. Work reaches a thread through its inbox channel, so a later
//! Durable Object can be pinned to one thread by sending to that thread only.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cellhost_ext::generation::{GenPool, Generations, Placed};
use cellhost_ext::{Cells, Inbox, Job, Router, SyncFailure, Wake, set};
use deno_core::{JsRuntime, ModuleSpecifier, PollEventLoopOptions, RuntimeOptions, v8};
use tokio::sync::mpsc;

use crate::loader::Loader;
use crate::quiet::Quiet;
use crate::snapshot::{RESIDUAL_ESM, RESIDUAL_JS, SNAPSHOT};
use crate::watchdog::{self, Watch};
use crate::{Format, WorkerSpec};

#[derive(Clone, Debug)]
pub struct PoolOptions {
  pub isolates: usize,
  pub cpu_limit: Duration,
  pub heap_limit_mb: usize,
  /// Outbound requests one event may start (0: no limit).
  pub max_subrequests: u32,
}

/// Runs on every isolate thread once its isolate is up (the server's accept
/// loop, so connections are served on the thread that runs their JavaScript).
pub type ThreadHook =
  Arc<dyn Fn(usize, IsolatePool) -> Pin<Box<dyn Future<Output = ()>>> + Send + Sync>;

/// Handles to every isolate thread.
#[derive(Clone)]
pub struct IsolatePool {
  inboxes: Arc<Vec<mpsc::UnboundedSender<Job>>>,
  router: Router,
  /// `cellhost node`: this pool among the versions the process serves.
  generation: Option<Arc<GenPool>>,
  wake: Option<Wake>,
  /// Turns true when the pool stops (a newer version took its cells).
  stop: Arc<tokio::sync::watch::Sender<bool>>,
  /// Isolates whose JavaScript is gone since.
  stopped: Arc<std::sync::atomic::AtomicUsize>,
}

impl IsolatePool {
  /// Every isolate's queue (what another Worker's service binding sends to).
  pub fn inboxes(&self) -> Arc<Vec<mpsc::UnboundedSender<Job>>> {
    self.inboxes.clone()
  }

  /// Starts the isolate threads and loads the Worker in each. Fails with the
  /// load error (syntax error, missing export, ...) if any isolate cannot
  /// start, before anything is served.
  pub fn start(mut spec: WorkerSpec, opts: PoolOptions, hook: ThreadHook) -> anyhow::Result<Self> {
    // The older pool is needed only here (its threads keep no chain of
    // every version served).
    let before = spec.generation.as_mut().and_then(|g| g.after.take());
    let spec = Arc::new(spec);
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..opts.isolates.max(1) {
      let (tx, rx) = mpsc::unbounded_channel();
      senders.push(tx);
      receivers.push(rx);
    }
    let inboxes = Arc::new(senders);
    let namespaces = Arc::new(spec.durable_objects.clone());
    let generation = spec
      .generation
      .as_ref()
      .map(|g| GenPool::new(&g.version, inboxes.clone(), namespaces.clone()));
    let gens = match (&spec.generation, &generation) {
      (Some(_), Some(pool)) => Some(
        before
          .as_ref()
          .and_then(|a| a.generations())
          .unwrap_or_else(|| Generations::new(pool.clone())),
      ),
      _ => None,
    };
    let router = Router {
      placement: Router::placement_for(
        gens.is_some(),
        spec.fleet.is_some() || spec.forward.is_some(),
      ),
      isolates: inboxes.clone(),
      namespaces,
      forward: spec.forward.clone(),
      gens: gens.clone(),
      here: None,
    };
    let placed = move |index| {
      Some(Placed {
        gens: gens.clone()?,
        pool: generation.clone()?,
        index,
      })
    };
    // Alarms exist only for Durable Objects: a plain Worker writes nothing.
    let wake = match before.as_ref().and_then(|p| p.wake.as_ref()) {
      // A newer version's pool: the same index, handed over at the switch.
      Some(w) => Some(w.successor(router.clone()).map_err(anyhow::Error::msg)?),
      None if router.namespaces.is_empty() => None,
      None => Some(
        Wake::start(&spec.data_dir, router.clone(), spec.fleet.clone())
          .map_err(anyhow::Error::msg)?,
      ),
    };
    let pool = IsolatePool {
      inboxes,
      router: router.clone(),
      generation: placed(0).map(|p| p.pool),
      wake: wake.clone(),
      stop: Arc::new(tokio::sync::watch::channel(false).0),
      stopped: Default::default(),
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    for (index, rx) in receivers.into_iter().enumerate() {
      let (spec, opts, hook, pool, ready) = (
        spec.clone(),
        opts.clone(),
        hook.clone(),
        pool.clone(),
        ready_tx.clone(),
      );
      let (router, wake, placed) = (router.clone(), wake.clone(), placed(index));
      std::thread::Builder::new()
        .name(format!("cellhost-isolate-{index}"))
        .spawn(move || {
          thread_main(
            index, spec, opts, rx, ready, hook, pool, router, wake, placed,
          )
        })?;
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

  /// Where jobs for Durable Objects go on this node (the fleet's internal
  /// listener queues forwarded calls through it).
  pub fn router(&self) -> Router {
    self.router.clone()
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

  /// `cellhost node`: the process's versions, for the next pool to join.
  pub fn generations(&self) -> Option<Arc<Generations>> {
    self.router.gens.clone()
  }

  /// Makes `next` (started joining this pool's generations) serve every
  /// new cell and alarm; this pool's cells follow at their idle points.
  pub fn retire_into(&self, next: &IsolatePool) -> Result<(), String> {
    let (Some(gens), Some(pool)) = (&self.router.gens, &next.generation) else {
      return Err("this pool serves no deployed version".into());
    };
    gens.switch(pool.clone())?;
    if let (Some(old), Some(new)) = (&self.wake, &next.wake) {
      old.hand_to(new);
    }
    Ok(())
  }

  /// Stops the isolate threads: what they still run fails, sockets they
  /// still hold close with 1012, and calls still queued go to the current
  /// pool. Connections already upgraded keep being served by the thread.
  pub fn stop(&self) {
    self.stop.send_replace(true);
  }

  /// Whether every isolate of the pool stopped running JavaScript.
  pub fn stopped(&self) -> bool {
    self.stopped.load(std::sync::atomic::Ordering::SeqCst) >= self.len()
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
  placed: Option<Placed>,
) {
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let local = tokio::task::LocalSet::new();
  let mut stop = pool.stop.subscribe();
  local.block_on(&rt, async move {
    let watch = Watch::new();
    watch.register_thread();
    watchdog::watch(watch.clone(), opts.cpu_limit);
    let inbox = Rc::new(Inbox::new(rx));
    let mut ready = Some(ready);
    loop {
      match boot(index, &spec, &opts, &inbox, &watch, &router, &wake, &placed).await {
        Ok(mut js) => {
          if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
            tokio::task::spawn_local(hook(index, pool.clone()));
          }
          // The stop first: once the pool is stopped nothing more of it
          // is polled (see `drive`).
          let ended = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => None,
            reason = drive(&mut js, &watch, &inbox, &pool.stop) => Some(reason),
          };
          let state = js.op_state();
          cellhost_ext::generation::isolate_gone(&state.borrow(), &inbox);
          let Some(reason) = ended else {
            let mut st = state.borrow_mut();
            cellhost_ext::ws::close_all(&mut st, 1012, cellhost_ext::ws::RESTART_REASON);
            inbox
              .fail_in_flight("the Durable Object's node switched to a new version of the Worker");
            drop(st);
            drop(js);
            pool
              .stopped
              .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return;
          };
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
      if *stop.borrow() {
        return;
      }
    }
  });
  // Stopped: connections this thread upgraded (WebSockets handed to the
  // new version's isolates) are served here until they close.
  rt.block_on(local);
}

/// Creates an isolate from the snapshot and evaluates the Worker in it.
#[allow(clippy::too_many_arguments)]
async fn boot(
  index: usize,
  spec: &WorkerSpec,
  opts: &PoolOptions,
  inbox: &Rc<Inbox>,
  watch: &Arc<Watch>,
  router: &Router,
  wake: &Option<Wake>,
  placed: &Option<Placed>,
) -> Result<JsRuntime, String> {
  let heap = opts.heap_limit_mb << 20;
  let main = spec
    .main
    .canonicalize()
    .map_err(|e| format!("{}: {e}", spec.main.display()))?;
  let loader = Rc::new(Loader::new(
    &main,
    spec.base_dir.as_deref(),
    spec.rules.clone(),
    spec.node,
  )?);
  let root = loader.root().to_path_buf();
  let mut js = JsRuntime::try_new(RuntimeOptions {
    module_loader: Some(loader),
    custom_module_evaluation_cb: Some(Box::new(module_value)),
    extensions: set::extensions(),
    startup_snapshot: Some(SNAPSHOT),
    residual_lazy_js_sources: RESIDUAL_JS,
    residual_lazy_esm_sources: RESIDUAL_ESM,
    // The snapshot's op functions serve as they are (their OpCtx pointers
    // are external references, rebound on restore). Registering every op
    // again built a second set in each isolate: about 0.9 MB of idle RSS
    // with hello's two isolates. deno_core attaches the fast calls when the
    // first lazily loaded extension module loads.
    skip_op_registration: true,
    create_params: Some(v8::CreateParams::default().heap_limits(0, heap)),
    validate_import_attributes_cb: Some(Box::new(refuse_import_attributes)),
    ..Default::default()
  })
  .map_err(|e| format!("creating an isolate: {e}"))?;
  js.lazy_init_extensions(set::runtime_args())
    .map_err(|e| e.to_string())?;
  {
    let state = js.op_state();
    let mut state = state.borrow_mut();
    set::put_permissions(&mut state);
    cellhost_node::reserve_stdio_ids(&mut state);
    if let crate::NodeCompat::On { .. } = spec.node {
      let rules = spec.rules.clone();
      let main_rel = main
        .strip_prefix(&root)
        .ok()
        .map(|p| p.to_string_lossy().replace('\\', "/"));
      state.put(cellhost_node::bundle::Bundle::new(
        root,
        Box::new(move |name| Some(name) == main_rel.as_deref() || rules.kind_of(name).is_some()),
      ));
    }
    state.put(inbox.clone());
    state.put(Router {
      here: Some(index),
      ..router.clone()
    });
    if let Some(p) = placed {
      state.put(p.clone());
    }
    let mut cells = Cells::new(spec.data_dir.clone(), spec.fleet.clone());
    cells.set_pitr_days(spec.pitr_days);
    state.put(cells);
    state.put(cellhost_cache::CacheStore::for_dir(&spec.data_dir));
    if !spec.kv_namespaces.is_empty() {
      state.put(cellhost_kv::KvStore::for_dir(&spec.data_dir));
    }
    if let Some(peers) = &spec.peers {
      state.put(peers.clone());
    }
    if let Some(r2) = &spec.r2_buckets {
      state.put(r2.clone());
    }
    if let Some(q) = &spec.queues {
      state.put(q.clone());
    }
    if !spec.d1_databases.is_empty() {
      state.put(cellhost_d1::D1Store::for_dir(&spec.data_dir));
    }
    if let Some(assets) = &spec.assets {
      state.put(assets.clone());
    }
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

  let (prepare, boot) = seal(&mut js, spec.node).await?;
  let config = serde_json::json!({
    "main": spec.main.file_name().map(|n| n.to_string_lossy().to_string()),
    "env": spec.env,
    "isolate": index,
    "maxSubrequests": opts.max_subrequests,
    "populateProcessEnv": matches!(spec.node, crate::NodeCompat::On { populate_env: true, .. }),
    "assetsBinding": spec.assets_binding,
    "name": spec.name,
    "services": spec.services,
    "kvNamespaces": spec.kv_namespaces,
    "d1Databases": spec.d1_databases,
    "r2Buckets": spec.r2_buckets.iter().flat_map(|b| b.0.keys()).collect::<Vec<_>>(),
    "queueProducers": spec.queue_producers,
    "ctxExports": spec.ctx_exports,
    "compatibilityFlags": spec.compat.iter().collect::<Vec<_>>(),
    "nodeFs": matches!(spec.node, crate::NodeCompat::On { fs: true, .. }),
    "durableObjects": spec.durable_objects.iter().map(|d| serde_json::json!({
      "binding": d.binding,
      "className": d.class_name,
      "uniqueKey": d.unique_key,
      "sqlite": d.sqlite,
    })).collect::<Vec<_>>(),
  })
  .to_string();
  // The bindings exist before the Worker's modules evaluate.
  let config = {
    deno_core::scope!(scope, &mut js);
    let config = v8::String::new(scope, &config).unwrap();
    v8::Global::new(scope, v8::Local::<v8::Value>::from(config))
  };
  let call = js.call_with_args(&prepare, &[config]);
  js.with_event_loop_future(call, PollEventLoopOptions::default())
    .await
    .map_err(|e| e.to_string())?;
  if !spec.eval_during_startup {
    code_generation(&mut js, false);
  }
  let url = ModuleSpecifier::from_file_path(&main)
    .map_err(|_| format!("{}: not an absolute path", main.display()))?;
  let ns = match spec.format {
    Format::Module => {
      let id = js
        .load_main_es_module(&url)
        .await
        .map_err(|e| e.to_string())?;
      evaluate(&mut js, id).await?;
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
  let ns = {
    deno_core::scope!(scope, &mut js);
    let ns: v8::Local<v8::Value> = match &ns {
      Some(ns) => v8::Local::new(scope, ns).into(),
      None => v8::null(scope).into(),
    };
    v8::Global::new(scope, ns)
  };
  let call = js.call_with_args(&boot, &[ns]);
  js.with_event_loop_future(call, PollEventLoopOptions::default())
    .await
    .map_err(|e| e.to_string())?;
  code_generation(&mut js, false);
  Ok(js)
}

/// workerd refuses every import attribute (`with { type: "json" }`
/// included) before it looks the module up; the loader's own wrappers of
/// non-JavaScript modules pass (see `loader.rs`).
fn refuse_import_attributes(
  scope: &mut v8::PinScope,
  attributes: &std::collections::HashMap<String, String>,
  cx: &deno_core::ImportAttributesContext,
) {
  if attributes.is_empty()
    || crate::loader::is_value_import(attributes, &cx.referrer, &cx.specifier)
  {
    return;
  }
  let msg = v8::String::new(scope, "Unrecognized import attributes specified").unwrap();
  let e = v8::Exception::error(scope, msg);
  scope.throw_exception(e);
}

/// The value of a Text, Data, CompiledWasm or JSON module, made from its
/// bytes: a string, an `ArrayBuffer`, a `WebAssembly.Module` (compiled here
/// whatever the code generation policy, as workerd compiles a bundle's wasm
/// itself), or the parsed JSON.
fn module_value(
  scope: &mut v8::PinScope,
  ty: std::borrow::Cow<'_, str>,
  name: &deno_core::FastString,
  code: deno_core::ModuleSourceCode,
) -> Result<deno_core::CustomModuleEvaluationKind, deno_error::JsErrorBox> {
  use crate::rules::ModuleKind;
  use deno_error::JsErrorBox;
  let kind = ModuleKind::from_value_type(&ty)
    .ok_or_else(|| JsErrorBox::generic(format!("{name}: unknown module type {ty}")))?;
  let bytes = match code {
    deno_core::ModuleSourceCode::Bytes(b) => b.to_vec(),
    deno_core::ModuleSourceCode::String(s) => s.as_bytes().to_vec(),
  };
  let fail = |why: &str| JsErrorBox::generic(format!("{} module {name}: {why}", kind.name()));
  let not_utf8 = |_| fail("not valid UTF-8");
  let value: v8::Local<v8::Value> = match kind {
    ModuleKind::Text => v8::String::new(scope, std::str::from_utf8(&bytes).map_err(not_utf8)?)
      .ok_or_else(|| fail("too large"))?
      .into(),
    ModuleKind::Data => {
      let store = v8::ArrayBuffer::new_backing_store_from_vec(bytes).make_shared();
      v8::ArrayBuffer::with_backing_store(scope, &store).into()
    }
    ModuleKind::Json => {
      serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
        .map_err(|e| fail(&format!("not valid JSON: {e}")))?;
      let text = std::str::from_utf8(&bytes).map_err(not_utf8)?;
      let s = v8::String::new(scope, text).ok_or_else(|| fail("too large"))?;
      v8::json::parse(scope, s).ok_or_else(|| fail("not valid JSON"))?
    }
    ModuleKind::CompiledWasm => {
      let context = scope.get_current_context();
      let allowed = context.is_code_generation_from_strings_allowed();
      context.set_allow_generation_from_strings(true);
      v8::tc_scope!(let tc, scope);
      let module = v8::WasmModuleObject::compile(tc, &bytes);
      let why = tc
        .exception()
        .map(|e| e.to_rust_string_lossy(tc))
        .unwrap_or_else(|| "not a valid WebAssembly module".into());
      context.set_allow_generation_from_strings(allowed);
      let module = module.ok_or_else(|| fail(&why))?;
      return Ok(deno_core::CustomModuleEvaluationKind::Synthetic(
        v8::Global::new(tc, module.cast::<v8::Value>()),
      ));
    }
    ModuleKind::EsModule | ModuleKind::CommonJs => return Err(fail("not a value module")),
  };
  Ok(deno_core::CustomModuleEvaluationKind::Synthetic(
    v8::Global::new(scope, value),
  ))
}

/// Code generation from strings (`eval`, `new Function`, and compiling
/// WebAssembly from bytes), allowed or refused from now on, as workerd
/// refuses both once the Worker serves events.
fn code_generation(js: &mut JsRuntime, allow: bool) {
  deno_core::scope!(scope, js);
  let context = scope.get_current_context();
  context.set_allow_generation_from_strings(allow);
  scope.set_allow_wasm_code_generation_callback(wasm_follows_eval);
}

/// WebAssembly compiles exactly when `eval` may run.
unsafe extern "C" fn wasm_follows_eval(
  context: v8::Local<v8::Context>,
  _: v8::Local<v8::String>,
) -> bool {
  context.is_code_generation_from_strings_allowed()
}

/// Takes everything internal off the global object before any user code
/// runs, and returns the dispatch hooks (`prepare`, `boot`). A Worker sees the Workers global
/// scope and nothing else: not deno_core's `Deno` (its ops would reach the
/// host), not `__bootstrap`, not the hooks the snapshot left for the host.
/// The `cloudflare:*` modules are evaluated first, while their hook is
/// still there; later imports of them come from the module map.
type Hook = v8::Global<v8::Function>;

/// Evaluates a loaded module, running the event loop until its top level
/// (and any top-level await) is done.
async fn evaluate(js: &mut JsRuntime, id: deno_core::ModuleId) -> Result<(), String> {
  let eval = js.mod_evaluate(id);
  js.with_event_loop_future(eval, PollEventLoopOptions::default())
    .await
    .map_err(|e| e.to_string())
}

async fn seal(js: &mut JsRuntime, node: crate::NodeCompat) -> Result<(Hook, Hook), String> {
  for (name, _) in crate::loader::BUILTINS {
    let url = ModuleSpecifier::parse(name).expect("valid");
    let id = js
      .load_side_es_module(&url)
      .await
      .map_err(|e| e.to_string())?;
    evaluate(js, id).await?;
  }
  if let crate::NodeCompat::On { .. } = node {
    // Node's globals (Buffer, process, ...), each loaded on first use.
    js.execute_script(
      "[cellhost:node]",
      r#"globalThis.__bootstrap.core.createLazyLoader("ext:cellhost_node/globals.js")().install()"#,
    )
    .map_err(|e| e.to_string())?;
  }
  let f = js
    .execute_script(
      "[cellhost:seal]",
      r#"(() => {
        const boot = globalThis[Symbol.for("cellhost.boot")];
        delete globalThis[Symbol.for("cellhost.boot")];
        delete globalThis[Symbol.for("cellhost.modules")];
        delete globalThis.Deno;
        delete globalThis.__bootstrap;
        return boot;
      })()"#,
    )
    .map_err(|e| e.to_string())?;
  deno_core::scope!(scope, js);
  let hooks = v8::Local::new(scope, f);
  let hooks = v8::Local::<v8::Object>::try_from(hooks).map_err(|e| e.to_string())?;
  let get = |name: &str| -> Result<Hook, String> {
    let key = v8::String::new(scope, name).unwrap();
    let f = hooks.get(scope, key.into()).ok_or("missing hook")?;
    let f = v8::Local::<v8::Function>::try_from(f).map_err(|e| e.to_string())?;
    Ok(v8::Global::new(scope, f))
  };
  Ok((get("prepare")?, get("boot")?))
}

/// A durability round in flight: its number, the cells it covers, its task,
/// and its result once it is known.
struct Round {
  round: u64,
  cells: Vec<(u32, String)>,
  task: tokio::task::JoinHandle<Result<(), SyncFailure>>,
  done: Option<Result<(), SyncFailure>>,
}

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
    for r in syncing.iter_mut() {
      if r.done.is_none()
        && let std::task::Poll::Ready(res) = Pin::new(&mut r.task).poll(cx)
      {
        r.done = Some(res.unwrap_or_else(|e| {
          Err(SyncFailure {
            message: format!("Durable Object reset because its durability round failed: {e}"),
            cells: Vec::new(),
          })
        }));
      }
    }
    while syncing.front().is_some_and(|r| r.done.is_some()) {
      let r = syncing.pop_front().expect("checked");
      settle(cells, inbox, r.round, &r.cells, r.done.expect("checked"));
    }
    if syncing.len() >= ROUNDS_IN_FLIGHT {
      return;
    }
    match cells.take_unsynced() {
      // Idle otherwise (one request at a time): fsync on this thread, which
      // saves two thread wake-ups on the path of the reply. Under load the
      // round runs beside the event loop instead.
      Some(batch) if syncing.is_empty() && !batch.has_uploads() && !inbox.has_queued() => {
        let (round, covered) = (batch.round, batch.cells.clone());
        settle(cells, inbox, round, &covered, batch.run());
      }
      Some(batch) => {
        let (round, covered) = (batch.round, batch.cells.clone());
        let task = tokio::task::spawn_blocking(move || batch.run());
        syncing.push_back(Round {
          round,
          cells: covered,
          task,
          done: None,
        });
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

/// A finished round: its replies leave; those of cells whose writes it (or
/// an earlier round) failed to make durable turn into errors, and those
/// cells are reset.
fn settle(
  cells: &mut Cells,
  inbox: &Inbox,
  round: u64,
  covered: &[(u32, String)],
  result: Result<(), SyncFailure>,
) {
  // The round's ownership check ran on another thread, maybe long ago (a
  // process stopped in between): past the node's fence deadline nothing is
  // acknowledged, whatever that check found.
  let result = match result {
    Ok(()) if !cells.can_ack() => Err(SyncFailure {
      message: cellhost_fleet::lease_lapsed_reply(),
      cells: covered.iter().map(|(h, _)| *h).collect(),
    }),
    r => r,
  };
  if let Err(f) = &result {
    tracing::error!("{}", f.message);
  }
  let failed = cells.settle_round(round, covered, result);
  inbox.fail_cells(&failed, round);
  inbox.release_held(round, None);
}

/// Runs the isolate's event loop until the watchdog terminates it; returns
/// the reason. Uncaught errors are logged and the isolate keeps serving.
///
/// After every turn, the writes all cells made in it are committed together
/// (group commit), and only then the output they could reveal is released.
/// `stop`: once the pool is stopped (a version switch that ran out of
/// time), a turn that was still running commits nothing and no round
/// settles: the new version serves this isolate's objects from then on, and
/// an answer from here could reveal writes its restore never saw.
async fn drive(
  js: &mut JsRuntime,
  watch: &Watch,
  inbox: &Inbox,
  stop: &tokio::sync::watch::Sender<bool>,
) -> String {
  let state = js.op_state();
  let mut syncing: VecDeque<Round> = VecDeque::new();
  let mut quiet = Quiet::new();
  loop {
    let result = poll_fn(|cx| {
      watch.enter();
      let mut r = js.poll_event_loop(cx, PollEventLoopOptions::default());
      watch.leave();
      if *stop.borrow() {
        return std::task::Poll::Pending;
      }
      // Nothing pending but the wait for new work (an unref'd op): idle.
      // Whatever is still unanswered then never will be; the loop waits on
      // (the waker is registered) unless no work can come again.
      if matches!(r, std::task::Poll::Ready(Ok(()))) && !inbox.closed() && !watch.killed() {
        if inbox.cancel_hung() {
          tracing::error!(target: "worker", "Uncaught Error: {}", cellhost_ext::HUNG);
          // Look again: its caller may carry on, or the next is hung too.
          cx.waker().wake_by_ref();
        }
        r = std::task::Poll::Pending;
      }
      let mut st = state.borrow_mut();
      let cells = st.borrow_mut::<Cells>();
      let failed = cells.commit_turn();
      for (key, (msg, _)) in &failed {
        tracing::error!("commit of Durable Object {key} failed: {msg}");
      }
      inbox.fail_cells(&failed, cells.committed());
      durability(cx, cells, inbox, &mut syncing);
      drop(st);
      if r.is_pending()
        && quiet.due(
          cx,
          tokio::time::Instant::now(),
          inbox.taken(),
          !syncing.is_empty(),
        )
      {
        crate::quiet::release(js);
      }
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

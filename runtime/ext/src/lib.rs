//! The `cellhost` deno_core extension: the JavaScript glue in `js/` (Workers
//! global scope, request dispatch, `cloudflare:workers`) and the ops it calls.
//! It is shared by the host's build script (which snapshots it) and the host
//! itself, so both register the exact same op table.

use deno_core::v8;

mod actor;
mod alarm;
mod body;
mod cell;
mod facet;
mod gate;
pub mod generation;
mod http;
mod hung;
mod id;
mod local;
mod pitr;
mod replica;
mod service;
pub mod set;
pub mod sources;
mod storage_ops;
mod sync;
mod wake;
pub mod ws;

pub use actor::{Forward, Namespace, Router};
pub use body::ReplyStream;
pub use cell::{Cells, SyncBatch, SyncFailure};
/// The egress policy lives in its own crate (`connect()` needs it too).
pub use cellhost_egress as egress;
pub use http::{
  ActorTarget, AlarmJob, Body, BoxError, ExportJob, HttpJob, HttpReply, Inbox, Job, QueueJob,
  ReplyBody, RpcJob, RpcReply, ScheduledJob,
};
pub use hung::HUNG;
pub use service::Peers;
pub use wake::Wake;

deno_core::extension!(
  cellhost,
  deps = [deno_webidl, deno_web, deno_fetch, deno_crypto, cellhost_html, cellhost_sockets, cellhost_cache, cellhost_assets, cellhost_kv, cellhost_r2, cellhost_d1, cellhost_queues],
  ops = [
    http::op_cellhost_next,
    http::op_cellhost_respond_text,
    http::op_cellhost_respond_bytes,
    http::op_cellhost_respond_stream,
    http::op_cellhost_respond_error,
    op_cellhost_log,
    op_cellhost_memory_pressure,
    actor::op_do_id_from_name,
    actor::op_do_unique_id,
    actor::op_do_id_from_string,
    actor::op_do_fetch,
    actor::op_do_call,
    actor::op_do_call_export,
    actor::op_do_reply,
    actor::op_do_unplace,
    local::op_do_local_call,
    local::op_do_local_answer,
    local::op_cellhost_took,
    cell::op_cell_open,
    cell::op_cell_activate,
    cell::op_cell_bucket_mode,
    cell::op_cell_close,
    cell::op_cell_abort,
    cell::op_cell_sync,
    pitr::op_pitr_current,
    pitr::op_pitr_for_time,
    pitr::op_pitr_schedule,
    cell::op_cell_gate_pending,
    cell::op_cell_take_failure,
    service::op_service_fetch,
    service::op_service_call,
    facet::op_cell_open_facet,
    facet::op_cell_activate_facet,
    facet::op_cell_delete_facet,
    storage_ops::op_kv_get,
    storage_ops::op_kv_put,
    storage_ops::op_kv_put_many,
    storage_ops::op_kv_delete,
    storage_ops::op_kv_list,
    storage_ops::op_kv_delete_all,
    storage_ops::op_sql_exec,
    storage_ops::op_sql_cursor_next,
    storage_ops::op_sql_cursor_close,
    storage_ops::op_sql_database_size,
    storage_ops::op_txn_savepoint,
    storage_ops::op_txn_finish,
    alarm::op_alarm_get,
    alarm::op_alarm_set,
    alarm::op_alarm_delete,
    alarm::op_alarm_finish,
    alarm::op_alarm_skip,
    ws::op_ws_pair,
    ws::op_ws_send_text,
    ws::op_ws_send_binary,
    ws::op_ws_close,
    ws::op_ws_drop,
    ws::op_ws_next,
    ws::op_ws_connect,
    ws::op_cellhost_respond_ws,
    ws::op_ws_cancel,
    generation::op_gen_release,
    generation::op_gen_moving,
    generation::op_gen_pack,
    generation::op_gen_adopt,
    generation::op_gen_local,
    cell::op_cell_settled,
  ],
  esm_entry_point = "ext:cellhost/99_main.js",
  esm = [
    dir "../../js",
    "00_globals.js",
    "01_keys.js",
    "03_web_spec.js",
    "05_timers.js",
    "06_budget.js",
    "07_workers_globals.js",
    "08_workers_scope.js",
    "09_form_data.js",
    "10_dispatch.js",
    "30_durable_objects.js",
    "40_cell.js",
    "41_storage.js",
    "42_facets.js",
    "45_hibernation.js",
    "20_workers_module.js",
    "25_services.js",
    "21_email.js",
    "50_websocket.js",
    "99_main.js",
  ],
);

/// Many objects were just evicted: collect their garbage now and hand the
/// freed memory back to the system, so RSS falls back after a burst.
#[deno_core::op2(fast)]
fn op_cellhost_memory_pressure(isolate: &mut v8::Isolate) {
  isolate.low_memory_notification();
  // SAFETY: malloc_trim only returns free heap pages to the kernel.
  unsafe {
    libc::malloc_trim(0);
  }
}

/// console.* from a Worker: level 0 debug, 1 log/info, 2 warn, 3 error.
#[deno_core::op2(fast)]
fn op_cellhost_log(#[smi] level: u32, #[string] msg: &str) {
  let msg = msg.strip_suffix('\n').unwrap_or(msg);
  match level {
    0 => tracing::debug!(target: "worker", "{msg}"),
    1 => tracing::info!(target: "worker", "{msg}"),
    2 => tracing::warn!(target: "worker", "{msg}"),
    _ => tracing::error!(target: "worker", "{msg}"),
  }
}

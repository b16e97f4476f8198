//! The alarm API's ops: the cell's `_cf_ALARM` row (in the implicit
//! transaction) and the node's wake schedule.

use cellhost_storage::{AlarmOutcome, AlarmRow, set_alarm};
use deno_core::{OpState, op2};
use deno_error::JsErrorBox;

use crate::cell::{cells, err};
use crate::wake::Wake;

fn wake(state: &OpState) -> Result<Wake, JsErrorBox> {
  state
    .try_borrow::<Wake>()
    .cloned()
    .ok_or_else(|| JsErrorBox::generic("alarms are not available in this isolate"))
}

/// Tags are compared in JavaScript: keep them exact as numbers.
fn new_tag() -> u64 {
  let mut b = [0u8; 8];
  crate::actor::getrandom(&mut b);
  u64::from_le_bytes(b) & ((1 << 53) - 1)
}

/// The stored alarm: `[scheduled ms, counted failures, tag]`, or null.
#[op2]
pub fn op_alarm_get(
  state: &mut OpState,
  #[smi] h: u32,
) -> Result<Option<(f64, u32, f64)>, JsErrorBox> {
  let row = cells(state).db(h)?.alarm_get().map_err(err)?;
  Ok(row.map(|r| (r.scheduled_ms as f64, r.retry, r.tag as f64)))
}

/// `setAlarm()`: a fresh alarm (retries reset, new tag), committed with the
/// turn's other writes; the wake schedule learns of it first.
#[op2]
pub fn op_alarm_set(
  state: &mut OpState,
  #[smi] h: u32,
  #[smi] ns: u32,
  #[string] id: String,
  #[string] name: Option<String>,
  ms: f64,
) -> Result<(), JsErrorBox> {
  let row = set_alarm(ms as u64, new_tag());
  wake(state)?
    .schedule(ns, &id, name, row.scheduled_ms)
    .map_err(JsErrorBox::generic)?;
  cells(state).db_w(h)?.alarm_put(&row).map_err(err)
}

#[op2(fast)]
pub fn op_alarm_delete(state: &mut OpState, #[smi] h: u32) -> Result<bool, JsErrorBox> {
  let c = cells(state);
  let deleted = c.db(h)?.alarm_delete().map_err(err)?;
  c.note_write(h);
  Ok(deleted)
}

/// The end of a run of the alarm `[ms, retry, tag]`: `outcome` 0 success,
/// 1 the handler failed (counted), 2 the object was reset under it (not
/// counted). Applies the retry rules and schedules what remains; returns
/// the alarm still stored (ms) or null.
#[op2]
#[allow(clippy::too_many_arguments)]
pub fn op_alarm_finish(
  state: &mut OpState,
  #[smi] h: u32,
  #[smi] ns: u32,
  #[string] id: String,
  #[string] name: Option<String>,
  fired_ms: f64,
  #[smi] fired_retry: u32,
  fired_tag: f64,
  #[smi] outcome: u32,
) -> Result<Option<f64>, JsErrorBox> {
  let fired = AlarmRow {
    scheduled_ms: fired_ms as u64,
    retry: fired_retry,
    tag: fired_tag as u64,
  };
  let outcome = match outcome {
    0 => AlarmOutcome::Success,
    n => AlarmOutcome::Failure { counted: n == 1 },
  };
  let now = cellhost_fleet::now_ms();
  let c = cells(state);
  let next = c.db(h)?.alarm_finish(&fired, outcome, now).map_err(err)?;
  c.note_write(h);
  let wake = wake(state)?;
  match next {
    Some(row) => wake
      .schedule(ns, &id, name, row.scheduled_ms)
      .map_err(JsErrorBox::generic)?,
    None => wake.cancel(ns, &id),
  }
  Ok(next.map(|r| r.scheduled_ms as f64))
}

/// An alarm job that runs nothing: the cell has no alarm (`ms` < 0: drop
/// the hint) or it is not due yet (wake it at `ms`).
#[op2]
pub fn op_alarm_skip(
  state: &mut OpState,
  #[smi] ns: u32,
  #[string] id: String,
  #[string] name: Option<String>,
  ms: f64,
) -> Result<(), JsErrorBox> {
  let wake = wake(state)?;
  if ms < 0.0 {
    wake.forget(ns, &id);
    Ok(())
  } else {
    wake
      .schedule(ns, &id, name, ms as u64)
      .map_err(JsErrorBox::generic)
  }
}

//! Alarm retry timing and the rules for the stored alarm row.
//!
//! An alarm lives in the cell's `_cf_ALARM` row, so it moves with the cell.
//!
//! * `setAlarm()` resets the retry counter and gives the alarm a new tag.
//! * Success deletes the row only if it still holds the fired alarm: a
//!   handler's own re-arm (a new tag) wins.
//! * A failure reschedules at `now + 2 s << min(retry, 6)`, where `retry`
//!   is the number of counted failures so far: the first failure retries
//!   after 2 s, then 4, 8, 16, 32 and 64 s. Those six counted failures use
//!   up the retries: a counted failure with the counter already at 6 drops
//!   the alarm (seven attempts in all, as workerd).
//! * A failure that is not the handler's fault (the cell was reset because
//!   its owner fenced or lost the cell) is *not counted*: it reschedules at
//!   the same formula without raising the counter, and never drops. The
//!   `min(retry, 6)` cap keeps that delay at most 128 s.
//! * Writes made by a failed attempt are kept (the caller's business).

/// The first retry delay.
pub const ALARM_RETRY_BASE_MS: u64 = 2_000;

/// Counted failures that are retried; the next counted failure drops.
pub const ALARM_MAX_RETRIES: u32 = 6;

/// The delay before the retry after `retry` counted failures were already
/// rescheduled: `2 s << min(retry, 6)`.
pub fn retry_delay_ms(retry: u32) -> u64 {
  ALARM_RETRY_BASE_MS << retry.min(ALARM_MAX_RETRIES)
}

/// The `_cf_ALARM` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlarmRow {
  /// When the alarm is due (epoch milliseconds).
  pub scheduled_ms: u64,
  /// Counted failures so far.
  pub retry: u32,
  /// Random per `setAlarm()`: tells the fired alarm from a re-arm.
  pub tag: u64,
}

/// `setAlarm(at)`: a fresh alarm; `tag` comes from the caller's randomness.
pub fn set_alarm(scheduled_ms: u64, tag: u64) -> AlarmRow {
  AlarmRow {
    scheduled_ms,
    retry: 0,
    tag,
  }
}

/// Whether the alarm is due at `now_ms`.
pub fn is_due(row: &AlarmRow, now_ms: u64) -> bool {
  row.scheduled_ms <= now_ms
}

/// How one run of `alarm()` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmOutcome {
  Success,
  /// `counted`: the handler failed (threw, timed out). Not counted: the
  /// cell was reset under it for reasons of ownership or fencing.
  Failure {
    counted: bool,
  },
}

/// What to do with the row after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmAction {
  /// Delete the row: the fired alarm succeeded.
  Delete,
  /// Leave the row as it is: the handler re-armed or deleted the alarm.
  Keep,
  /// Write this row: a retry.
  Reschedule(AlarmRow),
  /// Delete the row: the retries are used up.
  Drop,
}

/// A failure of the alarm `row` at `now_ms`.
pub fn on_failure(row: &AlarmRow, now_ms: u64, counted: bool) -> AlarmAction {
  if counted && row.retry >= ALARM_MAX_RETRIES {
    return AlarmAction::Drop;
  }
  AlarmAction::Reschedule(AlarmRow {
    scheduled_ms: now_ms + retry_delay_ms(row.retry),
    retry: row.retry + u32::from(counted),
    tag: row.tag,
  })
}

/// The row after the alarm `fired` ran with `outcome`, given the row as it
/// is now (`current`, read after the handler).
pub fn after_run(
  fired: &AlarmRow,
  current: Option<&AlarmRow>,
  outcome: AlarmOutcome,
  now_ms: u64,
) -> AlarmAction {
  match current {
    Some(cur) if cur.tag == fired.tag => match outcome {
      AlarmOutcome::Success => AlarmAction::Delete,
      AlarmOutcome::Failure { counted } => on_failure(cur, now_ms, counted),
    },
    // Re-armed (new tag) or deleted by the handler: its own choice wins.
    _ => AlarmAction::Keep,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn delays() {
    let d: Vec<u64> = (0..8).map(retry_delay_ms).collect();
    assert_eq!(
      d,
      [
        2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 128_000
      ]
    );
  }

  #[test]
  fn schedule_is_2_4_8_16_32_64_then_dropped() {
    let mut row = set_alarm(1_000, 7);
    let mut now = 1_000;
    let mut gaps = Vec::new();
    loop {
      match after_run(
        &row,
        Some(&row),
        AlarmOutcome::Failure { counted: true },
        now,
      ) {
        AlarmAction::Reschedule(next) => {
          gaps.push(next.scheduled_ms - now);
          assert_eq!(next.tag, 7);
          now = next.scheduled_ms;
          row = next;
        }
        AlarmAction::Drop => break,
        a => panic!("{a:?}"),
      }
    }
    assert_eq!(gaps, [2_000, 4_000, 8_000, 16_000, 32_000, 64_000]);
    assert_eq!(row.retry, 6);
  }

  #[test]
  fn uncounted_failures_never_drop() {
    let row = AlarmRow {
      scheduled_ms: 0,
      retry: 6,
      tag: 1,
    };
    assert_eq!(
      on_failure(&row, 10, false),
      AlarmAction::Reschedule(AlarmRow {
        scheduled_ms: 128_010,
        retry: 6,
        tag: 1
      })
    );
    let row = AlarmRow {
      scheduled_ms: 0,
      retry: 2,
      tag: 1,
    };
    assert_eq!(
      on_failure(&row, 10, false),
      AlarmAction::Reschedule(AlarmRow {
        scheduled_ms: 8_010,
        retry: 2,
        tag: 1
      })
    );
  }

  #[test]
  fn success_and_rearm() {
    let fired = set_alarm(100, 1);
    assert_eq!(
      after_run(&fired, Some(&fired), AlarmOutcome::Success, 200),
      AlarmAction::Delete
    );
    let rearmed = set_alarm(500, 2);
    assert_eq!(
      after_run(&fired, Some(&rearmed), AlarmOutcome::Success, 200),
      AlarmAction::Keep
    );
    let f = AlarmOutcome::Failure { counted: true };
    assert_eq!(after_run(&fired, Some(&rearmed), f, 200), AlarmAction::Keep);
    assert_eq!(
      after_run(&fired, None, AlarmOutcome::Success, 200),
      AlarmAction::Keep
    );
    assert!(is_due(&fired, 100));
    assert!(!is_due(&fired, 99));
    assert_eq!(set_alarm(5, 9).retry, 0);
  }
}

//! The cell's alarm: one `_cf_ALARM` row, written in the same implicit
//! transaction as the object's other writes, so it commits (or rolls back)
//! with them and moves with the cell. The retry rules are `logic::alarm`'s.

use cellhost_logic::alarm::{self, AlarmAction, AlarmOutcome, AlarmRow};
use rusqlite::OptionalExtension;

use crate::{CellDb, StorageError, sqlite_error};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS _cf_ALARM (id INTEGER PRIMARY KEY CHECK (id = 1), \
  scheduled_ms INTEGER NOT NULL, retry INTEGER NOT NULL, tag INTEGER NOT NULL)";

impl CellDb {
  /// The stored alarm, if any.
  pub fn alarm_get(&mut self) -> Result<Option<AlarmRow>, StorageError> {
    self.internal(|db| {
      let row = db
        .conn
        .query_row(
          "SELECT scheduled_ms, retry, tag FROM _cf_ALARM WHERE id = 1",
          [],
          |r| {
            Ok(AlarmRow {
              scheduled_ms: r.get::<_, i64>(0)? as u64,
              retry: r.get(1)?,
              tag: r.get::<_, i64>(2)? as u64,
            })
          },
        )
        .optional();
      match row {
        Ok(row) => Ok(row),
        // The table appears with the first setAlarm().
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table") => {
          Ok(None)
        }
        Err(e) => Err(sqlite_error(e)),
      }
    })
  }

  /// Writes `row` (a new alarm or a retry) in the implicit transaction.
  pub fn alarm_put(&mut self, row: &AlarmRow) -> Result<(), StorageError> {
    self.internal(|db| {
      db.begin_write()?;
      db.conn.execute_batch(CREATE).map_err(sqlite_error)?;
      db.conn
        .execute(
          "INSERT OR REPLACE INTO _cf_ALARM (id, scheduled_ms, retry, tag) VALUES (1, ?1, ?2, ?3)",
          (row.scheduled_ms as i64, row.retry, row.tag as i64),
        )
        .map_err(sqlite_error)?;
      Ok(())
    })
  }

  /// Deletes the alarm; whether there was one.
  pub fn alarm_delete(&mut self) -> Result<bool, StorageError> {
    if self.alarm_get()?.is_none() {
      return Ok(false);
    }
    self.delete_row()?;
    Ok(true)
  }

  fn delete_row(&mut self) -> Result<(), StorageError> {
    self.internal(|db| {
      db.begin_write()?;
      db.conn
        .execute("DELETE FROM _cf_ALARM WHERE id = 1", [])
        .map_err(sqlite_error)?;
      Ok(())
    })
  }

  /// Applies the end of a run of the alarm `fired` (see `logic::alarm`);
  /// returns the alarm still stored afterwards, to schedule.
  pub fn alarm_finish(
    &mut self,
    fired: &AlarmRow,
    outcome: AlarmOutcome,
    now_ms: u64,
  ) -> Result<Option<AlarmRow>, StorageError> {
    let current = self.alarm_get()?;
    match alarm::after_run(fired, current.as_ref(), outcome, now_ms) {
      AlarmAction::Keep => Ok(current),
      AlarmAction::Delete | AlarmAction::Drop => {
        self.delete_row()?;
        Ok(None)
      }
      AlarmAction::Reschedule(row) => {
        self.alarm_put(&row)?;
        Ok(Some(row))
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn db(name: &str) -> CellDb {
    let dir = std::env::temp_dir().join(format!("cellhost-alarm-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    CellDb::open(&dir.join("c.sqlite")).unwrap()
  }

  fn row(ms: u64, tag: u64) -> AlarmRow {
    alarm::set_alarm(ms, tag)
  }

  #[test]
  fn the_row_commits_and_rolls_back_with_the_turn() {
    let mut db = db("txn");
    assert_eq!(db.alarm_get().unwrap(), None);
    db.alarm_put(&row(10, 1)).unwrap();
    db.rollback();
    assert_eq!(db.alarm_get().unwrap(), None);
    db.alarm_put(&row(20, 2)).unwrap();
    db.commit().unwrap();
    assert_eq!(db.alarm_get().unwrap(), Some(row(20, 2)));
    assert!(db.alarm_delete().unwrap());
    assert!(!db.alarm_delete().unwrap());
    db.commit().unwrap();
    assert_eq!(db.alarm_get().unwrap(), None);
  }

  #[test]
  fn finishing_a_run_applies_the_retry_rules() {
    let mut db = db("finish");
    let fired = row(100, 7);
    db.alarm_put(&fired).unwrap();
    // A counted failure: retried 2 s later, one failure counted.
    let next = db.alarm_finish(&fired, AlarmOutcome::Failure { counted: true }, 1_000);
    let retry = AlarmRow {
      scheduled_ms: 3_000,
      retry: 1,
      tag: 7,
    };
    assert_eq!(next.unwrap(), Some(retry));
    // Success of that retry deletes it.
    assert_eq!(
      db.alarm_finish(&retry, AlarmOutcome::Success, 3_000)
        .unwrap(),
      None
    );
    assert_eq!(db.alarm_get().unwrap(), None);
    // A handler that re-armed keeps its new alarm, success or not.
    db.alarm_put(&row(500, 9)).unwrap();
    let kept = db.alarm_finish(&fired, AlarmOutcome::Failure { counted: true }, 1_000);
    assert_eq!(kept.unwrap(), Some(row(500, 9)));
    // The sixth counted retry used up, the next failure drops the alarm.
    let spent = AlarmRow {
      scheduled_ms: 1,
      retry: 6,
      tag: 3,
    };
    db.alarm_put(&spent).unwrap();
    let dropped = db.alarm_finish(&spent, AlarmOutcome::Failure { counted: true }, 1_000);
    assert_eq!(dropped.unwrap(), None);
    assert_eq!(db.alarm_get().unwrap(), None);
  }
}

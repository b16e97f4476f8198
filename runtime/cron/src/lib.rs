//! Cron Triggers: the expressions of `triggers.crons`, parsed by saffron
//! (the parser Cloudflare's Cron Triggers use), and a clock thread that
//! fires each one when due. Deciding what is due is pure (`due_after`), so
//! tests drive it with any time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, TimeZone, Utc};
use saffron::Cron;

pub struct Crons(Vec<(String, Cron)>);

impl Crons {
  /// Parses every expression; the first bad one is named.
  pub fn parse(list: &[String]) -> Result<Crons, String> {
    let mut out = Vec::new();
    for text in list {
      let cron: Cron = text
        .parse()
        .map_err(|e| format!("invalid cron expression {text:?}: {e}"))?;
      if !cron.any() {
        return Err(format!("cron expression {text:?} never fires"));
      }
      out.push((text.clone(), cron));
    }
    Ok(Crons(out))
  }

  pub fn is_empty(&self) -> bool {
    self.0.is_empty()
  }

  /// The next time after `after_ms` (ms since the epoch) that any
  /// expression fires, with every expression due then.
  pub fn due_after(&self, after_ms: u64) -> Option<(u64, Vec<String>)> {
    let after: DateTime<Utc> = Utc.timestamp_millis_opt(after_ms as i64).single()?;
    let mut best: Option<(u64, Vec<String>)> = None;
    for (text, cron) in &self.0 {
      let Some(next) = cron.next_after(after) else {
        continue;
      };
      let ms = next.timestamp_millis() as u64;
      match &mut best {
        Some((t, names)) if *t == ms => names.push(text.clone()),
        Some((t, _)) if *t < ms => {}
        _ => best = Some((ms, vec![text.clone()])),
      }
    }
    best
  }

  /// Fires `fire(cron, scheduled_time_ms)` for each expression when due,
  /// on a thread of its own, for as long as the process runs.
  pub fn spawn(self, fire: impl Fn(String, u64) + Send + 'static) {
    std::thread::Builder::new()
      .name("cron".into())
      .spawn(move || {
        let mut last = now_ms();
        loop {
          let Some((at, names)) = self.due_after(last) else {
            return;
          };
          let now = now_ms();
          if at > now {
            std::thread::sleep(Duration::from_millis(at - now));
          }
          for name in names {
            fire(name, at);
          }
          last = at;
        }
      })
      .expect("starting the cron thread");
  }
}

fn now_ms() -> u64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
  use super::*;

  fn ms(s: &str) -> u64 {
    DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis() as u64
  }

  #[test]
  fn next_due_times() {
    let c = Crons::parse(&[
      "*/15 * * * *".into(),
      "0 * * * *".into(),
      "30 9 * * MON".into(),
    ])
    .unwrap();
    let (at, names) = c.due_after(ms("2026-12-02T07:01:00Z")).unwrap();
    assert_eq!(at, ms("2026-12-02T07:15:00Z"));
    assert_eq!(names, vec!["*/15 * * * *"]);
    let (at, names) = c.due_after(ms("2026-12-02T07:45:00Z")).unwrap();
    assert_eq!(at, ms("2026-12-02T08:00:00Z"));
    assert_eq!(names, vec!["*/15 * * * *", "0 * * * *"]);
    // 2026-12-07 is a Monday.
    let only = Crons::parse(&["30 9 * * MON".into()]).unwrap();
    assert_eq!(
      only.due_after(ms("2026-12-02T07:00:00Z")).unwrap().0,
      ms("2026-12-07T09:30:00Z")
    );
  }

  #[test]
  fn bad_expressions_are_named() {
    let e = Crons::parse(&["* * * * *".into(), "61 * * * *".into()])
      .err()
      .unwrap();
    assert!(e.contains("\"61 * * * *\""), "{e}");
    assert!(Crons::parse(&["nonsense".into()]).is_err());
  }
}

//! Giving memory back when an isolate falls quiet. A burst of work leaves
//! garbage in V8's heap and freed-but-kept chunks in the allocator's arenas;
//! neither shrinks by itself while nothing runs, so a node that served a
//! burst and then waits keeps the burst's footprint. Once an isolate has
//! taken no job for `QUIET`, it collects its heap fully and the allocator
//! returns its free pages to the system: once per quiet spell, so a steady
//! trickle of requests costs at most one collection per `QUIET`.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use deno_core::JsRuntime;
use tokio::time::{Instant, Sleep};

/// How long without a new job counts as idle.
pub(crate) const QUIET: Duration = Duration::from_secs(1);

pub(crate) struct Quiet {
  /// The inbox's job count when last seen (`Inbox::taken`).
  seen: Option<u32>,
  /// When the isolate counts as quiet, unless a job comes first.
  deadline: Instant,
  /// Whether this quiet spell's memory was given back already.
  released: bool,
  /// Wakes the event loop at `deadline`.
  timer: Pin<Box<Sleep>>,
}

impl Quiet {
  pub(crate) fn new() -> Self {
    let deadline = Instant::now() + QUIET;
    Quiet {
      seen: None,
      deadline,
      released: false,
      timer: Box::pin(tokio::time::sleep_until(deadline)),
    }
  }

  /// Called after each turn of the event loop, at `now`, with the inbox's
  /// job count; `busy` says the isolate still has work of its own (an
  /// unsettled durability round, say). True once the isolate has taken no
  /// job for `QUIET` with nothing else pending: time to `release`.
  /// Otherwise keeps the timer armed (registered with `cx`).
  pub(crate) fn due(&mut self, cx: &mut Context<'_>, now: Instant, taken: u32, busy: bool) -> bool {
    if self.seen != Some(taken) || busy {
      self.seen = Some(taken);
      self.released = false;
      self.deadline = now + QUIET;
      self.timer.as_mut().reset(self.deadline);
    }
    if self.released {
      return false;
    }
    if now < self.deadline {
      let _ = self.timer.as_mut().poll(cx);
      return false;
    }
    self.released = true;
    true
  }
}

/// A full collection (V8 then frees the pages it emptied) and, with glibc,
/// every arena's free pages handed back: the threads' arenas keep what
/// they freed unless asked.
pub(crate) fn release(js: &mut JsRuntime) {
  js.v8_isolate().low_memory_notification();
  #[cfg(all(target_os = "linux", target_env = "gnu"))]
  // SAFETY: malloc_trim only walks the allocator's own free lists.
  unsafe {
    libc::malloc_trim(0);
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  /// One turn of the event loop at `now`, with a no-op waker.
  fn turn(q: &mut Quiet, now: Instant, taken: u32, busy: bool) -> bool {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    q.due(&mut cx, now, taken, busy)
  }

  #[tokio::test]
  async fn releases_once_per_quiet_spell_and_never_while_work_arrives() {
    let mut q = Quiet::new();
    let mut now = Instant::now();
    assert!(!turn(&mut q, now, 1, false));
    // Jobs keep coming faster than QUIET: never due.
    for n in 2..20 {
      now += QUIET / 2;
      assert!(!turn(&mut q, now, n, false), "due while job {n} arrived");
    }
    now += QUIET / 2;
    assert!(!turn(&mut q, now, 19, false), "due before QUIET passed");
    now += QUIET / 2;
    assert!(
      turn(&mut q, now, 19, false),
      "not due after QUIET without a job"
    );
    // Once per spell, however long it lasts.
    now += QUIET * 5;
    assert!(!turn(&mut q, now, 19, false));
    // A new job starts a new spell.
    assert!(!turn(&mut q, now, 20, false));
    now += QUIET;
    assert!(turn(&mut q, now, 20, false));
  }

  #[tokio::test]
  async fn an_unsettled_round_keeps_the_isolate_busy() {
    let mut q = Quiet::new();
    let mut now = Instant::now();
    assert!(!turn(&mut q, now, 1, true));
    now += QUIET * 2;
    assert!(
      !turn(&mut q, now, 1, true),
      "due while a round was in flight"
    );
    now += QUIET;
    assert!(turn(&mut q, now, 1, false));
  }
}

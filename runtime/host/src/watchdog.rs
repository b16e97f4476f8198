//! The CPU and heap watchdog. Each isolate thread marks when it runs
//! JavaScript (an odd epoch); one watchdog thread samples the thread's CPU
//! clock and terminates a run that used more than the limit. The hot path is
//! two atomic increments per event-loop poll; the CPU clock is read only by
//! the watchdog.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use deno_core::v8;

pub struct Watch {
  epoch: AtomicU64,
  clock: Mutex<Option<libc::clockid_t>>,
  handle: Mutex<Option<v8::IsolateHandle>>,
  killed: Mutex<Option<String>>,
}

impl Watch {
  pub fn new() -> Arc<Self> {
    Arc::new(Watch {
      epoch: AtomicU64::new(0),
      clock: Mutex::new(None),
      handle: Mutex::new(None),
      killed: Mutex::new(None),
    })
  }

  /// Called on the isolate thread itself, once.
  pub fn register_thread(&self) {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: pthread_self is always valid for the calling thread.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
    if rc == 0 {
      *self.clock.lock().unwrap() = Some(clock);
    }
  }

  pub fn set_isolate(&self, handle: v8::IsolateHandle) {
    *self.handle.lock().unwrap() = Some(handle);
    *self.killed.lock().unwrap() = None;
  }

  #[inline]
  pub fn enter(&self) {
    self.epoch.fetch_add(1, Ordering::Release);
  }

  #[inline]
  pub fn leave(&self) {
    self.epoch.fetch_add(1, Ordering::Release);
  }

  /// Stops the running JavaScript; the isolate thread recycles the isolate.
  pub fn kill(&self, reason: String) {
    let mut killed = self.killed.lock().unwrap();
    if killed.is_none() {
      *killed = Some(reason);
    }
    if let Some(h) = self.handle.lock().unwrap().as_ref() {
      h.terminate_execution();
    }
  }

  /// Whether the running JavaScript was stopped (the reason not yet taken).
  pub fn killed(&self) -> bool {
    self.killed.lock().unwrap().is_some()
  }

  pub fn take_kill(&self) -> Option<String> {
    self.killed.lock().unwrap().take()
  }

  fn cpu_ns(&self) -> Option<u64> {
    let clock = (*self.clock.lock().unwrap())?;
    let mut ts = libc::timespec {
      tv_sec: 0,
      tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; a clock of an exited thread just errors.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
  }
}

struct Watched {
  watch: Arc<Watch>,
  cpu_limit_ns: u64,
  seen_epoch: u64,
  cpu_at_start: u64,
}

static WATCHED: OnceLock<Mutex<Vec<Watched>>> = OnceLock::new();

/// Puts a thread under the CPU limit; starts the watchdog thread on first use.
pub fn watch(watch: Arc<Watch>, cpu_limit: Duration) {
  let list = WATCHED.get_or_init(|| {
    std::thread::Builder::new()
      .name("cellhost-watchdog".into())
      .spawn(run)
      .expect("spawning the watchdog thread");
    Mutex::new(Vec::new())
  });
  list.lock().unwrap().push(Watched {
    watch,
    cpu_limit_ns: cpu_limit.as_nanos() as u64,
    seen_epoch: 0,
    cpu_at_start: 0,
  });
}

fn run() {
  loop {
    let tick = {
      let Some(list) = WATCHED.get() else {
        std::thread::sleep(Duration::from_millis(10));
        continue;
      };
      let mut list = list.lock().unwrap();
      let mut tick = Duration::from_millis(100);
      for w in list.iter_mut() {
        tick = tick.min(Duration::from_nanos(w.cpu_limit_ns / 20).max(Duration::from_millis(1)));
        let epoch = w.watch.epoch.load(Ordering::Acquire);
        if epoch % 2 == 0 {
          continue; // idle
        }
        let Some(cpu) = w.watch.cpu_ns() else {
          continue;
        };
        if epoch != w.seen_epoch {
          w.seen_epoch = epoch;
          w.cpu_at_start = cpu;
        } else if cpu.saturating_sub(w.cpu_at_start) >= w.cpu_limit_ns {
          let ms = w.cpu_limit_ns / 1_000_000;
          w.watch
            .kill(format!("a request exceeded the CPU time limit of {ms} ms"));
        }
      }
      tick
    };
    std::thread::sleep(tick);
  }
}

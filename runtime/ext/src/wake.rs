//! Alarm delivery on this node: a timer thread over every cell's next alarm
//! time, fed by `setAlarm()` and by the local wake index at start. When an
//! alarm is due it sends an alarm job to the isolate that hosts the object
//! (constructing it again if it was evicted); the job checks the cell's
//! stored alarm before anything runs.
//!
//! On a bucket the schedule also keeps the fleet's wake index: a hint
//! published before the commit that moves an alarm earlier, dropped when a
//! wake finds no alarm, and a waker thread that reads the index every poll
//! interval and wakes the due cells recorded for this node and, holding the
//! waker role, those nobody live holds (taking them here).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cellhost_fleet::{Fleet, Hint, cell_scope, now_ms, split_scope};

use cellhost_storage::{WakeDb, WakeEntry};

use crate::actor::Router;
use crate::http::{ActorTarget, AlarmJob, Job};
use crate::id;

/// While an alarm runs its entry stays scheduled this far ahead, so an
/// isolate that dies mid-handler (CPU limit, crash) does not lose it: the
/// entry fires again and the stored row, untouched, runs again uncounted.
const GUARD_MS: u64 = 60_000;

type CellKey = (u32, String);

#[derive(Clone)]
pub struct Wake {
  inner: Arc<Inner>,
}

struct Inner {
  state: Mutex<State>,
  cv: Condvar,
  db: Arc<Mutex<WakeDb>>,
  router: Router,
  fleet: Option<Arc<Fleet>>,
  /// Set when a newer version's schedule took this one's over: calls go
  /// there and this one's threads end.
  next: Mutex<Option<Wake>>,
}

#[derive(Default)]
struct State {
  due: BTreeSet<(u64, CellKey)>,
  at: HashMap<CellKey, (u64, Option<String>)>,
  /// What the index holds: entries never later than the stored alarm.
  indexed: HashMap<CellKey, u64>,
  /// The hints this process published to the fleet's index. Kept apart
  /// from `indexed`: the local index outlives the process, and another
  /// node may have dropped a hint since (after the cell moved there).
  published: HashMap<CellKey, u64>,
}

impl Wake {
  /// Opens the index under `data_dir`, schedules what it holds and starts
  /// the timer thread.
  pub fn start(data_dir: &Path, router: Router, fleet: Option<Arc<Fleet>>) -> Result<Wake, String> {
    let db = WakeDb::open(&data_dir.join("wake.sqlite")).map_err(|e| format!("wake index: {e}"))?;
    Self::with_db(Arc::new(Mutex::new(db)), router, fleet)
  }

  /// The schedule of a newer version's pool in this process, on this
  /// schedule's index (see `hand_to`).
  pub fn successor(&self, router: Router) -> Result<Wake, String> {
    Self::with_db(self.inner.db.clone(), router, self.inner.fleet.clone())
  }

  fn with_db(
    db: Arc<Mutex<WakeDb>>,
    router: Router,
    fleet: Option<Arc<Fleet>>,
  ) -> Result<Wake, String> {
    let mut state = State::default();
    let entries = db.lock().unwrap().load();
    for e in entries.map_err(|e| format!("wake index: {e}"))? {
      // Entries of classes no longer bound stay for a later run.
      if let Some(ns) = router
        .namespaces
        .iter()
        .position(|n| n.unique_key == e.unique_key)
      {
        let key = (ns as u32, e.id);
        state.indexed.insert(key.clone(), e.at_ms);
        state.set(key, e.at_ms, e.name);
      }
    }
    let wake = Wake {
      inner: Arc::new(Inner {
        state: Mutex::new(state),
        cv: Condvar::new(),
        db,
        router,
        fleet,
        next: Mutex::new(None),
      }),
    };
    let inner = wake.inner.clone();
    std::thread::Builder::new()
      .name("cellhost-wake".into())
      .spawn(move || inner.run())
      .map_err(|e| e.to_string())?;
    if wake.inner.fleet.is_some() {
      let inner = wake.inner.clone();
      std::thread::Builder::new()
        .name("cellhost-waker".into())
        .spawn(move || inner.waker())
        .map_err(|e| e.to_string())?;
    }
    Ok(wake)
  }

  /// Hands this schedule over to `next` (a newer version's pool in this
  /// process): every scheduled alarm moves there, later calls go there, and
  /// this schedule's threads end.
  pub fn hand_to(&self, next: &Wake) {
    let mut st = self.inner.state.lock().unwrap();
    *self.inner.next.lock().unwrap() = Some(next.clone());
    let mut to = next.inner.state.lock().unwrap();
    for ((ns, id), (at, name)) in std::mem::take(&mut st.at) {
      let Some(n) = self.inner.ns_in(next, ns) else {
        continue;
      };
      let key = (n, id);
      if let Some(t) = st.indexed.get(&(ns, key.1.clone())) {
        to.indexed.entry(key.clone()).or_insert(*t);
      }
      if let Some(t) = st.published.get(&(ns, key.1.clone())) {
        to.published.entry(key.clone()).or_insert(*t);
      }
      to.set(key, at, name);
    }
    st.due.clear();
    drop(to);
    next.inner.cv.notify_one();
    self.inner.cv.notify_one();
  }

  /// The newer schedule calls go to, with the namespace index there.
  fn forwarded(&self, ns: u32) -> Option<(Wake, Option<u32>)> {
    let next = self.inner.next.lock().unwrap().clone()?;
    let n = self.inner.ns_in(&next, ns);
    Some((next, n))
  }

  /// The cell's alarm is (now) due at `at_ms`. A time earlier than the
  /// index holds is written to the index, durably (and on a bucket to the
  /// fleet's index too), before the commit that stores the alarm, so the
  /// index is never later than the cell.
  pub fn schedule(
    &self,
    ns: u32,
    id: &str,
    name: Option<String>,
    at_ms: u64,
  ) -> Result<(), String> {
    if let Some((next, n)) = self.forwarded(ns) {
      return match n {
        Some(n) => next.schedule(n, id, name, at_ms),
        None => Err("this Durable Object class is not in the Worker's new version".into()),
      };
    }
    let key = (ns, id.to_string());
    let mut st = self.inner.state.lock().unwrap();
    if let Some(fleet) = &self.inner.fleet
      && st.published.get(&key).is_none_or(|&t| at_ms < t)
    {
      let hint = Hint {
        at_ms,
        name: name.clone(),
      };
      fleet.publish_hint(&self.inner.scope(ns, id), hint)?;
      st.published.insert(key.clone(), at_ms);
    }
    if st.indexed.get(&key).is_none_or(|&t| at_ms < t) {
      let unique_key = self.inner.router.namespaces[ns as usize].unique_key.clone();
      let entry = WakeEntry {
        unique_key,
        id: id.into(),
        name: name.clone(),
        at_ms,
      };
      self
        .inner
        .db
        .lock()
        .unwrap()
        .put(&entry)
        .map_err(|e| e.to_string())?;
      st.indexed.insert(key.clone(), at_ms);
    }
    st.set(key, at_ms, name);
    self.inner.cv.notify_one();
    Ok(())
  }

  /// The cell holds no alarm now: stop waking it (its index entry stays,
  /// a harmless hint, until a wake finds the cell without an alarm).
  pub fn cancel(&self, ns: u32, id: &str) {
    if let Some((next, n)) = self.forwarded(ns) {
      if let Some(n) = n {
        next.cancel(n, id);
      }
      return;
    }
    self
      .inner
      .state
      .lock()
      .unwrap()
      .unset(&(ns, id.to_string()));
  }

  /// A wake found the cell without an alarm: drop its hint too.
  pub fn forget(&self, ns: u32, id: &str) {
    if let Some((next, n)) = self.forwarded(ns) {
      if let Some(n) = n {
        next.forget(n, id);
      }
      return;
    }
    let key = (ns, id.to_string());
    if let Some(fleet) = &self.inner.fleet {
      fleet.drop_hint(&self.inner.scope(ns, id));
    }
    let mut st = self.inner.state.lock().unwrap();
    st.unset(&key);
    st.published.remove(&key);
    if st.indexed.remove(&key).is_some() {
      let unique_key = &self.inner.router.namespaces[ns as usize].unique_key;
      if let Err(e) = self.inner.db.lock().unwrap().remove(unique_key, id) {
        tracing::warn!("wake index: {e}");
      }
    }
  }
}

impl State {
  fn set(&mut self, key: CellKey, at_ms: u64, name: Option<String>) {
    self.unset(&key);
    self.due.insert((at_ms, key.clone()));
    self.at.insert(key, (at_ms, name));
  }

  fn unset(&mut self, key: &CellKey) {
    if let Some((at, _)) = self.at.remove(key) {
      self.due.remove(&(at, key.clone()));
    }
  }
}

impl Inner {
  /// Namespace `ns` of this schedule's Worker, as `next`'s Worker numbers it.
  fn ns_in(&self, next: &Wake, ns: u32) -> Option<u32> {
    let uk = &self.router.namespaces.get(ns as usize)?.unique_key;
    let n = next
      .inner
      .router
      .namespaces
      .iter()
      .position(|n| &n.unique_key == uk);
    if n.is_none() {
      tracing::warn!("alarms of {uk} dropped: the class is not in the new version");
    }
    n.map(|n| n as u32)
  }

  fn handed_over(&self) -> bool {
    self.next.lock().unwrap().is_some()
  }

  /// The cell's name on the bucket (`Class:id`).
  fn scope(&self, ns: u32, id: &str) -> String {
    cell_scope(&self.router.namespaces[ns as usize].class_name, id)
  }

  /// The waker: a pass over the wake index at start and every poll
  /// interval; each cell it returns gets an alarm job here, which takes the
  /// cell if needed and lets its stored alarm decide.
  fn waker(&self) {
    let Some(fleet) = &self.fleet else { return };
    while !self.handed_over() {
      match fleet.wake_pass() {
        Ok(due) => {
          for (scope, hint) in due {
            self.wake_from_index(&scope, hint.name);
          }
        }
        Err(e) => tracing::warn!("waker: {e}"),
      }
      std::thread::sleep(Duration::from_millis(fleet.wake_poll_ms()));
    }
  }

  fn wake_from_index(&self, scope: &str, name: Option<String>) {
    let (class, id) = split_scope(scope);
    let Some(ns) = self
      .router
      .namespaces
      .iter()
      .position(|n| n.class_name == class)
    else {
      return; // a class this Worker does not bind: another deployment's
    };
    // A key another writer put in the bucket must name a real object of
    // the namespace, spelled as its cell is (lower case), before it
    // reaches placement.
    if !id::is_canonical(&self.router.namespaces[ns].key, id) {
      tracing::warn!("waker: {scope:?} names no Durable Object");
      return;
    }
    tracing::debug!("waker: {scope} has a due wake entry");
    let target = ActorTarget {
      ns: ns as u32,
      id: id.to_string(),
      name,
      from: None,
    };
    let _ = self
      .router
      .send(&target.clone(), Job::Alarm(AlarmJob { target }));
  }

  fn run(&self) {
    let mut st = self.state.lock().unwrap();
    loop {
      if self.handed_over() {
        return;
      }
      let now = now_ms();
      let next = st.due.first().map(|(at, _)| *at);
      match next {
        Some(at) if at <= now => {
          let (_, key) = st.due.pop_first().unwrap();
          let name = st.at.get(&key).and_then(|(_, n)| n.clone());
          st.set(key.clone(), now + GUARD_MS, name.clone());
          let target = ActorTarget {
            ns: key.0,
            id: key.1,
            name,
            from: None,
          };
          // The isolates are gone only when the process is stopping.
          let _ = self
            .router
            .send(&target.clone(), Job::Alarm(AlarmJob { target }));
        }
        Some(at) => {
          st = self
            .cv
            .wait_timeout(st, Duration::from_millis(at - now))
            .unwrap()
            .0;
        }
        None => st = self.cv.wait(st).unwrap(),
      }
    }
  }
}

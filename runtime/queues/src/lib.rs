//! Queues on this node: every message is a row of `<data>/queues.sqlite`
//! (committed with `synchronous = FULL` before `send()` resolves), and a
//! consumer thread per consumed queue hands batches to the Worker's
//! `queue()` handler. A message leaves the table only once a delivery of
//! it was acknowledged (explicitly, or by the handler returning): a crash
//! at any point redelivers it, so delivery is at least once. Retries count
//! `attempts`; past `max_retries` a message goes to the dead-letter queue
//! (or is dropped, as on Cloudflare, when there is none).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use deno_core::{OpState, op2};
use deno_error::JsErrorBox;
use rusqlite::{Connection, params};
use serde::Deserialize;

deno_core::extension!(
  cellhost_queues,
  deps = [deno_web],
  ops = [op_queue_send],
  esm = [dir "js", "queues.js"],
);

/// A consumer's settings (wrangler's `queues.consumers` entry).
#[derive(Clone, Debug)]
pub struct Consumer {
  pub queue: String,
  pub max_batch_size: usize,
  pub max_batch_timeout: Duration,
  pub max_retries: u32,
  pub dead_letter_queue: Option<String>,
  pub retry_delay: Duration,
}

/// The queues of one data directory.
pub struct QueueStore {
  path: PathBuf,
  db: Mutex<Connection>,
}

fn now_ms() -> i64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as i64)
    .unwrap_or(0)
}

fn failure(path: &Path, e: impl std::fmt::Display) -> String {
  format!("the queue store at {} failed: {e}", path.display())
}

/// One message handed to a consumer.
#[derive(Debug, serde::Serialize)]
pub struct Delivery {
  pub id: String,
  pub timestamp: i64,
  pub body: Vec<u8>,
  pub content_type: String,
  pub attempts: u32,
}

/// What the handler made of a batch (from `js/queues.js`).
#[derive(Debug, Deserialize, Default)]
pub struct Outcome {
  /// The handler returned (false: it threw).
  pub ok: bool,
  #[serde(default)]
  pub ack_all: bool,
  /// `retryAll()` was called, with this delay (seconds) if any.
  #[serde(default)]
  pub retry_all: bool,
  #[serde(default)]
  pub retry_all_delay: Option<f64>,
  #[serde(default)]
  pub acks: Vec<String>,
  /// (id, delaySeconds)
  #[serde(default)]
  pub retries: Vec<(String, Option<f64>)>,
}

impl std::fmt::Debug for QueueStore {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(f, "QueueStore({})", self.path.display())
  }
}

impl QueueStore {
  /// Opens the store; messages a crash left in flight are made visible
  /// again (delivered once more).
  pub fn open(data_dir: &Path) -> Result<Arc<QueueStore>, String> {
    let path = data_dir.join("queues.sqlite");
    let _ = std::fs::create_dir_all(data_dir);
    let db = Connection::open(&path).map_err(|e| failure(&path, e))?;
    db.execute_batch(
      "PRAGMA journal_mode = WAL;
       PRAGMA synchronous = FULL;
       CREATE TABLE IF NOT EXISTS messages (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         id TEXT NOT NULL UNIQUE,
         queue TEXT NOT NULL,
         body BLOB NOT NULL,
         content_type TEXT NOT NULL,
         attempts INTEGER NOT NULL DEFAULT 0,
         created_at INTEGER NOT NULL,
         visible_at INTEGER NOT NULL,
         in_flight INTEGER NOT NULL DEFAULT 0
       );
       CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, in_flight, visible_at, seq);
       UPDATE messages SET in_flight = 0 WHERE in_flight = 1;",
    )
    .map_err(|e| failure(&path, e))?;
    Ok(Arc::new(QueueStore {
      path,
      db: Mutex::new(db),
    }))
  }

  fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
    let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
    f(&db).map_err(|e| failure(&self.path, e))
  }

  /// Stores messages (durable when it returns); `delay_ms` from now.
  pub fn send(
    &self,
    queue: &str,
    messages: &[(String, Vec<u8>, String, i64)],
  ) -> Result<(), String> {
    let now = now_ms();
    self.with(|db| {
      let tx = db.unchecked_transaction()?;
      for (id, body, ct, delay_ms) in messages {
        tx.execute(
          "INSERT INTO messages (id, queue, body, content_type, created_at, visible_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
          params![id, queue, body, ct, now, now + delay_ms.max(&0)],
        )?;
      }
      tx.commit()
    })
  }

  /// The backlog of `queue`: (messages, bytes, oldest enqueue time in ms).
  pub fn metrics(&self, queue: &str) -> Result<(i64, i64, Option<i64>), String> {
    self.with(|db| {
      db.query_row(
        "SELECT count(*), coalesce(sum(length(body)), 0), min(created_at) FROM messages WHERE queue = ?1",
        params![queue],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
      )
    })
  }

  /// Up to `max` visible messages of `queue`, oldest first, with the age
  /// of the oldest; they are not taken.
  fn ready(&self, queue: &str, max: usize) -> Result<(usize, Option<i64>), String> {
    let now = now_ms();
    self.with(|db| {
      let (n, oldest): (i64, Option<i64>) = db.query_row(
        "SELECT count(*), min(visible_at) FROM (SELECT visible_at FROM messages WHERE queue = ?1 AND in_flight = 0 AND visible_at <= ?2 ORDER BY seq LIMIT ?3)",
        params![queue, now, max as i64],
        |r| Ok((r.get(0)?, r.get(1)?)),
      )?;
      Ok((n as usize, oldest.map(|o| now - o)))
    })
  }

  /// Takes up to `max` visible messages (in flight until settled).
  fn take(&self, queue: &str, max: usize) -> Result<Vec<Delivery>, String> {
    let now = now_ms();
    self.with(|db| {
      let tx = db.unchecked_transaction()?;
      let out = {
        let mut st = tx.prepare(
          "SELECT id, created_at, body, content_type, attempts FROM messages WHERE queue = ?1 AND in_flight = 0 AND visible_at <= ?2 ORDER BY seq LIMIT ?3",
        )?;
        st.query_map(params![queue, now, max as i64], |r| {
          Ok(Delivery {
            id: r.get(0)?,
            timestamp: r.get(1)?,
            body: r.get(2)?,
            content_type: r.get(3)?,
            attempts: r.get::<_, u32>(4)? + 1,
          })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
      };
      for d in &out {
        tx.execute(
          "UPDATE messages SET in_flight = 1, attempts = attempts + 1 WHERE id = ?1",
          params![d.id],
        )?;
      }
      tx.commit()?;
      Ok(out)
    })
  }

  /// Applies a batch's outcome: acknowledged messages go, the others come
  /// back after their delay, or move on past `max_retries`.
  fn settle(&self, c: &Consumer, batch: &[Delivery], o: &Outcome) -> Result<(), String> {
    let now = now_ms();
    self.with(|db| {
      let tx = db.unchecked_transaction()?;
      for d in batch {
        let retry = if o.ack_all {
          None
        } else if let Some((_, delay)) = o.retries.iter().find(|(id, _)| *id == d.id) {
          Some(*delay)
        } else if o.acks.contains(&d.id) {
          None
        } else if o.retry_all {
          Some(o.retry_all_delay)
        } else if o.ok {
          None
        } else {
          Some(None)
        };
        match retry {
          None => {
            tx.execute("DELETE FROM messages WHERE id = ?1", params![d.id])?;
          }
          Some(_) if d.attempts > c.max_retries => match &c.dead_letter_queue {
            // A fresh start in the dead-letter queue, as wrangler dev's
            // broker moves it.
            Some(dlq) => {
              tx.execute(
                "UPDATE messages SET queue = ?2, attempts = 0, in_flight = 0, visible_at = ?3 WHERE id = ?1",
                params![d.id, dlq, now],
              )?;
            }
            None => {
              tx.execute("DELETE FROM messages WHERE id = ?1", params![d.id])?;
            }
          },
          Some(delay) => {
            let delay_ms = delay
              .map(|s| (s * 1000.0) as i64)
              .unwrap_or(c.retry_delay.as_millis() as i64);
            tx.execute(
              "UPDATE messages SET in_flight = 0, visible_at = ?2 WHERE id = ?1",
              params![d.id, now + delay_ms],
            )?;
          }
        }
      }
      tx.commit()
    })
  }

  /// Delivers `c.queue` for as long as the process runs, on a thread of its
  /// own: a batch goes out when `max_batch_size` messages are ready or the
  /// oldest ready one has waited `max_batch_timeout`. `deliver` runs the
  /// handler and returns its outcome (None: the isolate is gone).
  pub fn consume(
    self: &Arc<Self>,
    c: Consumer,
    deliver: impl Fn(&str, &[Delivery]) -> Option<Outcome> + Send + 'static,
  ) {
    let store = self.clone();
    std::thread::Builder::new()
      .name(format!("queue {}", c.queue))
      .spawn(move || {
        let mut idle_since = Instant::now();
        loop {
          let (n, oldest) = match store.ready(&c.queue, c.max_batch_size) {
            Ok(r) => r,
            Err(e) => {
              eprintln!("queue {}: {e}", c.queue);
              std::thread::sleep(Duration::from_secs(1));
              continue;
            }
          };
          let waited = oldest.unwrap_or(0).max(0) as u128;
          if n == 0 || (n < c.max_batch_size && waited < c.max_batch_timeout.as_millis()) {
            // Poll faster while messages wait, slower when idle.
            let pause = if n > 0 || idle_since.elapsed() < Duration::from_secs(2) {
              20
            } else {
              200
            };
            std::thread::sleep(Duration::from_millis(pause));
            continue;
          }
          idle_since = Instant::now();
          let batch = match store.take(&c.queue, c.max_batch_size) {
            Ok(b) if !b.is_empty() => b,
            _ => continue,
          };
          let outcome = deliver(&c.queue, &batch).unwrap_or_default();
          if let Err(e) = store.settle(&c, &batch, &outcome) {
            eprintln!("queue {}: {e}", c.queue);
          }
        }
      })
      .expect("starting a queue consumer");
  }
}

/// `queue.send()` / `sendBatch()`: messages as JSON
/// `[{ id, len, contentType, delayMs }]`, their bodies one after another.
/// Answers the queue's backlog after the send, as JSON
/// `[count, bytes, oldest ms | null]`.
#[op2]
#[string]
async fn op_queue_send(
  state: Rc<RefCell<OpState>>,
  #[string] queue: String,
  #[string] ids: String,
  #[buffer(copy)] bodies: Vec<u8>,
) -> Result<String, JsErrorBox> {
  #[derive(Deserialize)]
  struct Item {
    id: String,
    len: usize,
    #[serde(rename = "contentType")]
    content_type: String,
    #[serde(rename = "delayMs")]
    delay_ms: i64,
  }
  let store = state
    .borrow()
    .try_borrow::<Arc<QueueStore>>()
    .cloned()
    .ok_or_else(|| JsErrorBox::generic("Queues are not available here"))?;
  let items: Vec<Item> =
    serde_json::from_str(&ids).map_err(|e| JsErrorBox::type_error(e.to_string()))?;
  let mut at = 0;
  let mut messages = Vec::new();
  for i in items {
    let body = bodies
      .get(at..at + i.len)
      .ok_or_else(|| JsErrorBox::type_error("message bodies are shorter than announced"))?;
    at += i.len;
    messages.push((i.id, body.to_vec(), i.content_type, i.delay_ms));
  }
  // The commit's fsync runs on the blocking pool, off the isolate thread.
  let (count, bytes, oldest) = tokio::task::spawn_blocking(move || {
    store
      .send(&queue, &messages)
      .map_err(|e| format!("Queue send failed: {e}"))?;
    store.metrics(&queue)
  })
  .await
  .map_err(|e| JsErrorBox::generic(format!("Queue send: {e}")))?
  .map_err(JsErrorBox::generic)?;
  Ok(serde_json::json!([count, bytes, oldest]).to_string())
}

/// The batch as the JS glue reads it.
pub fn batch_json(queue: &str, batch: &[Delivery]) -> String {
  serde_json::json!({
    "queue": queue,
    "messages": batch.iter().map(|d| serde_json::json!({
      "id": d.id,
      "timestamp": d.timestamp,
      "body": d.body,
      "contentType": d.content_type,
      "attempts": d.attempts,
    })).collect::<Vec<_>>(),
  })
  .to_string()
}

//! A follower's node log on disk: for each owner session, the batches the
//! owner sent (fsynced before the follower answers), the owner's prune
//! marks, and the seal a recovery set. The rules (order, gaps, sealing,
//! what a restart can certify) are `cellhost_logic::ensemble::follower`'s;
//! this crate keeps their bytes.
//!
//! Layout: `<dir>/<owner node>/<session>/log` (records appended in order),
//! `<dir>/<owner node>/<session>/sealed` (present once sealed) and
//! `<dir>/<owner node>/<session>/dropped` (present once the session's
//! recovery completed and its records were dropped; the directory stays as
//! a tombstone, so a stale owner's append is still refused as sealed). A
//! record is a 21-byte header — kind (1 batch, 2 prune mark), log epoch
//! (u32), batch number or prune end (u64), body length (u32), then the
//! CRC-32C of those 17 bytes — then the body and its CRC-32C. A batch body
//! is its entries, each a u32 length and the bytes. A header that fails its
//! check is damage of unknown epoch, and the scan stops there (nothing
//! after it can be framed); a body that fails its check is damage of the
//! header's batch, and the scan goes on past it.

mod wire;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use cellhost_logic::ensemble::follower::{
  AppendAnswer, Batch, Scanned, SessionLog, Tail, TailFormat,
};
pub use wire::{decode_append, decode_tail, encode_append, encode_tail};

/// One batch entry: opaque bytes (the owner's LTX object and its key).
pub type Entry = Vec<u8>;

const KIND_BATCH: u8 = 1;
const KIND_PRUNE: u8 = 2;
const HEADER: usize = 21;
/// A session's file past this size, holding no batch, is rewritten.
pub const REWRITE_BYTES: u64 = 1 << 20;

pub(crate) const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

struct Session {
  file: File,
  log: SessionLog<Entry>,
  /// Sealed, its recovery complete, its records gone ([`NodeLog::drop_sealed`]).
  dropped: bool,
}

/// The identity of the node log under `dir`, created on first use: random,
/// so a node restarted without its disk has a new one.
pub fn log_id(dir: &Path) -> io::Result<String> {
  std::fs::create_dir_all(dir)?;
  let path = dir.join("id");
  match std::fs::read_to_string(&path) {
    Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_string()),
    Ok(_) => {}
    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
    Err(e) => return Err(e),
  }
  let mut raw = [0u8; 8];
  File::open("/dev/urandom")?.read_exact(&mut raw)?;
  let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
  let tmp = dir.join("id.tmp");
  let mut f = File::create(&tmp)?;
  f.write_all(id.as_bytes())?;
  f.sync_all()?;
  std::fs::rename(&tmp, &path)?;
  sync_dir(dir)?;
  Ok(id)
}

/// The node log of one follower: every owner session it holds.
pub struct NodeLog {
  id: String,
  dir: PathBuf,
  sessions: BTreeMap<(String, String), Session>,
}

fn checked(name: &str) -> io::Result<&str> {
  let ok = !name.is_empty()
    && name != "."
    && name != ".."
    && name
      .bytes()
      .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
  if ok {
    Ok(name)
  } else {
    Err(io::Error::new(
      io::ErrorKind::InvalidInput,
      format!("invalid node or session name {name:?}"),
    ))
  }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
  File::open(dir)?.sync_all()
}

impl NodeLog {
  /// Opens the log under `dir`, reading back every session it holds. A
  /// directory that cannot be read fails the open (it is not evidence of
  /// anything; the caller retries).
  pub fn open(dir: &Path) -> io::Result<Self> {
    let id = log_id(dir)?;
    let mut sessions = BTreeMap::new();
    for node in std::fs::read_dir(dir)? {
      let node = node?;
      if !node.file_type()?.is_dir() {
        continue;
      }
      for s in std::fs::read_dir(node.path())? {
        let s = s?;
        let (Some(n), Some(id)) = (
          node.file_name().to_str().map(String::from),
          s.file_name().to_str().map(String::from),
        ) else {
          continue;
        };
        let path = s.path();
        let sealed = path.join("sealed").exists();
        let dropped = sealed && path.join("dropped").exists();
        let bytes = match dropped {
          true => Vec::new(),
          false => std::fs::read(path.join("log"))?,
        };
        let log = SessionLog::restored(sealed, scan(&bytes));
        let file = OpenOptions::new().append(true).open(path.join("log"))?;
        sessions.insert((n, id), Session { file, log, dropped });
      }
    }
    Ok(NodeLog {
      id,
      dir: dir.to_path_buf(),
      sessions,
    })
  }

  /// This log's identity ([`log_id`]).
  pub fn id(&self) -> &str {
    &self.id
  }

  fn session(&mut self, node: &str, session: &str) -> io::Result<&mut Session> {
    let key = (checked(node)?.to_string(), checked(session)?.to_string());
    if !self.sessions.contains_key(&key) {
      let dir = self.dir.join(node).join(session);
      std::fs::create_dir_all(&dir)?;
      let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("log"))?;
      file.sync_all()?;
      sync_dir(&dir)?;
      sync_dir(dir.parent().unwrap())?;
      self.sessions.insert(
        key.clone(),
        Session {
          file,
          log: SessionLog::new(),
          dropped: false,
        },
      );
    }
    Ok(self.sessions.get_mut(&key).unwrap())
  }

  /// Appends a batch of `node`'s `session`; a `Stored` answer is given
  /// only once the batch is on disk.
  pub fn append(
    &mut self,
    node: &str,
    session: &str,
    batch: Batch<Entry>,
  ) -> io::Result<AppendAnswer> {
    let s = self.session(node, session)?;
    // On disk before the state says so: a failed write stores nothing.
    if s.log.takes(&batch) {
      let bytes = encode_record(
        KIND_BATCH,
        batch.epoch,
        batch.seq,
        &wire::entries(&batch.entries),
      );
      s.file.write_all(&bytes)?;
      s.file.sync_data()?;
    }
    Ok(s.log.append(batch))
  }

  /// Seals `node`'s `session`: no append is stored after this returns.
  pub fn seal(&mut self, node: &str, session: &str) -> io::Result<()> {
    let dir = self.dir.join(checked(node)?).join(checked(session)?);
    let s = self.session(node, session)?;
    if s.log.is_sealed() {
      return Ok(());
    }
    File::create(dir.join("sealed"))?.sync_all()?;
    sync_dir(&dir)?;
    s.log.seal();
    Ok(())
  }

  /// The owner has the batches of `epoch` up to `through` in the bucket.
  /// Once the session holds no batch and its file passed [`REWRITE_BYTES`],
  /// the file is rewritten as its prune marks alone.
  pub fn prune(&mut self, node: &str, session: &str, epoch: u32, through: u64) -> io::Result<()> {
    let dir = self.dir.join(checked(node)?).join(checked(session)?);
    let s = self.session(node, session)?;
    if s.dropped {
      return Ok(());
    }
    s.file
      .write_all(&encode_record(KIND_PRUNE, epoch, through, &[]))?;
    s.log.prune(epoch, through);
    if s.file.metadata()?.len() > REWRITE_BYTES
      && let Ok(Tail::Ranged { epochs, .. }) = s.log.tail(TailFormat::Ranged)
      && epochs.iter().all(|e| e.batches.is_empty() && e.certified)
    {
      let marks: Vec<u8> = (epochs.iter())
        .flat_map(|e| encode_record(KIND_PRUNE, e.epoch, e.through, &[]))
        .collect();
      let tmp = dir.join("log.tmp");
      let mut f = File::create(&tmp)?;
      f.write_all(&marks)?;
      f.sync_all()?;
      std::fs::rename(&tmp, dir.join("log"))?;
      sync_dir(&dir)?;
      s.file = OpenOptions::new().append(true).open(dir.join("log"))?;
    }
    Ok(())
  }

  /// The tail of `node`'s `session` (empty when it holds none).
  pub fn tail(
    &mut self,
    node: &str,
    session: &str,
    format: TailFormat,
  ) -> Result<Tail<Entry>, String> {
    let s = self.session(node, session).map_err(|e| e.to_string())?;
    if s.dropped {
      // Not an empty tail: that would pass for a complete one. Whoever asks
      // reads the record again and finds the session sealed.
      return Err(format!(
        "{node}'s log session {session} was recovered and sealed, and this follower dropped its copy"
      ));
    }
    s.log.tail(format)
  }

  /// The sealed sessions whose records are still kept: once the bucket's
  /// record of one says `sealed`, its recovery uploaded what it held, and
  /// [`NodeLog::drop_sealed`] may free it.
  pub fn sealed_sessions(&self) -> Vec<(String, String)> {
    (self.sessions.iter())
      .filter(|(_, s)| s.log.is_sealed() && !s.dropped)
      .map(|(k, _)| k.clone())
      .collect()
  }

  /// Drops the records of a sealed session, keeping its directory as a
  /// tombstone (`sealed` and `dropped`): appends stay refused and tails
  /// fail. Only for a session whose bucket record says `sealed` (its
  /// recovery uploaded everything); an unsealed session is refused.
  pub fn drop_sealed(&mut self, node: &str, session: &str) -> io::Result<()> {
    let dir = self.dir.join(checked(node)?).join(checked(session)?);
    let s = self.session(node, session)?;
    if !s.log.is_sealed() {
      return Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{node}'s log session {session} is not sealed"),
      ));
    }
    if s.dropped {
      return Ok(());
    }
    // The marker first: a crash before the truncation leaves a dropped
    // session whose bytes are ignored, never a truncated one that reads as
    // complete.
    File::create(dir.join("dropped"))?.sync_all()?;
    sync_dir(&dir)?;
    let tmp = dir.join("log.tmp");
    File::create(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join("log"))?;
    sync_dir(&dir)?;
    s.file = OpenOptions::new().append(true).open(dir.join("log"))?;
    s.log = SessionLog::restored(true, Vec::new());
    s.dropped = true;
    Ok(())
  }
}

fn encode_record(kind: u8, epoch: u32, seq: u64, body: &[u8]) -> Vec<u8> {
  let mut out = Vec::with_capacity(HEADER + body.len() + 4);
  out.push(kind);
  out.extend_from_slice(&epoch.to_be_bytes());
  out.extend_from_slice(&seq.to_be_bytes());
  out.extend_from_slice(&(body.len() as u32).to_be_bytes());
  let h = CRC.checksum(&out);
  out.extend_from_slice(&h.to_be_bytes());
  out.extend_from_slice(body);
  out.extend_from_slice(&CRC.checksum(body).to_be_bytes());
  out
}

fn be32(b: &[u8]) -> u32 {
  u32::from_be_bytes(b[..4].try_into().unwrap())
}

/// Reads a session's records back, in order.
pub(crate) fn scan(bytes: &[u8]) -> Vec<Scanned<Entry>> {
  let mut out = Vec::new();
  let mut at = 0;
  while at < bytes.len() {
    let h = &bytes[at..];
    if h.len() < HEADER || CRC.checksum(&h[..17]) != be32(&h[17..]) {
      out.push(Scanned::Damaged { at: None });
      break;
    }
    let (kind, epoch) = (h[0], be32(&h[1..]));
    let seq = u64::from_be_bytes(h[5..13].try_into().unwrap());
    let len = be32(&h[13..]) as usize;
    let Some(rest) = h.get(HEADER..HEADER + len + 4) else {
      // Torn: the body never made it whole.
      out.push(Scanned::Damaged {
        at: (kind == KIND_BATCH).then_some((epoch, seq)),
      });
      break;
    };
    let body = &rest[..len];
    let good = CRC.checksum(body) == be32(&rest[len..]);
    out.push(match (kind, good) {
      (KIND_BATCH, true) => match wire::parse_entries(body) {
        Some(entries) => Scanned::Batch(Batch {
          epoch,
          seq,
          entries,
        }),
        None => Scanned::Damaged {
          at: Some((epoch, seq)),
        },
      },
      (KIND_BATCH, false) => Scanned::Damaged {
        at: Some((epoch, seq)),
      },
      (KIND_PRUNE, true) => Scanned::Pruned {
        epoch,
        through: seq,
      },
      // A damaged prune mark loses nothing: the batches stay.
      (KIND_PRUNE, false) => {
        at += HEADER + len + 4;
        continue;
      }
      _ => Scanned::Damaged { at: None },
    });
    at += HEADER + len + 4;
  }
  out
}

#[cfg(test)]
mod tests;

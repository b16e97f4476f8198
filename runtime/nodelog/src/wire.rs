//! The `/peer/log/tail` response bodies, `CLT1` (entries only) and `CLT2`
//! (entries with each log epoch's range evidence), and batch bodies. All
//! integers big-endian; an entry is a u32 length and its bytes.
//!
//! - `CLT1`: magic, u32 entry count, the entries.
//! - `CLT2`: magic, u8 `whole`, u32 epoch count, then per log epoch: u32
//!   epoch, u64 pruned, u64 through, u8 certified, u32 batch count, and per
//!   batch: u64 number, u32 entry count, the entries.

use cellhost_logic::ensemble::follower::{Batch, EpochTail, Tail};

use crate::Entry;

pub(crate) fn entries(es: &[Entry]) -> Vec<u8> {
  let mut out = Vec::new();
  for e in es {
    out.extend_from_slice(&(e.len() as u32).to_be_bytes());
    out.extend_from_slice(e);
  }
  out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
  fn take(&mut self, n: usize) -> Option<&[u8]> {
    if self.0.len() < n {
      return None;
    }
    let (a, b) = self.0.split_at(n);
    self.0 = b;
    Some(a)
  }
  fn u8(&mut self) -> Option<u8> {
    self.take(1).map(|b| b[0])
  }
  fn u32(&mut self) -> Option<u32> {
    self
      .take(4)
      .map(|b| u32::from_be_bytes(b.try_into().unwrap()))
  }
  fn u64(&mut self) -> Option<u64> {
    self
      .take(8)
      .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
  }
  fn entry(&mut self) -> Option<Entry> {
    let n = self.u32()? as usize;
    self.take(n).map(<[u8]>::to_vec)
  }
  fn entries(&mut self, count: u32) -> Option<Vec<Entry>> {
    (0..count).map(|_| self.entry()).collect()
  }
}

pub(crate) fn parse_entries(mut body: &[u8]) -> Option<Vec<Entry>> {
  let mut out = Vec::new();
  while !body.is_empty() {
    let mut r = Reader(body);
    out.push(r.entry()?);
    body = r.0;
  }
  Some(out)
}

pub fn encode_tail(t: &Tail<Entry>) -> Vec<u8> {
  let mut out = Vec::new();
  match t {
    Tail::Entries(es) => {
      out.extend_from_slice(b"CLT1");
      out.extend_from_slice(&(es.len() as u32).to_be_bytes());
      out.extend_from_slice(&entries(es));
    }
    Tail::Ranged { epochs, whole } => {
      out.extend_from_slice(b"CLT2");
      out.push(u8::from(*whole));
      out.extend_from_slice(&(epochs.len() as u32).to_be_bytes());
      for e in epochs {
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.pruned.to_be_bytes());
        out.extend_from_slice(&e.through.to_be_bytes());
        out.push(u8::from(e.certified));
        out.extend_from_slice(&(e.batches.len() as u32).to_be_bytes());
        for b in &e.batches {
          out.extend_from_slice(&b.seq.to_be_bytes());
          out.extend_from_slice(&(b.entries.len() as u32).to_be_bytes());
          out.extend_from_slice(&entries(&b.entries));
        }
      }
    }
  }
  out
}

/// Decodes either format (a new node asks for `CLT2` but reads both).
pub fn decode_tail(bytes: &[u8]) -> Result<Tail<Entry>, String> {
  let bad = || "a malformed node-log tail".to_string();
  let mut r = Reader(bytes);
  let t = match r.take(4).ok_or_else(bad)? {
    b"CLT1" => {
      let n = r.u32().ok_or_else(bad)?;
      Tail::Entries(r.entries(n).ok_or_else(bad)?)
    }
    b"CLT2" => {
      let whole = r.u8().ok_or_else(bad)? == 1;
      let n = r.u32().ok_or_else(bad)?;
      let mut epochs = Vec::new();
      for _ in 0..n {
        let epoch = r.u32().ok_or_else(bad)?;
        let pruned = r.u64().ok_or_else(bad)?;
        let through = r.u64().ok_or_else(bad)?;
        let certified = r.u8().ok_or_else(bad)? == 1;
        let nb = r.u32().ok_or_else(bad)?;
        let mut batches = Vec::new();
        for _ in 0..nb {
          let seq = r.u64().ok_or_else(bad)?;
          let ne = r.u32().ok_or_else(bad)?;
          let entries = r.entries(ne).ok_or_else(bad)?;
          batches.push(Batch {
            epoch,
            seq,
            entries,
          });
        }
        epochs.push(EpochTail {
          epoch,
          pruned,
          through,
          certified,
          batches,
        });
      }
      Tail::Ranged { epochs, whole }
    }
    m => {
      return Err(format!(
        "unknown node-log tail format {:?}",
        String::from_utf8_lossy(m)
      ));
    }
  };
  if !r.0.is_empty() {
    return Err(bad());
  }
  Ok(t)
}

/// A `/peer/log/append` body: the owner node, the session and the
/// follower's expected log identity (each a u16 length and the bytes), u32
/// log epoch, u64 batch number, then the entries.
pub fn encode_append(owner: &str, session: &str, log: &str, b: &Batch<Entry>) -> Vec<u8> {
  let mut out = Vec::new();
  for s in [owner, session, log] {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
  }
  out.extend_from_slice(&b.epoch.to_be_bytes());
  out.extend_from_slice(&b.seq.to_be_bytes());
  out.extend_from_slice(&entries(&b.entries));
  out
}

/// (owner, session, expected log identity, batch).
pub type Append = (String, String, String, Batch<Entry>);

pub fn decode_append(bytes: &[u8]) -> Result<Append, String> {
  let bad = || "a malformed node-log append".to_string();
  let mut r = Reader(bytes);
  let mut text = || -> Result<String, String> {
    let n = r
      .take(2)
      .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
      .ok_or_else(bad)?;
    let s = r.take(n).ok_or_else(bad)?;
    String::from_utf8(s.to_vec()).map_err(|_| bad())
  };
  let (owner, session, log) = (text()?, text()?, text()?);
  let epoch = r.u32().ok_or_else(bad)?;
  let seq = r.u64().ok_or_else(bad)?;
  let entries = parse_entries(r.0).ok_or_else(bad)?;
  Ok((
    owner,
    session,
    log,
    Batch {
      epoch,
      seq,
      entries,
    },
  ))
}

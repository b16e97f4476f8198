//! The simulated bucket: linearizable, with conditional create, compare-and-
//! swap, plain put, get and list. Each operation takes effect at one
//! instant (its `Apply` event); the faults — latency, reordering, lost
//! answers, outages — live in how requests reach it and answers come back
//! (see `super::World::send`), never in the store itself, which is as
//! correct as the stores celld qualifies.
//!
//! Keys are structured instead of strings to keep seeds fast: `own.json` per
//! cell, `nodes/<node>.json` per node, the LTX objects per cell, epoch and
//! TXID (level 0 only: the simulator does not compact), `wake/waker.json`
//! and one wake hint per cell.

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

use super::T0;
use crate::lease::NodeLease;
use crate::own::OwnRecord;
use crate::restore::LtxKey;
use crate::wake::WakerRecord;
use crate::{ReadResult, StoreError, Token, WriteAnswer};

/// A writer identity: node index and process incarnation.
pub type Writer = (usize, u32);

/// One LTX object: the whole state at TXID 1, else one write.
#[derive(Clone, Debug)]
pub struct LtxObj {
  pub content: Rc<Vec<u64>>,
  pub writer: Writer,
}

/// A cell's LTX objects and their contents, as one LIST-and-GET answer. The
/// objects are immutable under a correct protocol (one writer per epoch,
/// identical retries), so reading them at the listing instant is the same as
/// reading them one by one afterwards.
pub type Listing = Rc<Vec<(LtxKey, Rc<Vec<u64>>)>>;

#[derive(Clone, Debug)]
pub enum Op {
  GetOwn(usize),
  CreateOwn(usize, OwnRecord),
  CasOwn(usize, OwnRecord, Token),
  /// An unconditional write of `own.json`: only a broken variant does this.
  PutOwn(usize, OwnRecord),
  GetLease(usize),
  CreateLease(usize, NodeLease),
  CasLease(usize, NodeLease, Token),
  PutLtx {
    cell: usize,
    epoch: u64,
    txid: u64,
    content: Rc<Vec<u64>>,
  },
  /// A whole-state object covering TXIDs `1..=max` of `epoch`
  /// ([`crate::compact`]).
  PutSnapshot {
    cell: usize,
    epoch: u64,
    max: u64,
    content: Rc<Vec<u64>>,
  },
  ListLtx(usize),
  /// Epoch GC: every object of these epochs of the cell.
  DeleteEpochs(usize, Vec<u64>),
  GetWaker,
  CreateWaker(WakerRecord),
  CasWaker(WakerRecord, Token),
  /// Every wake hint: (cell, due time); one LIST-and-GET answer.
  ListHints,
}

/// The wake hints at the listing instant.
pub type Hints = Rc<Vec<(usize, u64)>>;

impl Op {
  /// The answer a caller sees when the request or its answer is lost.
  pub fn failed(&self) -> Answer {
    let e = || StoreError("request timed out".into());
    match self {
      Op::GetOwn(_) => Answer::Own(Err(e())),
      Op::GetLease(_) => Answer::Lease(Err(e())),
      Op::ListLtx(_) => Answer::List(Err(e())),
      Op::GetWaker => Answer::Waker(Err(e())),
      Op::ListHints => Answer::Hints(Err(e())),
      _ => Answer::Write(WriteAnswer::Ambiguous),
    }
  }
}

impl fmt::Display for Op {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let own = |r: &OwnRecord| format!("{{node: {:?}, epoch: {}}}", r.node, r.epoch);
    match self {
      Op::GetOwn(c) => write!(f, "GET own.json of cell {c}"),
      Op::CreateOwn(c, r) => write!(f, "CREATE own.json of cell {c} = {}", own(r)),
      Op::CasOwn(c, r, t) => write!(f, "CAS own.json of cell {c} = {} if v{}", own(r), t.0),
      Op::PutOwn(c, r) => write!(f, "PUT own.json of cell {c} = {} (blind)", own(r)),
      Op::GetLease(n) => write!(f, "GET nodes/n{n}.json"),
      Op::CreateLease(n, l) => {
        write!(
          f,
          "CREATE nodes/n{n}.json expires {}",
          l.expires_ms as i64 - T0 as i64
        )
      }
      Op::CasLease(n, l, t) => {
        write!(
          f,
          "CAS nodes/n{n}.json expires {} if v{}",
          l.expires_ms as i64 - T0 as i64,
          t.0
        )
      }
      Op::PutLtx {
        cell,
        epoch,
        txid,
        content,
      } => {
        write!(f, "PUT cell {cell} e{epoch}/{txid} {content:?}")
      }
      Op::PutSnapshot {
        cell,
        epoch,
        max,
        content,
      } => write!(f, "PUT cell {cell} e{epoch}/snapshot 1-{max} {content:?}"),
      Op::ListLtx(c) => write!(f, "LIST ltx of cell {c}"),
      Op::DeleteEpochs(c, epochs) => write!(f, "DELETE cell {c} epochs {epochs:?}"),
      Op::GetWaker => write!(f, "GET wake/waker.json"),
      Op::CreateWaker(r) => write!(f, "CREATE wake/waker.json = {}", waker(r)),
      Op::CasWaker(r, t) => write!(f, "CAS wake/waker.json = {} if v{}", waker(r), t.0),
      Op::ListHints => write!(f, "LIST wake/entries"),
    }
  }
}

fn waker(r: &WakerRecord) -> String {
  format!(
    "{{node: {:?}, expires: {}}}",
    r.node,
    r.expires_ms as i64 - T0 as i64
  )
}

impl fmt::Display for Answer {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fn read<T: fmt::Debug>(f: &mut fmt::Formatter<'_>, r: &ReadResult<T>) -> fmt::Result {
      match r {
        Ok(Some((v, t))) => write!(f, "{v:?} v{}", t.0),
        Ok(None) => f.write_str("absent"),
        Err(e) => write!(f, "error ({})", e.0),
      }
    }
    match self {
      Answer::Own(r) => read(f, r),
      Answer::Lease(r) => read(f, r),
      Answer::Write(WriteAnswer::Applied(t)) => write!(f, "applied v{}", t.0),
      Answer::Write(w) => write!(f, "{w:?}"),
      Answer::List(Ok(l)) => {
        let keys: Vec<String> = l
          .iter()
          .map(|(k, _)| format!("e{}/{}", k.epoch, k.min_txid))
          .collect();
        write!(f, "[{}]", keys.join(" "))
      }
      Answer::List(Err(e)) => write!(f, "error ({})", e.0),
      Answer::Waker(r) => read(f, r),
      Answer::Hints(Ok(h)) => {
        let hints: Vec<String> = h
          .iter()
          .map(|(c, at)| format!("cell {c} at {}", *at as i64 - T0 as i64))
          .collect();
        write!(f, "[{}]", hints.join(", "))
      }
      Answer::Hints(Err(e)) => write!(f, "error ({})", e.0),
    }
  }
}

#[derive(Clone, Debug)]
pub enum Answer {
  Own(ReadResult<OwnRecord>),
  Lease(ReadResult<NodeLease>),
  Write(WriteAnswer),
  List(Result<Listing, StoreError>),
  Waker(ReadResult<WakerRecord>),
  Hints(Result<Hints, StoreError>),
}

/// What an applied write of `own.json` did, for the checkers.
pub struct OwnChange {
  pub cell: usize,
  pub before: Option<OwnRecord>,
  pub after: OwnRecord,
}

#[derive(Default)]
pub struct Store {
  own: Vec<Option<(OwnRecord, Token)>>,
  leases: Vec<Option<(NodeLease, Token)>>,
  pub ltx: BTreeMap<(usize, u64, u64), LtxObj>,
  /// Snapshots: (cell, epoch, max TXID).
  pub snapshots: BTreeMap<(usize, u64, u64), LtxObj>,
  /// Each cell's snapshot hint: the newest snapshot uploaded (written with
  /// it here; the shell writes it just after).
  pub snapshot_hints: BTreeMap<usize, LtxKey>,
  /// Paged epochs' markers, per cell (written before the cell serves;
  /// deleted with their epoch).
  pub markers: BTreeMap<usize, Vec<crate::restore::Marker>>,
  waker: Option<(WakerRecord, Token)>,
  /// Per cell: the due time of its wake hint (set by the world: publishing
  /// a hint is the runtime's job, not a decision of this crate).
  pub hints: Vec<Option<u64>>,
  version: u64,
}

impl Store {
  pub fn new(cells: usize, nodes: usize) -> Self {
    Store {
      own: vec![None; cells],
      leases: vec![None; nodes + 1],
      hints: vec![None; cells],
      ..Default::default()
    }
  }

  fn token(&mut self) -> Token {
    self.version += 1;
    Token(self.version.to_string())
  }

  pub fn own(&self, cell: usize) -> Option<&(OwnRecord, Token)> {
    self.own[cell].as_ref()
  }

  pub fn lease(&self, node: usize) -> Option<&(NodeLease, Token)> {
    self.leases[node].as_ref()
  }

  /// Performs `op` now. Returns the answer and, for an applied write of
  /// `own.json`, the change.
  pub fn apply(&mut self, op: &Op, writer: Writer) -> (Answer, Option<OwnChange>) {
    match op {
      Op::GetOwn(c) => (Answer::Own(Ok(self.own[*c].clone())), None),
      Op::CreateOwn(c, r) => {
        if self.own[*c].is_some() {
          return (Answer::Write(WriteAnswer::Rejected), None);
        }
        self.put_own(*c, r)
      }
      Op::CasOwn(c, r, t) => {
        if self.own[*c].as_ref().map(|(_, v)| v) != Some(t) {
          return (Answer::Write(WriteAnswer::Rejected), None);
        }
        self.put_own(*c, r)
      }
      Op::PutOwn(c, r) => self.put_own(*c, r),
      Op::GetLease(n) => (Answer::Lease(Ok(self.leases[*n].clone())), None),
      Op::CreateLease(n, l) => {
        if self.leases[*n].is_some() {
          return (Answer::Write(WriteAnswer::Rejected), None);
        }
        (self.put_lease(*n, l), None)
      }
      Op::CasLease(n, l, t) => {
        if self.leases[*n].as_ref().map(|(_, v)| v) != Some(t) {
          return (Answer::Write(WriteAnswer::Rejected), None);
        }
        (self.put_lease(*n, l), None)
      }
      Op::PutLtx {
        cell,
        epoch,
        txid,
        content,
      } => (
        self.put_object(false, (*cell, *epoch, *txid), content, writer),
        None,
      ),
      Op::PutSnapshot {
        cell,
        epoch,
        max,
        content,
      } => {
        let key = LtxKey {
          epoch: *epoch,
          level: crate::compact::SNAPSHOT_LEVEL,
          min_txid: 1,
          max_txid: *max,
        };
        self.snapshot_hints.insert(*cell, key);
        (
          self.put_object(true, (*cell, *epoch, *max), content, writer),
          None,
        )
      }
      Op::ListLtx(c) => (Answer::List(Ok(self.list(*c))), None),
      Op::DeleteEpochs(c, epochs) => {
        let gone = |&(cell, e, _): &(usize, u64, u64)| cell == *c && epochs.contains(&e);
        self.ltx.retain(|k, _| !gone(k));
        self.snapshots.retain(|k, _| !gone(k));
        if let Some(ms) = self.markers.get_mut(c) {
          ms.retain(|m| !epochs.contains(&m.epoch));
        }
        let t = self.token();
        (Answer::Write(WriteAnswer::Applied(t)), None)
      }
      Op::GetWaker => (Answer::Waker(Ok(self.waker.clone())), None),
      Op::CreateWaker(r) => {
        if self.waker.is_some() {
          return (Answer::Write(WriteAnswer::Rejected), None);
        }
        (self.put_waker(r), None)
      }
      Op::CasWaker(r, t) => {
        if self.waker.as_ref().map(|(_, v)| v) != Some(t) {
          return (Answer::Write(WriteAnswer::Rejected), None);
        }
        (self.put_waker(r), None)
      }
      Op::ListHints => {
        let hints = (self.hints.iter().enumerate())
          .filter_map(|(c, h)| h.map(|at| (c, at)))
          .collect();
        (Answer::Hints(Ok(Rc::new(hints))), None)
      }
    }
  }

  fn put_own(&mut self, c: usize, r: &OwnRecord) -> (Answer, Option<OwnChange>) {
    let t = self.token();
    let before = self.own[c].replace((r.clone(), t.clone())).map(|(r, _)| r);
    let change = OwnChange {
      cell: c,
      before,
      after: r.clone(),
    };
    (Answer::Write(WriteAnswer::Applied(t)), Some(change))
  }

  /// An LTX object (`snapshot`: a whole-state one) keyed (cell, epoch,
  /// its max TXID).
  fn put_object(
    &mut self,
    snapshot: bool,
    key: (usize, u64, u64),
    content: &Rc<Vec<u64>>,
    writer: Writer,
  ) -> Answer {
    let obj = LtxObj {
      content: content.clone(),
      writer,
    };
    let map = if snapshot {
      &mut self.snapshots
    } else {
      &mut self.ltx
    };
    map.insert(key, obj);
    Answer::Write(WriteAnswer::Applied(self.token()))
  }

  fn put_lease(&mut self, n: usize, l: &NodeLease) -> Answer {
    let t = self.token();
    self.leases[n] = Some((l.clone(), t.clone()));
    Answer::Write(WriteAnswer::Applied(t))
  }

  fn put_waker(&mut self, r: &WakerRecord) -> Answer {
    let t = self.token();
    self.waker = Some((r.clone(), t.clone()));
    Answer::Write(WriteAnswer::Applied(t))
  }

  /// Every LTX object of `cell`: the level-0 objects, then the snapshots.
  pub fn list(&self, cell: usize) -> Listing {
    let range = (cell, 0, 0)..(cell + 1, 0, 0);
    let l0 = (self.ltx.range(range.clone())).map(|(&(_, e, t), o)| (LtxKey::l0(e, t), o));
    let snapshots = (self.snapshots.range(range)).map(|(&(_, epoch, max), o)| {
      let key = LtxKey {
        epoch,
        level: crate::compact::SNAPSHOT_LEVEL,
        min_txid: 1,
        max_txid: max,
      };
      (key, o)
    });
    let objs = (l0.chain(snapshots))
      .map(|(k, o)| (k, o.content.clone()))
      .collect();
    Rc::new(objs)
  }
}

/// The state a restore of `chain` yields from `listing`: the snapshot, then
/// each following write.
pub fn materialize(listing: &Listing, chain: &crate::restore::Chain) -> Vec<u64> {
  let mut db = Vec::new();
  for k in &chain.keys {
    let (_, content) = listing
      .iter()
      .find(|(lk, _)| lk == k)
      .expect("chain keys come from the listing");
    if k.min_txid == 1 {
      db.clear();
    }
    db.extend_from_slice(content);
  }
  db
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn conditional_writes() {
    let mut s = Store::new(1, 1);
    let r1 = OwnRecord::owned("a", 1);
    let (a, ch) = s.apply(&Op::CreateOwn(0, r1.clone()), (0, 0));
    let Answer::Write(WriteAnswer::Applied(t1)) = a else {
      panic!()
    };
    assert!(ch.unwrap().before.is_none());
    let (a, _) = s.apply(&Op::CreateOwn(0, r1.clone()), (0, 0));
    assert!(matches!(a, Answer::Write(WriteAnswer::Rejected)));
    let r2 = OwnRecord::owned("b", 2);
    let (a, ch) = s.apply(&Op::CasOwn(0, r2.clone(), t1.clone()), (1, 0));
    assert!(matches!(a, Answer::Write(WriteAnswer::Applied(_))));
    assert_eq!(ch.unwrap().before, Some(r1));
    let (a, _) = s.apply(&Op::CasOwn(0, OwnRecord::owned("c", 3), t1), (2, 0));
    assert!(matches!(a, Answer::Write(WriteAnswer::Rejected)));
    assert_eq!(s.own(0).unwrap().0, r2);
  }

  #[test]
  fn listing_and_materializing() {
    let mut s = Store::new(2, 1);
    let put = |s: &mut Store, cell, epoch, txid, v: Vec<u64>| {
      s.apply(
        &Op::PutLtx {
          cell,
          epoch,
          txid,
          content: Rc::new(v),
        },
        (0, 0),
      );
    };
    put(&mut s, 0, 1, 1, vec![10]);
    put(&mut s, 0, 1, 2, vec![11]);
    put(&mut s, 0, 2, 1, vec![10, 11, 12]);
    put(&mut s, 0, 2, 2, vec![13]);
    put(&mut s, 1, 1, 1, vec![99]);
    let l = s.list(0);
    assert_eq!(l.len(), 4);
    let keys: Vec<LtxKey> = l.iter().map(|(k, _)| *k).collect();
    let chain = crate::restore::restore_chain(&keys).unwrap();
    assert_eq!(materialize(&l, &chain), vec![10, 11, 12, 13]);
    // A snapshot through TXID 2 replaces the first two objects.
    s.apply(
      &Op::PutSnapshot {
        cell: 0,
        epoch: 2,
        max: 2,
        content: Rc::new(vec![10, 11, 12, 13]),
      },
      (0, 0),
    );
    put(&mut s, 0, 2, 3, vec![14]);
    let l = s.list(0);
    let keys: Vec<LtxKey> = l.iter().map(|(k, _)| *k).collect();
    let chain = crate::restore::restore_chain(&keys).unwrap();
    assert_eq!(chain.keys.len(), 2);
    assert_eq!(materialize(&l, &chain), vec![10, 11, 12, 13, 14]);
  }
}

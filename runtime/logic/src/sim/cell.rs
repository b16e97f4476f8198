//! The per-cell half of a simulated node's I/O shell: client writes,
//! activation (acquire, restore), commits, the acknowledgement gate's
//! uploads and ownership reads, releases, and routing answers to them.

use std::rc::Rc;

use super::node::{Acquiring, Purpose, Run, Slot, Status, index_of};
use super::store::{Answer, Op, OwnChange, Writer, materialize};
use super::{Check, Ev, Flaw, World};
use crate::ack::{AckGate, Broken, GateActions};
use crate::own::{
  Acquire, AcquireError, AcquireStep, Acquired, OwnRecord, Release, ReleaseOutcome, ReleaseStep,
};
use crate::restore::{self, LtxKey};
use crate::{ReadResult, Token, WriteAnswer};

/// What a client write finds at a node.
enum Arrival {
  Commit,
  Queue,
  Acquire,
  Refuse(&'static str),
}

impl World {
  pub(super) fn on_node_write(&mut self, n: usize, c: usize, w: u64) {
    let inc = self.nodes[n].inc;
    if self.nodes[n].status == Status::Down {
      self.tr(|| format!("n{n}: down, w{w} fails"));
      return;
    }
    if !self.node_ready(
      n,
      inc,
      Ev::NodeWrite {
        node: n,
        cell: c,
        w,
      },
    ) || !self.watchdog(n)
    {
      return;
    }
    let local = self.local(n);
    let node = &self.nodes[n];
    let lease_ok = node.keeper.as_ref().is_some_and(|k| {
      k.can_ack(local) || (self.flaw == Some(Flaw::NoSelfFence) && k.held().is_some())
    });
    let arrival = match &node.cells[c] {
      _ if node.status != Status::Serving => Arrival::Refuse("not serving"),
      _ if !lease_ok => Arrival::Refuse("lease lapsed"),
      Slot::Active(_) => Arrival::Commit,
      Slot::Acquiring(_) => Arrival::Queue,
      Slot::Refused { until } if local < *until => Arrival::Refuse("ownership record lost"),
      Slot::Releasing { .. } => Arrival::Refuse("releasing"),
      Slot::Refused { .. } | Slot::Idle => Arrival::Acquire,
    };
    match arrival {
      Arrival::Commit => self.commit(n, c, w),
      Arrival::Queue => {
        if let Slot::Acquiring(a) = &mut self.nodes[n].cells[c] {
          a.queued.push(w);
        }
      }
      Arrival::Acquire => self.start_acquire(n, c, vec![w]),
      Arrival::Refuse(why) => self.tr(|| format!("n{n}: w{w} refused: {why}")),
    }
  }

  pub(super) fn start_acquire(&mut self, n: usize, c: usize, queued: Vec<u64>) {
    let run = self.next_run;
    self.next_run += 1;
    let local = self.local(n);
    let (m, step) = Acquire::new(&self.scopes[c], &self.nodes[n].name, local);
    let a = Acquiring {
      run,
      m,
      queued,
      listing: None,
      lease_started: 0,
      reuse: None,
    };
    self.nodes[n].cells[c] = Slot::Acquiring(Box::new(a));
    self.stats.activations += 1;
    self.tr(|| format!("n{n}: activates cell {c} (run {run})"));
    self.drive_acquire(n, c, step);
  }

  fn drive_acquire(&mut self, n: usize, c: usize, step: AcquireStep) {
    let local = self.local(n);
    let flaw = self.flaw;
    let Slot::Acquiring(a) = &mut self.nodes[n].cells[c] else {
      return;
    };
    let purpose = Purpose::Acquire {
      cell: c,
      run: a.run,
    };
    match step {
      AcquireStep::ReadOwn => self.send(n, purpose, Op::GetOwn(c)),
      AcquireStep::ReadLease { node } => {
        if flaw == Some(Flaw::TakeoverIgnoresLease) {
          let step = a.m.on_lease(Ok(None), local);
          return self.drive_acquire(n, c, step);
        }
        // The clock is read before the request goes out.
        a.lease_started = local;
        let owner = index_of(&node).expect("owners are simulated nodes");
        self.send(n, purpose, Op::GetLease(owner));
      }
      AcquireStep::ListLtx => self.send(n, purpose, Op::ListLtx(c)),
      // Simulated nodes write no session: nothing to recover.
      AcquireStep::Recover { .. } => {
        let step = a.m.on_recovered();
        self.drive_acquire(n, c, step)
      }
      AcquireStep::Create { record } => self.send(n, purpose, Op::CreateOwn(c, record)),
      AcquireStep::Cas { record, token } => self.send(n, purpose, Op::CasOwn(c, record, token)),
      AcquireStep::Acquired(acq) => self.activate(n, c, acq),
      AcquireStep::Failed(e) => {
        let until = match &e {
          AcquireError::RecordLost(l) => Some(l.retry_at_ms),
          _ => None,
        };
        self.tr(|| format!("n{n}: cell {c} not acquired: {e}"));
        self.nodes[n].cells[c] = match until {
          Some(until) => Slot::Refused { until },
          None => Slot::Idle,
        };
      }
    }
  }

  fn on_acquire_answer(&mut self, n: usize, c: usize, run: u64, answer: Answer) {
    let local = self.local(n);
    let flaw = self.flaw;
    let scope = self.scopes[c].clone();
    // The hint as the shell reads it before listing: never newer than the
    // listing (a hint naming what the listing lacks was written after it).
    let hint = self.store.snapshot_hints.get(&c).copied();
    // The markers as the listing saw them: they are written before a paged
    // cell serves, and only an epoch's deletion removes one.
    let markers = self.store.markers.get(&c).cloned().unwrap_or_default();
    let node = &mut self.nodes[n];
    let name = &node.name;
    let Slot::Acquiring(a) = &mut node.cells[c] else {
      return;
    };
    if a.run != run {
      return;
    }
    let step = match answer {
      Answer::Own(Ok(Some((rec, tok))))
        if flaw == Some(Flaw::ReuseEpoch) && rec.node == *name && a.reuse.is_none() =>
      {
        // The flawed shell keeps the epoch its record already names.
        a.reuse = Some((rec.epoch, tok));
        return self.send(n, Purpose::Acquire { cell: c, run }, Op::ListLtx(c));
      }
      Answer::Own(r) => a.m.on_own(r, local),
      Answer::Lease(r) => {
        let judged = if flaw == Some(Flaw::JudgeLeaseAtReply) {
          local
        } else {
          a.lease_started
        };
        a.m.on_lease(r, judged)
      }
      Answer::List(l) => {
        // What the shell's step-by-step listing gathers (restore::listing).
        let all: Vec<LtxKey> = l
          .as_ref()
          .map(|l| l.iter().map(|(k, _)| *k).collect())
          .unwrap_or_default();
        let hint = hint.filter(|h| all.contains(h));
        let (keys, markers, _) = restore::listing::gather_linked(&scope, &all, &markers, hint);
        match (a.reuse.take(), l) {
          (Some((epoch, token)), Ok(l)) => {
            a.listing = Some(l);
            AcquireStep::Acquired(Acquired {
              epoch,
              token,
              restore: restore::linked_chain(&keys, &markers),
              previous: None,
            })
          }
          (Some(_), Err(e)) => AcquireStep::Failed(AcquireError::Store(e)),
          (None, Ok(l)) => {
            a.listing = Some(l);
            a.m.on_listing(Ok((&keys, &markers)))
          }
          (None, Err(e)) => a.m.on_ltx(Err(e)),
        }
      }
      Answer::Write(WriteAnswer::Ambiguous) if flaw == Some(Flaw::TrustAmbiguous) => {
        a.m.on_write(WriteAnswer::Applied(Token::new("trusted")))
      }
      Answer::Write(wa) => a.m.on_write(wa),
      // Only the wake index's requests get these.
      Answer::Waker(_) | Answer::Hints(_) => return,
    };
    self.drive_acquire(n, c, step);
  }

  /// The cell is ours: restore from the bucket (the bucket wins over the
  /// local file), replace the local file, commit what waited.
  fn activate(&mut self, n: usize, c: usize, acq: Acquired) {
    let Slot::Acquiring(a) = std::mem::replace(&mut self.nodes[n].cells[c], Slot::Idle) else {
      return;
    };
    // Drawn outside the random stream, so older seeds replay.
    let paged = self.paged && acq.restore.is_some() && (acq.epoch + c as u64).is_multiple_of(2);
    if let (true, Some(chain)) = (paged, &acq.restore) {
      let m = restore::Marker {
        epoch: acq.epoch,
        from: chain.epoch,
        cut: chain.txid,
      };
      if self.flaw != Some(Flaw::PagedWithoutMarker) {
        self.store.markers.entry(c).or_default().push(m);
      }
      self.stats.paged += 1;
      self.tr(|| format!("n{n}: pages cell {c} in at epoch {} from {m:?}", acq.epoch));
    }
    let from_bucket = match (&acq.restore, &a.listing) {
      (Some(chain), Some(l)) => {
        let level = crate::compact::SNAPSHOT_LEVEL;
        let from_snapshot = chain.keys.first().is_some_and(|k| k.level == level);
        self.stats.snapshot_restores += u64::from(from_snapshot);
        materialize(l, chain)
      }
      _ => Vec::new(),
    };
    let local_file = &self.nodes[n].disk[c];
    let db = if self.flaw == Some(Flaw::RestoreFromLocal) && !local_file.is_empty() {
      local_file.clone()
    } else {
      from_bucket
    };
    self.nodes[n].disk[c] = db.clone();
    let epoch = acq.epoch;
    self.tr(|| format!("n{n}: owns cell {c} at epoch {epoch}, restored {db:?}"));
    self.check.on_activate(self.now, c, epoch, &db);
    let run = Run {
      run: a.run,
      epoch,
      token: acq.token,
      base: db.len(),
      offset: u64::from(paged),
      db,
      gate: AckGate::new(&self.nodes[n].name, epoch),
      pending: Vec::new(),
      upload_tries: Default::default(),
      reset_after: None,
      early_inflight: false,
      early: None,
      early_wanted: false,
      compactor: crate::compact::Compactor::new(crate::compact::SnapshotPolicy {
        min_objects: self.snapshot_every,
        object_cost: 1,
      }),
      snapshot: None,
      snapshot_up: None,
      gc: None,
    };
    self.nodes[n].cells[c] = Slot::Active(Box::new(run));
    self.start_gc(n, c);
    for w in a.queued {
      self.commit(n, c, w);
    }
  }

  /// A local commit (and local fsync) of one write as one transaction.
  fn commit(&mut self, n: usize, c: usize, w: u64) {
    let early_flaw = self.flaw == Some(Flaw::RereadBeforeUpload);
    let flaw = self.flaw;
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    let before = (flaw == Some(Flaw::SnapshotBeforeCommit)).then(|| Rc::new(r.db.clone()));
    r.db.push(w);
    let txid = r.gate.committed() + 1;
    // One object of one byte per commit, a database of no size: a
    // snapshot every `snapshot_every` commits.
    if r.compactor.on_capture(txid, 1, 0, txid) {
      r.snapshot = match flaw {
        Some(Flaw::SnapshotAtUpload) => None,
        Some(Flaw::SnapshotBeforeCommit) => before,
        _ => Some(Rc::new(r.db.clone())),
      };
    }
    r.pending.push((w, txid));
    let acts = r.gate.on_commit(txid);
    let early = early_flaw && !r.early_inflight;
    r.early_inflight |= early;
    let run = r.run;
    self.nodes[n].disk[c].push(w);
    self.stats.commits += 1;
    self.check.on_commit(w);
    self.tr(|| format!("n{n}: commits w{w} to cell {c} at txid {txid}"));
    if early {
      self.send(n, Purpose::EarlyRead { cell: c, run }, Op::GetOwn(c));
    }
    self.apply_gate(n, c, acts);
  }

  fn apply_gate(&mut self, n: usize, c: usize, acts: GateActions) {
    for t in acts.upload {
      self.upload(n, c, t);
    }
    if let Some(d) = acts.read_own {
      self.ack_read(n, c, d);
    }
    if let Some(t) = acts.ack_through {
      self.ack(n, c, t);
    }
    if let Some(b) = acts.broken {
      self.break_cell(n, c, b);
    }
  }

  fn upload(&mut self, n: usize, c: usize, txid: u64) {
    let me = self.writer(n);
    let Slot::Active(r) = &self.nodes[n].cells[c] else {
      return;
    };
    let content = if txid == 1 && r.offset == 0 {
      r.db[..r.base + 1].to_vec()
    } else {
      vec![r.db[r.base + txid as usize - 1]]
    };
    let (epoch, run) = (r.epoch, r.run);
    self.check.on_upload(self.now, c, epoch, me);
    let op = Op::PutLtx {
      cell: c,
      epoch,
      txid: txid + r.offset,
      content: Rc::new(content),
    };
    self.send(n, Purpose::Upload { cell: c, run, txid }, op);
  }

  fn on_upload_answer(&mut self, n: usize, c: usize, run: u64, txid: u64, answer: Answer) {
    let carry_on = self.flaw == Some(Flaw::AckPastFailedUpload);
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.run != run {
      return;
    }
    let out_of_order = txid > r.gate.uploaded() + 1;
    let tries = r.upload_tries.remove(&txid).unwrap_or(0);
    let acts = match answer {
      Answer::Write(WriteAnswer::Applied(_)) => r.gate.on_uploaded(txid),
      // A plain PUT of the same bytes is idempotent: retrying is safe.
      _ if tries < 3 => {
        r.upload_tries.insert(txid, tries + 1);
        return self.upload(n, c, txid);
      }
      _ if carry_on => {
        // The mistake the runtime made: the failed round settles like any
        // other, its own writes fail, the rounds already in flight still
        // acknowledge theirs, and the cell is reset only after them.
        r.pending.retain(|&(_, t)| t != txid);
        r.reset_after.get_or_insert((r.gate.committed(), txid));
        r.gate.on_uploaded(txid)
      }
      _ => r.gate.on_upload_failed(txid),
    };
    self.stats.uploads_out_of_order += u64::from(out_of_order);
    if tries >= 3 {
      self.stats.failed_uploads += 1;
      self.tr(|| format!("n{n}: the upload of cell {c} txid {txid} failed for good"));
    }
    self.apply_gate(n, c, acts);
  }

  fn ack_read(&mut self, n: usize, c: usize, delay: u64) {
    let (local, deadline, inc) = (self.local(n), self.deadline(n), self.nodes[n].inc);
    let name = self.nodes[n].name.clone();
    let flaw = self.flaw;
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    let run = r.run;
    let acts = match flaw {
      Some(Flaw::AckWithoutReread) => {
        let mine = Ok(Some((OwnRecord::owned(name, r.epoch), r.token.clone())));
        r.gate.on_own_read(mine, local, deadline)
      }
      Some(Flaw::RereadBeforeUpload) if r.early.is_some() || r.early_inflight => {
        match r.early.take() {
          Some(read) => r.gate.on_own_read(read, local, deadline),
          None => {
            r.early_wanted = true;
            return;
          }
        }
      }
      _ if delay == 0 => return self.send(n, Purpose::AckRead { cell: c, run }, Op::GetOwn(c)),
      _ => {
        return self.push(
          self.now + delay,
          Ev::ReadRetry {
            node: n,
            inc,
            cell: c,
            run,
          },
        );
      }
    };
    self.apply_gate(n, c, acts);
  }

  pub(super) fn on_read_retry(&mut self, n: usize, inc: u32, c: usize, run: u64) {
    if !self.node_ready(
      n,
      inc,
      Ev::ReadRetry {
        node: n,
        inc,
        cell: c,
        run,
      },
    ) || !self.watchdog(n)
    {
      return;
    }
    if matches!(&self.nodes[n].cells[c], Slot::Active(r) if r.run == run) {
      self.send(n, Purpose::AckRead { cell: c, run }, Op::GetOwn(c));
    }
  }

  fn on_ack_read(&mut self, n: usize, c: usize, run: u64, read: ReadResult<OwnRecord>) {
    let (local, deadline) = (self.local(n), self.deadline(n));
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.run != run {
      return;
    }
    let acts = r.gate.on_own_read(read, local, deadline);
    self.apply_gate(n, c, acts);
  }

  fn on_early_read(&mut self, n: usize, c: usize, run: u64, read: ReadResult<OwnRecord>) {
    let (local, deadline) = (self.local(n), self.deadline(n));
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.run != run {
      return;
    }
    r.early_inflight = false;
    if !std::mem::take(&mut r.early_wanted) {
      r.early = Some(read);
      return;
    }
    let acts = r.gate.on_own_read(read, local, deadline);
    self.apply_gate(n, c, acts);
  }

  fn ack(&mut self, n: usize, c: usize, through: u64) {
    let expires = self.nodes[n]
      .keeper
      .as_ref()
      .and_then(|k| k.held())
      .map(|l| l.expires_ms);
    let trusted = self.nodes[n].clock.trusted;
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    let mut acked = Vec::new();
    r.pending.retain(|&(w, t)| {
      let done = t <= through;
      if done {
        acked.push(w);
      }
      !done
    });
    let reset = r
      .reset_after
      .filter(|&(committed, _)| through >= committed)
      .map(|(_, txid)| Broken::UploadFailed { txid });
    for w in acked {
      self.stats.acks += 1;
      self.tr(|| format!("n{n}: ACK w{w} (cell {c})"));
      self.check.on_ack(self.now, c, w, n, trusted, expires);
    }
    self.last_good[c] = Some(n);
    if let Some(b) = reset {
      return self.break_cell(n, c, b);
    }
    self.upload_snapshot(n, c, through);
    if through.is_multiple_of(3) {
      self.start_gc(n, c);
    }
  }

  /// The snapshot waiting for TXID `through`, once it is acknowledged.
  fn upload_snapshot(&mut self, n: usize, c: usize, through: u64) {
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.snapshot_up.is_some() {
      return;
    }
    let Some(p) = r.compactor.on_durable(through) else {
      return;
    };
    // The flawed shell reads the state only now.
    let content = (r.snapshot.take()).unwrap_or_else(|| Rc::new(r.db.clone()));
    r.snapshot_up = Some(p);
    let (epoch, run) = (r.epoch, r.run);
    let op = Op::PutSnapshot {
      cell: c,
      epoch,
      max: p.txid + r.offset,
      content,
    };
    self.send(n, Purpose::Snapshot { cell: c, run }, op);
  }

  fn on_snapshot_answer(&mut self, n: usize, c: usize, run: u64, answer: Answer) {
    let Slot::Active(r) = &mut self.nodes[n].cells[c] else {
      return;
    };
    if r.run != run {
      return;
    }
    let Some(p) = r.snapshot_up.take() else {
      return;
    };
    if matches!(answer, Answer::Write(WriteAnswer::Applied(_))) {
      self.stats.snapshots += 1;
    } else {
      // Best effort: an ambiguous or failed snapshot is only a restore
      // that reads more; its tail counts towards the next one.
      r.compactor.on_upload_failed(p);
    }
  }

  fn break_cell(&mut self, n: usize, c: usize, b: Broken) {
    self.stats.broken_cells += 1;
    let msg = b.message(&self.scopes[c]);
    self.tr(|| format!("n{n}: {msg}"));
    self.nodes[n].cells[c] = Slot::Idle;
  }

  pub(super) fn start_release(&mut self, n: usize, c: usize) {
    let Slot::Active(r) = std::mem::replace(&mut self.nodes[n].cells[c], Slot::Idle) else {
      return;
    };
    let purpose = Purpose::Release {
      cell: c,
      run: r.run,
    };
    if self.flaw == Some(Flaw::BlindRelease) {
      self.nodes[n].cells[c] = Slot::Releasing {
        run: r.run,
        m: None,
      };
      return self.send(n, purpose, Op::PutOwn(c, OwnRecord::released(r.epoch)));
    }
    let (m, step) = Release::new(&self.nodes[n].name, r.epoch, r.token);
    self.nodes[n].cells[c] = Slot::Releasing {
      run: r.run,
      m: Some(m),
    };
    self.drive_release(n, c, step);
  }

  fn drive_release(&mut self, n: usize, c: usize, step: ReleaseStep) {
    let Slot::Releasing { run, .. } = &self.nodes[n].cells[c] else {
      return;
    };
    let purpose = Purpose::Release { cell: c, run: *run };
    match step {
      ReleaseStep::Cas { record, token } => self.send(n, purpose, Op::CasOwn(c, record, token)),
      ReleaseStep::ReadOwn => self.send(n, purpose, Op::GetOwn(c)),
      ReleaseStep::Done(outcome) => {
        if outcome == ReleaseOutcome::Released {
          self.stats.releases += 1;
        }
        self.tr(|| format!("n{n}: release of cell {c}: {outcome:?}"));
        self.nodes[n].cells[c] = Slot::Idle;
        self.maybe_finish_stop(n);
      }
    }
  }

  fn on_release_answer(&mut self, n: usize, c: usize, run: u64, answer: Answer) {
    let Slot::Releasing { run: r, m } = &mut self.nodes[n].cells[c] else {
      return;
    };
    if *r != run {
      return;
    }
    let step = match (m, answer) {
      (None, _) => ReleaseStep::Done(ReleaseOutcome::Released),
      (Some(m), Answer::Write(w)) => m.on_write(w),
      (Some(m), Answer::Own(read)) => m.on_own(read),
      _ => return,
    };
    self.drive_release(n, c, step);
  }

  pub(super) fn on_answer(&mut self, n: usize, purpose: Purpose, answer: Answer) {
    match purpose {
      Purpose::Lease => {
        let local = self.local(n);
        let Some(k) = self.nodes[n].keeper.as_mut() else {
          return;
        };
        let step = match answer {
          Answer::Lease(r) => k.on_read(r, local),
          Answer::Write(w) => k.on_write(w, local),
          _ => return,
        };
        self.drive_lease(n, step);
      }
      Purpose::Retire => {}
      Purpose::Acquire { cell, run } => self.on_acquire_answer(n, cell, run, answer),
      Purpose::Upload { cell, run, txid } => self.on_upload_answer(n, cell, run, txid, answer),
      Purpose::Snapshot { cell, run } => self.on_snapshot_answer(n, cell, run, answer),
      Purpose::Gc { cell, run } => self.on_gc_answer(n, cell, run, answer),
      Purpose::AckRead { cell, run } => {
        if let Answer::Own(r) = answer {
          self.on_ack_read(n, cell, run, r);
        }
      }
      Purpose::EarlyRead { cell, run } => {
        if let Answer::Own(r) = answer {
          self.on_early_read(n, cell, run, r);
        }
      }
      Purpose::Release { cell, run } => self.on_release_answer(n, cell, run, answer),
      Purpose::Wake { pass, step } => self.on_wake_answer(n, pass, step, answer),
    }
  }

  /// An applied write of `own.json`: the checkers look at every one, and a
  /// takeover must find the previous owner unable to acknowledge.
  pub(super) fn on_own_change(&mut self, ch: &OwnChange, from: Writer) {
    let before = ch.before.as_ref();
    let taken_from =
      before.filter(|b| !b.is_released() && b.node != ch.after.node && !ch.after.is_released());
    if taken_from.is_some() {
      self.stats.takeovers += 1;
    }
    self.check.on_own_change(self.now, ch, from);
    let Some(prev) = taken_from else { return };
    let Some(y) = index_of(&prev.node).filter(|&y| y < self.nodes.len()) else {
      return;
    };
    let node = &self.nodes[y];
    let owns = matches!(&node.cells[ch.cell], Slot::Active(r) if r.epoch == prev.epoch);
    if !self.check.lease_checks || !owns || !node.clock.trusted {
      return;
    }
    let Some(k) = node.keeper.as_ref() else {
      return;
    };
    let local = node.clock.local(self.now);
    if matches!(node.status, Status::Serving | Status::Stopping) && local < k.deadline_ms() {
      let msg = format!(
        "n{} took cell {} at epoch {} from n{y}, which may acknowledge until its local {} (now {})",
        from.0,
        ch.cell,
        ch.after.epoch,
        k.deadline_ms() as i64 - super::T0 as i64,
        local as i64 - super::T0 as i64
      );
      self
        .check
        .violation(Check::TakeoverFromLiveOwner, self.now, msg);
    }
  }
}

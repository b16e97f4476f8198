//! The history checker of the fault lab, and its figures.
//!
//! Every client request is one operation: sent at `t0`, answered (or given
//! up) at `t1`, both wall-clock microseconds. An increment answered 200 is
//! *acknowledged* with the value it returned; any other answer (a refusal,
//! an error status, a timeout, a broken connection) is an unknown outcome:
//! the increment may or may not have happened. Reads answered 200 report a
//! value. The checks, per object:
//!
//! - no value is acknowledged twice;
//! - the final count (read after the faults, and again after a cold restart
//!   of the whole fleet) is at least every acknowledged value (else a write
//!   was *lost*), and at most the number of increments ever sent;
//! - real-time order: an increment acknowledged (or a read answered) before
//!   another increment was sent has a smaller value than that increment's;
//!   a read sent after an increment was acknowledged sees at least its value
//!   (a *stale read* is reported, and counted, but only fails the lab when
//!   `strict_reads` is set);
//! - a read never sees more increments than were sent before it was
//!   answered;
//! - a *poisoned* increment (one whose turn's commit must fail: see
//!   `faultlab/worker/worker.js`) is never acknowledged, and never counted;
//! - no acknowledgement after the answering node's fence deadline: the ack
//!   left the node at some time in `[t0, t1]` (raised to the SIGCONT time
//!   when the node was stopped in between and the answer came after it), so
//!   some lease record that node published must have been written before
//!   `t1` (`expires_ms - ttl <= t1`) and still allow acknowledging at the
//!   earliest possible ack time (`ack < expires_ms - margin`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
  Incr,
  Read,
  /// An increment in a turn whose commit fails: never a success.
  Poison,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
  Ok(u64),
  /// 503 naming the owner: a refusal (nothing should have happened, but the
  /// checker does not rely on it).
  Refused(Option<String>),
  Status(u16),
  Error(String),
}

#[derive(Clone, Debug)]
pub struct Op {
  pub client: usize,
  pub object: usize,
  pub node: usize,
  pub kind: Kind,
  pub t0: u64,
  pub t1: u64,
  pub outcome: Outcome,
}

impl Op {
  pub fn value(&self) -> Option<u64> {
    match self.outcome {
      Outcome::Ok(v) => Some(v),
      _ => None,
    }
  }
}

/// A fault as injected: its kind, the node it hit (if one), when it began
/// and when it was healed (the node restarted, the store back).
#[derive(Clone, Debug)]
pub struct Fault {
  pub kind: &'static str,
  pub node: Option<usize>,
  pub start: u64,
  pub heal: u64,
}

/// A SIGSTOP … SIGCONT window of a node.
#[derive(Clone, Debug)]
pub struct Stop {
  pub node: usize,
  pub stop: u64,
  pub cont: u64,
}

pub struct Input<'a> {
  pub nodes: &'a [String],
  pub objects: &'a [String],
  pub ops: &'a [Op],
  pub faults: &'a [Fault],
  pub stops: &'a [Stop],
  /// Every `expires_ms` each node's lease record was seen holding.
  pub leases: &'a [BTreeSet<u64>],
  pub ttl_ms: u64,
  pub margin_ms: u64,
  /// Final count per object (after the faults, before the cold restart).
  pub finals: &'a [u64],
  pub strict_reads: bool,
}

#[derive(Default)]
pub struct Findings {
  pub violations: Vec<String>,
  pub warnings: Vec<String>,
  pub lost: usize,
  pub duplicated: usize,
  pub order: usize,
  pub stale_reads: usize,
  pub late_acks: usize,
  pub poison_acks: usize,
  /// From the first send to the last answer of each duplicated value: the
  /// node logs of these windows go into the failure's output.
  pub windows: Vec<(u64, u64)>,
}

fn describe(input: &Input, op: &Op) -> String {
  format!(
    "{:?} {} at {} by client {} sent {} answered {} (+{} ms): {:?}",
    op.kind,
    input.objects[op.object],
    input.nodes[op.node],
    op.client,
    op.t0,
    op.t1,
    (op.t1 - op.t0) / 1000,
    op.outcome
  )
}

/// What a duplicated value needs to be diagnosed from CI's output alone
/// (the run's files stay on the CI machine): the faults in effect from a
/// few seconds before the first of `list` was sent until the last was
/// answered, and the acknowledgements of the values next to `v`.
fn context(input: &Input, acks: &[&Op], v: u64, list: &[&Op]) -> String {
  let from = list.iter().map(|o| o.t0).min().unwrap_or(0);
  let to = list.iter().map(|o| o.t1).max().unwrap_or(0);
  let since = from.saturating_sub(5_000_000);
  let mut out = String::new();
  for fault in input
    .faults
    .iter()
    .filter(|f| f.start <= to && f.heal >= since)
  {
    let _ = write!(
      out,
      "\n    fault {} on {} from {} to {}",
      fault.kind,
      fault.node.map_or("all", |n| input.nodes[n].as_str()),
      fault.start,
      fault.heal
    );
  }
  for s in input
    .stops
    .iter()
    .filter(|s| s.stop <= to && s.cont >= since)
  {
    let _ = write!(
      out,
      "\n    stopped {} from {} to {}",
      input.nodes[s.node], s.stop, s.cont
    );
  }
  let near = |a: &&&Op| {
    a.value()
      .is_some_and(|x| x + 2 >= v && x <= v + 2 && x != v)
  };
  for a in acks.iter().filter(near) {
    let _ = write!(out, "\n    near: {}", describe(input, a));
  }
  out
}

pub fn check(input: &Input) -> Findings {
  let mut f = Findings::default();
  for (obj, name) in input.objects.iter().enumerate() {
    let ops: Vec<&Op> = input.ops.iter().filter(|o| o.object == obj).collect();
    let acks: Vec<&Op> = ops
      .iter()
      .copied()
      .filter(|o| o.kind == Kind::Incr && o.value().is_some())
      .collect();
    let final_count = input.finals[obj];
    for p in ops
      .iter()
      .filter(|o| o.kind == Kind::Poison && o.value().is_some())
    {
      f.poison_acks += 1;
      f.violations.push(format!(
        "{name}: an increment whose commit failed was acknowledged: {}",
        describe(input, p)
      ));
    }
    // No value acknowledged twice.
    let mut by_value: BTreeMap<u64, Vec<&Op>> = BTreeMap::new();
    for a in &acks {
      by_value.entry(a.value().unwrap()).or_default().push(a);
    }
    for (v, list) in &by_value {
      if list.len() > 1 {
        f.duplicated += list.len() - 1;
        let mut msg = format!("{name}: value {v} acknowledged {} times:", list.len());
        for a in list {
          msg.push_str(&format!("\n    {}", describe(input, a)));
        }
        msg.push_str(&context(input, &acks, *v, list));
        let from = list.iter().map(|o| o.t0).min().unwrap_or(0);
        f.windows
          .push((from, list.iter().map(|o| o.t1).max().unwrap_or(0)));
        f.violations.push(msg);
      }
      if *v > final_count {
        f.lost += list.len();
        f.violations.push(format!(
          "{name}: acknowledged value {v} is above the final count {final_count} (lost): {}",
          describe(input, list[0])
        ));
      }
    }
    // No more increments than were sent.
    let sent = ops.iter().filter(|o| o.kind == Kind::Incr).count() as u64;
    if final_count > sent {
      f.violations.push(format!(
        "{name}: final count {final_count} but only {sent} increments were ever sent"
      ));
    }
    // A refusal (503 naming the owner) says nothing happened: then the
    // count is at most the acknowledged increments plus those with another
    // unknown outcome. Not relied on by the checks above; a warning.
    let maybe = ops
      .iter()
      .filter(|o| o.kind == Kind::Incr && !matches!(o.outcome, Outcome::Refused(_)))
      .count() as u64;
    if final_count > maybe {
      f.warnings.push(format!(
        "{name}: final count {final_count} is above the {maybe} increments that were not refused: a refused increment happened"
      ));
    }
    // Real-time order. Observations (acked increments and answered reads)
    // sorted by answer time, with the running maximum of their values.
    let mut observed: Vec<&Op> = ops
      .iter()
      .copied()
      .filter(|o| o.kind != Kind::Poison && o.value().is_some())
      .collect();
    observed.sort_by_key(|o| o.t1);
    let mut prefix_max: Vec<(u64, usize)> = Vec::with_capacity(observed.len());
    for (i, o) in observed.iter().enumerate() {
      let v = o.value().unwrap();
      let best = match prefix_max.last() {
        Some(&(m, j)) if m >= v => (m, j),
        _ => (v, i),
      };
      prefix_max.push(best);
    }
    let mut incr_sent: Vec<u64> = ops
      .iter()
      .filter(|o| o.kind == Kind::Incr)
      .map(|o| o.t0)
      .collect();
    incr_sent.sort_unstable();
    for b in &observed {
      let v = b.value().unwrap();
      // Observations answered before b was sent.
      let n = observed.partition_point(|o| o.t1 < b.t0);
      if n > 0 {
        let (m, j) = prefix_max[n - 1];
        let a = observed[j];
        let bad = match b.kind {
          Kind::Incr => m >= v,
          Kind::Read | Kind::Poison => m > v,
        };
        if bad {
          let msg = format!(
            "{name}: real-time order: {}\n    was answered before\n    {}\n    was sent",
            describe(input, a),
            describe(input, b)
          );
          if b.kind == Kind::Read {
            f.stale_reads += 1;
            if input.strict_reads {
              f.violations.push(msg);
            } else if f.stale_reads <= 5 {
              f.warnings.push(format!("stale read: {msg}"));
            }
          } else {
            f.order += 1;
            f.violations.push(msg);
          }
        }
      }
      if b.kind == Kind::Read {
        let possible = incr_sent.partition_point(|&t| t < b.t1) as u64;
        if v > possible {
          f.violations.push(format!(
            "{name}: a read saw {v} when only {possible} increments had been sent: {}",
            describe(input, b)
          ));
        }
      }
    }
  }
  // No acknowledgement after the fence deadline.
  for op in input
    .ops
    .iter()
    .filter(|o| o.kind == Kind::Incr && o.value().is_some())
  {
    let mut earliest = op.t0;
    for s in input.stops.iter().filter(|s| s.node == op.node) {
      // Answered after SIGCONT, and more than a second after SIGSTOP: the
      // answer did not leave before the node froze, so it left after it
      // thawed.
      if op.t0 < s.cont && op.t1 >= s.cont && op.t1 > s.stop + 1_000_000 {
        earliest = earliest.max(s.cont);
      }
    }
    let (ack_ms, answered_ms) = (earliest / 1000, op.t1.div_ceil(1000));
    // No lease record seen at all also fails: a node acknowledges only
    // under a lease, and the lab polls the records often enough to see it.
    let leases = &input.leases[op.node];
    let covered = leases.iter().any(|&e| {
      e.saturating_sub(input.ttl_ms) <= answered_ms && ack_ms < e.saturating_sub(input.margin_ms)
    });
    if !covered {
      f.late_acks += 1;
      let best = leases.range(..=answered_ms + input.ttl_ms).next_back();
      f.violations.push(format!(
        "acknowledged after the fence deadline: {} (earliest ack time {} ms; the latest lease written before the answer expires at {:?} ms, deadline {:?} ms)",
        describe(input, op),
        ack_ms,
        best,
        best.map(|e| e - input.margin_ms)
      ));
    }
  }
  f
}

/// Figures for the report: requests, acknowledgements, availability in and
/// out of faults, recovery per fault kind.
pub fn report(input: &Input, f: &Findings, extra: &str) -> String {
  let mut out = String::new();
  let ops = input.ops;
  let incr = ops.iter().filter(|o| o.kind == Kind::Incr).count();
  let acked = ops
    .iter()
    .filter(|o| o.kind == Kind::Incr && o.value().is_some())
    .count();
  let refused = ops
    .iter()
    .filter(|o| matches!(o.outcome, Outcome::Refused(_)))
    .count();
  let status = ops
    .iter()
    .filter(|o| matches!(o.outcome, Outcome::Status(_)))
    .count();
  let errors = ops
    .iter()
    .filter(|o| matches!(o.outcome, Outcome::Error(_)))
    .count();
  // Fault windows: from the injection until every object acknowledged an
  // increment sent after it (or the heal, if later).
  let mut windows = Vec::new();
  let mut recovery: BTreeMap<&str, Vec<Option<u64>>> = BTreeMap::new();
  let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
  for fault in input.faults {
    let mut recovered = Some(fault.start);
    for obj in 0..input.objects.len() {
      let first = ops
        .iter()
        .filter(|o| {
          o.object == obj && o.kind == Kind::Incr && o.value().is_some() && o.t0 >= fault.start
        })
        .map(|o| o.t1)
        .min();
      recovered = match (recovered, first) {
        (Some(r), Some(t)) => Some(r.max(t)),
        _ => None,
      };
    }
    let end = recovered.unwrap_or(u64::MAX).max(fault.heal);
    windows.push((fault.start, end));
    recovery
      .entry(fault.kind)
      .or_default()
      .push(recovered.map(|r| (r - fault.start) / 1000));
    *counts.entry(fault.kind).or_default() += 1;
  }
  let in_fault = |t: u64| windows.iter().any(|&(s, e)| t >= s && t <= e);
  // Poisoned increments never succeed: they are not availability.
  let (during, outside): (Vec<&Op>, Vec<&Op>) = ops
    .iter()
    .filter(|o| o.kind != Kind::Poison)
    .partition(|o| in_fault(o.t0));
  let poisoned = ops.iter().filter(|o| o.kind == Kind::Poison).count();
  let reads = ops.iter().filter(|o| o.kind == Kind::Read).count();
  let pct = |v: &[&Op]| {
    if v.is_empty() {
      "n/a".to_string()
    } else {
      format!(
        "{:.1}% of {}",
        100.0 * v.iter().filter(|o| o.value().is_some()).count() as f64 / v.len() as f64,
        v.len()
      )
    }
  };
  let _ = writeln!(
    out,
    "faults by kind: {}",
    counts
      .iter()
      .map(|(k, n)| format!("{k}={n}"))
      .collect::<Vec<_>>()
      .join(" ")
  );
  let _ = writeln!(
    out,
    "requests: {} ({} increments, {} reads, {} poisoned); acknowledged increments: {}; refused (503 + owner): {}; other status: {}; timeouts/errors: {}",
    ops.len(),
    incr,
    reads,
    poisoned,
    acked,
    refused,
    status,
    errors
  );
  let _ = writeln!(
    out,
    "lost: {}; duplicated: {}; order violations: {}; acks after the fence deadline: {}; poisoned increments acknowledged: {}; stale reads: {}",
    f.lost, f.duplicated, f.order, f.late_acks, f.poison_acks, f.stale_reads
  );
  let _ = writeln!(
    out,
    "availability (answered 200): during faults {}; outside faults {}",
    pct(&during),
    pct(&outside)
  );
  let _ = writeln!(
    out,
    "recovery (fault start until every object acknowledged an increment sent after it), ms:"
  );
  for (kind, list) in &recovery {
    let done: Vec<u64> = list.iter().flatten().copied().collect();
    let mut sorted = done.clone();
    sorted.sort_unstable();
    let mean = if done.is_empty() {
      0
    } else {
      done.iter().sum::<u64>() / done.len() as u64
    };
    let _ = writeln!(
      out,
      "  {kind:<10} n={:<3} mean={:<6} median={:<6} max={:<6}{}",
      list.len(),
      mean,
      sorted.get(sorted.len() / 2).copied().unwrap_or(0),
      sorted.last().copied().unwrap_or(0),
      if done.len() < list.len() {
        format!(" (never recovered: {})", list.len() - done.len())
      } else {
        String::new()
      }
    );
  }
  let per_object: HashMap<usize, usize> = ops
    .iter()
    .filter(|o| o.kind == Kind::Incr && o.value().is_some())
    .fold(HashMap::new(), |mut m, o| {
      *m.entry(o.object).or_default() += 1;
      m
    });
  let _ = writeln!(
    out,
    "final counts: {}",
    input
      .objects
      .iter()
      .enumerate()
      .map(|(i, n)| format!(
        "{n}={} ({} acked)",
        input.finals[i],
        per_object.get(&i).copied().unwrap_or(0)
      ))
      .collect::<Vec<_>>()
      .join(" ")
  );
  out.push_str(extra);
  out
}

/// The history as text, one operation a line, for a failed run's files.
pub fn history_text(input: &Input) -> String {
  let mut out = String::new();
  let mut ops: Vec<&Op> = input.ops.iter().collect();
  ops.sort_by_key(|o| o.t0);
  for f in input.faults {
    let _ = writeln!(
      out,
      "# fault {} node={:?} start={} heal={}",
      f.kind,
      f.node.map(|n| input.nodes[n].as_str()),
      f.start,
      f.heal
    );
  }
  for s in input.stops {
    let _ = writeln!(
      out,
      "# stopped {} from {} to {}",
      input.nodes[s.node], s.stop, s.cont
    );
  }
  for (n, set) in input.leases.iter().enumerate() {
    let _ = writeln!(out, "# lease {} expires_ms {:?}", input.nodes[n], set);
  }
  for o in ops {
    let _ = writeln!(
      out,
      "{} {} c{} {} {} {:?} {:?}",
      o.t0, o.t1, o.client, input.objects[o.object], input.nodes[o.node], o.kind, o.outcome
    );
  }
  out
}

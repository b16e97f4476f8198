//! workerd's compatibility flags as data: for a Worker's compatibility date
//! and the flags it names, which of workerd's flags are on. The runtime
//! reads the ones it honours from here (Node.js modules, ...), and a Worker
//! sees all of them in `Cloudflare.compatibilityFlags`, as on workerd.

mod table;

pub use table::FLAGS;

/// One of workerd's flags.
#[derive(Debug)]
pub struct Flag {
  /// The name that turns it on (its key in `Cloudflare.compatibilityFlags`).
  pub name: &'static str,
  /// The name that turns it off, if it has one.
  pub disable: Option<&'static str>,
  /// The compatibility date from which it is on unnamed.
  pub date: Option<&'static str>,
  /// On where any of these flags is on and the date is from the second.
  pub implied: Option<(&'static [&'static str], &'static str)>,
  /// Only under workerd's `--experimental`.
  pub experimental: bool,
}

/// The newest compatibility date workerd 1.20261117.1 knows: what a Worker
/// with no date gets ("today's behaviour").
pub const LATEST: &str = "2026-11-17";

/// Every flag's value, in workerd's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved(Vec<bool>);

impl Resolved {
  /// Whether `name` (a flag's enable name) is on; false for a name workerd
  /// does not have.
  pub fn on(&self, name: &str) -> bool {
    FLAGS
      .iter()
      .position(|f| f.name == name)
      .is_some_and(|i| self.0[i])
  }

  /// (name, on) for every flag, in workerd's order.
  pub fn iter(&self) -> impl Iterator<Item = (&'static str, bool)> + '_ {
    FLAGS.iter().zip(&self.0).map(|(f, on)| (f.name, *on))
  }
}

/// Which flags are on for `date` (none: `LATEST`) and the `named` flags.
/// A named enable flag is on, a named disable flag off whatever the date or
/// an implication says; otherwise a flag is on from its date, or where a
/// flag that implies it is on and the date is from the implication's.
pub fn resolve(date: Option<&str>, named: &[String]) -> Resolved {
  let date = date.unwrap_or(LATEST);
  let named = |n: &str| named.iter().any(|x| x == n);
  let mut on: Vec<bool> = FLAGS
    .iter()
    .map(|f| named(f.name) || f.date.is_some_and(|d| date >= d))
    .collect();
  let off: Vec<bool> = FLAGS.iter().map(|f| f.disable.is_some_and(named)).collect();
  // Implications chain (http server modules <- http modules <- nodejs_compat):
  // apply them until nothing changes.
  loop {
    let mut changed = false;
    for (i, f) in FLAGS.iter().enumerate() {
      if on[i] || off[i] {
        continue;
      }
      if let Some((by, since)) = f.implied
        && date >= since
        && by.iter().any(|b| {
          FLAGS
            .iter()
            .position(|g| g.name == *b)
            .is_some_and(|j| on[j] && !off[j])
        })
      {
        on[i] = true;
        changed = true;
      }
    }
    if !changed {
      break;
    }
  }
  for (i, o) in off.iter().enumerate() {
    on[i] &= !o;
  }
  Resolved(on)
}

/// The flag `name` names (as its enable or disable name), and whether it
/// names the disable side.
pub fn find(name: &str) -> Option<(&'static Flag, bool)> {
  FLAGS.iter().find_map(|f| {
    (f.name == name)
      .then_some((f, false))
      .or_else(|| (f.disable == Some(name)).then_some((f, true)))
  })
}

/// The compatibility date from which `name` is on for a Worker that has
/// Node.js compatibility (its own date, or the date nodejs_compat implies
/// it from), for messages.
pub fn since(name: &str) -> Option<&'static str> {
  let f = FLAGS.iter().find(|f| f.name == name)?;
  f.date.or(f.implied.map(|(_, d)| d))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
  }

  #[test]
  fn a_date_turns_flags_on_and_a_named_disable_flag_off() {
    let old = resolve(Some("2022-06-01"), &[]);
    assert!(!old.on("url_standard") && old.on("global_navigator"));
    let new = resolve(Some("2026-11-01"), &names(&["url_original"]));
    assert!(!new.on("url_standard"));
    assert!(new.on("streams_enable_constructors"));
    assert!(!resolve(None, &[]).on("no_such_flag"));
  }

  #[test]
  fn implications_follow_the_flag_that_implies_and_their_date() {
    // nodejs_compat implies node:fs from 2025-09-15 only.
    let early = resolve(Some("2025-01-01"), &names(&["nodejs_compat"]));
    assert!(early.on("nodejs_compat_v2") && !early.on("enable_nodejs_fs_module"));
    let later = resolve(Some("2025-10-01"), &names(&["nodejs_compat"]));
    assert!(later.on("enable_nodejs_fs_module"));
    // A chain: http server modules <- http modules <- nodejs_compat.
    assert!(later.on("enable_nodejs_http_server_modules"));
    let cut = resolve(
      Some("2025-10-01"),
      &names(&["nodejs_compat", "disable_nodejs_http_modules"]),
    );
    assert!(!cut.on("enable_nodejs_http_modules"));
    assert!(!cut.on("enable_nodejs_http_server_modules"));
    // nodejs_compat is on by date from 2026-08-04, and so are its implications.
    assert!(resolve(Some("2026-08-04"), &[]).on("enable_nodejs_fs_module"));
    let none = resolve(Some("2026-11-01"), &names(&["no_nodejs_compat"]));
    assert!(!none.on("enable_nodejs_fs_module") && !none.on("nodejs_compat"));
  }

  #[test]
  fn names_are_found_on_either_side() {
    assert_eq!(
      find("url_original").map(|(f, off)| (f.name, off)),
      Some(("url_standard", true))
    );
    assert_eq!(
      find("url_standard").map(|(f, off)| (f.name, off)),
      Some(("url_standard", false))
    );
    assert!(find("no_such_flag").is_none());
    assert_eq!(since("enable_nodejs_http2_module"), Some("2025-09-01"));
  }
}

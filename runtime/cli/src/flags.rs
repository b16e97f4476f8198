//! Compatibility flags and the dates that imply them. A flag cellhost
//! honours is applied where the runtime reads it; one whose behaviour
//! cellhost lacks is a warning that names what is missing; a flag workerd
//! does not know is a warning too (as wrangler warns), never silence.

/// How cellhost stands with a flag's behaviour.
enum Support {
  /// Read by the runtime (see where the flag's name is used).
  Honoured,
  /// cellhost behaves this way whatever the flag says.
  Always,
  /// Not there yet: the words name what is missing.
  Missing(&'static str),
}

/// (flag, the compatibility date from which it is on without being named,
/// support). Flags that only turn a default off are listed with no date.
const FLAGS: &[(&str, Option<&str>, Support)] = &[
  (
    "allow_eval_during_startup",
    Some("2025-06-01"),
    Support::Honoured,
  ),
  ("disallow_eval_during_startup", None, Support::Honoured),
  (
    "nodejs_compat",
    Some("2026-08-04"),
    Support::Missing("Node.js built-in modules (node:*) and globals (Buffer, process)"),
  ),
  (
    "nodejs_compat_v2",
    Some("2026-08-04"),
    Support::Missing("Node.js built-in modules (node:*) and globals (Buffer, process)"),
  ),
  (
    "nodejs_als",
    None,
    Support::Missing("node:async_hooks (AsyncLocalStorage)"),
  ),
  (
    "nodejs_compat_populate_process_env",
    None,
    Support::Missing("process.env"),
  ),
  ("no_nodejs_compat", None, Support::Always),
  ("no_nodejs_compat_v2", None, Support::Always),
  ("js_rpc", None, Support::Always),
  ("rpc", None, Support::Always),
  (
    "fetcher_has_get_put_delete",
    None,
    Support::Missing("get/put/delete on service bindings"),
  ),
  (
    "delete_all_deletes_alarm",
    Some("2026-02-24"),
    Support::Always,
  ),
  (
    "experimental",
    None,
    Support::Missing("workerd's experimental APIs"),
  ),
];

/// Warns about every named or date-implied flag whose behaviour cellhost
/// lacks, and about flags it does not know.
pub fn check(file: &std::path::Path, date: Option<&str>, named: &[String]) {
  for flag in named {
    match FLAGS.iter().find(|(f, _, _)| f == flag) {
      Some((_, _, Support::Missing(what))) => tracing::warn!(
        "{}: compatibility flag `{flag}`: {what} not supported by cellhost yet",
        file.display()
      ),
      Some(_) => {}
      None => tracing::warn!(
        "{}: unknown compatibility flag `{flag}` is ignored",
        file.display()
      ),
    }
  }
  let Some(date) = date else { return };
  for (flag, since, support) in FLAGS {
    if let (Some(since), Support::Missing(what)) = (since, support)
      && date >= *since
      && !named
        .iter()
        .any(|n| n == flag || n == &format!("no_{flag}"))
    {
      tracing::warn!(
        "{}: compatibility date {date} turns on `{flag}`: {what} not supported by cellhost yet",
        file.display()
      );
    }
  }
}

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
  ("nodejs_compat", Some("2026-08-04"), Support::Honoured),
  ("nodejs_compat_v2", Some("2026-08-04"), Support::Honoured),
  ("nodejs_als", None, Support::Honoured),
  (
    "enable_nodejs_fs_module",
    Some("2025-09-15"),
    Support::Honoured,
  ),
  ("disable_nodejs_fs_module", None, Support::Honoured),
  (
    "nodejs_compat_populate_process_env",
    Some("2025-04-01"),
    Support::Honoured,
  ),
  (
    "nodejs_compat_do_not_populate_process_env",
    None,
    Support::Honoured,
  ),
  ("no_nodejs_compat", None, Support::Always),
  ("no_nodejs_compat_v2", None, Support::Always),
  (
    "assets_navigation_prefers_asset_serving",
    Some("2025-04-01"),
    Support::Honoured,
  ),
  ("assets_navigation_has_no_effect", None, Support::Honoured),
  ("enable_ctx_exports", Some("2025-11-17"), Support::Honoured),
  ("disable_ctx_exports", None, Support::Honoured),
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
      None if cellhost_host::node::is_stub_flag(flag) => {}
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

/// `ctx.exports`: from 2025-11-17 or by `enable_ctx_exports` (a Worker
/// given as a bare file, with no config, gets today's behaviour).
pub fn ctx_exports(date: Option<&str>, flags: &[String]) -> bool {
  let flag = |f: &str| flags.iter().any(|x| x == f);
  !flag("disable_ctx_exports")
    && (flag("enable_ctx_exports") || date.is_none_or(|d| d >= "2025-11-17"))
}

/// Node.js compatibility: `nodejs_compat` (or `_v2`, or a date from
/// 2026-08-04) gives the modules and globals, `nodejs_als` only
/// `node:async_hooks`; `process.env` holds the text bindings from
/// 2025-04-01 or by flag.
pub fn node_compat(date: Option<&str>, flags: &[String]) -> cellhost_host::NodeCompat {
  use cellhost_host::NodeCompat;
  let flag = |f: &str| flags.iter().any(|x| x == f);
  let since = |d: &str| date.is_some_and(|x| x >= d);
  let on = (flag("nodejs_compat") || flag("nodejs_compat_v2") || since("2026-08-04"))
    && !flag("no_nodejs_compat");
  if on {
    let populate_env = (flag("nodejs_compat_populate_process_env") || since("2025-04-01"))
      && !flag("nodejs_compat_do_not_populate_process_env");
    // workerd's node:fs from 2025-09-15 (enable_nodejs_fs_module).
    let fs =
      (flag("enable_nodejs_fs_module") || since("2025-09-15")) && !flag("disable_nodejs_fs_module");
    let stubs = cellhost_host::node::stubs(date, flags);
    NodeCompat::On {
      populate_env,
      fs,
      stubs,
    }
  } else if flag("nodejs_als") {
    NodeCompat::AsyncLocalStorage
  } else {
    NodeCompat::Off
  }
}

#[cfg(test)]
mod tests {
  use cellhost_host::NodeCompat;
  use cellhost_host::node::ALL_STUBS;

  fn flags(f: &[&str]) -> Vec<String> {
    f.iter().map(|s| s.to_string()).collect()
  }

  #[test]
  fn node_compat_by_flag_and_date() {
    let nc = super::node_compat;
    assert_eq!(nc(Some("2024-01-01"), &flags(&[])), NodeCompat::Off);
    assert_eq!(
      nc(Some("2024-01-01"), &flags(&["nodejs_compat"])),
      NodeCompat::On {
        populate_env: false,
        fs: false,
        stubs: 0
      }
    );
    assert_eq!(
      nc(Some("2025-04-01"), &flags(&["nodejs_compat"])),
      NodeCompat::On {
        populate_env: true,
        fs: false,
        stubs: 0
      }
    );
    assert_eq!(
      nc(
        Some("2026-08-04"),
        &flags(&["nodejs_compat_do_not_populate_process_env"])
      ),
      NodeCompat::On {
        populate_env: false,
        fs: true,
        stubs: ALL_STUBS
      }
    );
    assert_eq!(
      nc(Some("2026-09-01"), &flags(&["disable_nodejs_fs_module"])),
      NodeCompat::On {
        populate_env: true,
        fs: false,
        stubs: ALL_STUBS
      }
    );
    assert_eq!(
      nc(
        Some("2025-01-01"),
        &flags(&["nodejs_compat", "enable_nodejs_fs_module"])
      ),
      NodeCompat::On {
        populate_env: false,
        fs: true,
        stubs: 0
      }
    );
    assert_eq!(
      nc(Some("2026-09-01"), &flags(&["no_nodejs_compat"])),
      NodeCompat::Off
    );
    assert_eq!(
      nc(None, &flags(&["nodejs_als"])),
      NodeCompat::AsyncLocalStorage
    );
  }
}

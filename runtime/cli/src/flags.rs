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

/// (flag, support) for the flags whose behaviour cellhost knows it has or
/// lacks, by the name that asks for the behaviour (a flag named by its
/// other side, in workerd's table, is the same flag); their dates and
/// implications are `cellhost_compat`'s.
const FLAGS: &[(&str, Support)] = &[
  ("allow_eval_during_startup", Support::Honoured),
  ("nodejs_compat", Support::Honoured),
  ("nodejs_compat_v2", Support::Honoured),
  ("nodejs_als", Support::Honoured),
  ("enable_nodejs_fs_module", Support::Honoured),
  ("nodejs_compat_populate_process_env", Support::Honoured),
  ("assets_navigation_prefers_asset_serving", Support::Honoured),
  ("enable_ctx_exports", Support::Honoured),
  ("formdata_parser_supports_files", Support::Honoured),
  ("upper_case_all_http_methods", Support::Honoured),
  ("cache_option_enabled", Support::Honoured),
  ("cache_no_cache_enabled", Support::Honoured),
  ("enable_global_performance_classes", Support::Honoured),
  ("js_rpc", Support::Always),
  ("rpc", Support::Always),
  (
    "fetcher_has_get_put_delete",
    Support::Missing("get/put/delete on service bindings"),
  ),
  ("delete_all_deletes_alarm", Support::Always),
  (
    "experimental",
    Support::Missing("workerd's experimental APIs"),
  ),
];

/// Warns about every named or date-implied flag whose behaviour cellhost
/// lacks, about workerd flags it does not read, and about flags workerd
/// does not know.
pub fn check(file: &std::path::Path, compat: &cellhost_compat::Resolved, named: &[String]) {
  for flag in named {
    let workerds = cellhost_compat::find(flag).map(|(f, _)| f.name);
    // A flag that gates a Node.js module, named on either side.
    let gated = workerds.is_some_and(|f| cellhost_host::node::GATED.iter().any(|(_, g)| *g == f));
    match FLAGS
      .iter()
      .find(|(f, _)| workerds == Some(*f) || f == flag)
    {
      // Only the side that asks for the missing behaviour.
      Some((f, Support::Missing(what))) if f == flag => tracing::warn!(
        "{}: compatibility flag `{flag}`: {what} not supported by cellhost yet",
        file.display()
      ),
      Some(_) => {}
      None if gated => {}
      None if workerds.is_some() => tracing::warn!(
        "{}: compatibility flag `{flag}` is workerd's, but cellhost does not read it: \
         it shows in Cloudflare.compatibilityFlags, and the behaviour stays cellhost's own",
        file.display()
      ),
      None => tracing::warn!(
        "{}: unknown compatibility flag `{flag}` is ignored (workerd has no such flag)",
        file.display()
      ),
    }
  }
  for (flag, support) in FLAGS {
    if let Support::Missing(what) = support
      && compat.on(flag)
      && !named.iter().any(|n| n == flag)
    {
      tracing::warn!(
        "{}: the compatibility date turns on `{flag}`: {what} not supported by cellhost yet",
        file.display()
      );
    }
  }
}

/// Node.js compatibility: `nodejs_compat` (or `_v2`, or a date from
/// 2026-08-04) gives the modules and globals, `nodejs_als` only
/// `node:async_hooks`; `process.env` holds the text bindings, node:fs and
/// the gated modules are there as the flags and the date say.
pub fn node_compat(compat: &cellhost_compat::Resolved) -> cellhost_host::NodeCompat {
  use cellhost_host::NodeCompat;
  if compat.on("nodejs_compat") || compat.on("nodejs_compat_v2") {
    NodeCompat::On {
      populate_env: compat.on("nodejs_compat_populate_process_env"),
      fs: compat.on("enable_nodejs_fs_module"),
      gated: cellhost_host::node::gated(compat),
    }
  } else if compat.on("nodejs_als") {
    NodeCompat::AsyncLocalStorage
  } else {
    NodeCompat::Off
  }
}

#[cfg(test)]
mod tests {
  use cellhost_host::NodeCompat;
  use cellhost_host::node::ALL_GATED;

  fn flags(f: &[&str]) -> Vec<String> {
    f.iter().map(|s| s.to_string()).collect()
  }

  #[test]
  fn node_compat_by_flag_and_date() {
    let nc = |date, named: &[String]| super::node_compat(&cellhost_compat::resolve(date, named));
    assert_eq!(nc(Some("2024-01-01"), &flags(&[])), NodeCompat::Off);
    assert_eq!(
      nc(Some("2024-01-01"), &flags(&["nodejs_compat"])),
      NodeCompat::On {
        populate_env: false,
        fs: false,
        gated: 0
      }
    );
    assert_eq!(
      nc(Some("2025-04-01"), &flags(&["nodejs_compat"])),
      NodeCompat::On {
        populate_env: true,
        fs: false,
        gated: 0
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
        gated: ALL_GATED
      }
    );
    assert_eq!(
      nc(Some("2026-09-01"), &flags(&["disable_nodejs_fs_module"])),
      NodeCompat::On {
        populate_env: true,
        fs: false,
        gated: ALL_GATED
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
        gated: 0
      }
    );
    // As on workerd: nodejs_compat_v2 (on by date) keeps the modules that
    // need no other flag; only both `no_` flags take Node.js away.
    assert_eq!(
      nc(Some("2026-09-01"), &flags(&["no_nodejs_compat"])),
      NodeCompat::On {
        populate_env: false,
        fs: false,
        gated: 0
      }
    );
    assert_eq!(
      nc(
        Some("2026-09-01"),
        &flags(&["no_nodejs_compat", "no_nodejs_compat_v2"])
      ),
      NodeCompat::Off
    );
    assert_eq!(
      nc(Some("2025-01-01"), &flags(&["nodejs_als"])),
      NodeCompat::AsyncLocalStorage
    );
  }
}

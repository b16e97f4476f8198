//! Node.js modules whose namespace differs between deno_node and workerd
//! get a wrapper module with workerd's export names: names deno_node lacks
//! are added (`js/wrap/*.js`), names workerd lacks are left out, so a bundle
//! that links against workerd links here too. The host's module loader
//! serves a wrapper for `node:<name>`; the wrapper's own imports of
//! `node:<name>` reach deno_node's module. (node:util, node:url and
//! node:worker_threads are registered under their own names instead: see
//! `lib.rs`.)

/// (module name without `node:`, wrapper source).
pub const WRAPPERS: &[(&str, &str)] = &[
  // node:http's server and IncomingMessage, shared by node:http, node:https
  // and cloudflare:node (`_`: no Worker imports it by this name).
  ("_http_server", include_str!("../js/wrap/http_server.js")),
  (
    "_cloudflare_node",
    include_str!("../js/wrap/cloudflare_node.js"),
  ),
  ("assert", include_str!("../js/wrap/assert.js")),
  ("assert/strict", include_str!("../js/wrap/assert_strict.js")),
  (
    "diagnostics_channel",
    include_str!("../js/wrap/diagnostics_channel.js"),
  ),
  // DNS over HTTPS through the Worker's fetch, as workerd: no deno_node.
  (
    "dns",
    concat!(
      include_str!("../js/wrap/dns.js"),
      include_str!("../js/wrap/dns_errors.js"),
      include_str!("../js/wrap/dns_records.js"),
      include_str!("../js/wrap/dns_api.js"),
    ),
  ),
  ("dns/promises", include_str!("../js/wrap/dns_promises.js")),
  ("events", include_str!("../js/wrap/events.js")),
  (
    "http",
    concat!(
      include_str!("../js/wrap/http_client.js"),
      include_str!("../js/wrap/http.js")
    ),
  ),
  (
    "https",
    concat!(
      include_str!("../js/wrap/http_client.js"),
      include_str!("../js/wrap/https.js")
    ),
  ),
  ("net", include_str!("../js/wrap/net.js")),
  ("os", include_str!("../js/wrap/os.js")),
  (
    "path",
    concat!(
      include_str!("../js/wrap/path_cwd.js"),
      include_str!("../js/wrap/path.js")
    ),
  ),
  (
    "path/posix",
    concat!(
      include_str!("../js/wrap/path_cwd.js"),
      include_str!("../js/wrap/path_posix.js")
    ),
  ),
  (
    "stream/consumers",
    include_str!("../js/wrap/stream_consumers.js"),
  ),
  (
    "stream/promises",
    include_str!("../js/wrap/stream_promises.js"),
  ),
  ("timers", include_str!("../js/wrap/timers.js")),
  ("tls", include_str!("../js/wrap/tls.js")),
  ("util/types", include_str!("../js/wrap/util_types.js")),
];

/// The wrapper of `node:<name>`, if it has one (a stub's source counts:
/// `crate::stub`).
pub fn wrapper(name: &str) -> Option<&'static str> {
  (WRAPPERS.iter().chain(crate::stub::STUBS))
    .find(|(n, _)| *n == name)
    .map(|(_, s)| *s)
}

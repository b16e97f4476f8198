//! The ordered extension list. The snapshot (built by the host's build script)
//! and every isolate must register the same extensions in the same order.

use std::sync::Arc;

use deno_core::{Extension, OpState};

/// The extensions, in order: the build script snapshots them and every
/// isolate built from the snapshot registers them again (ops only where the
/// extension wants runtime options: see `runtime_args`).
pub fn extensions() -> Vec<Extension> {
  vec![
    deno_webidl::deno_webidl::init(),
    url_by_ada(deno_web::deno_web::lazy_init()),
    deno_fetch::deno_fetch::lazy_init(),
    deno_crypto::deno_crypto::lazy_init(),
    cellhost_crypto::cellhost_crypto::init(),
    host_ops_disabled(deno_net::deno_net::lazy_init()),
    deno_tls::deno_tls::init(),
    cellhost_html::cellhost_html::init(),
  ]
  .into_iter()
  .chain(cellhost_node::extensions())
  .chain([
    cellhost_sockets::cellhost_sockets::init(),
    cellhost_cache::cellhost_cache::init(),
    cellhost_assets::binding::cellhost_assets::init(),
    cellhost_kv::cellhost_kv::init(),
    cellhost_r2::cellhost_r2::init(),
    cellhost_d1::cellhost_d1::init(),
    cellhost_queues::cellhost_queues::init(),
    crate::cellhost::init(),
  ])
  .collect()
}

/// Options for the lazily initialised extensions, in the same order.
pub fn runtime_args() -> Vec<deno_core::ExtensionArguments> {
  vec![
    deno_web::deno_web::args(
      Arc::new(deno_web::BlobStore::default()),
      None,
      false,
      deno_web::InMemoryBroadcastChannel::default(),
    ),
    deno_fetch::deno_fetch::args(deno_fetch::Options {
      user_agent: "Cloudflare-Workers".into(),
      request_builder_hook: Some(crate::egress::fetch_request_hook),
      resolver: crate::egress::fetch_resolver(),
      ..Default::default()
    }),
    deno_crypto::deno_crypto::args(None),
    deno_net::deno_net::args(None, None),
  ]
}

/// deno_web with its URL parsing done by ada (`cellhost_url`).
fn url_by_ada(mut ext: Extension) -> Extension {
  ext.middleware_fn = Some(Box::new(cellhost_url::ada_ops));
  ext
}

/// Ops of deno_net a Worker must never have: listeners of every kind, UDP,
/// Unix sockets, vsock, tunnels, QUIC, DNS queries and the host's resolver
/// configuration. They stay in the op table (the snapshot and the isolates
/// must register the same ops in the same order) but throw when called.
/// Outbound TCP/TLS connections stay, under the egress policy.
fn host_ops_disabled(mut ext: Extension) -> Extension {
  ext.middleware_fn = Some(Box::new(
    |op| {
      if denied_op(op.name) { op.disable() } else { op }
    },
  ));
  ext
}

fn denied_op(name: &str) -> bool {
  const DENIED: [&str; 11] = [
    "listen",
    "accept",
    "unix",
    "vsock",
    "tunnel",
    "quic",
    "udp",
    "dns",
    "cert_resolver",
    "multi",
    "broadcast",
  ];
  DENIED.iter().any(|d| name.contains(d))
}

/// What a Worker may do on the host: outbound network connections (fetch,
/// WebSocket clients, `connect()`), further limited by the egress policy;
/// nothing else — no file system, environment, subprocesses, FFI or system
/// information (each denied, never prompted).
pub fn put_permissions(state: &mut OpState) {
  let parser = Arc::new(deno_permissions::RuntimePermissionDescriptorParser::new(
    sys_traits::impls::RealSys,
  ));
  // The egress policy (`egress`) decides where connections go, with its
  // own messages; here the network is simply not one of the denied kinds.
  let options = deno_permissions::PermissionsOptions {
    allow_net: Some(Vec::new()),
    prompt: false,
    ..Default::default()
  };
  let perms = deno_permissions::Permissions::from_options(parser.as_ref(), &options)
    .expect("static permission options parse");
  state.put(deno_permissions::PermissionsContainer::new(parser, perms));
}

#[cfg(test)]
mod tests {
  #[test]
  fn host_reaching_ops_are_denied_and_outbound_ones_kept() {
    let ext = super::host_ops_disabled(deno_net::deno_net::lazy_init());
    let names: Vec<&str> = ext.ops.iter().map(|o| o.name).collect();
    for denied in [
      "op_net_listen_tcp",
      "op_net_listen_udp",
      "op_net_connect_unix",
      "op_net_listen_unix",
      "op_net_listen_vsock",
      "op_net_connect_vsock",
      "op_net_listen_tunnel",
      "op_quic_endpoint_create",
      "op_dns_resolve",
      "op_net_get_system_dns_servers",
      "op_net_accept_tcp",
      "op_net_listen_tls",
    ] {
      assert!(names.contains(&denied), "{denied} exists in deno_net");
      assert!(super::denied_op(denied), "{denied}");
    }
    for kept in [
      "op_net_connect_tcp",
      "op_net_connect_tls",
      "op_tls_handshake",
      "op_set_nodelay",
    ] {
      assert!(!super::denied_op(kept), "{kept}");
    }
  }
}

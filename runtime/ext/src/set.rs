//! The ordered extension list. The snapshot (built by the host's build script)
//! and every isolate must register the same extensions in the same order.

use std::sync::Arc;

use deno_core::{Extension, OpState};

/// Extensions as the build script snapshots them: ops only where the
/// extension wants runtime options.
pub fn for_snapshot() -> Vec<Extension> {
  vec![
    deno_webidl::deno_webidl::init(),
    deno_web::deno_web::lazy_init(),
    deno_fetch::deno_fetch::lazy_init(),
    deno_crypto::deno_crypto::lazy_init(),
    deno_net::deno_net::lazy_init(),
    deno_tls::deno_tls::init(),
    crate::cellhost::init(),
  ]
}

/// Extensions for an isolate built from the snapshot.
pub fn for_runtime() -> Vec<Extension> {
  vec![
    deno_webidl::deno_webidl::init(),
    deno_web::deno_web::lazy_init(),
    deno_fetch::deno_fetch::lazy_init(),
    deno_crypto::deno_crypto::lazy_init(),
    deno_net::deno_net::lazy_init(),
    deno_tls::deno_tls::init(),
    crate::cellhost::init(),
  ]
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
      ..Default::default()
    }),
    deno_crypto::deno_crypto::args(None),
    deno_net::deno_net::args(None, None),
  ]
}

/// Outbound fetch is allowed everywhere, as on Workers; the permission
/// container is required by deno_fetch's ops.
pub fn put_permissions(state: &mut OpState) {
  let parser = Arc::new(deno_permissions::RuntimePermissionDescriptorParser::new(
    sys_traits::impls::RealSys,
  ));
  state.put(deno_permissions::PermissionsContainer::allow_all(parser));
}

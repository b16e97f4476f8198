//! The egress policy: where a Worker's outbound connections (`fetch`,
//! WebSocket clients) may go. The operator sets it once per process
//! (`--egress`); it is checked on the URL of every request (each redirect
//! hop is a new request) and, for `public`, again on every address DNS
//! returns, so a public name that resolves to a private address is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};

use deno_error::JsErrorBox;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Egress {
  /// Anything the host can reach (as `wrangler dev`): the default of `cellhost run`.
  #[default]
  All,
  /// Public addresses only: no loopback, private, link-local (cloud
  /// metadata), shared (CGNAT), multicast or unspecified ranges.
  Public,
  /// No outbound connections at all.
  None,
}

impl std::str::FromStr for Egress {
  type Err = String;
  fn from_str(s: &str) -> Result<Self, String> {
    match s {
      "all" => Ok(Egress::All),
      "public" => Ok(Egress::Public),
      "none" => Ok(Egress::None),
      _ => Err(format!(
        "unknown egress policy {s:?}: use all, public or none"
      )),
    }
  }
}

static POLICY: OnceLock<Egress> = OnceLock::new();

/// Sets the process's policy; the first call wins (one process, one policy).
pub fn set_policy(e: Egress) {
  let _ = POLICY.set(e);
}

pub fn policy() -> Egress {
  POLICY.get().copied().unwrap_or_default()
}

/// Whether `ip` is an address on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
  match ip {
    IpAddr::V4(v4) => is_public_v4(v4),
    IpAddr::V6(v6) => {
      if let Some(v4) = v6.to_ipv4_mapped() {
        return is_public_v4(v4);
      }
      let first = v6.segments()[0];
      !(v6.is_loopback()
        || v6.is_unspecified()
        || v6.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local fec0::/10
        || v6 == Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0) // NAT64 prefix base
        || (v6.segments()[..6] == [0, 0, 0, 0, 0, 0])) // IPv4-compatible, deprecated
    }
  }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
  let o = ip.octets();
  !(ip.is_loopback()
    || ip.is_private()
    || ip.is_link_local() // 169.254/16: cloud metadata lives here
    || ip.is_unspecified()
    || ip.is_broadcast()
    || ip.is_multicast()
    || o[0] == 0
    || (o[0] == 100 && (o[1] & 0xc0) == 64) // shared address space 100.64/10
    || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
    || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18/15
    || o[0] >= 240) // reserved
}

/// Checks a destination before connecting: the host of the URL.
pub fn check_host(host: &str) -> Result<(), String> {
  let refuse = |why: &str| {
    Err(format!(
      "egress to {host} is refused by this host's egress policy ({why})"
    ))
  };
  match policy() {
    Egress::All => Ok(()),
    Egress::None => refuse("none: no outbound connections"),
    Egress::Public => {
      let bare = host.trim_start_matches('[').trim_end_matches(']');
      if let Ok(ip) = bare.parse::<IpAddr>() {
        if !is_public(ip) {
          return refuse("public: not a public address");
        }
      } else if bare.eq_ignore_ascii_case("localhost") || bare.ends_with(".localhost") {
        return refuse("public: loopback");
      }
      Ok(())
    }
  }
}

/// Keeps only public addresses of a resolved name (`public`), or refuses.
pub fn check_resolved(host: &str, addrs: Vec<SocketAddr>) -> std::io::Result<Vec<SocketAddr>> {
  if policy() != Egress::Public {
    return Ok(addrs);
  }
  let public: Vec<SocketAddr> = addrs.into_iter().filter(|a| is_public(a.ip())).collect();
  if public.is_empty() {
    return Err(std::io::Error::new(
      std::io::ErrorKind::PermissionDenied,
      format!(
        "egress to {host} is refused by this host's egress policy (public: it resolves to no public address)"
      ),
    ));
  }
  Ok(public)
}

/// deno_fetch's hook for every request it sends (redirect hops included).
pub fn fetch_request_hook(req: &mut http::Request<deno_fetch::ReqBody>) -> Result<(), JsErrorBox> {
  let host = req.uri().host().unwrap_or("");
  check_host(host).map_err(JsErrorBox::type_error)
}

/// deno_fetch's resolver: the system resolver, then the policy on its answer.
#[derive(Debug)]
pub struct PolicyResolver;

impl deno_fetch::dns::Resolve for PolicyResolver {
  fn resolve(
    &self,
    name: hyper_util::client::legacy::connect::dns::Name,
  ) -> deno_fetch::dns::Resolving {
    Box::pin(async move {
      let host = name.as_str().to_string();
      let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
      Ok(check_resolved(&host, addrs)?.into_iter())
    })
  }
}

pub fn fetch_resolver() -> deno_fetch::dns::Resolver {
  deno_fetch::dns::Resolver::custom(Arc::new(PolicyResolver))
}

/// Resolves `host:port` for a client connection under the policy; the
/// caller connects to one of the returned addresses (not the name again).
pub async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
  check_host(host)?;
  let bare = host.trim_start_matches('[').trim_end_matches(']');
  let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
    .await
    .map_err(|e| format!("{host}: {e}"))?
    .collect();
  check_resolved(host, addrs).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn public_ranges() {
    for private in [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "fe80::1",
      "fd00::1",
      "::ffff:127.0.0.1",
      "::ffff:169.254.169.254",
      "224.0.0.1",
      "255.255.255.255",
    ] {
      assert!(!is_public(private.parse().unwrap()), "{private}");
    }
    for public in [
      "1.1.1.1",
      "8.8.8.8",
      "2606:4700:4700::1111",
      "::ffff:1.1.1.1",
    ] {
      assert!(is_public(public.parse().unwrap()), "{public}");
    }
  }
}

//! The URL a Worker sees for a request: `http://<Host><path and query>`, as workerd builds
//! it, but only from a Host header that can be a URL's authority. workerd pastes any Host in
//! (`Host: a/b?` makes `new URL(request.url).pathname` `/b`, an empty Host makes the first
//! path segment the host, `Host: x y` makes `new URL` throw); RFC 9112 §3.2 answers such a
//! request 400, and so does this server. Only `http` and `url`: the `http_head` cargo-fuzz
//! target (`fuzz/`) compiles this file on its own, behind hyper's parser.

use http::header::HOST;
use http::{HeaderMap, Uri};

/// What a request with a Host header [`request_url`] refuses is answered.
pub const BAD_HOST: &str = "Bad Request: invalid Host header\n";

/// The request's URL, or `None` when its Host header is not one `host[:port]` (more than one,
/// not ASCII, empty, or holding characters that would end the authority): the caller answers
/// 400. Without a Host header (HTTP/1.0) the host is `localhost`. A request target that is not
/// a path (`OPTIONS *`, `CONNECT host:port`) reads as `/`; an absolute-form target
/// contributes its path and query (the Host header names the host, as in workerd).
pub fn request_url(uri: &Uri, headers: &HeaderMap) -> Option<String> {
  let mut hosts = headers.get_all(HOST).iter();
  let host = match (hosts.next(), hosts.next()) {
    (None, _) => "localhost",
    (Some(h), None) => std::str::from_utf8(h.as_bytes())
      .ok()
      .filter(|h| is_authority(h))?,
    (Some(_), Some(_)) => return None,
  };
  let target = match uri.path_and_query().map(|p| p.as_str()) {
    Some(p) if p.starts_with('/') => p,
    _ => "/",
  };
  // The WHATWG parser a Worker's `new URL` uses has the last word: a port above 65535, a
  // malformed IPv6 literal or an `xn--` label that is not Punycode pass the syntax check.
  // Only the host can fail it (a path of a request target is percent-encoded, never
  // refused), so a thread remembers the last host that passed rather than parse per request.
  if !host_passed(host) {
    url::Url::parse(&format!("http://{host}/")).ok()?;
    LAST_HOST.with_borrow_mut(|h| host.clone_into(h));
  }
  Some(format!("http://{host}{target}"))
}

thread_local! {
  /// The last Host this thread's WHATWG check passed (connections repeat theirs).
  static LAST_HOST: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn host_passed(host: &str) -> bool {
  LAST_HOST.with_borrow(|h| !h.is_empty() && h == host)
}

/// RFC 3986 `host [ ":" port ]`: an IPv6 literal in brackets, or a reg-name/IPv4 address of
/// unreserved characters and sub-delims (no percent-encoding), then decimal digits.
fn is_authority(s: &str) -> bool {
  let (host, port) = match s.rfind(':') {
    Some(i) if !s[i..].contains(']') => (&s[..i], &s[i + 1..]),
    _ => (s, ""),
  };
  let host_ok = match host.strip_prefix('[') {
    Some(rest) => rest.strip_suffix(']').is_some_and(|ip| {
      !ip.is_empty()
        && ip
          .bytes()
          .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    }),
    None => {
      !host.is_empty()
        && host
          .bytes()
          .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b))
    }
  };
  host_ok && port.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
  use super::*;
  use http::HeaderValue;

  fn url(target: &str, hosts: &[&[u8]]) -> Option<String> {
    let uri: Uri = target.parse().unwrap();
    let mut h = HeaderMap::new();
    for v in hosts {
      h.append(HOST, HeaderValue::from_bytes(v).unwrap());
    }
    request_url(&uri, &h)
  }

  #[test]
  fn host_and_target_make_the_url() {
    assert_eq!(
      url("/p?q=1", &[b"example.com"]).unwrap(),
      "http://example.com/p?q=1"
    );
    assert_eq!(url("/p", &[b"h:8787"]).unwrap(), "http://h:8787/p");
    assert_eq!(url("/p", &[b"[::1]:80"]).unwrap(), "http://[::1]:80/p");
    assert_eq!(url("/p", &[b"127.0.0.1"]).unwrap(), "http://127.0.0.1/p");
    assert_eq!(url("/p", &[]).unwrap(), "http://localhost/p");
    assert_eq!(url("//a/b", &[b"h"]).unwrap(), "http://h//a/b");
    assert_eq!(url("http://other/x?y", &[b"h"]).unwrap(), "http://h/x?y");
    assert_eq!(url("*", &[b"h"]).unwrap(), "http://h/");
    assert_eq!(url("h:443", &[b"h"]).unwrap(), "http://h/");
  }

  /// Found by the `http_head` properties and the malformed-heads test (`tests/heads.rs`):
  /// the Host header was pasted in as it came. These made the Worker see another path
  /// (`a/b?` → `/b`, empty → the first segment became the host, `a#b` → `/`, `a\b` →
  /// `/b/…`), another host (`evil@good`), or a URL `new URL` refuses (examples/hello
  /// answered 500); a second Host header was ignored; a non-UTF-8 one became `localhost`.
  #[test]
  fn hosts_that_are_not_an_authority_are_refused() {
    for host in [
      &b""[..],
      b"a/b?",
      b"a?b",
      b"a#b",
      b"a\\b",
      b"evil@good",
      b"x y",
      b"a:99999",
      b"a:b:c",
      b"a:-1",
      b"%41",
      b"[::1",
      b"[]",
      b"[zz]",
      b"xn--a",
      b"1.2.3.4.5",
      "ünï".as_bytes(),
      b"\xff",
      b"a\tb",
    ] {
      assert_eq!(
        url("/p", &[host]),
        None,
        "{:?}",
        String::from_utf8_lossy(host)
      );
    }
    assert_eq!(url("/p", &[b"a", b"b"]), None);
  }

  /// Property tests (CI runs the default case count; `PROPTEST_CASES=N` more, see
  /// scripts/fuzz.sh); the `http_head` cargo-fuzz target drives the same checks through
  /// hyper's parser.
  mod props {
    use super::*;
    use proptest::prelude::*;

    /// Hosts a client may rightly send.
    fn good_host() -> impl Strategy<Value = String> {
      let name =
        prop_oneof![
          "[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?){0,3}"
            .prop_filter("a domain WHATWG takes", |h| {
              // A last label that is a number makes it an IPv4 address; `xn--` is Punycode.
              let last = h.rsplit('.').next().unwrap();
              !last.bytes().all(|b| b.is_ascii_digit())
                && !last.starts_with("0x")
                && !h.split('.').any(|l| l.starts_with("xn--"))
            }),
          any::<[u8; 4]>().prop_map(|[a, b, c, d]| format!("{a}.{b}.{c}.{d}")),
          any::<[u16; 8]>().prop_map(|ip| format!("[{}]", std::net::Ipv6Addr::from(ip))),
        ];
      (name, prop::option::of(any::<u16>()))
        .prop_map(|(h, port)| port.map_or(h.clone(), |p| format!("{h}:{p}")))
    }

    /// Host header bytes: good ones, near misses, anything.
    fn host_bytes() -> impl Strategy<Value = Vec<u8>> {
      prop_oneof![
        good_host().prop_map(String::into_bytes),
        "[a-z0-9.:@/?#\\\\\\[\\] %\\t~!$&'()*+,;=-]{0,12}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..12),
      ]
    }

    /// Request targets: paths with the characters the http crate lets through, `*`,
    /// absolute-form and authority-form.
    fn target() -> impl Strategy<Value = String> {
      prop_oneof![
        "/[a-zA-Z0-9/?#%.:@!$&'()*+,;=~\\[\\]{}|\\\\^`\"-]{0,24}",
        Just("*".to_string()),
        "http://[a-z]{1,5}(:[0-9]{1,5})?(/[a-z?=&]{0,8})?",
        "[a-z]{1,5}:[0-9]{1,5}",
      ]
    }

    proptest! {
      /// Whatever the Host header and target, the URL either is refused or parses with
      /// the target's own path and query, no user info and no fragment: the Host header
      /// names the host and nothing else.
      #[test]
      fn the_host_never_changes_the_path(host in prop::option::of(host_bytes()), target in target()) {
        let Ok(uri) = target.parse::<Uri>() else { return Ok(()) };
        let mut headers = HeaderMap::new();
        if let Some(h) = &host {
          let Ok(v) = HeaderValue::from_bytes(h) else { return Ok(()) };
          headers.insert(HOST, v);
        }
        let Some(u) = request_url(&uri, &headers) else {
          prop_assert!(host.is_some(), "refused without a Host header");
          return Ok(());
        };
        let parsed = url::Url::parse(&u).unwrap();
        let path = match uri.path_and_query().map(|p| p.as_str()) {
          Some(p) if p.starts_with('/') => p,
          _ => "/",
        };
        let alone = url::Url::parse(&format!("http://localhost{path}")).unwrap();
        prop_assert_eq!(parsed.path(), alone.path(), "{}", u);
        prop_assert_eq!(parsed.query(), alone.query(), "{}", u);
        prop_assert_eq!(parsed.username(), "");
        prop_assert_eq!(parsed.password(), None);
        prop_assert_eq!(parsed.fragment(), None);
        prop_assert!(parsed.host().is_some());
      }

      /// Every host a client may rightly send is taken as it came.
      #[test]
      fn good_hosts_are_taken(host in good_host(), path in "/[a-z0-9/]{0,10}") {
        let u = url(&path, &[host.as_bytes()]);
        prop_assert_eq!(u, Some(format!("http://{host}{path}")));
      }
    }
  }
}

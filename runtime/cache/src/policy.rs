//! How long the Cache API keeps a response: the rules of a shared HTTP
//! cache (RFC 9111) as `wrangler dev` applies them (http-cache-semantics):
//! `no-store`, `private` and `no-cache` keep nothing; `s-maxage`, then
//! `max-age`, then `Expires`, then a tenth of the age `Last-Modified`
//! implies; less the `Age` the response already has. A `Set-Cookie`
//! response is kept only when it is `public`.

use std::time::{Duration, UNIX_EPOCH};

/// Statuses a cache understands at all.
const UNDERSTOOD: [u16; 15] = [
  200, 203, 204, 206, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501,
];
/// Statuses cacheable without an explicit lifetime.
const BY_DEFAULT: [u16; 12] = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501];

/// The `Cache-Control` directives, lowercase, with their values.
fn directives(headers: &[(String, String)]) -> Vec<(String, Option<String>)> {
  let mut out = Vec::new();
  for (_, v) in headers
    .iter()
    .filter(|(k, _)| k.eq_ignore_ascii_case("cache-control"))
  {
    for part in v.split(',') {
      let part = part.trim();
      if part.is_empty() {
        continue;
      }
      match part.split_once('=') {
        Some((k, v)) => out.push((
          k.trim().to_ascii_lowercase(),
          Some(v.trim().trim_matches('"').to_string()),
        )),
        None => out.push((part.to_ascii_lowercase(), None)),
      }
    }
  }
  out
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
  headers
    .iter()
    .find(|(k, _)| k.eq_ignore_ascii_case(name))
    .map(|(_, v)| v.as_str())
}

fn date_ms(v: &str) -> Option<i64> {
  let t = httpdate::parse_http_date(v.trim()).ok()?;
  t.duration_since(UNIX_EPOCH)
    .ok()
    .map(|d: Duration| d.as_millis() as i64)
}

/// Milliseconds a response of `status` with `headers` stays fresh in a
/// shared cache, as of `now_ms`; 0 means it is not stored.
pub fn ttl_ms(status: u16, headers: &[(String, String)], now_ms: i64) -> i64 {
  let cc = directives(headers);
  let has = |d: &str| cc.iter().any(|(k, _)| k == d);
  let secs = |d: &str| {
    cc.iter()
      .find(|(k, _)| k == d)
      .and_then(|(_, v)| v.as_deref()?.parse::<i64>().ok())
  };
  let expires = header(headers, "expires");
  let storable = UNDERSTOOD.contains(&status)
    && !has("no-store")
    && !has("private")
    && (expires.is_some()
      || secs("max-age").is_some()
      || secs("s-maxage").is_some()
      || has("public")
      || BY_DEFAULT.contains(&status));
  if !storable || has("no-cache") {
    return 0;
  }
  if header(headers, "set-cookie").is_some() && !has("public") && !has("immutable") {
    return 0;
  }
  let min_ms = if has("immutable") {
    24 * 3600 * 1000
  } else {
    0
  };
  let max_age_ms = if has("proxy-revalidate") {
    0
  } else if let Some(s) = secs("s-maxage") {
    s.saturating_mul(1000)
  } else if let Some(s) = secs("max-age") {
    s.saturating_mul(1000)
  } else {
    let server_date = header(headers, "date").and_then(date_ms).unwrap_or(now_ms);
    if let Some(e) = expires {
      match date_ms(e) {
        Some(e) if e >= server_date => min_ms.max(e - server_date),
        _ => 0,
      }
    } else if let Some(lm) = header(headers, "last-modified").and_then(date_ms) {
      if server_date > lm {
        min_ms.max((server_date - lm) / 10)
      } else {
        min_ms
      }
    } else {
      min_ms
    }
  };
  let age_ms = header(headers, "age")
    .and_then(|a| a.trim().parse::<i64>().ok())
    .unwrap_or(0)
    .saturating_mul(1000);
  (max_age_ms - age_ms).max(0)
}

#[cfg(test)]
mod tests {
  use super::*;

  fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
      .iter()
      .map(|(k, v)| (k.to_string(), v.to_string()))
      .collect()
  }

  const NOW: i64 = 1_700_000_000_000; // 2023-11-14T22:13:20Z

  #[test]
  fn lifetimes_in_order_of_precedence() {
    let cc = |v| h(&[("Cache-Control", v)]);
    assert_eq!(ttl_ms(200, &cc("max-age=60"), NOW), 60_000);
    assert_eq!(
      ttl_ms(200, &cc("public, max-age=60, s-maxage=5"), NOW),
      5_000
    );
    assert_eq!(ttl_ms(200, &cc("max-age=\"30\""), NOW), 30_000);
    let mut aged = cc("max-age=60");
    aged.push(("age".into(), "45".into()));
    assert_eq!(ttl_ms(200, &aged, NOW), 15_000);
    aged[1].1 = "90".into();
    assert_eq!(ttl_ms(200, &aged, NOW), 0);
    // Expires against Date (the server's clock), else against now.
    let e = h(&[
      ("date", "Tue, 14 Nov 2023 22:13:20 GMT"),
      ("expires", "Tue, 14 Nov 2023 22:15:20 GMT"),
    ]);
    assert_eq!(ttl_ms(200, &e, 0), 120_000);
    assert_eq!(
      ttl_ms(
        200,
        &h(&[("expires", "Tue, 14 Nov 2023 22:14:20 GMT")]),
        NOW
      ),
      60_000
    );
    assert_eq!(ttl_ms(200, &h(&[("expires", "0")]), NOW), 0);
    // A tenth of the time since Last-Modified.
    let lm = h(&[("last-modified", "Tue, 14 Nov 2023 21:13:20 GMT")]);
    assert_eq!(ttl_ms(200, &lm, NOW), 360_000);
    assert_eq!(ttl_ms(200, &cc("immutable"), NOW), 86_400_000);
  }

  #[test]
  fn what_is_never_stored() {
    let cc = |v| h(&[("cache-control", v)]);
    for v in [
      "no-store, max-age=60",
      "private, max-age=60",
      "no-cache, max-age=60",
      "max-age=0",
    ] {
      assert_eq!(ttl_ms(200, &cc(v), NOW), 0, "{v}");
    }
    // No lifetime at all.
    assert_eq!(ttl_ms(200, &[], NOW), 0);
    // Statuses a cache does not understand, even with a lifetime.
    assert_eq!(ttl_ms(500, &cc("max-age=60"), NOW), 0);
    assert_eq!(ttl_ms(201, &cc("max-age=60"), NOW), 0);
    // Not cacheable by default, but stored with an explicit lifetime.
    assert_eq!(ttl_ms(302, &cc("max-age=60"), NOW), 60_000);
    // Set-Cookie: only when public.
    let mut c = cc("max-age=60");
    c.push(("set-cookie".into(), "a=b".into()));
    assert_eq!(ttl_ms(200, &c, NOW), 0);
    c[0].1 = "public, max-age=60".into();
    assert_eq!(ttl_ms(200, &c, NOW), 60_000);
  }
}

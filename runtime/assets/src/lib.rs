//! Static assets (wrangler's `assets`): the directory is read once at start
//! into a manifest (path → file, content hash, type), and each request is
//! resolved as Cloudflare's router and asset workers resolve it: whether it
//! goes to the Worker or to the assets (`run_worker_first`), `_redirects`,
//! `html_handling`, `not_found_handling`, `ETag`/`If-None-Match`, `_headers`.
//! The server serves assets before any isolate sees the request; the
//! Worker reaches the same resolver through `env.ASSETS.fetch()` (binding).

pub mod binding;
mod intent;
mod manifest;
mod rules;

use std::collections::HashMap;
use std::path::PathBuf;

use intent::{Exists, Intent, Resolver};
pub use intent::{HtmlHandling, NotFound};
pub use manifest::File;
use rules::{HeaderRules, Pattern, Redirects};

/// `run_worker_first`: never, always, or by path patterns.
#[derive(Debug, Default)]
pub enum RunWorkerFirst {
  #[default]
  No,
  Yes,
  /// `/api/*` patterns send to the Worker; `!/api/public/*` back to assets.
  Patterns {
    worker: Vec<Pattern>,
    assets: Vec<Pattern>,
  },
}

impl RunWorkerFirst {
  /// wrangler's rules for the list form, with its error messages.
  pub fn patterns(rules: &[String]) -> Result<RunWorkerFirst, String> {
    if rules.is_empty() {
      return Err(
        "No `run_worker_first` rules were provided; must provide at least 1 rule.".into(),
      );
    }
    if rules.len() > 100 {
      return Err(format!(
        "Too many `run_worker_first` rules were provided; {} rules provided exceeds max of 100.",
        rules.len()
      ));
    }
    let (mut worker, mut assets, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for r in rules {
      let (list, text) = if let Some(rest) = r.strip_prefix("!/") {
        (&mut assets, format!("/{rest}"))
      } else if r.starts_with('/') {
        (&mut worker, r.clone())
      } else if r.starts_with('!') {
        bad.push(format!("'{r}': negative rules must start with '!/'"));
        continue;
      } else {
        bad.push(format!("'{r}': rules must start with '/' or '!/'"));
        continue;
      };
      if r.len() > 100 {
        bad.push(format!(
          "'{r}': all rules must be less than 100 characters in length"
        ));
      }
      // Only `*` is special here: a rule is a glob over the path.
      let re = format!(
        "^{}$",
        text
          .split('*')
          .map(regex::escape)
          .collect::<Vec<_>>()
          .join(".*")
      );
      list.push(Pattern::glob(&re));
    }
    if !bad.is_empty() {
      return Err(format!(
        "Invalid routes in run_worker_first:\n{}",
        bad.join("\n")
      ));
    }
    if worker.is_empty() {
      return Err("Only negative `run_worker_first` rules were provided; must provide at least 1 non-negative rule".into());
    }
    Ok(RunWorkerFirst::Patterns { worker, assets })
  }
}

/// The `assets` section of a Worker's config, resolved.
#[derive(Debug)]
pub struct AssetsConfig {
  pub directory: PathBuf,
  pub html_handling: HtmlHandling,
  pub not_found_handling: NotFound,
  pub run_worker_first: RunWorkerFirst,
  /// `assets_navigation_prefers_asset_serving` (on from 2025-04-01): a
  /// browser navigation (`Sec-Fetch-Mode: navigate`) gets
  /// `not_found_handling` even when a Worker could answer.
  pub navigation_prefers_assets: bool,
  /// A Worker runs beside the assets (wrangler's `main`).
  pub has_worker: bool,
}

pub struct Assets {
  files: HashMap<String, File>,
  redirects: Redirects,
  headers: HeaderRules,
  cfg: AssetsConfig,
}

impl std::fmt::Debug for Assets {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(
      f,
      "Assets({} files in {})",
      self.files.len(),
      self.cfg.directory.display()
    )
  }
}

impl Exists for Assets {
  fn exists(&self, path: &str) -> Option<(&str, &str)> {
    self
      .files
      .get_key_value(path)
      .map(|(k, f)| (k.as_str(), f.hash.as_str()))
  }
}

/// A request as the resolver needs it.
pub struct Req<'a> {
  pub method: &'a str,
  pub url: &'a url::Url,
  /// A request header by lower-case name.
  pub header: &'a dyn Fn(&str) -> Option<String>,
}

/// What to answer: status, headers, and a body (a range of a file).
#[derive(Debug)]
pub struct Reply {
  pub status: u16,
  pub headers: Vec<(String, String)>,
  pub body: Option<Body>,
}

#[derive(Debug, Clone)]
pub struct Body {
  pub path: PathBuf,
  pub offset: u64,
  pub len: u64,
  cached: Option<bytes::Bytes>,
}

impl Body {
  pub async fn read(&self) -> std::io::Result<bytes::Bytes> {
    if let Some(b) = &self.cached {
      return Ok(b.slice(self.offset as usize..(self.offset + self.len) as usize));
    }
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = tokio::fs::File::open(&self.path).await?;
    if self.offset > 0 {
      f.seek(std::io::SeekFrom::Start(self.offset)).await?;
    }
    let mut buf = Vec::with_capacity(self.len as usize);
    f.take(self.len).read_to_end(&mut buf).await?;
    Ok(buf.into())
  }
}

const CACHE_CONTROL: &str = "public, max-age=0, must-revalidate";

impl Assets {
  /// Reads the directory (and its `_redirects`, `_headers`,
  /// `.assetsignore`); the warnings are wrangler's for lines it skips.
  pub fn load(cfg: AssetsConfig) -> Result<(Assets, Vec<String>), String> {
    let files = manifest::walk(&cfg.directory)?;
    let read = |name: &str| std::fs::read_to_string(cfg.directory.join(name)).ok();
    let mut warnings = Vec::new();
    let redirects = match read("_redirects") {
      Some(t) => {
        let (r, w) = Redirects::parse(&t, cfg.html_handling == HtmlHandling::None);
        warnings.extend(w.into_iter().map(|w| format!("_redirects: {w}")));
        r
      }
      None => Redirects::default(),
    };
    let headers = match read("_headers") {
      Some(t) => {
        let (h, w) = HeaderRules::parse(&t);
        warnings.extend(w.into_iter().map(|w| format!("_headers: {w}")));
        h
      }
      None => HeaderRules::default(),
    };
    Ok((
      Assets {
        files,
        redirects,
        headers,
        cfg,
      },
      warnings,
    ))
  }

  pub fn len(&self) -> usize {
    self.files.len()
  }

  pub fn is_empty(&self) -> bool {
    self.files.is_empty()
  }

  /// The router and the asset worker together: the assets' answer, or
  /// None when the request is the Worker's. The path is resolved once,
  /// unless routing looked without `not_found_handling` and found an
  /// asset (the asset worker then resolves it with it).
  pub fn answer(&self, req: &Req) -> Option<Reply> {
    if !self.cfg.has_worker {
      return Some(self.respond(req));
    }
    let path = req.url.path();
    let static_routing = match &self.cfg.run_worker_first {
      RunWorkerFirst::Yes => return None,
      RunWorkerFirst::Patterns { worker, assets } => {
        if assets.iter().any(|p| p.is_match(path)) {
          return Some(self.respond(req));
        }
        if worker.iter().any(|p| p.is_match(path)) {
          return None;
        }
        true
      }
      RunWorkerFirst::No => false,
    };
    // Whether the assets can answer: a missing file is the Worker's,
    // unless `not_found_handling` applies to this request.
    let navigate = self.cfg.navigation_prefers_assets
      && (req.header)("sec-fetch-mode").as_deref() == Some("navigate");
    let not_found = if static_routing || navigate {
      self.cfg.not_found_handling
    } else {
      NotFound::None
    };
    match self.decide(req, not_found) {
      Decision::NoIntent => None,
      d if not_found == self.cfg.not_found_handling => Some(self.finish(req, d)),
      _ => Some(self.respond(req)),
    }
  }

  /// The asset worker: the response for this request (a 404 where there
  /// is nothing to serve).
  pub fn respond(&self, req: &Req) -> Reply {
    self.finish(req, self.decide(req, self.cfg.not_found_handling))
  }

  /// A decision as a response, `_headers` applied.
  fn finish(&self, req: &Req, decision: Decision<'_>) -> Reply {
    let url = req.url;
    let mut reply = match decision {
      Decision::Reply(r) => r,
      Decision::NoIntent => empty(404),
      Decision::Asset { key, status } => self.serve(req, key, status),
    };
    if !self.headers.is_empty() {
      let mut lower: Vec<(String, String)> = reply
        .headers
        .drain(..)
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
      self
        .headers
        .apply(url.host_str().unwrap_or(""), url.path(), &mut lower);
      reply.headers = lower;
    }
    reply
  }

  fn decide(&self, req: &Req, not_found: NotFound) -> Decision<'_> {
    let url = req.url;
    let host = url.host_str().unwrap_or("");
    let mut pathname = url.path().to_string();
    let mut proxied = false;
    if let Some((status, to)) = self.redirects.find(host, &pathname) {
      let Ok(dest) = url.join(&to) else {
        return Decision::Reply(empty(500));
      };
      if status == 200 {
        pathname = dest.path().to_string();
        proxied = true;
      } else {
        let search = url.query().map(|q| format!("?{q}")).unwrap_or_default();
        let dest_search = dest.query().map(|q| format!("?{q}"));
        let hash = dest.fragment().map(|f| format!("#{f}")).unwrap_or_default();
        let query = dest_search.unwrap_or(search);
        let location = if dest.origin() == url.origin() {
          format!("{}{query}{hash}", dest.path())
        } else {
          let mut base = dest.clone();
          base.set_query(None);
          base.set_fragment(None);
          format!("{base}{query}{hash}")
        };
        let mut r = empty(status);
        r.headers.push(("Location".into(), location));
        return Decision::Reply(r);
      }
    }
    let decoded = decode_path(&pathname);
    let resolver = Resolver {
      files: self,
      html: self.cfg.html_handling,
      not_found,
    };
    let Some(intent) = resolver.intent(&decoded) else {
      return if proxied {
        Decision::Reply(empty(404))
      } else {
        Decision::NoIntent
      };
    };
    let method = req.method.to_ascii_uppercase();
    if method != "GET" && method != "HEAD" {
      return Decision::Reply(empty(405));
    }
    let (dest, asset) = match intent {
      Intent::Redirect(to) => (to, None),
      Intent::Asset { key, status } => (decoded.clone(), Some((key, status))),
    };
    let encoded = encode_path(&dest);
    match asset {
      Some((key, status)) if encoded == pathname => Decision::Asset { key, status },
      _ => {
        let search = url.query().map(|q| format!("?{q}")).unwrap_or_default();
        let mut r = empty(307);
        r.headers
          .push(("Location".into(), format!("{encoded}{search}")));
        Decision::Reply(r)
      }
    }
  }

  fn serve(&self, req: &Req, key: &str, status: u16) -> Reply {
    let f = &self.files[key];
    let etag = format!("\"{}\"", f.hash);
    let mut headers = vec![("ETag".to_string(), etag.clone())];
    if let Some(t) = &f.content_type {
      headers.push(("Content-Type".into(), t.clone()));
    }
    let range = (req.header)("range");
    if (req.header)("authorization").is_none() && range.is_none() {
      headers.push(("Cache-Control".into(), CACHE_CONTROL.into()));
    }
    // Always served from this node's disk: a cache hit, as the asset
    // worker calls a fast read.
    headers.push(("CF-Cache-Status".into(), "HIT".into()));
    let inm = (req.header)("if-none-match").unwrap_or_default();
    if inm == etag || inm == format!("W/{etag}") {
      return Reply {
        status: 304,
        headers,
        body: None,
      };
    }
    let head = req.method.eq_ignore_ascii_case("HEAD");
    let whole = Body {
      path: f.path.clone(),
      offset: 0,
      len: f.len,
      cached: f.cached.clone(),
    };
    // A single byte range of a file served 200, as Cloudflare's cache
    // answers ranges of assets.
    if status == 200
      && let Some(r) = range
    {
      match byte_range(&r, f.len) {
        RangeAnswer::Whole => {}
        RangeAnswer::Part(start, end) => {
          headers.push((
            "Content-Range".into(),
            format!("bytes {start}-{end}/{}", f.len),
          ));
          return Reply {
            status: 206,
            headers,
            body: (!head).then(|| Body {
              offset: start,
              len: end + 1 - start,
              ..whole
            }),
          };
        }
        RangeAnswer::Unsatisfiable => {
          headers.retain(|(k, _)| k != "Content-Type");
          headers.push(("Content-Range".into(), format!("bytes */{}", f.len)));
          return Reply {
            status: 416,
            headers,
            body: None,
          };
        }
      }
    }
    Reply {
      status,
      headers,
      body: (!head).then_some(whole),
    }
  }
}

enum Decision<'a> {
  /// Nothing here for this path (the Worker's, when there is one).
  NoIntent,
  Reply(Reply),
  Asset {
    key: &'a str,
    status: u16,
  },
}

fn empty(status: u16) -> Reply {
  Reply {
    status,
    headers: Vec::new(),
    body: None,
  }
}

enum RangeAnswer {
  Whole,
  Part(u64, u64),
  Unsatisfiable,
}

/// `Range: bytes=a-b` / `a-` / `-n`; several ranges or another unit are
/// answered with the whole file, as RFC 9110 allows.
fn byte_range(header: &str, len: u64) -> RangeAnswer {
  let Some(spec) = header.trim().strip_prefix("bytes=") else {
    return RangeAnswer::Whole;
  };
  if spec.contains(',') {
    return RangeAnswer::Whole;
  }
  let Some((a, b)) = spec.trim().split_once('-') else {
    return RangeAnswer::Whole;
  };
  let (a, b) = (a.trim(), b.trim());
  let parse = |s: &str| s.parse::<u64>().ok();
  let (start, end) = match (a.is_empty(), b.is_empty()) {
    (true, false) => {
      let Some(n) = parse(b) else {
        return RangeAnswer::Whole;
      };
      if n == 0 {
        return RangeAnswer::Unsatisfiable;
      }
      (len.saturating_sub(n), len.saturating_sub(1))
    }
    (false, _) => {
      let Some(s) = parse(a) else {
        return RangeAnswer::Whole;
      };
      let e = if b.is_empty() {
        Some(u64::MAX)
      } else {
        parse(b)
      };
      let Some(e) = e else {
        return RangeAnswer::Whole;
      };
      if e < s {
        return RangeAnswer::Whole;
      }
      (s, e.min(len.saturating_sub(1)))
    }
    (true, true) => return RangeAnswer::Whole,
  };
  if len == 0 || start >= len {
    return RangeAnswer::Unsatisfiable;
  }
  RangeAnswer::Part(start, end)
}

/// Each segment through decodeURIComponent (kept as it is where that
/// would throw), then runs of slashes collapsed.
fn decode_path(p: &str) -> String {
  let segs: Vec<String> = p
    .split('/')
    .map(|s| decode_component(s).unwrap_or_else(|| s.to_string()))
    .collect();
  rules::collapse_slashes(&segs.join("/"))
}

fn decode_component(s: &str) -> Option<String> {
  let b = s.as_bytes();
  let mut out = Vec::with_capacity(b.len());
  let mut i = 0;
  while i < b.len() {
    if b[i] == b'%' {
      let hex = s.get(i + 1..i + 3)?;
      out.push(u8::from_str_radix(hex, 16).ok()?);
      i += 3;
    } else {
      out.push(b[i]);
      i += 1;
    }
  }
  String::from_utf8(out).ok()
}

/// Each segment through encodeURIComponent.
fn encode_path(p: &str) -> String {
  p.split('/')
    .map(|seg| {
      let mut out = String::new();
      for &c in seg.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&c) {
          out.push(c as char);
        } else {
          out.push_str(&format!("%{c:02X}"));
        }
      }
      out
    })
    .collect::<Vec<_>>()
    .join("/")
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn paths_decode_and_encode_as_uri_components() {
    assert_eq!(decode_path("/a%20b//c%2Fd"), "/a b/c/d");
    assert_eq!(decode_path("/%E0%A4%A"), "/%E0%A4%A");
    assert_eq!(encode_path("/a b/é"), "/a%20b/%C3%A9");
    assert_eq!(encode_path("/x(1)!"), "/x(1)!");
  }

  #[test]
  fn ranges() {
    assert!(matches!(
      byte_range("bytes=0-3", 10),
      RangeAnswer::Part(0, 3)
    ));
    assert!(matches!(
      byte_range("bytes=5-", 10),
      RangeAnswer::Part(5, 9)
    ));
    assert!(matches!(
      byte_range("bytes=-4", 10),
      RangeAnswer::Part(6, 9)
    ));
    assert!(matches!(
      byte_range("bytes=8-100", 10),
      RangeAnswer::Part(8, 9)
    ));
    assert!(matches!(
      byte_range("bytes=10-", 10),
      RangeAnswer::Unsatisfiable
    ));
    assert!(matches!(
      byte_range("bytes=0-1,3-4", 10),
      RangeAnswer::Whole
    ));
    assert!(matches!(byte_range("items=0-1", 10), RangeAnswer::Whole));
  }
}

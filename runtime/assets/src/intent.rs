//! Which file a path names, or where to redirect it: `html_handling` and
//! `not_found_handling` as Cloudflare's asset worker resolves them. Pure:
//! `exists` answers from the manifest.

/// What serving a (decoded) path means.
#[derive(Debug, PartialEq, Eq)]
pub enum Intent<'a> {
  /// Serve this file (its manifest key) with this status.
  Asset { key: &'a str, status: u16 },
  /// Redirect (307) to this path.
  Redirect(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HtmlHandling {
  AutoTrailingSlash,
  ForceTrailingSlash,
  DropTrailingSlash,
  None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotFound {
  SinglePageApplication,
  Page404,
  None,
}

/// The manifest as the resolver sees it: a path's file key and content hash.
pub trait Exists {
  fn exists(&self, path: &str) -> Option<(&str, &str)>;
}

pub struct Resolver<'a, E: Exists> {
  pub files: &'a E,
  pub html: HtmlHandling,
  pub not_found: NotFound,
}

fn asset(key: &str) -> Option<Intent<'_>> {
  Some(Intent::Asset { key, status: 200 })
}

/// `s` without its last `n` bytes (the suffixes cut here are ASCII).
fn cut(s: &str, n: usize) -> &str {
  &s[..s.len() - n]
}

impl<'a, E: Exists> Resolver<'a, E> {
  pub fn intent(&self, path: &str) -> Option<Intent<'a>> {
    self.resolve(path, false)
  }

  fn exists(&self, p: &str) -> Option<&'a str> {
    self.files.exists(p).map(|(k, _)| k)
  }

  fn hash(&self, p: &str) -> Option<&'a str> {
    self.files.exists(p).map(|(_, h)| h)
  }

  fn resolve(&self, p: &str, skip: bool) -> Option<Intent<'a>> {
    match self.html {
      HtmlHandling::AutoTrailingSlash => self.auto(p, skip),
      HtmlHandling::ForceTrailingSlash => self.force(p, skip),
      HtmlHandling::DropTrailingSlash => self.drop(p, skip),
      HtmlHandling::None => self.exists(p).and_then(asset).or_else(|| self.not_found(p)),
    }
  }

  /// Redirect to `dest` when `dest` is not itself a file and resolves to
  /// the same content as `file`.
  fn safe_redirect(&self, file: &str, dest: &str, skip: bool) -> Option<Intent<'a>> {
    if skip || self.exists(dest).is_some() {
      return None;
    }
    let Some(Intent::Asset { key, .. }) = self.resolve(dest, true) else {
      return None;
    };
    let target = self.files.exists(key).map(|(_, h)| h);
    (target.is_some() && target == self.hash(file)).then(|| Intent::Redirect(dest.to_string()))
  }

  fn auto(&self, p: &str, skip: bool) -> Option<Intent<'a>> {
    let exact = self.exists(p);
    let r = |f: &str, d: &str| self.safe_redirect(f, d, skip);
    if p.ends_with("/index") {
      if let Some(k) = exact {
        return asset(k);
      }
      if let Some(i) =
        r(&format!("{p}.html"), cut(p, 5)).or_else(|| r(&format!("{}.html", cut(p, 6)), cut(p, 6)))
      {
        return Some(i);
      }
    } else if p.ends_with("/index.html") {
      if let Some(i) = r(p, cut(p, 10)).or_else(|| r(&format!("{}.html", cut(p, 11)), cut(p, 11))) {
        return Some(i);
      }
    } else if p.ends_with('/') {
      if let Some(k) = self.exists(&format!("{p}index.html")) {
        return asset(k);
      }
      if let Some(i) = r(&format!("{}.html", cut(p, 1)), cut(p, 1)) {
        return Some(i);
      }
    } else if p.ends_with(".html")
      && let Some(i) = r(p, cut(p, 5)).or_else(|| {
        r(
          &format!("{}/index.html", cut(p, 5)),
          &format!("{}/", cut(p, 5)),
        )
      })
    {
      return Some(i);
    }
    exact
      .or_else(|| self.exists(&format!("{p}.html")))
      .and_then(asset)
      .or_else(|| r(&format!("{p}/index.html"), &format!("{p}/")))
      .or_else(|| self.not_found(p))
  }

  fn force(&self, p: &str, skip: bool) -> Option<Intent<'a>> {
    let exact = self.exists(p);
    let r = |f: &str, d: &str| self.safe_redirect(f, d, skip);
    if p.ends_with("/index") {
      if let Some(k) = exact {
        return asset(k);
      }
      if let Some(i) =
        r(&format!("{p}.html"), cut(p, 5)).or_else(|| r(&format!("{}.html", cut(p, 6)), cut(p, 5)))
      {
        return Some(i);
      }
    } else if p.ends_with("/index.html") {
      if let Some(i) = r(p, cut(p, 10)).or_else(|| r(&format!("{}.html", cut(p, 11)), cut(p, 10))) {
        return Some(i);
      }
    } else if p.ends_with('/') {
      if let Some(k) = self
        .exists(&format!("{p}index.html"))
        .or_else(|| self.exists(&format!("{}.html", cut(p, 1))))
      {
        return asset(k);
      }
    } else if p.ends_with(".html") {
      let slash = format!("{}/", cut(p, 5));
      if let Some(i) = r(p, &slash) {
        return Some(i);
      }
      if let Some(k) = exact {
        return asset(k);
      }
      if let Some(i) = r(&format!("{}/index.html", cut(p, 5)), &slash) {
        return Some(i);
      }
    }
    let slash = format!("{p}/");
    exact
      .and_then(asset)
      .or_else(|| r(&format!("{p}.html"), &slash))
      .or_else(|| r(&format!("{p}/index.html"), &slash))
      .or_else(|| self.not_found(p))
  }

  fn drop(&self, p: &str, skip: bool) -> Option<Intent<'a>> {
    let exact = self.exists(p);
    let r = |f: &str, d: &str| self.safe_redirect(f, d, skip);
    if p.ends_with("/index") {
      if let Some(k) = exact {
        return asset(k);
      }
      let i = if p == "/index" {
        r("/index.html", "/")
      } else {
        r(&format!("{}.html", cut(p, 6)), cut(p, 6)).or_else(|| r(&format!("{p}.html"), cut(p, 6)))
      };
      if i.is_some() {
        return i;
      }
    } else if p.ends_with("/index.html") {
      if p == "/index.html" {
        if let Some(i) = r("/index.html", "/") {
          return Some(i);
        }
      } else {
        if let Some(i) = r(p, cut(p, 11)) {
          return Some(i);
        }
        if let Some(k) = exact {
          return asset(k);
        }
        if let Some(i) = r(&format!("{}.html", cut(p, 11)), cut(p, 11)) {
          return Some(i);
        }
      }
    } else if p.ends_with('/') {
      if p == "/" {
        if let Some(k) = self.exists("/index.html") {
          return asset(k);
        }
      } else if let Some(i) = r(&format!("{}.html", cut(p, 1)), cut(p, 1))
        .or_else(|| r(&format!("{}/index.html", cut(p, 1)), cut(p, 1)))
      {
        return Some(i);
      }
    } else if p.ends_with(".html")
      && let Some(i) =
        r(p, cut(p, 5)).or_else(|| r(&format!("{}/index.html", cut(p, 5)), cut(p, 5)))
    {
      return Some(i);
    }
    exact
      .or_else(|| self.exists(&format!("{p}.html")))
      .or_else(|| self.exists(&format!("{p}/index.html")))
      .and_then(asset)
      .or_else(|| self.not_found(p))
  }

  fn not_found(&self, p: &str) -> Option<Intent<'a>> {
    match self.not_found {
      NotFound::SinglePageApplication => self.exists("/index.html").and_then(asset),
      NotFound::Page404 => {
        let mut cwd = p;
        while !cwd.is_empty() {
          cwd = cwd.rfind('/').map_or(&cwd[..cwd.len() - 1], |i| &cwd[..i]);
          if let Some(key) = self.exists(&format!("{cwd}/404.html")) {
            return Some(Intent::Asset { key, status: 404 });
          }
        }
        None
      }
      NotFound::None => None,
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::collections::HashMap;

  struct Files(HashMap<String, String>);
  impl Exists for Files {
    fn exists(&self, p: &str) -> Option<(&str, &str)> {
      self
        .0
        .get_key_value(p)
        .map(|(k, v)| (k.as_str(), v.as_str()))
    }
  }

  fn files(list: &[&str]) -> Files {
    Files(
      list
        .iter()
        .map(|p| (p.to_string(), format!("h{p}")))
        .collect(),
    )
  }

  fn run(html: HtmlHandling, nf: NotFound, f: &Files, p: &str) -> String {
    let r = Resolver {
      files: f,
      html,
      not_found: nf,
    };
    match r.intent(p) {
      Some(Intent::Asset { key, status }) => format!("{status} {key}"),
      Some(Intent::Redirect(to)) => format!("-> {to}"),
      None => "none".into(),
    }
  }

  #[test]
  fn auto_trailing_slash() {
    let f = files(&["/index.html", "/about.html", "/blog/index.html", "/a.txt"]);
    let a = |p| run(HtmlHandling::AutoTrailingSlash, NotFound::None, &f, p);
    assert_eq!(a("/"), "200 /index.html");
    assert_eq!(a("/index.html"), "-> /");
    assert_eq!(a("/about"), "200 /about.html");
    assert_eq!(a("/about.html"), "-> /about");
    assert_eq!(a("/about/"), "-> /about");
    assert_eq!(a("/blog"), "-> /blog/");
    assert_eq!(a("/blog/"), "200 /blog/index.html");
    assert_eq!(a("/blog/index"), "-> /blog/");
    assert_eq!(a("/a.txt"), "200 /a.txt");
    assert_eq!(a("/nope"), "none");
  }

  #[test]
  fn force_and_drop_trailing_slash() {
    let f = files(&["/index.html", "/about.html", "/blog/index.html"]);
    let force = |p| run(HtmlHandling::ForceTrailingSlash, NotFound::None, &f, p);
    assert_eq!(force("/about"), "-> /about/");
    assert_eq!(force("/about/"), "200 /about.html");
    assert_eq!(force("/blog"), "-> /blog/");
    let drop = |p| run(HtmlHandling::DropTrailingSlash, NotFound::None, &f, p);
    assert_eq!(drop("/blog/"), "-> /blog");
    assert_eq!(drop("/blog"), "200 /blog/index.html");
    assert_eq!(drop("/index.html"), "-> /");
    assert_eq!(drop("/"), "200 /index.html");
  }

  #[test]
  fn not_found_handling() {
    let f = files(&["/index.html", "/404.html", "/docs/404.html"]);
    let spa = |p| {
      run(
        HtmlHandling::AutoTrailingSlash,
        NotFound::SinglePageApplication,
        &f,
        p,
      )
    };
    assert_eq!(spa("/app/route"), "200 /index.html");
    let page = |p| run(HtmlHandling::AutoTrailingSlash, NotFound::Page404, &f, p);
    assert_eq!(page("/docs/x/y"), "404 /docs/404.html");
    assert_eq!(page("/other"), "404 /404.html");
  }
}

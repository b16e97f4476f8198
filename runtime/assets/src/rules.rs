//! `_redirects` and `_headers`, parsed and matched as wrangler and its asset
//! worker do: a line that cannot be used is skipped with wrangler's warning,
//! rules are paths with `*` (the splat) and `:name` placeholders, and the
//! values they capture are substituted into the target or header value.

use regex::Regex;

const MAX_LINE_LENGTH: usize = 2000;
const MAX_HEADER_RULES: usize = 100;
const MAX_DYNAMIC_REDIRECT_RULES: usize = 100;
const MAX_STATIC_REDIRECT_RULES: usize = 2000;
const PERMITTED_STATUS: [u16; 6] = [200, 301, 302, 303, 307, 308];

/// A rule's path compiled: `*` captures anything (as `splat`), `:name` one
/// segment (in a `https://host` rule's host, one label).
#[derive(Debug)]
pub struct Pattern {
  cross_host: bool,
  re: Regex,
}

impl Pattern {
  /// None where the asset worker's RegExp would not compile either (two
  /// splats, a placeholder used twice): such a rule never matches.
  pub fn new(rule: &str) -> Option<Pattern> {
    let cross_host = rule.starts_with("https://");
    let host_end = if cross_host {
      rule[8..].find('/').map_or(rule.len(), |i| i + 8)
    } else {
      0
    };
    let mut re = String::from("^");
    let mut names: Vec<&str> = Vec::new();
    let mut i = 0;
    let b = rule.as_bytes();
    while i < b.len() {
      let c = b[i];
      if c == b'*' {
        if names.contains(&"splat") {
          return None;
        }
        names.push("splat");
        re.push_str("(?<splat>.*)");
        i += 1;
      } else if c == b':' && b.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
        let end = b[i + 1..]
          .iter()
          .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
          .map_or(b.len(), |n| n + i + 1);
        let name = &rule[i + 1..end];
        if names.contains(&name) {
          return None;
        }
        names.push(name);
        // In the host a placeholder stands for one label; it must be
        // followed by more of the rule (the asset worker's lookahead).
        let one = if i < host_end && end < b.len() {
          "[^/.]+"
        } else {
          "[^/]+"
        };
        re.push_str(&format!("(?<{name}>{one})"));
        i = end;
      } else {
        let ch = rule[i..].chars().next().unwrap();
        re.push_str(&regex::escape(ch.encode_utf8(&mut [0; 4])));
        i += ch.len_utf8();
      }
    }
    re.push('$');
    Some(Pattern {
      cross_host,
      re: Regex::new(&re).ok()?,
    })
  }

  /// A `run_worker_first` glob, already a regular expression.
  pub fn glob(re: &str) -> Pattern {
    Pattern {
      cross_host: false,
      re: Regex::new(re).expect("an escaped glob is a valid regex"),
    }
  }

  pub fn is_match(&self, path: &str) -> bool {
    self.re.is_match(path)
  }

  /// The captured values, in the rule's order, when `host`/`path` match.
  pub fn matches(&self, host: &str, path: &str) -> Option<Vec<(String, String)>> {
    let subject;
    let text = if self.cross_host {
      subject = format!("https://{host}{path}");
      subject.as_str()
    } else {
      path
    };
    let caps = self.re.captures(text)?;
    Some(
      self
        .re
        .capture_names()
        .flatten()
        .filter_map(|n| Some((n.to_string(), caps.name(n)?.as_str().to_string())))
        .collect(),
    )
  }
}

/// `:name` in `text` replaced by what the rule captured, name by name.
pub fn substitute(text: &str, captures: &[(String, String)]) -> String {
  let mut out = text.to_string();
  for (k, v) in captures {
    out = out.replace(&format!(":{k}"), v);
  }
  out
}

fn is_dynamic(from: &str) -> bool {
  from.contains('*') || {
    let b = from.as_bytes();
    (0..b.len()).any(|i| b[i] == b':' && b.get(i + 1).is_some_and(u8::is_ascii_alphabetic))
  }
}

/// A path as `new URL("//" + path, "relative://")` writes it back: dot
/// segments resolved, characters a path cannot hold percent-encoded.
fn extract_pathname(path: &str, search: bool, hash: bool) -> Option<String> {
  let path = if path.starts_with('/') {
    path.to_string()
  } else {
    format!("/{path}")
  };
  let base = url::Url::parse("relative://").ok()?;
  let u = base.join(&format!("//{path}")).ok()?;
  let mut out = u.path().to_string();
  if search && let Some(q) = u.query() {
    out.push('?');
    out.push_str(q);
  }
  if hash && let Some(f) = u.fragment() {
    out.push('#');
    out.push_str(f);
  }
  Some(out)
}

fn host_of(token: &str) -> Option<(&str, &str)> {
  let rest = token.strip_prefix("https://")?;
  let rest = rest.trim_start_matches('/');
  let end = rest.find('/').unwrap_or(rest.len());
  if end == 0 {
    return None;
  }
  let path = rest[end..].strip_prefix('/').unwrap_or(&rest[end..]);
  Some((&rest[..end], path))
}

/// wrangler's validateUrl: a path, or (where allowed) an https URL.
fn validate_url(
  token: &str,
  only_relative: bool,
  no_ports: bool,
  search: bool,
  hash: bool,
) -> Result<String, String> {
  if let Some((host, path)) = host_of(token) {
    if only_relative {
      return Err(format!(
        "Only relative URLs are allowed. Skipping absolute URL {token}."
      ));
    }
    let port = host
      .rfind(':')
      .is_some_and(|i| i + 1 < host.len() && host[i + 1..].bytes().all(|c| c.is_ascii_digit()));
    if no_ports && port {
      return Err(format!(
        "Specifying ports is not supported. Skipping absolute URL {token}."
      ));
    }
    let p = extract_pathname(path, search, hash).unwrap_or_default();
    return Ok(format!("https://{host}{p}"));
  }
  let token = if !token.starts_with('/') && only_relative {
    format!("/{token}")
  } else {
    token.to_string()
  };
  if token.starts_with('/') {
    return extract_pathname(&token, search, hash)
      .ok_or_else(|| format!("Error parsing URL segment {token}. Skipping."));
  }
  Err(if only_relative {
    "URLs should begin with a forward-slash.".into()
  } else {
    "URLs should either be relative (e.g. begin with a forward-slash), or use HTTPS (e.g. begin with \"https://\").".into()
  })
}

#[derive(Debug)]
pub struct Redirect {
  pub status: u16,
  pub to: String,
}

/// `_redirects`: static rules by exact path (the first lines, before any
/// splat or placeholder), then dynamic ones in order.
#[derive(Debug, Default)]
pub struct Redirects {
  statics: std::collections::HashMap<String, Redirect>,
  dynamic: Vec<(Pattern, Redirect)>,
}

impl Redirects {
  /// Parses the file; each skipped line is a warning as wrangler prints it.
  pub fn parse(text: &str, html_handling_none: bool) -> (Redirects, Vec<String>) {
    let mut out = Redirects::default();
    let mut warnings = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let (mut statics, mut dynamics, mut can_static) = (0, 0, true);
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, raw) in lines.iter().enumerate() {
      let n = i + 1;
      let Some(line) = usable(raw, n, &mut warnings) else {
        continue;
      };
      let mut bad = |m: String| warnings.push(format!("line {n} ({line}): {m}"));
      let uncommented = match line.find(|c: char| c.is_whitespace()) {
        Some(_) => strip_trailing_comment(line),
        None => line,
      };
      let tokens: Vec<&str> = uncommented.split_whitespace().collect();
      if !(2..=3).contains(&tokens.len()) {
        bad(format!(
          "Expected exactly 2 or 3 whitespace-separated tokens. Got {}.",
          tokens.len()
        ));
        continue;
      }
      let status_text = tokens.get(2).copied().unwrap_or("302");
      let from = match validate_url(tokens[0], true, true, false, false) {
        Ok(f) => f,
        Err(m) => {
          bad(m);
          continue;
        }
      };
      if can_static && !is_dynamic(&from) {
        statics += 1;
        if statics > MAX_STATIC_REDIRECT_RULES {
          warnings.push(format!(
            "Maximum number of static rules supported is {MAX_STATIC_REDIRECT_RULES}. Skipping line."
          ));
          continue;
        }
      } else {
        dynamics += 1;
        can_static = false;
        if dynamics > MAX_DYNAMIC_REDIRECT_RULES {
          warnings.push(format!(
            "Maximum number of dynamic rules supported is {MAX_DYNAMIC_REDIRECT_RULES}. Skipping remaining {} lines of file.",
            lines.len() - i
          ));
          break;
        }
      }
      let to = match validate_url(tokens[1], false, false, true, true) {
        Ok(t) => t,
        Err(m) => {
          bad(m);
          continue;
        }
      };
      let status = match status_text.parse::<u16>() {
        Ok(s) if PERMITTED_STATUS.contains(&s) => s,
        _ => {
          bad(format!(
            "Valid status codes are 200, 301, 302 (default), 303, 307, or 308. Got {status_text}."
          ));
          continue;
        }
      };
      let relative = host_of(&to).is_none();
      let to_index = |t: &str| t.ends_with("/index") || t.ends_with("/index.html");
      if relative
        && ((from.ends_with("/*") && to_index(&to))
          || (from.ends_with('/') && to_index(&to) && !html_handling_none))
      {
        bad("Infinite loop detected in this rule and has been ignored. This will cause a redirect to strip `.html` or `/index` and end up triggering this rule again. Please fix or remove this rule to silence this warning.".into());
        continue;
      }
      if !seen.insert(from.clone()) {
        bad(format!("Ignoring duplicate rule for path {from}."));
        continue;
      }
      if status == 200 && !relative {
        bad(format!(
          "Proxy (200) redirects can only point to relative paths. Got {to}"
        ));
        continue;
      }
      let rule = Redirect { status, to };
      if can_static && !is_dynamic(&from) {
        out.statics.insert(from, rule);
      } else if let Some(p) = Pattern::new(&from) {
        out.dynamic.push((p, rule));
      }
    }
    (out, warnings)
  }

  /// The rule for this request: its status and target with captures filled.
  pub fn find(&self, host: &str, path: &str) -> Option<(u16, String)> {
    if let Some(r) = self.statics.get(path) {
      return Some((r.status, r.to.clone()));
    }
    self.dynamic.iter().find_map(|(p, r)| {
      let caps = p.matches(host, path)?;
      let to = substitute(&r.to, &caps).trim().to_string();
      let absolute = to.find("://").is_some_and(|i| {
        i > 0
          && to[..i]
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_')
      });
      let to = if absolute { to } else { collapse_slashes(&to) };
      Some((r.status, to))
    })
  }
}

/// A line of `_redirects` or `_headers` trimmed, or None for a blank line,
/// a comment, or one past the length limit (with wrangler's warning).
fn usable<'a>(raw: &'a str, n: usize, warnings: &mut Vec<String>) -> Option<&'a str> {
  let line = raw.trim();
  if line.is_empty() || line.starts_with('#') {
    return None;
  }
  if line.len() > MAX_LINE_LENGTH {
    warnings.push(format!(
      "Ignoring line {n} as it exceeds the maximum allowed length of {MAX_LINE_LENGTH}."
    ));
    return None;
  }
  Some(line)
}

fn strip_trailing_comment(line: &str) -> &str {
  // `\s+#.*$`: a `#` after whitespace starts a comment.
  let b = line.as_bytes();
  for i in 1..b.len() {
    if b[i] == b'#' && b[i - 1].is_ascii_whitespace() {
      return line[..i].trim_end();
    }
  }
  line
}

pub fn collapse_slashes(s: &str) -> String {
  let mut out = String::with_capacity(s.len());
  for c in s.chars() {
    if !(c == '/' && out.ends_with('/')) {
      out.push(c);
    }
  }
  out
}

/// One `_headers` rule: headers to set (by lower-case name) and to unset.
#[derive(Debug)]
pub struct HeaderRule {
  pattern: Option<Pattern>,
  pub set: Vec<(String, String)>,
  pub unset: Vec<String>,
}

#[derive(Debug, Default)]
pub struct HeaderRules(Vec<(String, HeaderRule)>);

impl HeaderRules {
  pub fn parse(text: &str) -> (HeaderRules, Vec<String>) {
    struct Open {
      path: String,
      line: String,
      set: Vec<(String, String)>,
      unset: Vec<String>,
    }
    let mut rules: Vec<Open> = Vec::new();
    let mut warnings = Vec::new();
    let mut rule: Option<Open> = None;
    let lines: Vec<&str> = text.split('\n').collect();
    let close = |r: Open, rules: &mut Vec<_>, warnings: &mut Vec<String>| {
      if r.set.is_empty() && r.unset.is_empty() {
        warnings.push(format!("{}: No headers specified", r.line));
      } else {
        rules.push(r);
      }
    };
    for (i, raw) in lines.iter().enumerate() {
      let n = i + 1;
      let Some(line) = usable(raw, n, &mut warnings) else {
        continue;
      };
      let is_path = line.starts_with('/')
        || line
          .find("://")
          .is_some_and(|i| i > 0 && !line[..i].contains(char::is_whitespace));
      if is_path {
        if rules.len() >= MAX_HEADER_RULES {
          warnings.push(format!(
            "Maximum number of rules supported is {MAX_HEADER_RULES}. Skipping remaining {} lines of file.",
            lines.len() - i
          ));
          break;
        }
        if let Some(r) = rule.take() {
          close(r, &mut rules, &mut warnings);
        }
        match validate_url(line, false, true, false, false) {
          Ok(path) => {
            rule = Some(Open {
              path,
              line: line.into(),
              set: Vec::new(),
              unset: Vec::new(),
            })
          }
          Err(m) => warnings.push(format!("line {n} ({line}): {m}")),
        }
        continue;
      }
      let Some((name, value)) = line.split_once(':') else {
        match &mut rule {
          None => warnings.push(format!(
            "line {n} ({line}): Expected a path beginning with at least one forward-slash"
          )),
          Some(r) if line.starts_with("! ") => r.unset.push(line.replacen("! ", "", 1)),
          Some(_) => warnings.push(format!(
            "line {n} ({line}): Expected a colon-separated header pair (e.g. name: value)"
          )),
        }
        continue;
      };
      let name = name.trim().to_ascii_lowercase();
      let value = value.trim();
      let problem = if name.contains(' ') {
        Some("Header name cannot include spaces".to_string())
      } else if name.is_empty() {
        Some("No header name specified".into())
      } else if value.is_empty() {
        Some("No header value specified".into())
      } else if rule.is_none() {
        Some(format!("Path should come before header ({name}: {value})"))
      } else {
        None
      };
      if let Some(m) = problem {
        warnings.push(format!("line {n} ({line}): {m}"));
        continue;
      }
      let r = rule.as_mut().unwrap();
      match r.set.iter_mut().find(|(k, _)| *k == name) {
        Some((_, v)) => {
          v.push_str(", ");
          v.push_str(value);
        }
        None => r.set.push((name, value.to_string())),
      }
    }
    if let Some(r) = rule.take() {
      close(r, &mut rules, &mut warnings);
    }
    // A path given twice keeps its first place and its last headers.
    let mut out: Vec<(String, HeaderRule)> = Vec::new();
    for Open {
      path, set, unset, ..
    } in rules
    {
      let r = HeaderRule {
        pattern: Pattern::new(&path),
        set,
        unset,
      };
      match out.iter_mut().find(|(p, _)| *p == path) {
        Some(slot) => slot.1 = r,
        None => out.push((path, r)),
      }
    }
    (HeaderRules(out), warnings)
  }

  pub fn is_empty(&self) -> bool {
    self.0.is_empty()
  }

  /// Applies every matching rule to `headers` (lower-case names): unset
  /// first, then set, a name set by an earlier rule appended to.
  pub fn apply(&self, host: &str, path: &str, headers: &mut Vec<(String, String)>) {
    let mut set_here: Vec<String> = Vec::new();
    for (_, rule) in &self.0 {
      let Some(caps) = rule.pattern.as_ref().and_then(|p| p.matches(host, path)) else {
        continue;
      };
      for name in &rule.unset {
        let lower = name.to_ascii_lowercase();
        headers.retain(|(k, _)| *k != lower);
      }
      for (name, value) in &rule.set {
        let value = substitute(value, &caps);
        if set_here.contains(name) {
          headers.push((name.clone(), value));
        } else {
          headers.retain(|(k, _)| k != name);
          headers.push((name.clone(), value));
          set_here.push(name.clone());
        }
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn patterns_capture_splats_and_placeholders() {
    let p = Pattern::new("/blog/:year/*").unwrap();
    assert_eq!(
      p.matches("h", "/blog/2024/a/b"),
      Some(vec![
        ("year".into(), "2024".into()),
        ("splat".into(), "a/b".into())
      ])
    );
    assert!(p.matches("h", "/blog/2024").is_none());
    let h = Pattern::new("https://:sub.example.com/*").unwrap();
    assert!(h.matches("a.example.com", "/x").is_some());
    assert!(h.matches("a.b.example.com", "/x").is_none());
    assert!(Pattern::new("/*/*").is_none());
    assert!(Pattern::new("/a.b").unwrap().matches("h", "/axb").is_none());
  }

  #[test]
  fn redirects_parse_as_wrangler_does() {
    let (r, w) = Redirects::parse(
      "# c\n/a /b\n/c /d 301 # note\n/e\n/f /g 404\n/news/* /blog/:splat\n/a /z\n/p/:id /q?id=:id 308\n",
      false,
    );
    assert_eq!(r.find("h", "/a").unwrap(), (302, "/b".into()));
    assert_eq!(r.find("h", "/c").unwrap(), (301, "/d".into()));
    assert_eq!(r.find("h", "/news/x/y").unwrap(), (302, "/blog/x/y".into()));
    assert_eq!(r.find("h", "/p/7").unwrap(), (308, "/q?id=7".into()));
    assert!(r.find("h", "/e").is_none());
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[1].contains("Got 404"), "{w:?}");
    assert!(w[2].contains("duplicate"), "{w:?}");
  }

  #[test]
  fn headers_set_append_and_unset() {
    let (h, w) = HeaderRules::parse(
      "/*\n  X-A: 1\n  x-a: 2\n/static/:name\n  X-Name: :name\n  ! Cache-Control\n/*\n  X-A: 3\nnope\n",
    );
    assert_eq!(w.len(), 1, "{w:?}");
    let mut headers = vec![("cache-control".to_string(), "x".to_string())];
    h.apply("h", "/static/app.js", &mut headers);
    assert_eq!(
      headers,
      vec![
        ("x-a".to_string(), "3".to_string()),
        ("x-name".to_string(), "app.js".to_string())
      ]
    );
  }
}

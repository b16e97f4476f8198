//! Which object a read or write applies to: `onlyIf` conditions and byte
//! ranges, decided as R2 (and miniflare, wrangler dev's R2) decide them.

use serde::Deserialize;

use crate::object::Meta;

/// One ETag of a condition, as workerd parses `If-Match`/`If-None-Match`.
#[derive(Deserialize, Clone, Debug)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Etag {
  Strong { value: String },
  Weak { value: String },
  Wildcard,
}

/// `onlyIf`, dates in milliseconds since the epoch.
#[derive(Deserialize, Default, Clone, Debug)]
#[serde(rename_all = "camelCase", default)]
pub struct Conditional {
  pub etag_matches: Option<Vec<Etag>>,
  pub etag_does_not_match: Option<Vec<Etag>>,
  pub uploaded_before: Option<f64>,
  pub uploaded_after: Option<f64>,
  pub seconds_granularity: bool,
}

fn includes(list: &[Etag], etag: &str, weak_matches: bool) -> bool {
  list.iter().any(|c| match c {
    Etag::Wildcard => true,
    Etag::Strong { value } => value == etag,
    Etag::Weak { value } => weak_matches && value == etag,
  })
}

impl Conditional {
  /// Whether the condition holds for the current object (`None`: absent).
  /// A date condition gives way to an ETag condition that holds, as in
  /// HTTP (RFC 9110 §13.2.2).
  pub fn holds(&self, meta: Option<&Meta>) -> bool {
    let Some(meta) = meta else {
      return self.etag_matches.is_none() && self.uploaded_after.is_none();
    };
    let if_match = self
      .etag_matches
      .as_ref()
      .is_none_or(|l| includes(l, &meta.etag, false));
    let if_none_match = self
      .etag_does_not_match
      .as_ref()
      .is_none_or(|l| !includes(l, &meta.etag, true));
    let trunc = |ms: f64| {
      if self.seconds_granularity {
        (ms / 1000.0).floor() * 1000.0
      } else {
        ms
      }
    };
    let modified = trunc(meta.uploaded);
    let if_modified_since = self.uploaded_after.is_none_or(|d| trunc(d) < modified)
      || (self.etag_does_not_match.is_some() && if_none_match);
    let if_unmodified_since = self.uploaded_before.is_none_or(|d| modified < trunc(d))
      || (self.etag_matches.is_some() && if_match);
    if_match && if_none_match && if_modified_since && if_unmodified_since
  }
}

/// `range` of a get: an object or a `Range` header.
#[derive(Deserialize, Default, Clone, Debug)]
#[serde(rename_all = "camelCase", default)]
pub struct RangeRequest {
  pub offset: Option<f64>,
  pub length: Option<f64>,
  pub suffix: Option<f64>,
  pub header: Option<String>,
}

/// Why a range cannot be served.
#[derive(Debug, PartialEq)]
pub struct InvalidRange;

impl RangeRequest {
  /// Whether no range was asked for.
  pub fn is_whole(&self) -> bool {
    self.offset.is_none() && self.length.is_none() && self.suffix.is_none() && self.header.is_none()
  }

  /// The inclusive byte range to serve of an object of `size` bytes, or
  /// `None` for all of it.
  pub fn resolve(&self, size: u64) -> Result<Option<(u64, u64)>, InvalidRange> {
    let size = size as f64;
    if let Some(h) = &self.header {
      return Ok(match parse_header(h, size as u64).as_deref() {
        Some([one]) => Some(*one),
        _ => None,
      });
    }
    if self.offset.is_none() && self.length.is_none() && self.suffix.is_none() {
      return Ok(None);
    }
    let (mut offset, mut length) = (self.offset, self.length);
    if let Some(mut suffix) = self.suffix {
      if suffix <= 0.0 {
        return Err(InvalidRange);
      }
      if suffix > size {
        suffix = size;
      }
      offset = Some(size - suffix);
      length = Some(suffix);
    }
    let offset = offset.unwrap_or(0.0);
    let mut length = length.unwrap_or(size - offset);
    if offset < 0.0 || offset > size || length <= 0.0 {
      return Err(InvalidRange);
    }
    if offset + length > size {
      length = size - offset;
    }
    Ok(Some((offset as u64, (offset + length) as u64 - 1)))
  }
}

/// A `Range: bytes=…` header as miniflare reads it: `None` when it is not
/// one it can serve (then the whole object is sent).
fn parse_header(h: &str, len: u64) -> Option<Vec<(u64, u64)>> {
  let rest = h.trim_start_matches(' ');
  let rest = rest
    .get(..5)
    .filter(|p| p.eq_ignore_ascii_case("bytes"))
    .map(|_| &rest[5..])?;
  let rest = rest.trim_start_matches(' ').strip_prefix('=')?;
  if rest.trim_start().is_empty() {
    return Some(Vec::new());
  }
  let mut out = Vec::new();
  for part in rest.split(',') {
    let (start, end) = part.split_once('-')?;
    let num = |s: &str| -> Result<Option<u64>, ()> {
      let s = s.trim_matches(' ');
      if s.is_empty() {
        Ok(None)
      } else if s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().map(Some).map_err(|_| ())
      } else {
        Err(())
      }
    };
    match (num(start).ok()?, num(end).ok()?) {
      (Some(s), Some(e)) => {
        if s > e || s >= len {
          return None;
        }
        out.push((s, e.min(len.saturating_sub(1))));
      }
      (Some(s), None) => {
        if s >= len {
          return None;
        }
        out.push((s, len - 1));
      }
      (None, Some(suffix)) => {
        if suffix >= len {
          return Some(Vec::new());
        }
        if suffix > 0 {
          out.push((len - suffix, len - 1));
        }
      }
      (None, None) => return None,
    }
  }
  Some(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  fn meta(etag: &str, uploaded: f64) -> Meta {
    Meta {
      etag: etag.into(),
      uploaded,
      ..Default::default()
    }
  }

  fn strong(v: &str) -> Option<Vec<Etag>> {
    Some(vec![Etag::Strong { value: v.into() }])
  }

  #[test]
  fn conditions() {
    let m = meta("abc", 10_500.0);
    let c = |f: fn(&mut Conditional)| {
      let mut c = Conditional::default();
      f(&mut c);
      c
    };
    assert!(c(|c| c.etag_matches = strong("abc")).holds(Some(&m)));
    assert!(!c(|c| c.etag_matches = strong("x")).holds(Some(&m)));
    assert!(!c(|c| c.etag_matches = strong("abc")).holds(None));
    assert!(c(|c| c.etag_does_not_match = Some(vec![Etag::Wildcard])).holds(None));
    assert!(!c(|c| c.etag_does_not_match = Some(vec![Etag::Wildcard])).holds(Some(&m)));
    // A weak tag matches only for If-None-Match.
    let weak = Some(vec![Etag::Weak {
      value: "abc".into(),
    }]);
    assert!(
      !c(|c| c.etag_matches = Some(vec![Etag::Weak {
        value: "abc".into()
      }]))
      .holds(Some(&m))
    );
    let n = Conditional {
      etag_does_not_match: weak,
      ..Default::default()
    };
    assert!(!n.holds(Some(&m)));
    assert!(c(|c| c.uploaded_after = Some(10_000.0)).holds(Some(&m)));
    assert!(
      !c(|c| {
        c.uploaded_after = Some(10_000.0);
        c.seconds_granularity = true;
      })
      .holds(Some(&m))
    );
    assert!(!c(|c| c.uploaded_before = Some(10_000.0)).holds(Some(&m)));
    // An ETag that matches overrides the date.
    assert!(
      c(|c| {
        c.uploaded_before = Some(10_000.0);
        c.etag_matches = strong("abc");
      })
      .holds(Some(&m))
    );
  }

  #[test]
  fn ranges() {
    let r = |o: Option<f64>, l: Option<f64>, s: Option<f64>| RangeRequest {
      offset: o,
      length: l,
      suffix: s,
      header: None,
    };
    assert_eq!(r(Some(2.0), Some(3.0), None).resolve(10), Ok(Some((2, 4))));
    assert_eq!(r(Some(8.0), Some(30.0), None).resolve(10), Ok(Some((8, 9))));
    assert_eq!(r(None, None, Some(3.0)).resolve(10), Ok(Some((7, 9))));
    assert_eq!(r(None, None, Some(30.0)).resolve(10), Ok(Some((0, 9))));
    assert_eq!(r(Some(11.0), None, None).resolve(10), Err(InvalidRange));
    assert_eq!(r(None, None, Some(0.0)).resolve(10), Err(InvalidRange));
    assert_eq!(r(None, None, None).resolve(10), Ok(None));
    let h = |s: &str| RangeRequest {
      header: Some(s.into()),
      ..Default::default()
    };
    assert_eq!(h("bytes=1-3").resolve(10), Ok(Some((1, 3))));
    assert_eq!(h("bytes=-4").resolve(10), Ok(Some((6, 9))));
    assert_eq!(h("bytes=5-").resolve(10), Ok(Some((5, 9))));
    assert_eq!(h("bytes=0-1,3-4").resolve(10), Ok(None));
    assert_eq!(h("bytes=20-30").resolve(10), Ok(None));
    assert_eq!(h("items=1-2").resolve(10), Ok(None));
  }
}

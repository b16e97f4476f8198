//! Bucket keys for a cell's LTX files:
//! `cells/<scope>/ltx/e<epoch>/<level %04x>/<min %016x>-<max %016x>.ltx`.
//! Under the prefix `cells/<scope>/ltx/e<epoch>` this is Litestream's S3 layout, so stock
//! Litestream can restore an epoch by pointing its S3 replica path there.

use crate::error::{Result, bail};

/// Longest scope (`Class:id`) accepted; it is one key and path component.
pub const MAX_SCOPE_LEN: usize = 255;

/// A parsed cell LTX key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellLtxKey {
  pub scope: String,
  pub epoch: u64,
  pub level: u16,
  pub min_txid: u64,
  pub max_txid: u64,
}

/// A scope is ASCII letters, digits and `_ - . : $`, 1 to 255 bytes, and not `.` or `..`.
/// It becomes a key and path component, so this charset is a security fence.
pub fn is_valid_scope(scope: &str) -> bool {
  !scope.is_empty()
    && scope.len() <= MAX_SCOPE_LEN
    && scope != "."
    && scope != ".."
    && scope
      .bytes()
      .all(|c| c.is_ascii_alphanumeric() || b"_-.:$".contains(&c))
}

/// Litestream's file name for a TXID range: `%016x-%016x.ltx`.
pub fn ltx_filename(min_txid: u64, max_txid: u64) -> String {
  format!("{min_txid:016x}-{max_txid:016x}.ltx")
}

/// Parses `<16 hex>-<16 hex>.ltx` (lowercase) into (min, max); requires 1 <= min <= max.
pub fn parse_ltx_filename(name: &str) -> Result<(u64, u64)> {
  let parsed = name
    .strip_suffix(".ltx")
    .and_then(|s| s.split_once('-'))
    .and_then(|(a, b)| Some((parse_hex(a, 16)?, parse_hex(b, 16)?)));
  let Some((min, max)) = parsed else {
    bail!("invalid LTX file name {name:?}: expected <16 hex>-<16 hex>.ltx");
  };
  check_range(min, max)?;
  Ok((min, max))
}

/// The key prefix of one epoch, without a trailing slash: Litestream's replica path.
pub fn cell_ltx_prefix(scope: &str, epoch: u64) -> Result<String> {
  if !is_valid_scope(scope) {
    bail!("invalid cell scope {scope:?}: ASCII letters, digits and _-.:$ only, 1..=255 bytes");
  }
  Ok(format!("cells/{scope}/ltx/e{epoch}"))
}

/// The bucket key of one LTX file.
pub fn cell_ltx_key(
  scope: &str,
  epoch: u64,
  level: u16,
  min_txid: u64,
  max_txid: u64,
) -> Result<String> {
  check_range(min_txid, max_txid)?;
  let prefix = cell_ltx_prefix(scope, epoch)?;
  Ok(format!(
    "{prefix}/{level:04x}/{}",
    ltx_filename(min_txid, max_txid)
  ))
}

/// Parses a key that `cell_ltx_key` writes; anything else is an error. Parsing is canonical:
/// a key parses only if formatting the result gives the same key back.
pub fn parse_cell_ltx_key(key: &str) -> Result<CellLtxKey> {
  let parts: Vec<&str> = key.split('/').collect();
  let [cells, scope, ltx, epoch, level, name] = parts[..] else {
    bail!("invalid cell LTX key {key:?}: expected cells/<scope>/ltx/e<epoch>/<level>/<file>");
  };
  if cells != "cells" || ltx != "ltx" {
    bail!("invalid cell LTX key {key:?}: expected cells/<scope>/ltx/...");
  }
  if !is_valid_scope(scope) {
    bail!("invalid cell LTX key {key:?}: bad scope {scope:?}");
  }
  let Some(epoch) = epoch.strip_prefix('e').and_then(parse_decimal) else {
    bail!("invalid cell LTX key {key:?}: bad epoch {epoch:?}, expected e<decimal>");
  };
  let Some(level) = parse_hex(level, 4) else {
    bail!("invalid cell LTX key {key:?}: bad level {level:?}, expected 4 lowercase hex digits");
  };
  let (min_txid, max_txid) = parse_ltx_filename(name)?;
  Ok(CellLtxKey {
    scope: scope.to_string(),
    epoch,
    level: level as u16,
    min_txid,
    max_txid,
  })
}

fn check_range(min: u64, max: u64) -> Result<()> {
  if min == 0 || min > max {
    bail!("invalid TXID range {min}..={max}: need 1 <= min <= max");
  }
  Ok(())
}

/// Exactly `digits` lowercase hex digits (from_str_radix alone would take `+` and uppercase).
fn parse_hex(s: &str, digits: usize) -> Option<u64> {
  let ok = s.len() == digits && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
  if ok {
    u64::from_str_radix(s, 16).ok()
  } else {
    None
  }
}

/// Decimal without sign or leading zeros, so each epoch has one spelling.
fn parse_decimal(s: &str) -> Option<u64> {
  let ok =
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
  if ok { s.parse().ok() } else { None }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn formats_the_documented_layout() {
    let k = cell_ltx_key("Counter:ab12", 3, 1, 2, 0x1f).unwrap();
    assert_eq!(
      k,
      "cells/Counter:ab12/ltx/e3/0001/0000000000000002-000000000000001f.ltx"
    );
    let k = cell_ltx_key("A", 0, 9, 1, u64::MAX).unwrap();
    assert_eq!(
      k,
      "cells/A/ltx/e0/0009/0000000000000001-ffffffffffffffff.ltx"
    );
    assert_eq!(cell_ltx_prefix("A", 12).unwrap(), "cells/A/ltx/e12");
  }

  #[test]
  fn parse_round_trips() {
    for (scope, epoch, level, min, max) in [
      ("Counter:ab12", 3, 1, 2, 0x1f),
      ("x_y-z.$:1", u64::MAX, 0xffff, 1, 1),
      ("A", 0, 0, 5, 9),
    ] {
      let k = cell_ltx_key(scope, epoch, level, min, max).unwrap();
      let p = parse_cell_ltx_key(&k).unwrap();
      assert_eq!(
        p,
        CellLtxKey {
          scope: scope.into(),
          epoch,
          level,
          min_txid: min,
          max_txid: max
        }
      );
    }
  }

  #[test]
  fn rejects_bad_scopes() {
    let long = "a".repeat(256);
    for s in [
      "",
      ".",
      "..",
      "a/b",
      "a b",
      "a\\b",
      "é",
      "a%2f",
      long.as_str(),
      "a\0",
    ] {
      assert!(!is_valid_scope(s), "{s:?}");
      assert!(cell_ltx_key(s, 1, 0, 1, 1).is_err(), "{s:?}");
    }
    assert!(is_valid_scope(&"a".repeat(255)));
  }

  #[test]
  fn rejects_bad_ranges() {
    assert!(cell_ltx_key("A", 1, 0, 0, 1).is_err());
    assert!(cell_ltx_key("A", 1, 0, 3, 2).is_err());
  }

  #[test]
  fn rejects_malformed_keys() {
    let good = "cells/A/ltx/e1/0000/0000000000000001-0000000000000002.ltx";
    parse_cell_ltx_key(good).unwrap();
    for bad in [
      "",
      "cells/A/ltx/e1/0000",
      "/cells/A/ltx/e1/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e1/0000/0000000000000001-0000000000000002.ltx/",
      "cell/A/ltx/e1/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/LTX/e1/0000/0000000000000001-0000000000000002.ltx",
      "cells/../ltx/e1/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/1/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e01/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e+1/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e18446744073709551616/0000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e1/000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e1/000A/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e1/+000/0000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e1/0000/000000000000001-0000000000000002.ltx",
      "cells/A/ltx/e1/0000/000000000000000A-0000000000000002.ltx",
      "cells/A/ltx/e1/0000/0000000000000001-0000000000000002.LTX",
      "cells/A/ltx/e1/0000/0000000000000001_0000000000000002.ltx",
      "cells/A/ltx/e1/0000/0000000000000003-0000000000000002.ltx",
      "cells/A/ltx/e1/0000/0000000000000000-0000000000000002.ltx",
      "cells/A/ltx/e1/0000/+000000000000001-0000000000000002.ltx",
    ] {
      assert!(parse_cell_ltx_key(bad).is_err(), "{bad:?}");
    }
  }

  #[test]
  fn filenames() {
    assert_eq!(ltx_filename(1, 2), "0000000000000001-0000000000000002.ltx");
    assert_eq!(
      parse_ltx_filename("00000000000000ff-0000000000000100.ltx").unwrap(),
      (255, 256)
    );
    assert!(parse_ltx_filename("00000000000000ff-0000000000000100").is_err());
  }
}

//! The `URL` class parses with ada, the WHATWG URL parser workerd uses,
//! instead of rust-url: deno_web's `00_url.js` stays as it is, and the four
//! ops it calls to parse and to set components are replaced (by name, with
//! the same signatures) through an op middleware. The Web Platform Tests
//! found rust-url behind the current spec (`file:` hosts with drive letters,
//! `/.//` paths of non-special URLs, …); ada follows it.
//!
//! deno_web's JS reads a URL as rust-url's internal offsets; ada's differ
//! in two places, mapped in `offsets`.

use deno_core::{OpDecl, OpState, op2};

// rust-lld, the default linker here, takes these definitions from this
// crate's archive when ada asks for them, ahead of libstdc++.
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
mod cxx;

/// The serialization of the last parse, when it differs from the input.
struct Serialization(String);

#[repr(u32)]
enum Status {
  Ok = 0,
  OkSerialization = 1,
  Err = 2,
}

/// The port value deno_web's setters read as "no port" (its parse reads 0).
const NO_PORT: u32 = 65536;

/// Replaces deno_web's URL ops with these; every other op passes through.
pub fn ada_ops(op: OpDecl) -> OpDecl {
  match op.name {
    "op_url_parse" => op.with_implementation_from(&op_ada_url_parse()),
    "op_url_parse_with_base" => op.with_implementation_from(&op_ada_url_parse_with_base()),
    "op_url_reparse" => op.with_implementation_from(&op_ada_url_reparse()),
    "op_url_get_serialization" => op.with_implementation_from(&op_ada_url_get_serialization()),
    _ => op,
  }
}

/// rust-url's internal offsets, which deno_web's JS slices the
/// serialization by: the scheme ends before its `:` (ada: after), and the
/// host starts after the credentials' `@` (ada: at it). A URL without a
/// host whose path begins with `//` is serialized with `/.` before the path
/// (the URL spec's rule, which rust-url lacks): that `/.` belongs to
/// neither host nor path, so the empty host is placed where the path starts.
fn offsets(url: &ada_url::Url, no_port: u32, buf: &mut [u32]) {
  let c = url.components();
  let href = url.href().as_bytes();
  let path_start = c.pathname_start.unwrap_or(c.host_end);
  let dot_prefix = path_start == c.host_end + 2
    && href.get(c.host_end as usize..path_start as usize) == Some(b"/.");
  let (host_start, host_end) = if dot_prefix {
    (path_start, path_start)
  } else {
    (
      c.host_start + u32::from(href.get(c.host_start as usize) == Some(&b'@')),
      c.host_end,
    )
  };
  buf[0] = c.protocol_end.saturating_sub(1);
  buf[1] = c.username_end;
  buf[2] = host_start;
  buf[3] = host_end;
  buf[4] = c.port.unwrap_or(no_port);
  buf[5] = path_start;
  buf[6] = c.search_start.unwrap_or(0);
  buf[7] = c.hash_start.unwrap_or(0);
}

fn answer(
  state: &mut OpState,
  url: &ada_url::Url,
  input: &str,
  no_port: u32,
  buf: &mut [u32],
) -> u32 {
  offsets(url, no_port, buf);
  if url.href() == input {
    Status::Ok as u32
  } else {
    state.put(Serialization(url.href().to_owned()));
    Status::OkSerialization as u32
  }
}

#[op2(fast)]
#[smi]
fn op_ada_url_parse(state: &mut OpState, #[string] href: &str, #[buffer] buf: &mut [u32]) -> u32 {
  match ada_url::Url::parse(href, None) {
    Ok(url) => answer(state, &url, href, 0, buf),
    Err(_) => Status::Err as u32,
  }
}

#[op2(fast)]
#[smi]
fn op_ada_url_parse_with_base(
  state: &mut OpState,
  #[string] href: &str,
  #[string] base_href: &str,
  #[buffer] buf: &mut [u32],
) -> u32 {
  match ada_url::Url::parse(href, Some(base_href)) {
    Ok(url) => answer(state, &url, href, 0, buf),
    Err(_) => Status::Err as u32,
  }
}

#[op2]
#[string]
fn op_ada_url_get_serialization(state: &mut OpState) -> String {
  state.take::<Serialization>().0
}

/// A setter (deno_web's numbering: hash, host, hostname, password,
/// pathname, port, protocol, search, username) applied to `href`.
#[op2(fast)]
#[smi]
fn op_ada_url_reparse(
  state: &mut OpState,
  #[string] href: String,
  #[smi] setter: u8,
  #[string] value: String,
  #[buffer] buf: &mut [u32],
) -> u32 {
  let Ok(mut url) = ada_url::Url::parse(href.as_str(), None) else {
    return Status::Err as u32;
  };
  let v = Some(value.as_str());
  let applied = match setter {
    0 => {
      url.set_hash(v);
      Ok(())
    }
    1 => url.set_host(v),
    2 => url.set_hostname(v),
    3 => url.set_password(v),
    4 => url.set_pathname(v),
    5 => url.set_port(v),
    6 => url.set_protocol(&value),
    7 => {
      url.set_search(v);
      Ok(())
    }
    8 => url.set_username(v),
    _ => return Status::Err as u32,
  };
  match applied {
    Ok(()) => answer(state, &url, &href, NO_PORT, buf),
    Err(_) => Status::Err as u32,
  }
}

//! The five symbols ada's optimized object code takes from libstdc++,
//! defined here. The linker binds ada's references to these, so nothing is
//! left to take from libstdc++ and `--as-needed` keeps it out of the
//! process (it cost about 1.2 MB resident in every process,
//! `bench/hello.sh`). Where a toolchain's ada needs more of it, libstdc++
//! is linked as before and provides the rest.
//!
//! - `std::ios_base::Init`: ada.cpp includes `<iostream>`, whose static
//!   initializer sets up the standard streams and locales. ada writes to
//!   them only in its development checks (unoptimized builds), so they are
//!   never set up.
//! - `std::__throw_*`: the standard library's failures (a string past its
//!   maximum length, an index out of range) that ada's code only reaches
//!   through a bug. Thrown, they could not cross ada's C interface into
//!   Rust (that terminates the process), so they abort with their message.

use std::ffi::{CStr, c_char, c_void};

fn abort(what: &str, msg: *const c_char) -> ! {
  let msg = if msg.is_null() {
    String::new()
  } else {
    // SAFETY: libstdc++'s callers pass a NUL-terminated message.
    unsafe { CStr::from_ptr(msg) }
      .to_string_lossy()
      .into_owned()
  };
  eprintln!("ada (the URL parser): {what}: {msg}");
  std::process::abort()
}

/// `std::ios_base::Init::Init()`.
#[unsafe(no_mangle)]
extern "C" fn _ZNSt8ios_base4InitC1Ev(_this: *mut c_void) {}

/// `std::ios_base::Init::~Init()`.
#[unsafe(no_mangle)]
extern "C" fn _ZNSt8ios_base4InitD1Ev(_this: *mut c_void) {}

/// `std::__throw_logic_error(const char*)`.
#[unsafe(no_mangle)]
extern "C" fn _ZSt19__throw_logic_errorPKc(msg: *const c_char) -> ! {
  abort("logic error", msg)
}

/// `std::__throw_length_error(const char*)`.
#[unsafe(no_mangle)]
extern "C" fn _ZSt20__throw_length_errorPKc(msg: *const c_char) -> ! {
  abort("length error", msg)
}

/// `std::__throw_out_of_range_fmt(const char*, ...)`: the format's
/// arguments are not read (the format itself names the failure).
#[unsafe(no_mangle)]
extern "C" fn _ZSt24__throw_out_of_range_fmtPKcz(fmt: *const c_char) -> ! {
  abort("out of range", fmt)
}

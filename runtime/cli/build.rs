//! Links cellhost's relative relocations packed (DT_RELR) where the C
//! library can load them (glibc 2.36 or later). The binary is a PIE (its
//! code, V8's included, loads at a random address); its ~400 000 relative
//! relocations as plain RELA entries are a 10 MB table the loader reads at
//! every start, resident for the life of the process. Packed, the table is
//! under 100 kB: idle RSS drops by about that much, ASLR unchanged.

fn main() {
  println!("cargo:rerun-if-changed=build.rs");
  let var = |k: &str| std::env::var(k).unwrap_or_default();
  let native = var("HOST") == var("TARGET");
  if var("CARGO_CFG_TARGET_OS") == "linux"
    && var("CARGO_CFG_TARGET_ENV") == "gnu"
    && native
    && glibc_has_relr()
  {
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
  }
}

/// Whether this machine's glibc (the one the binary links against and
/// runs with) is 2.36 or later, the first to load DT_RELR.
fn glibc_has_relr() -> bool {
  let Ok(out) = std::process::Command::new("getconf")
    .arg("GNU_LIBC_VERSION")
    .output()
  else {
    return false;
  };
  let text = String::from_utf8_lossy(&out.stdout);
  let Some(version) = text.trim().strip_prefix("glibc ") else {
    return false;
  };
  let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
  let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
  (major, minor) >= (2, 36)
}

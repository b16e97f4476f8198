//! EC public points as workerd checks them on import: a point that is not
//! on its curve is refused (deno_crypto would take it).

use deno_core::op2;

/// Whether `point` (SEC1) is a valid public point of `curve`; names other
/// than the NIST curves are not judged here.
#[op2(fast)]
pub fn op_crypto_ec_point_valid(#[string] curve: &str, #[buffer] point: &[u8]) -> bool {
  point_valid(curve, point)
}

fn point_valid(curve: &str, point: &[u8]) -> bool {
  match curve {
    "P-256" => p256::PublicKey::from_sec1_bytes(point).is_ok(),
    "P-384" => p384::PublicKey::from_sec1_bytes(point).is_ok(),
    "P-521" => p521::PublicKey::from_sec1_bytes(point).is_ok(),
    _ => true,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn points_off_the_curve_are_refused() {
    // P-256's generator, then the same with y changed.
    let mut g = hex(
      "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5",
    );
    assert!(point_valid("P-256", &g));
    *g.last_mut().unwrap() ^= 1;
    assert!(!point_valid("P-256", &g));
    assert!(!point_valid("P-384", &g));
  }

  fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
      .step_by(2)
      .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
      .collect()
  }
}

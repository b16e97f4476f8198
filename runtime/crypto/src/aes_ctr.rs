//! AES-CTR with any counter length from 1 to 128 bits (deno_crypto takes 32,
//! 64 and 128 only). Only the low `length` bits of the counter block count
//! up, wrapping; an input longer than the counter can number is refused
//! (the keystream would repeat), as workerd refuses it.

use aes::cipher::{BlockEncrypt, BlockSizeUser, KeyInit, consts::U16};

#[derive(Debug, PartialEq)]
pub enum CtrError {
  KeyLength,
  CounterLength,
  /// More blocks than 2^length: the counter would repeat.
  TooLong,
}

pub fn apply(key: &[u8], counter: &[u8], length: u32, data: &[u8]) -> Result<Vec<u8>, CtrError> {
  match key.len() {
    16 => run(
      &aes::Aes128::new_from_slice(key).unwrap(),
      counter,
      length,
      data,
    ),
    24 => run(
      &aes::Aes192::new_from_slice(key).unwrap(),
      counter,
      length,
      data,
    ),
    32 => run(
      &aes::Aes256::new_from_slice(key).unwrap(),
      counter,
      length,
      data,
    ),
    _ => Err(CtrError::KeyLength),
  }
}

fn run<C: BlockEncrypt + BlockSizeUser<BlockSize = U16>>(
  cipher: &C,
  counter: &[u8],
  length: u32,
  data: &[u8],
) -> Result<Vec<u8>, CtrError> {
  let counter: [u8; 16] = counter.try_into().map_err(|_| CtrError::CounterLength)?;
  if !(1..=128).contains(&length) {
    return Err(CtrError::CounterLength);
  }
  let blocks = data.len().div_ceil(16) as u128;
  if length < 128 && blocks > 1u128 << length {
    return Err(CtrError::TooLong);
  }
  let mask = if length == 128 {
    u128::MAX
  } else {
    (1u128 << length) - 1
  };
  let start = u128::from_be_bytes(counter);
  let mut out = data.to_vec();
  for (i, chunk) in out.chunks_mut(16).enumerate() {
    let low = (start & mask).wrapping_add(i as u128) & mask;
    let mut block = ((start & !mask) | low).to_be_bytes().into();
    cipher.encrypt_block(&mut block);
    for (b, k) in chunk.iter_mut().zip(block.iter()) {
      *b ^= k;
    }
  }
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;
  use aes::cipher::KeyIvInit;
  use aes::cipher::StreamCipher;

  #[test]
  fn matches_the_standard_modes_where_they_exist() {
    let key = [3u8; 16];
    let counter = [0xffu8; 16];
    let data = [7u8; 100];
    for (bits, ours) in [
      (32, apply(&key, &counter, 32, &data)),
      (128, apply(&key, &counter, 128, &data)),
    ] {
      let mut theirs = data.to_vec();
      if bits == 32 {
        ctr::Ctr32BE::<aes::Aes128>::new(&key.into(), &counter.into()).apply_keystream(&mut theirs);
      } else {
        ctr::Ctr128BE::<aes::Aes128>::new(&key.into(), &counter.into())
          .apply_keystream(&mut theirs);
      }
      assert_eq!(ours.unwrap(), theirs, "{bits}-bit counter");
    }
  }

  #[test]
  fn short_counters_wrap_and_refuse_to_repeat() {
    let key = [1u8; 16];
    // 2 bits: four blocks, then the counter would repeat.
    assert!(apply(&key, &[0; 16], 2, &[0; 64]).is_ok());
    assert_eq!(apply(&key, &[0; 16], 2, &[0; 65]), Err(CtrError::TooLong));
    // The fifth block of an 8-bit counter starting at 0xfe is block 3's
    // counter wrapped: only the low byte moves.
    let x = apply(
      &key,
      &{
        let mut c = [9u8; 16];
        c[15] = 0xff;
        c
      },
      8,
      &[0; 32],
    )
    .unwrap();
    let y = apply(
      &key,
      &{
        let mut c = [9u8; 16];
        c[15] = 0x00;
        c
      },
      8,
      &[0; 16],
    )
    .unwrap();
    assert_eq!(&x[16..], &y[..]);
    assert_eq!(
      apply(&key, &[0; 15], 8, &[0; 1]),
      Err(CtrError::CounterLength)
    );
    assert_eq!(
      apply(&key, &[0; 16], 0, &[0; 1]),
      Err(CtrError::CounterLength)
    );
  }
}

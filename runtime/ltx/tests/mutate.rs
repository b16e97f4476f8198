//! Std-only mutation testing of the decoder, so CI covers malformed input without nightly or
//! libFuzzer: seeded mutants of valid files must never panic, and any mutant that decodes must
//! re-encode to the same header and pages. `LTX_MUTATIONS=200000` runs more; the default keeps
//! `cargo test` fast. `LTX_FUZZ_SEEDS=<dir>` also writes the valid base files there, as a seed
//! corpus for `cargo fuzz run decode <dir>`.

use cellhost_ltx::{CHECKSUM_FLAG, Encoder, Header, LtxFile, apply, crc64, decode, encode};
use std::io::Write;

struct Rng(u64);

impl Rng {
  fn next(&mut self) -> u64 {
    self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
  }

  fn below(&mut self, n: usize) -> usize {
    (self.next() % n.max(1) as u64) as usize
  }

  fn page(&mut self, size: usize) -> Vec<u8> {
    let cut = self.below(size + 1);
    (0..size)
      .map(|i| {
        if i < cut {
          self.next() as u8
        } else {
          (i / 32) as u8
        }
      })
      .collect()
  }
}

fn base_files(rng: &mut Rng) -> Vec<Vec<u8>> {
  let mut out = Vec::new();
  for (page_size, commit) in [(512u32, 5u32), (1024, 3), (512, 0), (4096, 2)] {
    let pages: Vec<Vec<u8>> = (0..commit).map(|_| rng.page(page_size as usize)).collect();
    let all = || {
      pages
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u32 + 1, p.as_slice()))
    };
    out.push(encode(&Header::snapshot(page_size, commit, 3, 1), all()).unwrap());
    let some = all().filter(|(n, _)| n % 2 == 1);
    out.push(encode(&Header::delta(page_size, commit + 1, 4, 6, 2), some).unwrap());
    // Tracked checksums exercise the post-apply paths.
    let mut tracked = Header::snapshot(page_size, commit, 3, 1);
    tracked.flags = 0;
    out.push(encode(&tracked, all()).unwrap());
    out.push(legacy_file(
      Header::snapshot(page_size, commit, 3, 1),
      &pages,
    ));
  }
  out
}

/// A snapshot in the legacy v3 page format (flags 0, one LZ4 frame per page), built by hand
/// because the encoder only writes blocks.
fn legacy_file(h: Header, pages: &[Vec<u8>]) -> Vec<u8> {
  let mut b = h.encode().to_vec();
  let mut feed = b.clone();
  let mut index = Vec::new();
  for (i, page) in pages.iter().enumerate() {
    let offset = b.len();
    let head = [(i as u32 + 1).to_be_bytes().as_slice(), &[0, 0]].concat();
    let info = lz4_flex::frame::FrameInfo::new().content_checksum(true);
    let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
    enc.write_all(page).unwrap();
    b.extend_from_slice(&head);
    b.extend_from_slice(&enc.finish().unwrap());
    feed.extend_from_slice(&head);
    feed.extend_from_slice(page);
    for v in [i as u64 + 1, offset as u64, (b.len() - offset) as u64] {
      uvarint(&mut index, v);
    }
  }
  b.extend_from_slice(&[0; 6]);
  feed.extend_from_slice(&[0; 6]);
  index.push(0);
  index.extend_from_slice(&(index.len() as u64).to_be_bytes());
  index.extend_from_slice(&[0; 8]); // post-apply checksum: NoChecksum
  b.extend_from_slice(&index);
  feed.extend_from_slice(&index);
  b.extend_from_slice(&(CHECKSUM_FLAG | crc64(&feed)).to_be_bytes());
  b
}

fn uvarint(out: &mut Vec<u8>, mut v: u64) {
  while v >= 0x80 {
    out.push(v as u8 | 0x80);
    v >>= 7;
  }
  out.push(v as u8);
}

fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
  let mut b = base.to_vec();
  for _ in 0..1 + rng.below(4) {
    let at = rng.below(b.len());
    match rng.below(8) {
      0 => {
        if let Some(x) = b.get_mut(at) {
          *x ^= 1 << rng.below(8);
        }
      }
      1 => {
        if let Some(x) = b.get_mut(at) {
          *x = rng.next() as u8;
        }
      }
      2 => b.insert(at.min(b.len()), rng.next() as u8),
      3 => {
        if at < b.len() {
          b.remove(at);
        }
      }
      4 => b.truncate(at),
      5 => {
        // Interesting values land in length and number fields.
        let v: [u8; 4] = [
          [0, 0, 0, 0],
          [0xff; 4],
          [0x7f, 0xff, 0xff, 0xff],
          [0, 0, 0, 1],
        ][rng.below(4)];
        let end = (at + 4).min(b.len());
        b[at.min(end)..end].copy_from_slice(&v[..end - at.min(end)]);
      }
      6 => {
        let len = rng.below(64).min(b.len() - at.min(b.len()));
        let chunk = b[at.min(b.len())..at.min(b.len()) + len].to_vec();
        let to = rng.below(b.len() + 1);
        b.splice(to..to, chunk);
      }
      _ => {
        // Splice the tail of another valid file.
        let from = rng.below(other.len());
        b.truncate(at);
        b.extend_from_slice(&other[from..]);
      }
    }
  }
  b
}

fn check(file: &LtxFile) {
  let mut enc = Encoder::new(file.header).unwrap();
  for p in &file.pages {
    enc.add_page(p.pgno, &p.data).unwrap();
  }
  if !file.header.no_checksum() {
    enc.set_post_apply_checksum(file.post_apply_checksum);
  }
  let again = decode(&enc.finish().unwrap()).unwrap();
  assert_eq!((again.header, &again.pages), (file.header, &file.pages));
  if file.header.is_snapshot() {
    let image = apply(std::slice::from_ref(file)).unwrap();
    assert_eq!(
      image.len(),
      file.header.commit as usize * file.header.page_size as usize
    );
  }
}

#[test]
fn mutants_never_panic_and_decoded_mutants_are_consistent() {
  let n: usize = std::env::var("LTX_MUTATIONS")
    .ok()
    .and_then(|v| v.parse().ok())
    .unwrap_or(20_000);
  let mut rng = Rng(0x17c5_eed5);
  let bases = base_files(&mut rng);
  if let Some(dir) = std::env::var_os("LTX_FUZZ_SEEDS") {
    std::fs::create_dir_all(&dir).unwrap();
    for (i, b) in bases.iter().enumerate() {
      std::fs::write(std::path::Path::new(&dir).join(format!("base-{i}.ltx")), b).unwrap();
    }
  }
  for b in &bases {
    check(&decode(b).unwrap());
  }
  // The hand-built legacy snapshot decodes to the same pages as the block-format one.
  assert_eq!(
    decode(&bases[0]).unwrap().pages,
    decode(&bases[3]).unwrap().pages
  );
  let mut decoded = 0;
  for _ in 0..n {
    let base = &bases[rng.below(bases.len())];
    let other = &bases[rng.below(bases.len())];
    let m = mutate(&mut rng, base, other);
    if let Ok(file) = decode(&m) {
      decoded += 1;
      check(&file);
    }
  }
  eprintln!("{decoded} of {n} mutants decoded");
  // Most mutants must be rejected; a few (same page, different LZ4 bytes) may decode.
  assert!(decoded < n / 4, "{decoded} of {n} mutants decoded");
}

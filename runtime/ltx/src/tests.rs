//! Encode/decode/apply tests across modules. Deterministic: a seeded PRNG, no rand crate.

use crate::*;

/// SplitMix64: tiny, seeded, good enough to make pages and choose mutations.
pub(crate) struct Rng(u64);

impl Rng {
  pub(crate) fn new(seed: u64) -> Self {
    Self(seed)
  }

  pub(crate) fn next_u64(&mut self) -> u64 {
    self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
  }

  pub(crate) fn below(&mut self, n: u64) -> u64 {
    self.next_u64() % n
  }

  /// A page that is random, highly compressible, or a mix, so LZ4 output varies.
  pub(crate) fn page(&mut self, size: usize) -> Vec<u8> {
    let mut p = vec![0u8; size];
    match self.below(3) {
      0 => p.iter_mut().for_each(|b| *b = self.next_u64() as u8),
      1 => p
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i / 64) as u8),
      _ => {
        let cut = self.below(size as u64) as usize;
        p[..cut].iter_mut().for_each(|b| *b = self.next_u64() as u8);
      }
    }
    p
  }
}

fn pages_of(file: &LtxFile) -> Vec<(u32, Vec<u8>)> {
  file
    .pages
    .iter()
    .map(|p| (p.pgno, p.data.clone()))
    .collect()
}

fn enc(header: &Header, pages: &[(u32, Vec<u8>)]) -> Vec<u8> {
  encode(header, pages.iter().map(|(n, p)| (*n, p.as_slice()))).unwrap()
}

fn snapshot_pages(rng: &mut Rng, page_size: u32, commit: u32) -> Vec<(u32, Vec<u8>)> {
  (1..=commit)
    .map(|n| (n, rng.page(page_size as usize)))
    .collect()
}

/// (page index start, its length field) read from the tail, as Litestream's ranged reads do.
fn index_bounds(b: &[u8]) -> (usize, usize) {
  let len_at = b.len() - TRAILER_SIZE - 8;
  let len = u64::from_be_bytes(b[len_at..len_at + 8].try_into().unwrap()) as usize;
  (len_at - len, len)
}

/// Index entries parsed independently of the decoder (every test value is < 2^63).
fn index_entries(b: &[u8]) -> Vec<(u64, u64, u64)> {
  let (mut pos, _) = index_bounds(b);
  let mut read = || {
    let (mut v, mut shift) = (0u64, 0);
    loop {
      let byte = b[pos];
      pos += 1;
      v |= u64::from(byte & 0x7f) << shift;
      shift += 7;
      if byte < 0x80 {
        return v;
      }
    }
  };
  let mut out = Vec::new();
  loop {
    let pgno = read();
    if pgno == 0 {
      return out;
    }
    out.push((pgno, read(), read()));
  }
}

/// Recomputes the file checksum of a block-format file from the spec's logical feed, so a
/// test can change a field and still reach the check it aims at.
fn reseal(b: &mut [u8]) {
  let page_size = u32::from_be_bytes(b[8..12].try_into().unwrap()) as usize;
  let mut feed = b[..HEADER_SIZE].to_vec();
  let mut pos = HEADER_SIZE;
  loop {
    let ph = &b[pos..pos + 6];
    if ph == [0; 6] {
      break;
    }
    let size = u32::from_be_bytes(b[pos + 6..pos + 10].try_into().unwrap()) as usize;
    feed.extend_from_slice(&b[pos..pos + 10]);
    let block = &b[pos + 10..pos + 10 + size];
    feed.extend_from_slice(&lz4_flex::block::decompress(block, page_size).unwrap());
    pos += 10 + size;
  }
  let n = b.len();
  feed.extend_from_slice(&b[pos..n - 8]);
  let sum = CHECKSUM_FLAG | crc64(&feed);
  b[n - 8..].copy_from_slice(&sum.to_be_bytes());
}

fn decode_err(b: &[u8]) -> String {
  match decode(b) {
    Ok(f) => panic!("decode accepted a bad file: {:?}", f.header),
    Err(e) => e.to_string(),
  }
}

#[track_caller]
fn assert_err_has(b: &[u8], want: &str) {
  let e = decode_err(b);
  assert!(
    e.contains(want),
    "expected an error with {want:?}, got {e:?}"
  );
}

#[test]
fn round_trip_random_files() {
  let mut rng = Rng::new(1);
  for round in 0..60 {
    let page_size = 512 << rng.below(8);
    let commit = rng.below(if page_size > 8192 { 4 } else { 24 }) as u32;
    let (header, pages) = if round % 2 == 0 {
      (
        Header::snapshot(page_size, commit, 1 + rng.below(9), rng.next_u64() as i64),
        { snapshot_pages(&mut rng, page_size, commit) },
      )
    } else {
      let min = 2 + rng.below(1000);
      let h = Header::delta(page_size, commit, min, min + rng.below(5), 42);
      let chosen: Vec<u32> = (1..=commit).filter(|_| rng.below(2) == 0).collect();
      let pages: Vec<_> = chosen
        .into_iter()
        .map(|n| (n, rng.page(page_size as usize)))
        .collect();
      (h, pages)
    };
    let b = enc(&header, &pages);
    let f = decode(&b).unwrap();
    assert_eq!(f.header, header);
    assert_eq!(pages_of(&f), pages);
    assert_eq!(f.post_apply_checksum, 0);
    assert_eq!(f.file_checksum & CHECKSUM_FLAG, CHECKSUM_FLAG);
  }
}

#[test]
fn byte_layout_matches_the_spec() {
  let mut rng = Rng::new(2);
  let pages = snapshot_pages(&mut rng, 1024, 5);
  let b = enc(&Header::snapshot(1024, 5, 3, 7), &pages);
  assert_eq!(&b[..4], b"LTX1");
  assert_eq!(&b[4..8], &[0, 0, 0, 2], "NoChecksum flag");

  // Frames start right after the header, back to back, each pgno | flag 1 | BE size | block.
  let entries = index_entries(&b);
  assert_eq!(entries.len(), 5);
  let mut pos = HEADER_SIZE;
  let mut feed = b[..HEADER_SIZE].to_vec();
  for (i, &(pgno, offset, size)) in entries.iter().enumerate() {
    assert_eq!((pgno, offset), (i as u64 + 1, pos as u64));
    assert_eq!(&b[pos..pos + 4], &(pgno as u32).to_be_bytes());
    assert_eq!(&b[pos + 4..pos + 6], &[0, 1]);
    let n = u32::from_be_bytes(b[pos + 6..pos + 10].try_into().unwrap()) as usize;
    assert_eq!(size, 10 + n as u64);
    let block = &b[pos + 10..pos + 10 + n];
    assert_eq!(
      lz4_flex::block::decompress(block, 1024).unwrap(),
      pages[i].1
    );
    feed.extend_from_slice(&b[pos..pos + 10]);
    feed.extend_from_slice(&pages[i].1);
    pos += size as usize;
  }
  assert_eq!(&b[pos..pos + 6], &[0; 6], "terminator");
  pos += 6;
  let (index_start, index_len) = index_bounds(&b);
  assert_eq!(index_start, pos);
  assert_eq!(b[pos + index_len - 1], 0, "index ends with uvarint 0");
  assert_eq!(b.len(), pos + index_len + 8 + 16);
  assert_eq!(
    &b[b.len() - 16..b.len() - 8],
    &[0; 8],
    "post-apply is 0 with NoChecksum"
  );
  // File checksum: the logical feed of the spec, with decompressed pages.
  feed.extend_from_slice(&[0; 6]);
  feed.extend_from_slice(&b[pos..b.len() - 8]);
  let want = CHECKSUM_FLAG | crc64(&feed);
  assert_eq!(&b[b.len() - 8..], &want.to_be_bytes());
}

#[test]
fn empty_database_snapshot() {
  let b = enc(&Header::snapshot(4096, 0, 1, 0), &[]);
  assert_eq!(b.len(), HEADER_SIZE + 6 + 1 + 8 + 16);
  let f = decode(&b).unwrap();
  assert!(f.pages.is_empty());
  assert_eq!(apply(&[f]).unwrap(), Vec::<u8>::new());
}

#[test]
fn legacy_lz4_frame_pages_decode() {
  let mut rng = Rng::new(3);
  let pages = snapshot_pages(&mut rng, 2048, 4);
  let mut e = Encoder::new(Header::snapshot(2048, 4, 1, 0))
    .unwrap()
    .with_legacy_frames();
  for (n, p) in &pages {
    e.add_page(*n, p).unwrap();
  }
  let b = e.finish().unwrap();
  assert_eq!(
    &b[HEADER_SIZE + 4..HEADER_SIZE + 10],
    &[0, 0, 0x04, 0x22, 0x4d, 0x18]
  );
  let f = decode(&b).unwrap();
  assert_eq!(pages_of(&f), pages);
  for n in 0..b.len() {
    assert!(
      decode(&b[..n]).is_err(),
      "legacy prefix of {n} bytes accepted"
    );
  }
  for i in HEADER_SIZE..b.len() {
    let mut bad = b.clone();
    bad[i] ^= 0x5a;
    if let Ok(g) = decode(&bad) {
      assert_eq!(g.pages, f.pages, "flip at {i} changed pages but passed");
    }
  }
}

#[test]
fn truncation_at_every_length_fails() {
  let mut rng = Rng::new(4);
  let pages = snapshot_pages(&mut rng, 512, 6);
  let b = enc(&Header::snapshot(512, 6, 1, 0), &pages);
  decode(&b).unwrap();
  for n in 0..b.len() {
    assert!(
      decode(&b[..n]).is_err(),
      "prefix of {n} of {} bytes accepted",
      b.len()
    );
  }
  let mut longer = b.clone();
  longer.push(0);
  assert_err_has(&longer, "unexpected bytes after the page index");
}

#[test]
fn every_flipped_byte_is_caught() {
  let mut rng = Rng::new(5);
  let delta: Vec<_> = [2u32, 3, 7].iter().map(|&n| (n, rng.page(512))).collect();
  for (header, pages) in [
    (
      Header::snapshot(512, 5, 2, 9),
      snapshot_pages(&mut rng, 512, 5),
    ),
    (Header::delta(512, 9, 4, 6, 9), delta),
  ] {
    let b = enc(&header, &pages);
    let original = decode(&b).unwrap();
    // The file checksum covers decompressed pages, so a flip inside an LZ4 block may yield a
    // different encoding of the same page; that alone may pass. Everything else must fail.
    let payload: Vec<(usize, usize)> = index_entries(&b)
      .iter()
      .map(|&(_, o, s)| (o as usize + 10, (o + s) as usize))
      .collect();
    for i in 0..b.len() {
      for mask in [0x01u8, 0x80, 0xff] {
        let mut bad = b.clone();
        bad[i] ^= mask;
        if let Ok(f) = decode(&bad) {
          let in_block = payload.iter().any(|&(s, e)| (s..e).contains(&i));
          assert!(
            in_block && f == original,
            "flip {mask:#x} at byte {i} accepted"
          );
        }
      }
    }
  }
}

#[test]
fn rejects_bad_magic_and_flags() {
  let b = enc(&Header::snapshot(512, 1, 1, 0), &[(1, vec![1; 512])]);
  let mut bad = b.clone();
  bad[0] = b'X';
  assert_err_has(&bad, "bad magic");
  let mut bad = b.clone();
  bad[7] = 3;
  assert_err_has(&bad, "invalid header flags");
  let mut bad = b.clone();
  bad[HEADER_SIZE + 5] = 3;
  assert_err_has(&bad, "invalid page flags");
  let mut bad = b.clone();
  bad[HEADER_SIZE..HEADER_SIZE + 4].copy_from_slice(&[0; 4]);
  assert_err_has(&bad, "page number 0");
}

/// A delta with pages 3 and 5 (commit 6), and where its second frame's pgno sits.
fn two_page_delta() -> (Vec<u8>, usize) {
  let b = enc(
    &Header::delta(512, 6, 2, 2, 0),
    &[(3, vec![3; 512]), (5, vec![5; 512])],
  );
  let second = index_entries(&b)[1].1 as usize;
  (b, second)
}

#[test]
fn rejects_out_of_order_and_out_of_range_pages() {
  let (b, second) = two_page_delta();
  decode(&b).unwrap();
  for (pgno, want) in [
    (2u32, "out of order"),
    (3, "out of order"),
    (7, "beyond the commit"),
  ] {
    let mut bad = b.clone();
    bad[second..second + 4].copy_from_slice(&pgno.to_be_bytes());
    assert_err_has(&bad, want);
  }
  // Lowering commit in the header puts page 5 past it.
  let mut bad = b.clone();
  bad[12..16].copy_from_slice(&4u32.to_be_bytes());
  assert_err_has(&bad, "page 5 is beyond the commit size of 4");
}

#[test]
fn rejects_lock_page_and_incomplete_snapshots() {
  // 64 KiB pages put the lock page at 16385; a delta can reach past it cheaply.
  let lock = lock_pgno(65536);
  let b = enc(
    &Header::delta(65536, lock + 1, 2, 2, 0),
    &[(lock - 1, vec![1; 65536])],
  );
  let mut bad = b.clone();
  bad[HEADER_SIZE..HEADER_SIZE + 4].copy_from_slice(&lock.to_be_bytes());
  assert_err_has(&bad, "lock page");

  // A delta holding pages 1 and 3, relabelled as a snapshot, is missing page 2.
  let b = enc(
    &Header::delta(512, 3, 2, 2, 0),
    &[(1, vec![1; 512]), (3, vec![3; 512])],
  );
  let mut bad = b.clone();
  bad[16..24].copy_from_slice(&1u64.to_be_bytes());
  assert_err_has(&bad, "snapshot is missing page 2");
  // ... and one holding pages 1 and 2 of 3 is missing its last page.
  let b = enc(
    &Header::delta(512, 3, 2, 2, 0),
    &[(1, vec![1; 512]), (2, vec![3; 512])],
  );
  let mut bad = b.clone();
  bad[16..24].copy_from_slice(&1u64.to_be_bytes());
  assert_err_has(&bad, "snapshot is missing pages 3..=3");
}

#[test]
fn rejects_index_mismatch() {
  let (b, _) = two_page_delta();
  let (start, len) = index_bounds(&b);
  let entries = index_entries(&b);
  // Layout of this small index: [pgno, offset(1-2 bytes), size] twice, then 0.
  let mut bad = b.clone();
  bad[start] = 4; // first entry's pgno 3 -> 4
  assert_err_has(&bad, "page index entry 0");
  let mut bad = b.clone();
  bad[start + 1] ^= 1; // first entry's offset
  assert_err_has(&bad, "page index entry 0");
  let mut bad = b.clone();
  let last_size_at = start + len - 2; // the second entry's size is one byte (< 128)
  assert_eq!(u64::from(bad[last_size_at]), entries[1].2);
  bad[last_size_at] ^= 1;
  assert_err_has(&bad, "page index entry 1");
  let len_at = start + len;
  let mut bad = b.clone();
  bad[len_at + 7] ^= 1;
  assert_err_has(&bad, "page index length field");
  // An extra entry where the terminating 0 was.
  let mut bad = b[..start + len - 1].to_vec();
  bad.extend_from_slice(&[9, 1, 1, 0]);
  bad.extend_from_slice(&(len as u64 + 3).to_be_bytes());
  bad.extend_from_slice(&b[b.len() - 16..]);
  assert_err_has(&bad, "more entries than the file has pages");
  // A missing entry: the index ends after the first page.
  let mut bad = b[..start].to_vec();
  let first_len = len - 1 - (len - 1) / 2; // entries here have equal varint widths
  bad.extend_from_slice(&b[start..start + first_len]);
  bad.push(0);
  bad.extend_from_slice(&(first_len as u64 + 1).to_be_bytes());
  bad.extend_from_slice(&b[b.len() - 16..]);
  assert_err_has(&bad, "page index ends before its page");
}

#[test]
fn checksum_mismatch_is_named() {
  let (b, _) = two_page_delta();
  let mut bad = b.clone();
  let n = bad.len();
  bad[n - 1] ^= 1;
  assert_err_has(&bad, "file checksum mismatch");
  bad[n - 8] &= 0x7f;
  assert_err_has(&bad, "invalid file checksum format");
  // The tests' independent resealer agrees with the encoder.
  let mut resealed = bad;
  reseal(&mut resealed);
  assert_eq!(resealed, b);
}

#[test]
fn tracked_checksums() {
  let mut rng = Rng::new(6);
  let pages = snapshot_pages(&mut rng, 512, 4);
  let mut h = Header::snapshot(512, 4, 1, 0);
  h.flags = 0;
  let b = enc(&h, &pages);
  let f = decode(&b).unwrap();
  let image: Vec<u8> = pages.iter().flat_map(|(_, p)| p.clone()).collect();
  assert_eq!(
    f.post_apply_checksum,
    database_checksum(512, &image).unwrap()
  );

  // A wrong post-apply checksum on a tracked snapshot is caught even with a valid file checksum.
  let mut bad = b.clone();
  let n = bad.len();
  bad[n - 16..n - 8].copy_from_slice(&(CHECKSUM_FLAG | 1).to_be_bytes());
  reseal(&mut bad);
  assert_err_has(&bad, "does not match the snapshot's pages");
  bad[n - 16..n - 8].copy_from_slice(&0u64.to_be_bytes());
  reseal(&mut bad);
  assert_err_has(&bad, "post-apply checksum required");
  bad[n - 16..n - 8].copy_from_slice(&1u64.to_be_bytes());
  reseal(&mut bad);
  assert_err_has(&bad, "invalid post-apply checksum format");

  // A NoChecksum file must not carry one.
  let mut bad = enc(&Header::snapshot(512, 1, 1, 0), &[(1, vec![0; 512])]);
  let n = bad.len();
  bad[n - 16..n - 8].copy_from_slice(&(CHECKSUM_FLAG | 1).to_be_bytes());
  reseal(&mut bad);
  assert_err_has(&bad, "not allowed with the no-checksum flag");

  // A tracked delta chain applies and verifies pre- and post-apply checksums.
  let mut image2 = image.clone();
  image2[512..1024].fill(9);
  image2.truncate(3 * 512);
  let mut d = Header::delta(512, 3, 2, 2, 0);
  d.flags = 0;
  d.pre_apply_checksum = database_checksum(512, &image).unwrap();
  let mut e = Encoder::new(d).unwrap();
  e.add_page(2, &image2[512..1024]).unwrap();
  e.set_post_apply_checksum(database_checksum(512, &image2).unwrap());
  let delta = decode(&e.finish().unwrap()).unwrap();
  assert_eq!(apply(&[f.clone(), delta.clone()]).unwrap(), image2);
  let mut wrong = delta.clone();
  wrong.header.pre_apply_checksum ^= 1;
  assert!(
    apply(&[f.clone(), wrong])
      .unwrap_err()
      .message()
      .contains("pre-apply checksum")
  );
  let mut wrong = delta;
  wrong.post_apply_checksum ^= 1;
  assert!(
    apply(&[f, wrong])
      .unwrap_err()
      .message()
      .contains("post-apply checksum")
  );
}

#[test]
fn encoder_rejects_misuse() {
  let h = Header::delta(512, 10, 2, 2, 0);
  let page = vec![0u8; 512];
  let err = |r: Result<()>| r.unwrap_err().message().to_string();
  let mut e = Encoder::new(h).unwrap();
  assert!(err(e.add_page(1, &[0; 100])).contains("page size"));
  assert!(err(e.add_page(0, &page)).contains("page number 0"));
  e.add_page(4, &page).unwrap();
  assert!(err(e.add_page(4, &page)).contains("out of order"));
  assert!(err(e.add_page(3, &page)).contains("out of order"));
  assert!(err(e.add_page(11, &page)).contains("beyond the commit"));
  let lock = lock_pgno(65536);
  let mut e = Encoder::new(Header::delta(65536, lock + 1, 2, 2, 0)).unwrap();
  assert!(err(e.add_page(lock, &vec![0; 65536])).contains("lock page"));

  let mut s = Encoder::new(Header::snapshot(512, 3, 1, 0)).unwrap();
  s.add_page(1, &page).unwrap();
  assert!(err(s.add_page(3, &page)).contains("missing page 2"));
  assert!(
    s.finish()
      .unwrap_err()
      .message()
      .contains("missing pages 2..=3")
  );

  assert!(Encoder::new(Header::snapshot(500, 1, 1, 0)).is_err());
  let mut e = Encoder::new(h).unwrap();
  e.set_post_apply_checksum(CHECKSUM_FLAG);
  assert!(e.finish().unwrap_err().message().contains("not allowed"));
  let mut tracked = h;
  tracked.flags = 0;
  tracked.pre_apply_checksum = CHECKSUM_FLAG;
  let e = Encoder::new(tracked).unwrap();
  assert!(
    e.finish()
      .unwrap_err()
      .message()
      .contains("post-apply checksum required")
  );
  let mut e = Encoder::new(tracked).unwrap();
  e.set_post_apply_checksum(5);
  assert!(
    e.finish()
      .unwrap_err()
      .message()
      .contains("invalid post-apply")
  );
}

/// Keeps the expected image alongside the files, as a model for `apply`.
fn delta_on(image: &mut Vec<u8>, rng: &mut Rng, commit: u32, min: u64, max: u64) -> LtxFile {
  image.resize(commit as usize * 512, 0);
  let mut pages = Vec::new();
  for n in 1..=commit {
    if rng.below(3) == 0 {
      let p = rng.page(512);
      image[(n as usize - 1) * 512..n as usize * 512].copy_from_slice(&p);
      pages.push((n, p));
    }
  }
  decode(&enc(&Header::delta(512, commit, min, max, 0), &pages)).unwrap()
}

#[test]
fn apply_builds_the_image() {
  let mut rng = Rng::new(7);
  let pages = snapshot_pages(&mut rng, 512, 6);
  let mut image: Vec<u8> = pages.iter().flat_map(|(_, p)| p.clone()).collect();
  let snap = decode(&enc(&Header::snapshot(512, 6, 1, 0), &pages)).unwrap();
  let mut files = vec![snap];
  files.push(delta_on(&mut image, &mut rng, 8, 2, 3));
  files.push(delta_on(&mut image, &mut rng, 3, 4, 4)); // shrink
  files.push(delta_on(&mut image, &mut rng, 3, 3, 6)); // overlap is allowed
  let at = image.len();
  let grow = delta_on(&mut image, &mut rng, 7, 7, 7); // regrow: pages 4..7 not resurrected
  files.push(grow);
  assert_eq!(apply(&files).unwrap(), image);
  assert!(image[at..].iter().enumerate().all(|(i, &b)| {
    let pgno = 4 + (i / 512) as u32;
    b == 0 || files[4].pages.iter().any(|p| p.pgno == pgno)
  }));
}

#[test]
fn apply_rejects_bad_chains() {
  let mut rng = Rng::new(8);
  let pages = snapshot_pages(&mut rng, 512, 2);
  let snap = decode(&enc(&Header::snapshot(512, 2, 3, 0), &pages)).unwrap();
  let mut image = vec![0; 1024];
  let d5 = delta_on(&mut image, &mut rng, 2, 5, 5);
  let d4 = delta_on(&mut image, &mut rng, 2, 4, 4);
  let d3 = delta_on(&mut image, &mut rng, 2, 2, 3);
  let msg = |files: &[LtxFile]| apply(files).unwrap_err().message().to_string();
  assert!(msg(&[]).contains("no LTX files"));
  assert!(msg(std::slice::from_ref(&d4)).contains("must be a snapshot"));
  assert!(msg(&[snap.clone(), d5.clone()]).contains("gap after TXID 3"));
  assert!(msg(&[snap.clone(), d4.clone(), d4.clone()]).contains("does not advance"));
  assert!(msg(&[snap.clone(), d3]).contains("does not advance"));
  apply(&[snap.clone(), d4.clone(), d5.clone()]).unwrap();
  let other = decode(&enc(&Header::delta(1024, 1, 4, 4, 0), &[])).unwrap();
  assert!(msg(&[snap.clone(), other]).contains("page size"));
  let mut bad_page = d4;
  bad_page.pages.push(Page {
    pgno: 9,
    data: vec![0; 512],
  });
  assert!(msg(&[snap, bad_page]).contains("page 9 is not"));
  assert!(
    is_contiguous(0, 1, 1) && is_contiguous(5, 3, 6) && is_contiguous(u64::MAX - 1, 1, u64::MAX)
  );
  assert!(
    !is_contiguous(5, 7, 9) && !is_contiguous(5, 3, 5) && !is_contiguous(u64::MAX, 1, u64::MAX)
  );
}

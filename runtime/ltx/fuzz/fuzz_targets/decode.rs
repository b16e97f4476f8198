//! Arbitrary bytes into the decoder and, when they decode, into apply and a re-encode.
//! Properties: no panic anywhere; a decoded file re-encodes to a file that decodes to the same
//! header and pages; apply never panics.

#![no_main]

use cellhost_ltx::{Encoder, LtxFile, apply, decode};
use libfuzzer_sys::fuzz_target;

/// Images above this are skipped: a valid delta may claim 2^32 pages without carrying them.
const MAX_IMAGE: u64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
  let Ok(file) = decode(data) else { return };
  check_reencode(&file);
  let h = file.header;
  if u64::from(h.commit) * u64::from(h.page_size) <= MAX_IMAGE {
    match apply(std::slice::from_ref(&file)) {
      Ok(image) => assert_eq!(
        image.len() as u64,
        u64::from(h.commit) * u64::from(h.page_size)
      ),
      Err(e) => assert!(!h.is_snapshot(), "a decoded snapshot must apply: {e}"),
    }
    // The same file twice never advances the position.
    assert!(apply(&[file.clone(), file]).is_err());
  }
});

fn check_reencode(file: &LtxFile) {
  let mut enc = Encoder::new(file.header).expect("decoded header is valid");
  for p in &file.pages {
    enc
      .add_page(p.pgno, &p.data)
      .expect("decoded pages are valid");
  }
  if !file.header.no_checksum() {
    enc.set_post_apply_checksum(file.post_apply_checksum);
  }
  let again = decode(&enc.finish().expect("decoded file re-encodes")).expect("re-encoded decodes");
  assert_eq!(again.header, file.header);
  assert_eq!(again.pages, file.pages);
  assert_eq!(again.post_apply_checksum, file.post_apply_checksum);
}

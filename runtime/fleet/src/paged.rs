//! Paged restore (`--paged-min-mb`): a chain whose database is at least
//! that large is not downloaded before the cell opens. The restore reads
//! only each object's header and page index; a page is then fetched from
//! the object holding its newest version when SQLite first reads it
//! (`cellhost_storage::paged`), and the rest is filled in the background,
//! one object at a time. The epoch opens with a marker
//! (`cellhost_logic::restore::paged`) instead of a snapshot.

use cellhost_bucket::{Bucket, ByteRange};
use cellhost_logic::restore::{Chain, LtxKey, Marker};
use cellhost_ltx::{FrameAt, Header, IndexTail};
use futures::{StreamExt, TryStreamExt};
use std::future::Future;

/// How many objects' headers and indexes are read at once.
const INDEX_FETCHES: usize = 16;

/// What a restore hands the cell: nothing, a whole image, or pages on demand.
pub enum Restored {
  Empty,
  Image(Vec<u8>),
  Paged(PagedRestore),
}

/// A cell to open over the bucket's pages.
pub struct PagedRestore {
  pub chain: std::sync::Arc<PagedChain>,
  /// The link this epoch opens with: written before the cell serves.
  pub marker: Marker,
}

/// A chain's pages, by where their newest version is.
pub struct PagedChain {
  bucket: Bucket,
  scope: String,
  keys: Vec<LtxKey>,
  handle: tokio::runtime::Handle,
  pub page_size: u32,
  pub pages: u32,
  /// For page `n`, at `n - 1`: the object (index into `keys`) and frame.
  map: Vec<Option<(usize, FrameAt)>>,
}

/// The database size the chain restores to, from its last object's header.
pub(crate) async fn size_of(bucket: &Bucket, scope: &str, chain: &Chain) -> Result<u64, String> {
  let Some(last) = chain.keys.last() else {
    return Ok(0);
  };
  let h = header(bucket, scope, last).await?;
  Ok(u64::from(h.commit) * u64::from(h.page_size))
}

async fn header(bucket: &Bucket, scope: &str, k: &LtxKey) -> Result<Header, String> {
  let key = k.object_key(scope);
  let b = (bucket
    .get_range(&key, 0..cellhost_ltx::HEADER_SIZE as u64)
    .await)
    .map_err(|e| format!("restoring {scope}: {key}: {e}"))?;
  Header::decode(&b).map_err(|e| format!("restoring {scope}: {key}: {e}"))
}

async fn index(bucket: &Bucket, scope: &str, k: &LtxKey) -> Result<Vec<FrameAt>, String> {
  let key = k.object_key(scope);
  let fail = |e: String| format!("restoring {scope}: {key}: {e}");
  let mut suffix = 64 << 10;
  loop {
    let tail =
      (bucket.get_range(&key, ByteRange::Suffix(suffix)).await).map_err(|e| fail(e.to_string()))?;
    match cellhost_ltx::index_from_tail(&tail).map_err(|e| fail(e.to_string()))? {
      IndexTail::Index(i) => return Ok(i),
      IndexTail::Needs { suffix: n } if n > suffix && tail.len() as u64 == suffix => suffix = n,
      IndexTail::Needs { .. } => return Err(fail("the page index runs past the file".into())),
    }
  }
}

/// Reads the chain's headers and page indexes.
pub(crate) async fn open(
  bucket: &Bucket,
  scope: &str,
  chain: &Chain,
) -> Result<PagedChain, String> {
  let read = |k: LtxKey| async move {
    let h = header(bucket, scope, &k).await?;
    Ok::<_, String>((h, index(bucket, scope, &k).await?))
  };
  let parts: Vec<(Header, Vec<FrameAt>)> = futures::stream::iter(chain.keys.iter().copied())
    .map(read)
    .buffered(INDEX_FETCHES)
    .try_collect()
    .await?;
  let page_size = parts.first().map_or(4096, |(h, _)| h.page_size);
  let mut map: Vec<Option<(usize, FrameAt)>> = Vec::new();
  for (i, (h, frames)) in parts.iter().enumerate() {
    if h.page_size != page_size {
      return Err(format!(
        "restoring {scope}: {} has pages of {} bytes, the chain {page_size}",
        chain.keys[i], h.page_size
      ));
    }
    // A shrink drops the pages past the new end: a regrowth is written
    // anew by a later object, never resurrected.
    map.truncate(h.commit as usize);
    map.resize(h.commit as usize, None);
    for f in frames {
      match map.get_mut(f.pgno as usize - 1) {
        Some(slot) => *slot = Some((i, *f)),
        None => {
          return Err(format!(
            "restoring {scope}: {} holds page {} past its end",
            chain.keys[i], f.pgno
          ));
        }
      }
    }
  }
  Ok(PagedChain {
    bucket: bucket.clone(),
    scope: scope.to_string(),
    keys: chain.keys.clone(),
    handle: tokio::runtime::Handle::current(),
    page_size,
    pages: map.len() as u32,
    map,
  })
}

impl PagedChain {
  /// Runs `f` on the fleet's runtime from a thread outside it.
  fn block<T: Send + 'static>(
    &self,
    f: impl Future<Output = T> + Send + 'static,
  ) -> Result<T, String> {
    futures::executor::block_on(self.handle.spawn(f)).map_err(|e| e.to_string())
  }

  /// Page `pgno` (blocking: called from the thread running SQL). A page no
  /// object holds (the lock page) is zeros.
  pub fn page(&self, pgno: u32) -> Result<Vec<u8>, String> {
    let Some(slot) = self.map.get(pgno as usize - 1) else {
      return Err(format!(
        "page {pgno} is past the database's {} pages",
        self.pages
      ));
    };
    let Some((i, f)) = *slot else {
      return Ok(vec![0; self.page_size as usize]);
    };
    let key = self.keys[i].object_key(&self.scope);
    let mut pause = 100;
    for attempt in 1.. {
      let (bucket, k) = (self.bucket.clone(), key.clone());
      let got =
        self.block(async move { bucket.get_range(&k, f.offset..f.offset + f.size).await })?;
      match got {
        Ok(frame) => {
          let page = cellhost_ltx::decode_frame(&frame, self.page_size)
            .map_err(|e| format!("{key}: {e}"))?;
          if page.pgno != pgno {
            return Err(format!(
              "{key}: the frame of page {pgno} holds page {}",
              page.pgno
            ));
          }
          return Ok(page.data);
        }
        Err(e) if attempt >= 4 => return Err(format!("{key}: {e}")),
        Err(_) => {
          std::thread::sleep(std::time::Duration::from_millis(pause));
          pause *= 3;
        }
      }
    }
    unreachable!()
  }

  /// Every page, one object at a time (blocking: the background fill).
  pub fn fill(&self, put: &mut dyn FnMut(u32, &[u8])) -> Result<(), String> {
    let zeros = vec![0; self.page_size as usize];
    for (pgno, slot) in (1..).zip(&self.map) {
      if slot.is_none() {
        put(pgno, &zeros);
      }
    }
    for (i, k) in self.keys.iter().enumerate() {
      if !self.map.iter().any(|s| s.is_some_and(|(o, _)| o == i)) {
        continue;
      }
      let (bucket, key) = (self.bucket.clone(), k.object_key(&self.scope));
      let got = self.block(async move { bucket.get(&key).await })?;
      let key = k.object_key(&self.scope);
      let (bytes, _) = got
        .map_err(|e| format!("{key}: {e}"))?
        .ok_or_else(|| format!("{key} vanished"))?;
      let file = cellhost_ltx::decode(&bytes).map_err(|e| format!("{key}: {e}"))?;
      for p in &file.pages {
        if self
          .map
          .get(p.pgno as usize - 1)
          .is_some_and(|s| s.is_some_and(|(o, _)| o == i))
        {
          put(p.pgno, &p.data);
        }
      }
    }
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use std::collections::BTreeMap;

  use cellhost_logic::restore::linked_chain;

  use super::*;

  fn page(b: u8) -> Vec<u8> {
    vec![b; 512]
  }

  /// Epoch 1: a 3-page snapshot, then page 2 changed and the database cut
  /// to 2 pages; epoch 2 paged in at TXID 2, changed page 1 and grew to 3.
  async fn bucket() -> (Bucket, Vec<LtxKey>, Vec<Marker>) {
    let b = Bucket::memory();
    let put = |epoch, txid, commit, pages: &[(u32, u8)]| {
      let b = b.clone();
      let pages: BTreeMap<u32, Vec<u8>> = pages.iter().map(|(p, v)| (*p, page(*v))).collect();
      async move {
        let k = LtxKey::l0(epoch, txid);
        let bytes = crate::encode_ltx(512, commit, &pages, txid, txid).unwrap();
        b.put(&k.object_key("C:a"), bytes).await.unwrap();
        k
      }
    };
    let keys = vec![
      put(1, 1, 3, &[(1, 1), (2, 1), (3, 1)]).await,
      put(1, 2, 2, &[(2, 2)]).await,
      put(2, 2, 3, &[(1, 3), (3, 3)]).await,
    ];
    let m = Marker {
      epoch: 2,
      from: 1,
      cut: 2,
    };
    b.put(&m.object_key("C:a"), Vec::new()).await.unwrap();
    (b, keys, vec![m])
  }

  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  async fn a_linked_chain_restores_whole_and_page_by_page_alike() {
    let (b, keys, markers) = bucket().await;
    let chain = linked_chain(&keys, &markers).unwrap();
    assert_eq!((chain.epoch, chain.txid, chain.keys.len()), (2, 2, 3));
    let image = crate::own::apply_chain(&b, "C:a", &chain.keys)
      .await
      .unwrap();
    let want: Vec<u8> = [page(3), page(2), page(3)].concat();
    assert_eq!(image, want);
    let paged = std::sync::Arc::new(open(&b, "C:a", &chain).await.unwrap());
    assert_eq!((paged.page_size, paged.pages), (512, 3));
    assert_eq!(size_of(&b, "C:a", &chain).await.unwrap(), 3 * 512);
    let p = paged.clone();
    let (pages, filled) = tokio::task::spawn_blocking(move || {
      let pages: Vec<Vec<u8>> = (1..=3).map(|n| p.page(n).unwrap()).collect();
      let mut filled = vec![Vec::new(); 3];
      p.fill(&mut |n, d| filled[n as usize - 1] = d.to_vec())
        .unwrap();
      (pages, filled)
    })
    .await
    .unwrap();
    assert_eq!(pages.concat(), want);
    assert_eq!(
      filled.concat(),
      want,
      "page 3 was cut and regrown: never the old one"
    );
    assert!(paged.page(4).is_err());
  }
}

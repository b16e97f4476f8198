//! Durable Object facets on a bucket. Each facet is a cell of its own
//! (scope `<parent scope>$<name>`, its own ownership record and LTX chain),
//! taken by whichever node runs its parent. A parent's facets are found
//! through markers under the parent's cell, `cells/<parent>/facets/<name>`
//! (the bucket lists by whole key segments, so a scope prefix cannot find
//! them): a marker is written before a facet is first taken, and deleting a
//! facet follows the markers to its children.

use crate::{ActivateError, Activation, Fleet, Upload};

fn marker_prefix(parent: &str) -> String {
  format!("cells/{parent}/facets")
}

impl Fleet {
  /// Records that `parent` has the facet `name` (an encoded name: the
  /// facet's scope is `<parent>$<name>`); idempotent.
  pub async fn note_facet(&self, parent: &str, name: &str) -> Result<(), String> {
    let (bucket, key) = (
      self.bucket.clone(),
      format!("{}/{name}", marker_prefix(parent)),
    );
    self
      .spawn(async move { bucket.put(&key, Vec::new()).await.map(|_| ()) })
      .await
      .map_err(|e| format!("recording facet {name} of {parent}: {e}"))
  }

  /// The encoded names of the facets `parent` ever recorded.
  pub fn facets_of_blocking(&self, parent: &str) -> Result<Vec<String>, String> {
    let (bucket, prefix) = (self.bucket.clone(), marker_prefix(parent));
    let listed = self
      .run_blocking(async move { bucket.list(&prefix).await })
      .map_err(|e| format!("listing the facets of {parent}: {e}"))?;
    let prefix = format!("{}/", marker_prefix(parent));
    Ok(
      listed
        .into_iter()
        .filter_map(|o| o.key.strip_prefix(&prefix).map(str::to_string))
        .filter(|n| !n.contains('/'))
        .collect(),
    )
  }

  /// Drops the marker of a deleted facet.
  pub fn forget_facet_blocking(&self, parent: &str, name: &str) -> Result<(), String> {
    let (bucket, key) = (
      self.bucket.clone(),
      format!("{}/{name}", marker_prefix(parent)),
    );
    self
      .run_blocking(async move { bucket.delete(&key).await })
      .map_err(|e| format!("forgetting facet {name} of {parent}: {e}"))
  }

  /// Takes `scope` for this node, waiting (for a caller that may block:
  /// a facet's deletion on its isolate). Commits of the cell captured here
  /// and not yet handed to a round are not waited for: only the blocked
  /// isolate could hand them over, and they belong to the object being
  /// emptied (its new epoch supersedes them).
  pub fn activate_blocking(&self, scope: String) -> Result<Activation, ActivateError> {
    futures::executor::block_on(self.activate_after(scope, false))
  }

  /// `publish` of one upload, failures joined into one message.
  pub fn publish_one_blocking(&self, upload: Upload) -> Result<(), String> {
    self.publish_blocking(vec![upload]).map_err(|failed| {
      failed
        .into_iter()
        .map(|(_, m)| m)
        .collect::<Vec<_>>()
        .join("; ")
    })
  }
}

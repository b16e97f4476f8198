//! S3, GCS, Azure (and the in-memory test store) through `object_store`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
  ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
  PutPayload, RetryConfig, UpdateVersion,
};

use crate::{BoxFuture, ByteRange, Error, ObjectInfo, Result, Store, Version, WriteOutcome};

pub(crate) struct Remote {
  /// Reads and plain writes: the client retries transient failures.
  store: Arc<dyn ObjectStore>,
  /// Conditional writes: retries off, because a retried CAS can meet its own earlier
  /// success and report a false rejection.
  cas_store: Arc<dyn ObjectStore>,
  name: String,
}

fn retries(max: usize) -> RetryConfig {
  RetryConfig {
    max_retries: max,
    // Bounded so a dead endpoint fails a diagnose in about a minute, not three.
    retry_timeout: Duration::from_secs(60),
    ..Default::default()
  }
}

fn client_options() -> ClientOptions {
  ClientOptions::new()
    .with_connect_timeout(Duration::from_secs(5))
    .with_timeout(Duration::from_secs(30))
}

impl Remote {
  pub(crate) fn memory() -> Remote {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    Remote {
      cas_store: store.clone(),
      store,
      name: "memory://".into(),
    }
  }

  pub(crate) fn open(scheme: &str, name: &str, opts: &crate::BucketOptions) -> Result<Remote> {
    let bad = |e: object_store::Error| Error::InvalidUrl(format!("{scheme}://{name}: {e}"));
    let mut desc = format!("{scheme}://{name}");
    let (store, cas_store): (Arc<dyn ObjectStore>, Arc<dyn ObjectStore>) = match scheme {
      "s3" => {
        use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
        let mut b = AmazonS3Builder::from_env()
          .with_bucket_name(name)
          .with_client_options(client_options())
          // The default since 0.12, set anyway: without it Create/Update are refused.
          .with_conditional_put(S3ConditionalPut::ETagMatch);
        if let Some(region) = &opts.region {
          b = b.with_region(region);
        }
        if let Some(ep) = &opts.endpoint {
          b = b
            .with_endpoint(ep)
            .with_allow_http(ep.starts_with("http://"));
          desc = format!("{desc} (endpoint {ep})");
        }
        for (k, v) in &opts.config {
          let key: AmazonS3ConfigKey = k.parse().map_err(bad)?;
          b = b.with_config(key, v);
        }
        (
          Arc::new(b.clone().with_retry(retries(5)).build().map_err(bad)?),
          Arc::new(b.with_retry(retries(0)).build().map_err(bad)?),
        )
      }
      "gs" => {
        use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
        if opts.endpoint.is_some() {
          return Err(Error::InvalidUrl(
            "--endpoint applies to s3:// buckets only".into(),
          ));
        }
        let mut b = GoogleCloudStorageBuilder::from_env()
          .with_bucket_name(name)
          .with_client_options(client_options());
        for (k, v) in &opts.config {
          let key: GoogleConfigKey = k.parse().map_err(bad)?;
          b = b.with_config(key, v);
        }
        (
          Arc::new(b.clone().with_retry(retries(5)).build().map_err(bad)?),
          Arc::new(b.with_retry(retries(0)).build().map_err(bad)?),
        )
      }
      "az" => {
        use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
        let mut b = MicrosoftAzureBuilder::from_env()
          .with_container_name(name)
          .with_client_options(client_options());
        if let Some(ep) = &opts.endpoint {
          b = b
            .with_endpoint(ep.clone())
            .with_allow_http(ep.starts_with("http://"));
          desc = format!("{desc} (endpoint {ep})");
        }
        for (k, v) in &opts.config {
          let key: AzureConfigKey = k.parse().map_err(bad)?;
          b = b.with_config(key, v);
        }
        (
          Arc::new(b.clone().with_retry(retries(5)).build().map_err(bad)?),
          Arc::new(b.with_retry(retries(0)).build().map_err(bad)?),
        )
      }
      other => {
        return Err(Error::InvalidUrl(format!(
          "{other}://: expected file://, s3://, gs:// or az://"
        )));
      }
    };
    Ok(Remote {
      store,
      cas_store,
      name: desc,
    })
  }

  async fn put_mode(&self, key: &str, data: Bytes, mode: PutMode) -> WriteOutcome {
    let path = match Path::parse(key) {
      Ok(p) => p,
      Err(e) => return WriteOutcome::Unsupported(e.to_string()),
    };
    let opts = PutOptions {
      mode,
      ..Default::default()
    };
    match self
      .cas_store
      .put_opts(&path, PutPayload::from(data), opts)
      .await
    {
      Ok(r) => WriteOutcome::Applied(Version {
        e_tag: r.e_tag,
        version: r.version,
      }),
      Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
        WriteOutcome::Rejected
      }
      Err(
        e @ (object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. }),
      ) => WriteOutcome::Unsupported(e.to_string()),
      Err(e) if never_sent(&e) => WriteOutcome::Failed(e.to_string()),
      Err(e) => WriteOutcome::Ambiguous(e.to_string()),
    }
  }
}

/// Whether a failed write provably left the object alone. Conservative: the store refused
/// the credentials (401/403, answered before anything is applied), the path was refused
/// before a request was built, or no connection was ever made. A timeout, a reset, a 5xx
/// (even for a conditional PUT) may all follow an applied write, so they stay ambiguous.
fn never_sent(e: &object_store::Error) -> bool {
  use object_store::client::{HttpError, HttpErrorKind};
  match e {
    object_store::Error::PermissionDenied { .. }
    | object_store::Error::Unauthenticated { .. }
    | object_store::Error::InvalidPath { .. } => true,
    e => {
      let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
      while let Some(c) = cause {
        if let Some(h) = c.downcast_ref::<HttpError>() {
          // The request itself failed to connect; a later step cannot have been reached.
          return h.kind() == HttpErrorKind::Connect;
        }
        cause = c.source();
      }
      false
    }
  }
}

fn path(key: &str) -> Result<Path> {
  Path::parse(key).map_err(|e| Error::InvalidKey(e.to_string()))
}

/// A listing's prefix: none for the whole store.
fn prefix_path(prefix: &str) -> Result<Option<Path>> {
  (!prefix.is_empty()).then(|| path(prefix)).transpose()
}

fn store_err(e: object_store::Error) -> Error {
  match e {
    object_store::Error::NotFound { path, .. } => Error::NotFound(path),
    e => Error::Store(e.to_string()),
  }
}

/// object_store reports range problems only as text (its `GetResultError` is private), so
/// the messages of 0.14 are matched here; `tests/moto.rs` and `tests/local.rs` pin them.
fn range_err(range: &GetRange, e: object_store::Error) -> Error {
  if let object_store::Error::NotFound { path, .. } = e {
    return Error::NotFound(path);
  }
  let msg = e.to_string();
  let has = |needle: &str| msg.contains(needle);
  if has("416") || has("Wanted range starting at") || has("Range started at") {
    Error::RangeNotSatisfiable(format!("{range}: {msg}"))
  } else if has("non-partial response when range requested")
    || has("Content-Range header not present")
    || has("CONTENT_RANGE")
    || (has("Requested ") && has(", got "))
  {
    Error::RangeIgnored(format!("{range}: {msg}"))
  } else {
    Error::Store(msg)
  }
}

impl Store for Remote {
  fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<(Bytes, Version)>>> {
    Box::pin(async move {
      let r = match self
        .store
        .get_opts(&path(key)?, GetOptions::default())
        .await
      {
        Ok(r) => r,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(store_err(e)),
      };
      let v = Version {
        e_tag: r.meta.e_tag.clone(),
        version: r.meta.version.clone(),
      };
      Ok(Some((r.bytes().await.map_err(store_err)?, v)))
    })
  }

  fn get_range<'a>(&'a self, key: &'a str, range: ByteRange) -> BoxFuture<'a, Result<Bytes>> {
    Box::pin(async move {
      let range = match range {
        ByteRange::Bounded(r) => GetRange::Bounded(r),
        ByteRange::From(n) => GetRange::Offset(n),
        ByteRange::Suffix(n) => GetRange::Suffix(n),
      };
      let opts = GetOptions {
        range: Some(range.clone()),
        ..Default::default()
      };
      let r = self
        .store
        .get_opts(&path(key)?, opts)
        .await
        .map_err(|e| range_err(&range, e))?;
      r.bytes().await.map_err(|e| range_err(&range, e))
    })
  }

  fn put<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, Result<Version>> {
    Box::pin(async move {
      let r = self
        .store
        .put(&path(key)?, PutPayload::from(data))
        .await
        .map_err(store_err)?;
      Ok(Version {
        e_tag: r.e_tag,
        version: r.version,
      })
    })
  }

  fn create<'a>(&'a self, key: &'a str, data: Bytes) -> BoxFuture<'a, WriteOutcome> {
    Box::pin(self.put_mode(key, data, PutMode::Create))
  }

  fn cas<'a>(
    &'a self,
    key: &'a str,
    data: Bytes,
    expected: &'a Version,
  ) -> BoxFuture<'a, WriteOutcome> {
    let v = UpdateVersion {
      e_tag: expected.e_tag.clone(),
      version: expected.version.clone(),
    };
    Box::pin(self.put_mode(key, data, PutMode::Update(v)))
  }

  fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>> {
    Box::pin(async move {
      match self.store.delete(&path(key)?).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(store_err(e)),
      }
    })
  }

  fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<ObjectInfo>>> {
    Box::pin(async move {
      let p = prefix_path(prefix)?;
      let metas: Vec<_> = self
        .store
        .list(p.as_ref())
        .try_collect()
        .await
        .map_err(store_err)?;
      Ok(
        metas
          .into_iter()
          .map(|m| ObjectInfo {
            key: m.location.to_string(),
            size: m.size,
            version: Version {
              e_tag: m.e_tag,
              version: m.version,
            },
          })
          .collect(),
      )
    })
  }

  fn list_keys_after<'a>(
    &'a self,
    prefix: &'a str,
    after: &'a str,
  ) -> BoxFuture<'a, Result<Vec<String>>> {
    Box::pin(async move {
      let p = prefix_path(prefix)?;
      let metas: Vec<_> = (self.store)
        .list_with_offset(p.as_ref(), &path(after)?)
        .try_collect()
        .await
        .map_err(store_err)?;
      Ok(metas.into_iter().map(|m| m.location.to_string()).collect())
    })
  }

  fn list_dirs<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
    Box::pin(async move {
      let p = prefix_path(prefix)?;
      let r = (self.store.list_with_delimiter(p.as_ref()).await).map_err(store_err)?;
      Ok(
        (r.common_prefixes.iter())
          .filter_map(|d| d.filename().map(str::to_string))
          .collect(),
      )
    })
  }

  fn describe(&self) -> String {
    self.name.clone()
  }
}

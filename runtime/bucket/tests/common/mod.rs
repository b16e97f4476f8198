//! Helpers shared by the bucket tests: scratch directories and a moto S3 server.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
  pub fn new(tag: &str) -> TempDir {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir =
      std::env::temp_dir().join(format!("cellhost-bucket-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
  }

  pub fn url(&self) -> String {
    format!("file://{}", self.0.display())
  }
}

impl Drop for TempDir {
  fn drop(&mut self) {
    let _ = std::fs::remove_dir_all(&self.0);
  }
}

/// A `moto_server` on a free loopback port with one bucket created; killed on drop.
pub struct Moto {
  child: Child,
  pub port: u16,
}

pub const MOTO_BUCKET: &str = "cellhost-test";

impl Moto {
  /// Starts moto; panics (fails the test) with an install hint when it is missing.
  pub fn start() -> Moto {
    let port = TcpListener::bind("127.0.0.1:0")
      .unwrap()
      .local_addr()
      .unwrap()
      .port();
    let child = Command::new("moto_server")
      .args(["-H", "127.0.0.1", "-p", &port.to_string()])
      .env_remove("AWS_CA_BUNDLE")
      .stdout(Stdio::null())
      .stderr(Stdio::null())
      .spawn()
      .unwrap_or_else(|e| {
        panic!(
          "moto_server could not start ({e}); the S3 tests need it: pip install \"moto[server]\""
        )
      });
    let moto = Moto { child, port };
    let end = Instant::now() + Duration::from_secs(30);
    loop {
      // moto accepts an unsigned bucket PUT; that is all we need unsigned.
      if let Ok(status) = moto.raw("PUT", &format!("/{MOTO_BUCKET}")) {
        assert_eq!(status, 200, "moto: create bucket");
        return moto;
      }
      assert!(
        Instant::now() < end,
        "moto_server did not answer on port {port} within 30 s"
      );
      std::thread::sleep(Duration::from_millis(100));
    }
  }

  pub fn endpoint(&self) -> String {
    format!("http://127.0.0.1:{}", self.port)
  }

  /// What a `cellhost` process needs to use this server as its bucket:
  /// the bucket URL, the flags (endpoint, region) and the environment
  /// (dummy keys).
  pub fn cellhost_args(&self) -> (String, Vec<String>, Vec<(String, String)>) {
    (
      format!("s3://{MOTO_BUCKET}"),
      vec![
        "--endpoint".into(),
        self.endpoint(),
        "--region".into(),
        "us-east-1".into(),
      ],
      vec![
        ("AWS_ACCESS_KEY_ID".into(), "testing".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "testing".into()),
      ],
    )
  }

  /// Options for `Bucket::open("s3://…")` against this server, with dummy keys.
  pub fn options(&self) -> cellhost_bucket::BucketOptions {
    cellhost_bucket::BucketOptions {
      endpoint: Some(self.endpoint()),
      region: Some("us-east-1".into()),
      config: vec![
        ("aws_access_key_id".into(), "testing".into()),
        ("aws_secret_access_key".into(), "testing".into()),
      ],
    }
  }

  fn raw(&self, method: &str, path: &str) -> std::io::Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
      s,
      "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      self.port
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    resp
      .split(' ')
      .nth(1)
      .and_then(|c| c.parse().ok())
      .ok_or_else(|| std::io::Error::other(format!("bad response {resp:?}")))
  }
}

impl Drop for Moto {
  fn drop(&mut self) {
    let _ = self.child.kill();
    let _ = self.child.wait();
  }
}

/// The keys `list` returns under `prefix` (reading each object's version,
/// unlike `list_keys`).
pub async fn listed(b: &cellhost_bucket::Bucket, prefix: &str) -> Vec<String> {
  b.list(prefix)
    .await
    .unwrap()
    .into_iter()
    .map(|o| o.key)
    .collect()
}

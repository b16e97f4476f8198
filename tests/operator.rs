//! The operator page on a fleet node's internal listener, in headless
//! Chromium (Debian's `chromium`): two `cellhost node`s serving a deployed
//! version; the page of node a shows both nodes live, the deployment, the
//! cell with its owner and epoch, and a's events; a screenshot is taken.
//! The JSON API gives the same data; neither answers without the fleet
//! secret.

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

const WORKER: &str = r#"
import { DurableObject } from "cloudflare:workers";
export class Obj extends DurableObject {
  bump() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS c (n INTEGER)");
    this.ctx.storage.sql.exec("INSERT INTO c VALUES (1)");
    return this.ctx.storage.sql.exec("SELECT count(*) AS n FROM c").one().n;
  }
}
export default { async fetch(req, env) { return new Response(String(await env.OBJ.getByName("x").bump())); } };
"#;

fn internal(ch: &Cellhost) -> SocketAddr {
  assert!(ch.wait_log("forwarded calls are taken on ", Duration::from_secs(5)));
  let log = ch.log();
  let at =
    log.find("forwarded calls are taken on ").unwrap() + "forwarded calls are taken on ".len();
  log[at..]
    .split_whitespace()
    .next()
    .unwrap()
    .parse()
    .unwrap()
}

fn chromium() -> Command {
  let bin = ["chromium", "chromium-browser"]
    .into_iter()
    .find(|b| {
      Command::new(b)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    })
    .expect(
      "headless Chromium is needed for this test: apt-get install chromium (.ci/run installs it)",
    );
  let mut c = Command::new(bin);
  c.args([
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--window-size=1400,900",
  ]);
  c
}

#[test]
fn the_operator_page_shows_the_fleet_in_a_browser() {
  let dir = std::env::temp_dir().join(format!("cellhost-operator-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&dir);
  std::fs::create_dir_all(dir.join("bucket")).unwrap();
  let bucket = format!("file://{}", dir.join("bucket").display());
  let opts = cellhost_bucket::BucketOptions::default();
  page(&dir, &bucket, &opts, &[], &[]);
}

#[test]
fn the_operator_page_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let dir = std::env::temp_dir().join(format!("cellhost-operator-s3-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&dir);
  std::fs::create_dir_all(&dir).unwrap();
  let bucket = format!("s3://{}", bucket_common::MOTO_BUCKET);
  let endpoint = moto.endpoint();
  let extra = ["--endpoint", endpoint.as_str(), "--region", "us-east-1"];
  let env = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
  ];
  page(&dir, &bucket, &moto.options(), &extra, &env);
}

/// fleet/secret.json's secret, read from the bucket as a node reads it.
fn fleet_secret(bucket: &str, opts: &cellhost_bucket::BucketOptions) -> String {
  let b = cellhost_bucket::Bucket::open(bucket, opts).unwrap();
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let (bytes, _) = rt.block_on(b.get("fleet/secret.json")).unwrap().unwrap();
  let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
  v["secret"].as_str().unwrap().to_string()
}

/// The page's checks on any bucket.
fn page(
  dir: &Path,
  bucket: &str,
  opts: &cellhost_bucket::BucketOptions,
  extra: &[&str],
  env: &[(&str, &str)],
) {
  let tag = dir.file_name().unwrap().to_string_lossy().into_owned();
  let src = project(&tag, WORKER, OBJ_BINDING);
  let out = Command::new(cellhost_bin())
    .args([
      "deploy",
      src.to_str().unwrap(),
      "--bucket",
      bucket,
      "--message",
      "page test",
      "--json",
    ])
    .args(extra)
    .envs(env.iter().copied())
    .output()
    .unwrap();
  assert!(
    out.status.success(),
    "{}",
    String::from_utf8_lossy(&out.stderr)
  );
  let deployed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
  let version = deployed["version"].as_str().unwrap().to_string();
  let start = |name: &str| {
    let data: PathBuf = dir.join(format!("data-{name}"));
    let mut args = vec![
      "node",
      "--bucket",
      bucket,
      "--node",
      name,
      "--data",
      data.to_str().unwrap(),
      "--isolates",
      "1",
    ];
    args.extend(extra);
    Cellhost::try_start_cmd(&args, env).unwrap()
  };
  let a = start("a");
  let b = start("b");
  assert_eq!(get(a.addr, "/").text(), "1");
  assert_eq!(get(b.addr, "/").text(), "2");
  let page = internal(&a);
  let secret = fleet_secret(bucket, opts);

  // Without the secret: nothing.
  let r = request(page, "GET", "/_cellhost/api/state", &[], b"").unwrap();
  assert_eq!(r.status, 401);
  // The JSON, once both nodes reported themselves (every 2 s).
  let end = Instant::now() + Duration::from_secs(10);
  let state = loop {
    let r = request(
      page,
      "GET",
      "/_cellhost/api/state",
      &[("x-cellhost-fleet-secret", &secret)],
      b"",
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
    let reported = v["nodes"]
      .as_array()
      .unwrap()
      .iter()
      .filter(|n| n["version"] == version.as_str())
      .count();
    if reported == 2 {
      break v;
    }
    assert!(Instant::now() < end, "{v:#}");
    std::thread::sleep(Duration::from_millis(200));
  };
  assert_eq!(state["deployment"]["version"], version.as_str());
  assert_eq!(state["deployment"]["message"], "page test");
  let cells = state["cells"].as_array().unwrap();
  assert_eq!(cells.len(), 1, "{state:#}");
  assert_eq!(
    (
      cells[0]["class"].as_str(),
      cells[0]["owner"].as_str(),
      cells[0]["epoch"].as_u64()
    ),
    (Some("Obj"), Some("a"), Some(1))
  );
  assert!(cells[0]["last_txid"].as_u64().unwrap() >= 2, "{state:#}");
  assert!(cells[0]["wal_bytes"].as_u64().unwrap() > 0, "{state:#}");
  assert_eq!(state["events"][0]["event"], "cell.acquired");

  // The page, in Chromium: the DOM after load, and a screenshot.
  let url = format!("http://{page}/_cellhost/?key={secret}");
  let dom = chromium().args(["--dump-dom", &url]).output().unwrap();
  let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
  assert!(dom.contains(r#"<code id="this-node">a</code>"#), "{dom}");
  assert!(dom.contains(&version), "{dom}");
  let rows = |table: &str| -> Vec<String> {
    let t = &dom[dom.find(&format!("<table id=\"{table}\">")).unwrap()..];
    let t = &t[..t.find("</table>").unwrap()];
    t.split("<tr>").skip(2).map(str::to_string).collect()
  };
  let nodes = rows("nodes");
  assert_eq!(nodes.len(), 2, "{dom}");
  for (row, name) in nodes.iter().zip(["a", "b"]) {
    assert!(
      row.contains(&format!(r#"<td data-col="node">{name}</td>"#)),
      "{row}"
    );
    assert!(row.contains(r#"<td data-col="status">live</td>"#), "{row}");
  }
  let cells = rows("cells");
  assert_eq!(cells.len(), 1, "{dom}");
  assert!(
    cells[0].contains(r#"<td data-col="class">Obj</td>"#)
      && cells[0].contains(r#"<td data-col="owner">a</td>"#),
    "{}",
    cells[0]
  );
  assert!(rows("events")[0].contains("cell.acquired"), "{dom}");
  // Nobody fenced: the fleet's fence table is there, empty.
  assert!(rows("fences")[0].contains("none"), "{dom}");
  let shot = dir.join("operator.png");
  let out = chromium()
    .arg(format!("--screenshot={}", shot.display()))
    .arg(&url)
    .output()
    .unwrap();
  assert!(
    out.status.success(),
    "{}",
    String::from_utf8_lossy(&out.stderr)
  );
  let png = std::fs::read(&shot).unwrap();
  assert!(
    png.starts_with(b"\x89PNG") && png.len() > 10_000,
    "{} bytes",
    png.len()
  );
  eprintln!("screenshot: {}", shot.display());
}

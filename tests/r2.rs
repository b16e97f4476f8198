//! R2 bindings beyond what `tests/bindings/r2_*` compare with wrangler dev:
//! acknowledged writes survive SIGKILL, a binding pointed at an S3 bucket
//! (moto) keeps its objects there, in bucket mode the fleet's nodes share
//! one R2 bucket, and bad R2 settings stop the start by name.

mod support;

#[path = "../runtime/bucket/tests/common/mod.rs"]
mod bucket_common;

use support::*;

const WORKER: &str = r#"export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const k = u.searchParams.get("k");
    switch (u.pathname) {
      case "/put": {
        const o = await env.B.put(k, await req.text(), { customMetadata: { k }, httpMetadata: { contentType: "text/x-test" } });
        return new Response(o.etag);
      }
      case "/get": {
        const o = await env.B.get(k);
        return o === null ? new Response("missing", { status: 404 }) : new Response(`${await o.text()}|${o.customMetadata.k}|${o.httpMetadata.contentType}`);
      }
      case "/delete":
        await env.B.delete(k);
        return new Response("ok");
      case "/create-if-absent": {
        const o = await env.B.put(k, "first", { onlyIf: { etagDoesNotMatch: "*" } });
        return new Response(o === null ? "exists" : "created");
      }
      case "/multipart": {
        const up = await env.B.createMultipartUpload(k);
        const a = await up.uploadPart(1, new Uint8Array(5 * 1024 * 1024).fill(97));
        const b = await up.uploadPart(2, "tail");
        const o = await up.complete([a, b]);
        return new Response(`${o.size} ${o.etag.endsWith("-2")}`);
      }
      case "/count": {
        let n = 0, cursor;
        do {
          const r = await env.B.list({ cursor, prefix: u.searchParams.get("prefix") ?? "" });
          n += r.objects.length;
          cursor = r.truncated ? r.cursor : undefined;
        } while (cursor);
        return new Response(String(n));
      }
    }
    return new Response("no route", { status: 404 });
  },
};"#;

const BINDING: &str = "[[r2_buckets]]\nbinding = \"B\"\nbucket_name = \"objects\"\n";

fn put(ch: &Cellhost, k: &str, v: &str) {
  let r = request(ch.addr, "PUT", &format!("/put?k={k}"), &[], v.as_bytes()).unwrap();
  assert_eq!(r.status, 200, "{}\n{}", r.text(), ch.log());
}

/// Every put acknowledged before a SIGKILL is there after the restart, with
/// its metadata; a completed multipart upload too; a delete stays deleted.
#[test]
fn r2_writes_survive_sigkill() {
  let dir = project("r2-kill", WORKER, BINDING);
  let data = dir.join(".data");
  let args = ["--data", data.to_str().unwrap()];
  let mut ch = Cellhost::start(&dir, &args);
  for i in 0..150 {
    put(&ch, &format!("dir/key{i}"), &format!("value {i}"));
  }
  assert_eq!(get(ch.addr, "/multipart?k=big").text(), "5242884 true");
  request(ch.addr, "GET", "/delete?k=dir/key7", &[], b"").unwrap();
  ch.child.kill().unwrap();
  ch.child.wait().unwrap();

  let ch = Cellhost::start(&dir, &args);
  for i in 0..150 {
    let r = get(ch.addr, &format!("/get?k=dir/key{i}"));
    if i == 7 {
      assert_eq!(r.status, 404);
    } else {
      assert_eq!(r.text(), format!("value {i}|dir/key{i}|text/x-test"));
    }
  }
  assert_eq!(get(ch.addr, "/count?prefix=dir/").text(), "149");
  assert_eq!(get(ch.addr, "/count").text(), "150");
  // Stored under the data directory, as the README says.
  assert!(data.join("r2/objects/o").is_dir());
}

/// `--r2 B=s3://…` keeps the objects in that bucket: another data
/// directory sees them, and a conditional create is decided by the store.
#[test]
fn r2_on_s3_through_moto() {
  let moto = bucket_common::Moto::start();
  let endpoint = moto.endpoint();
  let url = format!("B=s3://{}/r2-test", bucket_common::MOTO_BUCKET);
  let env = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
  ];
  let dir = project("r2-s3", WORKER, BINDING);
  let start = |data: &str| {
    let data = dir.join(data);
    let args = [
      "--data",
      data.to_str().unwrap(),
      "--r2",
      &url,
      "--endpoint",
      &endpoint,
      "--region",
      "us-east-1",
    ];
    Cellhost::try_start_env(&dir, &args, &env).unwrap()
  };
  let ch = start("data-1");
  for i in 0..20 {
    put(&ch, &format!("k{i}"), &format!("v{i}"));
  }
  assert_eq!(get(ch.addr, "/create-if-absent?k=once").text(), "created");
  assert_eq!(get(ch.addr, "/create-if-absent?k=once").text(), "exists");
  assert_eq!(get(ch.addr, "/multipart?k=big").text(), "5242884 true");
  drop(ch);
  let ch = start("data-2");
  assert_eq!(get(ch.addr, "/get?k=k13").text(), "v13|k13|text/x-test");
  assert_eq!(get(ch.addr, "/count").text(), "22");
  assert_eq!(get(ch.addr, "/create-if-absent?k=once").text(), "exists");
}

/// In bucket mode an R2 binding lives in the fleet's bucket (under
/// `r2/<bucket_name>/`): what one node writes, another reads at once.
#[test]
fn r2_in_bucket_mode_is_shared_by_the_fleet() {
  let dir = project("r2-fleet", WORKER, BINDING);
  let bucket = dir.join("bucket");
  std::fs::create_dir_all(&bucket).unwrap();
  let url = format!("file://{}", bucket.display());
  let node = |name: &str| {
    let data = dir.join(format!("data-{name}"));
    Cellhost::start(
      &dir,
      &[
        "--data",
        data.to_str().unwrap(),
        "--bucket",
        &url,
        "--node",
        name,
      ],
    )
  };
  let a = node("a");
  let b = node("b");
  put(&a, "shared", "from a");
  assert_eq!(
    get(b.addr, "/get?k=shared").text(),
    "from a|shared|text/x-test"
  );
  assert_eq!(get(b.addr, "/create-if-absent?k=c").text(), "created");
  assert_eq!(get(a.addr, "/create-if-absent?k=c").text(), "exists");
  assert!(bucket.join("r2/objects/o").is_dir());
}

#[test]
fn bad_r2_settings_stop_the_start() {
  let dir = project(
    "r2-remote",
    WORKER,
    "[[r2_buckets]]\nbinding = \"B\"\nbucket_name = \"objects\"\nremote = true\n",
  );
  let (code, out) = cellhost_fails(&dir);
  assert_ne!(code, Some(0));
  assert!(out.contains("r2_buckets (B): `remote = true`"), "{out}");

  let dir = project(
    "r2-unknown-key",
    WORKER,
    "[[r2_buckets]]\nbinding = \"B\"\nbucket = \"objects\"\n",
  );
  let (code, out) = cellhost_fails(&dir);
  assert_ne!(code, Some(0));
  assert!(out.contains("bucket"), "{out}");

  let dir = project("r2-flag", WORKER, BINDING);
  let out = std::process::Command::new(cellhost_bin())
    .args([
      "run",
      dir.to_str().unwrap(),
      "--listen",
      "127.0.0.1:0",
      "--r2",
      "NOPE=file:///tmp",
    ])
    .arg("--data")
    .arg(dir.join(".data"))
    .output()
    .unwrap();
  let text = String::from_utf8_lossy(&out.stderr);
  assert!(!out.status.success());
  assert!(text.contains("no R2 binding named NOPE"), "{text}");
}

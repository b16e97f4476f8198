//! Raw bytes into hyper's HTTP/1 server, configured as cellhost's (runtime/server), with a
//! service that builds the Worker's URL the way the server does (runtime/server/src/head.rs).
//! Properties: no panic in hyper or in head.rs; a URL that is built parses (WHATWG) with the
//! request target's own path and query, no user info, no fragment and a host: the Host
//! header cannot move the path. Requests without a Host header are never refused.

#![no_main]

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "../../runtime/server/src/head.rs"]
#[allow(dead_code)]
mod head;

thread_local! {
  static RT: tokio::runtime::Runtime =
    tokio::runtime::Builder::new_current_thread().build().unwrap();
}

fuzz_target!(|data: &[u8]| {
  RT.with(|rt| rt.block_on(serve(data)));
});

async fn serve(data: &[u8]) {
  let (client, server) = tokio::io::duplex(64 << 10);
  let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
    check(&req);
    Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
  });
  let conn = hyper::server::conn::http1::Builder::new()
    .keep_alive(true)
    .max_buf_size(128 << 10)
    .serve_connection(TokioIo::new(server), svc)
    .with_upgrades();
  let (mut rx, mut tx) = tokio::io::split(client);
  let write = async move {
    let _ = tx.write_all(data).await;
    let _ = tx.shutdown().await;
  };
  let read = async move {
    let mut out = Vec::new();
    let _ = rx.read_to_end(&mut out).await;
  };
  let _ = tokio::join!(conn, write, read);
}

fn check(req: &Request<Incoming>) {
  let Some(u) = head::request_url(req.uri(), req.headers()) else {
    assert!(
      req.headers().contains_key(http::header::HOST),
      "refused without a Host header"
    );
    return;
  };
  let parsed = url::Url::parse(&u).expect("a built URL parses");
  let path = match req.uri().path_and_query().map(|p| p.as_str()) {
    Some(p) if p.starts_with('/') => p,
    _ => "/",
  };
  let alone = url::Url::parse(&format!("http://localhost{path}")).unwrap();
  assert_eq!(parsed.path(), alone.path(), "{u}");
  assert_eq!(parsed.query(), alone.query(), "{u}");
  assert_eq!(parsed.username(), "");
  assert_eq!(parsed.password(), None);
  assert_eq!(parsed.fragment(), None);
  assert!(parsed.host().is_some());
}

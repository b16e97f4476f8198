//! `cloudflare:sockets`: `connect()` opens a TCP connection the egress
//! policy allows and hands it to JavaScript as deno_net's TCP stream
//! resource, so reads, writes, half-close and `startTls()` (deno_net's
//! `op_tls_start`, with its root store) are Deno's own.

use std::cell::RefCell;
use std::rc::Rc;

use deno_core::{OpState, ResourceId, op2};
use deno_error::JsErrorBox;
use deno_net::io::TcpStreamResource;

deno_core::extension!(
  cellhost_sockets,
  deps = [deno_web, deno_net],
  ops = [op_socket_connect],
  esm = [dir "js", "sockets.js"],
);

/// Connects to `host:port` (resolved, and checked, under the egress
/// policy); answers the stream's resource.
#[op2]
#[smi]
async fn op_socket_connect(
  state: Rc<RefCell<OpState>>,
  #[string] host: String,
  #[smi] port: u16,
) -> Result<ResourceId, JsErrorBox> {
  // workerd's wording for any failure to connect (refused, unreachable,
  // unresolvable); the log keeps the cause.
  let failed = |cause: String| {
    tracing_cause(&host, port, &cause);
    JsErrorBox::generic("proxy request failed, cannot connect to the specified address")
  };
  let addrs = match cellhost_egress::resolve(&host, port).await {
    Ok(a) => a,
    Err(e) if e.contains("egress policy") => return Err(JsErrorBox::generic(e)),
    Err(e) => return Err(failed(e)),
  };
  let stream = tokio::net::TcpStream::connect(&addrs[..])
    .await
    .map_err(|e| failed(e.to_string()))?;
  let _ = stream.set_nodelay(true);
  Ok(
    state
      .borrow_mut()
      .resource_table
      .add(TcpStreamResource::new(stream.into_split())),
  )
}

fn tracing_cause(host: &str, port: u16, cause: &str) {
  tracing::info!(target: "worker", "connect({host}:{port}) failed: {cause}");
}

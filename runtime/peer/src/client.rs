//! HTTP/2 connections to other nodes' internal listeners, one per address,
//! opened on first use and kept (HTTP/2 multiplexes every call over it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use cellhost_ext::Body;
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const PING_INTERVAL: Duration = Duration::from_secs(1);
const PING_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Default)]
pub struct Client {
  conns: Mutex<HashMap<String, SendRequest<Body>>>,
}

impl Client {
  async fn conn(&self, address: &str) -> Result<SendRequest<Body>, String> {
    if let Some(c) = self.conns.lock().unwrap().get(address)
      && !c.is_closed()
    {
      return Ok(c.clone());
    }
    let connect = tokio::net::TcpStream::connect(address);
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
      .await
      .map_err(|_| format!("connecting to {address} timed out"))?
      .map_err(|e| format!("connecting to {address}: {e}"))?;
    let _ = stream.set_nodelay(true);
    // Pings find an owner that stopped (SIGSTOP, a frozen VM, a cut
    // link): its calls then fail instead of hanging; a live owner answers
    // them from its connection task even while a call runs for minutes.
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
      .timer(TokioTimer::new())
      .keep_alive_interval(PING_INTERVAL)
      .keep_alive_timeout(PING_TIMEOUT)
      .keep_alive_while_idle(true)
      .handshake(TokioIo::new(stream))
      .await
      .map_err(|e| format!("HTTP/2 handshake with {address}: {e}"))?;
    tokio::spawn(async move {
      let _ = conn.await;
    });
    self
      .conns
      .lock()
      .unwrap()
      .insert(address.to_string(), send.clone());
    Ok(send)
  }

  /// Sends `req` to the node at `address`. An error means the call may or
  /// may not have reached it.
  pub async fn send(
    &self,
    address: &str,
    req: Request<Body>,
  ) -> Result<Response<hyper::body::Incoming>, String> {
    let mut c = self.conn(address).await?;
    c.ready()
      .await
      .map_err(|e| format!("the connection to {address} failed: {e}"))?;
    match c.send_request(req).await {
      Ok(r) => Ok(r),
      Err(e) => {
        self.conns.lock().unwrap().remove(address);
        Err(format!("the connection to {address} failed: {e}"))
      }
    }
  }
}

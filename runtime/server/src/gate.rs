//! The answer gate at the socket. The service asks the gate when an answer
//! is handed to hyper, but hyper writes it later, from another poll: a
//! process frozen between the two (SIGSTOP, a long page-fault stall) would
//! write an acknowledgement past its fence deadline once it runs again. The
//! fault lab saw that once: an answer left 1.87 s past the deadline, 1.5 ms
//! after the process resumed. So every write to a gated connection asks
//! again, just before the bytes go to the kernel; once the gate is shut the
//! connection fails instead of writing. What is left is the instant
//! between that check and the write syscall, which no user-space check
//! closes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::AnswerGate;

/// A connection whose writes pass the gate (none: every write passes).
pub(crate) struct GatedIo<T> {
  inner: T,
  gate: Option<AnswerGate>,
  refusing: Refusing,
}

/// Set by the service once it answers the refusal instead of the Worker's
/// answer: from then on the connection writes only refusals, which may
/// leave past the deadline.
#[derive(Clone, Default)]
pub(crate) struct Refusing(Arc<AtomicBool>);

impl Refusing {
  pub(crate) fn set(&self) {
    self.0.store(true, Ordering::SeqCst);
  }
}

impl<T> GatedIo<T> {
  pub(crate) fn new(inner: T, gate: Option<AnswerGate>, refusing: Refusing) -> Self {
    GatedIo {
      inner,
      gate,
      refusing,
    }
  }

  fn shut(&self) -> Option<io::Error> {
    let may = self.gate.as_ref()?;
    (!may() && !self.refusing.0.load(Ordering::SeqCst))
      .then(|| io::Error::other("this node's lease could have lapsed: answer withheld"))
  }
}

impl<T: AsyncRead + Unpin> AsyncRead for GatedIo<T> {
  fn poll_read(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
  ) -> Poll<io::Result<()>> {
    Pin::new(&mut self.inner).poll_read(cx, buf)
  }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for GatedIo<T> {
  fn poll_write(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    buf: &[u8],
  ) -> Poll<io::Result<usize>> {
    if let Some(e) = self.shut() {
      return Poll::Ready(Err(e));
    }
    Pin::new(&mut self.inner).poll_write(cx, buf)
  }

  fn poll_write_vectored(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
  ) -> Poll<io::Result<usize>> {
    if let Some(e) = self.shut() {
      return Poll::Ready(Err(e));
    }
    Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
  }

  fn is_write_vectored(&self) -> bool {
    self.inner.is_write_vectored()
  }

  fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(&mut self.inner).poll_flush(cx)
  }

  fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(&mut self.inner).poll_shutdown(cx)
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use tokio::io::{AsyncReadExt, AsyncWriteExt};

  #[tokio::test]
  async fn writes_fail_once_the_gate_shuts_and_reads_go_on() {
    let open = Arc::new(AtomicBool::new(true));
    let o = open.clone();
    let gate: AnswerGate = Arc::new(move || o.load(Ordering::SeqCst));
    let (a, mut b) = tokio::io::duplex(64);
    let refusing = Refusing::default();
    let mut io = GatedIo::new(a, Some(gate), refusing.clone());
    io.write_all(b"ack 1").await.unwrap();
    let mut got = [0u8; 5];
    b.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ack 1");
    // Past the fence deadline: nothing more leaves.
    open.store(false, Ordering::SeqCst);
    let e = io.write_all(b"ack 2").await.unwrap_err();
    assert!(e.to_string().contains("lease could have lapsed"), "{e}");
    let v = [io::IoSlice::new(b"ack 3")];
    assert!(io.write_vectored(&v).await.is_err());
    b.write_all(b"more").await.unwrap();
    let mut req = [0u8; 4];
    io.read_exact(&mut req).await.unwrap();
    assert_eq!(&req, b"more");
    // The service answers the refusal instead: that may leave.
    refusing.set();
    io.write_all(b"503").await.unwrap();
    let mut got = [0u8; 3];
    b.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"503");
    // Ungated (not a fleet node): every write passes.
    let (a, _b) = tokio::io::duplex(64);
    GatedIo::new(a, None, Refusing::default())
      .write_all(b"x")
      .await
      .unwrap();
  }
}

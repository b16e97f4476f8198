//! A body that is a whole buffer or chunks from a channel: responses to
//! hyper, and bodies passed between isolates.

use std::pin::Pin;
use std::task::{Context, Poll};

use crate::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

pub enum ReplyStream {
  Full(Option<Bytes>),
  Stream(mpsc::Receiver<Result<Bytes, BoxError>>),
}

impl ReplyStream {
  pub fn full(b: Bytes) -> Self {
    ReplyStream::Full(Some(b))
  }

  pub fn stream(rx: mpsc::Receiver<Result<Bytes, BoxError>>) -> Self {
    ReplyStream::Stream(rx)
  }
}

impl Body for ReplyStream {
  type Data = Bytes;
  type Error = BoxError;

  fn poll_frame(
    self: Pin<&mut Self>,
    cx: &mut Context<'_>,
  ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
    match self.get_mut() {
      ReplyStream::Full(b) => Poll::Ready(
        b.take()
          .filter(|b| !b.is_empty())
          .map(|b| Ok(Frame::data(b))),
      ),
      ReplyStream::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|r| r.map(Frame::data))),
    }
  }

  fn is_end_stream(&self) -> bool {
    matches!(self, ReplyStream::Full(None))
      || matches!(self, ReplyStream::Full(Some(b)) if b.is_empty())
  }

  fn size_hint(&self) -> SizeHint {
    match self {
      ReplyStream::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
      ReplyStream::Full(None) => SizeHint::with_exact(0),
      ReplyStream::Stream(_) => SizeHint::default(),
    }
  }
}

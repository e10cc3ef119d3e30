//! [`futures_core::Stream`] and [`futures_sink::Sink`] for [`AsyncSocket`], both of whole
//! multipart messages (`Vec<Msg>`), on the socket itself: no split is needed for a task that
//! both reads and writes, and `futures::StreamExt::split` works where two tasks share it (the
//! readiness module wakes both directions).
//!
//! The Stream yields `Result<Vec<Msg>>` and ends (`None`) when the socket's context terminates
//! (ETERM); other errors are yielded and the stream goes on. The Sink holds one message: a
//! message given to `start_send` is the socket's from then on (sent by `poll_ready`,
//! `poll_flush` or `poll_close`); an error drops it.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_sink::Sink;
use rzmq_core::{Error, Msg, Result};

use crate::socket::{AsyncSocket, Outgoing};

impl Stream for AsyncSocket {
    type Item = Result<Vec<Msg>>;

    /// The next whole message; `None` once the context terminates.
    ///
    /// # Cancel safety
    ///
    /// As [`AsyncSocket::poll_recv_multipart`]: a `Pending` poll takes nothing, so a `next()`
    /// future dropped in a `select!` loses no message.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut().poll_recv_multipart(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(Error::Term)) => Poll::Ready(None),
            Poll::Ready(r) => Poll::Ready(Some(r)),
        }
    }
}

/// Sends the Sink's held message, if any; an error drops it.
fn poll_item(sock: &mut AsyncSocket, cx: &mut Context<'_>) -> Poll<Result<()>> {
    match sock.poll_send_sink_item(cx) {
        Poll::Ready(Err(e)) => {
            sock.sink_item = None;
            Poll::Ready(Err(e))
        }
        r => r,
    }
}

impl Sink<Vec<Msg>> for AsyncSocket {
    type Error = Error;

    /// Ready once the message held from the last `start_send` (if any) is accepted.
    ///
    /// # Cancel safety
    ///
    /// The held message belongs to the socket: a caller that stops polling loses nothing, and
    /// the next `poll_ready`, `poll_flush` or `poll_close` goes on sending it.
    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        if this.sink_item.is_none() {
            return Poll::Ready(Ok(()));
        }
        poll_item(this, cx)
    }

    /// EINVAL when called without `poll_ready` having returned `Ready(Ok)` since the last
    /// message (one is still held).
    fn start_send(self: Pin<&mut Self>, item: Vec<Msg>) -> Result<()> {
        let this = self.get_mut();
        if this.sink_item.is_some() {
            return Err(Error::Inval);
        }
        this.sink_item = Some(Outgoing::Parts(item.into()));
        Ok(())
    }

    /// Ready once the held message (if any) is accepted by the socket.
    ///
    /// # Cancel safety
    ///
    /// As `poll_ready`.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        poll_item(self.get_mut(), cx)
    }

    /// As `poll_flush` (the socket stays open: dropping it closes it).
    ///
    /// # Cancel safety
    ///
    /// As `poll_ready`.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        poll_item(self.get_mut(), cx)
    }
}

//! [`AsyncSocket`]: an rzmq [`Socket`] whose sends and receives are futures on tokio, and the
//! futures themselves ([`SendMsg`], [`RecvMsg`], [`RecvMultipart`]).
//!
//! Every operation first tries the socket's non-blocking call (a `DONTWAIT` send, rzmq-core's
//! `try_recv_msg`, which reads the connection on this thread when the socket may) and waits
//! for the socket only when that would block (see the readiness module). What must survive a
//! dropped future lives in the socket, not in the future: the frames of a message received in
//! part, and the frames of a message whose first frame was sent (rzmq's pipes check the
//! high-water mark at a message's first frame only, so the rest go at once in practice; the
//! socket sends them first at its next send or flush should one ever have to wait).
//!
//! This module owns the message bookkeeping; the fd and its wake-ups belong to readiness.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rzmq_core::{Error, Msg, Result, Socket, DONTWAIT, SNDMORE};

use crate::readiness::Readiness;
use crate::waiters::Dir;

/// A message on its way out: one frame, or the frames of a multipart message (first first).
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// A single-frame message (no allocation beyond the frame's).
    One(Msg),
    /// A multipart message; empty is an error (EINVAL) when sent.
    Parts(VecDeque<Msg>),
}

impl Outgoing {
    /// The frames, for the caller who takes the message back.
    fn into_vec(self) -> Vec<Msg> {
        match self {
            Outgoing::One(m) => vec![m],
            Outgoing::Parts(p) => Vec::from(p),
        }
    }
}

/// An rzmq socket driven by tokio: `send`/`recv` futures, [`futures_core::Stream`] of whole
/// messages and [`futures_sink::Sink`] of whole messages (see the crate docs for which
/// operations are cancel-safe).
///
/// It owns the [`Socket`]; options, `bind` and `connect` stay the socket's (through
/// [`AsyncSocket::get_mut`], or the [`AsyncSocket::bind`] and [`AsyncSocket::connect`]
/// shortcuts). Dropping it closes the socket (with its `ZMQ_LINGER`).
pub struct AsyncSocket {
    /// The socket, owned by its registration with the reactor.
    io: Readiness,
    /// Frames of a message received in part (kept across dropped futures).
    rx_partial: Vec<Msg>,
    /// The frames left of a message whose first frame was sent (kept across dropped futures).
    tx_tail: VecDeque<Msg>,
    /// The message given to the Sink and not yet accepted by the socket.
    pub(crate) sink_item: Option<Outgoing>,
}

impl std::fmt::Debug for AsyncSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSocket")
            .field("socket", self.io.socket())
            .field("rx_partial", &self.rx_partial.len())
            .field("tx_tail", &self.tx_tail.len())
            .finish()
    }
}

impl AsyncSocket {
    /// Wraps `sock`, registering its notification fd with the current tokio runtime.
    ///
    /// Panics outside a runtime, or in one built without I/O (`enable_io`/`enable_all`).
    /// The socket's `RCVTIMEO`/`SNDTIMEO` play no part: the futures wait until they complete
    /// (use `tokio::time::timeout` for a deadline).
    pub fn new(sock: Socket) -> Result<AsyncSocket> {
        Ok(AsyncSocket {
            io: Readiness::new(sock)?,
            rx_partial: Vec::new(),
            tx_tail: VecDeque::new(),
            sink_item: None,
        })
    }

    /// The socket, for options and introspection.
    pub fn get_ref(&self) -> &Socket {
        self.io.socket()
    }

    /// The socket, for options, `bind`, `connect`, `subscribe` and the like. Sending or
    /// receiving through it directly bypasses this wrapper's bookkeeping; a blocking call
    /// blocks the runtime's thread.
    pub fn get_mut(&mut self) -> &mut Socket {
        self.io.socket_mut()
    }

    /// Deregisters from the runtime and gives the socket back. Frames held for a message
    /// received in part, or left of a message sent in part, are dropped: finish receiving and
    /// flush (the Sink's `poll_flush`) first.
    pub fn into_inner(self) -> Socket {
        self.io.into_socket()
    }

    /// Binds the socket to `addr` ([`Socket::bind`]).
    pub fn bind(&mut self, addr: &str) -> Result<()> {
        self.io.socket_mut().bind(addr)
    }

    /// Connects the socket to `addr` ([`Socket::connect`]).
    pub fn connect(&mut self, addr: &str) -> Result<()> {
        self.io.socket_mut().connect(addr)
    }

    /// Sends `msg` as a single-frame message once the socket has room.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe by dropping alone: a future dropped before it completed never sent its
    /// message, and the message is dropped with it. Keep the future (`&mut fut` in
    /// `tokio::select!`) and call [`SendMsg::take_message`] to get the message back; polled
    /// again instead, the future sends it. A completed send is on its way (in the socket's
    /// pipe or the kernel), as after a blocking send.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rzmq_core::Result<()> {
    /// use rzmq_core::{Context, SocketType};
    /// use rzmq_tokio::AsyncSocket;
    ///
    /// let ctx = Context::new();
    /// let mut push = AsyncSocket::new(ctx.socket(SocketType::Push)?)?;
    /// // No peer yet: PUSH cannot send, so the send waits; a timeout gives the message back.
    /// let mut send = push.send("hello");
    /// let timed_out = tokio::time::timeout(std::time::Duration::from_millis(10), &mut send).await;
    /// assert!(timed_out.is_err());
    /// let back = send.take_message().expect("not sent");
    /// assert_eq!(back[0].data(), b"hello");
    /// # Ok(())
    /// # }
    /// ```
    pub fn send(&mut self, msg: impl Into<Msg>) -> SendMsg<'_> {
        SendMsg {
            sock: self,
            msg: Some(Outgoing::One(msg.into())),
        }
    }

    /// Sends the frames of `parts` as one multipart message once the socket has room
    /// (EINVAL for no frames).
    ///
    /// # Cancel safety
    ///
    /// As [`AsyncSocket::send`], and never half a message: until the socket accepts the first
    /// frame, [`SendMsg::take_message`] gives every frame back; from then on the message is
    /// committed, and the socket sends its other frames (at once, or first thing at its next
    /// send or flush) even if the future is dropped.
    pub fn send_multipart<I, T>(&mut self, parts: I) -> SendMsg<'_>
    where
        I: IntoIterator<Item = T>,
        T: Into<Msg>,
    {
        let parts: VecDeque<Msg> = parts.into_iter().map(Into::into).collect();
        SendMsg {
            sock: self,
            msg: Some(Outgoing::Parts(parts)),
        }
    }

    /// Receives one frame ([`Msg::more`] tells whether frames of the same message follow).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a frame is taken from the socket only in the poll that returns it, so a
    /// future dropped before it completed leaves every frame for the next receive.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> rzmq_core::Result<()> {
    /// use rzmq_core::{Context, SocketType};
    /// use rzmq_tokio::AsyncSocket;
    ///
    /// let ctx = Context::new();
    /// let mut pull = AsyncSocket::new(ctx.socket(SocketType::Pull)?)?;
    /// pull.bind("inproc://doc-recv")?;
    /// let mut push = AsyncSocket::new(ctx.socket(SocketType::Push)?)?;
    /// push.connect("inproc://doc-recv")?;
    /// push.send_multipart(["a", "b"]).await?;
    /// let first = pull.recv().await?;
    /// assert!(first.more());
    /// assert_eq!(pull.recv().await?.data(), b"b");
    /// # Ok(())
    /// # }
    /// ```
    pub fn recv(&mut self) -> RecvMsg<'_> {
        RecvMsg { sock: self }
    }

    /// Receives a whole message (all its frames).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a message is taken from the socket only in the poll that returns it.
    /// Frames of it read before a would-block (rzmq's pipes make a message visible whole, so
    /// this is rare) stay in this `AsyncSocket` for the next receive, which returns them
    /// first.
    pub fn recv_multipart(&mut self) -> RecvMultipart<'_> {
        RecvMultipart { sock: self }
    }

    /// Polls for one frame (as [`AsyncSocket::recv`]); `Pending` registers `cx`'s waker.
    ///
    /// # Cancel safety
    ///
    /// A `Pending` poll takes nothing: the caller may stop polling at any point and lose no
    /// frame. (Input from the connection that the socket kept for the next poll goes back to
    /// its I/O thread by itself within milliseconds, see [`Socket::try_recv_msg`].)
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Msg>> {
        let partial = &mut self.rx_partial;
        self.io.poll_op(cx, Dir::Recv, |s| try_recv_one(s, partial))
    }

    /// Polls for a whole message (as [`AsyncSocket::recv_multipart`]); `Pending` registers
    /// `cx`'s waker.
    ///
    /// # Cancel safety
    ///
    /// As [`AsyncSocket::poll_recv`]: a caller that stops polling after `Pending` loses nothing.
    pub fn poll_recv_multipart(&mut self, cx: &mut Context<'_>) -> Poll<Result<Vec<Msg>>> {
        let partial = &mut self.rx_partial;
        self.io
            .poll_op(cx, Dir::Recv, |s| try_recv_whole(s, partial))
    }

    /// Polls to send the message in `out` (first finishing the frames left of an earlier
    /// message): `Ready(Ok)` with `out` empty once it is accepted; on an error the message is
    /// left in `out`.
    pub(crate) fn poll_send_out(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Option<Outgoing>,
    ) -> Poll<Result<()>> {
        let tail = &mut self.tx_tail;
        self.io
            .poll_op(cx, Dir::Send, |s| try_send_out(s, out, tail))
    }

    /// [`AsyncSocket::poll_send_out`] for the Sink's item.
    pub(crate) fn poll_send_sink_item(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut out = self.sink_item.take();
        let r = self.poll_send_out(cx, &mut out);
        self.sink_item = out;
        r
    }
}

/// One frame without waiting: the frames of a message received in part first.
fn try_recv_one(s: &mut Socket, partial: &mut Vec<Msg>) -> Result<Option<Msg>> {
    if !partial.is_empty() {
        return Ok(Some(partial.remove(0)));
    }
    match s.try_recv_msg() {
        Ok(m) => Ok(Some(m)),
        Err(Error::Again) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A whole message without waiting; frames taken before a would-block stay in `partial`.
fn try_recv_whole(s: &mut Socket, partial: &mut Vec<Msg>) -> Result<Option<Vec<Msg>>> {
    loop {
        if partial.last().is_some_and(|m| !m.more()) {
            return Ok(Some(std::mem::take(partial)));
        }
        match s.try_recv_msg() {
            Ok(m) => partial.push(m),
            Err(Error::Again) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Sends the frames left of a committed message; false when one would block.
fn flush_tail(s: &mut Socket, tail: &mut VecDeque<Msg>) -> Result<bool> {
    while let Some(m) = tail.pop_front() {
        let more = if tail.is_empty() { 0 } else { SNDMORE };
        match s.send_msg(m, DONTWAIT | more) {
            Ok(()) => {}
            Err((m, Error::Again)) => {
                tail.push_front(m);
                return Ok(false);
            }
            Err((_, e)) => {
                tail.clear();
                return Err(e);
            }
        }
    }
    Ok(true)
}

/// Sends `out` without waiting (after the tail of an earlier message); `Ok(None)` when it
/// would block, with what is not sent yet left where it was.
fn try_send_out(
    s: &mut Socket,
    out: &mut Option<Outgoing>,
    tail: &mut VecDeque<Msg>,
) -> Result<Option<()>> {
    if !flush_tail(s, tail)? {
        return Ok(None);
    }
    match out.take() {
        None => Ok(Some(())),
        Some(Outgoing::One(m)) => match s.send_msg(m, DONTWAIT) {
            Ok(()) => Ok(Some(())),
            Err((m, e)) => {
                *out = Some(Outgoing::One(m));
                if matches!(e, Error::Again) {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        },
        Some(Outgoing::Parts(mut parts)) => {
            let Some(first) = parts.pop_front() else {
                return Err(Error::Inval);
            };
            let more = if parts.is_empty() { 0 } else { SNDMORE };
            match s.send_msg(first, DONTWAIT | more) {
                Ok(()) => {
                    // Committed: the rest belongs to the socket now (`tail` was empty).
                    std::mem::swap(tail, &mut parts);
                    Ok(flush_tail(s, tail)?.then_some(()))
                }
                Err((m, e)) => {
                    parts.push_front(m);
                    *out = Some(Outgoing::Parts(parts));
                    if matches!(e, Error::Again) {
                        Ok(None)
                    } else {
                        Err(e)
                    }
                }
            }
        }
    }
}

/// The future of [`AsyncSocket::send`] and [`AsyncSocket::send_multipart`]: owns the message
/// until the socket accepts it.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct SendMsg<'a> {
    sock: &'a mut AsyncSocket,
    msg: Option<Outgoing>,
}

impl SendMsg<'_> {
    /// Takes the message back if the socket has not accepted it (a send cancelled before it
    /// could go, or one that failed); `None` once it was sent. Polling afterwards completes
    /// without sending anything.
    pub fn take_message(&mut self) -> Option<Vec<Msg>> {
        self.msg.take().map(Outgoing::into_vec)
    }
}

impl Future for SendMsg<'_> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        this.sock.poll_send_out(cx, &mut this.msg)
    }
}

/// The future of [`AsyncSocket::recv`]: one frame.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct RecvMsg<'a> {
    sock: &'a mut AsyncSocket,
}

impl Future for RecvMsg<'_> {
    type Output = Result<Msg>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Msg>> {
        self.get_mut().sock.poll_recv(cx)
    }
}

/// The future of [`AsyncSocket::recv_multipart`]: a whole message.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct RecvMultipart<'a> {
    sock: &'a mut AsyncSocket,
}

impl Future for RecvMultipart<'_> {
    type Output = Result<Vec<Msg>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Vec<Msg>>> {
        self.get_mut().sock.poll_recv_multipart(cx)
    }
}

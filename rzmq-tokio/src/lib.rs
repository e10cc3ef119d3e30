//! Async rzmq sockets on tokio.
//!
//! [`AsyncSocket`] wraps an [`rzmq_core::Socket`]: `send(msg).await`, `send_multipart(parts)
//! .await`, `recv().await` (one frame), `recv_multipart().await` (a whole message), and the
//! socket is itself a [`futures_core::Stream`] and a [`futures_sink::Sink`] of whole messages
//! (`Vec<Msg>`). It works on tokio's current-thread and multi-thread runtimes and over every
//! transport rzmq has (tcp, ipc, inproc, and RDMA once an upgrader is installed).
//!
//! Readiness comes from the socket's own notification fd (`ZMQ_FD`), watched by tokio's reactor
//! through an [`tokio::io::unix::AsyncFd`] that owns the socket: no polling loop, no thread per
//! socket. The fd is edge-like (readable means "ask `ZMQ_EVENTS`"), and every wait re-checks the
//! socket's events after it found nothing to do and before it sleeps, so no wake-up is missed.
//! Each operation tries the non-blocking call first and touches the reactor only when that would
//! block. A receive takes rzmq-core's direct path: when a connection's input is the socket's to
//! read, the task reads the connection itself on its own thread when the stream turns readable,
//! and a reply costs one wake-up, as a blocking receive does, not a hand-off through the I/O
//! thread.
//!
//! Every operation spends the task's cooperative budget ([`tokio::task::coop`]), also when it
//! completes at once: `loop { s.recv().await }` on a busy socket yields to the runtime's other
//! tasks now and then, as a tokio socket does.
//!
//! [`AsyncSocket`] is `Send` (not `Sync`, as [`rzmq_core::Socket`]): move it into a task, or
//! split it into a Stream task and a Sink task with `futures::StreamExt::split`
//! (`tests/scheduling.rs` moves 10,000 messages each way through two split sockets on every
//! transport).
//!
//! # Cancel safety
//!
//! Each async method's docs have a `# Cancel safety` section; in short:
//!
//! - [`AsyncSocket::recv`], [`AsyncSocket::recv_multipart`], [`AsyncSocket::poll_recv`],
//!   [`AsyncSocket::poll_recv_multipart`] and the Stream's `poll_next` are cancel-safe: a
//!   message is taken from the socket only in the poll that returns it (rzmq's pipes make a
//!   multipart message visible whole, and any frames of one taken before a would-block stay in
//!   the socket for the next receive). Dropping the future loses nothing.
//! - [`AsyncSocket::send`] and [`AsyncSocket::send_multipart`] return a [`SendMsg`] that owns
//!   its message: until it completes, the message was not sent, and
//!   [`SendMsg::take_message`] hands it back (so keep the future, e.g. `&mut fut` in
//!   `tokio::select!`, when a cancelled send must not lose its message). Once the first frame
//!   of a message is accepted the message is committed: the socket sends its other frames
//!   even if the future is dropped. A dropped `SendMsg` therefore either sent its message or
//!   dropped it unsent; it never sends part of one.
//! - The Sink: a message passed to `start_send` belongs to the socket; `poll_ready`,
//!   `poll_flush` and `poll_close` may be dropped and polled again without loss.
//!
//! # Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> rzmq_core::Result<()> {
//! use rzmq_core::{Context, SocketType};
//! use rzmq_tokio::AsyncSocket;
//!
//! let ctx = Context::new();
//! let mut rep = AsyncSocket::new(ctx.socket(SocketType::Rep)?)?;
//! rep.bind("tcp://127.0.0.1:*")?;
//! let ep = rep.get_ref().last_endpoint().to_string();
//! let mut req = AsyncSocket::new(ctx.socket(SocketType::Req)?)?;
//! req.connect(&ep)?;
//!
//! let server = tokio::spawn(async move {
//!     let request = rep.recv_multipart().await?;
//!     rep.send_multipart(request).await
//! });
//! req.send("ping").await?;
//! assert_eq!(req.recv().await?.data(), b"ping");
//! server.await.unwrap()?;
//! # Ok(())
//! # }
//! ```

mod epoll;
#[cfg(all(test, loom))]
mod loom_tests;
mod readiness;
mod socket;
mod stream;
mod waiters;

pub use socket::{AsyncSocket, RecvMsg, RecvMultipart, SendMsg};

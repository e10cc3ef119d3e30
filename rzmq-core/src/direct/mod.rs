//! Direct sends and receives: the application thread writes a message to an idle connection,
//! or reads one from it, itself.
//!
//! A message normally goes socket thread -> pipe -> I/O thread -> kernel: two thread hand-offs,
//! which dominate the one-way latency of a request/reply exchange. When input arrives on a
//! connection whose output is idle (its I/O thread has flushed everything, found the pipe empty,
//! and its last turn moved at most one message), the I/O thread *grants* the connection's output
//! to the writer before delivering that input: the next message the application sends on that
//! pipe is framed and written to the stream's fd by the application thread, and the grant is
//! used up. The I/O thread takes output back (*revokes*) before it writes to the connection, and
//! grants again only on the next input under the same conditions; a stream of sends with nothing
//! coming back therefore goes through the pipe and the I/O thread's batching as before. Only
//! plain ZMTP connections qualify: no CURVE, no alternative (RDMA) path, no subscription
//! forwarding, no raw STREAM framing.
//!
//! Order with the thread's other sends: a direct send goes only while its I/O thread has no
//! unfinished work (no command queued or running, no pipe being drained onto a connection). A
//! message this thread sent just before on another socket of the same I/O thread, which went
//! through that thread, is therefore on the wire first, as it would be in libzmq, where both go
//! through the one I/O thread in order. (pyzmq's monitored-queue test depends on it: a SUB's
//! subscription, queued by its first call after connecting, must reach the PUB before the message
//! the same thread sends next on another socket.) Connections on different I/O threads are not
//! ordered, in libzmq or here.
//!
//! On by default; the socket option `ZMQ_RZMQ_DIRECT` (default `RZMQ_DIRECT`) turns it off.
//!
//! **Direct receives** ([`DirectRx`]) are the other half. When the I/O thread has delivered
//! everything it read from a connection and the connection is idle (plain ZMTP, no CURVE, no
//! heartbeat timers, no alternative path, not a SUB/XSUB, not conflating, no multipart message
//! half delivered), it *offers* the input.
//! A socket blocked in a receive whose only pipe is that connection's, with nothing queued,
//! *claims* it and waits on the stream's fd together with its own mailbox; when bytes arrive it
//! reads and decodes them on its own thread (a decoder of its own, with the connection's
//! limits) and returns the first message without any hand-off: one thread wake-up per
//! message, as a blocking socket in plain TCP has. Whole data messages are kept in the pipe's
//! reader (they follow everything queued before the claim and precede everything queued
//! after); anything else (a command such as PING, a protocol error, the end of the stream) goes
//! back to the I/O thread together with the decoder, so a frame cut between reads continues
//! exactly where it stopped.
//!
//! A receive that read more than one message (a stream, not a reply) *holds* the input when it
//! returns: the socket reads the next turn (at most 64 KiB) itself as soon as the application
//! has taken what the last one brought, so a stream costs no hand-off per batch and no I/O
//! thread work at all. The I/O thread leaves readiness it sees meanwhile to the reader, and
//! takes input back only when the reader has not come back within [`RX_HOLD_STALE`] (an
//! application that stopped receiving), so the end of the stream or an error is still seen.
//! After a direct receive, output idle since its last direct send is granted again, so the reply
//! goes out directly too. Only a connection that is alone on its I/O thread is claimed: with
//! others, input that arrived on them first could still be on its way through that thread, and
//! libzmq never lets the later one overtake. `RZMQ_DIRECT_RX=0` turns direct receives off alone.
//!
//! A socket that claimed the input polls it (and its mailbox) without sleeping for up to
//! its budget (`ZMQ_RZMQ_BUSY_POLL_US`) before it sleeps, while polling pays ([`Spin`]): on a virtual machine a
//! wake-up costs more than the exchange itself.
//!
//! Receive states: `IO`, `OFFERED`, `READING` (the reader holds input), `HELD` (between the
//! receives of a stream), `HELD_MISSED`, `MISSED` (as `READING`,
//! and the I/O thread saw a readiness event it left alone; the reader looks at the stream once
//! more when it lets go), `DEAD`. A connection ending while the reader holds its input wakes the
//! reader through its mailbox and waits for it to let go before the fd is closed.
//!
//! States: `IO` (the I/O thread owns output), `GRANTED` (the writer may take it), `WRITING` (the
//! writer is in its write), `DEAD` (the connection ended; never granted again). A write the
//! kernel took only part of leaves the rest for the I/O thread ([`DirectTx::take_leftover`]),
//! which writes it before anything else.
//!
//! Files: `tx` (direct sends, [`DirectTx`]), `rx` (direct receives, [`DirectRx`]), `spin`
//! (busy-polling before a direct receive sleeps, [`Spin`]), `notify` (the wake-up callbacks
//! shared with the pipes, [`Notify`], [`Target`]); this file holds the process-wide switches.

mod notify;
mod rx;
mod spin;
mod tx;

pub use notify::{Notify, Target};
pub(crate) use rx::Stale;
pub(crate) use rx::{hold_stale, DirectRx, Received};
pub use rx::{hold_stats, rx_stats, set_hold_stale, RX_HOLD_STALE};
pub use spin::spin_stats;
pub(crate) use spin::Spin;
pub use tx::stats;
pub(crate) use tx::{DirectTx, Piece, Sent};

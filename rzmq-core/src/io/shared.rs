//! What an I/O thread shares with the threads that command it: the commands it takes
//! (`IoCmd`) and `IoShared` (mailbox, token counter, work and connection counts). Below both the
//! reactor, which reads them, and the thread's start, which makes them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::pipe::Notify;
use crate::session::udp::UdpSession;
use crate::session::Session;
use crate::signal::Mailbox;
use crate::transport::listener::Listener;

/// A command to an I/O thread.
pub(super) enum IoCmd {
    /// A new listener, with its token.
    AddListener(Box<Listener>, u64),
    /// A new session, with its token.
    AddSession(Box<Session>, u64),
    /// A new UDP endpoint, with its token.
    AddUdp(Box<UdpSession>, u64),
    /// Close a listener or session; the flag says whether to raise EVENT_CLOSED here.
    Close(u64, bool),
    /// The socket of this session closed: linger, then end.
    SocketClosed(u64),
    /// A pipe of this session needs attention.
    Pipe(u64),
    /// The context ends: close everything, then stop.
    Shutdown,
}

/// What an I/O thread shares with other threads.
pub(super) struct IoShared {
    /// The thread's command mailbox.
    pub(super) mailbox: Mailbox<IoCmd>,
    /// The next listener or session token.
    pub(super) next_token: AtomicU64,
    /// Commands sent and not yet carried out, plus one while a session moves messages from a
    /// pipe to its connection: while non-zero, direct sends wait their turn (see
    /// [`crate::direct`]).
    pub(super) work: Arc<crate::sync::AtomicUsize>,
    /// Connections (streams) registered with the thread: direct receives take input only from
    /// a connection alone on its thread (see [`crate::direct::DirectRx`]).
    pub(super) streams: Arc<AtomicUsize>,
}

impl IoShared {
    /// Queues a command; it counts as unfinished work until the I/O thread has carried it out.
    pub(super) fn send(&self, cmd: IoCmd) {
        self.work.fetch_add(1, Ordering::SeqCst);
        self.mailbox.send(cmd);
    }

    /// A new listener or session token.
    pub(super) fn token(&self) -> u64 {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }
}

impl Notify for IoShared {
    fn activate_read(&self, token: u64) {
        self.send(IoCmd::Pipe(token));
    }
    fn activate_write(&self, token: u64) {
        self.send(IoCmd::Pipe(token));
    }
    fn pipe_closed(&self, token: u64) {
        self.send(IoCmd::Pipe(token));
    }
}

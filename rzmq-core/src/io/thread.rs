//! I/O threads: their start, and the handle a socket keeps on a listener or session it handed
//! to one (`IoHandle`).

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mio::Poll;

use super::reactor::Reactor;
use super::shared::{IoCmd, IoShared};
use crate::error::{Error, Result};
use crate::session::udp::UdpSession;
use crate::session::Session;
use crate::signal::Mailbox;
use crate::transport::listener::Listener;

/// An I/O thread of a context.
pub(crate) struct IoThread {
    shared: Arc<IoShared>,
    join: Mutex<Option<JoinHandle<()>>>,
}

impl IoThread {
    /// Starts I/O thread `index` (named `<prefix>/rzmq-io/<index>`).
    pub(crate) fn start(index: usize, prefix: &str) -> Result<IoThread> {
        let shared = Arc::new(IoShared {
            mailbox: Mailbox::new()?,
            next_token: AtomicU64::new(1),
            work: Arc::new(crate::sync::AtomicUsize::new(0)),
            streams: Arc::new(AtomicUsize::new(0)),
        });
        let poll = Poll::new().map_err(Error::from)?;
        let s2 = shared.clone();
        let name = if prefix.is_empty() {
            format!("rzmq-io/{index}")
        } else {
            format!("{prefix}/rzmq-io/{index}")
        };
        let join = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                block_signals();
                Reactor::new(s2, poll).run()
            })
            .map_err(Error::from)?;
        Ok(IoThread {
            shared,
            join: Mutex::new(Some(join)),
        })
    }

    /// Hands a listener to the thread; returns the socket's handle on it.
    pub(super) fn add_listener(&self, listener: Listener, fd: i32) -> IoHandle {
        let token = self.shared.token();
        self.shared
            .send(IoCmd::AddListener(Box::new(listener), token));
        self.handle(token, fd)
    }

    /// Hands a connecting session to the thread; returns the socket's handle on it.
    pub(super) fn add_session(&self, session: Session) -> IoHandle {
        let token = self.shared.token();
        self.shared
            .send(IoCmd::AddSession(Box::new(session), token));
        self.handle(token, -1)
    }

    /// Hands a UDP endpoint to the thread; returns the socket's handle on it.
    pub(super) fn add_udp(&self, udp: UdpSession) -> IoHandle {
        let token = self.shared.token();
        self.shared.send(IoCmd::AddUdp(Box::new(udp), token));
        self.handle(token, -1)
    }

    /// Tells the thread to close everything and stop.
    pub(crate) fn shutdown(&self) {
        self.shared.send(IoCmd::Shutdown);
    }

    /// Waits for the thread to end (after [`IoThread::shutdown`]).
    pub(crate) fn join(&self) {
        if let Some(j) = self.join.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = j.join();
        }
    }

    fn handle(&self, token: u64, fd: i32) -> IoHandle {
        IoHandle {
            shared: self.shared.clone(),
            token,
            fd,
        }
    }
}

/// Blocks the usual asynchronous signals on the calling (I/O) thread, as libzmq does, so that
/// SIGINT and friends reach the application's threads and interrupt their blocking calls.
fn block_signals() {
    // SAFETY: sigset_t is plain data initialised by sigemptyset; the calls only touch it and the
    // calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
            libc::SIGALRM,
            libc::SIGCHLD,
        ] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// A socket's handle on its listener or connecting session.
pub(crate) struct IoHandle {
    shared: Arc<IoShared>,
    token: u64,
    fd: i32,
}

impl IoHandle {
    /// Closes the listener or session now.
    pub(crate) fn close(self) {
        self.shared.send(IoCmd::Close(self.token, true));
    }

    /// Closes a listener whose CLOSED event the socket already raised (socket close: the
    /// monitor stops before the I/O thread gets here).
    pub(crate) fn close_quiet(self) {
        self.shared.send(IoCmd::Close(self.token, false));
    }

    /// The listener's fd, for monitor events (-1 for sessions).
    pub(crate) fn fd(&self) -> i32 {
        self.fd
    }

    /// The socket closed: the session delivers what is queued (LINGER) and then ends.
    pub(crate) fn socket_closed(self) {
        self.shared.send(IoCmd::SocketClosed(self.token));
    }
}

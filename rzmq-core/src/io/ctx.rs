//! What a context shares with its sockets, below both: its settings, its I/O threads (started
//! on first use, picked round robin), its live sockets (so termination can wake them), its
//! inproc registry and the termination flag. A socket holds it; `Context` wraps it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use crate::command::{Cmd, SocketShared};
use crate::error::{Error, Result};
use crate::io::thread::IoThread;
use crate::options::CtxOptions;
use crate::transport::inproc::Inproc;

/// A context's shared state.
pub(crate) struct CtxShared {
    settings: Mutex<CtxOptions>,
    io: OnceLock<std::result::Result<Vec<IoThread>, Error>>,
    next_io: AtomicUsize,
    sockets: Mutex<HashMap<u64, Arc<SocketShared>>>,
    sockets_gone: Condvar,
    next_socket_id: AtomicU64,
    terminating: AtomicBool,
    terminated: AtomicBool,
    inproc: Arc<Inproc>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CtxShared {
    /// A new context's state with libzmq's defaults (I/O threads start on first use).
    pub(crate) fn new() -> CtxShared {
        CtxShared {
            settings: Mutex::new(CtxOptions::new()),
            io: OnceLock::new(),
            next_io: AtomicUsize::new(0),
            sockets: Mutex::new(HashMap::new()),
            sockets_gone: Condvar::new(),
            next_socket_id: AtomicU64::new(1),
            terminating: AtomicBool::new(false),
            terminated: AtomicBool::new(false),
            inproc: Arc::new(Inproc::default()),
        }
    }

    /// The context options, locked (`zmq_ctx_set` / `zmq_ctx_get`).
    pub(crate) fn settings(&self) -> MutexGuard<'_, CtxOptions> {
        lock(&self.settings)
    }

    /// Whether the context is terminating (blocked calls end with ETERM).
    #[inline]
    pub(crate) fn is_terminating(&self) -> bool {
        self.terminating.load(Ordering::Relaxed)
    }

    /// A copy of the context options (new sockets take their defaults from it).
    pub(crate) fn ctx_options(&self) -> CtxOptions {
        lock(&self.settings).clone()
    }

    /// The inproc registry.
    pub(crate) fn inproc(&self) -> &Arc<Inproc> {
        &self.inproc
    }

    /// An I/O thread for a new listener or connection (round robin), starting them on first use.
    pub(crate) fn io_thread(&self) -> Result<&IoThread> {
        let threads = self.io.get_or_init(|| {
            let s = lock(&self.settings);
            let n = s.io_threads;
            let prefix = String::from_utf8_lossy(&s.thread_name_prefix).into_owned();
            drop(s);
            (0..n)
                .map(|i| IoThread::start(i as usize, &prefix))
                .collect::<Result<Vec<_>>>()
        });
        match threads {
            Ok(t) if !t.is_empty() => {
                Ok(&t[self.next_io.fetch_add(1, Ordering::Relaxed) % t.len()])
            }
            Ok(_) => Err(Error::MThread),
            Err(e) => Err(*e),
        }
    }

    /// A new socket's id, with the most sockets the context allows now; ETERM once
    /// terminating.
    pub(crate) fn new_socket_id(&self) -> Result<(u64, i32)> {
        if self.terminating.load(Ordering::SeqCst) {
            return Err(Error::Term);
        }
        let max = lock(&self.settings).max_sockets;
        Ok((self.next_socket_id.fetch_add(1, Ordering::Relaxed), max))
    }

    /// Adds a live socket; EMFILE when `max` are live already.
    pub(crate) fn add_socket(&self, shared: &Arc<SocketShared>, max: i32) -> Result<()> {
        let mut socks = lock(&self.sockets);
        if socks.len() >= max as usize {
            return Err(Error::MFile);
        }
        socks.insert(shared.id, shared.clone());
        Ok(())
    }

    /// A socket closed.
    pub(crate) fn socket_closed(&self, id: u64) {
        let mut socks = lock(&self.sockets);
        socks.remove(&id);
        if socks.is_empty() {
            self.sockets_gone.notify_all();
        }
    }

    /// Wakes every blocked call with ETERM and refuses new sockets, once.
    pub(crate) fn shutdown(&self) {
        if !self.terminating.swap(true, Ordering::SeqCst) {
            for s in lock(&self.sockets).values() {
                s.mailbox.send(Cmd::Stop);
            }
        }
    }

    /// Waits until every socket is closed, then stops the I/O threads (once).
    pub(crate) fn wait_and_stop(&self) {
        {
            let mut socks = lock(&self.sockets);
            while !socks.is_empty() {
                socks = self
                    .sockets_gone
                    .wait(socks)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        if !self.terminated.swap(true, Ordering::SeqCst) {
            if let Some(Ok(threads)) = self.io.get() {
                for t in threads {
                    t.shutdown();
                }
                for t in threads {
                    t.join();
                }
            }
        }
    }
}

/// The last handle gone (every socket closed and the `Context` dropped without `term`): tells
/// the I/O threads to stop, as `term` does, without waiting for them. Each ends once its
/// lingering messages are delivered or dropped; before, each stayed forever, with its epoll and
/// eventfd (2 fds and a thread leaked per context; found by `tests/tests/faults.rs`).
impl Drop for CtxShared {
    fn drop(&mut self) {
        if !self.terminated.swap(true, Ordering::SeqCst) {
            if let Some(Ok(threads)) = self.io.get() {
                for t in threads {
                    t.shutdown();
                }
            }
        }
    }
}

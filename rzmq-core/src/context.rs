//! Contexts: the public handle on sockets, I/O threads, the inproc registry and termination
//! (the top floor).
//!
//! A [`Context`] is cheap to clone and thread-safe. It starts its I/O threads on first need,
//! keeps the table of live sockets (so `term` can wake their blocked calls with ETERM) and the
//! inproc endpoint registry, where connects may precede binds. What it shares with its
//! sockets lives below them (`crate::io::ctx::CtxShared`).

use std::sync::Arc;

use crate::error::Result;
use crate::io::ctx::CtxShared;
use crate::socket::{Socket, SocketType};

pub use crate::options::CtxOptions;

/// A ZeroMQ context.
#[derive(Clone)]
pub struct Context {
    inner: Arc<CtxShared>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

impl Context {
    /// A new context with libzmq's defaults (one I/O thread, started on first use).
    pub fn new() -> Context {
        Context {
            inner: Arc::new(CtxShared::new()),
        }
    }

    /// Creates a socket of the given type.
    pub fn socket(&self, ty: SocketType) -> Result<Socket> {
        Socket::open(&self.inner, ty)
    }

    /// Sets a context option (`zmq_ctx_set`).
    pub fn set(&self, option: i32, value: i32) -> Result<()> {
        self.inner.settings().set_int(option, value)
    }

    /// Sets a context option from raw bytes (`zmq_ctx_set_ext`).
    pub fn set_ext(&self, option: i32, value: &[u8]) -> Result<()> {
        self.inner.settings().set(option, value)
    }

    /// Reads a context option into a buffer (`zmq_ctx_get_ext`): see
    /// [`CtxOptions::get_ext`](crate::options::CtxOptions::get_ext) for the buffer rules.
    pub fn get_ext(&self, option: i32, buf: &mut [u8]) -> Result<()> {
        self.inner.settings().get_ext(option, buf)
    }

    /// Reads a context option (`zmq_ctx_get`).
    pub fn get(&self, option: i32) -> Result<i32> {
        self.inner.settings().get(option)
    }

    /// Wakes every blocked call with ETERM and refuses new sockets, without waiting
    /// (`zmq_ctx_shutdown`).
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Terminates: wakes blocked calls with ETERM, waits until every socket is closed and every
    /// lingering message is delivered or dropped, then stops the I/O threads (`zmq_ctx_term`).
    pub fn term(&self) -> Result<()> {
        self.shutdown();
        self.inner.wait_and_stop();
        Ok(())
    }
}

impl Socket {
    /// The socket's context.
    pub fn context(&self) -> Context {
        Context {
            inner: self.ctx_shared().clone(),
        }
    }
}

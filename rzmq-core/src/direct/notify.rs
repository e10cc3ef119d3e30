//! Wake-ups between the two sides of a pipe or a shared connection: [`Notify`], implemented by
//! whoever owns an end (a socket's mailbox, an I/O thread's session), and [`Target`], the owner
//! and the token it knows the pipe by.
//!
//! It lives below the pipes (`crate::pipe` re-exports both) because a connection's input shared
//! with a pipe's reader ([`super::DirectRx`]) wakes its session through the same callbacks.

use std::sync::Arc;

/// Callbacks an end's owner receives from the other end.
pub trait Notify: Send + Sync {
    /// Messages became available on the pipe `token` after the reader found it empty.
    fn activate_read(&self, token: u64);
    /// The pipe `token` has room again after the writer hit its HWM.
    fn activate_write(&self, token: u64);
    /// The other end of pipe `token` was closed.
    fn pipe_closed(&self, token: u64);
    /// The peer behind pipe `token` completed a (re)handshake (the pipe reader's `peer`).
    fn peer_ready(&self, token: u64) {
        let _ = token;
    }
}

/// Where one end's notifications go: the owner and the token it knows the pipe by.
#[derive(Clone)]
pub struct Target {
    /// The owner to notify.
    pub notify: Arc<dyn Notify>,
    /// The owner's identifier for this pipe.
    pub token: u64,
}

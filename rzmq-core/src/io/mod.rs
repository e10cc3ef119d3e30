//! I/O threads: each runs a reactor (a mio poll over its listeners and sessions, a command
//! mailbox, timers) and dispatches to the sessions of `session/` and the listeners of
//! `transport/`. Sockets reach them through `bind`/`connect` and the handles these return;
//! [`ctx::CtxShared`] is what a context shares with its sockets, I/O threads included.

mod accept;
/// Bind and connect on a socket's behalf.
pub(crate) mod bind;
/// What a context shares with its sockets.
pub(crate) mod ctx;
mod reactor;
mod shared;
/// I/O threads and the handles on what they run.
pub(crate) mod thread;
mod timers;

pub(crate) use bind::{bind, connect, udp};
pub(crate) use thread::IoHandle;

//! Direct sends: the application thread writes a message to an idle connection itself.
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
//! On by default; `RZMQ_DIRECT=0` or [`set_enabled`] turns it off.
//!
//! States: `IO` (the I/O thread owns output), `GRANTED` (the writer may take it), `WRITING` (the
//! writer is in its write), `DEAD` (the connection ended; never granted again). A write the
//! kernel took only part of leaves the rest for the I/O thread ([`DirectTx::take_leftover`]),
//! which writes it before anything else.

use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::msg::Msg;

const IO: u8 = 0;
const GRANTED: u8 = 1;
const WRITING: u8 = 2;
const DEAD: u8 = 3;

/// Most bytes of one message written directly (larger ones use the I/O thread's zero-copy path).
pub const DIRECT_MAX_BYTES: usize = 64 * 1024;
/// Most frames of one message written directly.
const DIRECT_MAX_FRAMES: usize = 16;

/// 0: not decided yet, 1: on, 2: off.
static ENABLED: AtomicU8 = AtomicU8::new(0);

/// Whether direct sends are on (first call reads `RZMQ_DIRECT`; `0` turns them off).
pub fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = std::env::var("RZMQ_DIRECT").map_or(true, |v| v != "0");
            let _ = ENABLED.compare_exchange(
                0,
                if on { 1 } else { 2 },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            ENABLED.load(Ordering::Relaxed) == 1
        }
    }
}

/// Turns direct sends on or off for connections that go idle from now on.
pub fn set_enabled(on: bool) {
    ENABLED.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

static SENT: AtomicU64 = AtomicU64::new(0);
static PARTIAL: AtomicU64 = AtomicU64::new(0);

/// Messages sent directly in this process, and how many of them the kernel took only in part
/// (for tests and diagnostics).
pub fn stats() -> (u64, u64) {
    (
        SENT.load(Ordering::Relaxed),
        PARTIAL.load(Ordering::Relaxed),
    )
}

/// What a direct send attempt did.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// Not possible now: queue the message on the pipe as usual.
    NotNow,
    /// The whole message is in the kernel.
    Done,
    /// Part of it is; the rest waits in the leftover, and the I/O thread must be woken.
    HandedOver,
}

/// One connection's output, shared between its I/O thread and the pipe's writer.
pub struct DirectTx {
    fd: RawFd,
    state: AtomicU8,
    leftover: Mutex<Vec<u8>>,
    /// The I/O thread's unfinished work (commands queued or running, a pipe being drained onto
    /// a connection); a direct send goes only when it is zero.
    io_work: Arc<AtomicUsize>,
}

impl DirectTx {
    /// Output of the stream `fd`, owned by the I/O thread whose unfinished work `io_work`
    /// counts.
    pub fn new(fd: RawFd, io_work: Arc<AtomicUsize>) -> DirectTx {
        DirectTx {
            fd,
            state: AtomicU8::new(IO),
            leftover: Mutex::new(Vec::new()),
            io_work,
        }
    }

    /// The stream's fd.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// I/O thread: takes output back, waiting out a write the writer is in.
    pub fn revoke(&self) {
        loop {
            match self.state.load(Ordering::Acquire) {
                GRANTED => {
                    if self
                        .state
                        .compare_exchange(GRANTED, IO, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return;
                    }
                }
                WRITING => std::hint::spin_loop(),
                _ => return,
            }
        }
    }

    /// I/O thread: lets the writer send the next message itself (not after [`DirectTx::kill`]).
    pub fn grant(&self) {
        let _ = self
            .state
            .compare_exchange(IO, GRANTED, Ordering::Release, Ordering::Relaxed);
    }

    /// I/O thread: the connection is ending; output is never granted again.
    pub fn kill(&self) {
        self.revoke();
        self.state.store(DEAD, Ordering::Release);
    }

    /// True while output is granted to the writer.
    pub fn granted(&self) -> bool {
        self.state.load(Ordering::Relaxed) == GRANTED
    }

    /// True while a partial direct write's rest waits for the I/O thread.
    pub fn has_leftover(&self) -> bool {
        !self
            .leftover
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// I/O thread, after [`DirectTx::revoke`]: bytes of a message the kernel took only part of,
    /// to be written before anything else.
    pub fn take_leftover(&self) -> Vec<u8> {
        std::mem::take(&mut *self.leftover.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Writer: sends the message `frames` + `last` now if output is granted and `idle()` (the
    /// pipe is empty) holds once the grant is taken. An attempt that reaches the kernel uses the
    /// grant up, whatever the kernel took.
    pub fn try_send(&self, frames: &[Msg], last: &Msg, idle: impl FnOnce() -> bool) -> Sent {
        let count = frames.len() + 1;
        let total: usize = frames.iter().map(Msg::len).sum::<usize>() + last.len();
        if count > DIRECT_MAX_FRAMES
            || total > DIRECT_MAX_BYTES
            || last.is_command()
            || frames.iter().any(Msg::is_command)
        {
            return Sent::NotNow;
        }
        if self
            .state
            .compare_exchange(GRANTED, WRITING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return Sent::NotNow;
        }
        if !idle() {
            // Messages wait in the pipe: they go first, through the I/O thread.
            self.state.store(GRANTED, Ordering::Release);
            return Sent::NotNow;
        }
        if self.io_work.load(Ordering::SeqCst) != 0 {
            // The I/O thread has work in hand, maybe this thread's earlier sends on other
            // sockets: they reach the wire first, as they would through the I/O thread.
            self.state.store(GRANTED, Ordering::Release);
            return Sent::NotNow;
        }
        let mut headers = [[0u8; 9]; DIRECT_MAX_FRAMES];
        let mut iov: [libc::iovec; 2 * DIRECT_MAX_FRAMES] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2 * DIRECT_MAX_FRAMES];
        let mut n_iov = 0;
        let mut wire = 0usize;
        for (i, (m, h)) in frames
            .iter()
            .chain(std::iter::once(last))
            .zip(headers.iter_mut())
            .enumerate()
        {
            let more = i + 1 < count;
            let hl = crate::zmtp::codec::frame_header(u8::from(more), m.len(), h);
            iov[n_iov] = libc::iovec {
                iov_base: h.as_mut_ptr() as *mut libc::c_void,
                iov_len: hl,
            };
            n_iov += 1;
            wire += hl;
            if !m.is_empty() {
                iov[n_iov] = libc::iovec {
                    iov_base: m.data().as_ptr() as *mut libc::c_void,
                    iov_len: m.len(),
                };
                n_iov += 1;
                wire += m.len();
            }
        }
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = iov.as_mut_ptr();
        hdr.msg_iovlen = n_iov as _;
        let written = loop {
            // SAFETY: the iovecs point into `headers` and the messages' bytes, all alive and
            // unchanged for the call; the fd is the connection's stream, which the I/O thread
            // does not close while the state is WRITING (it revokes first).
            let r =
                unsafe { libc::sendmsg(self.fd, &hdr, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
            if r >= 0 {
                break r as usize;
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                // Full, or broken: the pipe and the I/O thread handle it as any message.
                self.state.store(IO, Ordering::Release);
                return Sent::NotNow;
            }
        };
        if written == wire {
            self.state.store(IO, Ordering::Release);
            SENT.fetch_add(1, Ordering::Relaxed);
            return Sent::Done;
        }
        if written == 0 {
            self.state.store(IO, Ordering::Release);
            return Sent::NotNow;
        }
        // The kernel took part of it: the rest, in order, for the I/O thread.
        let mut rest = Vec::with_capacity(wire - written);
        let mut skip = written;
        for v in &iov[..n_iov] {
            // SAFETY: as for the sendmsg call above.
            let bytes = unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
            if skip >= bytes.len() {
                skip -= bytes.len();
                continue;
            }
            rest.extend_from_slice(&bytes[skip..]);
            skip = 0;
        }
        *self.leftover.lock().unwrap_or_else(|e| e.into_inner()) = rest;
        self.state.store(IO, Ordering::Release);
        SENT.fetch_add(1, Ordering::Relaxed);
        PARTIAL.fetch_add(1, Ordering::Relaxed);
        Sent::HandedOver
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::io::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn msg(bytes: &[u8], more: bool) -> Msg {
        let mut m = Msg::copy_from(bytes);
        m.set_more(more);
        m
    }

    #[test]
    fn writes_framed_messages_only_when_granted_and_idle() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        assert_eq!(d.try_send(&[], &msg(b"x", false), || true), Sent::NotNow);
        d.grant();
        assert_eq!(d.try_send(&[], &msg(b"x", false), || false), Sent::NotNow);
        assert!(d.granted(), "a refused attempt keeps the grant");
        let long = vec![7u8; 300];
        let sent = d.try_send(&[msg(b"head", true)], &msg(&long, false), || true);
        assert_eq!(sent, Sent::Done);
        assert!(!d.granted(), "the grant is used up");
        let mut got = vec![0u8; 2 + 4 + 9 + 300];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..6], b"\x01\x04head");
        assert_eq!(got[6], 0x02);
        assert_eq!(&got[7..15], &300u64.to_be_bytes());
        assert_eq!(&got[15..], &long[..]);
        // Killed: never granted again.
        d.kill();
        d.grant();
        assert!(!d.granted());
    }

    #[test]
    fn a_partial_write_leaves_the_rest_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        // Fill the socket buffer until a message goes only partly (or not at all).
        let body = vec![0x5Au8; DIRECT_MAX_BYTES - 16];
        let mut sent_whole = 0usize;
        let outcome = loop {
            d.grant();
            match d.try_send(&[], &msg(&body, false), || true) {
                Sent::Done => sent_whole += 1,
                other => break other,
            }
            assert!(sent_whole < 10_000, "the socket buffer never filled");
        };
        let left = d.take_leftover();
        if outcome == Sent::HandedOver {
            assert!(!left.is_empty() && left.len() < body.len() + 9);
            assert!(left
                .iter()
                .rev()
                .take(body.len().min(left.len()))
                .all(|&x| x == 0x5A));
        } else {
            assert_eq!(outcome, Sent::NotNow);
            assert!(left.is_empty());
        }
        assert!(!d.granted());
        // What arrived is whole frames followed by the start of the partial one.
        let mut first = [0u8; 9];
        b.read_exact(&mut first).unwrap();
        assert_eq!(first[0], 0x02);
        assert_eq!(
            u64::from_be_bytes(first[1..9].try_into().unwrap()),
            body.len() as u64
        );
    }
}

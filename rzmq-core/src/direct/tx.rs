//! Direct sends: a connection's output ([`DirectTx`]) granted by its I/O thread to the pipe's
//! writer, which frames and writes the next message itself; what a partial write leaves goes
//! back to the I/O thread ([`Piece`]).
//!
//! States: `IO` (the I/O thread owns output), `GRANTED` (the writer may take it), `WRITING` (the
//! writer is in its write), `SPENT` (idle after a whole direct send), `DEAD` (the connection
//! ended; never granted again).

use std::os::unix::io::RawFd;
// Statistics counters: std's atomics, not loom's (which are not `const`).
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::msg::Msg;
use crate::sync::{AtomicU8, AtomicUsize, Mutex, Ordering};

const IO: u8 = 0;
const GRANTED: u8 = 1;
const WRITING: u8 = 2;
const DEAD: u8 = 3;
/// A direct send wrote a whole message and nothing has been queued since: output is idle and
/// the writer's side may grant it again on the next input it reads itself
/// ([`DirectRx`](super::DirectRx)).
const SPENT: u8 = 4;

/// Bodies up to this size that a partial direct write cut are copied into the leftover; larger
/// ones stay by reference (the I/O thread writes the rest from the message itself).
const LEFTOVER_COPY_MAX: usize = crate::zmtp::frame::LARGE_BODY;
/// Most frames of one message written directly.
const DIRECT_MAX_FRAMES: usize = 16;

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

/// One piece of what a partial direct write left, already framed.
pub enum Piece {
    /// Header bytes and small bodies, copied.
    Bytes(Vec<u8>),
    /// The rest of a large body from byte `from` on, by reference.
    Body {
        /// The frame whose body continues.
        msg: Msg,
        /// Bytes of the body already written.
        from: usize,
    },
}

/// One connection's output, shared between its I/O thread and the pipe's writer.
pub struct DirectTx {
    fd: RawFd,
    state: AtomicU8,
    leftover: Mutex<Vec<Piece>>,
    /// The I/O thread's unfinished work (commands queued or running, a pipe being drained onto
    /// a connection); a direct send goes only when it is zero.
    io_work: Arc<AtomicUsize>,
    /// Whether a large body goes out in two writes (see `codec::LEAD_SPLIT_MIN`).
    split_large: bool,
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
            split_large: true,
        }
    }

    /// Whether a large body goes out in two writes (default yes; the connection's choice, see
    /// `Engine::set_split_large`).
    pub fn with_split_large(mut self, split: bool) -> DirectTx {
        self.split_large = split;
        self
    }

    /// The stream's fd.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// I/O thread: takes output back, waiting out a write the writer is in.
    pub fn revoke(&self) {
        loop {
            match self.state.load(Ordering::Acquire) {
                s @ (GRANTED | SPENT) => {
                    if self
                        .state
                        .compare_exchange(s, IO, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return;
                    }
                }
                WRITING => crate::sync::spin_loop(),
                _ => return,
            }
        }
    }

    /// I/O thread: lets the writer send the next message itself (not after [`DirectTx::kill`]).
    pub fn grant(&self) {
        for from in [IO, SPENT] {
            if self
                .state
                .compare_exchange(from, GRANTED, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// I/O thread, having written everything with nothing queued: leaves output idle for the
    /// writer's side to grant on its next direct receive (see [`DirectTx::regrant`]).
    pub fn park(&self) {
        let _ = self
            .state
            .compare_exchange(IO, SPENT, Ordering::Release, Ordering::Relaxed);
    }

    /// Writer's side, after it read a message from the connection itself: grants output again
    /// if the last direct send left it idle (nothing was queued since). A reply to input the
    /// I/O thread never saw goes out directly, as one to input it delivered would.
    pub fn regrant(&self) {
        let _ = self
            .state
            .compare_exchange(SPENT, GRANTED, Ordering::AcqRel, Ordering::Relaxed);
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

    /// True while output is granted, being written by the writer, or idle after a whole direct
    /// send (the writer's side may grant it again): the I/O thread need not take it back when
    /// it has nothing to write. In particular it must not wait out a write in progress (a
    /// direct send of a large message keeps the writer in `sendmsg` for hundreds of
    /// microseconds): the writer leaves nothing behind, or wakes the I/O thread for the rest it
    /// handed over, or queues the message on the pipe, which wakes it too.
    pub fn left_to_writer(&self) -> bool {
        matches!(
            self.state.load(Ordering::Relaxed),
            GRANTED | WRITING | SPENT
        )
    }

    /// True while a partial direct write's rest waits for the I/O thread.
    pub fn has_leftover(&self) -> bool {
        !self
            .leftover
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// I/O thread, after [`DirectTx::revoke`]: the rest of a message the kernel took only part
    /// of, in order, to be written before anything else.
    pub fn take_leftover(&self) -> Vec<Piece> {
        std::mem::take(&mut *self.leftover.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Writer: sends the message `frames` + `last` now if output is granted and `idle()` (the
    /// pipe is empty) holds once the grant is taken. An attempt that reaches the kernel uses the
    /// grant up, whatever the kernel took.
    pub fn try_send(&self, frames: &[Msg], last: &Msg, idle: impl FnOnce() -> bool) -> Sent {
        let count = frames.len() + 1;
        if count > DIRECT_MAX_FRAMES || last.is_command() || frames.iter().any(Msg::is_command) {
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
        // The frame whose body each iovec is (None: a header).
        let mut body_of: [Option<&Msg>; 2 * DIRECT_MAX_FRAMES] = [None; 2 * DIRECT_MAX_FRAMES];
        let mut n_iov = 0;
        let mut wire = 0usize;
        // Where the first write ends when a large body goes in two (see
        // codec::LEAD_SPLIT_MIN): its lead, with everything before it.
        let mut lead = None;
        for (i, (m, h)) in frames
            .iter()
            .chain(std::iter::once(last))
            .zip(headers.iter_mut())
            .enumerate()
        {
            let more = i + 1 < count;
            let hl = crate::zmtp::frame::frame_header(u8::from(more), m.len(), h);
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
                body_of[n_iov] = Some(m);
                n_iov += 1;
                if self.split_large
                    && lead.is_none()
                    && m.len() >= crate::zmtp::frame::LEAD_SPLIT_MIN
                {
                    lead = Some(wire + crate::zmtp::frame::LEAD_BYTES);
                }
                wire += m.len();
            }
        }
        let mut written = 0usize;
        for cap in [lead, None] {
            let cap = cap.unwrap_or(wire);
            if written >= cap {
                continue;
            }
            // The iovecs of bytes written..cap, in a copy (the originals serve the leftover).
            let mut part = iov;
            let (mut first, mut k, mut skip, mut left) = (None, 0, written, cap - written);
            for (i, v) in iov[..n_iov].iter().enumerate() {
                if left == 0 {
                    break;
                }
                if skip >= v.iov_len {
                    skip -= v.iov_len;
                    continue;
                }
                let len = (v.iov_len - skip).min(left);
                first.get_or_insert(i);
                part[i] = libc::iovec {
                    // SAFETY: skip < iov_len, so the pointer stays inside the same buffer.
                    iov_base: unsafe { (v.iov_base as *mut u8).add(skip) } as *mut libc::c_void,
                    iov_len: len,
                };
                k = i + 1;
                left -= len;
                skip = 0;
            }
            let first = first.unwrap_or(0);
            // SAFETY: msghdr is plain data; all-zero is a valid empty header.
            let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
            hdr.msg_iov = part[first..].as_mut_ptr();
            hdr.msg_iovlen = (k - first) as _;
            let r = loop {
                // SAFETY: the iovecs point into `headers` and the messages' bytes, all alive
                // and unchanged for the call; the fd is the connection's stream, which the I/O
                // thread does not close while the state is WRITING (it revokes first).
                let r = unsafe {
                    libc::sendmsg(self.fd, &hdr, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
                };
                if r >= 0 {
                    break Some(r as usize);
                }
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                    break None;
                }
            };
            match r {
                Some(n) => {
                    written += n;
                    if written < cap {
                        break;
                    }
                }
                None if written == 0 => {
                    // Full, or broken: the pipe and the I/O thread handle it as any message.
                    self.state.store(IO, Ordering::Release);
                    return Sent::NotNow;
                }
                // The lead went: the rest is the I/O thread's, as after a partial write.
                None => break,
            }
        }
        if written == wire {
            self.state.store(SPENT, Ordering::Release);
            SENT.fetch_add(1, Ordering::Relaxed);
            return Sent::Done;
        }
        if written == 0 {
            self.state.store(IO, Ordering::Release);
            return Sent::NotNow;
        }
        // The kernel took part of it: the rest, in order, for the I/O thread; large bodies by
        // reference, so a message of any size costs no copy in the library.
        let mut rest = Vec::new();
        let mut bytes_piece = Vec::new();
        let mut skip = written;
        for (v, body) in iov[..n_iov].iter().zip(body_of.iter()) {
            if skip >= v.iov_len {
                skip -= v.iov_len;
                continue;
            }
            match body {
                Some(m) if m.len() > LEFTOVER_COPY_MAX => {
                    if !bytes_piece.is_empty() {
                        rest.push(Piece::Bytes(std::mem::take(&mut bytes_piece)));
                    }
                    rest.push(Piece::Body {
                        msg: (*m).clone(),
                        from: skip,
                    });
                }
                _ => {
                    // SAFETY: as for the sendmsg call above.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
                    bytes_piece.extend_from_slice(&bytes[skip..]);
                }
            }
            skip = 0;
        }
        if !bytes_piece.is_empty() {
            rest.push(Piece::Bytes(bytes_piece));
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
    use std::io::{Read, Write};
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

    /// The bytes a leftover stands for, in order.
    fn leftover_bytes(pieces: &[Piece]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in pieces {
            match p {
                Piece::Bytes(b) => out.extend_from_slice(b),
                Piece::Body { msg, from } => out.extend_from_slice(&msg.data()[*from..]),
            }
        }
        out
    }

    #[test]
    fn a_partial_write_leaves_the_rest_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        // Small frames (copied into the leftover): fill the socket buffer until a message goes
        // only partly (or not at all).
        let body: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        let mut wire = vec![0x02];
        wire.extend_from_slice(&(body.len() as u64).to_be_bytes());
        wire.extend_from_slice(&body);
        let mut sent_whole = 0usize;
        let outcome = loop {
            d.grant();
            match d.try_send(&[], &msg(&body, false), || true) {
                Sent::Done => sent_whole += 1,
                other => break other,
            }
            assert!(sent_whole < 100_000, "the socket buffer never filled");
        };
        let left = d.take_leftover();
        if outcome == Sent::HandedOver {
            assert!(
                left.iter().all(|p| matches!(p, Piece::Bytes(_))),
                "small bodies are copied"
            );
            let rest = leftover_bytes(&left);
            assert!(!rest.is_empty() && rest.len() < wire.len());
            assert_eq!(rest[..], wire[wire.len() - rest.len()..]);
        } else {
            assert_eq!(outcome, Sent::NotNow);
            assert!(left.is_empty());
        }
        assert!(!d.granted());
        // What arrived is whole frames followed by the start of the partial one.
        let mut first = vec![0u8; wire.len()];
        b.read_exact(&mut first).unwrap();
        assert_eq!(first, wire);
    }

    #[test]
    fn a_large_body_written_in_two_steps_arrives_whole() {
        large_body_arrives_whole(true);
    }

    #[test]
    fn a_large_body_written_whole_arrives_whole() {
        large_body_arrives_whole(false);
    }

    fn large_body_arrives_whole(split: bool) {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0))).with_split_large(split);
        // Large enough to be split (lead first, then the rest), read concurrently.
        let body: Vec<u8> = (0..crate::zmtp::frame::LEAD_SPLIT_MIN * 3)
            .map(|i| (i % 249) as u8)
            .collect();
        let mut wire = b"\x01\x04head\x02".to_vec();
        wire.extend_from_slice(&(body.len() as u64).to_be_bytes());
        wire.extend_from_slice(&body);
        let n = wire.len();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; n];
            b.read_exact(&mut got).unwrap();
            got
        });
        d.grant();
        let out = d.try_send(&[msg(b"head", true)], &msg(&body, false), || true);
        let left = d.take_leftover();
        match out {
            Sent::Done => assert!(left.is_empty()),
            Sent::HandedOver => {
                // Split, the lead went in the first write, so the leftover is at most the rest.
                let rest = leftover_bytes(&left);
                if split {
                    assert!(rest.len() <= body.len() - crate::zmtp::frame::LEAD_BYTES);
                }
                let mut w = a.try_clone().unwrap();
                w.set_nonblocking(false).unwrap();
                w.write_all(&rest).unwrap();
            }
            Sent::NotNow => panic!("an empty socket refused the write"),
        }
        assert_eq!(reader.join().unwrap(), wire);
    }

    #[test]
    fn a_large_body_cut_by_a_partial_write_stays_by_reference() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let d = DirectTx::new(a.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        // More than any socket buffer takes at once: the kernel takes the head frame and part
        // of the body.
        let body: Vec<u8> = (0..(4usize << 20)).map(|i| (i % 251) as u8).collect();
        let last = msg(&body, false);
        d.grant();
        assert_eq!(
            d.try_send(&[msg(b"head", true)], &last, || true),
            Sent::HandedOver
        );
        let left = d.take_leftover();
        let from = match left.as_slice() {
            [Piece::Body { msg, from }] => {
                assert_eq!(msg.data().as_ptr(), last.data().as_ptr(), "not copied");
                *from
            }
            other => panic!("expected one body piece, got {}", other.len()),
        };
        assert!(from > 0 && from < body.len());
        // The stream holds the head frame, the body's header and its first `from` bytes; the
        // leftover holds the rest.
        let mut got = vec![0u8; 6 + 9 + from];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..6], b"\x01\x04head");
        assert_eq!(got[6], 0x02);
        assert_eq!(&got[7..15], &(body.len() as u64).to_be_bytes());
        assert_eq!(&got[15..], &body[..from]);
        assert_eq!(leftover_bytes(&left), body[from..]);
        b.set_nonblocking(true).unwrap();
        let mut extra = [0u8; 1];
        assert!(
            b.read(&mut extra).is_err(),
            "nothing past the partial write"
        );
    }
}

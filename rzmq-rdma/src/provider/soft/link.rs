//! A QP pair's byte stream: sockets and listener, transmit queue and receive state, gathered
//! and scattered I/O against registered memory.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

use super::config::WireAddr;
use super::keys::{mr_ok, MrTable};
use super::wire::{Hdr, Hello};
use super::wr::RqEntry;
use crate::provider::*;

/// Payloads up to this size are copied into the transmit buffer (one write for many packets);
/// larger ones are written straight from registered memory.
pub(super) const TX_COPY_MAX: usize = 16 * 1024;
/// Stop building packets while this much is queued on a wire.
pub(super) const TX_QUEUE_MAX: usize = 1 << 20;
/// Largest single write/read syscall on a wire.
pub(super) const IO_CHUNK: usize = 1 << 20;
/// Bytes moved per QP per progress pass (fairness).
pub(super) const PASS_BUDGET: usize = 16 << 20;
/// A wire's receive buffer; payloads at least this large are received in place.
pub(super) const RXBUF: usize = 64 * 1024;

/// A device's listening socket, where peers' wires arrive.
pub(super) enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    pub(super) fn fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        }
    }

    pub(super) fn accept(&self) -> io::Result<WireStream> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                let _ = s.set_nodelay(true);
                // A wire between two devices of this host: no pacing (as rzmq's tcp).
                rzmq_core::tune_same_host(&s);
                Ok(WireStream::Tcp(s))
            }
            Listener::Unix(l, _) => Ok(WireStream::Unix(l.accept()?.0)),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A wire's connected socket.
pub(super) enum WireStream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl WireStream {
    pub(super) fn fd(&self) -> RawFd {
        match self {
            WireStream::Tcp(s) => s.as_raw_fd(),
            WireStream::Unix(s) => s.as_raw_fd(),
        }
    }

    pub(super) fn set_nonblocking(&self, nb: bool) -> io::Result<()> {
        match self {
            WireStream::Tcp(s) => s.set_nonblocking(nb),
            WireStream::Unix(s) => s.set_nonblocking(nb),
        }
    }

    pub(super) fn shutdown(&self) {
        match self {
            WireStream::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            WireStream::Unix(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Read for WireStream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            WireStream::Tcp(s) => s.read(b),
            WireStream::Unix(s) => s.read(b),
        }
    }
}

impl Write for WireStream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            WireStream::Tcp(s) => s.write(b),
            WireStream::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) fn connect_wire(
    addr: &WireAddr,
    src_dev: u64,
    src_qpn: u32,
    dst_dev: u64,
    dst_qpn: u32,
    dst_secret: u64,
) -> io::Result<WireStream> {
    let mut s = match addr {
        WireAddr::Tcp(a) => {
            let s = TcpStream::connect_timeout(a, Duration::from_secs(2))?;
            let _ = s.set_nodelay(true);
            rzmq_core::tune_same_host(&s);
            WireStream::Tcp(s)
        }
        WireAddr::Unix(p) => WireStream::Unix(UnixStream::connect(p)?),
    };
    let hello = Hello {
        src_dev,
        src_qpn,
        dst_dev,
        dst_qpn,
        dst_secret,
    };
    s.write_all(&hello.encode())?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// What a transmit chunk reads from.
pub(super) enum TxChunk {
    /// Encoded headers and copied payloads.
    Bytes(Vec<u8>),
    /// Registered memory, re-validated against the MR table at each write.
    Mem {
        addr: u64,
        len: usize,
        key: u32,
        pdn: u32,
    },
    /// No bytes: the response of a READ counted against `max_dest_rd_atomic` is on the wire,
    /// its responder resource is free again.
    ReadEnd,
}

impl TxChunk {
    pub(super) fn len(&self) -> usize {
        match self {
            TxChunk::Bytes(v) => v.len(),
            TxChunk::Mem { len, .. } => *len,
            TxChunk::ReadEnd => 0,
        }
    }
}

/// A response-side packet waiting for the wire: ACK, NAK or READ response.
pub(super) struct Ctrl {
    pub(super) hdr: Hdr,
    pub(super) payload: Option<TxChunk>,
    /// A READ response that holds a responder resource (not a duplicate's re-execution).
    pub(super) fresh_read: bool,
}

pub(super) enum RxDest {
    Discard,
    /// Scatter into registered memory: (addr, len, key) segments checked at each write.
    Mem {
        segs: Vec<(u64, usize, u32)>,
        idx: usize,
        off: usize,
        pdn: u32,
        need: Access,
        failed: bool,
    },
}

pub(super) enum RxAction {
    None,
    Send { rq: RqEntry, hdr: Hdr },
    Write { rq: Option<RqEntry>, hdr: Hdr },
    ReadResp { psn: u32, pull_failed: bool },
}

pub(super) enum RxState {
    Header,
    Payload {
        remaining: usize,
        dest: RxDest,
        action: RxAction,
    },
}

/// A connected QP's wire: its socket, transmit queue and receive state.
pub(super) struct Wire {
    pub(super) stream: Option<WireStream>,
    pub(super) dead: bool,
    pub(super) rx: RxState,
    pub(super) rxbuf: Vec<u8>,
    pub(super) rx_start: usize,
    pub(super) rx_end: usize,
    /// The next receive into `rxbuf` reads one header only.
    pub(super) rx_header_only: bool,
    pub(super) tx: VecDeque<TxChunk>,
    pub(super) tx_off: usize,
    pub(super) tx_queued: usize,
    pub(super) ctrl: VecDeque<Ctrl>,
    /// Fresh READ responses not yet fully written (responder resources in use).
    pub(super) reads_serving: u32,
}

impl Wire {
    pub(super) fn new(s: WireStream) -> Wire {
        Wire::new_opt(Some(s))
    }

    pub(super) fn new_opt(stream: Option<WireStream>) -> Wire {
        Wire {
            stream,
            dead: false,
            rx: RxState::Header,
            rxbuf: vec![0; RXBUF],
            rx_start: 0,
            rx_end: 0,
            rx_header_only: false,
            tx: VecDeque::new(),
            tx_off: 0,
            tx_queued: 0,
            ctrl: VecDeque::new(),
            reads_serving: 0,
        }
    }

    pub(super) fn dead() -> Wire {
        let mut w = Wire::new_opt(None);
        w.dead = true;
        w
    }

    pub(super) fn cut(&mut self) {
        if let Some(s) = self.stream.take() {
            s.shutdown();
        }
        self.dead = true;
        self.tx.clear();
        self.ctrl.clear();
        self.tx_queued = 0;
        self.tx_off = 0;
        self.reads_serving = 0;
    }

    pub(super) fn fd(&self) -> Option<RawFd> {
        if self.dead {
            None
        } else {
            self.stream.as_ref().map(|s| s.fd())
        }
    }

    pub(super) fn push_bytes(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        self.tx_queued += b.len();
        if let Some(TxChunk::Bytes(v)) = self.tx.back_mut() {
            if v.len() < 256 * 1024 {
                v.extend_from_slice(b);
                return;
            }
        }
        self.tx.push_back(TxChunk::Bytes(b.to_vec()));
    }

    pub(super) fn push_mem(&mut self, addr: u64, len: usize, key: u32, pdn: u32) {
        if len == 0 {
            return;
        }
        self.tx_queued += len;
        self.tx.push_back(TxChunk::Mem {
            addr,
            len,
            key,
            pdn,
        });
    }
}

pub(super) enum Io {
    Progress(usize),
    Blocked,
    Dead,
}

/// Most iovecs gathered into one `sendmsg` on a wire.
pub(super) const IOV_MAX: usize = 64;
/// What replaces the bytes of a region deregistered in the middle of a transfer.
pub(super) static ZEROS: [u8; RXBUF] = [0; RXBUF];

pub(super) fn sys_sendmsg(fd: RawFd, iov: &[libc::iovec]) -> Io {
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: the caller guarantees every iovec is readable for the call (Vecs we own, a static,
    // or registered memory checked under the MR read lock that the caller holds).
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n > 0 {
        Io::Progress(n as usize)
    } else if n < 0 {
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Io::Blocked,
            _ => Io::Dead,
        }
    } else {
        Io::Blocked
    }
}

pub(super) fn sys_recv(fd: RawFd, ptr: *mut u8, len: usize) -> Io {
    // SAFETY: the caller guarantees ptr..ptr+len is writable for the call (a Vec we own, or
    // registered memory checked under the MR read lock that the caller holds).
    let n = unsafe { libc::recv(fd, ptr as *mut libc::c_void, len, libc::MSG_DONTWAIT) };
    if n > 0 {
        Io::Progress(n as usize)
    } else if n == 0 {
        Io::Dead
    } else {
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Io::Blocked,
            _ => Io::Dead,
        }
    }
}

/// Writes the wire's transmit queue until it is empty, the socket blocks or `budget` bytes
/// went out. Returns the bytes written and whether the socket blocked (or the wire died).
///
/// Each system call gathers consecutive chunks (headers, copied payloads and registered memory)
/// into one `sendmsg`, so that a header and its payload travel in one segment and small packets
/// share system calls. Registered memory is checked against the MR table under its read lock,
/// held across the call: a deregistration waits for it, and then the NIC never touches the
/// memory again.
pub(super) fn write_tx(w: &mut Wire, mrs: &MrTable, budget: usize) -> (usize, bool) {
    let Some(fd) = w.fd() else {
        return (0, true);
    };
    let mut moved = 0;
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(IOV_MAX);
    loop {
        // A READ response whose last byte went out frees its responder resource before
        // anything else happens: its requester may already send the next READ.
        while let Some(TxChunk::ReadEnd) = w.tx.front() {
            w.reads_serving = w.reads_serving.saturating_sub(1);
            w.tx.pop_front();
        }
        if w.tx.is_empty() {
            break;
        }
        if moved >= budget {
            return (moved, false);
        }
        iov.clear();
        let mut want = 0usize;
        let guard = mrs.read();
        let mut off = w.tx_off;
        for c in w.tx.iter() {
            if iov.len() == IOV_MAX || want >= IO_CHUNK {
                break;
            }
            let room = IO_CHUNK - want;
            let (ptr, n) = match c {
                // Stop here: the resource is freed once the bytes before it are out (a marker
                // at the front was drained above).
                TxChunk::ReadEnd => break,
                TxChunk::Bytes(v) => {
                    let n = (v.len() - off).min(room);
                    (v[off..].as_ptr(), n)
                }
                TxChunk::Mem {
                    addr,
                    len,
                    key,
                    pdn,
                } => {
                    let n = (len - off).min(room);
                    let a = addr + off as u64;
                    if mr_ok(&guard, *key, *pdn, a, n as u64, Access::NONE) {
                        (a as *const u8, n)
                    } else {
                        // The MR went away mid-transfer: keep the framing, never touch it.
                        (ZEROS.as_ptr(), n.min(ZEROS.len()))
                    }
                }
            };
            let partial = off + n < c.len();
            off = 0;
            iov.push(libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: n,
            });
            want += n;
            if partial {
                // The rest of this chunk comes first in the next call.
                break;
            }
        }
        let r = sys_sendmsg(fd, &iov);
        drop(guard);
        match r {
            Io::Progress(n) => {
                moved += n;
                w.tx_queued -= n;
                let mut left = n;
                while left > 0 {
                    let front = w.tx.front().expect("bytes were queued");
                    let rest = front.len() - w.tx_off;
                    if left < rest {
                        w.tx_off += left;
                        break;
                    }
                    left -= rest;
                    w.tx.pop_front();
                    w.tx_off = 0;
                    while let Some(TxChunk::ReadEnd) = w.tx.front() {
                        w.reads_serving = w.reads_serving.saturating_sub(1);
                        w.tx.pop_front();
                    }
                }
                if n < want {
                    // The socket buffer is full.
                    return (moved, true);
                }
            }
            Io::Blocked => return (moved, true),
            Io::Dead => {
                w.cut();
                return (moved, true);
            }
        }
    }
    (moved, false)
}

/// Moves up to `n` bytes into `dest` through `io(ptr, len)`, segment by segment. A segment whose
/// MR fails the check (deregistered mid-transfer, bad key) marks the destination failed and the
/// rest goes to a sink: the NIC never touches memory that is not registered.
pub(super) fn deliver(
    dest: &mut RxDest,
    mrs: &MrTable,
    n: usize,
    mut io: impl FnMut(*mut u8, usize) -> Io,
) -> Io {
    let RxDest::Mem {
        segs,
        idx,
        off,
        pdn,
        need,
        failed,
    } = dest
    else {
        let mut sink = vec![0u8; n.min(RXBUF)];
        let k = sink.len();
        return io(sink.as_mut_ptr(), k);
    };
    let mut total = 0;
    while total < n {
        let seg = match segs.get(*idx) {
            Some(&(addr, len, key)) if !*failed => {
                Some((addr + *off as u64, (len - *off).min(n - total), key, len))
            }
            _ => None,
        };
        let (r, want, seg_len) = match seg {
            Some((a, k, key, len)) => {
                let guard = mrs.read();
                if !mr_ok(&guard, key, *pdn, a, k as u64, *need) {
                    *failed = true;
                    continue;
                }
                (io(a as *mut u8, k), k, Some(len))
            }
            None => {
                *failed = true;
                let mut sink = vec![0u8; (n - total).min(RXBUF)];
                let k = sink.len();
                (io(sink.as_mut_ptr(), k), k, None)
            }
        };
        match r {
            Io::Progress(got) => {
                total += got;
                if let Some(len) = seg_len {
                    *off += got;
                    if *off == len {
                        *idx += 1;
                        *off = 0;
                    }
                }
                if got < want {
                    break;
                }
            }
            other => {
                return if total > 0 {
                    Io::Progress(total)
                } else {
                    other
                }
            }
        }
    }
    Io::Progress(total)
}

/// Where a payload lands in local memory: the non-empty SGEs of a receive or a READ, written
/// under `LOCAL_WRITE`.
pub(super) fn local_dest(sges: &[Sge], pdn: u32) -> RxDest {
    RxDest::Mem {
        segs: sges
            .iter()
            .filter(|s| s.length > 0)
            .map(|s| (s.addr, s.length as usize, s.lkey))
            .collect(),
        idx: 0,
        off: 0,
        pdn,
        need: Access::LOCAL_WRITE,
        failed: false,
    }
}

//! A UDP endpoint on its I/O thread (libzmq `udp_engine_t` with its session): no connection,
//! no handshake, one socket pipe. Datagrams in become two frames on the pipe to the socket
//! (group or `"ip:port"` address with MORE, then the body); two frames from the socket become
//! one datagram out. The codec is [`crate::transport::datagram`]; a datagram that does not
//! parse, is too large or finds the pipe full is dropped and counted (and logged on stderr as
//! `rzmq.udp` lines in debug builds), never fatal.
//!
//! RADIO sends (connect), DISH receives (bind; what its pattern writes upstream, JOIN/LEAVE,
//! is dropped here: a UDP group is filtered by the DISH), DGRAM does both on one bound socket,
//! taking each datagram's destination from its address frame.

use std::io;
use std::net::SocketAddr;

use mio::{Interest, Token};

use super::{Fate, Io};
use crate::command::PeerPipe;
use crate::msg::Msg;
use crate::pipe::Target;
use crate::transport::datagram::{self, DatagramError, MAX_DATAGRAM};
use crate::transport::udp::UdpAddress;
use crate::zmtp::SocketType;

/// Datagrams read per readiness event before other connections get a turn.
const READ_BUDGET: usize = 256;

/// What an endpoint does with its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UdpRole {
    /// RADIO: sends `[group][body]` as grouped datagrams to the endpoint's address.
    Radio,
    /// DISH: receives grouped datagrams.
    Dish,
    /// DGRAM: `[address][body]` both ways, raw datagrams.
    Dgram,
}

impl UdpRole {
    /// The role of a socket type on UDP, `None` for types that cannot use it
    /// (`ENOCOMPATPROTO`).
    pub(crate) fn of(ty: SocketType) -> Option<UdpRole> {
        match ty {
            SocketType::Radio => Some(UdpRole::Radio),
            SocketType::Dish => Some(UdpRole::Dish),
            SocketType::Dgram => Some(UdpRole::Dgram),
            _ => None,
        }
    }

    /// Whether the endpoint binds (DISH, DGRAM) rather than connects (RADIO), as libzmq 4.3.5
    /// allows them.
    pub(crate) fn binds(self) -> bool {
        self != UdpRole::Radio
    }

    /// Whether the endpoint sends datagrams.
    pub(crate) fn sends(self) -> bool {
        self != UdpRole::Dish
    }

    /// Whether the endpoint receives datagrams.
    pub(crate) fn receives(self) -> bool {
        self != UdpRole::Radio
    }
}

/// Counts of what an endpoint dropped (kept for logs and tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drops {
    /// Datagrams in that did not parse or were too large.
    pub malformed: u64,
    /// Datagrams in dropped because the socket's pipe was full.
    pub full: u64,
    /// Messages out that could not become a datagram (bad address, too large, send error).
    pub unsendable: u64,
}

/// One UDP endpoint of a socket, on its I/O thread.
pub(crate) struct UdpSession {
    sock: mio::net::UdpSocket,
    role: UdpRole,
    target: SocketAddr,
    endpoint: String,
    pipe: PeerPipe,
    /// The first frame (group or address) of the message being read from the pipe.
    head: Option<Msg>,
    /// A datagram the kernel would not take yet (the socket was not writable).
    pending: Option<(Vec<u8>, SocketAddr)>,
    buf: Vec<u8>,
    out: Vec<u8>,
    drops: Drops,
    log: bool,
}

impl UdpSession {
    /// A session over an opened socket (see [`crate::transport::udp::open`]).
    pub(crate) fn new(
        sock: std::net::UdpSocket,
        addr: &UdpAddress,
        role: UdpRole,
        endpoint: String,
        pipe: PeerPipe,
    ) -> UdpSession {
        UdpSession {
            sock: mio::net::UdpSocket::from_std(sock),
            role,
            target: addr.target,
            endpoint,
            pipe,
            head: None,
            pending: None,
            // One byte more than the largest datagram: a read that fills it was too large.
            buf: vec![0; MAX_DATAGRAM + 1],
            out: Vec::with_capacity(MAX_DATAGRAM),
            drops: Drops::default(),
            log: cfg!(debug_assertions),
        }
    }

    /// Registers the socket and points the pipe's notifications at this session.
    pub(crate) fn start(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let t = Target {
            notify: r.notify(),
            token,
        };
        self.pipe.to_socket.set_target(t.clone());
        self.pipe.from_socket.set_target(t);
        let interest = match self.role {
            UdpRole::Radio => Interest::WRITABLE,
            UdpRole::Dish => Interest::READABLE,
            UdpRole::Dgram => Interest::READABLE | Interest::WRITABLE,
        };
        if r
            .registry()
            .register(&mut self.sock, Token(token as usize), interest)
            .is_err()
        {
            return Fate::Remove;
        }
        self.on_pipe()
    }

    /// The socket is readable or writable; true in the result's second place when the read
    /// stopped on its budget (run it again after the other connections).
    pub(crate) fn on_ready(&mut self, readable: bool, writable: bool) -> (Fate, bool) {
        let mut again = false;
        if readable && self.role.receives() {
            again = self.read_datagrams();
        }
        if writable && self.role.sends() {
            if let Fate::Remove = self.pump_out() {
                return (Fate::Remove, false);
            }
        }
        (self.check_pipe(), again)
    }

    /// A pipe needs attention: send what the socket queued, end when the socket dropped it.
    pub(crate) fn on_pipe(&mut self) -> Fate {
        if let Fate::Remove = self.pump_out() {
            return Fate::Remove;
        }
        self.check_pipe()
    }

    /// The socket closed: what is queued goes out if the kernel takes it now (UDP never
    /// waits for a peer), then the endpoint ends.
    pub(crate) fn socket_gone(&mut self) -> Fate {
        let _ = self.pump_out();
        Fate::Remove
    }

    /// Deregisters the socket before the session is dropped (its pipe ends close with it).
    pub(crate) fn teardown(&mut self, r: &mut impl Io) {
        let _ = r.registry().deregister(&mut self.sock);
        if self.log {
            eprintln!(
                "rzmq.udp[{}]: {} closed, dropped {:?}",
                std::process::id(),
                self.endpoint,
                self.drops
            );
        }
    }

    /// What was dropped so far.
    #[cfg(test)]
    pub(crate) fn drops(&self) -> Drops {
        self.drops
    }

    fn check_pipe(&mut self) -> Fate {
        if self.pipe.from_socket.is_finished() || self.pipe.to_socket.reader_closed() {
            Fate::Remove
        } else {
            Fate::Keep
        }
    }

    fn dropped(&mut self, what: &str, why: &dyn std::fmt::Debug) {
        if self.log {
            eprintln!(
                "rzmq.udp[{}]: {}: dropped {what}: {why:?}",
                std::process::id(),
                self.endpoint
            );
        }
    }

    /// Reads datagrams until the kernel has none or the budget is spent (true).
    fn read_datagrams(&mut self) -> bool {
        for _ in 0..READ_BUDGET {
            let (n, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.pipe.to_socket.flush();
                    return false;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ICMP errors (a unicast peer not listening) surface here: not fatal.
                    self.dropped("a read", &e);
                    continue;
                }
            };
            self.deliver(n, from);
        }
        self.pipe.to_socket.flush();
        true
    }

    /// Hands the datagram in `buf[..n]` to the socket's pipe.
    fn deliver(&mut self, n: usize, from: SocketAddr) {
        let dgram = &self.buf[..n];
        let frames = if self.role == UdpRole::Dgram {
            if n > MAX_DATAGRAM {
                Err(DatagramError::TooLarge)
            } else {
                datagram::address_frame(from)
                    .map(|a| (Msg::from_vec(a), Msg::copy_from(dgram)))
                    .ok_or(DatagramError::BadAddress)
            }
        } else {
            datagram::decode_grouped(dgram).map(|(g, b)| (Msg::copy_from(g), Msg::copy_from(b)))
        };
        let (mut head, body) = match frames {
            Ok(f) => f,
            Err(e) => {
                self.drops.malformed += 1;
                self.dropped("a datagram", &e);
                return;
            }
        };
        head.set_more(true);
        let w = &mut self.pipe.to_socket;
        match w.try_write_deferred(head) {
            // The rest of a message always fits once its first frame did.
            Ok(()) => w.write_deferred(body),
            Err((_, e)) => {
                self.drops.full += 1;
                self.dropped("a datagram", &e);
            }
        }
    }

    /// Moves messages from the socket's pipe to the socket (a DISH drops them: its JOIN and
    /// LEAVE are not for the wire). `Remove` on a fatal socket error.
    fn pump_out(&mut self) -> Fate {
        if let Some((d, to)) = self.pending.take() {
            match self.sock.send_to(&d, to) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.pending = Some((d, to));
                    return Fate::Keep;
                }
                Err(e) => {
                    self.drops.unsendable += 1;
                    self.dropped("a datagram", &e);
                }
                Ok(_) => {}
            }
        }
        while let Some(m) = self.pipe.from_socket.read() {
            if !self.role.sends() {
                continue;
            }
            let Some(head) = self.head.take() else {
                if m.more() {
                    self.head = Some(m);
                } else {
                    // A lone frame is no datagram (the patterns never write one).
                    self.drops.unsendable += 1;
                }
                continue;
            };
            if m.more() {
                // More than two frames: not a datagram; skip to the message's end.
                self.drops.unsendable += 1;
                self.dropped("a message", &"more than two frames");
                while self.pipe.from_socket.read().is_some_and(|f| f.more()) {}
                continue;
            }
            let to = match self.role {
                UdpRole::Dgram => match datagram::parse_address(head.data()) {
                    Ok(a) => a,
                    Err(e) => {
                        self.drops.unsendable += 1;
                        self.dropped("a message", &e);
                        continue;
                    }
                },
                _ => self.target,
            };
            let built = if self.role == UdpRole::Dgram {
                if m.len() > MAX_DATAGRAM {
                    Err(DatagramError::TooLarge)
                } else {
                    self.out.clear();
                    self.out.extend_from_slice(m.data());
                    Ok(())
                }
            } else {
                datagram::encode_grouped(head.data(), m.data(), &mut self.out)
            };
            if let Err(e) = built {
                self.drops.unsendable += 1;
                self.dropped("a message", &e);
                continue;
            }
            match self.sock.send_to(&self.out, to) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.pending = Some((self.out.clone(), to));
                    return Fate::Keep;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.pending = Some((self.out.clone(), to));
                }
                Err(e) => {
                    // Unreachable network, refused by a firewall, ICMP echo of an earlier
                    // datagram: UDP is lossy, the endpoint goes on.
                    self.drops.unsendable += 1;
                    self.dropped("a datagram", &e);
                }
            }
        }
        Fate::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipe;

    fn pair() -> (PeerPipe, crate::pipe::Writer, crate::pipe::Reader) {
        let (to_peer_w, to_peer_r) = pipe::pipe_with(1000, false);
        let (from_peer_w, from_peer_r) = pipe::pipe_with(2, false);
        (
            PeerPipe {
                to_socket: from_peer_w,
                from_socket: to_peer_r,
            },
            to_peer_w,
            from_peer_r,
        )
    }

    fn dish() -> (UdpSession, std::net::UdpSocket, crate::pipe::Reader) {
        let addr = crate::transport::udp::resolve("127.0.0.1:0", true, false).unwrap();
        let sock = std::net::UdpSocket::bind(addr.bind).unwrap();
        sock.set_nonblocking(true).unwrap();
        let local = sock.local_addr().unwrap();
        let (p, _w, r) = pair();
        let s = UdpSession::new(sock, &addr, UdpRole::Dish, "udp://x".into(), p);
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(local).unwrap();
        (s, tx, r)
    }

    fn read_all(s: &mut UdpSession) {
        // Datagrams over loopback are queued by the time send returns; read until empty.
        while s.read_datagrams() {}
    }

    #[test]
    fn malformed_and_oversize_datagrams_are_dropped_and_counted() {
        let (mut s, tx, mut r) = dish();
        tx.send(b"").unwrap();
        tx.send(b"\x09short").unwrap();
        tx.send(&vec![0u8; MAX_DATAGRAM + 10]).unwrap();
        tx.send(b"\x01gbody").unwrap();
        read_all(&mut s);
        assert_eq!(s.drops().malformed, 3);
        let g = r.read().unwrap();
        assert_eq!((g.data(), g.more()), (&b"g"[..], true));
        let b = r.read().unwrap();
        assert_eq!((b.data(), b.more()), (&b"body"[..], false));
        assert!(r.read().is_none());
    }

    #[test]
    fn a_full_pipe_drops_whole_datagrams() {
        let (mut s, tx, mut r) = dish();
        for i in 0..5u8 {
            tx.send(&[1, b'g', i]).unwrap();
        }
        read_all(&mut s);
        // HWM 2: two messages delivered whole, three dropped whole.
        assert_eq!(s.drops().full, 3);
        for i in 0..2u8 {
            assert_eq!(r.read().unwrap().data(), b"g");
            assert_eq!(r.read().unwrap().data(), &[i]);
        }
        assert!(r.read().is_none());
    }
}

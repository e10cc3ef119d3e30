//! A user-space TCP fault proxy: listens on 127.0.0.1, forwards every accepted connection to a
//! target, and on command delays, stalls, cuts (mid-frame: N more bytes of one direction, then
//! both sides closed) or resets (SO_LINGER 0 close, an RST to both sides) its connections.
//!
//! With [`Framing::SoftWire`] it parses the soft RDMA provider's wire (a 40-byte hello from the
//! dialer, then 48-byte packet headers, each followed by `len` payload bytes) and can drop,
//! duplicate or swap (reorder) whole data packets.
//!
//! Threads and `std::net` only: one accept thread, two pump threads per connection. Every
//! thread polls its flags every few milliseconds, so dropping the proxy ends them all and closes
//! every socket it holds.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which way bytes go through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the connecting peer to the target.
    Up,
    /// From the target to the connecting peer.
    Down,
}

/// How the proxy sees the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Opaque bytes (ZMTP over tcp).
    Raw,
    /// The soft provider's wire: hello, then header + payload packets.
    SoftWire,
}

/// A packet-level fault for [`Framing::SoftWire`], applied to the next data packet (SEND,
/// WRITE, READ request or READ response) in either direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketFault {
    /// Never forward it.
    Drop,
    /// Forward it twice.
    Duplicate,
    /// Hold it and forward it after the packet behind it (on the same wire).
    Swap,
    /// At the next READ response with a payload, forward its header and half its payload,
    /// then close the wire (FIN both sides): a QP error in the middle of an RDMA READ. Data
    /// packets before it pass.
    CutRead,
}

const PKT_HDR: usize = 48;
const PKT_HELLO: usize = 40;

#[derive(Default)]
struct Ctl {
    /// Extra latency per forwarded chunk (ms).
    delay_ms: AtomicU64,
    /// Nothing is forwarded before this instant (ms since `epoch`).
    stall_until_ms: AtomicU64,
    /// Armed mid-stream cut: direction (1 up, 2 down) and bytes still to forward.
    cut: Mutex<Option<(Dir, usize)>>,
    /// Armed packet faults (SoftWire).
    packet: Mutex<Vec<PacketFault>>,
    /// Packet faults done.
    packets_faulted: AtomicUsize,
    stop: AtomicBool,
}

struct Conn {
    client: TcpStream,
    server: TcpStream,
    dead: AtomicBool,
}

impl Conn {
    /// Ends the connection with a FIN to both sides.
    fn close(&self) {
        self.dead.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }

    /// Ends the connection with an RST to both sides: SO_LINGER 0, then the last owner's close.
    fn reset(&self) {
        for s in [&self.client, &self.server] {
            set_linger_zero(s);
        }
        self.dead.store(true, Ordering::SeqCst);
    }
}

fn set_linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid fd and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// The proxy. Dropping it stops every thread and closes every connection.
pub struct Proxy {
    addr: SocketAddr,
    ctl: Arc<Ctl>,
    conns: Arc<Mutex<Vec<Arc<Conn>>>>,
    accepted: Arc<AtomicUsize>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
    epoch: Instant,
}

impl Proxy {
    /// A proxy on a fresh 127.0.0.1 port forwarding to `target`.
    pub fn start(target: SocketAddr, framing: Framing) -> Proxy {
        Proxy::start_on(TcpListener::bind("127.0.0.1:0").unwrap(), target, framing)
    }

    /// A proxy accepting on `listener` and forwarding to `target`.
    pub fn start_on(listener: TcpListener, target: SocketAddr, framing: Framing) -> Proxy {
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let ctl = Arc::new(Ctl::default());
        let conns: Arc<Mutex<Vec<Arc<Conn>>>> = Arc::default();
        let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accepted = Arc::new(AtomicUsize::new(0));
        let epoch = Instant::now();
        let (c2, cs2, th2, acc2) = (
            ctl.clone(),
            conns.clone(),
            threads.clone(),
            accepted.clone(),
        );
        let accept = std::thread::spawn(move || {
            while !c2.stop.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((s, _)) => s,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    Err(_) => continue,
                };
                let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(1)) else {
                    set_linger_zero(&client);
                    continue;
                };
                acc2.fetch_add(1, Ordering::SeqCst);
                client.set_nonblocking(false).unwrap();
                for s in [&client, &server] {
                    s.set_nodelay(true).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
                }
                let conn = Arc::new(Conn {
                    client,
                    server,
                    dead: AtomicBool::new(false),
                });
                let mut list = cs2.lock().unwrap();
                list.retain(|c| !c.dead.load(Ordering::SeqCst));
                list.push(conn.clone());
                drop(list);
                let mut th = th2.lock().unwrap();
                th.retain(|h| !h.is_finished());
                for dir in [Dir::Up, Dir::Down] {
                    let (conn, ctl) = (conn.clone(), c2.clone());
                    th.push(std::thread::spawn(move || {
                        pump(&conn, &ctl, dir, framing, epoch)
                    }));
                }
            }
        });
        Proxy {
            addr,
            ctl,
            conns,
            accepted,
            threads,
            accept: Some(accept),
            epoch,
        }
    }

    /// The address peers connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections it accepted (and forwarded) so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Adds `ms` of latency to every chunk forwarded from now on.
    pub fn delay(&self, ms: u64) {
        self.ctl.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Forwards nothing, either way, for `d` (connections stay open; bytes wait).
    pub fn stall(&self, d: Duration) {
        let until = (self.epoch.elapsed() + d).as_millis() as u64;
        self.ctl.stall_until_ms.store(until, Ordering::SeqCst);
    }

    /// After `bytes` more bytes going `dir` (on whichever connection carries them), closes that
    /// connection on both sides: the frame then in flight is cut in the middle.
    pub fn cut_after(&self, dir: Dir, bytes: usize) {
        *self.ctl.cut.lock().unwrap() = Some((dir, bytes));
    }

    /// Whether an armed [`Proxy::cut_after`] has happened.
    pub fn cut_done(&self) -> bool {
        self.ctl.cut.lock().unwrap().is_none()
    }

    /// Resets every open connection (RST to both sides).
    pub fn reset_all(&self) -> usize {
        let list = std::mem::take(&mut *self.conns.lock().unwrap());
        let n = list
            .iter()
            .filter(|c| !c.dead.load(Ordering::SeqCst))
            .count();
        for c in &list {
            c.reset();
        }
        n
    }

    /// Arms packet faults, applied in order to the next data packets (SoftWire only).
    pub fn packet_faults(&self, faults: &[PacketFault]) {
        self.ctl.packet.lock().unwrap().extend_from_slice(faults);
    }

    /// Disarms the packet faults not applied yet.
    pub fn clear_packet_faults(&self) {
        self.ctl.packet.lock().unwrap().clear();
    }

    /// Packet faults applied so far.
    pub fn packets_faulted(&self) -> usize {
        self.ctl.packets_faulted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.ctl.stop.store(true, Ordering::SeqCst);
        for c in std::mem::take(&mut *self.conns.lock().unwrap()) {
            c.close();
        }
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for h in std::mem::take(&mut *self.threads.lock().unwrap()) {
            let _ = h.join();
        }
    }
}

/// Reads into `buf` until it is full; `false` when the connection ended first.
fn read_full(src: &TcpStream, buf: &mut [u8], conn: &Conn, ctl: &Ctl) -> bool {
    let mut got = 0;
    while got < buf.len() {
        if conn.dead.load(Ordering::SeqCst) || ctl.stop.load(Ordering::SeqCst) {
            return false;
        }
        match (&*src).read(&mut buf[got..]) {
            Ok(0) => return false,
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Waits out a stall and applies the delay; `false` when the connection ended meanwhile.
fn hold(conn: &Conn, ctl: &Ctl, epoch: Instant) -> bool {
    loop {
        if conn.dead.load(Ordering::SeqCst) || ctl.stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = epoch.elapsed().as_millis() as u64;
        if now >= ctl.stall_until_ms.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let d = ctl.delay_ms.load(Ordering::SeqCst);
    if d > 0 {
        std::thread::sleep(Duration::from_millis(d));
    }
    true
}

/// Forwards `data` going `dir`, honouring an armed cut; `false` when the connection ended.
fn forward(dst: &TcpStream, data: &[u8], dir: Dir, conn: &Conn, ctl: &Ctl) -> bool {
    let mut cut_now = None;
    {
        let mut cut = ctl.cut.lock().unwrap();
        if let Some((d, left)) = *cut {
            if d == dir {
                if data.len() >= left {
                    cut_now = Some(left);
                    *cut = None;
                } else {
                    *cut = Some((d, left - data.len()));
                }
            }
        }
    }
    let n = cut_now.unwrap_or(data.len());
    if (&*dst).write_all(&data[..n]).is_err() {
        return false;
    }
    if cut_now.is_some() {
        let _ = (&*dst).flush();
        conn.close();
        return false;
    }
    true
}

fn pump(conn: &Conn, ctl: &Ctl, dir: Dir, framing: Framing, epoch: Instant) {
    let (src, dst) = match dir {
        Dir::Up => (&conn.client, &conn.server),
        Dir::Down => (&conn.server, &conn.client),
    };
    match framing {
        Framing::Raw => {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                if conn.dead.load(Ordering::SeqCst) || ctl.stop.load(Ordering::SeqCst) {
                    break;
                }
                let n = match (&*src).read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        continue
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                if !hold(conn, ctl, epoch) || !forward(dst, &buf[..n], dir, conn, ctl) {
                    break;
                }
            }
        }
        Framing::SoftWire => pump_packets(src, dst, conn, ctl, dir, epoch),
    }
    // One side ended: end the other too (a FIN, or the RST armed by `reset`).
    if !conn.dead.swap(true, Ordering::SeqCst) {
        let _ = conn.client.shutdown(Shutdown::Both);
        let _ = conn.server.shutdown(Shutdown::Both);
    }
}

fn pump_packets(src: &TcpStream, dst: &TcpStream, conn: &Conn, ctl: &Ctl, dir: Dir, e: Instant) {
    if dir == Dir::Up {
        let mut hello = [0u8; PKT_HELLO];
        if !read_full(src, &mut hello, conn, ctl) || !forward(dst, &hello, dir, conn, ctl) {
            return;
        }
    }
    let mut held: Option<Vec<u8>> = None;
    loop {
        let mut pkt = vec![0u8; PKT_HDR];
        if !read_full(src, &mut pkt, conn, ctl) {
            return;
        }
        let kind = pkt[2];
        let len = u32::from_le_bytes([pkt[8], pkt[9], pkt[10], pkt[11]]) as usize;
        pkt.resize(PKT_HDR + len, 0);
        if !read_full(src, &mut pkt[PKT_HDR..], conn, ctl) || !hold(conn, ctl, e) {
            return;
        }
        let data = (1..=4).contains(&kind);
        let fault = if data {
            let mut f = ctl.packet.lock().unwrap();
            match f.first() {
                Some(PacketFault::CutRead) if kind != 4 || len == 0 => None,
                Some(_) => Some(f.remove(0)),
                None => None,
            }
        } else {
            None
        };
        if fault == Some(PacketFault::CutRead) {
            ctl.packets_faulted.fetch_add(1, Ordering::SeqCst);
            let _ = (&*dst).write_all(&pkt[..PKT_HDR + len / 2]);
            conn.close();
            return;
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        match fault {
            Some(PacketFault::Drop) => {}
            Some(PacketFault::Duplicate) => {
                out.push(pkt.clone());
                out.push(pkt);
            }
            Some(PacketFault::Swap) => held = Some(pkt),
            Some(PacketFault::CutRead) => unreachable!(),
            None => {
                out.push(pkt);
                if data {
                    if let Some(h) = held.take() {
                        out.push(h);
                    }
                }
            }
        }
        if fault.is_some() {
            ctl.packets_faulted.fetch_add(1, Ordering::SeqCst);
        }
        for p in out {
            if !forward(dst, &p, dir, conn, ctl) {
                return;
            }
        }
    }
}

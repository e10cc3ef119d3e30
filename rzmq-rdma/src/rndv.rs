//! Rendezvous for large frames, sans-IO: descriptor through the ring, RDMA READ by the receiver
//! into a registered pool buffer, cumulative FIN back, and only then the sender's buffer is
//! released.
//!
//! Sender ([`RndvSender`]): a frame above the threshold is registered (through
//! [`crate::mr_cache`]), described by a [`Descriptor`] (token, address, length, rkey) sent as a
//! ring record, and held until the receiver's FIN covers its token. Tokens are consecutive from
//! 1 and the receiver completes READs in order, so a FIN is a count: the receiver's
//! `rndv_done` credit ([`crate::ring::Credits`]); FIN(token) means every token up to it is done.
//!
//! Receiver ([`Inbox`]): keeps arriving frames in order, eager ones ready at once, rendezvous
//! ones waiting for a pool buffer, then for their READ; hands them out strictly in arrival order.
//! [`Pool`] hands out registered buffers and turns a filled one into a [`Msg`] that points into
//! it (no copy) and returns it to the pool when the application drops the message.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use rzmq_core::msg::Msg;

use crate::mr_cache::Registrar;
use crate::provider::{self, Access, Mr};
use crate::region::Region;
use crate::wire::{self, Layout, Reader, WireError, Writer};

/// Default threshold above which frames travel by rendezvous (`RZMQ_RDMA_RNDV_THRESHOLD`).
pub(crate) const DEFAULT_THRESHOLD: usize = crate::settings::DEFAULT_RNDV_THRESHOLD;

/// Bytes of an encoded descriptor.
pub(crate) const DESC_LEN: usize = 32;

/// Where the receiver READs a frame from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptor {
    /// Sequence number of the rendezvous (1, 2, ...).
    pub token: u64,
    /// Address in the sender.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The sender MR's rkey.
    pub rkey: u32,
}

impl Layout for Descriptor {
    const NAME: &'static str = "rendezvous descriptor";

    fn encoded_len(&self) -> usize {
        DESC_LEN
    }

    /// token, addr, len (`u64` each), rkey, 4 reserved bytes (sent zero, ignored on receipt).
    fn encode(&self, w: &mut Writer<'_>) {
        w.u64(self.token);
        w.u64(self.addr);
        w.u64(self.len);
        w.u32(self.rkey);
        w.u32(0);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Descriptor, WireError> {
        let d = Descriptor {
            token: r.u64()?,
            addr: r.u64()?,
            len: r.u64()?,
            rkey: r.u32()?,
        };
        r.u32()?;
        Ok(d)
    }
}

impl Descriptor {
    /// The record's bytes.
    pub(crate) fn encode(&self) -> [u8; DESC_LEN] {
        let mut b = [0u8; DESC_LEN];
        Layout::encode(self, &mut Writer::new(&mut b));
        b
    }

    /// Parses a whole record ([`Descriptor::encode`]'s output, no byte more or less).
    pub(crate) fn decode(b: &[u8]) -> Result<Descriptor, RndvError> {
        Ok(wire::from_bytes(b)?)
    }
}

/// Rendezvous errors: the peer broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RndvError {
    /// Out-of-order token, FIN beyond what was sent, bad descriptor.
    Protocol(&'static str),
    /// A descriptor that does not decode.
    Wire(WireError),
}

impl fmt::Display for RndvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RndvError::Protocol(w) => write!(f, "rendezvous protocol violation: {w}"),
            RndvError::Wire(e) => write!(f, "rendezvous protocol violation: {e}"),
        }
    }
}

impl std::error::Error for RndvError {}

impl From<WireError> for RndvError {
    fn from(e: WireError) -> RndvError {
        RndvError::Wire(e)
    }
}

/// The sender's side: holds each frame (`T`: the message and its registration) until its FIN.
pub(crate) struct RndvSender<T> {
    next: u64,
    in_flight: VecDeque<(u64, u64, T)>,
    bytes: u64,
}

impl<T> Default for RndvSender<T> {
    fn default() -> Self {
        RndvSender {
            next: 1,
            in_flight: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<T> RndvSender<T> {
    /// An idle sender.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The token the next [`RndvSender::start`] will use.
    pub(crate) fn next_token(&self) -> u64 {
        self.next
    }

    /// Holds `hold` under the next token and returns its descriptor.
    pub(crate) fn start(&mut self, hold: T, addr: u64, len: u64, rkey: u32) -> Descriptor {
        let token = self.next;
        self.next += 1;
        self.in_flight.push_back((token, len, hold));
        self.bytes += len;
        Descriptor {
            token,
            addr,
            len,
            rkey,
        }
    }

    /// The receiver has completed `done` rendezvous in total: returns the holds to release, in
    /// order.
    pub(crate) fn on_fin(&mut self, done: u64) -> Result<Vec<T>, RndvError> {
        if done >= self.next {
            return Err(RndvError::Protocol("FIN for a token never sent"));
        }
        let mut out = Vec::new();
        while self.in_flight.front().is_some_and(|(t, _, _)| *t <= done) {
            let (_, len, hold) = self.in_flight.pop_front().expect("front checked");
            self.bytes -= len;
            out.push(hold);
        }
        Ok(out)
    }

    /// Frames waiting for their FIN.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Bytes of the frames waiting for their FIN.
    pub(crate) fn in_flight_bytes(&self) -> u64 {
        self.bytes
    }

    /// The connection is gone: every hold, to be released.
    #[cfg(test)] // Only the unit tests call it; the data path never does.
    pub(crate) fn abort(&mut self) -> Vec<T> {
        self.bytes = 0;
        self.in_flight.drain(..).map(|(_, _, t)| t).collect()
    }
}

enum Slot<M, B> {
    Ready(M),
    Rndv {
        desc: Descriptor,
        flags: u8,
        buf: Option<B>,
        done: bool,
    },
}

/// The receiver's in-order queue of arriving frames.
pub(crate) struct Inbox<M, B> {
    q: VecDeque<Slot<M, B>>,
    expect: u64,
    reading: usize,
    max_reads: usize,
    reading_bytes: u64,
    max_read_bytes: u64,
    completed: u64,
}

impl<M, B> Inbox<M, B> {
    /// An empty inbox allowing `max_reads` READs in flight.
    pub(crate) fn new(max_reads: usize) -> Self {
        Inbox {
            q: VecDeque::new(),
            expect: 1,
            reading: 0,
            max_reads: max_reads.max(1),
            reading_bytes: 0,
            max_read_bytes: u64::MAX,
            completed: 0,
        }
    }

    /// Bounds the bytes being read at once too (one READ is always allowed, whatever its size).
    pub(crate) fn set_max_read_bytes(&mut self, max: u64) {
        self.max_read_bytes = max;
    }

    /// Frames held (ready or not).
    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }

    /// True when nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// An eager frame.
    pub(crate) fn push_ready(&mut self, m: M) {
        self.q.push_back(Slot::Ready(m));
    }

    /// A rendezvous descriptor (tokens must arrive in order).
    pub(crate) fn push_rndv(&mut self, desc: Descriptor, flags: u8) -> Result<(), RndvError> {
        if desc.token != self.expect {
            return Err(RndvError::Protocol("rendezvous token out of order"));
        }
        self.expect += 1;
        self.q.push_back(Slot::Rndv {
            desc,
            flags,
            buf: None,
            done: false,
        });
        Ok(())
    }

    /// The next READ to post, in token order: allocates its buffer with `alloc` (`None`: no
    /// buffer now, retry later). Returns the descriptor and the buffer to read into.
    pub(crate) fn next_read(
        &mut self,
        mut alloc: impl FnMut(&Descriptor) -> Option<B>,
    ) -> Option<(Descriptor, &B)> {
        if self.reading >= self.max_reads {
            return None;
        }
        let slot = self
            .q
            .iter_mut()
            .find(|s| matches!(s, Slot::Rndv { buf: None, .. }))?;
        let Slot::Rndv { desc, buf, .. } = slot else {
            return None;
        };
        if self.reading > 0 && self.reading_bytes.saturating_add(desc.len) > self.max_read_bytes {
            return None;
        }
        *buf = Some(alloc(desc)?);
        self.reading += 1;
        self.reading_bytes += desc.len;
        Some((*desc, buf.as_ref().expect("just set")))
    }

    /// The READ for `token` completed (READs complete in posting order).
    pub(crate) fn on_read_done(&mut self, token: u64) -> Result<(), RndvError> {
        let slot = self.q.iter_mut().find(|s| {
            matches!(
                s,
                Slot::Rndv {
                    buf: Some(_),
                    done: false,
                    ..
                }
            )
        });
        match slot {
            Some(Slot::Rndv { desc, done, .. }) if desc.token == token => {
                *done = true;
                self.reading -= 1;
                self.reading_bytes -= desc.len;
                self.completed += 1;
                Ok(())
            }
            _ => Err(RndvError::Protocol("READ completion out of order")),
        }
    }

    /// Rendezvous completed in total (the FIN count).
    #[cfg(test)] // Only the unit tests call it; the data path never does.
    pub(crate) fn completed(&self) -> u64 {
        self.completed
    }

    /// The next frame in arrival order if it is ready; a finished rendezvous becomes a message
    /// through `finish(descriptor, flags, buffer)`.
    pub(crate) fn pop(&mut self, finish: impl FnOnce(Descriptor, u8, B) -> M) -> Option<M> {
        match self.q.front()? {
            Slot::Ready(_) => match self.q.pop_front() {
                Some(Slot::Ready(m)) => Some(m),
                _ => None,
            },
            Slot::Rndv { done: true, .. } => match self.q.pop_front() {
                Some(Slot::Rndv {
                    desc,
                    flags,
                    buf: Some(b),
                    ..
                }) => Some(finish(desc, flags, b)),
                _ => None,
            },
            Slot::Rndv { .. } => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Receive pool
// ---------------------------------------------------------------------------------------------

/// A registered buffer from the [`Pool`].
pub(crate) struct PoolBuf {
    // Declared first: deregistered before the region is freed.
    mr: Arc<dyn Mr>,
    region: Region,
}

impl PoolBuf {
    /// Start address.
    pub(crate) fn addr(&self) -> u64 {
        self.region.addr()
    }

    /// Capacity.
    pub(crate) fn len(&self) -> usize {
        self.region.len()
    }

    /// Local key for READ destinations.
    pub(crate) fn lkey(&self) -> u32 {
        self.mr.lkey()
    }
}

struct PoolInner {
    free: HashMap<usize, Vec<PoolBuf>>,
    total: usize,
    out: usize,
}

struct PoolShared {
    reg: Box<dyn Registrar>,
    inner: Mutex<PoolInner>,
    max_bytes: usize,
    on_release: Option<Box<dyn Fn() + Send + Sync>>,
}

impl PoolShared {
    fn lock(&self) -> MutexGuard<'_, PoolInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Registered receive buffers for rendezvous READs, in power-of-two classes from 64 KiB, bounded
/// in total bytes. Buffers come back when the application drops the message built on them.
#[derive(Clone)]
pub(crate) struct Pool {
    shared: Arc<PoolShared>,
}

/// Pool counters.
#[cfg(test)] // Only the unit tests read them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PoolStats {
    /// Bytes allocated (free or lent).
    pub total: usize,
    /// Bytes lent out.
    pub out: usize,
}

fn class_of(len: usize) -> usize {
    len.max(64 * 1024).next_power_of_two()
}

impl Pool {
    /// A pool registering through `reg`, holding at most `max_bytes` (one buffer is always
    /// allowed, whatever its size, so any frame can be received); `on_release` runs (on any
    /// thread) when a buffer returns.
    pub(crate) fn new(
        reg: Box<dyn Registrar>,
        max_bytes: usize,
        on_release: Option<Box<dyn Fn() + Send + Sync>>,
    ) -> Pool {
        Pool {
            shared: Arc::new(PoolShared {
                reg,
                inner: Mutex::new(PoolInner {
                    free: HashMap::new(),
                    total: 0,
                    out: 0,
                }),
                max_bytes,
                on_release,
            }),
        }
    }

    /// A buffer of at least `len` bytes: a free one of its class, else a new registration (over
    /// the bound too: the bound limits what is kept for reuse). `Ok(None)` is not returned today;
    /// callers still handle it.
    pub(crate) fn alloc(&self, len: usize) -> provider::Result<Option<PoolBuf>> {
        let class = class_of(len);
        let mut g = self.shared.lock();
        if let Some(b) = g.free.get_mut(&class).and_then(|v| v.pop()) {
            g.out += class;
            return Ok(Some(b));
        }
        // Make room by dropping free buffers of other classes.
        while g.total + class > self.shared.max_bytes {
            let Some(k) = g.free.iter().find(|(_, v)| !v.is_empty()).map(|(k, _)| *k) else {
                break;
            };
            if let Some(b) = g.free.get_mut(&k).and_then(|v| v.pop()) {
                g.total -= k;
                drop(b);
            }
        }
        // Over the bound with buffers lent out: allocate anyway. The application may hold
        // received frames as long as it likes (a multipart message larger than the pool is only
        // handed over whole), so refusing here could wait forever; the bound applies to the free
        // buffers kept for reuse (trimmed when buffers come back), and what is lent out is bounded
        // by the socket's high-water mark, as a tcp receive's allocations are.
        let region = Region::new(class);
        // SAFETY: the region lives inside the PoolBuf together with its MR and is dropped after
        // it (field order), so the registration never outlives the memory.
        let mr = unsafe {
            self.shared
                .reg
                .register(region.as_ptr(), class, Access::LOCAL_WRITE)
        }?;
        g.total += class;
        g.out += class;
        Ok(Some(PoolBuf { mr, region }))
    }

    /// A message over the first `len` bytes of `buf` (no copy); the buffer returns to the pool
    /// when the last handle of the message is dropped.
    pub(crate) fn msg_of(&self, buf: PoolBuf, len: usize, flags: u8) -> Msg {
        assert!(len <= buf.len());
        let ptr = buf.region.as_ptr();
        let shared = self.shared.clone();
        let release = Box::new(move || {
            let class = buf.len();
            let mut g = shared.lock();
            g.out -= class;
            if g.total > shared.max_bytes {
                // Above the bound: give the memory back instead of keeping it for reuse.
                g.total -= class;
                drop(g);
                drop(buf);
            } else {
                g.free.entry(class).or_default().push(buf);
                drop(g);
            }
            if let Some(f) = &shared.on_release {
                f();
            }
        });
        // SAFETY: ptr..ptr+len lies in the region owned by `buf`, which the release closure
        // keeps alive until the message's last owner runs it; the READ into it has completed.
        let mut m = unsafe { Msg::from_external(ptr, len, Some(release)) };
        m.set_more(flags & rzmq_core::msg::MSG_MORE != 0);
        m.set_command(flags & rzmq_core::msg::MSG_COMMAND != 0);
        m
    }

    /// Returns a buffer that was not turned into a message (a failed or abandoned READ).
    #[cfg(test)] // Only the unit tests call it; the data path never does.
    pub(crate) fn put(&self, buf: PoolBuf) {
        let class = buf.len();
        let mut g = self.shared.lock();
        g.out -= class;
        if g.total > self.shared.max_bytes {
            g.total -= class;
        } else {
            g.free.entry(class).or_default().push(buf);
        }
    }

    /// Counters.
    #[cfg(test)] // Only the unit tests call it; the data path never does.
    pub(crate) fn stats(&self) -> PoolStats {
        let g = self.shared.lock();
        PoolStats {
            total: g.total,
            out: g.out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr_cache::tests::FakeReg;

    #[test]
    fn descriptor_round_trip() {
        let d = Descriptor {
            token: 9,
            addr: 0xdead_0000,
            len: 1 << 33,
            rkey: 77,
        };
        assert_eq!(Descriptor::decode(&d.encode()).unwrap(), d);
        assert!(matches!(
            Descriptor::decode(&[0; 31]),
            Err(RndvError::Wire(WireError::Truncated { .. }))
        ));
        assert!(matches!(
            Descriptor::decode(&[0; 33]),
            Err(RndvError::Wire(WireError::Trailing { .. }))
        ));
    }

    proptest::proptest! {
        #[test]
        fn descriptor_round_trips(token: u64, addr: u64, len: u64, rkey: u32) {
            let d = Descriptor { token, addr, len, rkey };
            proptest::prop_assert_eq!(Descriptor::decode(&d.encode()), Ok(d));
        }

        #[test]
        fn descriptor_decodes_any_bytes_without_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            match Descriptor::decode(&b) {
                // The reserved bytes are ignored: the rest re-encodes as it came.
                Ok(d) => proptest::prop_assert_eq!(&d.encode()[..28], &b[..28]),
                Err(_) => proptest::prop_assert!(b.len() != DESC_LEN),
            }
        }
    }

    #[test]
    fn sender_releases_only_at_fin_in_order() {
        let mut s = RndvSender::new();
        let d1 = s.start("a", 1, 10, 5);
        let d2 = s.start("b", 2, 10, 5);
        let _d3 = s.start("c", 3, 10, 5);
        assert_eq!((d1.token, d2.token), (1, 2));
        assert!(s.on_fin(0).unwrap().is_empty());
        assert_eq!(s.on_fin(2).unwrap(), vec!["a", "b"]);
        assert_eq!(s.in_flight(), 1);
        assert_eq!(s.in_flight_bytes(), 10);
        assert!(s.on_fin(4).is_err(), "FIN beyond the last token");
        assert_eq!(s.abort(), vec!["c"]);
    }

    #[test]
    fn inbox_keeps_arrival_order_across_rendezvous() {
        let mut ib: Inbox<String, u32> = Inbox::new(2);
        let d = |t| Descriptor {
            token: t,
            addr: 0,
            len: 5,
            rkey: 0,
        };
        ib.push_ready("e1".into());
        ib.push_rndv(d(1), 0).unwrap();
        ib.push_ready("e2".into());
        ib.push_rndv(d(2), 0).unwrap();
        ib.push_rndv(d(3), 0).unwrap();
        assert!(ib.push_rndv(d(5), 0).is_err());
        let fin = |d: Descriptor, _f: u8, b: u32| format!("r{}:{b}", d.token);
        assert_eq!(ib.pop(fin).as_deref(), Some("e1"));
        assert_eq!(ib.pop(fin), None, "rendezvous 1 not read yet");
        // No buffer: no READ.
        assert!(ib.next_read(|_| None).is_none());
        assert_eq!(
            ib.next_read(|_| Some(10)).map(|(d, b)| (d.token, *b)),
            Some((1, 10))
        );
        assert_eq!(
            ib.next_read(|_| Some(20)).map(|(d, b)| (d.token, *b)),
            Some((2, 20))
        );
        assert!(ib.next_read(|_| Some(30)).is_none(), "max_reads in flight");
        assert!(ib.on_read_done(2).is_err(), "completions come in order");
        ib.on_read_done(1).unwrap();
        assert_eq!(ib.pop(fin).as_deref(), Some("r1:10"));
        assert_eq!(ib.pop(fin).as_deref(), Some("e2"));
        assert_eq!(ib.pop(fin), None, "rendezvous 2 still reading");
        ib.on_read_done(2).unwrap();
        assert_eq!(ib.pop(fin).as_deref(), Some("r2:20"));
        assert_eq!(ib.completed(), 2);
        assert_eq!(ib.next_read(|_| Some(30)).map(|(d, _)| d.token), Some(3));
    }

    #[test]
    fn inbox_bounds_the_bytes_being_read() {
        let mut ib: Inbox<String, u32> = Inbox::new(16);
        ib.set_max_read_bytes(10);
        let d = |t, len| Descriptor {
            token: t,
            addr: 0,
            len,
            rkey: 0,
        };
        ib.push_rndv(d(1, 6), 0).unwrap();
        ib.push_rndv(d(2, 4), 0).unwrap();
        ib.push_rndv(d(3, 1), 0).unwrap();
        ib.push_rndv(d(4, 50), 0).unwrap();
        assert_eq!(ib.next_read(|_| Some(0)).map(|(d, _)| d.token), Some(1));
        assert_eq!(ib.next_read(|_| Some(0)).map(|(d, _)| d.token), Some(2));
        assert!(ib.next_read(|_| Some(0)).is_none(), "10 bytes being read");
        ib.on_read_done(1).unwrap();
        assert_eq!(ib.next_read(|_| Some(0)).map(|(d, _)| d.token), Some(3));
        assert!(ib.next_read(|_| Some(0)).is_none());
        ib.on_read_done(2).unwrap();
        ib.on_read_done(3).unwrap();
        // A frame above the bound is still read, alone.
        assert_eq!(ib.next_read(|_| Some(0)).map(|(d, _)| d.token), Some(4));
    }

    #[test]
    fn pool_recycles_and_bounds() {
        let (reg, live) = FakeReg::new();
        let released = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let r2 = released.clone();
        let pool = Pool::new(
            Box::new(reg),
            256 * 1024,
            Some(Box::new(move || {
                r2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })),
        );
        let a = pool.alloc(100_000).unwrap().unwrap(); // 128 KiB class
        let b = pool.alloc(1).unwrap().unwrap(); // 64 KiB
        let c = pool.alloc(64 * 1024).unwrap().unwrap(); // 64 KiB: total 256 KiB
                                                         // Over the bound while buffers are lent: still served (never a wait on the
                                                         // application), and given back, not kept, when released.
        let over = pool.alloc(1).unwrap().unwrap();
        assert_eq!(pool.stats().total, 320 * 1024);
        let m_over = pool.msg_of(over, 1, 0);
        drop(m_over);
        assert_eq!(pool.stats().total, 256 * 1024, "over-bound buffer kept");
        released.store(0, std::sync::atomic::Ordering::SeqCst);
        let pa = a.addr();
        let m = pool.msg_of(a, 100_000, rzmq_core::msg::MSG_MORE);
        assert!(m.more());
        assert_eq!(
            m.data().as_ptr() as u64,
            pa,
            "the message is the pool buffer"
        );
        let m2 = m.clone();
        drop(m);
        assert_eq!(pool.stats().out, 256 * 1024);
        drop(m2);
        assert_eq!(released.load(std::sync::atomic::Ordering::SeqCst), 1);
        let again = pool.alloc(70_000).unwrap().unwrap();
        assert_eq!(again.addr(), pa, "recycled, not re-registered");
        assert_eq!(live.load(std::sync::atomic::Ordering::SeqCst), 3);
        pool.put(b);
        pool.put(c);
        pool.put(again);
        // A frame larger than the bound still gets one buffer when nothing is lent.
        let big = pool.alloc(1 << 20).unwrap();
        assert!(big.is_some());
    }
}

//! Model checks of the output hand-off under loom: every interleaving (up to
//! `LOOM_MAX_PREEMPTIONS` preemptions) of a few small threads, with loom's atomics, locks and
//! cells in place of std's (see [`crate::sync`]). Run by `scripts/loom.sh`; built only with
//! `--cfg loom`.
//!
//! What fails a model: a panic (an item lost, duplicated or out of order), a data race on a
//! tracked cell (a slot or byte read that the reader was not published, two owners of a
//! connection's output at once), or a deadlock (every thread blocked: a lost wake-up).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use loom::sync::Condvar;
use loom::thread;

use crate::byteq;
use crate::direct::{DirectTx, Notify, Sent, Target};
use crate::error::Error;
use crate::msg::Msg;
use crate::pipe::{self, WriteError};
use crate::signal::{Mailbox, Signaler, WaitSet};
use crate::spsc;
use crate::sync::cell::UnsafeCell;
use crate::sync::{fence, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};

/// A model with loom's default bounds, unless the environment sets them; preemptions default to
/// 3 (`LOOM_MAX_PREEMPTIONS` overrides it).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// A one-shot-per-wait event: the owner of a pipe end blocks on it until its `Notify` fires.
#[derive(Default)]
struct Event {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Event {
    fn set(&self) {
        *self.set.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// Blocks until set, then clears it. A wake-up nobody sends is a deadlock loom reports.
    fn wait(&self) {
        let mut g = self.set.lock().unwrap();
        while !*g {
            g = self.cv.wait(g).unwrap();
        }
        *g = false;
    }
}

/// The owner of both ends of a pipe: `activate_read` wakes the reader, `activate_write` the
/// writer.
#[derive(Default)]
struct Owner {
    read: Event,
    write: Event,
}

impl Notify for Owner {
    fn activate_read(&self, _token: u64) {
        self.read.set();
    }
    fn activate_write(&self, _token: u64) {
        self.write.set();
    }
    fn pipe_closed(&self, _token: u64) {
        self.read.set();
    }
}

// ---- spsc -----------------------------------------------------------------------------------

/// Three items across two chunks (two slots each under loom), one of them a two-part message
/// published at once: popped in order, none lost, none twice; every slot read was published to
/// the reader (a cell race otherwise); the emptied chunk recycled through the spare.
#[test]
fn loom_spsc_fifo_across_chunks() {
    model(|| {
        let (mut p, mut c) = spsc::queue::<u32>();
        let t = thread::spawn(move || {
            p.push(1);
            p.push_unpublished(2);
            p.push_unpublished(3);
            p.publish();
            p.push(4);
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            match c.pop() {
                Some(v) => {
                    // 2 and 3 become visible together.
                    if v == 2 {
                        assert_eq!(c.pop(), Some(3));
                        got.push(2);
                        got.push(3);
                    } else {
                        got.push(v);
                    }
                }
                None => thread::yield_now(),
            }
        }
        assert_eq!(got, [1, 2, 3, 4]);
        assert!(c.pop().is_none());
        t.join().unwrap();
    });
}

/// Both ends dropped on different threads with items left (published and not): the queue is
/// freed once, by whichever goes last.
#[test]
fn loom_spsc_drop_on_both_threads() {
    model(|| {
        let (mut p, mut c) = spsc::queue::<String>();
        let t = thread::spawn(move || {
            p.push("a".into());
            p.push("b".into());
            p.push("c".into());
            p.push_unpublished("d".into());
        });
        let first = c.pop();
        assert!(first.is_none() || first.as_deref() == Some("a"));
        drop(c);
        t.join().unwrap();
    });
}

// ---- byteq ----------------------------------------------------------------------------------

/// Four 5-byte records through chunks of 16 bytes (a skipped tail, a new chunk, the spare):
/// the consumer reads exactly the bytes written, in order, and only published ones (each byte is
/// a tracked cell under loom).
#[test]
fn loom_byteq_records_across_chunks() {
    model(|| {
        let (mut p, mut c) = byteq::byte_queue();
        let t = thread::spawn(move || {
            for r in 0..4u8 {
                p.reserve(5).copy_from_slice(&[r; 5]);
                p.publish();
            }
        });
        let mut got = Vec::new();
        while got.len() < 20 {
            let b = c.peek();
            if b.is_empty() {
                thread::yield_now();
                continue;
            }
            let n = b.len();
            assert_eq!(n % 5, 0, "records are whole");
            got.extend_from_slice(b);
            c.consume(n);
        }
        let want: Vec<u8> = (0..4u8).flat_map(|r| [r; 5]).collect();
        assert_eq!(got, want);
        t.join().unwrap();
        assert!(c.peek().is_empty());
        assert!(c.is_empty());
    });
}

// ---- signal::Mailbox ------------------------------------------------------------------------

/// Drains a mailbox as the I/O thread does (begin_drain, pop to empty, sleep on the signaler)
/// until `n` commands arrived; returns them.
fn drain_mailbox(mb: &Mailbox<u32>, n: usize) -> Vec<u32> {
    let mut got = Vec::new();
    loop {
        mb.begin_drain();
        while let Some(v) = mb.try_recv() {
            got.push(v);
        }
        if got.len() == n {
            return got;
        }
        // Sleeps for ever unless a command is queued or a signal outstanding: a sender that
        // skipped its signal deadlocks the model.
        mb.wait_until(None).unwrap();
    }
}

/// One sender, two commands, a reader going to sleep between them: the reader is always woken
/// (no lost wake-up) and gets both, in order.
#[test]
fn loom_mailbox_idle_reader_is_signalled() {
    model(|| {
        let mb = Arc::new(Mailbox::<u32>::new().unwrap());
        let m2 = mb.clone();
        let t = thread::spawn(move || {
            m2.send(1);
            m2.send(2);
        });
        assert_eq!(drain_mailbox(&mb, 2), [1, 2]);
        t.join().unwrap();
    });
}

/// Two senders racing for the one signal of an idle period: whichever wins, the reader wakes
/// and gets both commands.
#[test]
fn loom_mailbox_two_senders() {
    model(|| {
        let mb = Arc::new(Mailbox::<u32>::new().unwrap());
        let ts: Vec<_> = [1, 2]
            .into_iter()
            .map(|v| {
                let m = mb.clone();
                thread::spawn(move || m.send(v))
            })
            .collect();
        let mut got = drain_mailbox(&mb, 2);
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        for t in ts {
            t.join().unwrap();
        }
    });
}

// ---- signal::WaitSet: thread-safe sockets ----------------------------------------------------

/// A thread-safe socket as its blocking calls see it: a mailbox woken through a wait set, and
/// the socket's state under its lock (messages the commands made receivable).
struct SafeSock {
    mb: Mailbox<u32, WaitSet>,
    state: Mutex<VecDeque<u32>>,
}

impl SafeSock {
    fn new() -> Arc<SafeSock> {
        Arc::new(SafeSock {
            mb: Mailbox::with_wake(WaitSet::new()),
            state: Mutex::new(VecDeque::new()),
        })
    }

    /// Processes commands under the lock (as `Socket::process_commands`): each one makes a
    /// message receivable.
    fn drain(&self, st: &mut VecDeque<u32>) {
        self.mb.begin_drain();
        while let Some(v) = self.mb.try_recv() {
            st.push_back(v);
        }
    }

    /// A blocking receive: the real `WaitSet::block` loop over a non-blocking try (drain, then
    /// take a message or `Again`) under the socket's lock.
    fn recv(&self) -> u32 {
        self.mb
            .wake()
            .block(
                || Ok(self.state.lock().unwrap()),
                |st| {
                    self.drain(st);
                    st.pop_front().ok_or(Error::Again)
                },
                None,
            )
            .unwrap()
    }
}

/// Two threads blocked in receives on one thread-safe socket while the I/O thread sends two
/// commands: each receiver wakes for a signal after its own last try, so both return, one
/// message each (a receiver whose wake-up another thread consumed would sleep for ever: a
/// deadlock loom reports).
#[test]
fn loom_safe_socket_two_blocked_receivers() {
    model(|| {
        let s = SafeSock::new();
        let io = {
            let s = s.clone();
            thread::spawn(move || {
                s.mb.send(1);
                s.mb.send(2);
            })
        };
        let other = {
            let s = s.clone();
            thread::spawn(move || s.recv())
        };
        let mine = s.recv();
        let theirs = other.join().unwrap();
        io.join().unwrap();
        let mut got = [mine, theirs];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
    });
}

/// A poller with its own signaler registered beside a blocked receiver: the I/O thread sends
/// two commands; the receiver takes one message, the poller sees the other. The poller clears
/// its signaler before it looks at the socket (as `poll`), so a signal while it looks makes its
/// sleep end at once; neither can take the other's wake-up.
#[test]
fn loom_safe_socket_poller_beside_receiver() {
    model(|| {
        let s = SafeSock::new();
        let wake = crate::sync::Arc::new(Signaler::new().unwrap());
        s.mb.wake().add_signaler(wake.clone());
        let io = {
            let s = s.clone();
            thread::spawn(move || {
                s.mb.send(1);
                s.mb.send(2);
            })
        };
        let receiver = {
            let s = s.clone();
            thread::spawn(move || s.recv())
        };
        // The poller: clear, look (ZMQ_EVENTS: drain under the lock), sleep on its signaler.
        let polled = loop {
            wake.clear();
            {
                let mut st = s.state.lock().unwrap();
                s.drain(&mut st);
                if let Some(v) = st.pop_front() {
                    break v;
                }
            }
            wake.wait(None).unwrap();
        };
        let received = receiver.join().unwrap();
        io.join().unwrap();
        s.mb.wake().remove_signaler(&wake);
        let mut got = [polled, received];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
    });
}

// ---- pipe: reader and writer wake-ups -------------------------------------------------------

fn msg(v: u8) -> Msg {
    Msg::copy_from(&[v])
}

/// Writes `n` one-byte messages 0..n, blocking on the owner's write event while the pipe is at
/// its HWM.
fn write_all(w: &mut pipe::Writer, owner: &Owner, n: u8) {
    for v in 0..n {
        let mut m = msg(v);
        loop {
            match w.try_write(m) {
                Ok(()) => break,
                Err((back, WriteError::Full)) => {
                    m = back;
                    owner.write.wait();
                }
                Err((_, WriteError::Closed)) => panic!("reader closed"),
            }
        }
    }
}

/// A pipe of high-water mark `hwm` whose two ends notify one model owner.
fn wired_pipe(hwm: u64) -> (Arc<Owner>, pipe::Writer, pipe::Reader) {
    let owner = Arc::new(Owner::default());
    let (w, r) = pipe::pipe(hwm);
    let target = Target {
        notify: owner.clone(),
        token: 0,
    };
    r.set_target(target.clone());
    w.set_target(target);
    (owner, w, r)
}

/// The next message, blocking on the owner's read event whenever the pipe is empty.
fn read_one(r: &mut pipe::Reader, owner: &Owner) -> Msg {
    loop {
        match r.read() {
            Some(m) => return m,
            None => owner.read.wait(),
        }
    }
}

/// Reads `n` messages (0, 1, ..), blocking whenever the pipe is empty.
fn read_all(r: &mut pipe::Reader, owner: &Owner, n: u8) {
    for v in 0..n {
        assert_eq!(read_one(r, owner).data(), [v]);
    }
}

/// An unbounded pipe, a reader that sleeps whenever it finds the pipe empty: each write that
/// makes the pipe non-empty for an idle reader wakes it (a lost wake-up deadlocks the model).
#[test]
fn loom_pipe_empty_to_non_empty_wakes_the_reader() {
    model(|| {
        let (owner, mut w, mut r) = wired_pipe(0);
        let o2 = owner.clone();
        let t = thread::spawn(move || {
            write_all(&mut w, &o2, 2);
            w
        });
        read_all(&mut r, &owner, 2);
        drop(t.join().unwrap());
    });
}

/// HWM 1: the writer finds the pipe full and sleeps until the reader's read makes room; the
/// reader sleeps while it is empty. Three messages cross with both wake-ups (full to room
/// wakes the writer, empty to non-empty the reader); either lost deadlocks the model.
#[test]
fn loom_pipe_full_to_room_wakes_the_writer() {
    model(|| {
        let (owner, mut w, mut r) = wired_pipe(1);
        let o2 = owner.clone();
        let t = thread::spawn(move || {
            write_all(&mut w, &o2, 3);
            w
        });
        read_all(&mut r, &owner, 3);
        drop(t.join().unwrap());
    });
}

/// The lane switch: the reader asks for the framed lane after its first message while the
/// writer writes three. Whatever the writer saw when, the reader gets all three in order
/// (those queued before the switch first, `framed_from`), and is woken whenever it sleeps on
/// an empty pipe (the framed lane's own idle/wake protocol).
///
/// This model found the bug fixed in `Reader::request_framed` (messages read before asking
/// were not counted, and the lane never came next: the reader spun for ever). It then reported
/// a deadlock C11 forbids, a loom artefact that `loom_litmus_swap_then_store_buffering` pins
/// down; the reader's idle mark is a swap since (`Shared::mark_reader_idle`), which loom
/// orders correctly.
#[test]
fn loom_pipe_framed_lane_switch() {
    model(|| {
        let (owner, mut w, mut r) = wired_pipe(0);
        let o2 = owner.clone();
        let t = thread::spawn(move || {
            write_all(&mut w, &o2, 3);
            w
        });
        assert_eq!(read_one(&mut r, &owner).data(), [0]);
        r.request_framed();
        assert_eq!(read_one(&mut r, &owner).data(), [1]);
        assert_eq!(read_one(&mut r, &owner).data(), [2]);
        drop(t.join().unwrap());
    });
}

/// Why the reader's idle mark is a swap: loom's modification order of one atomic is a partial
/// order of vector clocks, so a writer's swap that read the reader's `false` and the reader's
/// later, concurrent store of `true` stay unordered, and the writer's load after both SeqCst
/// fences may return its own swap's `false`. In C11 the swap sits right after the `false` it
/// read, before the reader's `true`; with the fences, either the writer's load sees `true` or
/// the reader's load sees the writer's switch. Loom reports "neither" (the lane-switch model's
/// deadlock had this shape); this test fails once loom orders them, and the mark can be a store
/// again.
#[test]
#[should_panic(expected = "neither saw the other")]
fn loom_litmus_swap_then_store_buffering() {
    model(|| {
        let idle = Arc::new(AtomicBool::new(true));
        let from = Arc::new(AtomicU64::new(u64::MAX));
        let (i2, f2) = (idle.clone(), from.clone());
        let w = thread::spawn(move || {
            let first = i2.swap(false, Ordering::SeqCst);
            f2.store(2, Ordering::Release);
            fence(Ordering::SeqCst);
            (first, i2.load(Ordering::Relaxed))
        });
        idle.store(false, Ordering::SeqCst);
        idle.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let c = from.load(Ordering::SeqCst);
        let (first, b) = w.join().unwrap();
        assert!(first || c != u64::MAX || b, "neither saw the other");
    });
}

// ---- direct/tx: the lanes' hand-off ---------------------------------------------------------

/// One connection's output as the model sees it: the `DirectTx`, the pipe the writer falls back
/// to (a locked queue of message ids), and a tracked cell standing for "owning the output":
/// the I/O thread touches it while it holds output, the writer while it is in its direct send.
/// Two owners at once, or an owner that did not see the previous one's writes, is a race loom
/// reports.
struct Conn {
    tx: DirectTx,
    queued: Mutex<VecDeque<u8>>,
    output: UnsafeCell<()>,
    /// The stream's far end, read when the model ends.
    peer: UnixStream,
    near: UnixStream,
}

// SAFETY: `output` holds nothing; it is shared only so that loom checks its accesses (a race
// on it fails the model, which is the point).
unsafe impl Sync for Conn {}

impl Conn {
    fn new() -> Arc<Conn> {
        let (near, peer) = UnixStream::pair().unwrap();
        near.set_nonblocking(true).unwrap();
        peer.set_nonblocking(true).unwrap();
        let tx = DirectTx::new(near.as_raw_fd(), Arc::new(AtomicUsize::new(0)));
        Arc::new(Conn {
            tx,
            queued: Mutex::new(VecDeque::new()),
            output: UnsafeCell::new(()),
            peer,
            near,
        })
    }

    /// The writer's side of a send: directly when granted and the pipe is empty, else queued.
    fn send(&self, id: u8) {
        let m = msg(id);
        let sent = self.tx.try_send(&[], &m, || {
            // In WRITING: the writer owns output from here to its sendmsg.
            self.output.with_mut(|_| ());
            self.queued.lock().unwrap().is_empty()
        });
        match sent {
            Sent::Done => {}
            Sent::NotNow => self.queued.lock().unwrap().push_back(id),
            Sent::HandedOver => unreachable!("a 3-byte frame goes whole into an empty socket"),
        }
    }

    /// The I/O thread's side, holding output (after a revoke or a kill): writes what the pipe
    /// holds, framed.
    fn drain(&self) {
        self.output.with_mut(|_| ());
        assert!(!self.tx.has_leftover());
        let ids: Vec<u8> = self.queued.lock().unwrap().drain(..).collect();
        for id in ids {
            (&self.near).write_all(&[0, 1, id]).unwrap();
        }
    }

    /// The message ids on the wire, in order.
    fn wire(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match (&self.peer).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(bytes.len() % 3, 0);
        bytes
            .chunks(3)
            .map(|f| {
                assert_eq!(f[..2], [0, 1], "a whole short frame");
                f[2]
            })
            .collect()
    }
}

/// The I/O thread grants output, takes it back mid-send, writes what was queued and kills the
/// connection, while the writer sends two messages: never two owners, each message on the wire
/// exactly once and in order (GRANTED -> WRITING -> SPENT/GRANTED -> IO -> DEAD).
#[test]
fn loom_direct_grant_revoke_kill() {
    model(|| {
        let conn = Conn::new();
        let c2 = conn.clone();
        let writer = thread::spawn(move || {
            c2.send(1);
            c2.send(2);
        });
        conn.tx.grant();
        conn.tx.revoke();
        conn.drain();
        conn.tx.kill();
        writer.join().unwrap();
        // After DEAD nothing is granted again: the rest is written by the I/O thread.
        conn.tx.grant();
        assert!(!conn.tx.granted() && !conn.tx.left_to_writer());
        conn.drain();
        assert_eq!(conn.wire(), [1, 2]);
    });
}

/// The SPENT path: the I/O thread parks idle output, the writer's side regrants it before each
/// send (as after a direct receive), and the I/O thread takes it back and kills the connection
/// meanwhile: never two owners, each message once, in order (SPENT -> GRANTED -> WRITING ->
/// SPENT, SPENT -> IO -> DEAD).
#[test]
fn loom_direct_park_regrant_kill() {
    model(|| {
        let conn = Conn::new();
        let c2 = conn.clone();
        let writer = thread::spawn(move || {
            c2.tx.regrant();
            c2.send(1);
            c2.tx.regrant();
            c2.send(2);
        });
        conn.tx.park();
        conn.tx.revoke();
        conn.drain();
        conn.tx.kill();
        writer.join().unwrap();
        conn.tx.regrant();
        assert!(!conn.tx.left_to_writer());
        conn.drain();
        assert_eq!(conn.wire(), [1, 2]);
    });
}

/// The I/O thread's work counter: while it has work in hand the writer does not send directly
/// (its earlier messages reach the wire first), even when granted.
#[test]
fn loom_direct_waits_for_io_work() {
    model(|| {
        let (near, peer) = UnixStream::pair().unwrap();
        near.set_nonblocking(true).unwrap();
        peer.set_nonblocking(true).unwrap();
        let work = Arc::new(AtomicUsize::new(0));
        let tx = Arc::new(DirectTx::new(near.as_raw_fd(), work.clone()));
        let queued = Arc::new(Mutex::new(VecDeque::new()));
        let (t2, q2) = (tx.clone(), queued.clone());
        let writer = thread::spawn(move || {
            let m = msg(1);
            if t2.try_send(&[], &m, || true) == Sent::NotNow {
                q2.lock().unwrap().push_back(1u8);
            }
        });
        // A command is in flight: work first, then the grant.
        work.fetch_add(1, crate::sync::Ordering::SeqCst);
        tx.grant();
        writer.join().unwrap();
        // The writer could not send directly: work was counted before output was granted.
        assert_eq!(queued.lock().unwrap().len(), 1);
        drop(near);
    });
}

//! The I/O thread's contract with an alternative data path's readiness, on an in-memory path
//! that notifies as verbs completion channels do: one event per arming, none while unarmed, and
//! an event that fires between arming and the next look is consumed by that look.
//!
//! The contract: before the I/O thread leaves a path to sleep, it has armed it and looked once
//! more, and that look found nothing. A busy path (every look finds work) must not end its turn
//! at the round budget with the notification consumed and not armed again: the next frame would
//! then raise no event and wait for ever.
//!
//! This binary installs its own upgrader (one per process), so it runs alone.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};

use rzmq_core::alt::{self, AltError, AltPath, AltStats, HalfPath, Mode, Upgrader};
use rzmq_core::{Context, Msg, Socket, SocketType};

/// One end of an in-memory path.
struct End {
    /// Frames the peer sent, not yet received.
    inbox: Mutex<VecDeque<Msg>>,
    /// Frames pushed into `inbox` in total (a look reports work when this moved).
    arrived: AtomicU64,
    /// The notification is armed: the next arrival writes `efd` and disarms it.
    armed: AtomicBool,
    /// Looks that will find work whatever arrived, as on a path flooded with completions; each
    /// such look also consumes an event raised since the last arming.
    busy_looks: AtomicUsize,
    /// The pollable fd (an eventfd).
    efd: RawFd,
    peer: Mutex<Option<Arc<End>>>,
}

impl End {
    fn new() -> Arc<End> {
        // SAFETY: plain eventfd creation; the fd is owned by this End until its drop.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(efd >= 0, "eventfd");
        Arc::new(End {
            inbox: Mutex::new(VecDeque::new()),
            arrived: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            busy_looks: AtomicUsize::new(0),
            efd,
            peer: Mutex::new(None),
        })
    }

    fn raise(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe { libc::write(self.efd, (&one as *const u64).cast(), 8) };
    }

    fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64 from our (non-blocking) eventfd.
        unsafe { libc::read(self.efd, (&mut v as *mut u64).cast(), 8) };
    }

    fn deliver(&self, m: Msg) {
        self.inbox.lock().unwrap().push_back(m);
        self.arrived.fetch_add(1, Ordering::SeqCst);
        if self.armed.swap(false, Ordering::SeqCst) {
            self.raise();
        }
    }
}

impl Drop for End {
    fn drop(&mut self) {
        // SAFETY: the eventfd is ours and closed once.
        unsafe { libc::close(self.efd) };
    }
}

/// Every end created, in order, so that the test can flood them.
static ENDS: Mutex<Vec<Arc<End>>> = Mutex::new(Vec::new());

struct MockPath {
    me: Arc<End>,
    peer: Arc<End>,
    seen: u64,
}

impl AltPath for MockPath {
    fn fd(&self) -> RawFd {
        self.me.efd
    }

    fn send(&mut self, msg: Msg) -> Result<Option<Msg>, AltError> {
        self.peer.deliver(msg);
        Ok(None)
    }

    fn flush(&mut self) -> Result<(), AltError> {
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<Msg>, AltError> {
        Ok(self.me.inbox.lock().unwrap().pop_front())
    }

    fn process(&mut self) -> Result<bool, AltError> {
        self.me.drain();
        let busy = self
            .me
            .busy_looks
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if busy {
            // A completion arrived after the arming and its event is consumed by this look.
            self.me.armed.store(false, Ordering::SeqCst);
            return Ok(true);
        }
        let arrived = self.me.arrived.load(Ordering::SeqCst);
        let news = arrived != self.seen;
        self.seen = arrived;
        Ok(news)
    }

    fn arm(&mut self) -> Result<(), AltError> {
        self.me.armed.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn is_idle(&self) -> bool {
        self.peer.inbox.lock().unwrap().is_empty()
    }

    fn stats(&self) -> AltStats {
        AltStats::default()
    }

    fn describe(&self) -> String {
        "mock".into()
    }
}

struct MockHalf(Arc<End>);

impl HalfPath for MockHalf {
    fn complete(self: Box<Self>, peer_blob: &[u8]) -> Result<Box<dyn AltPath>, AltError> {
        let idx = u64::from_le_bytes(peer_blob.try_into().map_err(|_| AltError("blob".into()))?);
        let peer = ENDS.lock().unwrap()[idx as usize].clone();
        *self.0.peer.lock().unwrap() = Some(peer.clone());
        Ok(Box::new(MockPath {
            me: self.0,
            peer,
            seen: 0,
        }))
    }
}

struct MockUpgrader;

impl Upgrader for MockUpgrader {
    fn mode(&self) -> Mode {
        Mode::Require
    }

    fn advertise(&self) -> Result<Vec<u8>, AltError> {
        Ok(b"mock".to_vec())
    }

    fn compatible(&self, peer_value: &[u8]) -> Result<(), AltError> {
        if peer_value == b"mock" {
            Ok(())
        } else {
            Err(AltError("not the mock".into()))
        }
    }

    fn start(
        &self,
        _local: Option<std::net::SocketAddr>,
    ) -> Result<(Box<dyn HalfPath>, Vec<u8>), AltError> {
        let end = End::new();
        let mut ends = ENDS.lock().unwrap();
        let idx = ends.len() as u64;
        ends.push(end.clone());
        Ok((Box::new(MockHalf(end)), idx.to_le_bytes().to_vec()))
    }
}

static SETUP: Once = Once::new();

fn setup() {
    SETUP.call_once(|| {
        assert!(alt::install(Arc::new(MockUpgrader)));
    });
}

fn sock(ctx: &Context, ty: SocketType) -> Socket {
    rzmq_tests::timed_socket(ctx, ty, 0)
}

#[test]
fn a_path_busy_past_the_round_budget_is_armed_before_it_sleeps() {
    setup();
    let ctx = Context::new();
    let mut pull = sock(&ctx, SocketType::Pull);
    pull.bind("tcp://127.0.0.1:*").unwrap();
    let ep = pull.last_endpoint().to_string();
    let mut push = sock(&ctx, SocketType::Push);
    push.connect(&ep).unwrap();

    // Upgraded (the mode requires it): the first frames cross on the mock path.
    push.send(Msg::from_vec(b"first".to_vec()), 0).unwrap();
    assert_eq!(pull.recv_msg(0).unwrap().data(), b"first");
    let ends: Vec<Arc<End>> = ENDS.lock().unwrap().clone();
    assert_eq!(ends.len(), 2, "one path, two ends");
    assert!(
        ends.iter().all(|e| e.peer.lock().unwrap().is_some()),
        "both ends connected"
    );

    for round in 0..5 {
        // A flood of completions on both ends: many more busy looks than one turn's rounds.
        for e in &ends {
            e.busy_looks.store(40, Ordering::SeqCst);
            e.raise();
        }
        // The I/O threads work the flood off; each end ends armed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ends.iter().any(|e| e.busy_looks.load(Ordering::SeqCst) > 0)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            ends.iter()
                .all(|e| e.busy_looks.load(Ordering::SeqCst) == 0),
            "round {round}: the flood was worked off"
        );
        // A frame sent now raises an event only on an armed end: it must arrive.
        let body = format!("after flood {round}").into_bytes();
        push.send(Msg::from_vec(body.clone()), 0).unwrap();
        let got = pull
            .recv_msg(0)
            .unwrap_or_else(|e| panic!("round {round}: the frame never arrived ({e})"));
        assert_eq!(got.data(), body.as_slice());
    }
}

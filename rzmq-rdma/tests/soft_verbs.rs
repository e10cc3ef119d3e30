//! The soft provider fails the way an RC NIC does: one test per behaviour, between two threads
//! (two devices, each with its own progress thread) and between two processes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rzmq_rdma::provider::soft::{self, Fault, SoftConfig, SoftDevice, WireAddr};
use rzmq_rdma::provider::*;

struct Side {
    dev: Arc<dyn Device>,
    _pd: Arc<dyn Pd>,
    scq: Arc<dyn Cq>,
    rcq: Arc<dyn Cq>,
    qp: Arc<dyn Qp>,
    // Declared before `buf`: deregistered before the memory is freed.
    mr: Arc<dyn Mr>,
    buf: Box<[u8]>,
}

impl Side {
    /// A side on a new device, opened for fault tests (`inject`, `kill`).
    fn new(cfg: SoftConfig, caps: QpCaps, sig_all: bool, buf_len: usize, access: Access) -> Side {
        let cfg = SoftConfig {
            faults: true,
            ..cfg
        };
        Side::on(
            SoftDevice::open(cfg).unwrap(),
            caps,
            sig_all,
            buf_len,
            access,
        )
    }

    fn on(
        dev: Arc<dyn Device>,
        caps: QpCaps,
        sig_all: bool,
        buf_len: usize,
        access: Access,
    ) -> Side {
        let pd = dev.alloc_pd().unwrap();
        let scq = dev.create_cq(1024).unwrap();
        let rcq = dev.create_cq(1024).unwrap();
        let qp = pd
            .create_qp(&QpInit {
                send_cq: scq.clone(),
                recv_cq: rcq.clone(),
                caps,
                sq_sig_all: sig_all,
            })
            .unwrap();
        let mut buf = vec![0u8; buf_len].into_boxed_slice();
        // SAFETY: buf lives in the Side next to the MR, which is declared (so dropped) first:
        // the memory outlives its registration.
        let mr = unsafe { pd.reg_mr(buf.as_mut_ptr(), buf.len(), access) }.unwrap();
        Side {
            dev,
            _pd: pd,
            scq,
            rcq,
            qp,
            mr,
            buf,
        }
    }

    fn sge(&self, off: usize, len: usize) -> Sge {
        Sge {
            addr: self.buf.as_ptr() as u64 + off as u64,
            length: len as u32,
            lkey: self.mr.lkey(),
        }
    }

    fn remote(&self, off: usize) -> RemoteAddr {
        RemoteAddr {
            addr: self.buf.as_ptr() as u64 + off as u64,
            rkey: self.mr.rkey(),
        }
    }

    fn post(&self, wrs: &[SendWr<'_>]) -> std::result::Result<(), PostError> {
        // SAFETY: inline SGEs in these tests point into `buf`, which outlives the call.
        unsafe { self.qp.post_send(wrs) }
    }

    fn recv(&self, wr_id: u64, off: usize, len: usize) {
        let sge = [self.sge(off, len)];
        self.qp
            .post_recv(&[RecvWr {
                wr_id,
                sg_list: &sge,
            }])
            .unwrap();
    }

    fn buf_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        // Quiesce: no NIC access to buf after this.
        let _ = self.qp.modify(&ModifyQp::Err);
    }
}

fn fast_rts() -> RtsAttr {
    RtsAttr {
        timeout: 12, // 16.8 ms per try
        retry_cnt: 3,
        rnr_retry: 3,
        ..RtsAttr::new(0)
    }
}

fn connect(a: &Side, b: &Side, rts: RtsAttr, rnr_timer: u8) {
    let (pa, pb) = (0x1000, 0xfffff0); // pb wraps the 24-bit PSN space quickly
    let ea = a.qp.endpoint(pa).unwrap();
    let eb = b.qp.endpoint(pb).unwrap();
    // The descriptor survives the byte form the control channel carries.
    let ea = Endpoint::from_bytes(&ea.to_bytes()).unwrap();
    let eb = Endpoint::from_bytes(&eb.to_bytes()).unwrap();
    for (s, remote, psn) in [(a, eb, pa), (b, ea, pb)] {
        s.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
        let mut rtr = RtrAttr::new(remote);
        rtr.min_rnr_timer = rnr_timer;
        s.qp.modify(&ModifyQp::Rtr(rtr)).unwrap();
        s.qp.modify(&ModifyQp::Rts(RtsAttr { sq_psn: psn, ..rts }))
            .unwrap();
    }
}

fn rw() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
}

fn pair_with(caps: QpCaps, sig_all: bool, rts: RtsAttr, rnr_timer: u8) -> (Side, Side) {
    let a = Side::new(SoftConfig::default(), caps, sig_all, 1 << 20, rw());
    let b = Side::new(SoftConfig::default(), caps, sig_all, 1 << 20, rw());
    connect(&a, &b, rts, rnr_timer);
    (a, b)
}

fn pair() -> (Side, Side) {
    pair_with(QpCaps::default(), false, fast_rts(), 1)
}

fn wait(cq: &Arc<dyn Cq>, n: usize) -> Vec<WorkCompletion> {
    wait_for(cq, n, Duration::from_secs(5))
}

fn wait_for(cq: &Arc<dyn Cq>, n: usize, d: Duration) -> Vec<WorkCompletion> {
    let end = Instant::now() + d;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < end {
        cq.poll(n - out.len(), &mut out).unwrap();
        if out.len() < n {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    out
}

fn wait_state(qp: &Arc<dyn Qp>, s: QpState) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if qp.state() == s {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

fn wr(wr_id: u64, sg: &[Sge], op: SendOp, flags: SendFlags) -> SendWr<'_> {
    SendWr {
        wr_id,
        sg_list: sg,
        op,
        flags,
    }
}

const SIG: SendFlags = SendFlags::SIGNALED;

#[test]
fn send_write_read_with_immediates() {
    let (mut a, mut b) = pair();
    for (i, x) in a.buf_mut().iter_mut().enumerate() {
        *x = (i * 7) as u8;
    }
    for (i, x) in b.buf_mut().iter_mut().enumerate().skip(512 * 1024) {
        *x = (i * 13) as u8;
    }
    b.recv(1, 0, 4096);
    b.recv(2, 4096, 4096);
    b.recv(3, 0, 0);
    let s1 = [a.sge(0, 1000)];
    let s2 = [a.sge(1000, 3000)];
    let s3 = [a.sge(10_000, 200_000)];
    let s4 = [a.sge(300_000, 100_000)];
    a.post(&[
        wr(11, &s1, SendOp::Send, SIG),
        wr(12, &s2, SendOp::SendWithImm(0xdead_beef), SIG),
        wr(13, &s3, SendOp::RdmaWrite(b.remote(100_000)), SIG),
        wr(14, &[], SendOp::RdmaWriteWithImm(b.remote(0), 77), SIG),
        wr(15, &s4, SendOp::RdmaRead(b.remote(600_000)), SIG),
    ])
    .unwrap();
    let sc = wait(&a.scq, 5);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        (11..=15)
            .map(|i| (i, WcStatus::Success))
            .collect::<Vec<_>>()
    );
    assert_eq!(sc[4].opcode, WcOpcode::RdmaRead);
    assert_eq!(sc[4].byte_len, 100_000);
    let rc = wait(&b.rcq, 3);
    assert_eq!(rc.len(), 3);
    assert_eq!(
        (rc[0].wr_id, rc[0].byte_len, rc[0].imm_data),
        (1, 1000, None)
    );
    assert_eq!(
        (rc[1].wr_id, rc[1].byte_len, rc[1].imm_data),
        (2, 3000, Some(0xdead_beef))
    );
    assert_eq!(
        (rc[2].wr_id, rc[2].opcode, rc[2].imm_data),
        (3, WcOpcode::RecvRdmaWithImm, Some(77))
    );
    assert_eq!(&b.buf[..1000], &a.buf[..1000]);
    assert_eq!(&b.buf[4096..7096], &a.buf[1000..4000]);
    assert_eq!(&b.buf[100_000..300_000], &a.buf[10_000..210_000]);
    assert_eq!(&a.buf[300_000..400_000], &b.buf[600_000..700_000]);
}

#[test]
fn wrong_rkey_is_remote_access_error_and_both_qps_go_to_err() {
    let (a, b) = pair();
    b.recv(1, 0, 64);
    b.recv(2, 64, 64);
    let s = [a.sge(0, 128)];
    let mut bad = b.remote(0);
    bad.rkey ^= 0x5a5a;
    a.post(&[
        wr(1, &s, SendOp::RdmaWrite(bad), SendFlags::NONE),
        wr(2, &s, SendOp::RdmaWrite(b.remote(0)), SIG),
    ])
    .unwrap();
    let sc = wait(&a.scq, 2);
    // The error completes although unsignaled; the next WR is flushed.
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
    );
    assert!(wait_state(&a.qp, QpState::Err));
    assert!(wait_state(&b.qp, QpState::Err));
    // The responder's receives were flushed, in order.
    let rc = wait(&b.rcq, 2);
    assert_eq!(
        rc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)]
    );
    // Out of bounds and missing access rights fail the same way.
    for (mk, access) in [
        (true, rw()),
        (false, Access::LOCAL_WRITE | Access::REMOTE_READ),
    ] {
        let a = Side::new(SoftConfig::default(), QpCaps::default(), false, 4096, rw());
        let b = Side::new(
            SoftConfig::default(),
            QpCaps::default(),
            false,
            4096,
            access,
        );
        connect(&a, &b, fast_rts(), 1);
        let s = [a.sge(0, 128)];
        let target = if mk { b.remote(4000) } else { b.remote(0) };
        a.post(&[wr(9, &s, SendOp::RdmaWrite(target), SIG)])
            .unwrap();
        let sc = wait(&a.scq, 1);
        assert_eq!(sc[0].status, WcStatus::RemAccessErr);
        assert!(wait_state(&b.qp, QpState::Err));
    }
}

#[test]
fn read_needs_remote_read() {
    let a = Side::new(SoftConfig::default(), QpCaps::default(), false, 4096, rw());
    let b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4096,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    );
    connect(&a, &b, fast_rts(), 1);
    let s = [a.sge(0, 128)];
    a.post(&[wr(1, &s, SendOp::RdmaRead(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RemAccessErr);
    assert!(wait_state(&b.qp, QpState::Err));
}

#[test]
fn modify_to_err_flushes_everything_in_order() {
    let (a, b) = pair();
    // Park the sends: the wire is stalled so nothing is acknowledged.
    soft::inject(a.qp.as_ref(), Fault::Delay(Duration::from_secs(2))).unwrap();
    let s = [a.sge(0, 64)];
    let wrs: Vec<_> = (0..6)
        .map(|i| {
            let f = if i % 2 == 0 { SIG } else { SendFlags::NONE };
            wr(i, &s, SendOp::RdmaWrite(b.remote(0)), f)
        })
        .collect();
    a.post(&wrs).unwrap();
    for i in 0..4 {
        a.recv(100 + i, 0, 64);
    }
    a.qp.modify(&ModifyQp::Err).unwrap();
    let sc = wait(&a.scq, 6);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        (0..6)
            .map(|i| (i, WcStatus::WrFlushErr))
            .collect::<Vec<_>>(),
        "every WR, signaled or not, flushed in order"
    );
    let rc = wait(&a.rcq, 4);
    assert_eq!(
        rc.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        vec![100, 101, 102, 103]
    );
    assert!(rc.iter().all(|w| w.status == WcStatus::WrFlushErr));
    // Posting in ERR is accepted and flushed at once.
    a.recv(200, 0, 8);
    a.post(&[wr(300, &s, SendOp::Send, SendFlags::NONE)])
        .unwrap();
    assert_eq!(wait(&a.rcq, 1)[0].wr_id, 200);
    assert_eq!(
        wait(&a.scq, 1)[0],
        WorkCompletion {
            wr_id: 300,
            status: WcStatus::WrFlushErr,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm_data: None,
            qp_num: a.qp.qpn(),
            vendor_err: 0,
        }
    );
}

#[test]
fn rnr_retries_then_fails_or_succeeds_when_a_receive_arrives() {
    // rnr_retry 2 with a 0.08 ms timer: gives up quickly.
    let (a, b) = pair_with(QpCaps::default(), false, fast_rts(), 6);
    let s = [a.sge(0, 64)];
    a.post(&[wr(1, &s, SendOp::Send, SIG), wr(2, &s, SendOp::Send, SIG)])
        .unwrap();
    let sc = wait(&a.scq, 2);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    drop((a, b));
    // WRITE_WITH_IMM needs a receive too; with rnr_retry 7 it waits for one forever.
    let rts = RtsAttr {
        rnr_retry: 7,
        ..fast_rts()
    };
    let (a, b) = pair_with(QpCaps::default(), false, rts, 6);
    a.post(&[wr(5, &[], SendOp::RdmaWriteWithImm(b.remote(0), 42), SIG)])
        .unwrap();
    std::thread::sleep(Duration::from_millis(60));
    assert!(wait_for(&a.scq, 1, Duration::from_millis(1)).is_empty());
    b.recv(9, 0, 0);
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    let rc = wait(&b.rcq, 1);
    assert_eq!((rc[0].wr_id, rc[0].imm_data), (9, Some(42)));
}

#[test]
fn only_signaled_sends_complete() {
    let (a, b) = pair();
    let s = [a.sge(0, 64)];
    let wrs: Vec<_> = (0..10)
        .map(|i| {
            let f = if i % 5 == 4 { SIG } else { SendFlags::NONE };
            wr(i, &s, SendOp::RdmaWrite(b.remote(0)), f)
        })
        .collect();
    a.post(&wrs).unwrap();
    let sc = wait(&a.scq, 2);
    assert_eq!(sc.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![4, 9]);
    std::thread::sleep(Duration::from_millis(20));
    assert!(wait_for(&a.scq, 1, Duration::from_millis(1)).is_empty());
    // sq_sig_all signals everything.
    let (a, b) = pair_with(QpCaps::default(), true, fast_rts(), 1);
    let wrs: Vec<_> = (0..10)
        .map(|i| wr(i, &s, SendOp::RdmaWrite(b.remote(0)), SendFlags::NONE))
        .collect();
    let s2 = [a.sge(0, 64)];
    let _ = s2;
    a.post(&wrs).unwrap();
    assert_eq!(wait(&a.scq, 10).len(), 10);
}

#[test]
fn queue_depth_limits_are_enomem() {
    let caps = QpCaps {
        max_send_wr: 4,
        max_recv_wr: 3,
        ..QpCaps::default()
    };
    let (a, b) = pair_with(caps, false, fast_rts(), 1);
    let s = [a.sge(0, 8)];
    let five: Vec<_> = (0..5)
        .map(|i| wr(i, &s, SendOp::RdmaWrite(b.remote(0)), SendFlags::NONE))
        .collect();
    let e = a.post(&five).unwrap_err();
    assert_eq!(e.index, 4);
    assert_eq!(e.error.errno(), libc::ENOMEM);
    // Unsignaled WRs keep their slots even once executed...
    std::thread::sleep(Duration::from_millis(20));
    let e = a.post(&five[..1]).unwrap_err();
    assert!(matches!(
        e.error,
        Error::QueueFull {
            queue: WorkQueue::Send,
            ..
        }
    ));
    // ...until a signaled WR's completion covers them. (Fill a fresh QP with 3 + 1 signaled.)
    let (a, b) = pair_with(caps, false, fast_rts(), 1);
    let s = [a.sge(0, 8)];
    let mut four: Vec<_> = (0..4)
        .map(|i| wr(i, &s, SendOp::RdmaWrite(b.remote(0)), SendFlags::NONE))
        .collect();
    four[3].flags = SIG;
    a.post(&four).unwrap();
    assert_eq!(wait(&a.scq, 1)[0].wr_id, 3);
    a.post(&four).unwrap();
    let sge = [b.sge(0, 8)];
    let r = RecvWr {
        wr_id: 0,
        sg_list: &sge,
    };
    let e = b.qp.post_recv(&[r, r, r, r]).unwrap_err();
    assert_eq!((e.index, e.error.errno()), (3, libc::ENOMEM));
    // Too many SGEs is EINVAL.
    let many = [a.sge(0, 1); 5];
    let e = a
        .post(&[wr(0, &many, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap_err();
    assert!(matches!(e.error, Error::TooManySge { n: 5, max: 4 }));
}

#[test]
fn inline_limit_and_inline_without_lkey() {
    let caps = QpCaps {
        max_inline_data: 64,
        ..QpCaps::default()
    };
    let (a, b) = pair_with(caps, false, fast_rts(), 1);
    let data = *b"inline bytes need no registration";
    let s = [Sge {
        addr: data.as_ptr() as u64,
        length: data.len() as u32,
        lkey: 0,
    }];
    b.recv(1, 0, 64);
    a.post(&[wr(1, &s, SendOp::Send, SIG | SendFlags::INLINE)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(wait(&b.rcq, 1)[0].byte_len, data.len() as u32);
    assert_eq!(&b.buf[..data.len()], &data);
    let big = [a.sge(0, 65)];
    let e = a
        .post(&[wr(2, &big, SendOp::Send, SendFlags::INLINE)])
        .unwrap_err();
    assert!(matches!(
        e.error,
        Error::InlineTooLarge { len: 65, max: 64 }
    ));
    assert_eq!(e.error.errno(), libc::EINVAL);
    let e = a
        .post(&[wr(3, &s, SendOp::RdmaRead(b.remote(0)), SendFlags::INLINE)])
        .unwrap_err();
    assert!(matches!(e.error, Error::InvalidArgument(_)));
}

#[test]
fn bad_lkey_is_local_protection_error() {
    let (a, b) = pair();
    let mut s = [a.sge(0, 64)];
    s[0].lkey ^= 0x77;
    a.post(&[
        wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SendFlags::NONE),
        wr(2, &s, SendOp::Send, SIG),
    ])
    .unwrap();
    let sc = wait(&a.scq, 2);
    assert_eq!(
        sc.iter().map(|w| w.status).collect::<Vec<_>>(),
        vec![WcStatus::LocProtErr, WcStatus::WrFlushErr]
    );
    assert_eq!(a.qp.state(), QpState::Err);
    // A READ into memory without LOCAL_WRITE is a local protection error as well.
    let a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4096,
        Access::REMOTE_READ,
    );
    let b = Side::new(SoftConfig::default(), QpCaps::default(), false, 4096, rw());
    connect(&a, &b, fast_rts(), 1);
    let s = [a.sge(0, 64)];
    a.post(&[wr(1, &s, SendOp::RdmaRead(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::LocProtErr);
}

#[test]
fn short_receive_is_length_error_on_both_sides() {
    let (a, b) = pair();
    b.recv(1, 0, 16);
    let s = [a.sge(0, 64)];
    a.post(&[wr(1, &s, SendOp::Send, SIG)]).unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(wait(&b.rcq, 1)[0].status, WcStatus::LocLenErr);
    assert!(wait_state(&b.qp, QpState::Err));
}

#[test]
fn cut_wire_times_out_with_retry_exceeded_and_flushes() {
    let (a, b) = pair();
    let s = [a.sge(0, 64)];
    a.post(&[wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    soft::inject(a.qp.as_ref(), Fault::CutWire).unwrap();
    a.recv(50, 0, 8);
    let t = Instant::now();
    a.post(&[
        wr(2, &s, SendOp::RdmaWrite(b.remote(0)), SendFlags::NONE),
        wr(3, &s, SendOp::Send, SendFlags::NONE),
    ])
    .unwrap();
    let sc = wait(&a.scq, 2);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(2, WcStatus::RetryExcErr), (3, WcStatus::WrFlushErr)]
    );
    // timeout 10 (4.2 ms) * (retry_cnt 3 + 1) ~ 17 ms.
    assert!(
        t.elapsed() >= Duration::from_millis(15),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(wait(&a.rcq, 1)[0].status, WcStatus::WrFlushErr);
    // The other end's sends fail the same way.
    let s = [b.sge(0, 64)];
    b.post(&[wr(7, &s, SendOp::RdmaWrite(a.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&b.scq, 1)[0].status, WcStatus::RetryExcErr);
}

#[test]
fn corrupted_packets_are_retransmitted() {
    let (mut a, b) = pair();
    for (i, x) in a.buf_mut().iter_mut().enumerate() {
        *x = (i % 251) as u8;
    }
    let s = [a.sge(0, 50_000)];
    for round in 0..3 {
        soft::inject(a.qp.as_ref(), Fault::CorruptNext).unwrap();
        if round == 2 {
            soft::inject(a.qp.as_ref(), Fault::CorruptNext).unwrap();
        }
        a.post(&[
            wr(1, &s, SendOp::RdmaWrite(b.remote(round * 100_000)), SIG),
            wr(
                2,
                &s,
                SendOp::RdmaWrite(b.remote(round * 100_000 + 50_000)),
                SIG,
            ),
        ])
        .unwrap();
        let sc = wait(&a.scq, 2);
        assert!(sc.iter().all(|w| w.status == WcStatus::Success), "{sc:?}");
    }
    for round in 0..3 {
        let o = round * 100_000;
        assert_eq!(&b.buf[o..o + 50_000], &a.buf[..50_000]);
        assert_eq!(&b.buf[o + 50_000..o + 100_000], &a.buf[..50_000]);
    }
    // More corruptions in a row than retries: RETRY_EXC_ERR.
    for _ in 0..10 {
        soft::inject(a.qp.as_ref(), Fault::CorruptNext).unwrap();
    }
    a.post(&[wr(3, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RetryExcErr);
}

#[test]
fn short_delay_is_transparent_long_delay_exceeds_retries() {
    let (a, b) = pair();
    let s = [a.sge(0, 64)];
    soft::inject(a.qp.as_ref(), Fault::Delay(Duration::from_millis(10))).unwrap();
    a.post(&[wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    soft::inject(a.qp.as_ref(), Fault::Delay(Duration::from_millis(400))).unwrap();
    a.post(&[wr(2, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RetryExcErr);
}

#[test]
fn killed_peer_device_means_retry_exceeded() {
    let (a, b) = pair();
    let s = [a.sge(0, 64)];
    soft::kill(b.dev.as_ref()).unwrap();
    a.post(&[wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RetryExcErr);
}

#[test]
fn completion_fd_fires_after_req_notify() {
    let (a, b) = pair();
    let fd = b.rcq.fd();
    let readable = |ms: i32| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) == 1 }
    };
    b.recv(1, 0, 64);
    b.recv(2, 0, 64);
    let s = [a.sge(0, 8)];
    // Not armed: a completion does not make the fd readable.
    a.post(&[wr(1, &s, SendOp::Send, SendFlags::NONE)]).unwrap();
    assert_eq!(wait(&b.rcq, 1).len(), 1);
    assert!(!readable(10));
    b.rcq.req_notify(false).unwrap();
    a.post(&[wr(2, &s, SendOp::Send, SendFlags::NONE)]).unwrap();
    assert!(readable(2000));
    assert_eq!(b.rcq.get_events().unwrap(), 1);
    assert!(!readable(0));
    assert_eq!(wait(&b.rcq, 1)[0].wr_id, 2);
}

#[test]
fn state_machine_is_enforced() {
    let a = Side::new(SoftConfig::default(), QpCaps::default(), false, 4096, rw());
    let s = [a.sge(0, 8)];
    // Send before RTS, recv in RESET: EINVAL.
    let e = a.post(&[wr(1, &s, SendOp::Send, SIG)]).unwrap_err();
    assert!(matches!(e.error, Error::InvalidState { .. }));
    let e =
        a.qp.post_recv(&[RecvWr {
            wr_id: 1,
            sg_list: &s,
        }])
        .unwrap_err();
    assert_eq!(e.error.errno(), libc::EINVAL);
    let rts = ModifyQp::Rts(RtsAttr::new(0));
    assert!(matches!(
        a.qp.modify(&rts),
        Err(Error::InvalidTransition {
            from: QpState::Reset,
            to: QpState::Rts
        })
    ));
    a.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
    a.recv(1, 0, 8); // receives may be posted from INIT
    assert!(a.qp.modify(&rts).is_err());
    // REMOTE_WRITE without LOCAL_WRITE is refused at registration, as ibverbs does.
    let mut mem = [0u8; 16];
    // SAFETY: the registration is refused; nothing keeps the pointer.
    let r = unsafe { a._pd.reg_mr(mem.as_mut_ptr(), 16, Access::REMOTE_WRITE) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
}

#[test]
fn unix_socket_wire() {
    let dir = std::env::temp_dir().join(format!("rzmq-soft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = |n: &str| SoftConfig {
        name: "soft0".into(),
        listen: WireAddr::Unix(dir.join(n)),
        ..SoftConfig::default()
    };
    let a = Side::new(cfg("a"), QpCaps::default(), false, 1 << 16, rw());
    let b = Side::new(cfg("b"), QpCaps::default(), false, 1 << 16, rw());
    connect(&a, &b, fast_rts(), 1);
    let s = [a.sge(0, 60_000)];
    a.post(&[wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn both_qps_on_one_device() {
    let dev = SoftDevice::open(SoftConfig::default()).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(64).unwrap();
    let init = QpInit {
        send_cq: cq.clone(),
        recv_cq: cq.clone(),
        caps: QpCaps::default(),
        sq_sig_all: true,
    };
    let q1 = pd.create_qp(&init).unwrap();
    let q2 = pd.create_qp(&init).unwrap();
    let mut mem = vec![0u8; 256].into_boxed_slice();
    // SAFETY: mem outlives the MR and QPs (dropped after them at the end of the test).
    let mr = unsafe { pd.reg_mr(mem.as_mut_ptr(), 256, rw()) }.unwrap();
    let (e1, e2) = (q1.endpoint(5).unwrap(), q2.endpoint(9).unwrap());
    for (q, e, psn) in [(&q1, e2, 5), (&q2, e1, 9)] {
        q.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
        q.modify(&ModifyQp::Rtr(RtrAttr::new(e))).unwrap();
        q.modify(&ModifyQp::Rts(RtsAttr::new(psn))).unwrap();
    }
    mem[..4].copy_from_slice(b"ping");
    let s = [Sge {
        addr: mem.as_ptr() as u64,
        length: 4,
        lkey: mr.lkey(),
    }];
    let remote = RemoteAddr {
        addr: mem.as_ptr() as u64 + 128,
        rkey: mr.rkey(),
    };
    // SAFETY: non-inline; memory registered above.
    unsafe { q1.post_send(&[wr(1, &s, SendOp::RdmaWrite(remote), SIG)]) }.unwrap();
    let c = wait(&cq, 1);
    assert_eq!(c[0].qp_num, q1.qpn());
    assert_eq!(&mem[128..132], b"ping");
    q1.modify(&ModifyQp::Err).unwrap();
    q2.modify(&ModifyQp::Err).unwrap();
    drop((q1, q2, mr));
}

// ----- two processes ----------------------------------------------------------------------

const CHILD_ENV: &str = "RZMQ_SOFT_TEST_CHILD";

/// The child half of `two_processes`: reads the parent's endpoint on stdin, prints its own, serves
/// WRITEs and SENDs, echoes a checksum by SEND, and waits to be killed.
#[test]
fn child_process_half() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    use std::io::BufRead;
    let b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        1 << 20,
        rw(),
    );
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let ea = Endpoint::from_bytes(&hex_decode(line.trim())).unwrap();
    let eb = b.qp.endpoint(77).unwrap();
    // Tell the parent where our buffer is, then our endpoint.
    println!(
        "CHILD {} {} {}",
        b.buf.as_ptr() as u64,
        b.mr.rkey(),
        hex(&eb.to_bytes())
    );
    b.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
    b.qp.modify(&ModifyQp::Rtr(RtrAttr::new(ea))).unwrap();
    b.qp.modify(&ModifyQp::Rts(RtsAttr {
        sq_psn: 77,
        ..fast_rts()
    }))
    .unwrap();
    b.recv(1, 0, 16);
    // The parent WRITEs 512 KiB then SENDs its length.
    let rc = wait_for(&b.rcq, 1, Duration::from_secs(10));
    assert_eq!(rc[0].status, WcStatus::Success);
    let n = u64::from_le_bytes(b.buf[..8].try_into().unwrap()) as usize;
    let sum: u64 = b.buf[4096..4096 + n].iter().map(|&x| u64::from(x)).sum();
    let mut reply = [0u8; 8];
    reply.copy_from_slice(&sum.to_le_bytes());
    let s = [Sge {
        addr: reply.as_ptr() as u64,
        length: 8,
        lkey: 0,
    }];
    b.post(&[wr(1, &s, SendOp::Send, SIG | SendFlags::INLINE)])
        .unwrap();
    assert_eq!(wait(&b.scq, 1)[0].status, WcStatus::Success);
    // Wait to be killed.
    std::thread::sleep(Duration::from_secs(30));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn two_processes_then_peer_killed() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let mut a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        1 << 20,
        rw(),
    );
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_half",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ea = a.qp.endpoint(1234).unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "{}", hex(&ea.to_bytes())).unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let (baddr, rkey, eb) = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child exited");
        // The harness prints "test child_process_half ... " on the same line first.
        if let Some(pos) = line.find("CHILD ") {
            let rest = line[pos + 6..].trim();
            let f: Vec<&str> = rest.split(' ').collect();
            break (
                f[0].parse::<u64>().unwrap(),
                f[1].parse::<u32>().unwrap(),
                Endpoint::from_bytes(&hex_decode(f[2])).unwrap(),
            );
        }
    };
    a.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
    a.qp.modify(&ModifyQp::Rtr(RtrAttr::new(eb))).unwrap();
    a.qp.modify(&ModifyQp::Rts(RtsAttr {
        sq_psn: 1234,
        ..fast_rts()
    }))
    .unwrap();
    let n = 512 * 1024;
    for (i, x) in a.buf_mut().iter_mut().enumerate() {
        *x = (i % 253) as u8;
    }
    a.buf_mut()[..8].copy_from_slice(&(n as u64).to_le_bytes());
    let expect: u64 = a.buf[4096..4096 + n].iter().map(|&x| u64::from(x)).sum();
    a.recv(1, 8, 8);
    let data = [a.sge(4096, n)];
    let len = [a.sge(0, 8)];
    a.post(&[
        wr(
            1,
            &data,
            SendOp::RdmaWrite(RemoteAddr {
                addr: baddr + 4096,
                rkey,
            }),
            SendFlags::NONE,
        ),
        wr(2, &len, SendOp::Send, SIG),
    ])
    .unwrap();
    assert_eq!(
        wait_for(&a.scq, 1, Duration::from_secs(10))[0].status,
        WcStatus::Success
    );
    let rc = wait_for(&a.rcq, 1, Duration::from_secs(10));
    assert_eq!(rc[0].status, WcStatus::Success);
    assert_eq!(u64::from_le_bytes(a.buf[8..16].try_into().unwrap()), expect);
    // Kill the peer process: the next WR fails with RETRY_EXC_ERR, the rest is flushed.
    child.kill().unwrap();
    child.wait().unwrap();
    a.post(&[
        wr(
            3,
            &data,
            SendOp::RdmaWrite(RemoteAddr {
                addr: baddr + 4096,
                rkey,
            }),
            SIG,
        ),
        wr(4, &len, SendOp::Send, SendFlags::NONE),
    ])
    .unwrap();
    let sc = wait(&a.scq, 2);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(3, WcStatus::RetryExcErr), (4, WcStatus::WrFlushErr)]
    );
}

/// Splits a soft endpoint's provider bytes: device id, the QP's wire secret, wire address (up
/// to the NUL that starts the optional direct-read part).
fn soft_extra(ep: &Endpoint) -> (u64, u64, String) {
    let e = &ep.extra;
    let addr = e[16..].split(|&c| c == 0).next().unwrap();
    (
        u64::from_be_bytes(e[0..8].try_into().unwrap()),
        u64::from_be_bytes(e[8..16].try_into().unwrap()),
        String::from_utf8(addr.to_vec()).unwrap(),
    )
}

#[test]
fn a_third_party_without_the_qp_secret_cannot_attach_a_wire() {
    use std::io::{Read, Write};
    let a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        1 << 16,
        rw(),
    );
    let b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        1 << 16,
        rw(),
    );
    let ea = a.qp.endpoint(1).unwrap();
    let eb = b.qp.endpoint(1).unwrap();
    let (a_dev, _, a_addr) = soft_extra(&ea);
    let (b_dev, b_secret, b_addr) = soft_extra(&eb);
    // The end with the larger (device, qpn) listens; impersonate the other one towards it.
    let (lis, lis_ep, lis_addr, imp_dev, imp_qpn, lis_secret) = if (a_dev, ea.qpn) > (b_dev, eb.qpn)
    {
        (&a, &ea, a_addr, b_dev, eb.qpn, soft_extra(&ea).1)
    } else {
        (&b, &eb, b_addr, a_dev, ea.qpn, b_secret)
    };
    let other = if std::ptr::eq(lis, &a) { &b } else { &a };
    let other_ep = if std::ptr::eq(lis, &a) {
        eb.clone()
    } else {
        ea.clone()
    };
    lis.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
    lis.qp
        .modify(&ModifyQp::Rtr(RtrAttr::new(other_ep)))
        .unwrap();
    let WireAddr::Tcp(sa) = WireAddr::parse(&lis_addr).unwrap() else {
        panic!("tcp wire expected")
    };
    // A well-formed hello with every public number right and the secret guessed wrong.
    let mut hello = Vec::new();
    hello.extend_from_slice(b"RZSW");
    hello.extend_from_slice(&imp_dev.to_be_bytes());
    hello.extend_from_slice(&imp_qpn.to_be_bytes());
    hello.extend_from_slice(&soft_extra(lis_ep).0.to_be_bytes());
    hello.extend_from_slice(&lis_ep.qpn.to_be_bytes());
    hello.extend_from_slice(&(lis_secret ^ 1).to_be_bytes());
    hello.resize(40, 0);
    let mut s = std::net::TcpStream::connect(sa).unwrap();
    s.write_all(&hello).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut byte = [0u8; 1];
    // Closed at once (a wrong guess at a ready QP is not kept open), well before the read
    // timeout and the listener's 10 s accept deadline.
    assert!(
        matches!(s.read(&mut byte), Ok(0)),
        "the listener kept a wire with a wrong secret"
    );
    // The real peer still connects and traffic flows both ways.
    let lis_ep2 = Endpoint::from_bytes(&lis_ep.to_bytes()).unwrap();
    other.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
    other
        .qp
        .modify(&ModifyQp::Rtr(RtrAttr::new(lis_ep2)))
        .unwrap();
    for side in [lis, other] {
        side.qp
            .modify(&ModifyQp::Rts(RtsAttr {
                sq_psn: 1,
                ..fast_rts()
            }))
            .unwrap();
    }
    let s1 = [lis.sge(0, 100)];
    lis.post(&[wr(1, &s1, SendOp::RdmaWrite(other.remote(0)), SIG)])
        .unwrap();
    let s2 = [other.sge(200, 100)];
    other
        .post(&[wr(2, &s2, SendOp::RdmaWrite(lis.remote(200)), SIG)])
        .unwrap();
    assert_eq!(wait(&lis.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(wait(&other.scq, 1)[0].status, WcStatus::Success);
}

/// A connected pair whose `b` side's buffer is registered for memory windows only (no remote
/// rights of its own).
fn mw_pair() -> (Side, Side) {
    let caps = QpCaps::default();
    let a = Side::new(SoftConfig::default(), caps, false, 1 << 16, rw());
    let b = Side::new(
        SoftConfig::default(),
        caps,
        false,
        1 << 16,
        Access::LOCAL_WRITE | Access::MW_BIND,
    );
    connect(&a, &b, fast_rts(), 1);
    (a, b)
}

#[test]
fn a_registration_for_windows_grants_nothing_remotely() {
    let (a, b) = mw_pair();
    let s = [a.sge(0, 16)];
    a.post(&[wr(1, &s, SendOp::RdmaRead(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RemAccessErr);
}

#[test]
fn memory_windows_grant_exactly_their_range_and_rights() {
    let (a, b) = mw_pair();
    let mw = b._pd.alloc_mw().unwrap();
    let base = b.buf.as_ptr() as u64;
    let old = mw.rkey();
    let rkey =
        b.qp.bind_mw(9, &*mw, &*b.mr, base + 4096, 1024, Access::REMOTE_READ)
            .unwrap();
    assert_eq!(rkey, inc_rkey(old));
    assert_ne!(rkey, old);
    let at = |off: u64| RemoteAddr {
        addr: base + off,
        rkey,
    };
    // Inside the window: fine.
    let s = [a.sge(0, 1024)];
    a.post(&[wr(1, &s, SendOp::RdmaRead(at(4096)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    // WRITE through a READ-only window: refused (and the QPs go to ERR).
    let s = [a.sge(0, 8)];
    a.post(&[wr(2, &s, SendOp::RdmaWrite(at(4096)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RemAccessErr);
}

#[test]
fn memory_window_misuse_is_rejected_like_hardware() {
    let caps = QpCaps::default();
    let a = Side::new(SoftConfig::default(), caps, false, 1 << 16, rw());
    // The MR lacks MW_BIND.
    let b = Side::new(
        SoftConfig::default(),
        caps,
        false,
        1 << 16,
        Access::LOCAL_WRITE,
    );
    let mw = b._pd.alloc_mw().unwrap();
    let base = b.buf.as_ptr() as u64;
    // Before RTS: a state error, as ibv_post_send's EINVAL.
    let err =
        b.qp.bind_mw(1, &*mw, &*b.mr, base, 16, Access::REMOTE_READ)
            .unwrap_err();
    assert!(matches!(err, Error::InvalidState { .. }), "{err}");
    connect(&a, &b, fast_rts(), 1);
    b.qp.bind_mw(2, &*mw, &*b.mr, base, 16, Access::REMOTE_READ)
        .unwrap();
    let wc = wait(&b.scq, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::MwBindErr));
    assert!(wait_state(&b.qp, QpState::Err));
}

#[test]
fn invalidated_window_refuses_the_old_rkey() {
    let (a, b) = mw_pair();
    let mw = b._pd.alloc_mw().unwrap();
    let base = b.buf.as_ptr() as u64;
    let rkey =
        b.qp.bind_mw(1, &*mw, &*b.mr, base, 4096, Access::REMOTE_READ)
            .unwrap();
    b.qp.invalidate_mw(2, rkey).unwrap();
    let s = [a.sge(0, 64)];
    let read = SendOp::RdmaRead(RemoteAddr { addr: base, rkey });
    a.post(&[wr(3, &s, read, SIG)]).unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::RemAccessErr);
}

/// GID-addressed devices (what the emulated libibverbs uses): the GID, QP number and PSN that
/// `ibv_modify_qp` carries are enough to connect; a GID of anything else is refused.
#[test]
fn gid_addressed_devices_connect_by_gid_and_qpn() {
    let da = SoftDevice::open_gid_addressed(SoftConfig::default()).unwrap();
    let db = SoftDevice::open_gid_addressed(SoftConfig::default()).unwrap();
    let (ga, gb) = (da.gid(), db.gid());
    assert!(!ga.is_zero() && ga != gb);
    assert_eq!(da.query_gid(1, 0).unwrap(), ga);
    assert!(SoftDevice::open(SoftConfig::default())
        .unwrap()
        .gid()
        .is_zero());
    let a = Side::on(da, QpCaps::default(), false, 1 << 16, rw());
    let b = Side::on(db, QpCaps::default(), false, 1 << 16, rw());
    for (s, g, peer) in [(&a, gb, &b), (&b, ga, &a)] {
        let remote = soft::endpoint_from_gid(&g, peer.qp.qpn(), 0).unwrap();
        s.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
        s.qp.modify(&ModifyQp::Rtr(RtrAttr::new(remote))).unwrap();
        s.qp.modify(&ModifyQp::Rts(fast_rts())).unwrap();
    }
    let s = [a.sge(0, 4096)];
    a.post(&[wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    let c = wait(&a.scq, 1);
    assert_eq!(c[0].status, WcStatus::Success);
    assert!(matches!(
        soft::endpoint_from_gid(&Gid([1; 16]), 1, 0),
        Err(Error::Descriptor(_))
    ));
    // IPv4 TCP listeners only.
    let unix = SoftConfig {
        listen: WireAddr::Unix(std::env::temp_dir().join("rzmq-gid-unix")),
        ..SoftConfig::default()
    };
    assert!(SoftDevice::open_gid_addressed(unix).is_err());
}

/// Connects `a` and `b` as [`connect`] does, with each side's READ limits: `rd.0` is the
/// side's `max_rd_atomic` (READs it issues at once), `rd.1` its `max_dest_rd_atomic` (READs it
/// serves at once).
fn connect_rd(a: &Side, b: &Side, rts: RtsAttr, rd_a: (u8, u8), rd_b: (u8, u8)) {
    let (pa, pb) = (0x2000, 0x3000);
    let ea = a.qp.endpoint(pa).unwrap();
    let eb = b.qp.endpoint(pb).unwrap();
    for (s, remote, psn, rd) in [(a, eb, pa, rd_a), (b, ea, pb, rd_b)] {
        s.qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
        let mut rtr = RtrAttr::new(remote);
        rtr.max_dest_rd_atomic = rd.1;
        s.qp.modify(&ModifyQp::Rtr(rtr)).unwrap();
        s.qp.modify(&ModifyQp::Rts(RtsAttr {
            sq_psn: psn,
            max_rd_atomic: rd.0,
            ..rts
        }))
        .unwrap();
    }
}

#[test]
fn outstanding_reads_never_exceed_max_rd_atomic() {
    // b serves at most 2 READs at once and answers a third with an Invalid Request NAK (as a
    // responder out of READ resources does); a may issue 2 at once. 64 READs posted in one
    // call all succeed, in order: the excess waited in a's send queue.
    let a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    let mut b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    connect_rd(&a, &b, fast_rts(), (2, 2), (2, 2));
    for (i, x) in b.buf_mut().iter_mut().enumerate() {
        *x = (i % 253) as u8;
    }
    let n = 64;
    let len = 64 * 1024;
    let sges: Vec<[Sge; 1]> = (0..n).map(|i| [a.sge(i * len, len)]).collect();
    let wrs: Vec<SendWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| wr(i as u64, s, SendOp::RdmaRead(b.remote(i * len)), SIG))
        .collect();
    a.post(&wrs).unwrap();
    let sc = wait(&a.scq, n);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        (0..n as u64)
            .map(|i| (i, WcStatus::Success))
            .collect::<Vec<_>>()
    );
    assert_eq!(&a.buf[..n * len], &b.buf[..n * len]);
    assert_eq!(a.qp.state(), QpState::Rts);
    assert_eq!(b.qp.state(), QpState::Rts);
}

#[test]
fn a_requester_beyond_the_responders_read_resources_gets_invalid_request() {
    // The check the previous test relies on: a issues up to 4 READs at once, b serves only 1.
    let a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    let b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    connect_rd(&a, &b, fast_rts(), (4, 4), (4, 1));
    let len = 1 << 20;
    let sges: Vec<[Sge; 1]> = (0..4).map(|i| [a.sge(i * len, len)]).collect();
    let wrs: Vec<SendWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| wr(i as u64, s, SendOp::RdmaRead(b.remote(i * len)), SIG))
        .collect();
    a.post(&wrs).unwrap();
    let sc = wait(&a.scq, 4);
    assert_eq!(sc.len(), 4, "{sc:?}");
    assert!(
        sc.iter().any(|w| w.status == WcStatus::RemInvReqErr),
        "{sc:?}"
    );
    assert!(sc.iter().filter(|w| w.status == WcStatus::Success).count() <= 1);
    assert!(wait_state(&a.qp, QpState::Err));
    assert!(wait_state(&b.qp, QpState::Err));
}

#[test]
fn requests_waiting_behind_read_responses_are_not_timed_out() {
    // a serves 64 MiB of b's READs per round while it posts WRITEs of its own: they wait behind
    // the responses (or a READ limit), which may take longer than a's ACK timeout with one
    // retry. Only requests on the wire are timed, so nothing fails. The window (4 tries of
    // 67 ms) is wide enough for a progress thread starved on a loaded 2-core machine; that a
    // queued request has no timer at all is checked exactly in the soft provider's unit tests.
    let rts = RtsAttr {
        timeout: 14, // 67 ms per try
        retry_cnt: 3,
        ..RtsAttr::new(0)
    };
    let mut a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    let b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        8 << 20,
        rw(),
    );
    connect(&a, &b, rts, 1);
    for (i, x) in a.buf_mut().iter_mut().enumerate() {
        *x = (i % 251) as u8;
    }
    let len = 4 << 20;
    for round in 0..8u64 {
        let rd_sges: Vec<[Sge; 1]> = (0..16).map(|i| [b.sge((i % 2) * len, len)]).collect();
        let reads: Vec<SendWr<'_>> = rd_sges
            .iter()
            .enumerate()
            .map(|(i, s)| wr(i as u64, s, SendOp::RdmaRead(a.remote(0)), SIG))
            .collect();
        b.post(&reads).unwrap();
        let w_sges: Vec<[Sge; 1]> = (0..16).map(|i| [a.sge(i * 64, 64)]).collect();
        let writes: Vec<SendWr<'_>> = w_sges
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let dst = b.remote(len * 2 - 4096 + i * 64);
                wr(100 + i as u64, s, SendOp::RdmaWrite(dst), SIG)
            })
            .collect();
        a.post(&writes).unwrap();
        let sa = wait_for(&a.scq, 16, Duration::from_secs(20));
        assert!(
            sa.len() == 16 && sa.iter().all(|w| w.status == WcStatus::Success),
            "round {round}: {sa:?}"
        );
        let sb = wait_for(&b.scq, 16, Duration::from_secs(20));
        assert!(
            sb.len() == 16 && sb.iter().all(|w| w.status == WcStatus::Success),
            "round {round}: {sb:?}"
        );
    }
    assert_eq!(&b.buf[..len], &a.buf[..len]);
}

#[test]
fn a_fenced_write_waits_for_the_read_before_it() {
    // a READs b's pattern into its buffer, then WRITEs that range back to b elsewhere with
    // IBV_SEND_FENCE: the WRITE goes out only after the READ completed, so it carries what the
    // READ brought, not the zeros that were there when it was posted.
    let a = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    let mut b = Side::new(
        SoftConfig::default(),
        QpCaps::default(),
        false,
        4 << 20,
        rw(),
    );
    connect(&a, &b, fast_rts(), 1);
    let len = 1 << 20;
    for (i, x) in b.buf_mut()[..len].iter_mut().enumerate() {
        *x = (i % 249) as u8 + 1;
    }
    let s = [a.sge(0, len)];
    a.post(&[
        wr(1, &s, SendOp::RdmaRead(b.remote(0)), SIG),
        wr(
            2,
            &s,
            SendOp::RdmaWrite(b.remote(2 * len)),
            SIG | SendFlags::FENCE,
        ),
    ])
    .unwrap();
    let sc = wait(&a.scq, 2);
    assert_eq!(
        sc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(&b.buf[2 * len..3 * len], &b.buf[..len]);
}

#[test]
fn same_host_reads_copy_from_the_responder_process_when_both_ends_offer_it() {
    // A READ between two devices of this process: with direct reads on at both ends the
    // payload is copied from the responder's memory (and counted); with either end off it
    // streams over the wire. The data is the same either way.
    let len = 1 << 20;
    for (cma_a, cma_b) in [(true, true), (true, false), (false, true), (false, false)] {
        let cfg = |cma| SoftConfig {
            cma,
            ..SoftConfig::default()
        };
        let a = Side::new(cfg(cma_a), QpCaps::default(), false, len, rw());
        let mut b = Side::new(cfg(cma_b), QpCaps::default(), false, len, rw());
        for (i, x) in b.buf_mut().iter_mut().enumerate() {
            *x = (i * 7 + 3) as u8;
        }
        connect(&a, &b, fast_rts(), 1);
        let s = [a.sge(0, len)];
        a.post(&[wr(1, &s, SendOp::RdmaRead(b.remote(0)), SIG)])
            .unwrap();
        assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
        assert!(a.buf[..] == b.buf[..], "cma {cma_a}/{cma_b}: data");
        let pulled = a
            .dev
            .as_any()
            .downcast_ref::<SoftDevice>()
            .unwrap()
            .pulled_bytes();
        let want = if cma_a && cma_b { len as u64 } else { 0 };
        assert_eq!(pulled, want, "cma {cma_a}/{cma_b}: bytes copied directly");
    }
}

#[test]
fn a_device_not_opened_for_fault_tests_is_out_of_their_reach() {
    // An address of its own: the cutter below would find any other test's devices there.
    let cfg = || SoftConfig {
        listen: WireAddr::parse("tcp:127.0.0.9:0").unwrap(),
        ..SoftConfig::default()
    };
    let open = || SoftDevice::open(cfg()).unwrap();
    let a = Side::on(open(), QpCaps::default(), false, 4096, rw());
    let b = Side::on(open(), QpCaps::default(), false, 4096, rw());
    connect(&a, &b, fast_rts(), 12);
    let s = [a.sge(0, 64)];
    a.post(&[wr(1, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
    assert!(soft::inject(a.qp.as_ref(), Fault::CutWire).is_err());
    assert!(soft::kill(b.dev.as_ref()).is_err());
    assert_eq!(soft::cut_wires_at("127.0.0.9".parse().unwrap()), 0);
    a.post(&[wr(2, &s, SendOp::RdmaWrite(b.remote(0)), SIG)])
        .unwrap();
    assert_eq!(wait(&a.scq, 1)[0].status, WcStatus::Success);
}

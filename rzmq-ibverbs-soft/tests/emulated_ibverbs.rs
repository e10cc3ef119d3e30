//! The unmodified ibverbs provider (rdma-mummy-sys) over this library.
//!
//! rdma-mummy-sys `dlopen`s `libibverbs.so.1` in a constructor, before `main`: each test
//! therefore runs this test binary again as a child process whose `LD_LIBRARY_PATH` names a
//! directory holding the built `libibverbs_soft.so` as `libibverbs.so.1`; the `child_*` tests do
//! nothing unless `RZMQ_IBV_SOFT_CHILD` is set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rdma_mummy_sys as sys;
use rzmq_core::msg::Msg;
use rzmq_rdma::datapath::{ConnectInfo, DataPath, DataPathConfig};
use rzmq_rdma::provider::ibverbs::IbvProvider;
use rzmq_rdma::provider::{
    Access, Device, Error, InitAttr, ModifyQp, Provider, ProviderKind, QpCaps, QpInit, QpState,
    RtsAttr, SendFlags, SendOp, SendWr, Sge,
};

/// The directory holding `libibverbs.so.1` -> the cdylib, built (once per test process) by a
/// nested `cargo build`: `cargo test` does not build a cdylib-only library target.
fn lib_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let so = BUILT.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/<test> -> target/<profile>
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "rzmq-ibverbs-soft"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CARGO_TARGET_DIR", profile_dir.parent().unwrap());
        if !profile_dir.ends_with("debug") {
            let profile = profile_dir.file_name().unwrap().to_str().unwrap();
            cmd.args(["--profile", profile]);
        }
        assert!(cmd.status().unwrap().success(), "building the cdylib");
        let so = profile_dir.join("libibverbs_soft.so");
        assert!(so.exists(), "{} missing", so.display());
        so
    });
    let profile_dir = so.parent().unwrap();
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = profile_dir.join(format!(
        "ibverbs-soft-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libibverbs.so.1");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(so, &link).unwrap();
    dir
}

/// Runs the test `name` of this binary in a child process that loads the emulated library.
fn run_child(name: &str) {
    let dir = lib_dir();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("LD_LIBRARY_PATH", &dir)
        .env("RZMQ_IBV_SOFT_CHILD", "1")
        .env("RZMQ_RDMA_PROVIDER", "ibverbs")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "child {name} did not run:\n{text}"
    );
}

fn in_child() -> bool {
    std::env::var_os("RZMQ_IBV_SOFT_CHILD").is_some()
}

#[test]
fn datapath_round_trip_over_emulated_libibverbs() {
    run_child("child_datapath_round_trip");
}

#[test]
fn verbs_misuse_is_rejected_as_real_nics_do() {
    run_child("child_verbs_misuse");
}

#[test]
fn library_has_the_libibverbs_soname_and_no_mummy_inside() {
    let dir = lib_dir();
    let so = std::fs::canonicalize(dir.join("libibverbs.so.1")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = std::fs::read(&so).unwrap();
    let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
    assert!(has(b"libibverbs.so.1\0"), "soname");
    // rdma-mummy-sys' wrapper (its constructor dlopens libibverbs.so.1, i.e. this library)
    // must not be linked in.
    assert!(!has(b"__wrapper_get_device_list"), "mummy linked in");
    assert!(Path::new(&so).exists());
}

// ---------------------------------------------------------------------------------------------
// Children
// ---------------------------------------------------------------------------------------------

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn recv_one(a: &mut DataPath, b: &mut DataPath) -> Msg {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(m) = b.recv().unwrap() {
            return m;
        }
        a.process().unwrap();
        b.process().unwrap();
        assert!(Instant::now() < end, "frame never arrived");
        b.arm().unwrap();
        b.process().unwrap();
        b.wait(Duration::from_millis(1));
    }
}

#[test]
fn child_datapath_round_trip() {
    if !in_child() {
        return;
    }
    let p = IbvProvider::new();
    let devs = p.devices().unwrap();
    assert_eq!(devs.len(), 1, "{devs:?}");
    assert_eq!(devs[0].name, "rzmq_soft0");
    assert_eq!(devs[0].provider, ProviderKind::Ibverbs);
    let da: Arc<dyn Device> = p.open(None).unwrap();
    let db: Arc<dyn Device> = p.open(None).unwrap();
    let cfg = DataPathConfig {
        rts: RtsAttr {
            timeout: 13,
            retry_cnt: 3,
            ..RtsAttr::new(0)
        },
        ..DataPathConfig::default()
    };
    let (mut a, ia) = DataPath::new(da, cfg.clone()).unwrap();
    let (mut b, ib) = DataPath::new(db, cfg).unwrap();
    let ia = ConnectInfo::from_bytes(&ia.to_bytes()).unwrap();
    let ib = ConnectInfo::from_bytes(&ib.to_bytes()).unwrap();
    a.connect(&ib).unwrap();
    b.connect(&ia).unwrap();
    let released = Arc::new(AtomicUsize::new(0));
    // Eager frames and rendezvous frames (memory-window grants, zero-copy READ, FIN) both ways.
    for (i, &len) in [0usize, 1, 256, 65536, 65537, 1 << 20, 8 << 20]
        .iter()
        .enumerate()
    {
        for dir in 0..2 {
            let (x, y) = if dir == 0 {
                (&mut a, &mut b)
            } else {
                (&mut b, &mut a)
            };
            let data = pattern(len, i as u8);
            let want = data.clone();
            let mut boxed = data.into_boxed_slice();
            let (ptr, n) = (boxed.as_mut_ptr(), boxed.len());
            let r = released.clone();
            // SAFETY: the boxed slice moves into the release closure, which keeps it alive
            // until the last owner of the message runs it.
            let m = unsafe {
                Msg::from_external(
                    ptr,
                    n,
                    Some(Box::new(move || {
                        drop(boxed);
                        r.fetch_add(1, Ordering::SeqCst);
                    })),
                )
            };
            assert!(x.send(m).unwrap().is_none());
            x.flush().unwrap();
            let got = recv_one(x, y);
            assert_eq!(got.len(), len);
            assert!(got.data() == want.as_slice(), "payload of {len} bytes");
        }
    }
    let end = Instant::now() + Duration::from_secs(10);
    while released.load(Ordering::SeqCst) < 14 {
        a.process().unwrap();
        b.process().unwrap();
        assert!(Instant::now() < end, "senders' buffers never released");
    }
    assert!(a.stats().rndv_tx >= 2 && b.stats().rndv_reads >= 2);
}

fn cq_poll_one(cq: *mut sys::ibv_cq) -> sys::ibv_wc {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        // SAFETY: ibv_wc is plain data.
        let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
        // SAFETY: a live CQ and room for one completion.
        let n = unsafe { sys::ibv_poll_cq(cq, 1, &mut wc) };
        assert!(n >= 0);
        if n == 1 {
            return wc;
        }
        assert!(Instant::now() < end, "no completion");
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct RawQp {
    qp: *mut sys::ibv_qp,
}

fn qp_state(qp: *mut sys::ibv_qp) -> u32 {
    // SAFETY: plain data.
    let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain data.
    let mut i: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    // SAFETY: live QP, valid out pointers.
    let rc = unsafe {
        sys::ibv_query_qp(
            qp,
            &mut a,
            sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32,
            &mut i,
        )
    };
    assert_eq!(rc, 0);
    a.qp_state
}

#[test]
fn child_verbs_misuse() {
    if !in_child() {
        return;
    }
    use sys::ibv_qp_attr_mask as M;
    use sys::ibv_qp_state as S;
    // Through the provider first: posting before RTS is EINVAL.
    let p = IbvProvider::new();
    let dev = p.open(None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(64).unwrap();
    let qp = pd
        .create_qp(&QpInit {
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
            caps: QpCaps::default(),
            sq_sig_all: false,
        })
        .unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: buf outlives the MR (dropped at the end of the test, after mr).
    let mr = unsafe { pd.reg_mr(buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE) }.unwrap();
    let sge = [Sge {
        addr: buf.as_ptr() as u64,
        length: 64,
        lkey: mr.lkey(),
    }];
    let wr = SendWr {
        wr_id: 1,
        sg_list: &sge,
        op: SendOp::Send,
        flags: SendFlags::SIGNALED,
    };
    // SAFETY: registered memory that lives past the call.
    let e = unsafe { qp.post_send(&[wr]) }.unwrap_err();
    assert_eq!(e.index, 0);
    assert_eq!(e.error.errno(), libc::EINVAL, "{e}");
    assert_eq!(qp.state(), QpState::Reset);
    // A receive in RESET: EINVAL too.
    let e = qp
        .post_recv(&[rzmq_rdma::provider::RecvWr {
            wr_id: 2,
            sg_list: &sge,
        }])
        .unwrap_err();
    assert_eq!(e.error.errno(), libc::EINVAL);
    // Skipping INIT: RESET -> RTS is not a transition.
    let rts = qp.modify(&ModifyQp::Rts(RtsAttr::new(0))).unwrap_err();
    assert!(
        matches!(
            rts,
            Error::Verbs {
                errno: libc::EINVAL,
                ..
            }
        ),
        "{rts}"
    );
    qp.modify(&ModifyQp::Init(InitAttr::new(1))).unwrap();
    assert_eq!(qp.state(), QpState::Init);
    drop(mr);
    drop(qp);

    // Raw verbs: attribute masks.
    let mut n = 0;
    // SAFETY: valid out pointer.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    assert!(!list.is_null() && n == 1);
    // SAFETY: the list holds n devices.
    let ctx = unsafe { sys::ibv_open_device(*list) };
    // SAFETY: from ibv_get_device_list.
    unsafe { sys::ibv_free_device_list(list) };
    assert!(!ctx.is_null());
    // SAFETY: live context.
    let pd = unsafe { sys::ibv_alloc_pd(ctx) };
    // SAFETY: live context; no channel.
    let cq = unsafe { sys::ibv_create_cq(ctx, 64, ptr::null_mut(), ptr::null_mut(), 0) };
    assert!(!pd.is_null() && !cq.is_null());
    let new_qp = || {
        // SAFETY: plain data.
        let mut ia: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        ia.cap = sys::ibv_qp_cap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        // SAFETY: live PD and attributes.
        let qp = unsafe { sys::ibv_create_qp(pd, &mut ia) };
        assert!(!qp.is_null());
        RawQp { qp }
    };
    let modify = |qp: &RawQp, a: &mut sys::ibv_qp_attr, mask: u32| {
        // SAFETY: live QP and attributes.
        unsafe { sys::ibv_modify_qp(qp.qp, a, mask as i32) }
    };
    let init_mask = M::IBV_QP_STATE.0 | M::IBV_QP_PKEY_INDEX.0 | M::IBV_QP_PORT.0;
    let (qa, qb) = (new_qp(), new_qp());
    for q in [&qa, &qb] {
        // SAFETY: plain data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = S::IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = 7;
        // INIT without IBV_QP_ACCESS_FLAGS: EINVAL, still RESET.
        assert_eq!(modify(q, &mut a, init_mask), libc::EINVAL);
        assert_eq!(qp_state(q.qp), S::IBV_QPS_RESET);
        // With a bit INIT does not take (IBV_QP_SQ_PSN): EINVAL.
        assert_eq!(
            modify(
                q,
                &mut a,
                init_mask | M::IBV_QP_ACCESS_FLAGS.0 | M::IBV_QP_SQ_PSN.0
            ),
            libc::EINVAL
        );
        assert_eq!(modify(q, &mut a, init_mask | M::IBV_QP_ACCESS_FLAGS.0), 0);
        assert_eq!(qp_state(q.qp), S::IBV_QPS_INIT);
    }
    let mut gid = sys::ibv_gid { raw: [0; 16] };
    // SAFETY: live context, valid out pointer.
    assert_eq!(unsafe { sys::ibv_query_gid(ctx, 1, 0, &mut gid) }, 0);
    let rtr = |q: &RawQp, peer: &RawQp, mask: u32| {
        // SAFETY: plain data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = S::IBV_QPS_RTR;
        a.path_mtu = sys::ibv_mtu::IBV_MTU_1024;
        // SAFETY: live QP.
        a.dest_qp_num = unsafe { (*peer.qp).qp_num };
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = 1;
        modify(q, &mut a, mask)
    };
    let rtr_mask = M::IBV_QP_STATE.0
        | M::IBV_QP_AV.0
        | M::IBV_QP_PATH_MTU.0
        | M::IBV_QP_DEST_QPN.0
        | M::IBV_QP_RQ_PSN.0
        | M::IBV_QP_MAX_DEST_RD_ATOMIC.0
        | M::IBV_QP_MIN_RNR_TIMER.0;
    // RTR without the address vector, or without the remote QP number: EINVAL.
    assert_eq!(rtr(&qa, &qb, rtr_mask & !M::IBV_QP_AV.0), libc::EINVAL);
    assert_eq!(
        rtr(&qa, &qb, rtr_mask & !M::IBV_QP_DEST_QPN.0),
        libc::EINVAL
    );
    assert_eq!(qp_state(qa.qp), S::IBV_QPS_INIT);
    let rts = |q: &RawQp, mask: u32| {
        // SAFETY: plain data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = S::IBV_QPS_RTS;
        a.sq_psn = 0;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        modify(q, &mut a, mask)
    };
    let rts_mask = M::IBV_QP_STATE.0
        | M::IBV_QP_SQ_PSN.0
        | M::IBV_QP_TIMEOUT.0
        | M::IBV_QP_RETRY_CNT.0
        | M::IBV_QP_RNR_RETRY.0
        | M::IBV_QP_MAX_QP_RD_ATOMIC.0;
    // INIT -> RTS skips RTR: EINVAL.
    assert_eq!(rts(&qa, rts_mask), libc::EINVAL);
    for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
        assert_eq!(rtr(q, peer, rtr_mask), 0);
        // RTS without the retry count: EINVAL.
        assert_eq!(rts(q, rts_mask & !M::IBV_QP_RETRY_CNT.0), libc::EINVAL);
        assert_eq!(rts(q, rts_mask), 0);
        assert_eq!(qp_state(q.qp), S::IBV_QPS_RTS);
    }

    // REMOTE_WRITE without LOCAL_WRITE: EINVAL; type-1 windows: EOPNOTSUPP.
    let mut mem = vec![7u8; 8192];
    // SAFETY: live PD and memory.
    let bad = unsafe { sys::ibv_reg_mr(pd, mem.as_mut_ptr().cast(), 4096, 2) };
    assert!(bad.is_null());
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EINVAL)
    );
    // SAFETY: live PD.
    let mw1 = unsafe { sys::ibv_alloc_mw(pd, sys::ibv_mw_type::IBV_MW_TYPE_1) };
    assert!(mw1.is_null());
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EOPNOTSUPP)
    );

    // A deregistered MR's lkey: the WR completes with LOC_PROT_ERR and the QP goes to ERR.
    // SAFETY: live PD and memory (outlives the MR).
    let mr = unsafe { sys::ibv_reg_mr(pd, mem.as_mut_ptr().cast(), 8192, 7) };
    assert!(!mr.is_null());
    // SAFETY: live PD with an MR: EBUSY.
    assert_eq!(unsafe { sys::ibv_dealloc_pd(pd) }, libc::EBUSY);
    // SAFETY: live MR.
    let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
    // SAFETY: deregistered once.
    assert_eq!(unsafe { sys::ibv_dereg_mr(mr) }, 0);
    let mut sge = sys::ibv_sge {
        addr: mem.as_ptr() as u64,
        length: 64,
        lkey,
    };
    // SAFETY: plain data.
    let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = 77;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
    wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    wr.wr.rdma = sys::rdma_t {
        remote_addr: mem.as_ptr() as u64 + 4096,
        rkey,
    };
    let mut badwr = ptr::null_mut();
    // SAFETY: a valid WR (its lkey is stale on purpose).
    assert_eq!(unsafe { sys::ibv_post_send(qa.qp, &mut wr, &mut badwr) }, 0);
    let wc = cq_poll_one(cq);
    assert_eq!(wc.wr_id, 77);
    assert_eq!(
        wc.status,
        sys::ibv_wc_status::IBV_WC_LOC_PROT_ERR,
        "{}",
        wc.status
    );
    assert_eq!(qp_state(qa.qp), S::IBV_QPS_ERR);
    // Posting in ERR is accepted and flushed.
    wr.wr_id = 78;
    // SAFETY: as above.
    assert_eq!(unsafe { sys::ibv_post_send(qa.qp, &mut wr, &mut badwr) }, 0);
    let wc = cq_poll_one(cq);
    assert_eq!(
        (wc.wr_id, wc.status),
        (78, sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR)
    );
    // SAFETY: the status string table.
    let s = unsafe { std::ffi::CStr::from_ptr(sys::ibv_wc_status_str(wc.status)) };
    assert_eq!(s.to_str().unwrap(), "Work Request Flushed Error");
    // The QP went to ERR on its own: an asynchronous QP_FATAL event (non-blocking async fd).
    // SAFETY: live context.
    unsafe {
        let fd = (*ctx).async_fd;
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        );
    }
    // SAFETY: plain data / union.
    let mut ev: sys::ibv_async_event = unsafe { std::mem::zeroed() };
    // SAFETY: live context, valid out pointer.
    assert_eq!(unsafe { sys::ibv_get_async_event(ctx, &mut ev) }, 0);
    assert!(ev.event_type == sys::ibv_event_type::IBV_EVENT_QP_FATAL);
    // SAFETY: the event's element is the QP.
    assert_eq!(unsafe { ev.element.qp }, qa.qp);
    // SAFETY: acknowledging the event taken above.
    unsafe { sys::ibv_ack_async_event(&mut ev) };
    // SAFETY: destroyed once, children before parents.
    unsafe {
        assert_eq!(sys::ibv_destroy_qp(qa.qp), 0);
        assert_eq!(sys::ibv_destroy_qp(qb.qp), 0);
        assert_eq!(sys::ibv_destroy_cq(cq), 0);
        assert_eq!(sys::ibv_dealloc_pd(pd), 0);
        assert_eq!(sys::ibv_close_device(ctx), 0);
    }
    drop(mem);
    drop(buf);
}

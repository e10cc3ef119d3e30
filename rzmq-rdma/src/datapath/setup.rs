//! Setting a data path up: the QP, its CQ, the registered ring and mailbox, the readiness fd
//! ([`DataPath::new`]); connecting it to the peer's ([`DataPath::connect`]).

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{ConnectInfo, DataPath, DataPathConfig, DataPathError, Stats};
use crate::fd::EventFd;
use crate::mr_cache::MrCache;
use crate::provider::{self, Access, Device, InitAttr, ModifyQp, QpCaps, QpInit, RtrAttr, RtsAttr};
use crate::region::Region;
use crate::ring::{Ring, MAILBOX_LEN};
use crate::rndv::{Inbox, Pool, RndvSender};

impl DataPath {
    /// Creates the QP (INIT) and the receive side on `dev`; returns the info for the peer.
    pub fn new(
        dev: Arc<dyn Device>,
        cfg: DataPathConfig,
    ) -> Result<(DataPath, ConnectInfo), DataPathError> {
        let dev_kind = dev.info().provider;
        let pd = dev.alloc_pd()?;
        let rc = &cfg.ring;
        // Binds and invalidations (two per rendezvous frame in flight) take send-queue slots
        // beside the ring's own.
        let mw_wrs = 2 * cfg.max_rndv_in_flight as u32;
        let cq =
            dev.create_cq(rc.max_send_wr + mw_wrs + 2 * rc.recv_depth + cfg.max_reads as u32 + 64)?;
        // Memory windows when the device has them: the registration cache then grants nothing
        // remotely by itself, and each frame's window covers exactly its bytes until its FIN.
        let first_mw = if cfg.use_mws {
            pd.alloc_mw().ok()
        } else {
            None
        };
        let qp = pd.create_qp(&QpInit {
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
            caps: QpCaps {
                max_send_wr: rc.max_send_wr + mw_wrs,
                max_recv_wr: rc.recv_depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            sq_sig_all: false,
        })?;
        let max_inline = qp.caps().max_inline_data;
        if (max_inline as usize) < MAILBOX_LEN {
            return Err(DataPathError::Setup("device inline limit below 32 bytes"));
        }
        let ring_region = Region::new(rc.size as usize);
        let mailbox = Region::new(MAILBOX_LEN);
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        // SAFETY: both regions are owned by this DataPath and dropped after the MRs (field
        // order); they are only accessed through the ring's protocol rules.
        let ring_mr = unsafe { pd.reg_mr(ring_region.as_ptr(), ring_region.len(), rw) }?;
        // SAFETY: as above.
        let mailbox_mr = unsafe { pd.reg_mr(mailbox.as_ptr(), mailbox.len(), rw) }?;
        qp.modify(&ModifyQp::Init(InitAttr {
            port: dev.port(),
            pkey_index: 0,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        }))?;
        let psn = (random_u32() & 0xff_ffff).max(1);
        let endpoint = qp.endpoint(psn)?;
        let info = ConnectInfo {
            endpoint,
            ring_addr: ring_region.addr(),
            ring_rkey: ring_mr.rkey(),
            ring_size: rc.size,
            mailbox_addr: mailbox.addr(),
            mailbox_rkey: mailbox_mr.rkey(),
            recv_depth: rc.recv_depth,
        };
        let wake = Arc::new(EventFd::new().map_err(provider::Error::Io)?);
        // SAFETY: plain syscall; checked below and owned.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(provider::Error::Io(std::io::Error::last_os_error()).into());
        }
        // SAFETY: ep is a fresh fd we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        epoll_add(ep, cq.fd()).map_err(provider::Error::Io)?;
        epoll_add(ep, wake.fd()).map_err(provider::Error::Io)?;
        let w2 = wake.clone();
        let woken = Arc::new(AtomicBool::new(false));
        let woken2 = woken.clone();
        let pool = Pool::new(
            Box::new(pd.clone()),
            cfg.pool_bytes,
            Some(Box::new(move || {
                if !woken2.swap(true, Ordering::AcqRel) {
                    w2.signal();
                }
            })),
        );
        // The QP may not have more READs outstanding than its max_rd_atomic (a NIC would hold
        // the excess in the send queue): never post more.
        let mut inbox = Inbox::new(cfg.max_reads.min(usize::from(cfg.rts.max_rd_atomic.max(1))));
        inbox.set_max_read_bytes(cfg.max_read_bytes as u64);
        let cache = MrCache::new(
            Box::new(pd.clone()),
            cfg.mr_cache_entries,
            cfg.mr_cache_bytes,
            cfg.mr_cache
                .unwrap_or(dev_kind != crate::provider::ProviderKind::Ibverbs),
        );
        Ok((
            DataPath {
                qp,
                cq,
                mirror_mr: None,
                _ring_mr: ring_mr,
                _mailbox_mr: mailbox_mr,
                ring: None,
                regions: Some((ring_region, mailbox)),
                peer: None,
                inbox,
                rndv_tx: RndvSender::new(),
                use_mws: first_mw.is_some(),
                free_mws: first_mw.into_iter().collect(),
                last_desc: None,
                pool,
                cache,
                _pd: pd,
                _dev: dev,
                epoll,
                wake,
                woken,
                armed: false,
                polled: false,
                psn,
                max_inline,
                eager_max: 0,
                wcs: Vec::with_capacity(64),
                stats: Stats::default(),
                failed: false,
                failure: None,
                progress: 0,
                cfg,
            },
            info,
        ))
    }

    /// Connects to the peer described by `peer`: receives posted, QP to RTR and RTS. The peer
    /// must not send before it has our info and we have called this (the upgrade handshake
    /// orders that).
    pub fn connect(&mut self, peer: &ConnectInfo) -> Result<(), DataPathError> {
        let (ring_region, mailbox) = self
            .regions
            .take()
            .ok_or(DataPathError::Setup("connect called twice"))?;
        let ring = Ring::with_regions(
            self.cfg.ring,
            ring_region,
            mailbox,
            peer.ring_size,
            peer.recv_depth,
        )?;
        let m = ring.mirror_region();
        // SAFETY: the mirror lives in the ring, dropped after this MR (field order).
        let mirror_mr = unsafe { self._pd.reg_mr(m.as_ptr(), m.len(), Access::NONE) }?;
        self.eager_max = self.cfg.rndv_threshold.min(ring.max_payload());
        self.mirror_mr = Some(mirror_mr);
        self.ring = Some(ring);
        self.peer = Some(peer.clone());
        self.post_ops()?;
        let mut rtr = RtrAttr::new(peer.endpoint.clone());
        rtr.min_rnr_timer = self.cfg.min_rnr_timer;
        rtr.port = self._dev.port();
        rtr.sgid_index = self._dev.gid_index() as u8;
        self.qp.modify(&ModifyQp::Rtr(rtr))?;
        self.qp.modify(&ModifyQp::Rts(RtsAttr {
            sq_psn: self.psn,
            ..self.cfg.rts
        }))?;
        self.cq.req_notify(false)?;
        self.armed = true;
        Ok(())
    }
}

fn epoll_add(ep: RawFd, fd: RawFd) -> std::io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: fd as u64,
    };
    // SAFETY: valid epoll fd, valid fd, valid event struct.
    if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn random_u32() -> u32 {
    let mut v: u32 = 0;
    // SAFETY: getrandom writes at most 4 bytes into the valid u32.
    let n = unsafe { libc::getrandom(&mut v as *mut u32 as *mut libc::c_void, 4, 0) };
    if n != 4 {
        v = std::process::id().wrapping_mul(2_654_435_761);
    }
    v
}

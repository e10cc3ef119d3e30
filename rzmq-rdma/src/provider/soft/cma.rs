//! Same-host direct READs: proof that a peer process is the one that validated the READ, and
//! `process_vm_readv` copies from it.

use super::keys::MrTable;
use super::link::{deliver, Io, RxDest};

/// Where a peer's process can be read directly ([`SoftConfig::cma`]): its pid and the address
/// of its QP's proof slot, where it stores the secret of the QP it was connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CmaInfo {
    pub(crate) pid: u32,
    pub(crate) slot_addr: u64,
}

pub(super) const CMA_INFO_LEN: usize = 12;
/// READs that try the peer's proof before giving up on direct reads for the connection.
pub(super) const CMA_PROOF_TRIES: u8 = 16;

/// Whether `c` is our peer's process and we can read it: its proof slot holds `secret`, our
/// QP's random secret, which only the QP it was given to stores there. A peer naming another
/// process (or a process of the same number in another pid namespace) fails this, so direct
/// reads only ever copy from the process that validated the READ.
pub(super) fn cma_proven(c: &CmaInfo, secret: u64) -> bool {
    let mut got: u64 = 0;
    secret != 0
        && matches!(
            sys_pull(c.pid, c.slot_addr, (&mut got as *mut u64).cast(), 8),
            Io::Progress(8)
        )
        && got == secret
}

/// Copies `len` bytes at `remote` in process `pid` to `dst` (one `process_vm_readv`).
pub(super) fn sys_pull(pid: u32, remote: u64, dst: *mut u8, len: usize) -> Io {
    let local = libc::iovec {
        iov_base: dst.cast(),
        iov_len: len,
    };
    let from = libc::iovec {
        iov_base: remote as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the kernel writes at most `len` bytes to `dst`, which the caller hands out as
    // writable for `len` bytes; the remote side is only read, and a bad remote range fails with
    // EFAULT instead of touching anything here.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &from, 1, 0) };
    if n > 0 {
        Io::Progress(n as usize)
    } else {
        Io::Dead
    }
}

/// Copies `len` bytes at `remote` in process `pid` into `dest`'s segments (checked against the
/// MR table as received bytes are); false when the remote memory cannot be read.
pub(super) fn pull_into(
    dest: &mut RxDest,
    mrs: &MrTable,
    pid: u32,
    remote: u64,
    len: usize,
) -> bool {
    let mut done = 0usize;
    while done < len {
        let mut at = remote + done as u64;
        let r = deliver(dest, mrs, len - done, |p, k| {
            let r = sys_pull(pid, at, p, k);
            if let Io::Progress(got) = r {
                at += got as u64;
            }
            r
        });
        match r {
            Io::Progress(n) if n > 0 => done += n,
            _ => return false,
        }
    }
    true
}

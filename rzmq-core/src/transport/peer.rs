//! Peer credentials: whether an accepted peer passes the socket's accept filters
//! (`ZMQ_TCP_ACCEPT_FILTER`, `ZMQ_IPC_FILTER_PID/UID/GID`).

use std::os::fd::AsRawFd;

use crate::engine::Stream;
use crate::options::Options;

/// Whether an accepted peer passes the socket's accept filters (TCP_ACCEPT_FILTER for tcp,
/// IPC_FILTER_PID/UID/GID for ipc, checked with the peer's credentials).
pub(crate) fn peer_allowed(stream: &Stream, o: &Options) -> bool {
    match stream {
        Stream::Tcp(t) => match t.peer_addr() {
            Ok(a) => o.tcp_peer_allowed(&a),
            Err(_) => false,
        },
        Stream::Unix(u) => {
            let mut cred = libc::ucred {
                pid: 0,
                uid: 0,
                gid: 0,
            };
            let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
            // SAFETY: cred and len are live and sized for SO_PEERCRED.
            let rc = unsafe {
                libc::getsockopt(
                    u.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_PEERCRED,
                    (&mut cred as *mut libc::ucred).cast(),
                    &mut len,
                )
            };
            if rc != 0 {
                return false;
            }
            o.ipc_peer_allowed(cred.pid, cred.uid, cred.gid, &user_groups(cred.uid))
        }
    }
}

/// The supplementary groups of a user (for IPC_FILTER_GID), empty when unknown.
fn user_groups(uid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut pwd: libc::passwd = unsafe_zeroed_passwd();
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are to live, correctly sized buffers.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut res) };
    if rc != 0 || res.is_null() {
        return out;
    }
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut n = groups.len() as libc::c_int;
    // SAFETY: pw_name is a valid C string inside buf; groups has room for n entries.
    let rc = unsafe { libc::getgrouplist(pwd.pw_name, pwd.pw_gid, groups.as_mut_ptr(), &mut n) };
    if rc >= 0 {
        out.extend(groups[..n.max(0) as usize].iter().copied());
    }
    out
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: passwd is a plain C struct for which all-zero bytes (null pointers) are valid.
    unsafe { std::mem::zeroed() }
}

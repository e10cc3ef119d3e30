//! libzmq 4.3.5's context options (`zmq_ctx_set` / `zmq_ctx_get`) and rzmq's own context
//! options ([`super::HUGE_PAGES`], [`super::TCP_LOCAL_CC`]): numbers, defaults, validation.

use std::collections::BTreeSet;

use super::ids::{BLOCKY, IPV6};
use super::rzmq::{HUGE_PAGES, TCP_LOCAL_CC};
use super::value::as_int;
use crate::env;
use crate::error::{Error, Result};

/// `ZMQ_IO_THREADS`: number of I/O threads (>= 0).
pub const IO_THREADS: i32 = 1;
/// `ZMQ_MAX_SOCKETS`: maximum number of sockets (>= 1).
pub const MAX_SOCKETS: i32 = 2;
/// `ZMQ_SOCKET_LIMIT`: largest `MAX_SOCKETS` accepted (get only; same number as `THREAD_PRIORITY`).
pub const SOCKET_LIMIT: i32 = 3;
/// `ZMQ_THREAD_PRIORITY`: I/O thread priority (set only; same number as `SOCKET_LIMIT`).
pub const THREAD_PRIORITY: i32 = 3;
/// `ZMQ_THREAD_SCHED_POLICY`: I/O thread scheduling policy.
pub const THREAD_SCHED_POLICY: i32 = 4;
/// `ZMQ_MAX_MSGSZ`: maximum message size.
pub const MAX_MSGSZ: i32 = 5;
/// `ZMQ_MSG_T_SIZE`: `sizeof (zmq_msg_t)` (get only).
pub const MSG_T_SIZE: i32 = 6;
/// `ZMQ_THREAD_AFFINITY_CPU_ADD`: add a CPU to the I/O threads' affinity (set only).
pub const THREAD_AFFINITY_CPU_ADD: i32 = 7;
/// `ZMQ_THREAD_AFFINITY_CPU_REMOVE`: remove a CPU from the I/O threads' affinity (set only).
pub const THREAD_AFFINITY_CPU_REMOVE: i32 = 8;
/// `ZMQ_THREAD_NAME_PREFIX`: prefix of the I/O thread names.
pub const THREAD_NAME_PREFIX: i32 = 9;
/// `ZMQ_ZERO_COPY_RECV` (DRAFT; handled by stable builds): zero-copy receive.
pub const ZERO_COPY_RECV: i32 = 10;

/// `ZMQ_IO_THREADS_DFLT`.
pub const IO_THREADS_DFLT: i32 = 1;
/// `ZMQ_MAX_SOCKETS_DFLT`.
pub const MAX_SOCKETS_DFLT: i32 = 1023;
/// `ZMQ_THREAD_PRIORITY_DFLT`.
pub const THREAD_PRIORITY_DFLT: i32 = -1;
/// `ZMQ_THREAD_SCHED_POLICY_DFLT`.
pub const THREAD_SCHED_POLICY_DFLT: i32 = -1;
/// What `ZMQ_SOCKET_LIMIT` reports: 65535 (the epoll poller does not clip it).
pub const SOCKET_LIMIT_VALUE: i32 = 65535;
/// `sizeof (zmq_msg_t)`, reported by `ZMQ_MSG_T_SIZE`.
pub const MSG_T_SIZE_VALUE: i32 = 64;

/// Context options (`zmq_ctx_set` / `zmq_ctx_get`), with libzmq 4.3.5's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtxOptions {
    /// `ZMQ_IO_THREADS` (1).
    pub io_threads: i32,
    /// `ZMQ_MAX_SOCKETS` (1023).
    pub max_sockets: i32,
    /// `ZMQ_MAX_MSGSZ` (`INT_MAX`).
    pub max_msgsz: i32,
    /// `ZMQ_IPV6` (false): the default of new sockets' `ZMQ_IPV6`.
    pub ipv6: bool,
    /// `ZMQ_BLOCKY` (true): new sockets' linger is -1 if set, else 0.
    pub blocky: bool,
    /// `ZMQ_ZERO_COPY_RECV` (true).
    pub zero_copy_recv: bool,
    /// `ZMQ_THREAD_PRIORITY` (-1: leave the OS default).
    pub thread_priority: i32,
    /// `ZMQ_THREAD_SCHED_POLICY` (-1: leave the OS default).
    pub thread_sched_policy: i32,
    /// CPUs of `ZMQ_THREAD_AFFINITY_CPU_ADD` (empty: no affinity).
    pub thread_affinity_cpus: BTreeSet<i32>,
    /// `ZMQ_THREAD_NAME_PREFIX` (empty).
    pub thread_name_prefix: Vec<u8>,
    /// [`TCP_LOCAL_CC`]: the congestion control new sockets' same-host tcp connections run
    /// (`reno`, or `RZMQ_TCP_LOCAL_CC`; `None`: the host's).
    pub tcp_local_cc: Option<Vec<u8>>,
}

impl Default for CtxOptions {
    fn default() -> Self {
        CtxOptions::new()
    }
}

impl CtxOptions {
    /// The defaults of a new context.
    pub fn new() -> Self {
        CtxOptions {
            io_threads: IO_THREADS_DFLT,
            max_sockets: MAX_SOCKETS_DFLT,
            max_msgsz: i32::MAX,
            ipv6: false,
            blocky: true,
            zero_copy_recv: true,
            thread_priority: THREAD_PRIORITY_DFLT,
            thread_sched_policy: THREAD_SCHED_POLICY_DFLT,
            thread_affinity_cpus: BTreeSet::new(),
            thread_name_prefix: Vec::new(),
            tcp_local_cc: env::core().tcp_local_cc.clone(),
        }
    }

    /// `zmq_ctx_set (ctx, opt, value)`.
    pub fn set_int(&mut self, opt: i32, value: i32) -> Result<()> {
        if opt == TCP_LOCAL_CC {
            return Err(Error::Inval);
        }
        self.set(opt, &value.to_ne_bytes())
    }

    /// `zmq_ctx_set_ext (ctx, opt, value, len)`: ints are exactly 4 bytes; `THREAD_NAME_PREFIX`
    /// also takes 1 to 16 bytes of text (but 4 bytes are always read as an int, which is then
    /// stored in decimal). Everything else, and invalid values, are `EINVAL`.
    pub fn set(&mut self, opt: i32, value: &[u8]) -> Result<()> {
        let int = as_int(value);
        let nonneg = int.filter(|&x| x >= 0).ok_or(Error::Inval);
        match opt {
            MAX_SOCKETS => self.max_sockets = int.filter(|&x| x >= 1).ok_or(Error::Inval)?,
            IO_THREADS => self.io_threads = nonneg?,
            IPV6 => self.ipv6 = nonneg? != 0,
            BLOCKY => self.blocky = nonneg? != 0,
            MAX_MSGSZ => self.max_msgsz = nonneg?,
            ZERO_COPY_RECV => self.zero_copy_recv = nonneg? != 0,
            THREAD_SCHED_POLICY => self.thread_sched_policy = nonneg?,
            THREAD_AFFINITY_CPU_ADD => {
                self.thread_affinity_cpus.insert(nonneg?);
            }
            THREAD_AFFINITY_CPU_REMOVE => {
                if !self.thread_affinity_cpus.remove(&nonneg?) {
                    return Err(Error::Inval);
                }
            }
            THREAD_PRIORITY => self.thread_priority = nonneg?,
            HUGE_PAGES => crate::pool::set_huge_pages(nonneg? != 0),
            TCP_LOCAL_CC => {
                // An algorithm's name (the kernel's TCP_CA_NAME_MAX is 16 with the NUL).
                let ok = value.len() <= 15
                    && value
                        .iter()
                        .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
                if !ok {
                    return Err(Error::Inval);
                }
                self.tcp_local_cc = env::local_cc(std::str::from_utf8(value).unwrap_or(""));
            }
            THREAD_NAME_PREFIX => match int {
                Some(x) => self.thread_name_prefix = x.to_string().into_bytes(),
                None if !value.is_empty() && value.len() <= 16 => {
                    self.thread_name_prefix = value.to_vec()
                }
                None => return Err(Error::Inval),
            },
            _ => return Err(Error::Inval),
        }
        Ok(())
    }

    /// `zmq_ctx_get (ctx, opt)`: the int value, `EINVAL` for unknown or set-only options.
    ///
    /// `SOCKET_LIMIT` (3, the same number as the set-only `THREAD_PRIORITY`) is 65535,
    /// `MSG_T_SIZE` 64, and `THREAD_NAME_PREFIX` the prefix read by `atoi`.
    pub fn get(&self, opt: i32) -> Result<i32> {
        Ok(match opt {
            MAX_SOCKETS => self.max_sockets,
            SOCKET_LIMIT => SOCKET_LIMIT_VALUE,
            IO_THREADS => self.io_threads,
            IPV6 => i32::from(self.ipv6),
            BLOCKY => i32::from(self.blocky),
            MAX_MSGSZ => self.max_msgsz,
            MSG_T_SIZE => MSG_T_SIZE_VALUE,
            ZERO_COPY_RECV => i32::from(self.zero_copy_recv),
            THREAD_SCHED_POLICY => self.thread_sched_policy,
            HUGE_PAGES => i32::from(crate::pool::huge_pages()),
            THREAD_NAME_PREFIX => {
                crate::endpoint::c_atoi(&String::from_utf8_lossy(&self.thread_name_prefix))
            }
            _ => return Err(Error::Inval),
        })
    }

    /// `zmq_ctx_get_ext (ctx, opt, buf, &len)`: a 4-byte buffer gets the int as [`Self::get`];
    /// for `THREAD_NAME_PREFIX` a buffer at least as long as the prefix gets its bytes (no NUL,
    /// the rest untouched; libzmq leaves `len` unchanged). Other sizes are `EINVAL`.
    /// [`TCP_LOCAL_CC`] fills a buffer at least as long as the name (the rest zeroed; empty:
    /// the host's algorithm).
    pub fn get_ext(&self, opt: i32, buf: &mut [u8]) -> Result<()> {
        if opt == TCP_LOCAL_CC {
            let cc = self.tcp_local_cc.as_deref().unwrap_or(b"");
            if buf.len() < cc.len() {
                return Err(Error::Inval);
            }
            buf[..cc.len()].copy_from_slice(cc);
            buf[cc.len()..].fill(0);
            return Ok(());
        }
        if buf.len() == 4 {
            buf.copy_from_slice(&self.get(opt)?.to_ne_bytes());
            return Ok(());
        }
        if opt == THREAD_NAME_PREFIX && buf.len() >= self.thread_name_prefix.len() {
            buf[..self.thread_name_prefix.len()].copy_from_slice(&self.thread_name_prefix);
            return Ok(());
        }
        Err(Error::Inval)
    }
}

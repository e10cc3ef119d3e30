//! `zmq_setsockopt` on [`Options`]: the socket type's own options first (`xsetsockopt`), then
//! rzmq's, then the generic ones (`options_t::setsockopt`), each validated as libzmq 4.3.5 does;
//! every failure is `EINVAL`.

use std::collections::BTreeSet;

use super::curve::{parse_curve_key, HAVE_CURVE};
use super::filter::TcpAcceptFilter;
use super::ids::*;
use super::socket::Options;
use super::value::{as_int, relaxed_bool, strict_bool, Applied};
use crate::error::{Error, Result};
use crate::zmtp::SocketType;

/// `IFNAMSIZ`: the longest `ZMQ_BINDTODEVICE` value libzmq accepts.
const BINDDEVSIZ: usize = 16;

impl Options {
    /// `zmq_setsockopt` with a non-NULL value pointer (see [`Options::set_raw`]).
    pub fn set(&mut self, opt: i32, value: &[u8]) -> Result<Applied> {
        self.set_raw(opt, Some(value))
    }

    /// `zmq_setsockopt (s, opt, NULL, 0)`: clears the string and filter options that allow it
    /// (`SOCKS_PROXY`, `SOCKS_USERNAME`, `SOCKS_PASSWORD`, `BINDTODEVICE`, `TCP_ACCEPT_FILTER`,
    /// `IPC_FILTER_*`; `PLAIN_USERNAME`/`PLAIN_PASSWORD` reset the mechanism to NULL).
    pub fn set_null(&mut self, opt: i32) -> Result<Applied> {
        self.set_raw(opt, None)
    }

    /// `zmq_setsockopt` with the value as the C API passes it: `None` for a NULL pointer with
    /// length 0, else the bytes. libzmq tells these apart for some options: a NULL value clears
    /// them, while a non-NULL empty value is `EINVAL`. (A NULL pointer with a non-zero length
    /// is the C layer's to refuse.)
    pub fn set_raw(&mut self, opt: i32, value: Option<&[u8]>) -> Result<Applied> {
        if let Some(done) = self.rzmq.set(opt, value.unwrap_or(&[])) {
            return done.map(|()| Applied::Stored);
        }
        if let Some(applied) = self.set_pattern(opt, value.unwrap_or(&[]))? {
            return Ok(applied);
        }
        self.set_generic(opt, value)
    }

    /// The socket types' own options (`xsetsockopt`). `Ok(None)` means "not handled": libzmq
    /// then tries the generic options (which fail with `EINVAL` for all of these numbers).
    fn set_pattern(&mut self, opt: i32, v: &[u8]) -> Result<Option<Applied>> {
        use SocketType as T;
        let int = as_int(v);
        // The flag options of ROUTER, DEALER, REQ, XPUB: exactly an int, and >= 0.
        let flag = int.filter(|&x| x >= 0).map(|x| x != 0);
        let t = self.socket_type;
        let is_xpub = t == T::XPub || t == T::Pub;
        let done = Ok(Some(Applied::PatternFlag(opt)));
        match opt {
            SUBSCRIBE | UNSUBSCRIBE if t == T::Sub || (is_xpub && self.xpub_manual) => {
                let topic = v.to_vec();
                Ok(Some(if opt == SUBSCRIBE {
                    Applied::Subscribe(topic)
                } else {
                    Applied::Unsubscribe(topic)
                }))
            }
            ROUTER_RAW if t == T::Router => match flag {
                Some(b) => {
                    self.router_raw = b;
                    if b {
                        self.recv_routing_id = false;
                        self.raw_socket = true;
                    }
                    done
                }
                None => Ok(None),
            },
            ROUTER_NOTIFY if t == T::Router => {
                match int.filter(|&x| (0..=NOTIFY_CONNECT | NOTIFY_DISCONNECT).contains(&x)) {
                    Some(x) => {
                        self.router_notify = x;
                        done
                    }
                    None => Ok(None),
                }
            }
            ROUTER_MANDATORY if t == T::Router => set_flag(&mut self.router_mandatory, flag, opt),
            ROUTER_HANDOVER if t == T::Router => set_flag(&mut self.router_handover, flag, opt),
            PROBE_ROUTER if t == T::Router || t == T::Dealer || t == T::Req => {
                set_flag(&mut self.probe_router, flag, opt)
            }
            REQ_CORRELATE if t == T::Req => set_flag(&mut self.req_correlate, flag, opt),
            REQ_RELAXED if t == T::Req => set_flag(&mut self.req_relaxed, flag, opt),
            CONNECT_ROUTING_ID if t == T::Router || t == T::Stream => {
                if v.is_empty() {
                    return Ok(None);
                }
                self.connect_routing_id = Some(v.to_vec());
                done
            }
            STREAM_NOTIFY if t == T::Stream => match strict_bool(v) {
                Some(b) => {
                    self.stream_notify = b;
                    done
                }
                None => Ok(None),
            },
            XPUB_VERBOSE | XPUB_VERBOSER | XPUB_MANUAL_LAST_VALUE | XPUB_NODROP | XPUB_MANUAL
                if is_xpub =>
            {
                let Some(b) = flag else { return Ok(None) };
                match opt {
                    XPUB_VERBOSE => {
                        self.xpub_verbose = b;
                        self.xpub_verboser = false;
                    }
                    XPUB_VERBOSER => {
                        self.xpub_verbose = b;
                        self.xpub_verboser = b;
                    }
                    XPUB_MANUAL_LAST_VALUE => {
                        self.xpub_manual = b;
                        self.xpub_manual_last_value = b;
                    }
                    XPUB_NODROP => self.xpub_nodrop = b,
                    _ => self.xpub_manual = b,
                }
                done
            }
            // RADIO takes ZMQ_XPUB_NODROP too (libzmq `radio_t::xsetsockopt`).
            XPUB_NODROP if t == T::Radio => set_flag(&mut self.xpub_nodrop, flag, opt),
            ONLY_FIRST_SUBSCRIBE if is_xpub || t == T::XSub => {
                set_flag(&mut self.only_first_subscribe, flag, opt)
            }
            // libzmq reads any int, negative ones included, as a flag (`!= 0`).
            XSUB_VERBOSE_UNSUBSCRIBE if t == T::XSub => {
                set_flag(&mut self.xsub_verbose_unsubscribe, int.map(|x| x != 0), opt)
            }
            XPUB_WELCOME_MSG if is_xpub => {
                self.xpub_welcome_msg = if v.is_empty() { None } else { Some(v.to_vec()) };
                done
            }
            _ => Ok(None),
        }
    }

    /// The generic options (`options_t::setsockopt`).
    fn set_generic(&mut self, opt: i32, value: Option<&[u8]>) -> Result<Applied> {
        let is_null = value.is_none();
        let v = value.unwrap_or(&[]);
        let int = as_int(v);
        let stored = Ok(Applied::Stored);
        // An int satisfying a predicate, else EINVAL.
        let int_if = |pred: fn(i32) -> bool| int.filter(|&x| pred(x)).ok_or(Error::Inval);
        match opt {
            SNDHWM => {
                self.sndhwm = int_if(|x| x >= 0)?;
                Ok(Applied::Hwm)
            }
            RCVHWM => {
                self.rcvhwm = int_if(|x| x >= 0)?;
                Ok(Applied::Hwm)
            }
            AFFINITY => {
                self.affinity = u64::from_ne_bytes(v.try_into().map_err(|_| Error::Inval)?);
                stored
            }
            ROUTING_ID => {
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                self.routing_id = v.to_vec();
                stored
            }
            RATE => set_int(&mut self.rate, int_if(|x| x > 0)),
            RECOVERY_IVL => set_int(&mut self.recovery_ivl, int_if(|x| x >= 0)),
            SNDBUF => set_int(&mut self.sndbuf, int_if(|x| x >= -1)),
            RCVBUF => set_int(&mut self.rcvbuf, int_if(|x| x >= -1)),
            TOS => set_int(&mut self.tos, int_if(|x| x >= 0)),
            // Any bytes; NULL or empty clears them (libzmq `options_t::setsockopt`).
            HICCUP_MSG => {
                self.hiccup_msg = v.to_vec();
                stored
            }
            HELLO_MSG => {
                self.hello_msg = v.to_vec();
                stored
            }
            DISCONNECT_MSG => {
                self.disconnect_msg = v.to_vec();
                stored
            }
            PRIORITY => set_int(&mut self.priority, int_if(|x| x >= 0)),
            BUSY_POLL => set_int(&mut self.busy_poll, int.ok_or(Error::Inval)),
            LINGER => set_int(&mut self.linger, int_if(|x| x >= -1)),
            CONNECT_TIMEOUT => set_int(&mut self.connect_timeout, int_if(|x| x >= 0)),
            TCP_MAXRT => set_int(&mut self.tcp_maxrt, int_if(|x| x >= 0)),
            RECONNECT_STOP => set_int(&mut self.reconnect_stop, int_if(|_| true)),
            RECONNECT_IVL => set_int(&mut self.reconnect_ivl, int_if(|x| x >= -1)),
            RECONNECT_IVL_MAX => set_int(&mut self.reconnect_ivl_max, int_if(|x| x >= 0)),
            BACKLOG => set_int(&mut self.backlog, int_if(|x| x >= 0)),
            MAXMSGSIZE => {
                self.maxmsgsize = i64::from_ne_bytes(v.try_into().map_err(|_| Error::Inval)?);
                stored
            }
            MULTICAST_HOPS => set_int(&mut self.multicast_hops, int_if(|x| x > 0)),
            MULTICAST_MAXTPDU => set_int(&mut self.multicast_maxtpdu, int_if(|x| x > 0)),
            RCVTIMEO => set_int(&mut self.rcvtimeo, int_if(|x| x >= -1)),
            SNDTIMEO => set_int(&mut self.sndtimeo, int_if(|x| x >= -1)),
            IPV4ONLY => {
                self.ipv6 = !strict_bool(v).ok_or(Error::Inval)?;
                stored
            }
            IPV6 => set_bool(&mut self.ipv6, strict_bool(v)),
            SOCKS_PROXY => set_string_strict(&mut self.socks_proxy, value, usize::MAX),
            SOCKS_USERNAME | SOCKS_PASSWORD => {
                let field = if opt == SOCKS_USERNAME {
                    &mut self.socks_username
                } else {
                    &mut self.socks_password
                };
                if v.is_empty() {
                    field.clear();
                    return stored;
                }
                set_string_strict(field, value, 255)
            }
            TCP_KEEPALIVE => set_int(&mut self.tcp_keepalive, int_if(|x| (-1..=1).contains(&x))),
            TCP_KEEPALIVE_CNT => set_int(&mut self.tcp_keepalive_cnt, int_if(|x| x >= -1)),
            TCP_KEEPALIVE_IDLE => set_int(&mut self.tcp_keepalive_idle, int_if(|x| x >= -1)),
            TCP_KEEPALIVE_INTVL => set_int(&mut self.tcp_keepalive_intvl, int_if(|x| x >= -1)),
            IMMEDIATE => set_bool(&mut self.immediate, strict_bool(v)),
            TCP_ACCEPT_FILTER => {
                if is_null {
                    self.tcp_accept_filters.clear();
                    return stored;
                }
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                // libzmq parses the C string, which ends at the first NUL.
                let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
                if text.is_empty() {
                    self.tcp_accept_filters.clear();
                    return stored;
                }
                let text = std::str::from_utf8(text).map_err(|_| Error::Inval)?;
                self.tcp_accept_filters
                    .push(TcpAcceptFilter::parse(text, self.ipv6)?);
                stored
            }
            IPC_FILTER_PID => set_filter(&mut self.ipc_filter_pids, value, i32::from_ne_bytes),
            IPC_FILTER_UID => set_filter(&mut self.ipc_filter_uids, value, u32::from_ne_bytes),
            IPC_FILTER_GID => set_filter(&mut self.ipc_filter_gids, value, u32::from_ne_bytes),
            PLAIN_SERVER => {
                let b = strict_bool(v).ok_or(Error::Inval)?;
                self.as_server = b;
                self.mechanism = if b { PLAIN } else { NULL };
                stored
            }
            PLAIN_USERNAME | PLAIN_PASSWORD => {
                if is_null {
                    self.mechanism = NULL;
                    return stored;
                }
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                if opt == PLAIN_USERNAME {
                    self.plain_username = v.to_vec();
                } else {
                    self.plain_password = v.to_vec();
                }
                self.as_server = false;
                self.mechanism = PLAIN;
                stored
            }
            ZAP_DOMAIN => {
                // do_setsockopt_string_allow_empty_relaxed: despite its name, empty is EINVAL.
                if v.is_empty() || v.len() > 255 {
                    return Err(Error::Inval);
                }
                self.zap_domain = v.to_vec();
                stored
            }
            CURVE_SERVER if HAVE_CURVE => {
                let b = strict_bool(v).ok_or(Error::Inval)?;
                self.as_server = b;
                self.mechanism = if b { CURVE } else { NULL };
                stored
            }
            CURVE_PUBLICKEY | CURVE_SECRETKEY | CURVE_SERVERKEY if HAVE_CURVE => {
                let key = parse_curve_key(v).ok_or(Error::Inval)?;
                match opt {
                    CURVE_PUBLICKEY => self.curve_publickey = key,
                    CURVE_SECRETKEY => self.curve_secretkey = key,
                    _ => {
                        self.curve_serverkey = key;
                        self.as_server = false;
                    }
                }
                self.mechanism = CURVE;
                stored
            }
            CONFLATE => set_bool(&mut self.conflate, strict_bool(v)),
            HANDSHAKE_IVL => set_int(&mut self.handshake_ivl, int_if(|x| x >= 0)),
            INVERT_MATCHING => set_bool(&mut self.invert_matching, relaxed_bool(v)),
            HEARTBEAT_IVL => set_int(&mut self.heartbeat_ivl, int_if(|x| x >= 0)),
            HEARTBEAT_TTL => {
                // libzmq converts to deciseconds (truncating toward zero) before the range check,
                // so -99..=6553599 ms are accepted.
                let ds = int
                    .map(|x| x / 100)
                    .filter(|&x| (0..=i32::from(u16::MAX)).contains(&x));
                self.heartbeat_ttl = ds.ok_or(Error::Inval)? as u16;
                stored
            }
            HEARTBEAT_TIMEOUT => set_int(&mut self.heartbeat_timeout, int_if(|x| x >= 0)),
            USE_FD => set_int(&mut self.use_fd, int_if(|x| x >= -1)),
            BINDTODEVICE => set_string_strict(&mut self.bindtodevice, value, BINDDEVSIZ),
            ZAP_ENFORCE_DOMAIN => set_bool(&mut self.zap_enforce_domain, relaxed_bool(v)),
            LOOPBACK_FASTPATH => set_bool(&mut self.loopback_fastpath, relaxed_bool(v)),
            METADATA => {
                // Not 4 bytes long (libzmq's is_int check), "X-name:value" with a non-empty value.
                if v.is_empty() || v.len() == 4 {
                    return Err(Error::Inval);
                }
                let pos = v.iter().position(|&b| b == b':').ok_or(Error::Inval)?;
                if pos == 0 || pos == v.len() - 1 {
                    return Err(Error::Inval);
                }
                let key = &v[..pos];
                if !key.starts_with(b"X-") || key.len() > 255 {
                    return Err(Error::Inval);
                }
                self.metadata
                    .entry(key.to_vec())
                    .or_insert_with(|| v[pos + 1..].to_vec());
                stored
            }
            MULTICAST_LOOP => set_bool(&mut self.multicast_loop, relaxed_bool(v)),
            _ => Err(Error::Inval),
        }
    }
}

/// Stores a validated int.
fn set_int(field: &mut i32, value: Result<i32>) -> Result<Applied> {
    *field = value?;
    Ok(Applied::Stored)
}

/// Stores a validated bool.
fn set_bool(field: &mut bool, value: Option<bool>) -> Result<Applied> {
    *field = value.ok_or(Error::Inval)?;
    Ok(Applied::Stored)
}

/// Stores a socket-type flag; `Ok(None)` (fall through to `EINVAL`) when the value is invalid.
fn set_flag(field: &mut bool, value: Option<bool>, opt: i32) -> Result<Option<Applied>> {
    Ok(value.map(|b| {
        *field = b;
        Applied::PatternFlag(opt)
    }))
}

/// `do_setsockopt_string_allow_empty_strict`: NULL clears, 1 to `max` bytes set, else `EINVAL`.
fn set_string_strict(field: &mut Vec<u8>, value: Option<&[u8]>, max: usize) -> Result<Applied> {
    match value {
        None => field.clear(),
        Some(v) if !v.is_empty() && v.len() <= max => *field = v.to_vec(),
        Some(_) => return Err(Error::Inval),
    }
    Ok(Applied::Stored)
}

/// `do_setsockopt_set`: NULL clears the set, exactly 4 bytes add a member, else `EINVAL`.
fn set_filter<T: Ord>(
    set: &mut BTreeSet<T>,
    value: Option<&[u8]>,
    conv: fn([u8; 4]) -> T,
) -> Result<Applied> {
    match value {
        None => set.clear(),
        Some(v) => {
            let bytes: [u8; 4] = v.try_into().map_err(|_| Error::Inval)?;
            set.insert(conv(bytes));
        }
    }
    Ok(Applied::Stored)
}

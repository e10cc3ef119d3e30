//! `zmq_getsockopt` on [`Options`] (`options_t::getsockopt`): the value of each readable
//! option; the buffer rules are [`OptValue::write_to`]'s.

use super::curve::HAVE_CURVE;
use super::ids::*;
use super::socket::Options;
use super::value::OptValue;
use crate::error::{Error, Result};

impl Options {
    /// `zmq_getsockopt` for the options kept here (`options_t::getsockopt`).
    ///
    /// `EINVAL` for unknown and write-only options, for features not built (CURVE, GSSAPI, VMCI)
    /// and for the socket-level options ([`is_socket_level`]), which the socket answers before
    /// calling this. The buffer-size rules are applied by [`OptValue::write_to`].
    pub fn get(&self, opt: i32) -> Result<OptValue> {
        use OptValue::{Bytes, Int, Int64, Str, UInt64};
        let b = |x: bool| Int(i32::from(x));
        Ok(match opt {
            SNDHWM => Int(self.sndhwm),
            RCVHWM => Int(self.rcvhwm),
            AFFINITY => UInt64(self.affinity),
            ROUTING_ID => Bytes(self.routing_id.clone()),
            RATE => Int(self.rate),
            RECOVERY_IVL => Int(self.recovery_ivl),
            SNDBUF => Int(self.sndbuf),
            RCVBUF => Int(self.rcvbuf),
            TOS => Int(self.tos),
            PRIORITY => Int(self.priority),
            ROUTER_NOTIFY => Int(self.router_notify),
            // libzmq 4.3.5 stores the value and then fails with EINVAL (its getter lacks a
            // `return 0`); the value is answered here, as later libzmq does.
            BUSY_POLL => Int(self.busy_poll),
            TYPE => Int(self.socket_type.as_i32()),
            LINGER => Int(self.linger),
            CONNECT_TIMEOUT => Int(self.connect_timeout),
            TCP_MAXRT => Int(self.tcp_maxrt),
            RECONNECT_STOP => Int(self.reconnect_stop),
            RECONNECT_IVL => Int(self.reconnect_ivl),
            RECONNECT_IVL_MAX => Int(self.reconnect_ivl_max),
            BACKLOG => Int(self.backlog),
            MAXMSGSIZE => Int64(self.maxmsgsize),
            MULTICAST_HOPS => Int(self.multicast_hops),
            MULTICAST_MAXTPDU => Int(self.multicast_maxtpdu),
            RCVTIMEO => Int(self.rcvtimeo),
            SNDTIMEO => Int(self.sndtimeo),
            IPV4ONLY => b(!self.ipv6),
            IPV6 => b(self.ipv6),
            IMMEDIATE => b(self.immediate),
            SOCKS_PROXY => Str(self.socks_proxy.clone()),
            SOCKS_USERNAME => Str(self.socks_username.clone()),
            SOCKS_PASSWORD => Str(self.socks_password.clone()),
            TCP_KEEPALIVE => Int(self.tcp_keepalive),
            TCP_KEEPALIVE_CNT => Int(self.tcp_keepalive_cnt),
            TCP_KEEPALIVE_IDLE => Int(self.tcp_keepalive_idle),
            TCP_KEEPALIVE_INTVL => Int(self.tcp_keepalive_intvl),
            MECHANISM => Int(self.mechanism),
            PLAIN_SERVER => b(self.as_server && self.mechanism == PLAIN),
            PLAIN_USERNAME => Str(self.plain_username.clone()),
            PLAIN_PASSWORD => Str(self.plain_password.clone()),
            ZAP_DOMAIN => Str(self.zap_domain.clone()),
            CURVE_SERVER if HAVE_CURVE => b(self.as_server && self.mechanism == CURVE),
            CURVE_PUBLICKEY if HAVE_CURVE => OptValue::CurveKey(self.curve_publickey),
            CURVE_SECRETKEY if HAVE_CURVE => OptValue::CurveKey(self.curve_secretkey),
            CURVE_SERVERKEY if HAVE_CURVE => OptValue::CurveKey(self.curve_serverkey),
            CONFLATE => b(self.conflate),
            HANDSHAKE_IVL => Int(self.handshake_ivl),
            INVERT_MATCHING => b(self.invert_matching),
            HEARTBEAT_IVL => Int(self.heartbeat_ivl),
            HEARTBEAT_TTL => Int(i32::from(self.heartbeat_ttl) * 100),
            HEARTBEAT_TIMEOUT => Int(self.heartbeat_timeout),
            USE_FD => Int(self.use_fd),
            BINDTODEVICE => Str(self.bindtodevice.clone()),
            ZAP_ENFORCE_DOMAIN => b(self.zap_enforce_domain),
            LOOPBACK_FASTPATH => b(self.loopback_fastpath),
            MULTICAST_LOOP => b(self.multicast_loop),
            _ => Int(self.rzmq.get(opt).ok_or(Error::Inval)?),
        })
    }
}

//! Typed socket options and flags for the native Rust API.
//!
//! `socket.set(SndHwm(0))?`, `socket.get::<RcvTimeo>()?` and `socket.send(data, SendFlags::MORE)?`
//! instead of option numbers and integer flags. Each option is a newtype over its value with its
//! libzmq number and encoding ([`SocketOption`]); the integer interface (`set_option_raw`,
//! `get_option`, `i32` flags) stays for the C ABI and reaches the same code.
//!
//! ```
//! use std::time::Duration;
//! use rzmq_core::sockopt::{Linger, RcvTimeo, SndHwm};
//! use rzmq_core::{Context, RecvFlags, SendFlags, SocketType};
//! let ctx = Context::new();
//! let mut rep = ctx.socket(SocketType::Rep)?;
//! rep.set(RcvTimeo(Some(Duration::from_secs(5))))?;
//! rep.bind("tcp://127.0.0.1:*")?;
//! let endpoint = rep.last_endpoint().to_string();
//! let mut req = ctx.socket(SocketType::Req)?;
//! req.set(SndHwm(0))?;
//! req.set(Linger(Some(Duration::ZERO)))?;
//! assert_eq!(req.get::<SndHwm>()?, SndHwm(0));
//! req.connect(&endpoint)?;
//! req.send("ping", SendFlags::NONE)?;
//! assert_eq!(rep.recv_bytes(RecvFlags::NONE)?, b"ping");
//! # Ok::<(), rzmq_core::Error>(())
//! ```

use std::ops::{BitOr, BitOrAssign};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::options::{self as o, OptValue};

/// A socket option: its libzmq number, how its value is passed to `zmq_setsockopt`, and how it
/// is read back from `zmq_getsockopt`.
pub trait SocketOption: Sized {
    /// The option's libzmq number (`ZMQ_SNDHWM`, ...).
    const ID: i32;
    /// The value as the C ABI passes it (an `int` in native byte order, bytes, a string).
    fn to_raw(&self) -> Vec<u8>;
    /// The value from what the socket answers; `EINVAL` for a mismatched kind.
    fn from_value(v: OptValue) -> Result<Self>;
}

/// An option that can be set: every [`SocketOption`], and the write-only ones (`SUBSCRIBE`, ...,
/// whose reading back is `EINVAL` in libzmq too).
pub trait SettableOption {
    /// The option's libzmq number.
    const ID: i32;
    /// The value as the C ABI passes it.
    fn to_raw(&self) -> Vec<u8>;
}

fn int_of(v: OptValue) -> Result<i32> {
    match v {
        OptValue::Int(i) | OptValue::IntRelaxed(i) => Ok(i),
        _ => Err(Error::Inval),
    }
}

fn bytes_of(v: OptValue) -> Result<Vec<u8>> {
    match v {
        OptValue::Bytes(b) | OptValue::Str(b) => Ok(b),
        OptValue::CurveKey(k) => Ok(k.to_vec()),
        _ => Err(Error::Inval),
    }
}

/// Declares integer options: `name(i32)`.
macro_rules! int_options {
    ($($(#[$doc:meta])* $name:ident = $id:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub i32);

        impl SocketOption for $name {
            const ID: i32 = $id;
            fn to_raw(&self) -> Vec<u8> {
                self.0.to_ne_bytes().to_vec()
            }
            fn from_value(v: OptValue) -> Result<Self> {
                int_of(v).map($name)
            }
        }
    )*};
}

/// Declares on/off options: `name(bool)`, passed as the `int` 0 or 1.
macro_rules! bool_options {
    ($($(#[$doc:meta])* $name:ident = $id:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub bool);

        impl SocketOption for $name {
            const ID: i32 = $id;
            fn to_raw(&self) -> Vec<u8> {
                i32::from(self.0).to_ne_bytes().to_vec()
            }
            fn from_value(v: OptValue) -> Result<Self> {
                int_of(v).map(|i| $name(i != 0))
            }
        }
    )*};
}

/// Declares options whose `int` value is milliseconds, with -1 for "forever": `name(Option<Duration>)`.
macro_rules! millis_options {
    ($($(#[$doc:meta])* $name:ident = $id:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub Option<Duration>);

        impl SocketOption for $name {
            const ID: i32 = $id;
            fn to_raw(&self) -> Vec<u8> {
                let ms = match self.0 {
                    None => -1,
                    Some(d) => i32::try_from(d.as_millis()).unwrap_or(i32::MAX),
                };
                ms.to_ne_bytes().to_vec()
            }
            fn from_value(v: OptValue) -> Result<Self> {
                let ms = int_of(v)?;
                Ok($name(u64::try_from(ms).ok().map(Duration::from_millis)))
            }
        }
    )*};
}

/// Declares binary options: `name(Vec<u8>)`.
macro_rules! bytes_options {
    ($($(#[$doc:meta])* $name:ident = $id:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(pub Vec<u8>);

        impl SocketOption for $name {
            const ID: i32 = $id;
            fn to_raw(&self) -> Vec<u8> {
                self.0.clone()
            }
            fn from_value(v: OptValue) -> Result<Self> {
                bytes_of(v).map($name)
            }
        }
    )*};
}

int_options! {
    /// High-water mark for outbound messages (0: none).
    SndHwm = o::SNDHWM;
    /// High-water mark for inbound messages (0: none).
    RcvHwm = o::RCVHWM;
    /// Kernel send buffer size in bytes (-1: the OS default).
    SndBuf = o::SNDBUF;
    /// Kernel receive buffer size in bytes (-1: the OS default).
    RcvBuf = o::RCVBUF;
    /// Reconnection interval in milliseconds (-1: no reconnection).
    ReconnectIvl = o::RECONNECT_IVL;
    /// Largest reconnection interval in milliseconds (0: only `ReconnectIvl`).
    ReconnectIvlMax = o::RECONNECT_IVL_MAX;
    /// Listen backlog.
    Backlog = o::BACKLOG;
    /// TCP keepalive (-1: OS default, 0: off, 1: on).
    TcpKeepalive = o::TCP_KEEPALIVE;
    /// IP type of service.
    Tos = o::TOS;
    /// ZMTP handshake timeout in milliseconds (0: none).
    HandshakeIvl = o::HANDSHAKE_IVL;
}

bool_options! {
    /// IPv6 (and IPv4-mapped) addresses on tcp.
    Ipv6 = o::IPV6;
    /// Queue messages only to completed connections.
    Immediate = o::IMMEDIATE;
    /// ROUTER: report unroutable messages (`EHOSTUNREACH`) instead of dropping them.
    RouterMandatory = o::ROUTER_MANDATORY;
    /// ROUTER: a new connection with a known routing id takes it over.
    RouterHandover = o::ROUTER_HANDOVER;
    /// XPUB: pass every subscription up, duplicates included.
    XpubVerbose = o::XPUB_VERBOSE;
    /// Keep only the last message in each queue.
    Conflate = o::CONFLATE;
    /// REQ: match replies to requests.
    ReqCorrelate = o::REQ_CORRELATE;
    /// REQ: allow a new request before the reply to the last one.
    ReqRelaxed = o::REQ_RELAXED;
    /// PLAIN: act as the server.
    PlainServer = o::PLAIN_SERVER;
    /// CURVE: act as the server.
    CurveServer = o::CURVE_SERVER;
}

bool_options! {
    /// rzmq: direct sends on idle connections (default on, `RZMQ_DIRECT`; later connects).
    Direct = o::DIRECT;
    /// rzmq: direct receives by a blocked receiver (default on, `RZMQ_DIRECT_RX`; later
    /// connects; needs [`Direct`]).
    DirectRx = o::DIRECT_RX;
    /// rzmq: the framed lane for short frames (default on, `RZMQ_FRAMED`; later connects).
    Framed = o::FRAMED;
    /// rzmq: one more framed-lane nap when the lane is empty (default on,
    /// `RZMQ_FRAMED_NAP_EMPTY`; later connects).
    FramedNapEmpty = o::FRAMED_NAP_EMPTY;
    /// rzmq: CURVE connections may move to RDMA, where their messages travel unencrypted
    /// (default off, `RZMQ_RDMA_CURVE_PLAINTEXT`; later connects).
    RdmaCurvePlaintext = o::RDMA_CURVE_PLAINTEXT;
}

/// Declares options whose `int` value is microseconds: `name(Duration)`, whole microseconds.
macro_rules! micros_options {
    ($($(#[$doc:meta])* $name:ident = $id:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub Duration);

        impl SocketOption for $name {
            const ID: i32 = $id;
            fn to_raw(&self) -> Vec<u8> {
                i32::try_from(self.0.as_micros()).unwrap_or(i32::MAX).to_ne_bytes().to_vec()
            }
            fn from_value(v: OptValue) -> Result<Self> {
                let us = u64::try_from(int_of(v)?).map_err(|_| Error::Inval)?;
                Ok($name(Duration::from_micros(us)))
            }
        }
    )*};
}

micros_options! {
    /// rzmq: how long a blocking direct receive busy-polls before it sleeps (up to 1 s; zero:
    /// never; default 30 us, `RZMQ_SPIN_US`; takes effect at the next receive).
    BusyPoll = o::BUSY_POLL_US;
    /// rzmq: the I/O thread's wait between writes of a stream on the framed lane (up to 1 ms;
    /// zero: never; default 20 us, `RZMQ_FRAMED_NAP_US`; later connects).
    FramedNap = o::FRAMED_NAP_US;
}

millis_options! {
    /// How long close waits for unsent messages (`None`: until they are sent).
    Linger = o::LINGER;
    /// Receive timeout (`None`: block).
    RcvTimeo = o::RCVTIMEO;
    /// Send timeout (`None`: block).
    SndTimeo = o::SNDTIMEO;
}

bytes_options! {
    /// The socket's routing id (1 to 255 bytes, not starting with a zero byte).
    RoutingId = o::ROUTING_ID;
    /// ZAP domain.
    ZapDomain = o::ZAP_DOMAIN;
    /// PLAIN user name.
    PlainUsername = o::PLAIN_USERNAME;
    /// PLAIN password.
    PlainPassword = o::PLAIN_PASSWORD;
    /// CURVE public key (32 bytes, or 40 characters of Z85).
    CurvePublicKey = o::CURVE_PUBLICKEY;
    /// CURVE secret key (32 bytes, or 40 characters of Z85).
    CurveSecretKey = o::CURVE_SECRETKEY;
    /// CURVE: the server's public key, on a client (32 bytes, or 40 characters of Z85).
    CurveServerKey = o::CURVE_SERVERKEY;
}

/// Largest inbound message in bytes (`None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxMsgSize(pub Option<u64>);

impl SocketOption for MaxMsgSize {
    const ID: i32 = o::MAXMSGSIZE;
    fn to_raw(&self) -> Vec<u8> {
        let v: i64 = self.0.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        v.to_ne_bytes().to_vec()
    }
    fn from_value(v: OptValue) -> Result<Self> {
        match v {
            OptValue::Int64(n) => Ok(MaxMsgSize(u64::try_from(n).ok())),
            _ => Err(Error::Inval),
        }
    }
}

/// SUB/XSUB: receive messages starting with this prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe(pub Vec<u8>);

impl SettableOption for Subscribe {
    const ID: i32 = o::SUBSCRIBE;
    fn to_raw(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// SUB/XSUB: stop receiving messages starting with this prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsubscribe(pub Vec<u8>);

impl SettableOption for Unsubscribe {
    const ID: i32 = o::UNSUBSCRIBE;
    fn to_raw(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// Every readable option can be written as well.
impl<T: SocketOption> SettableOption for T {
    const ID: i32 = <T as SocketOption>::ID;
    fn to_raw(&self) -> Vec<u8> {
        SocketOption::to_raw(self)
    }
}

/// Flags of a send: [`SendFlags::DONTWAIT`], [`SendFlags::MORE`], combined with `|`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SendFlags(i32);

impl SendFlags {
    /// No flag: block until the message is queued, and it is the last part.
    pub const NONE: SendFlags = SendFlags(0);
    /// Fail with `EAGAIN` instead of blocking.
    pub const DONTWAIT: SendFlags = SendFlags(o::DONTWAIT);
    /// More parts of this message follow.
    pub const MORE: SendFlags = SendFlags(o::SNDMORE);

    /// The C ABI's integer.
    pub const fn bits(self) -> i32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Flags of a receive: [`RecvFlags::DONTWAIT`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RecvFlags(i32);

impl RecvFlags {
    /// No flag: block until a message arrives.
    pub const NONE: RecvFlags = RecvFlags(0);
    /// Fail with `EAGAIN` instead of blocking.
    pub const DONTWAIT: RecvFlags = RecvFlags(o::DONTWAIT);

    /// The C ABI's integer.
    pub const fn bits(self) -> i32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: RecvFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

macro_rules! flag_ops {
    ($t:ident) => {
        impl BitOr for $t {
            type Output = $t;
            fn bitor(self, rhs: $t) -> $t {
                $t(self.0 | rhs.0)
            }
        }

        impl BitOrAssign for $t {
            fn bitor_assign(&mut self, rhs: $t) {
                self.0 |= rhs.0;
            }
        }

        /// The C ABI's integer flags (libzmq's values; unknown bits are passed on as given).
        impl From<i32> for $t {
            fn from(bits: i32) -> $t {
                $t(bits)
            }
        }

        impl From<$t> for i32 {
            fn from(f: $t) -> i32 {
                f.0
            }
        }
    };
}

flag_ops!(SendFlags);
flag_ops!(RecvFlags);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_combine_and_convert() {
        assert_eq!(SendFlags::DONTWAIT.bits(), crate::socket::DONTWAIT);
        assert_eq!(SendFlags::MORE.bits(), crate::socket::SNDMORE);
        assert_eq!(RecvFlags::DONTWAIT.bits(), crate::socket::DONTWAIT);
        let f = SendFlags::DONTWAIT | SendFlags::MORE;
        assert_eq!(f.bits(), crate::socket::DONTWAIT | crate::socket::SNDMORE);
        assert!(f.contains(SendFlags::MORE) && !SendFlags::MORE.contains(f));
        assert_eq!(SendFlags::from(2), SendFlags::MORE);
        assert_eq!(i32::from(RecvFlags::DONTWAIT), 1);
        let mut r = RecvFlags::NONE;
        r |= RecvFlags::DONTWAIT;
        assert_eq!(r, RecvFlags::DONTWAIT);
    }

    #[test]
    fn typed_options_and_flags_on_a_socket() {
        use crate::{Context, Error, SocketType};

        let ctx = Context::new();
        let mut push = ctx.socket(SocketType::Push).unwrap();
        let mut pull = ctx.socket(SocketType::Pull).unwrap();
        push.set(SndHwm(5)).unwrap();
        push.set(Linger(Some(Duration::from_millis(0)))).unwrap();
        pull.set(RcvTimeo(Some(Duration::from_millis(20)))).unwrap();
        assert_eq!(push.get::<SndHwm>().unwrap(), SndHwm(5));
        assert_eq!(push.get::<Linger>().unwrap(), Linger(Some(Duration::ZERO)));
        assert_eq!(
            pull.get::<RcvTimeo>().unwrap().0,
            Some(Duration::from_millis(20))
        );
        assert_eq!(pull.get::<Immediate>().unwrap(), Immediate(false));
        // A value the option refuses is refused as through the integer interface.
        assert_eq!(push.set(RoutingId(vec![])), Err(Error::Inval));
        pull.bind("inproc://typed-options").unwrap();
        push.connect("inproc://typed-options").unwrap();
        assert_eq!(pull.recv_bytes(RecvFlags::DONTWAIT), Err(Error::Again));
        assert_eq!(pull.recv_bytes(RecvFlags::NONE), Err(Error::Again)); // the 20 ms timeout
        push.send("head", SendFlags::MORE).unwrap();
        push.send("tail", SendFlags::NONE).unwrap();
        let parts = pull.recv_multipart(RecvFlags::NONE).unwrap();
        let bodies: Vec<&[u8]> = parts.iter().map(|m| m.data()).collect();
        assert_eq!(bodies, vec![&b"head"[..], &b"tail"[..]]);
        let mut sub = ctx.socket(SocketType::Sub).unwrap();
        sub.set(Subscribe(b"topic".to_vec())).unwrap();
        sub.set(Unsubscribe(b"topic".to_vec())).unwrap();
    }

    #[test]
    fn rzmq_options_are_typed_socket_options() {
        use crate::{Context, Error, SocketType};

        let ctx = Context::new();
        let mut s = ctx.socket(SocketType::Req).unwrap();
        s.set(BusyPoll(Duration::from_micros(250))).unwrap();
        assert_eq!(
            s.get::<BusyPoll>().unwrap(),
            BusyPoll(Duration::from_micros(250))
        );
        assert_eq!(s.set(BusyPoll(Duration::from_secs(2))), Err(Error::Inval));
        s.set(FramedNap(Duration::ZERO)).unwrap();
        assert_eq!(s.get::<FramedNap>().unwrap(), FramedNap(Duration::ZERO));
        assert_eq!(
            s.get::<RdmaCurvePlaintext>().unwrap(),
            RdmaCurvePlaintext(false)
        );
        s.set(RdmaCurvePlaintext(true)).unwrap();
        assert_eq!(
            s.get::<RdmaCurvePlaintext>().unwrap(),
            RdmaCurvePlaintext(true)
        );
        for flag in [Direct(false), Direct(true)] {
            s.set(flag).unwrap();
            assert_eq!(s.get::<Direct>().unwrap(), flag);
        }
        s.set(DirectRx(false)).unwrap();
        s.set(Framed(false)).unwrap();
        s.set(FramedNapEmpty(false)).unwrap();
        assert_eq!(s.get::<Framed>().unwrap(), Framed(false));
        // The integer interface reaches the same values, with libzmq's int rules.
        assert_eq!(s.get_option(o::DIRECT_RX), Ok(OptValue::Int(0)));
        assert_eq!(s.set_option_i32(o::FRAMED, 2), Err(Error::Inval));
    }

    #[test]
    fn encodings_match_the_c_abi() {
        assert_eq!(SocketOption::to_raw(&SndHwm(7)), 7i32.to_ne_bytes());
        assert_eq!(SocketOption::to_raw(&Linger(None)), (-1i32).to_ne_bytes());
        assert_eq!(
            SocketOption::to_raw(&RcvTimeo(Some(Duration::from_millis(250)))),
            250i32.to_ne_bytes()
        );
        assert_eq!(SocketOption::to_raw(&Immediate(true)), 1i32.to_ne_bytes());
        assert_eq!(
            SocketOption::to_raw(&MaxMsgSize(None)),
            (-1i64).to_ne_bytes()
        );
        assert_eq!(Linger::from_value(OptValue::Int(-1)).unwrap(), Linger(None));
        assert_eq!(
            RcvTimeo::from_value(OptValue::Int(30)).unwrap(),
            RcvTimeo(Some(Duration::from_millis(30)))
        );
        assert_eq!(Ipv6::from_value(OptValue::Int(1)).unwrap(), Ipv6(true));
        assert!(SndHwm::from_value(OptValue::Bytes(vec![1])).is_err());
        assert_eq!(
            MaxMsgSize::from_value(OptValue::Int64(-1)).unwrap(),
            MaxMsgSize(None)
        );
    }
}

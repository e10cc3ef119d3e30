//! The socket types of libzmq: their `ZMQ_*` numbers, the names ZMTP sends for them, and which
//! pairs may talk (RFC 37, libzmq's `mechanism_t::check_socket_type`). The one `SocketType` of
//! the crate (the public API re-exports it as `rzmq_core::SocketType` and
//! `rzmq_core::socket::SocketType`); it imports only [`crate::error`].

use crate::error::{Error, Result};

/// A ZeroMQ socket type, numbered as libzmq's `ZMQ_*` constants.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum SocketType {
    /// `ZMQ_PAIR`: exclusive pair.
    Pair = 0,
    /// `ZMQ_PUB`: publisher.
    Pub = 1,
    /// `ZMQ_SUB`: subscriber.
    Sub = 2,
    /// `ZMQ_REQ`: request (client of REP/ROUTER).
    Req = 3,
    /// `ZMQ_REP`: reply (server of REQ/DEALER).
    Rep = 4,
    /// `ZMQ_DEALER`: asynchronous request.
    Dealer = 5,
    /// `ZMQ_ROUTER`: addressed routing.
    Router = 6,
    /// `ZMQ_PULL`: pipeline sink.
    Pull = 7,
    /// `ZMQ_PUSH`: pipeline source.
    Push = 8,
    /// `ZMQ_XPUB`: publisher that sees subscriptions.
    XPub = 9,
    /// `ZMQ_XSUB`: subscriber that sends subscriptions as messages.
    XSub = 10,
    /// `ZMQ_STREAM`: raw TCP streams (never runs a ZMTP handshake).
    Stream = 11,
}

impl SocketType {
    /// Every socket type, in `ZMQ_*` order.
    pub const ALL: [SocketType; 12] = [
        SocketType::Pair,
        SocketType::Pub,
        SocketType::Sub,
        SocketType::Req,
        SocketType::Rep,
        SocketType::Dealer,
        SocketType::Router,
        SocketType::Pull,
        SocketType::Push,
        SocketType::XPub,
        SocketType::XSub,
        SocketType::Stream,
    ];

    /// The socket type with libzmq number `v` (`ZMQ_PAIR` = 0 ... `ZMQ_STREAM` = 11).
    pub fn from_i32(v: i32) -> Option<SocketType> {
        usize::try_from(v)
            .ok()
            .and_then(|i| SocketType::ALL.get(i).copied())
    }

    /// The type for a libzmq socket-type number; [`Error::Inval`] for any other number (what
    /// `zmq_socket` reports).
    pub fn from_raw(t: i32) -> Result<SocketType> {
        SocketType::from_i32(t).ok_or(Error::Inval)
    }

    /// The libzmq number (`ZMQ_*`).
    pub fn as_i32(self) -> i32 {
        self as i32
    }

    /// The name sent in the `Socket-Type` property ("PAIR", "PUB", ...).
    pub fn name(self) -> &'static str {
        match self {
            SocketType::Pair => "PAIR",
            SocketType::Pub => "PUB",
            SocketType::Sub => "SUB",
            SocketType::Req => "REQ",
            SocketType::Rep => "REP",
            SocketType::Dealer => "DEALER",
            SocketType::Router => "ROUTER",
            SocketType::Pull => "PULL",
            SocketType::Push => "PUSH",
            SocketType::XPub => "XPUB",
            SocketType::XSub => "XSUB",
            SocketType::Stream => "STREAM",
        }
    }

    /// The socket type a `Socket-Type` value names (exact, case-sensitive, as libzmq compares).
    pub fn from_name(name: &[u8]) -> Option<SocketType> {
        SocketType::ALL
            .iter()
            .copied()
            .find(|t| t.name().as_bytes() == name)
    }

    /// True when a socket of this type may talk to a peer of type `peer` (libzmq's table; STREAM
    /// talks to nobody over ZMTP).
    pub fn compatible_with(self, peer: SocketType) -> bool {
        use SocketType::*;
        matches!(
            (self, peer),
            (Pair, Pair)
                | (Pub, Sub | XSub)
                | (Sub, Pub | XPub)
                | (XPub, Sub | XSub)
                | (XSub, Pub | XPub)
                | (Req, Rep | Router)
                | (Rep, Req | Dealer)
                | (Dealer, Rep | Dealer | Router)
                | (Router, Req | Dealer | Router)
                | (Push, Pull)
                | (Pull, Push)
        )
    }

    /// True when this socket type sends the `Identity` property in its `READY` (REQ, DEALER,
    /// ROUTER), as libzmq does.
    pub fn sends_identity(self) -> bool {
        matches!(
            self,
            SocketType::Req | SocketType::Dealer | SocketType::Router
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_round_trip() {
        for (i, t) in SocketType::ALL.iter().enumerate() {
            assert_eq!(SocketType::from_i32(i as i32), Some(*t));
            assert_eq!(t.as_i32(), i as i32);
            assert_eq!(SocketType::from_name(t.name().as_bytes()), Some(*t));
        }
        assert_eq!(SocketType::from_i32(12), None);
        assert_eq!(SocketType::from_i32(-1), None);
        assert_eq!(SocketType::from_raw(6), Ok(SocketType::Router));
        assert_eq!(SocketType::from_raw(12), Err(Error::Inval));
        assert_eq!(SocketType::from_name(b"pub"), None);
    }

    #[test]
    fn compatibility_is_symmetric() {
        for a in SocketType::ALL {
            for b in SocketType::ALL {
                assert_eq!(a.compatible_with(b), b.compatible_with(a), "{a:?} {b:?}");
            }
            assert!(!a.compatible_with(SocketType::Stream));
        }
        assert!(SocketType::Req.compatible_with(SocketType::Router));
        assert!(!SocketType::Req.compatible_with(SocketType::Req));
        assert!(!SocketType::Pub.compatible_with(SocketType::Pub));
    }
}

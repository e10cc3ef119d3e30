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
    /// `ZMQ_SERVER` (draft): routes replies by the `u32` routing id of each received message.
    Server = 12,
    /// `ZMQ_CLIENT` (draft): round-robins sends and fair-queues receives among SERVERs.
    Client = 13,
    /// `ZMQ_RADIO` (draft): publishes messages to groups.
    Radio = 14,
    /// `ZMQ_DISH` (draft): receives the groups it joined from RADIOs.
    Dish = 15,
    /// `ZMQ_GATHER` (draft): fair-queues from SCATTERs (thread-safe PULL).
    Gather = 16,
    /// `ZMQ_SCATTER` (draft): round-robins to GATHERs (thread-safe PUSH).
    Scatter = 17,
    /// `ZMQ_DGRAM` (draft): UDP datagrams addressed per message (never runs ZMTP).
    Dgram = 18,
    /// `ZMQ_PEER` (draft): a SERVER that also connects, learning each peer's routing id.
    Peer = 19,
    /// `ZMQ_CHANNEL` (draft): a thread-safe single-part PAIR.
    Channel = 20,
}

impl SocketType {
    /// Every socket type, in `ZMQ_*` order (the draft types last, as libzmq numbers them).
    pub const ALL: [SocketType; 21] = [
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
        SocketType::Server,
        SocketType::Client,
        SocketType::Radio,
        SocketType::Dish,
        SocketType::Gather,
        SocketType::Scatter,
        SocketType::Dgram,
        SocketType::Peer,
        SocketType::Channel,
    ];

    /// The socket type with libzmq number `v` (`ZMQ_PAIR` = 0 ... `ZMQ_CHANNEL` = 20).
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
            SocketType::Server => "SERVER",
            SocketType::Client => "CLIENT",
            SocketType::Radio => "RADIO",
            SocketType::Dish => "DISH",
            SocketType::Gather => "GATHER",
            SocketType::Scatter => "SCATTER",
            SocketType::Dgram => "DGRAM",
            SocketType::Peer => "PEER",
            SocketType::Channel => "CHANNEL",
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
    /// talks to nobody over ZMTP, DGRAM only to DGRAM, which never gets as far as a handshake since
    /// it runs over UDP alone).
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
                | (Server, Client)
                | (Client, Server)
                | (Radio, Dish)
                | (Dish, Radio)
                | (Scatter, Gather)
                | (Gather, Scatter)
                | (Dgram, Dgram)
                | (Peer, Peer)
                | (Channel, Channel)
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

    /// True for the types libzmq makes thread-safe (the draft types but DGRAM): one socket may be
    /// used from several threads, and it supports no multipart messages.
    pub fn is_thread_safe(self) -> bool {
        use SocketType::*;
        matches!(
            self,
            Server | Client | Radio | Dish | Gather | Scatter | Peer | Channel
        )
    }

    /// True for the types that send `ZMQ_HELLO_MSG` on each new connection (libzmq's
    /// `can_send_hello_msg`).
    pub fn sends_hello_msg(self) -> bool {
        use SocketType::*;
        matches!(self, Router | Server | Client | Dealer | Peer)
    }

    /// True for the types that receive `ZMQ_DISCONNECT_MSG` from a peer that went away
    /// (libzmq's `can_recv_disconnect_msg`).
    pub fn receives_disconnect_msg(self) -> bool {
        use SocketType::*;
        matches!(self, Router | Server | Peer)
    }

    /// True for the types that receive `ZMQ_HICCUP_MSG` when a connection they made breaks
    /// (libzmq's `can_recv_hiccup_msg`).
    pub fn receives_hiccup_msg(self) -> bool {
        use SocketType::*;
        matches!(self, Client | Dealer | Peer)
    }

    /// True for the draft types (`ZMQ_SERVER` = 12 and up), which libzmq only builds with
    /// `ZMQ_BUILD_DRAFT_API` and rzmq always has.
    pub fn is_draft(self) -> bool {
        self.as_i32() >= SocketType::Server.as_i32()
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
        assert_eq!(SocketType::from_i32(21), None);
        assert_eq!(SocketType::from_i32(-1), None);
        assert_eq!(SocketType::from_raw(6), Ok(SocketType::Router));
        assert_eq!(SocketType::from_raw(12), Ok(SocketType::Server));
        assert_eq!(SocketType::from_raw(20), Ok(SocketType::Channel));
        assert_eq!(SocketType::from_raw(21), Err(Error::Inval));
        assert_eq!(SocketType::from_name(b"SCATTER"), Some(SocketType::Scatter));
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
        assert!(SocketType::Client.compatible_with(SocketType::Server));
        assert!(!SocketType::Client.compatible_with(SocketType::Client));
        assert!(!SocketType::Client.compatible_with(SocketType::Router));
        assert!(!SocketType::Dealer.compatible_with(SocketType::Server));
        assert!(SocketType::Radio.compatible_with(SocketType::Dish));
        assert!(SocketType::Scatter.compatible_with(SocketType::Gather));
        assert!(!SocketType::Scatter.compatible_with(SocketType::Pull));
        assert!(SocketType::Peer.compatible_with(SocketType::Peer));
        assert!(SocketType::Channel.compatible_with(SocketType::Channel));
        assert!(!SocketType::Channel.compatible_with(SocketType::Pair));
    }

    #[test]
    fn thread_safe_types_are_the_draft_types_but_dgram() {
        for t in SocketType::ALL {
            assert_eq!(
                t.is_thread_safe(),
                t.is_draft() && t != SocketType::Dgram,
                "{t:?}"
            );
        }
    }
}

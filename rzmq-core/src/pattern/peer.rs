//! PEER: a SERVER that also connects out (libzmq `peer_t`); `Socket::connect_peer` returns the
//! routing id the pattern gave the pipe it just attached ([`Pattern::pipe_routing_id`]), so the
//! application may send to that peer at once. Talks only to PEERs.

use super::server::Server;

/// The PEER pattern: routing is SERVER's.
pub(crate) type Peer = Server;

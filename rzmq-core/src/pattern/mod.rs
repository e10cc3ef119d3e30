//! Socket patterns: the routing logic of each socket type, free of I/O.
//!
//! A pattern decides where an outgoing message goes and which pipe the next incoming message comes
//! from (load-balancing, fair-queueing, ROUTER identities, subscriptions, REQ/REP envelopes). It
//! sees only a [`PipeTable`] of attached pipes and the calls the socket forwards to it; it never
//! blocks, sleeps or touches a file descriptor. The socket layer (socket.rs) turns `Error::Again`
//! into waiting, applies timeouts, and attaches and detaches pipes.
//!
//! Each socket type mirrors its libzmq 4.3.5 counterpart (`src/<type>.cpp`), built from the same
//! parts: [`lb`] (load balancer), [`fq`] (fair queue), [`dist`] (fan-out) and [`trie`]
//! (subscriptions); SUB/XSUB and DISH share [`subscriber`]'s skeleton. The thread-safe draft types
//! (SERVER, CLIENT, SCATTER, GATHER, PEER, CHANNEL) add [`single`]'s rule: single-part messages
//! only (SCATTER, GATHER, CLIENT and CHANNEL are PUSH, PULL, DEALER and PAIR under it).
//! [`new_pattern`] builds the pattern of a [`SocketType`]; the option numbers patterns read are
//! [`crate::options`]'s.
//!
//! # How the socket drives a pattern
//! - Calls arrive as the [`Pattern`] trait documents; after *every* call the socket drains
//!   [`PipeTable::take_kills`] and terminates those pipes (closing both ends), then calls
//!   [`Pattern::terminated`] for each, as for any other pipe that went away. Patterns ask for this
//!   to refuse a second PAIR peer and to disconnect the old pipe of a `ROUTER_HANDOVER`.
//! - `peer_ready` is called on every completed handshake of a pipe, including the first (also when
//!   the handshake finished before `attach`). SUB/XSUB resend their subscriptions on every
//!   `peer_ready` after the first (libzmq's "hiccup": a reconnect lost what was queued).
//! - STREAM: the engine writes an empty frame into the pipe on connect and on disconnect when
//!   `ZMQ_STREAM_NOTIFY` is on; if the disconnect frame could not be written (full pipe), the
//!   pattern makes one up when the pipe is `terminated`. Sending `[id, ""]` writes an empty frame
//!   to that peer, past the HWM: the engine flushes what precedes it and closes the connection.
//!   ROUTER with `ZMQ_ROUTER_RAW` does the same.
//! - Options reach a pattern through [`Pattern::set_option`] with libzmq's raw value (ints as
//!   4-byte native-endian `i32`); a pattern ignores options it has no use for.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::msg::{Metadata, Msg};
use crate::pipe::{Reader, Writer};
use crate::zmtp::SocketType;

mod array;
pub(crate) mod channel;
pub(crate) mod client;
pub(crate) mod dealer;
pub(crate) mod dgram;
pub(crate) mod dish;
pub(crate) mod dist;
pub(crate) mod fq;
pub(crate) mod gather;
pub(crate) mod lb;
pub(crate) mod pair;
pub(crate) mod peer;
pub(crate) mod pubsub;
pub(crate) mod pull;
pub(crate) mod push;
pub(crate) mod radio;
pub(crate) mod rep;
pub(crate) mod req;
pub(crate) mod router;
pub(crate) mod scatter;
pub(crate) mod server;
pub(crate) mod single;
pub(crate) mod stream;
pub(crate) mod sub;
pub(crate) mod subscriber;
pub(crate) mod trie;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testutil;

/// Reads a boolean socket option (a 4-byte native-endian int, non-zero is true).
pub(crate) fn opt_bool(value: &[u8]) -> Result<bool> {
    let b: [u8; 4] = value.try_into().map_err(|_| Error::Inval)?;
    let v = i32::from_ne_bytes(b);
    if v < 0 {
        return Err(Error::Inval);
    }
    Ok(v != 0)
}

/// A random 32-bit value (seeds ROUTER/STREAM routing ids and REQ request ids, as libzmq's
/// `generate_random`).
pub(crate) fn random_u32() -> u32 {
    use std::hash::BuildHasher;
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    (h.finish() >> 16) as u32
}

/// A hasher for [`PipeId`]s: ids are small sequential integers, so one multiplication spreads them.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by [`PipeId`] with the cheap [`IdHasher`].
pub(crate) type IdMap<V> = HashMap<PipeId, V, BuildHasherDefault<IdHasher>>;

/// Builds the pattern of a socket type (an unknown libzmq number never gets this far: it is
/// refused with `EINVAL` where it enters, by [`SocketType::from_raw`]). A type rzmq does not
/// have yet is refused with [`Error::NotSup`] at socket creation.
pub(crate) fn new_pattern(socket_type: SocketType) -> Result<Box<dyn Pattern>> {
    Ok(match socket_type {
        SocketType::Pair => Box::new(pair::Pair::new()),
        SocketType::Pub => Box::new(pubsub::XPub::new_pub()),
        SocketType::Sub => Box::new(sub::XSub::new_sub()),
        SocketType::Req => Box::new(req::Req::new()),
        SocketType::Rep => Box::new(rep::Rep::new()),
        SocketType::Dealer => Box::new(dealer::Dealer::new()),
        SocketType::Router => Box::new(router::Router::new()),
        SocketType::Pull => Box::new(pull::Pull::new()),
        SocketType::Push => Box::new(push::Push::new()),
        SocketType::XPub => Box::new(pubsub::XPub::new_xpub()),
        SocketType::XSub => Box::new(sub::XSub::new_xsub()),
        SocketType::Stream => Box::new(stream::Stream::new()),
        SocketType::Server => Box::new(server::Server::new()),
        SocketType::Client => Box::new(client::Client::new()),
        SocketType::Gather => Box::new(gather::Gather::new()),
        SocketType::Scatter => Box::new(scatter::Scatter::new()),
        SocketType::Peer => Box::new(peer::Peer::new()),
        SocketType::Channel => Box::new(channel::Channel::new()),
        SocketType::Radio => Box::new(radio::Radio::new()),
        SocketType::Dish => Box::new(dish::Dish::new()),
        SocketType::Dgram => Box::new(dgram::Dgram::new()),
    })
}

/// Identifies an attached pipe; ids are never reused within a socket's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PipeId(pub u64);

/// One attached peer: both directions of its pipe and what the socket knows of it.
pub struct PipeEntry {
    /// Messages from the peer.
    pub reader: Reader,
    /// Messages to the peer.
    pub writer: Writer,
    /// The routing id the socket assigned or the peer announced (ROUTER, STREAM); may be empty.
    pub routing_id: Vec<u8>,
    /// A routing id requested by `ZMQ_CONNECT_ROUTING_ID` for this pipe, if any.
    pub connect_routing_id: Option<Vec<u8>>,
    /// The peer's handshake properties, once known.
    pub peer: Option<Arc<Metadata>>,
    /// The endpoint this pipe was created for (bind or connect address), for unbind/disconnect.
    pub endpoint: Option<String>,
    /// For inproc pipes, the peer socket's (RCVHWM, SNDHWM), added to ours as libzmq does;
    /// `None` for connections (their pipes use our HWMs alone).
    pub hwm_boost: Option<(i32, i32)>,
    /// For an inproc pipe this socket connected: the binder's `ZMQ_DISCONNECT_MSG`, sent to it
    /// when this end goes (close, disconnect).
    pub disconnect_msg: Option<DisconnectMsg>,
    /// The connection's (local, remote) endpoints for a pipe its session made once connected
    /// (an accepted connection, or a connect with `ZMQ_IMMEDIATE`), as libzmq's engine reports
    /// them (`EVENT_PIPES_STATS`); `None` for a pipe made before any connection.
    pub uris: Option<(String, String)>,
}

/// An inproc connector's `ZMQ_DISCONNECT_MSG` slot: the binder's message, known at the connect
/// or, for a connect that came first, at the bind.
pub(crate) type DisconnectMsg = Arc<std::sync::OnceLock<Vec<u8>>>;

impl PipeEntry {
    /// A new entry with no routing id.
    pub fn new(reader: Reader, writer: Writer) -> PipeEntry {
        PipeEntry {
            reader,
            writer,
            routing_id: Vec::new(),
            connect_routing_id: None,
            peer: None,
            endpoint: None,
            hwm_boost: None,
            disconnect_msg: None,
            uris: None,
        }
    }

    /// Sends the binder's `ZMQ_DISCONNECT_MSG` of an inproc pipe this socket connected, in
    /// place of a message cut in half (libzmq `pipe_t::send_disconnect_msg`), once.
    pub(crate) fn send_disconnect_msg(&mut self) {
        if let Some(m) = self.disconnect_msg.take().and_then(|d| d.get().cloned()) {
            self.writer.rollback();
            self.writer.write_past_hwm(Msg::copy_from(&m));
        }
    }
}

/// A pipe's HWM from ours and, for inproc, the peer's (0 on either side: unbounded).
pub(crate) fn combined_hwm(ours: i32, peer: Option<i32>) -> u64 {
    match peer {
        None => ours.max(0) as u64,
        Some(p) if ours <= 0 || p <= 0 => 0,
        Some(p) => ours as u64 + p as u64,
    }
}

/// The socket's attached pipes, plus the pipes a pattern asked the socket to terminate.
#[derive(Default)]
pub struct PipeTable {
    entries: IdMap<PipeEntry>,
    next: u64,
    kills: Vec<PipeId>,
}

impl PipeTable {
    /// An empty table.
    pub fn new() -> PipeTable {
        PipeTable::default()
    }

    /// Reserves the id the next inserted pipe will get (pipes need their id before insertion to
    /// register notification targets).
    pub fn next_id(&mut self) -> PipeId {
        self.next += 1;
        PipeId(self.next)
    }

    /// Adds a pipe under an id from [`PipeTable::next_id`].
    pub fn insert(&mut self, id: PipeId, entry: PipeEntry) {
        self.entries.insert(id, entry);
    }

    /// Removes a pipe (after the pattern was told it terminated).
    pub fn remove(&mut self, id: PipeId) -> Option<PipeEntry> {
        self.entries.remove(&id)
    }

    /// A pipe by id.
    #[inline]
    pub fn get(&self, id: PipeId) -> Option<&PipeEntry> {
        self.entries.get(&id)
    }

    /// A pipe by id, mutably.
    #[inline]
    pub fn get_mut(&mut self, id: PipeId) -> Option<&mut PipeEntry> {
        self.entries.get_mut(&id)
    }

    /// All ids, in no particular order.
    pub fn ids(&self) -> Vec<PipeId> {
        self.entries.keys().copied().collect()
    }

    /// The id of the only attached pipe, if exactly one is attached.
    pub fn only(&self) -> Option<PipeId> {
        if self.entries.len() == 1 {
            self.entries.keys().next().copied()
        } else {
            None
        }
    }

    /// Number of attached pipes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no pipe is attached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Asks the socket to terminate pipe `id` (a pattern refusing or replacing a peer). The
    /// socket drains the list with [`PipeTable::take_kills`] after each call into the pattern,
    /// closes the pipe and then calls [`Pattern::terminated`] for it. Asking twice is harmless.
    pub fn kill(&mut self, id: PipeId) {
        if !self.kills.contains(&id) {
            self.kills.push(id);
        }
    }

    /// The pipes patterns asked to terminate since the last call (empty: no allocation).
    pub fn take_kills(&mut self) -> Vec<PipeId> {
        std::mem::take(&mut self.kills)
    }

    /// True when a pattern asked for pipes to be terminated.
    pub fn has_kills(&self) -> bool {
        !self.kills.is_empty()
    }

    /// The writing end towards pipe `id`'s peer.
    #[inline]
    pub fn writer(&mut self, id: PipeId) -> Option<&mut Writer> {
        self.entries.get_mut(&id).map(|e| &mut e.writer)
    }

    /// The reading end from pipe `id`'s peer.
    #[inline]
    pub fn reader(&mut self, id: PipeId) -> Option<&mut Reader> {
        self.entries.get_mut(&id).map(|e| &mut e.reader)
    }

    /// The peer's handshake properties: the entry's copy, else what the pipe carries.
    pub fn peer(&self, id: PipeId) -> Option<Arc<Metadata>> {
        let e = self.entries.get(&id)?;
        e.peer.clone().or_else(|| e.reader.peer())
    }
}

/// The routing logic of one socket type.
///
/// Call order guaranteed by the socket: `attach` once per pipe before any other call naming it;
/// `terminated` once, after which the id is never named again (the entry is still in the table
/// during the call and removed after it). `read_activated`/`write_activated` may name a pipe that
/// is already active: they must be idempotent.
pub trait Pattern: Send {
    /// A pipe joined the socket.
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable);
    /// The peer behind `id` completed a handshake (first or after reconnect); `pipes[id].peer` is set.
    fn peer_ready(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let _ = (id, pipes);
    }
    /// The pipe is gone (peer disconnected, endpoint removed, or its reader finished).
    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable);
    /// Messages may be readable on `id` again.
    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable);
    /// `id` has room to write again.
    fn write_activated(&mut self, id: PipeId, pipes: &mut PipeTable);
    /// Sends one frame. `Err((msg, Error::Again))` hands the frame back when it must wait.
    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)>;
    /// Receives one frame, or `Error::Again`.
    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg>;
    /// Whether `recv` would return a frame now.
    fn has_in(&mut self, pipes: &mut PipeTable) -> bool;
    /// Whether `send` would accept a frame now.
    fn has_out(&mut self, pipes: &mut PipeTable) -> bool;
    /// A socket option the socket layer already validated and stored, passed on for the pattern's
    /// own state (e.g. SUBSCRIBE, ROUTER_MANDATORY). Options the pattern does not use are ignored.
    fn set_option(&mut self, opt: i32, value: &[u8], pipes: &mut PipeTable) -> Result<()> {
        let _ = (opt, value, pipes);
        Ok(())
    }
    /// Joins a group (`zmq_join`; DISH). The socket checked the name's length (at most
    /// [`crate::msg::GROUP_MAX_LENGTH`] bytes). Other types: [`Error::NotSup`], as libzmq's
    /// default `xjoin`.
    fn join(&mut self, group: &[u8], pipes: &mut PipeTable) -> Result<()> {
        let _ = (group, pipes);
        Err(Error::NotSup)
    }
    /// Leaves a group (`zmq_leave`; DISH); [`Error::NotSup`] for other types.
    fn leave(&mut self, group: &[u8], pipes: &mut PipeTable) -> Result<()> {
        let _ = (group, pipes);
        Err(Error::NotSup)
    }
    /// The `u32` routing id this pattern gave pipe `id` (SERVER, PEER); `None` for other types
    /// or an unknown pipe. `Socket::connect_peer` returns it for the pipe it just attached.
    fn pipe_routing_id(&self, id: PipeId) -> Option<u32> {
        let _ = id;
        None
    }
    /// Number of distinct subscribed topics (`ZMQ_TOPICS_COUNT`: PUB, SUB, XPUB, XSUB); `None`
    /// for the other types, whose getsockopt fails with `EINVAL`.
    fn topics_count(&self) -> Option<usize> {
        None
    }
    /// The state of the peer with routing id `rid` (`zmq_socket_get_peer_state`): ROUTER
    /// answers `POLLOUT` when its pipe takes a message now, 0 when full, `EHOSTUNREACH` for an
    /// unknown id; the other types `ENOTSUP`, as libzmq.
    fn peer_state(&mut self, rid: &[u8], pipes: &mut PipeTable) -> Result<i16> {
        let _ = (rid, pipes);
        Err(Error::NotSup)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn every_socket_type_has_a_pattern() {
        let mut t = PipeTable::new();
        // Which side of each type refuses with ENOTSUP, as libzmq's default xsend/xrecv.
        let cases = [
            (SocketType::Pair, false, false),
            (SocketType::Pub, false, true),
            (SocketType::Sub, true, false),
            (SocketType::Req, false, false),
            (SocketType::Rep, false, false),
            (SocketType::Dealer, false, false),
            (SocketType::Router, false, false),
            (SocketType::Pull, true, false),
            (SocketType::Push, false, true),
            (SocketType::XPub, false, false),
            (SocketType::XSub, false, false),
            (SocketType::Stream, false, false),
            (SocketType::Server, false, false),
            (SocketType::Client, false, false),
            (SocketType::Gather, true, false),
            (SocketType::Scatter, false, true),
            (SocketType::Peer, false, false),
            (SocketType::Channel, false, false),
            (SocketType::Radio, false, true),
            (SocketType::Dish, true, false),
            (SocketType::Dgram, false, false),
        ];
        for (ty, send_notsup, recv_notsup) in cases {
            let mut p = new_pattern(ty).unwrap();
            let s = p.send(frame(b"x", false), &mut t).map_err(|(_, e)| e);
            assert_eq!(s == Err(Error::NotSup), send_notsup, "send on {ty:?}");
            assert_eq!(
                p.recv(&mut t) == Err(Error::NotSup),
                recv_notsup,
                "recv on {ty:?}"
            );
        }
        let built = SocketType::ALL
            .iter()
            .filter(|t| new_pattern(**t).is_ok())
            .count();
        assert_eq!(cases.len(), built);
    }

    #[test]
    fn join_and_leave_are_refused_by_default() {
        let mut t = PipeTable::new();
        let mut p = new_pattern(SocketType::Sub).unwrap();
        assert_eq!(p.join(b"g", &mut t), Err(Error::NotSup));
        assert_eq!(p.leave(b"g", &mut t), Err(Error::NotSup));
        assert_eq!(p.pipe_routing_id(PipeId(1)), None);
    }

    #[test]
    fn kill_list_is_deduplicated_and_drained() {
        let mut t = PipeTable::new();
        let (a, _pa) = connect_detached(&mut t, 0);
        assert!(!t.has_kills());
        t.kill(a);
        t.kill(a);
        assert!(t.has_kills());
        assert_eq!(t.take_kills(), vec![a]);
        assert!(t.take_kills().is_empty());
        assert!(t.peer(a).is_none());
        assert_eq!(t.ids(), vec![a]);
    }

    #[test]
    fn bool_options_are_validated() {
        assert_eq!(opt_bool(&1i32.to_ne_bytes()), Ok(true));
        assert_eq!(opt_bool(&0i32.to_ne_bytes()), Ok(false));
        assert_eq!(opt_bool(&(-1i32).to_ne_bytes()), Err(Error::Inval));
        assert_eq!(opt_bool(&[1, 0]), Err(Error::Inval));
    }
}

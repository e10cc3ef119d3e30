//! ROUTER: addresses peers by routing id (libzmq `router_t`); also the core under REP.
//!
//! Identity of a pipe, decided once (libzmq `identify_peer`):
//! 1. the pipe's `connect_routing_id` (`ZMQ_CONNECT_ROUTING_ID` on connect), if set: this wins
//!    over what the peer announces, as in libzmq;
//! 2. with `ZMQ_ROUTER_RAW`, a generated id;
//! 3. otherwise the peer's "Identity" handshake property; while the handshake is not done the
//!    pipe is anonymous: nothing is read from it nor routed to it. `peer_ready` (or a read
//!    activation once the pipe carries the peer's properties) identifies it. An empty "Identity"
//!    gets a generated id: 5 bytes, a zero then a big-endian `u32` counter starting at a random
//!    value.
//!
//! An announced id already in use: without `ZMQ_ROUTER_HANDOVER` the new pipe stays anonymous
//! (libzmq ignores such a peer: its messages are never delivered, nothing reaches it; here they are
//! also discarded as they arrive, so the pipe can be reaped when that peer leaves, and the pipe is
//! identified on a later activation or handshake once its id is free); with handover
//! the old pipe is renamed to a generated id and terminated ([`PipeTable::kill`]; if a message
//! from it is being read, once that message is done), and the id moves to the new pipe. Later
//! handshakes of an identified pipe (reconnects) keep its id.
//!
//! Receiving yields `[routing id (MORE), frames...]`. Sending takes the routing id as the first
//! frame: an id frame without MORE is silently dropped; an unknown id drops the message, or fails
//! with `HostUnreach` under `ZMQ_ROUTER_MANDATORY`; a full pipe drops the message, or fails with
//! `Again` under mandatory (the id frame is handed back, to be sent again). Messages are dropped
//! whole, never in part. `ZMQ_PROBE_ROUTER` writes an empty message to each new pipe.
//! `ZMQ_ROUTER_RAW` (deprecated in libzmq, still honoured by 4.3.5) works as STREAM: frames carry
//! no MORE and `[id, ""]` closes that connection.

use std::collections::HashMap;

use super::fq::Fq;
use super::{opt_bool, random_u32, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;
use crate::pipe::WriteError;

/// Routing ids of identified pipes and the generator for new ones (libzmq's
/// `routing_socket_base_t` out-pipe map).
pub(crate) struct RoutingIds {
    map: HashMap<Vec<u8>, PipeId>,
    next: u32,
}

impl RoutingIds {
    pub(crate) fn new() -> RoutingIds {
        RoutingIds {
            map: HashMap::new(),
            next: random_u32(),
        }
    }

    /// A fresh 5-byte id: `0x00` then the big-endian counter.
    pub(crate) fn generate(&mut self) -> Vec<u8> {
        let mut id = Vec::with_capacity(5);
        id.push(0);
        id.extend_from_slice(&self.next.to_be_bytes());
        self.next = self.next.wrapping_add(1);
        id
    }

    #[inline]
    pub(crate) fn lookup(&self, rid: &[u8]) -> Option<PipeId> {
        self.map.get(rid).copied()
    }

    /// Records `rid` for `id`, in the map and in the pipe's entry.
    pub(crate) fn assign(&mut self, rid: Vec<u8>, id: PipeId, pipes: &mut PipeTable) {
        if let Some(e) = pipes.get_mut(id) {
            e.routing_id.clone_from(&rid);
        }
        self.map.insert(rid, id);
    }

    /// Forgets the id of pipe `id`.
    pub(crate) fn remove(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if let Some(e) = pipes.get(id) {
            if self.map.get(&e.routing_id) == Some(&id) {
                self.map.remove(&e.routing_id);
                return;
            }
        }
        self.map.retain(|_, p| *p != id);
    }

    pub(crate) fn pipes(&self) -> impl Iterator<Item = PipeId> + '_ {
        self.map.values().copied()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub(crate) fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

/// The routing-id frame for a message from pipe `id`, carrying the message's metadata.
pub(crate) fn id_frame(pipes: &PipeTable, id: PipeId, body: &Msg) -> Msg {
    let mut m = Msg::copy_from(pipes.get(id).map_or(&[][..], |e| &e.routing_id[..]));
    m.set_more(true);
    m.set_metadata(body.metadata().cloned());
    m
}

/// Writes the close request of a raw connection (an empty frame, past the HWM) and asks the
/// socket to terminate the pipe.
pub(crate) fn close_raw(id: PipeId, pipes: &mut PipeTable) {
    if let Some(w) = pipes.writer(id) {
        w.rollback();
        w.write(Msg::new());
    }
    pipes.kill(id);
}

/// What [`Router::identify`] found.
enum Identify {
    /// The pipe has its routing id.
    Done,
    /// The peer's handshake is not done yet.
    Pending,
    /// The peer announced an id in use (and no handover).
    Duplicate,
}

/// The ROUTER pattern.
pub struct Router {
    fq: Fq,
    ids: RoutingIds,
    /// Pipes without a routing id yet; `true` for those refused for a duplicate id.
    anonymous: Vec<(PipeId, bool)>,
    /// Body frame held back while its routing-id frame is returned.
    prefetched: Option<Msg>,
    /// Routing-id frame prepared by `has_in`, not yet returned.
    prefetched_id: Option<Msg>,
    more_in: bool,
    current_in: Option<PipeId>,
    terminate_current_in: bool,
    more_out: bool,
    current_out: Option<PipeId>,
    mandatory: bool,
    probe: bool,
    handover: bool,
    raw: bool,
}

impl Default for Router {
    fn default() -> Self {
        Router::new()
    }
}

impl Router {
    /// A ROUTER with no peers.
    pub fn new() -> Router {
        Router {
            fq: Fq::new(),
            ids: RoutingIds::new(),
            anonymous: Vec::new(),
            prefetched: None,
            prefetched_id: None,
            more_in: false,
            current_in: None,
            terminate_current_in: false,
            more_out: false,
            current_out: None,
            mandatory: false,
            probe: false,
            handover: false,
            raw: false,
        }
    }

    /// Gives pipe `id` its routing id if it can be known now.
    fn identify(&mut self, id: PipeId, pipes: &mut PipeTable) -> Identify {
        let Some(entry) = pipes.get(id) else {
            return Identify::Pending;
        };
        let rid = match entry.connect_routing_id.as_ref().filter(|r| !r.is_empty()) {
            Some(r) => r.clone(),
            None if self.raw => self.ids.generate(),
            None => {
                let Some(peer) = pipes.peer(id) else {
                    return Identify::Pending;
                };
                match peer.get("Identity").filter(|r| !r.is_empty()) {
                    Some(r) => r.to_vec(),
                    None => self.ids.generate(),
                }
            }
        };
        if let Some(old) = self.ids.lookup(&rid) {
            if old == id {
                return Identify::Done;
            }
            if !self.handover {
                return Identify::Duplicate;
            }
            // The new pipe takes over the id; the old one is renamed and disconnected.
            let tmp = self.ids.generate();
            self.ids.remove(old, pipes);
            self.ids.assign(tmp, old, pipes);
            if self.current_in == Some(old) {
                self.terminate_current_in = true;
            } else {
                pipes.kill(old);
            }
        }
        self.ids.assign(rid, id, pipes);
        Identify::Done
    }

    /// Identifies a new or anonymous pipe: into the fair queue, or (back) into `anonymous`.
    fn admit(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let pos = self.anonymous.iter().position(|&(p, _)| p == id);
        let outcome = self.identify(id, pipes);
        if let Some(pos) = pos {
            self.anonymous.swap_remove(pos);
        }
        match outcome {
            Identify::Done => self.fq.attach(id),
            Identify::Pending => self.anonymous.push((id, false)),
            Identify::Duplicate => {
                self.anonymous.push((id, true));
                if let Some(r) = pipes.reader(id) {
                    r.discard_all();
                }
            }
        }
    }

    fn end_of_input(&mut self, pipes: &mut PipeTable) {
        if self.terminate_current_in {
            if let Some(p) = self.current_in {
                pipes.kill(p);
            }
            self.terminate_current_in = false;
        }
        self.current_in = None;
    }

    /// Receives one frame (libzmq `router_t::xrecv`).
    pub(crate) fn xrecv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        if let Some(id) = self.prefetched_id.take() {
            self.more_in = true;
            return Ok(id);
        }
        if let Some(m) = self.prefetched.take() {
            self.more_in = m.more();
            if !self.more_in {
                self.end_of_input(pipes);
            }
            return Ok(m);
        }
        let (mut m, pipe) = self.fq.recv(pipes)?;
        if self.raw {
            m.set_more(false);
        }
        if self.more_in {
            self.more_in = m.more();
            if !self.more_in {
                self.end_of_input(pipes);
            }
            return Ok(m);
        }
        let id = id_frame(pipes, pipe, &m);
        self.prefetched = Some(m);
        self.current_in = Some(pipe);
        Ok(id)
    }

    /// Whether a frame can be received now; may prefetch a message.
    pub(crate) fn xhas_in(&mut self, pipes: &mut PipeTable) -> bool {
        if self.more_in || self.prefetched.is_some() {
            return true;
        }
        let Ok((mut m, pipe)) = self.fq.recv(pipes) else {
            return false;
        };
        if self.raw {
            m.set_more(false);
        }
        self.prefetched_id = Some(id_frame(pipes, pipe, &m));
        self.prefetched = Some(m);
        self.current_in = Some(pipe);
        true
    }

    /// Sends one frame (libzmq `router_t::xsend`).
    pub(crate) fn xsend(
        &mut self,
        mut msg: Msg,
        pipes: &mut PipeTable,
    ) -> std::result::Result<(), (Msg, Error)> {
        if !self.more_out {
            debug_assert!(self.current_out.is_none());
            // An id frame without MORE (a message with no body) is silently ignored.
            if msg.more() {
                self.more_out = true;
                match self.ids.lookup(msg.data()) {
                    Some(pipe) => {
                        let state = pipes
                            .writer(pipe)
                            .map_or(Err(WriteError::Closed), |w| w.check_write());
                        match state {
                            Ok(()) => self.current_out = Some(pipe),
                            Err(e) => {
                                if self.mandatory {
                                    self.more_out = false;
                                    let err = if e == WriteError::Full {
                                        Error::Again
                                    } else {
                                        Error::HostUnreach
                                    };
                                    return Err((msg, err));
                                }
                            }
                        }
                    }
                    None if self.mandatory => {
                        self.more_out = false;
                        return Err((msg, Error::HostUnreach));
                    }
                    None => {}
                }
            }
            return Ok(());
        }
        if self.raw {
            msg.set_more(false);
        }
        self.more_out = msg.more();
        if let Some(pipe) = self.current_out {
            if self.raw && msg.is_empty() {
                close_raw(pipe, pipes);
                self.current_out = None;
                return Ok(());
            }
            match pipes.writer(pipe) {
                Some(w) => match w.check_write() {
                    Ok(()) => {
                        w.write(msg);
                        if !self.more_out {
                            self.current_out = None;
                        }
                    }
                    Err(_) => {
                        // Gone since the id frame: drop what was written (e.g. REP's envelope).
                        w.rollback();
                        self.current_out = None;
                    }
                },
                None => self.current_out = None,
            }
        }
        Ok(())
    }

    /// Abandons a message being sent (REP discarding a malformed envelope).
    pub(crate) fn rollback(&mut self, pipes: &mut PipeTable) {
        if let Some(p) = self.current_out.take() {
            if let Some(w) = pipes.writer(p) {
                w.rollback();
            }
            self.more_out = false;
        }
    }

    /// Whether a frame could be sent: always, unless mandatory and no peer has room.
    pub(crate) fn xhas_out(&mut self, pipes: &mut PipeTable) -> bool {
        if !self.mandatory {
            return true;
        }
        self.ids
            .pipes()
            .any(|p| pipes.writer(p).is_some_and(|w| w.check_write().is_ok()))
    }
}

impl Pattern for Router {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.probe {
            if let Some(w) = pipes.writer(id) {
                let _ = w.try_write(Msg::new());
            }
        }
        self.admit(id, pipes);
    }

    fn peer_ready(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.anonymous.iter().any(|&(p, _)| p == id) {
            self.admit(id, pipes);
        }
    }

    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if let Some(pos) = self.anonymous.iter().position(|&(p, _)| p == id) {
            self.anonymous.swap_remove(pos);
            return;
        }
        self.ids.remove(id, pipes);
        self.fq.terminated(id);
        if let Some(w) = pipes.writer(id) {
            w.rollback();
        }
        if self.current_out == Some(id) {
            self.current_out = None;
        }
        if self.current_in == Some(id) {
            // A forced termination in the middle of a message: its rest will never come, so the
            // next frame starts a new message (a held-back body becomes the last frame).
            if let Some(b) = self.prefetched.as_mut() {
                b.set_more(false);
            }
            self.more_in = false;
            self.current_in = None;
            self.terminate_current_in = false;
        }
    }

    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.anonymous.iter().any(|&(p, _)| p == id) {
            self.admit(id, pipes);
        } else {
            self.fq.activated(id);
        }
    }

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    #[inline]
    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.xsend(msg, pipes)
    }

    #[inline]
    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        self.xrecv(pipes)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.xhas_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.xhas_out(pipes)
    }

    fn peer_state(&mut self, rid: &[u8], pipes: &mut PipeTable) -> Result<i16> {
        let id = self.ids.lookup(rid).ok_or(Error::HostUnreach)?;
        let e = pipes.get_mut(id).ok_or(Error::HostUnreach)?;
        // POLLOUT (2) when a message fits under the high-water mark now.
        Ok(if e.writer.check_write().is_ok() { 2 } else { 0 })
    }

    fn set_option(&mut self, option: i32, value: &[u8], _pipes: &mut PipeTable) -> Result<()> {
        match option {
            opt::ROUTER_MANDATORY => self.mandatory = opt_bool(value)?,
            opt::PROBE_ROUTER => self.probe = opt_bool(value)?,
            opt::ROUTER_HANDOVER => self.handover = opt_bool(value)?,
            opt::ROUTER_RAW => self.raw = opt_bool(value)?,
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn on(p: &mut dyn Pattern, t: &mut PipeTable, o: i32) {
        p.set_option(o, &1i32.to_ne_bytes(), t).unwrap();
    }

    #[test]
    fn identity_from_handshake_prefixes_received_messages() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        pa.send(&[b"early"]);
        assert!(
            !has_in(&mut r, &mut t),
            "nothing is read before the peer is identified"
        );
        ready(&mut r, &mut t, a, &pa, Some(b"alice"));
        assert_eq!(t.get(a).unwrap().routing_id, b"alice");
        assert!(has_in(&mut r, &mut t));
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"alice", b"early"]));
        pa.send(&[b"x", b"y"]);
        let id = r.recv(&mut t).unwrap();
        assert!(id.more());
        assert_eq!(id.data(), b"alice");
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"x", b"y"]));
        send(&mut r, &mut t, &[b"alice", b"re", b"ply"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"re", b"ply"])]);
        // A reconnect announcing the same id keeps it.
        ready(&mut r, &mut t, a, &pa, Some(b"alice"));
        send(&mut r, &mut t, &[b"alice", b"again"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"again"])]);
    }

    #[test]
    fn identified_on_read_activation_when_properties_came_first() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        pa.handshake(Some(b"bob"));
        pa.send(&[b"hi"]);
        r.read_activated(a, &mut t);
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"bob", b"hi"]));
        // The socket's later peer_ready changes nothing.
        r.peer_ready(a, &mut t);
        assert_eq!(t.get(a).unwrap().routing_id, b"bob");
    }

    #[test]
    fn generated_ids_are_zero_then_big_endian_counter() {
        let mut r = Router::new();
        r.ids.set_next(0xfffffffe);
        let mut t = PipeTable::new();
        let mut peers = Vec::new();
        for _ in 0..3 {
            let (id, p) = connect(&mut r, &mut t, 0);
            ready(&mut r, &mut t, id, &p, None);
            peers.push((id, p));
        }
        let ids: Vec<Vec<u8>> = peers
            .iter()
            .map(|(id, _)| t.get(*id).unwrap().routing_id.clone())
            .collect();
        assert_eq!(
            ids,
            vec![
                vec![0, 0xff, 0xff, 0xff, 0xfe],
                vec![0, 0xff, 0xff, 0xff, 0xff],
                vec![0, 0, 0, 0, 0]
            ]
        );
        peers[1].1.send(&[b"m"]);
        assert_eq!(
            recv(&mut r, &mut t).unwrap(),
            vec![ids[1].clone(), b"m".to_vec()]
        );
    }

    #[test]
    fn connect_routing_id_wins_and_needs_no_handshake() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect_detached(&mut t, 0);
        t.get_mut(a).unwrap().connect_routing_id = Some(b"chosen".to_vec());
        r.attach(a, &mut t);
        send(&mut r, &mut t, &[b"chosen", b"x"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"x"])]);
        ready(&mut r, &mut t, a, &pa, Some(b"announced"));
        assert_eq!(t.get(a).unwrap().routing_id, b"chosen");
    }

    #[test]
    fn unknown_peer_dropped_or_unreachable_with_mandatory() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"a"));
        send(&mut r, &mut t, &[b"nobody", b"1", b"2"]).unwrap();
        send(&mut r, &mut t, &[b"a"]).unwrap();
        assert!(pa.recv().is_none(), "an id frame without a body is ignored");
        send(&mut r, &mut t, &[b"a", b"ok"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"ok"])]);
        on(&mut r, &mut t, opt::ROUTER_MANDATORY);
        let (m, e) = r.send(frame(b"nobody", true), &mut t).unwrap_err();
        assert_eq!((m.data(), e), (&b"nobody"[..], Error::HostUnreach));
        send(&mut r, &mut t, &[b"a", b"still fine"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"still fine"])]);
    }

    #[test]
    fn full_peer_drops_whole_message_or_again_with_mandatory() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 1);
        ready(&mut r, &mut t, a, &pa, Some(b"a"));
        send(&mut r, &mut t, &[b"a", b"1"]).unwrap();
        send(&mut r, &mut t, &[b"a", b"2", b"2b"]).unwrap();
        assert!(has_out(&mut r, &mut t));
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        on(&mut r, &mut t, opt::ROUTER_MANDATORY);
        send(&mut r, &mut t, &[b"a", b"3"]).unwrap();
        assert!(!has_out(&mut r, &mut t));
        assert_err(send(&mut r, &mut t, &[b"a", b"4"]), Error::Again);
        assert_eq!(pa.recv_all(), vec![parts(&[b"3"])]);
        assert!(has_out(&mut r, &mut t));
        send(&mut r, &mut t, &[b"a", b"4"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"4"])]);
        drop(pa);
        assert_err(send(&mut r, &mut t, &[b"a", b"5"]), Error::HostUnreach);
    }

    #[test]
    fn duplicate_identity_ignored_without_handover() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"dup"));
        let (b, mut pb) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, b, &pb, Some(b"dup"));
        assert!(t.take_kills().is_empty());
        pb.send(&[b"from b"]);
        assert_err(recv(&mut r, &mut t), Error::Again);
        assert!(
            t.get(b).unwrap().reader.is_finished() || !t.get(b).unwrap().reader.has_msg(),
            "discarded"
        );
        send(&mut r, &mut t, &[b"dup", b"to a"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"to a"])]);
        assert!(pb.recv().is_none());
        // Once the id is free, the refused pipe is identified on its next activation.
        detach(&mut r, &mut t, a);
        pb.send(&[b"second try"]);
        assert_eq!(
            recv(&mut r, &mut t).unwrap(),
            parts(&[b"dup", b"second try"])
        );
        assert_eq!(r.ids.len(), 1);
    }

    #[test]
    fn handover_moves_id_and_kills_old_pipe() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        on(&mut r, &mut t, opt::ROUTER_HANDOVER);
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"dup"));
        let (b, mut pb) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, b, &pb, Some(b"dup"));
        assert_eq!(t.take_kills(), vec![a]);
        assert_eq!(t.get(a).unwrap().routing_id.len(), 5);
        send(&mut r, &mut t, &[b"dup", b"to b"]).unwrap();
        assert_eq!(pb.recv_all(), vec![parts(&[b"to b"])]);
        assert!(pa.recv().is_none());
        detach(&mut r, &mut t, a);
        pb.send(&[b"m"]);
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"dup", b"m"]));
    }

    #[test]
    fn handover_waits_for_message_being_read() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        on(&mut r, &mut t, opt::ROUTER_HANDOVER);
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"dup"));
        pa.send(&[b"p1", b"p2"]);
        assert_eq!(r.recv(&mut t).unwrap().data(), b"dup");
        let (b, pb) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, b, &pb, Some(b"dup"));
        assert!(!t.has_kills());
        assert_eq!(r.recv(&mut t).unwrap().data(), b"p1");
        assert!(!t.has_kills());
        assert_eq!(r.recv(&mut t).unwrap().data(), b"p2");
        assert_eq!(t.take_kills(), vec![a]);
    }

    #[test]
    fn probe_router_and_metadata_on_id_frame() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        on(&mut r, &mut t, opt::PROBE_ROUTER);
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        assert_eq!(pa.recv_all(), vec![parts(&[b""])]);
        let md = pa.handshake(Some(b"p"));
        ready(&mut r, &mut t, a, &pa, Some(b"p"));
        let mut m = frame(b"body", false);
        m.set_metadata(Some(md));
        pa.w.write(m);
        let id = r.recv(&mut t).unwrap();
        assert_eq!(id.property("Identity"), Some(&b"p"[..]));
    }

    #[test]
    fn fair_queues_whole_messages_between_peers() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"A"));
        let (b, mut pb) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, b, &pb, Some(b"B"));
        for _ in 0..2 {
            pa.send(&[b"1", b"2"]);
            pb.send(&[b"3"]);
        }
        let ids: Vec<Vec<u8>> = (0..4)
            .map(|_| recv(&mut r, &mut t).unwrap()[0].clone())
            .collect();
        assert_eq!(
            ids,
            vec![b"A".to_vec(), b"B".to_vec(), b"A".to_vec(), b"B".to_vec()]
        );
    }

    #[test]
    fn terminated_peer_mid_send_drops_rest() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"a"));
        r.send(frame(b"a", true), &mut t).unwrap();
        r.send(frame(b"1", true), &mut t).unwrap();
        detach(&mut r, &mut t, a);
        r.send(frame(b"2", false), &mut t).unwrap();
        // The state machine is back at an id frame: the unknown peer's message is dropped.
        send(&mut r, &mut t, &[b"a", b"x"]).unwrap();
        assert!(t.get(a).is_none());
    }

    #[test]
    fn forced_termination_mid_message_keeps_framing() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(b"A"));
        let (b, mut pb) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, b, &pb, Some(b"B"));
        pa.send(&[b"1", b"2", b"3"]);
        assert_eq!(r.recv(&mut t).unwrap().data(), b"A");
        assert_eq!(r.recv(&mut t).unwrap().data(), b"1");
        detach(&mut r, &mut t, a);
        pb.send(&[b"x"]);
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"B", b"x"]));
        pb.send(&[b"y", b"z"]);
        assert!(has_in(&mut r, &mut t));
        detach(&mut r, &mut t, b);
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"B", b"y"]));
        assert_err(recv(&mut r, &mut t), Error::Again);
    }

    #[test]
    fn raw_mode_generates_ids_and_closes_on_empty() {
        let mut r = Router::new();
        let mut t = PipeTable::new();
        on(&mut r, &mut t, opt::ROUTER_RAW);
        let (a, mut pa) = connect(&mut r, &mut t, 0);
        let rid = t.get(a).unwrap().routing_id.clone();
        assert_eq!(rid.len(), 5);
        pa.send(&[b"bytes"]);
        assert_eq!(
            recv(&mut r, &mut t).unwrap(),
            vec![rid.clone(), b"bytes".to_vec()]
        );
        send(&mut r, &mut t, &[&rid, b"out"]).unwrap();
        send(&mut r, &mut t, &[&rid, b""]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"out"]), parts(&[b""])]);
        assert_eq!(t.take_kills(), vec![a]);
    }
}

//! SERVER: fair-queues incoming messages, stamping each with its pipe's `u32` routing id, and
//! sends each message to the pipe its routing id names (libzmq `server_t`).
//!
//! Routing ids start at a random value and count up per attached pipe, skipping 0. Sending to
//! an id no pipe has is `EHOSTUNREACH`; to a full pipe `EAGAIN` (the socket waits, as libzmq's
//! blocking send does); a frame with MORE is `EINVAL`. Multipart messages from peers are
//! dropped ([`super::single`]). PEER is this pattern plus `connect_peer` (see [`super::peer`]).

use std::collections::HashMap;

use super::single::{check_single, SingleFq};
use super::{random_u32, IdMap, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The SERVER pattern.
pub(crate) struct Server {
    fq: SingleFq,
    /// Routing id to pipe.
    out: HashMap<u32, PipeId>,
    /// Pipe to routing id.
    ids: IdMap<u32>,
    next_id: u32,
}

impl Server {
    /// A SERVER with no peers; the first routing id is random, as libzmq's.
    pub(crate) fn new() -> Server {
        Server::starting_at(random_u32())
    }

    /// A SERVER whose first routing id is `first` (0 is skipped).
    pub(crate) fn starting_at(first: u32) -> Server {
        Server {
            fq: SingleFq::default(),
            out: HashMap::new(),
            ids: IdMap::default(),
            next_id: first,
        }
    }

    fn next_routing_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1);
            // Never 0 (no id), and never one still in use after the counter wrapped.
            if id != 0 && !self.out.contains_key(&id) {
                return id;
            }
        }
    }
}

impl Pattern for Server {
    fn attach(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        let rid = self.next_routing_id();
        self.out.insert(rid, id);
        self.ids.insert(id, rid);
        self.fq.fq.attach(id);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        if let Some(rid) = self.ids.remove(&id) {
            self.out.remove(&rid);
        }
        self.fq.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.fq.activated(id);
    }

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        let mut msg = check_single(msg)?;
        let Some(w) = self
            .out
            .get(&msg.routing_id())
            .copied()
            .and_then(|id| pipes.writer(id))
        else {
            return Err((msg, Error::HostUnreach));
        };
        if w.check_write().is_err() {
            return Err((msg, Error::Again));
        }
        // The message may cross an inproc pipe to a socket that reads the field.
        msg.reset_routing_id();
        w.write(msg);
        Ok(())
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        let (mut m, id) = self.fq.recv(pipes)?;
        if let Some(&rid) = self.ids.get(&id) {
            // Never 0: next_routing_id skips it.
            let _ = m.set_routing_id(rid);
        }
        Ok(m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.fq.fq.has_in(pipes)
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        // Whether a send succeeds depends on the pipe its routing id names (libzmq's answer).
        true
    }

    fn pipe_routing_id(&self, id: PipeId) -> Option<u32> {
        self.ids.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn send_to(s: &mut Server, t: &mut PipeTable, rid: u32, data: &[u8]) -> Result<()> {
        pump(s, t);
        let mut m = Msg::copy_from(data);
        m.set_routing_id(rid)?;
        s.send(m, t).map_err(|(_, e)| e)
    }

    fn recv_rid(s: &mut Server, t: &mut PipeTable) -> Result<(u32, Vec<u8>)> {
        pump(s, t);
        let m = s.recv(t)?;
        assert!(!m.more());
        Ok((m.routing_id(), m.data().to_vec()))
    }

    #[test]
    fn stamps_and_routes_by_routing_id() {
        let mut s = Server::starting_at(u32::MAX);
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut s, &mut t, 0);
        let (b, mut pb) = connect(&mut s, &mut t, 0);
        // u32::MAX, then 0 is skipped.
        assert_eq!(s.pipe_routing_id(a), Some(u32::MAX));
        assert_eq!(s.pipe_routing_id(b), Some(1));
        pb.send(&[b"from b"]);
        assert_eq!(recv_rid(&mut s, &mut t), Ok((1, b"from b".to_vec())));
        pa.send(&[b"from a"]);
        assert_eq!(recv_rid(&mut s, &mut t), Ok((u32::MAX, b"from a".to_vec())));
        send_to(&mut s, &mut t, u32::MAX, b"to a").unwrap();
        send_to(&mut s, &mut t, 1, b"to b").unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"to a"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"to b"])]);
        assert!(has_out(&mut s, &mut t));
    }

    #[test]
    fn unknown_id_multipart_and_full_pipe() {
        let mut s = Server::starting_at(7);
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut s, &mut t, 1);
        assert_err(send_to(&mut s, &mut t, 8, b"x"), Error::HostUnreach);
        let mut m = frame(b"x", true);
        m.set_routing_id(7).unwrap();
        let (back, e) = s.send(m, &mut t).unwrap_err();
        assert_eq!((e, back.data()), (Error::Inval, &b"x"[..]));
        send_to(&mut s, &mut t, 7, b"1").unwrap();
        assert_err(send_to(&mut s, &mut t, 7, b"2"), Error::Again);
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        // A departed peer's id is unreachable, and a new peer gets a new id.
        detach(&mut s, &mut t, a);
        assert_err(send_to(&mut s, &mut t, 7, b"3"), Error::HostUnreach);
        let (c, _pc) = connect(&mut s, &mut t, 0);
        assert_eq!(s.pipe_routing_id(c), Some(8));
    }

    #[test]
    fn multipart_from_a_peer_is_dropped() {
        let mut s = Server::starting_at(1);
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 0);
        pa.send(&[b"a", b"b", b"c"]);
        pa.send(&[b"single"]);
        assert_eq!(recv_rid(&mut s, &mut t), Ok((1, b"single".to_vec())));
        assert_err(recv_rid(&mut s, &mut t), Error::Again);
        assert!(!has_in(&mut s, &mut t));
    }

    #[test]
    fn routing_ids_are_not_reused_while_held() {
        let mut s = Server::starting_at(u32::MAX);
        let mut t = PipeTable::new();
        let (_a, _pa) = connect(&mut s, &mut t, 0);
        s.next_id = u32::MAX;
        let (b, _pb) = connect(&mut s, &mut t, 0);
        assert_eq!(s.pipe_routing_id(b), Some(1));
    }
}

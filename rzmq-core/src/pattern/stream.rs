//! STREAM: raw connections addressed by routing id (libzmq `stream_t`).
//!
//! Every pipe gets its id when attached: its `connect_routing_id` if set, else a generated one
//! (5 bytes: zero, then a big-endian counter from a random start). Each frame from a peer is
//! received as `[routing id (MORE), data]`; an empty data frame is a connect or disconnect notice
//! (`ZMQ_STREAM_NOTIFY`, on by default), which the engine writes into the pipe. If a connection's
//! pipe terminates while it is still open by those notices (the engine could not write the
//! disconnect notice), the pattern delivers `[id, ""]` itself.
//!
//! Sending takes `[routing id (MORE), data]`: an unknown id fails with `HostUnreach`, a full pipe
//! with `Again` (both hand the id frame back); the data frame's MORE flag is ignored, so the next
//! frame is an id again. An id frame without MORE makes the next frame be dropped (libzmq). Empty
//! data closes the connection: an empty frame is written to the pipe past its HWM (the engine
//! sends what precedes it, then closes) and the socket is asked to terminate the pipe
//! ([`PipeTable::kill`]); nothing more is read from it and no disconnect notice follows.

use std::collections::VecDeque;

use super::fq::Fq;
use super::router::{close_raw, id_frame, RoutingIds};
use super::{opt_bool, IdMap, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;
use crate::pipe::WriteError;

#[derive(Default, Clone, Copy)]
struct Conn {
    /// Between a connect notice and a disconnect notice.
    open: bool,
    /// The user asked to close it.
    closing: bool,
}

/// The STREAM pattern.
pub(crate) struct Stream {
    fq: Fq,
    ids: RoutingIds,
    conns: IdMap<Conn>,
    prefetched: Option<Msg>,
    prefetched_id: Option<Msg>,
    /// Disconnect notices made up for pipes that ended while open.
    notices: VecDeque<Msg>,
    more_out: bool,
    current_out: Option<PipeId>,
    notify: bool,
}

impl Default for Stream {
    fn default() -> Self {
        Stream::new()
    }
}

impl Stream {
    /// A STREAM with no peers.
    pub(crate) fn new() -> Stream {
        Stream {
            fq: Fq::new(),
            ids: RoutingIds::new(),
            conns: IdMap::default(),
            prefetched: None,
            prefetched_id: None,
            notices: VecDeque::new(),
            more_out: false,
            current_out: None,
            notify: true,
        }
    }

    /// Reads the next frame and prepares its id frame.
    fn fetch(&mut self, pipes: &mut PipeTable) -> Result<(Msg, Msg)> {
        if let Some(id) = self.notices.pop_front() {
            return Ok((id, Msg::new()));
        }
        loop {
            let (mut m, pipe) = self.fq.recv(pipes)?;
            let conn = self.conns.entry(pipe).or_default();
            if conn.closing {
                continue;
            }
            if m.is_empty() {
                conn.open = !conn.open;
            }
            m.set_more(false);
            let id = id_frame(pipes, pipe, &m);
            return Ok((id, m));
        }
    }
}

impl Pattern for Stream {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let rid = match pipes
            .get(id)
            .and_then(|e| e.connect_routing_id.clone())
            .filter(|r| !r.is_empty())
        {
            Some(r) if self.ids.lookup(&r).is_none() => r,
            _ => self.ids.generate(),
        };
        self.ids.assign(rid, id, pipes);
        self.conns.insert(id, Conn::default());
        self.fq.attach(id);
    }

    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        let conn = self.conns.remove(&id).unwrap_or_default();
        if self.notify && conn.open && !conn.closing {
            let mut idf = Msg::copy_from(pipes.get(id).map_or(&[][..], |e| &e.routing_id[..]));
            idf.set_more(true);
            self.notices.push_back(idf);
        }
        self.ids.remove(id, pipes);
        self.fq.terminated(id);
        if self.current_out == Some(id) {
            self.current_out = None;
        }
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.activated(id);
    }

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(
        &mut self,
        mut msg: Msg,
        pipes: &mut PipeTable,
    ) -> std::result::Result<(), (Msg, Error)> {
        if !self.more_out {
            if msg.more() {
                let Some(pipe) = self.ids.lookup(msg.data()) else {
                    return Err((msg, Error::HostUnreach));
                };
                let closing = self.conns.get(&pipe).is_some_and(|c| c.closing);
                let state = if closing {
                    Err(WriteError::Closed)
                } else {
                    pipes
                        .writer(pipe)
                        .map_or(Err(WriteError::Closed), |w| w.check_write())
                };
                if state.is_err() {
                    return Err((msg, Error::Again));
                }
                self.current_out = Some(pipe);
            }
            self.more_out = true;
            return Ok(());
        }
        msg.set_more(false);
        self.more_out = false;
        let Some(pipe) = self.current_out.take() else {
            return Ok(());
        };
        if msg.is_empty() {
            self.conns.entry(pipe).or_default().closing = true;
            close_raw(pipe, pipes);
            return Ok(());
        }
        if let Some(w) = pipes.writer(pipe) {
            w.write(msg);
        }
        Ok(())
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        if let Some(id) = self.prefetched_id.take() {
            return Ok(id);
        }
        if let Some(m) = self.prefetched.take() {
            return Ok(m);
        }
        let (id, m) = self.fetch(pipes)?;
        self.prefetched = Some(m);
        Ok(id)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        if self.prefetched.is_some() {
            return true;
        }
        match self.fetch(pipes) {
            Ok((id, m)) => {
                self.prefetched_id = Some(id);
                self.prefetched = Some(m);
                true
            }
            Err(_) => false,
        }
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        true
    }

    fn set_option(&mut self, option: i32, value: &[u8], _pipes: &mut PipeTable) -> Result<()> {
        if option == opt::STREAM_NOTIFY {
            self.notify = opt_bool(value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn framing_notices_and_close() {
        let mut s = Stream::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut s, &mut t, 0);
        let rid = t.get(a).unwrap().routing_id.clone();
        assert_eq!((rid.len(), rid[0]), (5, 0));
        pa.send(&[b""]);
        pa.send(&[b"GET /"]);
        assert_eq!(recv(&mut s, &mut t).unwrap(), vec![rid.clone(), vec![]]);
        let idf = s.recv(&mut t).unwrap();
        assert!(idf.more());
        let data = s.recv(&mut t).unwrap();
        assert!(!data.more());
        assert_eq!(data.data(), b"GET /");
        // The data frame's MORE flag is ignored: every send is [id, data].
        s.send(frame(&rid, true), &mut t).unwrap();
        s.send(frame(b"HTTP/1.0 200", true), &mut t).unwrap();
        s.send(frame(&rid, true), &mut t).unwrap();
        s.send(frame(b" OK", false), &mut t).unwrap();
        assert_eq!(
            pa.recv_all(),
            vec![parts(&[b"HTTP/1.0 200"]), parts(&[b" OK"])]
        );
        send(&mut s, &mut t, &[&rid, b""]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b""])]);
        assert_eq!(t.take_kills(), vec![a]);
        pa.send(&[b"after close"]);
        assert_err(recv(&mut s, &mut t), Error::Again);
        assert_err(send(&mut s, &mut t, &[&rid, b"x"]), Error::Again);
        detach(&mut s, &mut t, a);
        assert_err(recv(&mut s, &mut t), Error::Again);
        assert_err(send(&mut s, &mut t, &[&rid, b"x"]), Error::HostUnreach);
    }

    #[test]
    fn disconnect_notice_made_up_only_when_missing() {
        let mut s = Stream::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut s, &mut t, 0);
        let (b, mut pb) = connect(&mut s, &mut t, 0);
        let rb = t.get(b).unwrap().routing_id.clone();
        pa.send(&[b""]);
        pa.send(&[b""]);
        pb.send(&[b""]);
        for _ in 0..3 {
            recv(&mut s, &mut t).unwrap();
        }
        detach(&mut s, &mut t, a);
        assert_err(recv(&mut s, &mut t), Error::Again);
        detach(&mut s, &mut t, b);
        assert!(has_in(&mut s, &mut t));
        assert_eq!(recv(&mut s, &mut t).unwrap(), vec![rb, vec![]]);
        assert_err(recv(&mut s, &mut t), Error::Again);
    }

    #[test]
    fn errors_and_connect_routing_id() {
        let mut s = Stream::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect_detached(&mut t, 1);
        t.get_mut(a).unwrap().connect_routing_id = Some(b"conn".to_vec());
        s.attach(a, &mut t);
        let (m, e) = s.send(frame(b"nobody", true), &mut t).unwrap_err();
        assert_eq!((m.data(), e), (&b"nobody"[..], Error::HostUnreach));
        send(&mut s, &mut t, &[b"conn", b"1"]).unwrap();
        assert_err(send(&mut s, &mut t, &[b"conn", b"2"]), Error::Again);
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        // An id frame without MORE swallows the next frame.
        send(&mut s, &mut t, &[b"conn"]).unwrap();
        send(&mut s, &mut t, &[b"lost"]).unwrap();
        assert!(pa.recv().is_none());
        s.set_option(opt::STREAM_NOTIFY, &0i32.to_ne_bytes(), &mut t)
            .unwrap();
        pa.send(&[b""]);
        recv(&mut s, &mut t).unwrap();
        detach(&mut s, &mut t, a);
        assert_err(recv(&mut s, &mut t), Error::Again);
    }
}

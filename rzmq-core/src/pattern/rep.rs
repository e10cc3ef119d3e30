//! REP: a ROUTER that keeps each request's envelope for its reply (libzmq `rep_t`).
//!
//! Receiving a request first moves its envelope, every frame up to and including the empty
//! delimiter, into the pipe it came from (as the unfinished start of the reply), then returns the
//! body. A request without a delimiter is dropped whole. The reply completes that message, so it
//! goes back to the requester with the envelope in front; if that pipe has gone (or was full when
//! the request was read) the reply is dropped. Sending before receiving, or receiving twice, fails
//! with `Fsm`.

use super::router::Router;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The REP pattern.
pub(crate) struct Rep {
    router: Router,
    sending_reply: bool,
    request_begins: bool,
}

impl Default for Rep {
    fn default() -> Self {
        Rep::new()
    }
}

impl Rep {
    /// A REP with no peers.
    pub(crate) fn new() -> Rep {
        Rep {
            router: Router::new(),
            sending_reply: false,
            request_begins: true,
        }
    }
}

impl Pattern for Rep {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.router.attach(id, pipes);
    }

    fn peer_ready(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.router.peer_ready(id, pipes);
    }

    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.router.terminated(id, pipes);
    }

    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.router.read_activated(id, pipes);
    }

    fn write_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.router.write_activated(id, pipes);
    }

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        if !self.sending_reply {
            return Err((msg, Error::Fsm));
        }
        let more = msg.more();
        self.router.xsend(msg, pipes)?;
        if !more {
            self.sending_reply = false;
        }
        Ok(())
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        if self.sending_reply {
            return Err(Error::Fsm);
        }
        if self.request_begins {
            loop {
                let m = self.router.xrecv(pipes)?;
                if m.more() {
                    let bottom = m.is_empty();
                    // The routing id selects the pipe; the other frames start the reply.
                    let _ = self.router.xsend(m, pipes);
                    if bottom {
                        break;
                    }
                } else {
                    self.router.rollback(pipes);
                }
            }
            self.request_begins = false;
        }
        let m = self.router.xrecv(pipes)?;
        if !m.more() {
            self.sending_reply = true;
            self.request_begins = true;
        }
        Ok(m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        !self.sending_reply && self.router.xhas_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.sending_reply && self.router.xhas_out(pipes)
    }

    fn set_option(&mut self, option: i32, value: &[u8], pipes: &mut PipeTable) -> Result<()> {
        self.router.set_option(option, value, pipes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn rep_with_peer(id: &[u8]) -> (Rep, PipeTable, PipeId, Peer) {
        let mut r = Rep::new();
        let mut t = PipeTable::new();
        let (a, pa) = connect(&mut r, &mut t, 0);
        ready(&mut r, &mut t, a, &pa, Some(id));
        (r, t, a, pa)
    }

    #[test]
    fn envelope_goes_back_with_the_reply() {
        let (mut r, mut t, _a, mut pa) = rep_with_peer(b"req1");
        assert_err(send(&mut r, &mut t, &[b"early"]), Error::Fsm);
        assert!(!has_out(&mut r, &mut t));
        pa.send(&[b"hop1", b"hop2", b"", b"body", b"more body"]);
        assert!(has_in(&mut r, &mut t));
        assert_eq!(
            recv(&mut r, &mut t).unwrap(),
            parts(&[b"body", b"more body"])
        );
        assert_err(recv(&mut r, &mut t), Error::Fsm);
        assert!(!has_in(&mut r, &mut t));
        assert!(has_out(&mut r, &mut t));
        send(&mut r, &mut t, &[b"re", b"ply"]).unwrap();
        assert_eq!(
            pa.recv_all(),
            vec![parts(&[b"hop1", b"hop2", b"", b"re", b"ply"])]
        );
        assert_err(send(&mut r, &mut t, &[b"twice"]), Error::Fsm);
    }

    #[test]
    fn malformed_requests_are_dropped() {
        let (mut r, mut t, _a, mut pa) = rep_with_peer(b"x");
        pa.send(&[b"no delimiter"]);
        pa.send(&[b"label", b"still none"]);
        pa.send(&[b"", b"ok"]);
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"ok"]));
        send(&mut r, &mut t, &[b"answer"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"", b"answer"])]);
    }

    #[test]
    fn replies_route_to_the_requester_among_many() {
        let mut r = Rep::new();
        let mut t = PipeTable::new();
        let mut peers = Vec::new();
        for name in [&b"a"[..], b"b", b"c"] {
            let (id, p) = connect(&mut r, &mut t, 0);
            ready(&mut r, &mut t, id, &p, Some(name));
            peers.push(p);
        }
        for (i, p) in peers.iter_mut().enumerate() {
            p.send(&[b"", &[i as u8]]);
        }
        for _ in 0..3 {
            let req = recv(&mut r, &mut t).unwrap();
            send(&mut r, &mut t, &[&[req[0][0] + 100]]).unwrap();
        }
        for (i, p) in peers.iter_mut().enumerate() {
            assert_eq!(p.recv_all(), vec![parts(&[b"", &[i as u8 + 100]])]);
        }
    }

    #[test]
    fn reply_to_vanished_requester_is_dropped() {
        let (mut r, mut t, a, mut pa) = rep_with_peer(b"gone");
        pa.send(&[b"", b"q"]);
        assert_eq!(recv(&mut r, &mut t).unwrap(), parts(&[b"q"]));
        detach(&mut r, &mut t, a);
        send(&mut r, &mut t, &[b"lost"]).unwrap();
        assert_err(recv(&mut r, &mut t), Error::Again);
    }
}

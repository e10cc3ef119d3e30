//! REQ: a DEALER with the request-reply envelope and a strict send/recv alternation (libzmq
//! `req_t`).
//!
//! Each request goes out as `["" (MORE), body...]`, or with `ZMQ_REQ_CORRELATE` as
//! `[request id (4 bytes, native byte order, MORE), "" (MORE), body...]`, the id counting up from a
//! random start. Only a reply from the pipe the request went to is accepted (any pipe once that
//! one has gone); replies without the expected envelope are dropped whole. Sending a second
//! request before the reply fails with `Fsm`, unless `ZMQ_REQ_RELAXED`, which drops the
//! outstanding request's state; receiving before a request fails with `Fsm`. Starting a request
//! discards whatever replies are already queued.

use super::dealer::Dealer;
use super::single::RecvPipe;
use super::{opt_bool, random_u32, Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::options as opt;

/// The REQ pattern.
pub(crate) struct Req {
    dealer: Dealer,
    receiving_reply: bool,
    message_begins: bool,
    reply_pipe: Option<PipeId>,
    correlate: bool,
    request_id: u32,
    strict: bool,
}

impl Default for Req {
    fn default() -> Self {
        Req::new()
    }
}

impl Req {
    /// A REQ with no peers.
    pub(crate) fn new() -> Req {
        Req {
            dealer: Dealer::new(),
            receiving_reply: false,
            message_begins: true,
            reply_pipe: None,
            correlate: false,
            request_id: random_u32(),
            strict: true,
        }
    }

    /// Reads the next frame that comes from the reply pipe, dropping frames from any other.
    fn recv_reply_pipe(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        loop {
            let (m, pipe) = self.dealer.recv_pipe(pipes)?;
            if self.reply_pipe.is_none() || self.reply_pipe == Some(pipe) {
                return Ok(m);
            }
        }
    }

    /// Drops the rest of a message whose first frame was `m`.
    fn skip_rest(&mut self, mut m: Msg, pipes: &mut PipeTable) {
        while m.more() {
            match self.recv_reply_pipe(pipes) {
                Ok(next) => m = next,
                Err(_) => return,
            }
        }
    }
}

impl Pattern for Req {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.dealer.attach(id, pipes);
    }

    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.reply_pipe == Some(id) {
            self.reply_pipe = None;
        }
        self.dealer.terminated(id, pipes);
    }

    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.dealer.read_activated(id, pipes);
    }

    fn write_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.dealer.write_activated(id, pipes);
    }

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        if self.receiving_reply {
            if self.strict {
                return Err((msg, Error::Fsm));
            }
            self.receiving_reply = false;
            self.message_begins = true;
        }
        if self.message_begins {
            self.reply_pipe = None;
            if self.correlate {
                self.request_id = self.request_id.wrapping_add(1);
                let mut id = Msg::copy_from(&self.request_id.to_ne_bytes());
                id.set_more(true);
                match self.dealer.send_pipe(id, pipes) {
                    Ok(p) => self.reply_pipe = p,
                    Err((_, e)) => return Err((msg, e)),
                }
            }
            let mut bottom = Msg::new();
            bottom.set_more(true);
            match self.dealer.send_pipe(bottom, pipes) {
                Ok(p) => self.reply_pipe = p.or(self.reply_pipe),
                Err((_, e)) => return Err((msg, e)),
            }
            self.message_begins = false;
            // Replies that are already here belong to earlier requests.
            while self.dealer.recv_pipe(pipes).is_ok() {}
        }
        let more = msg.more();
        self.dealer.send(msg, pipes)?;
        if !more {
            self.receiving_reply = true;
            self.message_begins = true;
        }
        Ok(())
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        if !self.receiving_reply {
            return Err(Error::Fsm);
        }
        while self.message_begins {
            if self.correlate {
                let m = self.recv_reply_pipe(pipes)?;
                if !m.more() || m.data() != self.request_id.to_ne_bytes() {
                    self.skip_rest(m, pipes);
                    continue;
                }
            }
            let m = self.recv_reply_pipe(pipes)?;
            if !m.more() || !m.is_empty() {
                self.skip_rest(m, pipes);
                continue;
            }
            self.message_begins = false;
        }
        let m = self.recv_reply_pipe(pipes)?;
        if !m.more() {
            self.receiving_reply = false;
            self.message_begins = true;
        }
        Ok(m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.receiving_reply && self.dealer.has_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        if self.receiving_reply && self.strict {
            return false;
        }
        self.dealer.has_out(pipes)
    }

    fn set_option(&mut self, option: i32, value: &[u8], pipes: &mut PipeTable) -> Result<()> {
        match option {
            opt::REQ_CORRELATE => self.correlate = opt_bool(value)?,
            opt::REQ_RELAXED => self.strict = !opt_bool(value)?,
            _ => return self.dealer.set_option(option, value, pipes),
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
    fn envelope_and_strict_alternation() {
        let mut q = Req::new();
        let mut t = PipeTable::new();
        assert_err(recv(&mut q, &mut t), Error::Fsm);
        let (_a, mut pa) = connect(&mut q, &mut t, 0);
        assert!(has_out(&mut q, &mut t));
        send(&mut q, &mut t, &[b"hello", b"world"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"", b"hello", b"world"])]);
        assert!(!has_out(&mut q, &mut t));
        assert_err(send(&mut q, &mut t, &[b"again"]), Error::Fsm);
        assert!(!has_in(&mut q, &mut t));
        pa.send(&[b"", b"re", b"ply"]);
        assert!(has_in(&mut q, &mut t));
        assert_eq!(recv(&mut q, &mut t).unwrap(), parts(&[b"re", b"ply"]));
        assert_err(recv(&mut q, &mut t), Error::Fsm);
        assert!(has_out(&mut q, &mut t));
    }

    #[test]
    fn malformed_replies_and_other_pipes_are_dropped() {
        let mut q = Req::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut q, &mut t, 0);
        let (_b, mut pb) = connect(&mut q, &mut t, 0);
        send(&mut q, &mut t, &[b"req"]).unwrap();
        assert_eq!(pa.recv_all().len(), 1);
        pb.send(&[b"", b"not from a"]);
        pa.send(&[b"no delimiter"]);
        pa.send(&[b"x", b"non-empty delimiter"]);
        pa.send(&[b"", b"good"]);
        assert_eq!(recv(&mut q, &mut t).unwrap(), parts(&[b"good"]));
    }

    #[test]
    fn stale_replies_are_discarded_when_a_request_starts() {
        let mut q = Req::new();
        let mut t = PipeTable::new();
        on(&mut q, &mut t, opt::REQ_RELAXED);
        let (_a, mut pa) = connect(&mut q, &mut t, 0);
        send(&mut q, &mut t, &[b"r1"]).unwrap();
        pa.send(&[b"", b"late reply to r1"]);
        send(&mut q, &mut t, &[b"r2"]).unwrap();
        pa.send(&[b"", b"reply to r2"]);
        assert_eq!(recv(&mut q, &mut t).unwrap(), parts(&[b"reply to r2"]));
        assert_eq!(
            pa.recv_all(),
            vec![parts(&[b"", b"r1"]), parts(&[b"", b"r2"])]
        );
    }

    #[test]
    fn correlate_prefixes_request_id_and_checks_it() {
        let mut q = Req::new();
        let mut t = PipeTable::new();
        on(&mut q, &mut t, opt::REQ_CORRELATE);
        on(&mut q, &mut t, opt::REQ_RELAXED);
        let (_a, mut pa) = connect(&mut q, &mut t, 0);
        send(&mut q, &mut t, &[b"one"]).unwrap();
        let m1 = pa.recv().unwrap();
        assert_eq!(m1.len(), 3);
        assert_eq!(m1[0].len(), 4);
        assert_eq!(&m1[1..], &parts(&[b"", b"one"])[..]);
        send(&mut q, &mut t, &[b"two"]).unwrap();
        let m2 = pa.recv().unwrap();
        let id1 = u32::from_ne_bytes(m1[0].clone().try_into().unwrap());
        let id2 = u32::from_ne_bytes(m2[0].clone().try_into().unwrap());
        assert_eq!(id2, id1.wrapping_add(1));
        pa.send(&[&m1[0], b"", b"reply to one"]);
        pa.send(&[&m2[0], b"", b"reply to two"]);
        assert_eq!(recv(&mut q, &mut t).unwrap(), parts(&[b"reply to two"]));
    }

    #[test]
    fn reply_pipe_gone_accepts_any_pipe() {
        let mut q = Req::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut q, &mut t, 0);
        let (_b, mut pb) = connect(&mut q, &mut t, 0);
        send(&mut q, &mut t, &[b"req"]).unwrap();
        assert_eq!(pa.recv_all().len(), 1);
        detach(&mut q, &mut t, a);
        pb.send(&[b"", b"from b"]);
        assert_eq!(recv(&mut q, &mut t).unwrap(), parts(&[b"from b"]));
    }

    #[test]
    fn again_without_peers_keeps_state() {
        let mut q = Req::new();
        let mut t = PipeTable::new();
        let (m, e) = q.send(frame(b"r", false), &mut t).unwrap_err();
        assert_eq!((m.data(), e), (&b"r"[..], Error::Again));
        let (_a, mut pa) = connect(&mut q, &mut t, 0);
        q.send(m, &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"", b"r"])]);
    }
}

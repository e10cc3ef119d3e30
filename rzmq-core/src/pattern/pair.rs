//! PAIR: exactly one peer (libzmq `pair_t`).
//!
//! The first pipe attached is the peer; any further pipe is refused by asking the socket to
//! terminate it ([`PipeTable::kill`]). Sending returns `Again` when there is no peer or its pipe
//! is full; receiving returns `Again` when nothing is queued.

use super::single::RecvPipe;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The PAIR pattern.
#[derive(Default)]
pub(crate) struct Pair {
    pipe: Option<PipeId>,
}

impl Pair {
    /// A PAIR with no peer.
    pub(crate) fn new() -> Pair {
        Pair::default()
    }
}

impl Pattern for Pair {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        if self.pipe.is_none() {
            self.pipe = Some(id);
        } else {
            pipes.kill(id);
        }
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        if self.pipe == Some(id) {
            self.pipe = None;
        }
    }

    fn read_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        match self.pipe.and_then(|p| pipes.writer(p)) {
            Some(w) => w.try_write(msg).map_err(|(m, _)| (m, Error::Again)),
            None => Err((msg, Error::Again)),
        }
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        self.pipe
            .and_then(|p| pipes.reader(p))
            .and_then(|r| r.read())
            .ok_or(Error::Again)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.pipe
            .and_then(|p| pipes.reader(p))
            .is_some_and(|r| r.has_msg())
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.pipe
            .and_then(|p| pipes.writer(p))
            .is_some_and(|w| w.check_write().is_ok())
    }
}

impl RecvPipe for Pair {
    fn recv_pipe(&mut self, pipes: &mut PipeTable) -> Result<(Msg, PipeId)> {
        let id = self.pipe.ok_or(Error::Again)?;
        let m = pipes
            .reader(id)
            .and_then(|r| r.read())
            .ok_or(Error::Again)?;
        Ok((m, id))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn one_peer_only_and_again_without_room() {
        let mut p = Pair::new();
        let mut t = PipeTable::new();
        assert_err(send(&mut p, &mut t, &[b"x"]), Error::Again);
        assert!(!has_out(&mut p, &mut t));
        let (a, mut pa) = connect(&mut p, &mut t, 1);
        let (b, _pb) = connect(&mut p, &mut t, 1);
        assert_eq!(t.take_kills(), vec![b], "second peer refused");
        detach(&mut p, &mut t, b);
        assert!(has_out(&mut p, &mut t));
        send(&mut p, &mut t, &[b"1", b"2"]).unwrap();
        assert_err(send(&mut p, &mut t, &[b"3"]), Error::Again);
        assert_eq!(pa.recv().unwrap(), parts(&[b"1", b"2"]));
        send(&mut p, &mut t, &[b"3"]).unwrap();
        assert!(!has_in(&mut p, &mut t));
        pa.send(&[b"in", b"put"]);
        assert!(has_in(&mut p, &mut t));
        assert_eq!(recv(&mut p, &mut t).unwrap(), parts(&[b"in", b"put"]));
        assert_err(recv(&mut p, &mut t), Error::Again);
        detach(&mut p, &mut t, a);
        let (c, _pc) = connect(&mut p, &mut t, 1);
        assert!(
            t.take_kills().is_empty(),
            "a new peer is accepted once the old one left"
        );
        assert_eq!(p.pipe, Some(c));
    }
}

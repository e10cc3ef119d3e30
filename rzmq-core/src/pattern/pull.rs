//! PULL: fair-queues messages from its peers (libzmq `pull_t`); it cannot send.

use super::fq::Fq;
use super::single::RecvPipe;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The PULL pattern.
#[derive(Default)]
pub struct Pull {
    fq: Fq,
}

impl Pull {
    /// A PULL with no peers.
    pub fn new() -> Pull {
        Pull::default()
    }
}

impl Pattern for Pull {
    fn attach(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.attach(id);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.activated(id);
    }

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(&mut self, msg: Msg, _pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        Err((msg, Error::NotSup))
    }

    #[inline]
    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        self.fq.recv(pipes).map(|(m, _)| m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.fq.has_in(pipes)
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        false
    }
}

impl RecvPipe for Pull {
    #[inline]
    fn recv_pipe(&mut self, pipes: &mut PipeTable) -> Result<(Msg, PipeId)> {
        self.fq.recv(pipes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn fair_queue_alternates_whole_messages() {
        let mut p = Pull::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        for i in 0..3u8 {
            pa.send(&[b"a", &[i]]);
            pb.send(&[b"b", &[i]]);
        }
        let got: Vec<_> = (0..6).map(|_| recv(&mut p, &mut t).unwrap()).collect();
        let order: Vec<u8> = got.iter().map(|m| m[0][0]).collect();
        assert_eq!(order, b"ababab");
        assert_err(recv(&mut p, &mut t), Error::Again);
        assert!(!has_in(&mut p, &mut t));
        assert_err(send(&mut p, &mut t, &[b"x"]), Error::NotSup);
        assert!(!has_out(&mut p, &mut t));
    }

    #[test]
    fn empty_pipes_wait_for_activation() {
        let mut p = Pull::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        pb.send(&[b"b1"]);
        assert_eq!(recv(&mut p, &mut t).unwrap(), parts(&[b"b1"]));
        assert_err(recv(&mut p, &mut t), Error::Again);
        pa.send(&[b"a1"]);
        p.read_activated(a, &mut t);
        p.read_activated(a, &mut t);
        assert!(has_in(&mut p, &mut t));
        assert_eq!(recv(&mut p, &mut t).unwrap(), parts(&[b"a1"]));
    }

    #[test]
    fn finished_reader_is_deactivated_and_detached() {
        let mut p = Pull::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 0);
        pa.send(&[b"last"]);
        drop(pa);
        assert_eq!(recv(&mut p, &mut t).unwrap(), parts(&[b"last"]));
        assert_err(recv(&mut p, &mut t), Error::Again);
        assert!(t.get(a).unwrap().reader.is_finished());
        detach(&mut p, &mut t, a);
        assert_err(recv(&mut p, &mut t), Error::Again);
    }
}

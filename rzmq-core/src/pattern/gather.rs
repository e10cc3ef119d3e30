//! GATHER: fair-queues single-part messages from SCATTERs (libzmq `gather_t`); a thread-safe
//! PULL. It sends nothing (`ENOTSUP`); multipart messages from peers are dropped.

use super::single::SingleFq;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The GATHER pattern.
#[derive(Default)]
pub(crate) struct Gather {
    fq: SingleFq,
}

impl Gather {
    /// A GATHER with no peers.
    pub(crate) fn new() -> Gather {
        Gather::default()
    }
}

impl Pattern for Gather {
    fn attach(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.fq.attach(id);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.fq.activated(id);
    }

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(&mut self, msg: Msg, _pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        Err((msg, Error::NotSup))
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        self.fq.recv(pipes).map(|(m, _)| m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.fq.fq.has_in(pipes)
    }

    fn has_out(&mut self, _pipes: &mut PipeTable) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn fans_in_and_drops_multipart() {
        let mut g = Gather::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut g, &mut t, 0);
        let (_b, mut pb) = connect(&mut g, &mut t, 0);
        pa.send(&[b"a1"]);
        pa.send(&[b"m", b"p"]);
        pb.send(&[b"b1"]);
        pa.send(&[b"a2"]);
        let mut got: Vec<_> = (0..3).map(|_| recv(&mut g, &mut t).unwrap()).collect();
        got.sort();
        assert_eq!(got, vec![parts(&[b"a1"]), parts(&[b"a2"]), parts(&[b"b1"])]);
        assert_err(recv(&mut g, &mut t), Error::Again);
        assert_err(send(&mut g, &mut t, &[b"x"]), Error::NotSup);
        assert!(!has_out(&mut g, &mut t));
    }
}

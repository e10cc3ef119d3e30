//! CLIENT: load-balances outgoing and fair-queues incoming single-part messages (libzmq
//! `client_t`): a DEALER without multipart, talking to SERVERs.

use super::lb::Lb;
use super::single::{check_single, SingleFq};
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The CLIENT pattern.
#[derive(Default)]
pub(crate) struct Client {
    lb: Lb,
    fq: SingleFq,
}

impl Client {
    /// A CLIENT with no peers.
    pub(crate) fn new() -> Client {
        Client::default()
    }
}

impl Pattern for Client {
    fn attach(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.fq.attach(id);
        self.lb.attach(id);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.terminated(id);
        self.lb.terminated(id);
    }

    fn read_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.fq.fq.activated(id);
    }

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.lb.activated(id);
    }

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.lb.send(check_single(msg)?, pipes).map(|_| ())
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        self.fq.recv(pipes).map(|(m, _)| m)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.fq.fq.has_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.lb.has_out(pipes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn round_robin_out_fair_queue_in_single_part_only() {
        let mut c = Client::new();
        let mut t = PipeTable::new();
        assert_err(send(&mut c, &mut t, &[b"nobody"]), Error::Again);
        let (_a, mut pa) = connect(&mut c, &mut t, 0);
        let (_b, mut pb) = connect(&mut c, &mut t, 0);
        send(&mut c, &mut t, &[b"1"]).unwrap();
        send(&mut c, &mut t, &[b"2"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"2"])]);
        assert_err(send(&mut c, &mut t, &[b"a", b"b"]), Error::Inval);
        assert!(pa.recv_all().is_empty() && pb.recv_all().is_empty());
        pa.send(&[b"multi", b"part"]);
        pb.send(&[b"from b"]);
        pa.send(&[b"from a"]);
        let mut got = vec![recv(&mut c, &mut t).unwrap(), recv(&mut c, &mut t).unwrap()];
        got.sort();
        assert_eq!(got, vec![parts(&[b"from a"]), parts(&[b"from b"])]);
        assert_err(recv(&mut c, &mut t), Error::Again);
    }
}

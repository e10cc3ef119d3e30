//! PUSH: load-balances messages over its peers (libzmq `push_t`); it cannot receive.

use super::lb::Lb;
use super::single::RecvPipe;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The PUSH pattern.
#[derive(Default)]
pub struct Push {
    lb: Lb,
}

impl Push {
    /// A PUSH with no peers.
    pub fn new() -> Push {
        Push::default()
    }
}

impl Pattern for Push {
    fn attach(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.lb.attach(id);
    }

    fn terminated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.lb.terminated(id);
    }

    fn read_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn write_activated(&mut self, id: PipeId, _pipes: &mut PipeTable) {
        self.lb.activated(id);
    }

    #[inline]
    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.lb.send(msg, pipes).map(|_| ())
    }

    fn recv(&mut self, _pipes: &mut PipeTable) -> Result<Msg> {
        Err(Error::NotSup)
    }

    fn has_in(&mut self, _pipes: &mut PipeTable) -> bool {
        false
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.lb.has_out(pipes)
    }
}

impl RecvPipe for Push {
    fn recv_pipe(&mut self, _pipes: &mut PipeTable) -> Result<(Msg, PipeId)> {
        Err(Error::NotSup)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn round_robin_keeps_multipart_together() {
        let mut p = Push::new();
        let mut t = PipeTable::new();
        let mut peers: Vec<_> = (0..3).map(|_| connect(&mut p, &mut t, 0).1).collect();
        send(&mut p, &mut t, &[b"a1", b"a2"]).unwrap();
        for i in 0..5u8 {
            send(&mut p, &mut t, &[&[i]]).unwrap();
        }
        assert_eq!(
            peers[0].recv_all(),
            vec![parts(&[b"a1", b"a2"]), parts(&[&[2]])]
        );
        assert_eq!(peers[1].recv_all(), vec![parts(&[&[0]]), parts(&[&[3]])]);
        assert_eq!(peers[2].recv_all(), vec![parts(&[&[1]]), parts(&[&[4]])]);
        assert_err(recv(&mut p, &mut t), Error::NotSup);
        assert!(!has_in(&mut p, &mut t));
    }

    #[test]
    fn full_pipes_are_skipped_until_activated() {
        let mut p = Push::new();
        let mut t = PipeTable::new();
        let (a, mut pa) = connect(&mut p, &mut t, 1);
        let (_b, mut pb) = connect(&mut p, &mut t, 2);
        for i in 0..3u8 {
            send(&mut p, &mut t, &[&[i]]).unwrap();
        }
        assert_err(send(&mut p, &mut t, &[b"x"]), Error::Again);
        assert!(!has_out(&mut p, &mut t));
        assert_eq!(pa.recv_all(), vec![parts(&[&[0]])]);
        assert_eq!(pb.recv_all(), vec![parts(&[&[1]]), parts(&[&[2]])]);
        p.write_activated(a, &mut t);
        p.write_activated(a, &mut t);
        assert!(has_out(&mut p, &mut t));
        send(&mut p, &mut t, &[b"y"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"y"])]);
        assert!(pb.recv().is_none());
    }

    #[test]
    fn again_without_peers_and_closed_peer_skipped() {
        let mut p = Push::new();
        let mut t = PipeTable::new();
        let r = p.send(frame(b"m", false), &mut t);
        let (m, e) = r.unwrap_err();
        assert_eq!((m.data(), e), (&b"m"[..], Error::Again));
        let (_a, pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        drop(pa);
        for _ in 0..3 {
            send(&mut p, &mut t, &[b"z"]).unwrap();
        }
        assert_eq!(pb.recv_all().len(), 3, "the closed peer gets nothing");
    }

    #[test]
    fn peer_lost_mid_multipart_drops_the_rest() {
        let mut p = Push::new();
        let mut t = PipeTable::new();
        let (a, pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        p.send(frame(b"1", true), &mut t).unwrap();
        drop(pa);
        assert!(has_out(&mut p, &mut t), "the rest of a message always fits");
        // The reader is gone: the rest of the message is dropped, not sent elsewhere.
        p.send(frame(b"2", true), &mut t).unwrap();
        p.send(frame(b"3", false), &mut t).unwrap();
        detach(&mut p, &mut t, a);
        send(&mut p, &mut t, &[b"next"]).unwrap();
        assert_eq!(pb.recv_all(), vec![parts(&[b"next"])]);
    }

    #[test]
    fn peer_lost_before_last_frame_does_not_send_it_alone() {
        let mut p = Push::new();
        let mut t = PipeTable::new();
        let (c, pc) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        p.send(frame(b"x", true), &mut t).unwrap();
        drop(pc);
        p.send(frame(b"y", false), &mut t).unwrap();
        detach(&mut p, &mut t, c);
        send(&mut p, &mut t, &[b"z"]).unwrap();
        assert_eq!(pb.recv_all(), vec![parts(&[b"z"])]);
    }

    #[test]
    fn terminated_mid_multipart_drops_the_rest() {
        let mut p = Push::new();
        let mut t = PipeTable::new();
        let (a, _pa) = connect(&mut p, &mut t, 0);
        let (_b, mut pb) = connect(&mut p, &mut t, 0);
        p.send(frame(b"1", true), &mut t).unwrap();
        detach(&mut p, &mut t, a);
        p.send(frame(b"2", true), &mut t).unwrap();
        p.send(frame(b"3", false), &mut t).unwrap();
        assert!(pb.recv().is_none());
        send(&mut p, &mut t, &[b"next"]).unwrap();
        assert_eq!(pb.recv_all(), vec![parts(&[b"next"])]);
    }
}

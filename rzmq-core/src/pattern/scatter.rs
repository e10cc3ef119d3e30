//! SCATTER: load-balances single-part messages to GATHERs (libzmq `scatter_t`); a thread-safe
//! PUSH. It receives nothing (`ENOTSUP`).

use super::lb::Lb;
use super::single::check_single;
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The SCATTER pattern.
#[derive(Default)]
pub(crate) struct Scatter {
    lb: Lb,
}

impl Scatter {
    /// A SCATTER with no peers.
    pub(crate) fn new() -> Scatter {
        Scatter::default()
    }
}

impl Pattern for Scatter {
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

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.lb.send(check_single(msg)?, pipes).map(|_| ())
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

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn fans_out_single_parts_and_skips_full_pipes() {
        let mut s = Scatter::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 1);
        let (_b, mut pb) = connect(&mut s, &mut t, 0);
        for m in [b"1", b"2", b"3"] {
            send(&mut s, &mut t, &[m]).unwrap();
        }
        // a holds one; the rest go to b.
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"2"]), parts(&[b"3"])]);
        assert_err(send(&mut s, &mut t, &[b"x", b"y"]), Error::Inval);
        assert_err(recv(&mut s, &mut t), Error::NotSup);
        assert!(!has_in(&mut s, &mut t));
    }
}

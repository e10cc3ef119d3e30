//! CHANNEL: exactly one peer, single-part messages (libzmq `channel_t`); a thread-safe PAIR.
//!
//! Further pipes are refused as PAIR refuses them ([`PipeTable::kill`]); a frame with MORE is
//! `EINVAL`, multipart messages from the peer are dropped.

use super::pair::Pair;
use super::single::{check_single, SingleFq};
use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The CHANNEL pattern.
#[derive(Default)]
pub(crate) struct Channel {
    pair: Pair,
    single: SingleFq,
}

impl Channel {
    /// A CHANNEL with no peer.
    pub(crate) fn new() -> Channel {
        Channel::default()
    }
}

impl Pattern for Channel {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.pair.attach(id, pipes);
    }

    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.single.terminated(id);
        self.pair.terminated(id, pipes);
    }

    fn read_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.pair.send(check_single(msg)?, pipes)
    }

    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        let id = self.pair.pipe().ok_or(Error::Again)?;
        self.single.recv_from(id, pipes)
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.pair.has_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.pair.has_out(pipes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn one_peer_single_part() {
        let mut c = Channel::new();
        let mut t = PipeTable::new();
        assert_err(send(&mut c, &mut t, &[b"x"]), Error::Again);
        assert_err(recv(&mut c, &mut t), Error::Again);
        let (_a, mut pa) = connect(&mut c, &mut t, 0);
        let (b, _pb) = connect(&mut c, &mut t, 0);
        assert_eq!(t.take_kills(), vec![b]);
        send(&mut c, &mut t, &[b"hi"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"hi"])]);
        assert_err(send(&mut c, &mut t, &[b"a", b"b"]), Error::Inval);
        pa.send(&[b"m", b"p"]);
        pa.send(&[b"back"]);
        assert_eq!(recv(&mut c, &mut t), Ok(parts(&[b"back"])));
        assert_err(recv(&mut c, &mut t), Error::Again);
    }
}

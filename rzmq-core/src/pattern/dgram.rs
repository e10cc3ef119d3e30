//! DGRAM: raw UDP datagrams (libzmq 4.3.5 `dgram_t`, draft).
//!
//! A message is exactly two frames both ways: the peer's address `"a.b.c.d:port"` (with MORE)
//! and the body. Sending a first frame without MORE, or a second with it, is `EINVAL`. The
//! socket binds one `udp://` endpoint (its only pipe: a further one is refused); with none,
//! `send` waits (`EAGAIN`). The UDP endpoint resolves the address of each message and drops
//! one it cannot parse (see `session::udp`).

use super::{Pattern, PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The DGRAM pattern.
#[derive(Default)]
pub(crate) struct Dgram {
    pipe: Option<PipeId>,
    /// The address frame went out: the body is next.
    more_out: bool,
}

impl Dgram {
    /// A DGRAM with no endpoint.
    pub(crate) fn new() -> Dgram {
        Dgram::default()
    }
}

impl Pattern for Dgram {
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
            self.more_out = false;
        }
    }

    fn read_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn write_activated(&mut self, _id: PipeId, _pipes: &mut PipeTable) {}

    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        let Some(w) = self.pipe.and_then(|p| pipes.writer(p)) else {
            return Err((msg, Error::Again));
        };
        // Address then body: exactly two frames.
        if msg.more() == self.more_out {
            return Err((msg, Error::Inval));
        }
        let more = msg.more();
        w.try_write(msg).map_err(|(m, _)| (m, Error::Again))?;
        self.more_out = more;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn two_frames_each_way_one_pipe() {
        let mut p = Dgram::new();
        let mut t = PipeTable::new();
        assert_err(send(&mut p, &mut t, &[b"127.0.0.1:5", b"x"]), Error::Again);
        let (_a, mut pa) = connect(&mut p, &mut t, 0);
        let (b, _pb) = connect(&mut p, &mut t, 0);
        assert_eq!(t.take_kills(), vec![b]);
        detach(&mut p, &mut t, b);
        // A lone body, or a third frame, is EINVAL.
        assert_err(send(&mut p, &mut t, &[b"body"]), Error::Inval);
        assert_err(send(&mut p, &mut t, &[b"a", b"b", b"c"]), Error::Inval);
        // Its first frame went out and the second was refused: a body completes it.
        p.send(frame(b"c", false), &mut t).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"a", b"c"])]);
        send(&mut p, &mut t, &[b"127.0.0.1:5", b"x"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"127.0.0.1:5", b"x"])]);
        pa.send(&[b"127.0.0.1:6\0", b"in"]);
        assert_eq!(
            recv(&mut p, &mut t).unwrap(),
            parts(&[b"127.0.0.1:6\0", b"in"])
        );
        assert_err(recv(&mut p, &mut t), Error::Again);
    }
}

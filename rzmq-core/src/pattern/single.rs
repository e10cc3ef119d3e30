//! The single-part rule of libzmq's thread-safe socket types (CLIENT, SERVER, SCATTER, GATHER,
//! PEER, CHANNEL): a frame sent with MORE is refused with `EINVAL`, and a multipart message
//! received from a peer (an older or foreign socket type) is dropped whole, as libzmq's `xrecv`
//! loops do.

use super::fq::Fq;
use super::{PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// Refuses a frame with MORE ([`Error::Inval`], the frame handed back).
#[inline]
pub(crate) fn check_single(msg: Msg) -> std::result::Result<Msg, (Msg, Error)> {
    if msg.more() {
        Err((msg, Error::Inval))
    } else {
        Ok(msg)
    }
}

/// A fair queue that yields single-part messages only.
#[derive(Default)]
pub(crate) struct SingleFq {
    pub(crate) fq: Fq,
    /// The pipe whose multipart message is being dropped (its last frame not read yet).
    dropping: Option<PipeId>,
}

impl SingleFq {
    /// Reads the next single-part message and its pipe, dropping multipart ones; or `Again`.
    #[inline]
    pub(crate) fn recv(&mut self, table: &mut PipeTable) -> Result<(Msg, PipeId)> {
        loop {
            let (m, id) = self.fq.recv(table)?;
            if self.dropping.is_none() && !m.more() {
                return Ok((m, id));
            }
            // A frame of a multipart message: drop it, and the rest up to its last frame.
            self.dropping = m.more().then_some(id);
        }
    }

    /// Reads the next single-part message from a lone pipe (CHANNEL), dropping multipart ones.
    pub(crate) fn recv_from(&mut self, id: PipeId, table: &mut PipeTable) -> Result<Msg> {
        let reader = table.reader(id).ok_or(Error::Again)?;
        loop {
            let m = reader.read().ok_or(Error::Again)?;
            if self.dropping.is_none() && !m.more() {
                return Ok(m);
            }
            self.dropping = m.more().then_some(id);
        }
    }

    /// Forgets a pipe; a multipart message cut by its end is not waited for.
    pub(crate) fn terminated(&mut self, id: PipeId) {
        self.fq.terminated(id);
        if self.dropping == Some(id) {
            self.dropping = None;
        }
    }
}

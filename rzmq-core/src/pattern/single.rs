//! The single-part rule of libzmq's thread-safe socket types (CLIENT, SERVER, SCATTER, GATHER,
//! PEER, CHANNEL): a frame sent with MORE is refused with `EINVAL`, and a multipart message
//! received from a peer (an older or foreign socket type) is dropped whole, as libzmq's `xrecv`
//! loops do.
//!
//! [`SinglePart`] puts a whole base pattern under the rule: SCATTER is `SinglePart<Push>`,
//! GATHER `SinglePart<Pull>`, CLIENT `SinglePart<Dealer>`, CHANNEL `SinglePart<Pair>` (each
//! keeps a file of its own, an alias with its tests). SERVER routes by its own ids and takes
//! only [`SingleFq`].

use super::fq::Fq;
use super::{Pattern, PipeId, PipeTable};
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

/// Drops multipart messages whole, frame by frame as they are read.
#[derive(Default)]
struct DropMultipart {
    /// The pipe whose multipart message is being dropped (its last frame not read yet): known
    /// by pipe, so that a pipe ending mid-message does not leave the rule waiting for the rest.
    dropping: Option<PipeId>,
}

impl DropMultipart {
    /// Whether frame `m`, read from pipe `id`, is a whole single-part message; a frame of a
    /// multipart message is dropped, and the rest of that message after it.
    #[inline]
    fn keep(&mut self, m: &Msg, id: PipeId) -> bool {
        if self.dropping.is_none() && !m.more() {
            return true;
        }
        self.dropping = m.more().then_some(id);
        false
    }

    /// A multipart message cut by its pipe's end is not waited for.
    fn terminated(&mut self, id: PipeId) {
        if self.dropping == Some(id) {
            self.dropping = None;
        }
    }
}

/// A fair queue that yields single-part messages only (SERVER, PEER).
#[derive(Default)]
pub(crate) struct SingleFq {
    pub(crate) fq: Fq,
    rule: DropMultipart,
}

impl SingleFq {
    /// Reads the next single-part message and its pipe, dropping multipart ones; or `Again`.
    #[inline]
    pub(crate) fn recv(&mut self, table: &mut PipeTable) -> Result<(Msg, PipeId)> {
        loop {
            let (m, id) = self.fq.recv(table)?;
            if self.rule.keep(&m, id) {
                return Ok((m, id));
            }
        }
    }

    /// Forgets a pipe; a multipart message cut by its end is not waited for.
    pub(crate) fn terminated(&mut self, id: PipeId) {
        self.fq.terminated(id);
        self.rule.terminated(id);
    }
}

/// A pattern whose receives say which pipe each frame came from (what the rule needs to drop a
/// message by its pipe).
pub(crate) trait RecvPipe: Pattern {
    /// Receives one frame and the pipe it came from, or the error [`Pattern::recv`] gives.
    fn recv_pipe(&mut self, pipes: &mut PipeTable) -> Result<(Msg, PipeId)>;
}

/// Pattern `P` under the single-part rule: its routing, its peers and its options unchanged.
#[derive(Default)]
pub(crate) struct SinglePart<P> {
    base: P,
    rule: DropMultipart,
}

impl<P: Default> SinglePart<P> {
    /// `P` with no peers, under the rule.
    pub(crate) fn new() -> SinglePart<P> {
        SinglePart::default()
    }
}

impl<P: RecvPipe> Pattern for SinglePart<P> {
    fn attach(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.base.attach(id, pipes);
    }

    fn peer_ready(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.base.peer_ready(id, pipes);
    }

    fn terminated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.rule.terminated(id);
        self.base.terminated(id, pipes);
    }

    fn read_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.base.read_activated(id, pipes);
    }

    fn write_activated(&mut self, id: PipeId, pipes: &mut PipeTable) {
        self.base.write_activated(id, pipes);
    }

    #[inline]
    fn send(&mut self, msg: Msg, pipes: &mut PipeTable) -> std::result::Result<(), (Msg, Error)> {
        self.base.send(check_single(msg)?, pipes)
    }

    #[inline]
    fn recv(&mut self, pipes: &mut PipeTable) -> Result<Msg> {
        loop {
            let (m, id) = self.base.recv_pipe(pipes)?;
            if self.rule.keep(&m, id) {
                return Ok(m);
            }
        }
    }

    fn has_in(&mut self, pipes: &mut PipeTable) -> bool {
        self.base.has_in(pipes)
    }

    fn has_out(&mut self, pipes: &mut PipeTable) -> bool {
        self.base.has_out(pipes)
    }

    fn set_option(&mut self, opt: i32, value: &[u8], pipes: &mut PipeTable) -> Result<()> {
        self.base.set_option(opt, value, pipes)
    }
}

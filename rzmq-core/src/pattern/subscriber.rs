//! The skeleton SUB/XSUB and DISH share: input fair-queued from every pipe; subscriptions
//! (topics, groups) going upstream to every pipe, written to each new pipe and again when a
//! pipe's peer reconnects (libzmq's hiccup); one message read ahead by `has_in` for the next
//! `recv`. What is subscribed, what matches and what a subscription looks like on the pipe are
//! the patterns' own ([`super::sub`], [`super::dish`]).

use super::dist::Dist;
use super::fq::Fq;
use super::{IdMap, PipeId, PipeTable};
use crate::error::Result;
use crate::msg::Msg;

/// The shared part of a subscribing pattern.
#[derive(Default)]
pub(crate) struct Subscriber {
    fq: Fq,
    /// Towards the publishers: subscriptions, and what XSUB sends.
    dist: Dist,
    /// Pipes whose peer completed its first handshake (later ones are reconnects).
    handshaken: IdMap<()>,
    /// A message `has_in` read ahead.
    ahead: Option<Msg>,
}

impl Subscriber {
    /// No pipes, nothing read ahead.
    pub(crate) fn new() -> Subscriber {
        Subscriber::default()
    }

    /// A pipe joined, both ways (the pattern then writes it every subscription).
    pub(crate) fn attach(&mut self, id: PipeId) {
        self.fq.attach(id);
        self.dist.attach(id);
    }

    /// A handshake on `id` completed: true when it is a reconnect, whose pipe needs every
    /// subscription again; the first one delivers what `attach` queued.
    pub(crate) fn reconnected(&mut self, id: PipeId) -> bool {
        self.handshaken.insert(id, ()).is_some()
    }

    /// The pipe is gone.
    pub(crate) fn terminated(&mut self, id: PipeId) {
        self.handshaken.remove(&id);
        self.fq.terminated(id);
        self.dist.terminated(id);
    }

    /// Messages may be readable on `id` again.
    pub(crate) fn read_activated(&mut self, id: PipeId) {
        self.fq.activated(id);
    }

    /// `id` has room again.
    pub(crate) fn write_activated(&mut self, id: PipeId) {
        self.dist.activated(id);
    }

    /// Sends `msg` to every pipe that has room (a full pipe misses it, as in libzmq).
    pub(crate) fn send_upstream(&mut self, msg: Msg, pipes: &mut PipeTable) {
        self.dist.send_to_all(msg, pipes);
    }

    /// The message read ahead, else the next one `next` finds in the fair queue.
    #[inline]
    pub(crate) fn recv(
        &mut self,
        pipes: &mut PipeTable,
        next: impl FnOnce(&mut Fq, &mut PipeTable) -> Result<Msg>,
    ) -> Result<Msg> {
        match self.ahead.take() {
            Some(m) => Ok(m),
            None => next(&mut self.fq, pipes),
        }
    }

    /// Whether a message is there: the one read ahead, or the next one `next` finds, which is
    /// then kept for [`Subscriber::recv`].
    pub(crate) fn has_in(
        &mut self,
        pipes: &mut PipeTable,
        next: impl FnOnce(&mut Fq, &mut PipeTable) -> Result<Msg>,
    ) -> bool {
        if self.ahead.is_some() {
            return true;
        }
        match next(&mut self.fq, pipes) {
            Ok(m) => {
                self.ahead = Some(m);
                true
            }
            Err(_) => false,
        }
    }
}

//! Fair queue: round-robin of incoming messages over the pipes that have some (libzmq `fq_t`).
//!
//! Positions `0..active` of the `PipeArray` may have messages; a pipe whose `read` returns
//! `None` (which registers it for an activation) moves out of that range until `read_activated`.
//! All frames of a multipart message come from the same pipe; after a whole message the next
//! active pipe gets its turn.

use super::array::PipeArray;
use super::{PipeId, PipeTable};
use crate::error::{Error, Result};
use crate::msg::Msg;

/// The fair-queueing half of PULL, DEALER, ROUTER, REQ, REP, SUB, XSUB and STREAM.
#[derive(Default)]
pub(crate) struct Fq {
    pipes: PipeArray,
    active: usize,
    current: usize,
    more: bool,
}

impl Fq {
    /// An empty fair queue.
    pub(crate) fn new() -> Fq {
        Fq::default()
    }

    /// Adds a pipe, active.
    pub(crate) fn attach(&mut self, id: PipeId) {
        if self.pipes.index(id).is_some() {
            self.activated(id);
            return;
        }
        let i = self.pipes.push(id);
        self.pipes.swap(self.active, i);
        self.active += 1;
    }

    /// Forgets a pipe.
    pub(crate) fn terminated(&mut self, id: PipeId) {
        let Some(index) = self.pipes.index(id) else {
            return;
        };
        if index < self.active {
            if index == self.current {
                // Only a forced termination can cut a message: never wait for its rest.
                self.more = false;
            }
            self.active -= 1;
            self.pipes.swap(index, self.active);
            if self.current == self.active {
                self.current = 0;
            }
        }
        self.pipes.erase(id);
    }

    /// Messages may be readable on the pipe again (idempotent).
    pub(crate) fn activated(&mut self, id: PipeId) {
        let Some(index) = self.pipes.index(id) else {
            return;
        };
        if index >= self.active {
            self.pipes.swap(index, self.active);
            self.active += 1;
        }
    }

    /// Reads the next frame and the pipe it came from, or `Again`.
    #[inline]
    pub(crate) fn recv(&mut self, table: &mut PipeTable) -> Result<(Msg, PipeId)> {
        while self.active > 0 {
            let id = self.pipes.get(self.current);
            if let Some(m) = table.reader(id).and_then(|r| r.read()) {
                self.more = m.more();
                if !self.more {
                    // Next pipe, round robin (no division on the per-message path).
                    self.current += 1;
                    if self.current >= self.active {
                        self.current = 0;
                    }
                }
                return Ok((m, id));
            }
            // Frames of one message arrive together, so this only happens between messages.
            self.more = false;
            self.active -= 1;
            self.pipes.swap(self.current, self.active);
            if self.current == self.active {
                self.current = 0;
            }
        }
        Err(Error::Again)
    }

    /// Whether a frame can be read now; deactivates (and registers) pipes found empty.
    pub(crate) fn has_in(&mut self, table: &mut PipeTable) -> bool {
        if self.more {
            return true;
        }
        while self.active > 0 {
            let id = self.pipes.get(self.current);
            if table.reader(id).is_some_and(|r| r.has_msg()) {
                return true;
            }
            self.active -= 1;
            self.pipes.swap(self.current, self.active);
            if self.current == self.active {
                self.current = 0;
            }
        }
        false
    }
}

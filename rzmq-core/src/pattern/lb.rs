//! Load balancer: round-robin of outgoing messages over the pipes that have room (libzmq `lb_t`).
//!
//! Pipes live in one `PipeArray`: positions `0..active` can take a message, the rest wait for a
//! write activation. A multipart message stays on the pipe its first frame went to. A pipe that
//! reports `Full` or `Closed` is moved out of the active range; `write_activated` moves it back.
//! If the pipe carrying a half-sent multipart message goes away, the rest of that message is
//! dropped, never delivered elsewhere.

use super::array::PipeArray;
use super::{PipeId, PipeTable};
use crate::error::Error;
use crate::msg::Msg;

/// The load-balancing half of PUSH, DEALER and REQ.
#[derive(Default)]
pub(crate) struct Lb {
    pipes: PipeArray,
    active: usize,
    current: usize,
    more: bool,
    dropping: bool,
}

impl Lb {
    /// Adds a pipe, active.
    pub(crate) fn attach(&mut self, id: PipeId) {
        self.pipes.push(id);
        self.activated(id);
    }

    /// Forgets a pipe; a multipart message half-sent to it is dropped.
    pub(crate) fn terminated(&mut self, id: PipeId) {
        let Some(index) = self.pipes.index(id) else {
            return;
        };
        if index == self.current && self.more {
            self.dropping = true;
        }
        if index < self.active {
            self.active -= 1;
            self.pipes.swap(index, self.active);
            if self.current == self.active {
                self.current = 0;
            }
        }
        self.pipes.erase(id);
    }

    /// The pipe has room again (idempotent).
    pub(crate) fn activated(&mut self, id: PipeId) {
        let Some(index) = self.pipes.index(id) else {
            return;
        };
        if index >= self.active {
            self.pipes.swap(index, self.active);
            self.active += 1;
        }
    }

    /// Sends one frame; returns the pipe it went to (`None` when dropped, as the rest of a message
    /// whose pipe went away). `Again` hands the frame back when no pipe has room.
    pub(crate) fn send(
        &mut self,
        msg: Msg,
        table: &mut PipeTable,
    ) -> Result<Option<PipeId>, (Msg, Error)> {
        if self.dropping {
            self.more = msg.more();
            self.dropping = self.more;
            return Ok(None);
        }
        while self.active > 0 {
            let id = self.pipes.get(self.current);
            if let Some(w) = table.writer(id) {
                if w.check_write().is_ok() {
                    self.more = msg.more();
                    w.write(msg);
                    if !self.more {
                        self.current += 1;
                        if self.current >= self.active {
                            self.current = 0;
                        }
                    }
                    return Ok(Some(id));
                }
                if self.more {
                    // The pipe died under a multipart message: its first frames are lost, so this
                    // frame and the rest of the message are dropped (libzmq's -2 return, which a
                    // blocking send reports as success).
                    w.rollback();
                    self.dropping = msg.more();
                    self.more = false;
                    return Ok(None);
                }
            } else if self.more {
                self.dropping = msg.more();
                self.more = false;
                return Ok(None);
            }
            self.active -= 1;
            if self.current < self.active {
                self.pipes.swap(self.current, self.active);
            } else {
                self.current = 0;
            }
        }
        Err((msg, Error::Again))
    }

    /// Whether a frame could be sent now; deactivates pipes found full.
    pub(crate) fn has_out(&mut self, table: &mut PipeTable) -> bool {
        if self.more {
            return true;
        }
        while self.active > 0 {
            let id = self.pipes.get(self.current);
            if table.writer(id).is_some_and(|w| w.check_write().is_ok()) {
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

//! Distributor: fan-out of each message to a set of pipes (libzmq `dist_t`), for PUB/XPUB and for
//! the subscriptions SUB/XSUB send upstream.
//!
//! The `PipeArray` is split into ranges: `0..matching` get the current message, `..active` may
//! get messages, `..eligible` have room but joined in the middle of a multipart message (they get
//! the next whole message), and the rest are full until `write_activated`. A pipe that cannot
//! take the first frame of a message gets none of it (the message is dropped for that pipe), so
//! no subscriber ever sees a fragment.

use super::array::PipeArray;
use super::{PipeId, PipeTable};
use crate::msg::Msg;
use crate::pipe::WriteError;

/// Fan-out to matching pipes with per-pipe drop on HWM.
#[derive(Default)]
pub(crate) struct Dist {
    pipes: PipeArray,
    matching: usize,
    active: usize,
    eligible: usize,
    more: bool,
}

impl Dist {
    /// An empty distributor.
    pub(crate) fn new() -> Dist {
        Dist::default()
    }

    /// Adds a pipe: active, or eligible only when a multipart message is being sent.
    pub(crate) fn attach(&mut self, id: PipeId) {
        if self.pipes.index(id).is_some() {
            self.activated(id);
            return;
        }
        let i = self.pipes.push(id);
        if self.more {
            self.pipes.swap(self.eligible, i);
            self.eligible += 1;
        } else {
            self.pipes.swap(self.active, i);
            self.active += 1;
            self.eligible += 1;
        }
    }

    /// True when the pipe is attached.
    pub(crate) fn has_pipe(&self, id: PipeId) -> bool {
        self.pipes.index(id).is_some()
    }

    /// Marks an eligible pipe as matching the current message.
    pub(crate) fn match_pipe(&mut self, id: PipeId) {
        let Some(i) = self.pipes.index(id) else {
            return;
        };
        if i < self.matching || i >= self.eligible {
            return;
        }
        self.pipes.swap(i, self.matching);
        self.matching += 1;
    }

    /// Makes the eligible pipes that do not match the matching ones, and vice versa.
    pub(crate) fn reverse_match(&mut self) {
        let prev = self.matching;
        self.matching = 0;
        for i in prev..self.eligible {
            self.pipes.swap(i, self.matching);
            self.matching += 1;
        }
    }

    /// Marks all pipes as not matching.
    pub(crate) fn unmatch(&mut self) {
        self.matching = 0;
    }

    /// Forgets a pipe.
    pub(crate) fn terminated(&mut self, id: PipeId) {
        let Some(mut i) = self.pipes.index(id) else {
            return;
        };
        if i < self.matching {
            self.pipes.swap(i, self.matching - 1);
            self.matching -= 1;
            i = self.matching;
        }
        if i < self.active {
            self.pipes.swap(i, self.active - 1);
            self.active -= 1;
            i = self.active;
        }
        if i < self.eligible {
            self.pipes.swap(i, self.eligible - 1);
            self.eligible -= 1;
        }
        self.pipes.erase(id);
    }

    /// The pipe has room again (idempotent).
    pub(crate) fn activated(&mut self, id: PipeId) {
        let Some(mut i) = self.pipes.index(id) else {
            return;
        };
        if i >= self.eligible {
            self.pipes.swap(i, self.eligible);
            i = self.eligible;
            self.eligible += 1;
        }
        if !self.more && i >= self.active {
            self.pipes.swap(i, self.active);
            self.active += 1;
        }
    }

    /// Sends a frame to every active pipe.
    pub(crate) fn send_to_all(&mut self, msg: Msg, table: &mut PipeTable) {
        self.matching = self.active;
        self.send_to_matching(msg, table);
    }

    /// Sends a frame to the matching pipes; pipes without room drop it and are deactivated.
    pub(crate) fn send_to_matching(&mut self, msg: Msg, table: &mut PipeTable) {
        let more = msg.more();
        self.distribute(msg, table);
        if !more {
            self.active = self.eligible;
        }
        self.more = more;
    }

    fn distribute(&mut self, msg: Msg, table: &mut PipeTable) {
        let mut msg = Some(msg);
        let mut i = 0;
        while i < self.matching {
            let id = self.pipes.get(i);
            let last = i + 1 == self.matching;
            let written = match table.writer(id) {
                Some(w) => {
                    let ok = w.check_write().is_ok();
                    if ok {
                        if let Some(m) = if last { msg.take() } else { msg.clone() } {
                            w.write(m);
                        }
                    }
                    ok
                }
                None => false,
            };
            if written {
                i += 1;
            } else {
                self.deactivate(id);
            }
        }
    }

    fn deactivate(&mut self, id: PipeId) {
        let Some(i) = self.pipes.index(id) else {
            return;
        };
        self.pipes.swap(i, self.matching - 1);
        self.matching -= 1;
        let i = self.matching;
        self.pipes.swap(i, self.active - 1);
        self.active -= 1;
        self.pipes.swap(self.active, self.eligible - 1);
        self.eligible -= 1;
    }

    /// False when a matching pipe is at its HWM (`ZMQ_XPUB_NODROP`); registers for activation.
    pub(crate) fn check_hwm(&mut self, table: &mut PipeTable) -> bool {
        for i in 0..self.matching {
            let id = self.pipes.get(i);
            if let Some(w) = table.writer(id) {
                if w.check_write() == Err(WriteError::Full) {
                    return false;
                }
            }
        }
        true
    }
}

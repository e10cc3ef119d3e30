//! A switched connection's messages over its alternative path: frames from the socket's pipe
//! to the path, frames from the path to the socket, and the path's completions and arming.

use super::{Closed, Engine, Progress};
use crate::alt::AltError;
use crate::msg::Msg;
use crate::zmtp;

/// Frames moved per call on an alternative path before yielding to other connections.
const ALT_BUDGET: usize = 8192;

impl Engine {
    /// Moves frames from `next` to the alternative path until it pushes back or the budget is
    /// spent (then `read_pending` asks for another turn).
    pub(super) fn alt_out(&mut self, next: &mut dyn FnMut() -> Option<Msg>) -> Option<Progress> {
        let u = self.upgrade.as_deref_mut()?;
        if !u.out_switched {
            return None;
        }
        let path = u.path.as_mut()?;
        let mut sent = 0usize;
        let mut pending = u.held.take();
        loop {
            let m = match pending.take() {
                Some(m) => m,
                None => {
                    if sent >= ALT_BUDGET {
                        self.read_pending = true;
                        break;
                    }
                    match next() {
                        Some(m) => {
                            self.out_in_multipart = m.more();
                            m
                        }
                        None => break,
                    }
                }
            };
            match path.send(m) {
                Ok(None) => sent += 1,
                Ok(Some(back)) => {
                    u.held = Some(back);
                    break;
                }
                Err(e) => return Some(Progress::Closed(Closed::Alt(e))),
            }
        }
        if sent > 0 {
            if let Err(e) = path.flush() {
                return Some(Progress::Closed(Closed::Alt(e)));
            }
        }
        None
    }

    /// Delivers frames from the alternative path once input has switched to it.
    pub(super) fn alt_in(
        &mut self,
        deliver: &mut dyn FnMut(zmtp::Event) -> Option<Msg>,
    ) -> Option<Progress> {
        let u = self.upgrade.as_deref_mut()?;
        if !u.in_switched {
            if u.failed {
                return Some(Progress::Closed(Closed::Alt(AltError(
                    "the RDMA path failed during the switch".into(),
                ))));
            }
            return None;
        }
        let path = u.path.as_mut()?;
        for _ in 0..ALT_BUDGET {
            match path.recv() {
                Ok(Some(mut m)) => {
                    m.set_metadata(u.md.clone());
                    if let Some(back) = deliver(zmtp::Event::Message(m)) {
                        self.stalled = Some(back);
                        return None;
                    }
                }
                Ok(None) => return None,
                Err(e) => return Some(Progress::Closed(Closed::Alt(e))),
            }
        }
        self.read_pending = true;
        None
    }

    /// Runs the alternative path's completions; true when anything happened. A failure is
    /// recorded: frames that arrived before it are still delivered, then the connection closes.
    pub(crate) fn alt_process(&mut self) -> bool {
        let Some(u) = self.upgrade.as_deref_mut() else {
            return false;
        };
        let Some(p) = u.path.as_mut() else {
            return false;
        };
        match p.process() {
            Ok(b) => b,
            Err(_) => {
                u.failed = true;
                true
            }
        }
    }

    /// Arms the alternative path's notification and looks once more; true when that found work
    /// (then process again before sleeping).
    pub(crate) fn alt_arm(&mut self) -> bool {
        let Some(u) = self.upgrade.as_deref_mut() else {
            return false;
        };
        let Some(p) = u.path.as_mut() else {
            return false;
        };
        if p.arm().is_err() {
            u.failed = true;
            return true;
        }
        match p.process() {
            Ok(b) => b,
            Err(_) => {
                u.failed = true;
                true
            }
        }
    }
}

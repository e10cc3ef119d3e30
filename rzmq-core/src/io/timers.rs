//! An I/O thread's timers: a heap of (deadline, token) wake-ups. A session keeps its own typed
//! deadlines and asks for a wake-up here; a wake-up for a deadline since moved or stopped is
//! harmless (the session finds nothing due).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Wake-ups by deadline.
#[derive(Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl Timers {
    /// Wakes `token` at `at`.
    pub(super) fn schedule(&mut self, at: Instant, token: u64) {
        self.heap.push(Reverse((at, token)));
    }

    /// The earliest wake-up.
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Takes the earliest wake-up due at `now`, if any.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<u64> {
        match self.heap.peek() {
            Some(Reverse((t, token))) if *t <= now => {
                let token = *token;
                self.heap.pop();
                Some(token)
            }
            _ => None,
        }
    }
}

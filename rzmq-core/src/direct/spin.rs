//! Busy-polling before a direct receive sleeps: each socket's adaptive policy ([`Spin`]) over
//! its budget (the socket option `ZMQ_RZMQ_BUSY_POLL_US`).

use std::sync::atomic::{AtomicU64, Ordering};

static SPIN_HITS: AtomicU64 = AtomicU64::new(0);

/// Times in this process a blocking direct receive found input (or a command) while polling,
/// before it slept (for tests and diagnostics).
pub fn spin_stats() -> u64 {
    SPIN_HITS.load(Ordering::Relaxed)
}

/// Polls in a row that found nothing before a socket stops polling.
const SPIN_MISSES: u8 = 4;

/// One socket's adaptive busy-polling: it polls before sleeping while polling finds input, stops
/// after `SPIN_MISSES` (4) polls in a row that found none (sparse traffic: the budget would only
/// burn CPU), and starts again when a receive that slept was answered within the budget (a
/// poll would have caught it).
#[derive(Debug, Clone)]
pub(crate) struct Spin {
    credit: u8,
}

impl Default for Spin {
    fn default() -> Spin {
        Spin {
            credit: SPIN_MISSES,
        }
    }
}

impl Spin {
    /// Whether the next blocking receive should poll first.
    pub(crate) fn active(&self) -> bool {
        self.credit > 0
    }

    /// Polling found input (or a command).
    pub(crate) fn hit(&mut self) {
        SPIN_HITS.fetch_add(1, Ordering::Relaxed);
        self.credit = SPIN_MISSES;
    }

    /// Polling ended (its budget or the receive's deadline ran out) and found nothing.
    pub(crate) fn miss(&mut self) {
        self.credit = self.credit.saturating_sub(1);
    }

    /// A receive slept `waited` before input came; `budget` is the polling budget.
    pub(crate) fn slept(&mut self, waited: std::time::Duration, budget: std::time::Duration) {
        if waited <= budget {
            self.credit = SPIN_MISSES;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_stops_on_misses_and_resumes_after_a_quick_wake() {
        let budget = std::time::Duration::from_micros(30);
        let mut s = Spin::default();
        assert!(s.active());
        for _ in 0..SPIN_MISSES - 1 {
            s.miss();
            assert!(s.active());
        }
        s.miss();
        assert!(!s.active(), "sparse traffic: polling stops");
        // A long sleep does not bring it back; a wait the budget would have covered does.
        s.slept(std::time::Duration::from_millis(5), budget);
        assert!(!s.active());
        s.slept(std::time::Duration::from_micros(12), budget);
        assert!(s.active());
        // A hit restores the whole credit.
        s.miss();
        s.miss();
        s.hit();
        for _ in 0..SPIN_MISSES - 1 {
            s.miss();
        }
        assert!(s.active());
    }
}

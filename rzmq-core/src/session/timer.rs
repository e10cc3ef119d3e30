//! A session's typed timers: one deadline per kind, in a small table indexed by the kind
//! (`set`/`stop`/`is_set`/`is_expired`). The I/O thread's heap only wakes the session; the
//! table says which deadline a wake-up is for. Two kinds are recorded here but decided by
//! their owners, as before: `Protocol` (the ZMTP connection's own deadlines, run at every
//! wake-up) and `Linger` (the pipe's linger deadline, read from the pipe).

use std::time::Instant;

/// The kinds of deadline a session keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The next connect attempt (`ZMQ_RECONNECT_IVL`, doubling to `ZMQ_RECONNECT_IVL_MAX`).
    Reconnect,
    /// The connect attempt under way gives up (`ZMQ_CONNECT_TIMEOUT`).
    ConnectTimeout,
    /// The protocol's next deadline: handshake timeout, heartbeat PING, TTL or PONG timeout.
    Protocol,
    /// The socket closed: its queued messages are dropped at `ZMQ_LINGER`.
    Linger,
    /// A reader holding the connection's input is checked on (see
    /// [`crate::direct::DirectRx::steal_if_stale`]).
    HeldStale,
}

impl Timer {
    /// Every kind, in table order.
    pub(crate) const ALL: [Timer; 5] = [
        Timer::Reconnect,
        Timer::ConnectTimeout,
        Timer::Protocol,
        Timer::Linger,
        Timer::HeldStale,
    ];
}

/// A deadline per timer kind.
#[derive(Debug, Default, Clone)]
pub(crate) struct TimerTable {
    data: [Option<Instant>; Timer::ALL.len()],
}

impl TimerTable {
    /// Sets `timer` to expire at `at` (replacing an earlier setting).
    #[inline]
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.data[timer as usize] = Some(at);
    }

    /// Stops `timer`.
    #[inline]
    pub(crate) fn stop(&mut self, timer: Timer) {
        self.data[timer as usize] = None;
    }

    /// Whether `timer` is set.
    #[inline]
    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.data[timer as usize].is_some()
    }

    /// Whether `timer` is set and due at `now`.
    #[inline]
    pub(crate) fn is_expired(&self, timer: Timer, now: Instant) -> bool {
        self.data[timer as usize].is_some_and(|t| t <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn set_stop_and_expire() {
        let now = Instant::now();
        let mut t = TimerTable::default();
        assert!(Timer::ALL.iter().all(|&k| !t.is_set(k)));
        t.set(Timer::Linger, now + Duration::from_millis(5));
        t.set(Timer::Reconnect, now + Duration::from_millis(2));
        assert!(!t.is_expired(Timer::Reconnect, now));
        assert!(t.is_expired(Timer::Reconnect, now + Duration::from_millis(2)));
        assert!(!t.is_expired(Timer::Protocol, now + Duration::from_secs(1)));
        t.stop(Timer::Reconnect);
        assert!(!t.is_set(Timer::Reconnect));
        assert!(t.is_set(Timer::Linger));
        assert!(!t.is_expired(Timer::Linger, now));
    }
}

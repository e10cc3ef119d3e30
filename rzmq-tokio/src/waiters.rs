//! The tasks waiting on one socket: a slot per direction (receive, send), and the fan-out waker
//! the reactor holds, which wakes both.
//!
//! Tokio keeps one waker per fd and direction, and both of an [`crate::AsyncSocket`]'s
//! directions wait for the fd to turn readable (a Stream and a Sink split into two tasks wait at
//! once). So the reactor gets one waker of its own, [`Waiters`] as a [`Wake`], and each task
//! parks its waker here. The protocol that loses no wake-up: a task stores its waker *before* it
//! asks the reactor for readiness, and the reactor's wake takes every stored waker; a task that
//! sees the other direction ready hands that task its wake-up ([`Waiters::wake_dir`]).
//!
//! This module owns the slots only; `loom_tests` model them under `--cfg loom`
//! (`scripts/loom.sh`), and Miri runs their unit tests (`scripts/miri.sh`).

use std::sync::Arc;
use std::task::{Wake, Waker};

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// A direction a task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// A message to receive (`POLLIN`).
    Recv = 0,
    /// Room to send (`POLLOUT`).
    Send = 1,
}

impl Dir {
    /// The other direction.
    pub(crate) fn other(self) -> Dir {
        match self {
            Dir::Recv => Dir::Send,
            Dir::Send => Dir::Recv,
        }
    }
}

/// The tasks waiting, one slot per [`Dir`]; woken together by the reactor.
#[derive(Default)]
pub(crate) struct Waiters {
    slots: Mutex<[Option<Waker>; 2]>,
}

impl Waiters {
    fn slots(&self) -> MutexGuard<'_, [Option<Waker>; 2]> {
        // A waker's wake runs outside the lock, so nothing can leave the slots half-written:
        // recover from poisoning.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parks `w` for `dir` (keeping the stored waker when it wakes the same task).
    pub(crate) fn set(&self, dir: Dir, w: &Waker) {
        let mut s = self.slots();
        match &s[dir as usize] {
            Some(old) if old.will_wake(w) => {}
            _ => s[dir as usize] = Some(w.clone()),
        }
    }

    /// Forgets the waker of `dir` (its task is done waiting).
    pub(crate) fn clear(&self, dir: Dir) {
        let old = self.slots()[dir as usize].take();
        // Dropped outside the lock: a waker's drop may run arbitrary code.
        drop(old);
    }

    /// Wakes the task waiting for `dir`, if any.
    pub(crate) fn wake_dir(&self, dir: Dir) {
        let w = self.slots()[dir as usize].take();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Wakes the task waiting for the direction other than `dir`, unless that is the caller
    /// (`me`): a task that ran its operation needs no wake-up of its own, and its stale waker
    /// is dropped with the slot.
    pub(crate) fn wake_other(&self, dir: Dir, me: &Waker) {
        let w = self.slots()[dir.other() as usize].take();
        if let Some(w) = w {
            if !w.will_wake(me) {
                w.wake();
            }
        }
    }

    /// Wakes every waiting task (the reactor saw the fd ready).
    pub(crate) fn wake_all(&self) {
        let [a, b] = std::mem::take(&mut *self.slots());
        for w in [a, b].into_iter().flatten() {
            w.wake();
        }
    }

    /// True while a task waits for `dir` (for tests).
    #[cfg(test)]
    pub(crate) fn is_set(&self, dir: Dir) -> bool {
        self.slots()[dir as usize].is_some()
    }
}

impl Wake for Waiters {
    fn wake(self: Arc<Self>) {
        self.wake_all();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_all();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count::default());
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn the_fanout_wakes_both_directions_once() {
        let w = Arc::new(Waiters::default());
        let fan = Waker::from(w.clone());
        let (rc, rw) = counted();
        let (sc, sw) = counted();
        w.set(Dir::Recv, &rw);
        w.set(Dir::Send, &sw);
        // The same task again: the stored waker stays.
        w.set(Dir::Recv, &rw);
        fan.wake_by_ref();
        assert_eq!(rc.0.load(Ordering::SeqCst), 1);
        assert_eq!(sc.0.load(Ordering::SeqCst), 1);
        // Taken by the wake: a second wake finds no one.
        fan.wake_by_ref();
        assert_eq!(rc.0.load(Ordering::SeqCst) + sc.0.load(Ordering::SeqCst), 2);
        assert!(!w.is_set(Dir::Recv) && !w.is_set(Dir::Send));
    }

    #[test]
    fn wake_dir_and_clear_touch_one_slot() {
        let w = Waiters::default();
        let (rc, rw) = counted();
        let (sc, sw) = counted();
        w.set(Dir::Recv, &rw);
        w.set(Dir::Send, &sw);
        w.wake_dir(Dir::Send.other());
        assert_eq!(rc.0.load(Ordering::SeqCst), 1);
        assert_eq!(sc.0.load(Ordering::SeqCst), 0);
        w.clear(Dir::Send);
        w.wake_all();
        assert_eq!(sc.0.load(Ordering::SeqCst), 0, "cleared before the wake");
        // A new task in a slot replaces the old one's waker.
        let (c2, w2) = counted();
        w.set(Dir::Recv, &rw);
        w.set(Dir::Recv, &w2);
        w.wake_dir(Dir::Recv);
        assert_eq!(
            (rc.0.load(Ordering::SeqCst), c2.0.load(Ordering::SeqCst)),
            (1, 1)
        );
    }

    #[test]
    fn wake_other_wakes_the_other_task_never_the_caller() {
        let w = Waiters::default();
        let (rc, rw) = counted();
        let (sc, sw) = counted();
        // A split socket: the receiving task waits while the sending task runs its operation.
        w.set(Dir::Recv, &rw);
        w.wake_other(Dir::Send, &sw);
        assert_eq!(rc.0.load(Ordering::SeqCst), 1);
        assert!(!w.is_set(Dir::Recv));
        // One task left its receive waker behind and now sends: no wake-up of itself, and the
        // stale waker is gone.
        w.set(Dir::Recv, &sw);
        w.wake_other(Dir::Send, &sw);
        // `Waker::will_wake` is best effort: where it cannot tell a clone for the same task
        // (Miri, whose vtables are not unique), the caller gets a spurious wake-up, no more.
        let self_wakes = if sw.clone().will_wake(&sw) { 0 } else { 1 };
        assert_eq!(sc.0.load(Ordering::SeqCst), self_wakes);
        assert!(!w.is_set(Dir::Recv));
    }

    /// Threads parking, clearing and waking at once (under Miri: no data race, no leak; in
    /// every run: each task that parked before a wake it did not see as readiness is woken).
    #[test]
    fn concurrent_parks_and_wakes_lose_no_task() {
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        for _ in 0..rounds {
            let w = Arc::new(Waiters::default());
            let fan = Waker::from(w.clone());
            let ready = Arc::new(AtomicBool::new(false));
            let tasks: Vec<_> = [Dir::Recv, Dir::Send]
                .into_iter()
                .map(|dir| {
                    let (w, ready) = (w.clone(), ready.clone());
                    std::thread::spawn(move || {
                        let (c, waker) = counted();
                        // Park, then look at the readiness (as poll_read_ready does).
                        w.set(dir, &waker);
                        let saw = ready.load(Ordering::SeqCst);
                        (c, saw)
                    })
                })
                .collect();
            ready.store(true, Ordering::SeqCst);
            fan.wake_by_ref();
            for t in tasks {
                let (c, saw) = t.join().unwrap();
                assert!(saw || c.0.load(Ordering::SeqCst) == 1, "a lost wake-up");
            }
        }
    }
}

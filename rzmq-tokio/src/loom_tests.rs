//! Model checks of the waiter slots under loom (`scripts/loom.sh`; built only with
//! `--cfg loom`): every interleaving of a reactor that turns the fd ready and fires the fan-out
//! waker, and tasks that park their wakers, look at the readiness, hand each other wake-ups and
//! clear their slots.
//!
//! What fails a model: a task that parked before the reactor's wake, missed the readiness and
//! was never woken (a lost wake-up: the task would sleep for ever).

use std::sync::Arc;
use std::task::{Wake, Waker};

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use crate::waiters::{Dir, Waiters};

/// A task's waker: counts its wakes.
#[derive(Default)]
struct Task {
    woken: AtomicUsize,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
    }
}

impl Task {
    fn woken(&self) -> bool {
        self.woken.load(Ordering::SeqCst) > 0
    }
}

/// A model with loom's default bounds; preemptions 3 unless `LOOM_MAX_PREEMPTIONS` says.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// A task's wait as `Readiness::poll_op` does it: park the waker, then ask for readiness.
/// Returns whether it saw the fd ready (it would go on; otherwise it returns `Pending`).
fn park_then_look(w: &Waiters, dir: Dir, task: &Arc<Task>, ready: &AtomicBool) -> bool {
    w.set(dir, &Waker::from(task.clone()));
    ready.load(Ordering::SeqCst)
}

/// A receiving task and a sending task (a Stream and a Sink split apart) wait while the
/// reactor turns the fd ready and fires the fan-out: each either saw the readiness or is woken.
#[test]
fn loom_fanout_wakes_both_split_tasks() {
    model(|| {
        let w = Arc::new(Waiters::default());
        let ready = Arc::new(AtomicBool::new(false));
        let fan = Waker::from(w.clone());
        let spawn = |dir| {
            let (w, ready) = (w.clone(), ready.clone());
            thread::spawn(move || {
                let task = Arc::new(Task::default());
                let saw = park_then_look(&w, dir, &task, &ready);
                (task, saw)
            })
        };
        let rx = spawn(Dir::Recv);
        let tx = spawn(Dir::Send);
        // The reactor: readiness first, then the waker it holds.
        ready.store(true, Ordering::SeqCst);
        fan.wake_by_ref();
        for t in [rx, tx] {
            let (task, saw) = t.join().unwrap();
            assert!(
                saw || task.woken(),
                "a task missed both readiness and its wake-up"
            );
        }
    });
}

/// The hand-off: a sending task that found POLLIN in the events wakes the receiving task
/// (`wake_dir`) while that task parks, and the receiving task's earlier completion cleared its
/// slot; a receiving task that parked before the hand-off and did not see the input is woken.
#[test]
fn loom_wake_dir_hands_the_wakeup_over() {
    model(|| {
        let w = Arc::new(Waiters::default());
        let input = Arc::new(AtomicBool::new(false));
        let (w2, input2) = (w.clone(), input.clone());
        let receiver = thread::spawn(move || {
            let task = Arc::new(Task::default());
            // A receive completed earlier: its slot is cleared.
            w2.clear(Dir::Recv);
            let saw = park_then_look(&w2, Dir::Recv, &task, &input2);
            (task, saw)
        });
        // The sender's events() saw the input arrive (POLLIN), then hands the wake-up over.
        input.store(true, Ordering::SeqCst);
        w.wake_dir(Dir::Recv);
        let (task, saw) = receiver.join().unwrap();
        assert!(
            saw || task.woken(),
            "the receiving task missed its hand-off"
        );
    });
}

/// A slot a task re-parks with the same waker keeps the stored one, and a wake that raced with
/// the re-park is not lost: the task sees readiness or is woken.
#[test]
fn loom_repark_keeps_the_wakeup() {
    model(|| {
        let w = Arc::new(Waiters::default());
        let ready = Arc::new(AtomicBool::new(false));
        let task = Arc::new(Task::default());
        w.set(Dir::Recv, &Waker::from(task.clone()));
        let (w2, ready2, task2) = (w.clone(), ready.clone(), task.clone());
        let t = thread::spawn(move || park_then_look(&w2, Dir::Recv, &task2, &ready2));
        ready.store(true, Ordering::SeqCst);
        w.wake_all();
        let saw = t.join().unwrap();
        assert!(saw || task.woken());
        assert!(
            task.woken.load(Ordering::SeqCst) <= 1,
            "woken once per wake"
        );
    });
}

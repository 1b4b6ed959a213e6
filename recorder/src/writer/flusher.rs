//! The flusher thread: flushes the store for the acks the writer hands it,
//! so appends go on while a flush is under way.

use std::sync::{Arc, Condvar, Mutex};

use reel::lock::wait;
use reel::store::Store;
use tokio::sync::oneshot;

use super::*;

/// An ack of a [`Msg::Flush`], with the run it asks for.
pub(super) type Ack = (Option<Arc<str>>, oneshot::Sender<Result<(), WriteError>>);

/// Answers each ack after a flush: its run's failure or the store's, if
/// any (see [`Msg::Flush`]).
pub(super) fn answer(failures: &Mutex<Failures>, acks: &mut Vec<Ack>) {
    let failures = lock(failures);
    for (run, ack) in acks.drain(..) {
        let _ = ack.send(failures.answer(run.as_deref()));
    }
}

/// The flusher thread's side (see the module docs): the acks of appended
/// facts, waiting for its next flush.
#[derive(Default)]
pub(super) struct Flusher {
    queue: Mutex<FlushQueue>,
    wake: Condvar,
}

#[derive(Default)]
struct FlushQueue {
    acks: Vec<Ack>,
    closing: bool,
}

impl Flusher {
    fn lock(&self) -> std::sync::MutexGuard<'_, FlushQueue> {
        reel::lock::lock(&self.queue)
    }

    /// Hands over the acks of facts already appended (emptying `acks`).
    pub(super) fn hand(&self, acks: &mut Vec<Ack>) {
        self.lock().acks.append(acks);
        self.wake.notify_one();
    }

    /// After what was handed over is answered, the flusher stops.
    pub(super) fn close(&self) {
        self.lock().closing = true;
        self.wake.notify_one();
    }

    /// The flusher thread: one flush for every ack handed over since the
    /// last began, then the answer to each (its run's failure or the
    /// store's, if any).
    pub(super) fn run(&self, store: &dyn Store, failure: &Mutex<Failures>) {
        let mut acks = Vec::new();
        loop {
            {
                let mut queue = self.lock();
                while queue.acks.is_empty() && !queue.closing {
                    queue = wait(&self.wake, queue);
                }
                if queue.acks.is_empty() {
                    return;
                }
                std::mem::swap(&mut acks, &mut queue.acks);
            }
            if let Err(e) = store.flush() {
                lock(failure).record("flushing", None, 0, &e);
            }
            answer(failure, &mut acks);
        }
    }
}

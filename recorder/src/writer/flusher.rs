//! The flusher thread: flushes the store for the acks the writer hands it,
//! so appends go on while a flush is under way.

use std::sync::{Arc, Condvar, Mutex};

use reel::lock::wait;
use reel::store::Store;
use tokio::sync::oneshot;

use super::drain::Writer;
use super::hold::Place;
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
    /// The flusher holds acks it took and has not answered yet.
    flushing: bool,
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

    /// Whether the flusher has nothing to do: no acks handed over and
    /// no flush under way. Only the writer hands acks over, so it stays
    /// idle while the writer flushes in its stead.
    pub(super) fn idle(&self) -> bool {
        let queue = self.lock();
        queue.acks.is_empty() && !queue.flushing
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
                queue.flushing = true;
            }
            if let Err(e) = store.flush() {
                lock(failure).record("flushing", None, 0, &e);
            }
            answer(failure, &mut acks);
            self.lock().flushing = false;
        }
    }
}

impl Writer {
    /// After a drain's facts are written: closes the streams that ended
    /// and has the flushes asked for made (by the flusher, when there is
    /// one).
    pub(super) fn settle(&mut self, closed: &mut Vec<Arc<str>>, acks: &mut Vec<Ack>) {
        for run in closed.drain(..) {
            // A stream's end is filed before it closes, and appends what
            // its call held: anything still held goes in now, never lost.
            if self.runs.get(&run).is_some_and(|s| !s.held.is_empty()) {
                self.append(&run, Vec::new(), Vec::new(), Place::Append);
            }
            if let Some(state) = self.runs.remove(&run) {
                for key in state.calls {
                    self.calls.remove(&key);
                }
                if let Err(e) = self.store.close_stream(&run) {
                    self.fail("closing its stream", Some(&run), 0, &e);
                }
            }
        }
        let handed = match (&self.flusher, acks.is_empty()) {
            // Appended: the flusher's next flush covers them. An idle
            // flusher is not woken when nothing more is filed: the writer
            // flushes itself (see the module docs of `writer`).
            (Some((flusher, _)), false) if !(flusher.idle() && self.rx.is_empty()) => {
                flusher.hand(acks);
                true
            }
            _ => false,
        };
        if !handed && (!acks.is_empty() || self.flush_every_batch) {
            if let Err(e) = self.store.flush() {
                self.fail("flushing", None, 0, &e);
            }
            answer(&self.failure, acks);
        }
    }
}

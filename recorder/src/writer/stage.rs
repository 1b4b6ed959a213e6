//! The store stage: the writer's second thread. The first
//! (`drain`) times, redacts, guards and numbers a drain's facts; this one
//! spills their large payloads into artifacts, appends them (the store
//! encodes, compresses and writes), stores artifacts, closes streams, and
//! has the flushes made, in the order the first stage handed them over.
//! *Why:* a profile of the record bench had the one writer thread busy
//! all along (the tools' threads a half of the other core), about half
//! of it in the store's encoding and compression: two stages use both
//! cores.
//!
//! What the two stages promise together is what the one writer did:
//! - the store sees each run's batches in the order they were numbered,
//!   and an artifact before the facts filed after it;
//! - an ack is answered (or handed to the flusher) only after every fact
//!   filed before its flush was appended;
//! - the room of the queue (`in_flight`) is given back when a drain's
//!   facts are appended, not when they were numbered, so the queue's bound
//!   and the progress bound count the facts waiting here too;
//! - a batch that was not stored does not take its seqs: the run's later
//!   batches, numbered past it by the first stage meanwhile, are numbered
//!   on from where the store is (as the one writer rewound its numberer);
//! - the facts of a run whose stream failed are dropped and counted, even
//!   those already numbered when the failure came.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use reel::fact::Fact;
use reel::redact::spill_large;
use reel::rules::LateFact;
use reel_archive::{Store, StoreError};
use tokio::sync::Notify;

use super::flusher::{answer, Ack, Flusher};
use super::{report_late, Failures};
use reel::sync::lock;

/// What the first stage hands the store stage, in order.
pub(super) enum Work {
    /// A run's numbered facts, to append; `spill`: some have a payload
    /// to spill first (the first stage looked).
    Append {
        run: Arc<str>,
        facts: Vec<Fact>,
        spill: bool,
    },
    /// Artifact bytes of `run` to keep (already through its tripwire).
    Artifact { run: Arc<str>, bytes: Vec<u8> },
    /// The writer is done with a stream.
    Close(Arc<str>),
    /// The end of a drain of `messages` messages: their room is given
    /// back; `acks` are answered after a flush (or handed to the flusher).
    Drained { messages: usize, acks: Vec<Ack> },
}

/// The store stage's thread and what it keeps.
pub(super) struct StoreStage {
    pub(super) store: Arc<dyn Store>,
    pub(super) failure: Arc<Mutex<Failures>>,
    pub(super) in_flight: Arc<AtomicUsize>,
    pub(super) room: Arc<Notify>,
    pub(super) inline_limit: usize,
    pub(super) flush_every_batch: bool,
    /// The flusher thread, when the store flushes concurrently (see the
    /// writer's module docs); else this stage flushes itself.
    pub(super) flusher: Option<(Arc<Flusher>, JoinHandle<()>)>,
    /// Per run, how many seqs of batches that were not stored lie before
    /// the next batch's first: its facts are numbered that much lower.
    pub(super) behind: HashMap<Arc<str>, u64>,
}

impl StoreStage {
    /// Starts the stage's thread; `Work` sent on the returned sender is
    /// done in order, and once the sender is dropped the stage flushes
    /// what it appended and ends.
    pub(super) fn start(self) -> std::io::Result<(mpsc::Sender<Work>, JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("reel-store".into())
            .spawn(move || self.run(rx))?;
        Ok((tx, thread))
    }

    fn run(mut self, rx: mpsc::Receiver<Work>) {
        while let Ok(work) = rx.recv() {
            match work {
                Work::Append { run, facts, spill } => self.append(&run, facts, spill),
                Work::Artifact { run, bytes } => {
                    // A failed run's facts are dropped: so are the bytes
                    // they would refer to.
                    if !self.failed(&run) {
                        if let Err(e) = self.store.put_artifact_of(&run, &bytes) {
                            self.fail("storing an artifact", Some(&run), 0, &e);
                        }
                    }
                }
                Work::Close(run) => {
                    self.behind.remove(&run);
                    if let Err(e) = self.store.close_stream(&run) {
                        self.fail("closing its stream", Some(&run), 0, &e);
                    }
                }
                Work::Drained { messages, mut acks } => {
                    self.settle(&mut acks);
                    self.in_flight.fetch_sub(messages, Ordering::Relaxed);
                    self.room.notify_waiters();
                }
            }
        }
        // The flusher answers what it was handed, then stops.
        if let Some((flusher, thread)) = self.flusher.take() {
            flusher.close();
            let _ = thread.join();
        }
        // The queue closed: make everything durable before the thread ends.
        if let Err(e) = self.store.flush() {
            self.fail("the final flush", None, 0, &e);
        }
    }

    /// Has the flushes a drain asked for made (by the flusher, when there
    /// is one): everything before was appended.
    fn settle(&mut self, acks: &mut Vec<Ack>) {
        if let (Some((flusher, _)), false) = (&self.flusher, acks.is_empty()) {
            flusher.hand(acks);
        } else if !acks.is_empty() || self.flush_every_batch {
            if let Err(e) = self.store.flush() {
                self.fail("flushing", None, 0, &e);
            }
            answer(&self.failure, acks);
        }
    }

    /// Spills and appends a run's numbered batch (see the module docs for
    /// a failed run and a batch that was not stored).
    fn append(&mut self, run: &Arc<str>, mut facts: Vec<Fact>, spill: bool) {
        if facts.is_empty() {
            return;
        }
        if self.failed(run) {
            lock(&self.failure).dropped(run, facts.len());
            return;
        }
        if let Some(&behind) = self.behind.get(run) {
            for fact in &mut facts {
                fact.seq = fact.seq.saturating_sub(behind);
            }
        }
        // Spilled after the tripwire (the first stage), never before: an
        // artifact is written whole, so a payload must be guarded while
        // the scan can still see it.
        if spill && !self.spill(run, &mut facts) {
            return;
        }
        let count = facts.len();
        match self.store.append_batch(run, facts) {
            Ok(()) => {}
            Err(StoreError::StreamClosed { .. }) => report_late(&LateFact {
                stream: run.to_string(),
                kind: "fact".into(),
                count,
            }),
            Err(e) => {
                // Not stored: the run's next batch is numbered from here.
                *self.behind.entry(run.clone()).or_default() += count as u64;
                self.fail("appending facts", Some(run), count, &e);
            }
        }
    }

    /// Moves the large payloads of `facts` into artifacts. False when the
    /// run failed storing one: the batch goes no further (a fact would
    /// refer to bytes the store does not have).
    fn spill(&self, run: &Arc<str>, facts: &mut [Fact]) -> bool {
        let mut spill_err = None;
        for fact in facts.iter_mut() {
            let store = &self.store;
            spill_large(&mut fact.kind, self.inline_limit, |bytes| {
                store.put_artifact_of(run, bytes).unwrap_or_else(|e| {
                    spill_err = Some(e);
                    String::new()
                })
            });
        }
        let Some(e) = spill_err else {
            return true;
        };
        let mut failures = lock(&self.failure);
        failures.record("storing a large payload", Some(run), facts.len(), &e);
        !failures.failed(run)
    }

    fn fail(&self, what: &str, run: Option<&str>, dropped: usize, e: &StoreError) {
        lock(&self.failure).record(what, run, dropped, e);
    }

    fn failed(&self, run: &str) -> bool {
        lock(&self.failure).failed(run)
    }
}

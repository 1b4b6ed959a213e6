//! The write pipeline: tools file facts into a queue; one writer thread per
//! recorder drains it, redacts, spills large payloads into artifacts,
//! appends each run's facts as one block per drain, and flushes for those
//! waiting on durability (one flush for all of them: group commit).
//!
//! Where the store allows it ([`Store::flushes_concurrently`]: the
//! archive does), the flushes run on a flusher thread of their own: the
//! writer hands it the acks of a drain it has appended and goes on with
//! the next drain while the flush waits on the device; the flusher takes
//! every ack handed to it meanwhile into its next flush (group commit
//! still). An ack is handed over only after its facts were appended, and
//! a flush makes durable everything appended before it began, so no call
//! is told its facts are durable before they are. When the flusher is
//! idle and nothing more is filed (a call waiting alone), the writer
//! flushes itself: waking the flusher would add a thread switch to the
//! call's wait and let the writer do nothing meanwhile. *Why:* the
//! archive's journal makes an append wait for a sync under way, so the
//! writer's next append could not overlap that flush anyway.
//!
//! Failures are kept per run where the store says which streams failed
//! ([`StoreError::Streams`]: a replicated log's conflict or a block it did
//! not take in time concerns one run): a flush asked for run R (a call's
//! end, a run's start or end) fails when R failed or the store failed as a
//! whole; R's later facts are dropped, counted in R's failure and warned
//! about once; every other run goes on recording. A failure that names no
//! stream (the archive's disk) fails every later flush. A whole-recorder
//! flush ([`Recorder::flush`](crate::Recorder::flush), shutdown) reports
//! every failure.
//!
//! Under buffered durability the writer lingers `LINGER` after a drain
//! that did not fill, so that a steady trickle of facts (a proxy's
//! traffic) is appended in blocks, not fact by fact.
//!
//! Filing a fact never blocks: the queue is an unbounded channel (see
//! `inbox`: chunks the writer recycles, so that in steady state filing
//! allocates nothing; its lock is held for a slot's copy, never while
//! the writer works), and its bound is enforced at the tools' await
//! points ([`Queue::room`]), which wait while more than `queue_bound`
//! facts are in flight. Nothing is
//! dropped for want of room (the facts of a run whose stream failed, above,
//! are dropped and counted; progress over `progress_bound` is counted as
//! `progress.dropped`).
//!
//! Time: the tool's thread reads one clock per fact, a raw tick of the
//! recorder's [`quanta::Clock`] (the CPU's invariant time-stamp counter,
//! about a third of a vDSO clock read; the OS monotonic clock where there
//! is none). The writer turns ticks into the envelope: `offset` is the
//! time since the run's `run.started` tick, and `at` is the wall clock read
//! once per drain, less the time since the fact's tick. So `at` follows the
//! system clock (steps and slews included) to within the clock's
//! calibration, without a second clock read on the tool's thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use reel::context::Secret;
use reel::fact::NewFact;
use reel::redact::Redactor;
use reel::rules::LateFact;
use reel::store::Store;
use serde_json::Value;
use tokio::sync::{oneshot, Notify};

use crate::config::{Durability, RecorderConfig};

mod drain;
mod failure;
mod flusher;
mod hold;
mod inbox;

use drain::{Writer, LINGER};
pub(crate) use failure::Failures;
pub use failure::{RunFailure, WriteError, RUNS_SHOWN};
use flusher::Flusher;
use inbox::{Count, Refused};
use reel::lock::lock;

/// A message to the writer.
///
/// Every message is copied into the channel, so each is kept small: a
/// progress report (the hot path, `progress()` is the one call a tool makes
/// in a loop) travels unboxed in [`Msg::Progress`] without an allocation
/// and without touching a reference count the writer also touches (the
/// call is a number the writer looks up); every other fact travels boxed.
/// (With the whole 376-byte `NewFact` inline, the copy into the channel and
/// the channel's zeroed blocks were most of what `progress()` cost.)
pub(crate) enum Msg {
    /// A progress report of a call opened by [`Msg::Call`]: the fact the
    /// context built (`Progress { payload, count: 0 }` of that call), sent
    /// as its payload alone; the stream's [`Sequencer`] numbers it.
    Progress {
        call: u64,
        tick: u64,
        payload: Value,
    },
    /// Any other fact of a run; the writer fills in `at` and `offset`
    /// from `tick`.
    Fact {
        run: Arc<str>,
        tick: u64,
        fact: Box<NewFact>,
    },
    /// A call of `run` whose progress reports name it by `key`; sent
    /// before its first report.
    Call {
        key: u64,
        run: Arc<str>,
        call: Arc<str>,
    },
    /// A credential value to scrub from this run's facts (kept in memory
    /// only, dropped when the run ends).
    Secret {
        run: Arc<str>,
        secret: Secret,
        /// A resolved credential's fingerprint (its marker comes from it).
        fp: Option<reel::fact::Fingerprint>,
    },
    /// Artifact bytes to keep (content-addressed) so that replay can serve
    /// them, unless the run's tripwire finds a secret in them.
    Artifact(Box<ArtifactBytes>),
    /// Everything sent before is appended and flushed: then ack. `run`
    /// is whose facts the asker waits for (a call's end, a run's start or
    /// end): the answer is that run's failure or the store's; `None` (the
    /// whole recorder) answers every failure.
    Flush {
        run: Option<Arc<str>>,
        ack: oneshot::Sender<Result<(), WriteError>>,
    },
    /// The run ended: forget its secrets and calls once its facts are
    /// written.
    RunClosed { run: Arc<str> },
    /// The queue is closing: take no more messages, write what was sent
    /// before, flush, and stop.
    Close,
}

/// What [`Msg::Artifact`] carries (boxed: the message stays small).
pub(crate) struct ArtifactBytes {
    run: Arc<str>,
    call: String,
    digest: String,
    tick: u64,
    bytes: Vec<u8>,
}

/// Reports facts filed after their stream ended: not recorded, said as a
/// `tracing` warning (the host's subscriber decides where it goes). The
/// one place the recorder reports the "no fact after the end" rule.
pub(crate) fn report_late(late: &LateFact) {
    tracing::warn!(stream = %late.stream, kind = %late.kind, count = late.count, "reel-recorder: {late}");
}

/// The tools' side of the queue.
pub(crate) struct Queue {
    /// Closing is a message, after which the writer closes the channel
    /// (see [`Queue::close`]).
    tx: inbox::Sender,
    /// The facts' clock (see the module docs).
    clock: quanta::Clock,
    /// The next call key (see [`Msg::Call`]).
    next_call: AtomicU64,
    room: Arc<Notify>,
    bound: usize,
    /// Over this many facts in flight, a progress report is dropped.
    progress_bound: usize,
    thread: Mutex<Option<JoinHandle<()>>>,
    failure: Arc<Mutex<Failures>>,
}

impl Queue {
    /// Starts the writer thread over `store`.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        config: &RecorderConfig,
        keys: &reel_archive::Keyring,
    ) -> std::io::Result<Queue> {
        // Not tokio's unbounded channel (nor std's): both allocate blocks
        // of slots on the sending (the tool's) thread as the writer lags.
        let (tx, rx) = inbox::channel();
        let room = Arc::new(Notify::new());
        let failure = Arc::new(Mutex::new(Failures::default()));
        let clock = quanta::Clock::new();
        let flush_every_batch = config.durability == Durability::EveryFact;
        let flusher = if store.flushes_concurrently() && !flush_every_batch {
            let shared = Arc::new(Flusher::default());
            let thread = {
                let (store, shared, failure) = (store.clone(), shared.clone(), failure.clone());
                std::thread::Builder::new()
                    .name("reel-flusher".into())
                    .spawn(move || shared.run(&*store, &failure))?
            };
            Some((shared, thread))
        } else {
            None
        };
        let writer = Writer {
            clock: clock.clone(),
            runs: HashMap::new(),
            calls: HashMap::new(),
            holding: Vec::new(),
            store,
            rx,
            room: room.clone(),
            redactor: Redactor::new(&config.redact_keys).keyed({
                let keys = keys.clone();
                reel::redact::Tagger::new(move |b| keys.keyed_mac(reel::redact::TAG_PURPOSE, b))
            }),
            tripwire: config.tripwire,
            buf: Vec::new(),
            inline_limit: config.inline_limit,
            flush_every_batch,
            linger: (config.durability == Durability::Buffered).then_some(LINGER),
            flusher,
            failure: failure.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("reel-writer".into())
            .spawn(move || writer.run())?;
        Ok(Queue {
            tx,
            clock,
            next_call: AtomicU64::new(0),
            room,
            bound: config.queue_bound.max(1),
            progress_bound: config.progress_bound.max(1),
            thread: Mutex::new(Some(thread)),
            failure,
        })
    }

    /// False once the writer has closed the channel.
    #[inline]
    fn send(&self, msg: Msg) -> bool {
        self.tx.send(msg, Count::No).is_ok()
    }

    /// The clock's current tick: when a fact happened.
    #[inline]
    pub(crate) fn tick(&self) -> u64 {
        self.clock.raw()
    }

    /// Files a fact that happened at `tick` (its `at` and `offset` are
    /// filled in by the writer). Never blocks, never fails (after shutdown
    /// the fact has nowhere to go and is counted as lost in
    /// [`Queue::failure`]).
    pub(crate) fn fact(&self, run: &Arc<str>, tick: u64, fact: NewFact) {
        self.file(Msg::Fact {
            run: run.clone(),
            tick,
            fact: Box::new(fact),
        });
    }

    /// Opens a call of `run` for progress reports: returns the key they
    /// name it by.
    pub(crate) fn open_call(&self, run: &Arc<str>, call: &Arc<str>) -> u64 {
        let key = self.next_call.fetch_add(1, Ordering::Relaxed);
        self.send(Msg::Call {
            key,
            run: run.clone(),
            call: call.clone(),
        });
        key
    }

    /// Files a progress report of the call opened as `call`, made now
    /// (like [`Queue::fact`]; the writer numbers it). False when the
    /// report was dropped instead: more than the progress bound of facts
    /// wait for the writer (the caller counts it; see
    /// `reel::fact::ProgressDropped`).
    #[inline]
    pub(crate) fn progress(&self, call: u64, payload: Value) -> bool {
        // The count of facts in flight is kept with the queue's chunks,
        // under their lock: deciding room costs no second cache line.
        let tick = self.tick();
        let msg = Msg::Progress {
            call,
            tick,
            payload,
        };
        match self.tx.send(msg, Count::Under(self.progress_bound)) {
            Ok(()) => true,
            Err(Refused::Full) => false,
            Err(Refused::Closed) => {
                self.set_failure(WriteError::FiledAfterShutdown);
                true
            }
        }
    }

    /// Whether a progress report filed now would be queued.
    #[inline]
    pub(crate) fn progress_room(&self) -> bool {
        self.tx.in_flight() < self.progress_bound
    }

    fn file(&self, msg: Msg) {
        if self.tx.send(msg, Count::Fact).is_err() {
            self.set_failure(WriteError::FiledAfterShutdown);
        }
    }

    pub(crate) fn secret(
        &self,
        run: &Arc<str>,
        secret: Secret,
        fingerprint: Option<reel::fact::Fingerprint>,
    ) {
        self.send(Msg::Secret {
            run: run.clone(),
            secret,
            fp: fingerprint,
        });
    }

    /// Artifact bytes a call of `run` put or got, to keep for replay.
    pub(crate) fn artifact(&self, run: &Arc<str>, call: &str, digest: &str, bytes: Vec<u8>) {
        let tick = self.tick();
        self.send(Msg::Artifact(Box::new(ArtifactBytes {
            run: run.clone(),
            call: call.to_owned(),
            digest: digest.to_owned(),
            tick,
            bytes,
        })));
    }

    pub(crate) fn run_closed(&self, run: &Arc<str>) {
        self.send(Msg::RunClosed { run: run.clone() });
    }

    /// Waits until everything filed before is appended and durable: for
    /// `run` (failing when that run's stream or the store failed), or, with
    /// `None`, for the whole recorder (failing when anything failed).
    pub(crate) async fn flush(&self, run: Option<&Arc<str>>) -> Result<(), WriteError> {
        let (ack, done) = oneshot::channel();
        if !self.send(Msg::Flush {
            run: run.cloned(),
            ack,
        }) {
            return Err(WriteError::ShutDown);
        }
        done.await.map_err(|_| WriteError::WriterStopped)?
    }

    /// Waits while the queue is over its bound (an await point of a tool).
    pub(crate) async fn room(&self) {
        loop {
            let notified = self.room.notified();
            if self.tx.in_flight() <= self.bound {
                return;
            }
            notified.await;
        }
    }

    /// Facts filed but not yet appended.
    pub(crate) fn in_flight(&self) -> usize {
        self.tx.in_flight()
    }

    /// Every write failure so far, for the whole recorder, if any.
    pub(crate) fn failure(&self) -> Option<WriteError> {
        lock(&self.failure).whole()
    }

    fn set_failure(&self, f: WriteError) {
        lock(&self.failure).global.get_or_insert(f);
    }

    /// Closes the queue and waits for the writer to append and flush
    /// everything (blocking). Idempotent. The writer closes the channel when
    /// it meets the close message: what was sent before is written, what is
    /// sent after fails to send (and counts as lost in [`Queue::failure`]).
    pub(crate) fn close(&self) {
        self.send(Msg::Close);
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.close();
    }
}

/// The wall clock, unix nanoseconds (0 before 1970).
pub(crate) fn unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::drain::Pending;
    use super::Msg;

    /// A drain's waiting facts stay small (see `PendingFact`).
    #[test]
    fn pending_facts_stay_small() {
        let payload = std::mem::size_of::<serde_json::Value>();
        assert!(
            std::mem::size_of::<Pending>() <= payload + 24,
            "Pending is {} bytes, a payload {payload}",
            std::mem::size_of::<Pending>()
        );
        assert!(std::mem::size_of::<Pending>() * 3 < std::mem::size_of::<reel::Fact>());
    }

    /// Every message is copied into the channel on the tool's thread: the
    /// progress report, the hot path, stays small and unboxed: its payload
    /// plus two words (the call's key and the tick).
    #[test]
    fn messages_stay_small() {
        let payload = std::mem::size_of::<serde_json::Value>();
        assert!(
            std::mem::size_of::<Msg>() <= payload + 24,
            "Msg is {} bytes, a payload {payload}",
            std::mem::size_of::<Msg>()
        );
    }
}

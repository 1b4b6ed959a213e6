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
//! is told its facts are durable before they are.
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
//! Filing a fact never blocks: the queue is an unbounded channel, and its
//! bound is enforced at the tools' await points ([`Queue::room`]), which
//! wait while more than `queue_bound` facts are in flight. Nothing is
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reel::context::Secret;
use reel::fact::{Fact, FactKind, NewFact, Progress};
use reel::redact::{spill_large, KnownSecrets, Redactor};
use reel::rules::{ends_stream, LateFact};
use reel::sequence::Sequencer;
use reel::tripwire::{tripped, Hit, Tripwire};
use reel_archive::{Store, StoreError};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::config::{Durability, RecorderConfig};

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
    Secret { run: Arc<str>, secret: Secret },
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

/// Why the write pipeline failed. The store's first failure as a whole is
/// kept and reported to every later flush and at shutdown; a run's failure
/// to the flushes of that run and to whole-recorder flushes and shutdown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The recorder was shut down: nothing more is written.
    #[error("the recorder has shut down")]
    ShutDown,
    /// The writer thread stopped before answering.
    #[error("the recorder's writer stopped")]
    WriterStopped,
    /// A fact was filed after the recorder shut down: it was not recorded.
    #[error("a fact was filed after the recorder shut down")]
    FiledAfterShutdown,
    /// The store refused or failed (`what` the writer was doing).
    #[error("{what}: {detail}")]
    Store {
        /// What the writer was doing, e.g. `run "r": appending facts`.
        what: String,
        /// The store's error.
        detail: String,
    },
    /// The store failed one run's stream (and said so, naming it): that
    /// run records nothing from the failed batch on; other runs go on.
    #[error("{0}")]
    Run(RunFailure),
    /// Several runs failed (a whole-recorder flush or shutdown): the
    /// first [`RUNS_SHOWN`] by run id, and how many in all.
    #[error("{total} runs were not recorded whole: {}{}", shown.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" | "), if *total > shown.len() { format!(" | and {} more", total - shown.len()) } else { String::new() })]
    Runs {
        /// The first failed runs, by run id.
        shown: Vec<RunFailure>,
        /// How many runs failed.
        total: usize,
    },
}

/// How many failed runs a [`WriteError::Runs`] names.
pub const RUNS_SHOWN: usize = 16;

/// One run whose stream the store failed (see [`WriteError::Run`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run {run:?}: {what}: {detail}; the run records nothing from there on ({dropped} of its facts not recorded so far); other runs go on")]
pub struct RunFailure {
    /// The run id (or the key of a call outside any run).
    pub run: String,
    /// What the writer was doing, e.g. `appending facts`.
    pub what: String,
    /// The store's error.
    pub detail: String,
    /// The run's facts the writer did not store since (a refused batch
    /// included; what a store took and lost is the store's to say), as of
    /// when this was reported.
    pub dropped: u64,
}

/// The failures of one writer, shared by its queue, writer and flusher.
#[derive(Default)]
pub(crate) struct Failures {
    /// The store failed as a whole (or a fact came after shutdown): every
    /// flush fails.
    global: Option<WriteError>,
    /// The runs whose stream failed, with whether dropping their later
    /// facts was warned about. Kept for the recorder's life (an entry per
    /// failed run), so the run's later flushes keep failing: a flush of a
    /// run's end may be answered after the run is closed.
    runs: HashMap<String, (RunFailure, bool)>,
}

impl Failures {
    /// Keeps `e`: as the failure of each stream it names
    /// ([`StoreError::Streams`]), else as the store's (the first of each is
    /// kept), said as a `tracing` error. `run` is whose facts the writer
    /// was writing, if one's; `dropped`, how many facts of it went unstored.
    fn record(&mut self, what: &str, run: Option<&str>, dropped: usize, e: &StoreError) {
        match e {
            StoreError::Streams(failed) if !failed.is_empty() => {
                for f in failed {
                    if self.runs.contains_key(&f.stream) {
                        continue;
                    }
                    let failure = RunFailure {
                        run: f.stream.clone(),
                        what: what.to_owned(),
                        detail: f.error.to_string(),
                        dropped: if run == Some(f.stream.as_str()) {
                            dropped as u64
                        } else {
                            0
                        },
                    };
                    tracing::error!(run = %f.stream, "reel-recorder: {failure}");
                    self.runs.insert(f.stream.clone(), (failure, false));
                }
            }
            e => {
                let failure = WriteError::Store {
                    what: match run {
                        Some(run) => format!("run {run}: {what}"),
                        None => what.to_owned(),
                    },
                    detail: e.to_string(),
                };
                tracing::error!("reel-recorder: {failure}");
                self.global.get_or_insert(failure);
            }
        }
    }

    /// Whether `run`'s stream failed.
    fn failed(&self, run: &str) -> bool {
        self.runs.contains_key(run)
    }

    /// Counts `n` facts of the failed `run` as not recorded; the first
    /// time, says so (a `tracing` warning: once per run).
    fn dropped(&mut self, run: &str, n: usize) {
        if let Some((failure, warned)) = self.runs.get_mut(run) {
            failure.dropped += n as u64;
            if !*warned {
                *warned = true;
                tracing::warn!(
                    run,
                    "reel-recorder: run {run}: its stream failed earlier ({}); its later facts are dropped, not recorded (counted in its failure)",
                    failure.detail
                );
            }
        }
    }

    /// The answer to a flush for `run` (see [`Msg::Flush`]).
    fn answer(&self, run: Option<&str>) -> Result<(), WriteError> {
        if let Some(f) = &self.global {
            return Err(f.clone());
        }
        match run {
            Some(run) => match self.runs.get(run) {
                Some((f, _)) => Err(WriteError::Run(f.clone())),
                None => Ok(()),
            },
            None => self.whole().map_or(Ok(()), Err),
        }
    }

    /// Every failure, for the whole recorder: the store's, else each
    /// failed run's (by run id).
    pub(crate) fn whole(&self) -> Option<WriteError> {
        if let Some(f) = &self.global {
            return Some(f.clone());
        }
        let mut runs: Vec<&RunFailure> = self.runs.values().map(|(f, _)| f).collect();
        runs.sort_unstable_by(|a, b| a.run.cmp(&b.run));
        match runs.len() {
            0 => None,
            1 => Some(WriteError::Run(runs[0].clone())),
            total => Some(WriteError::Runs {
                shown: runs.into_iter().take(RUNS_SHOWN).cloned().collect(),
                total,
            }),
        }
    }
}

fn lock_failures(f: &Mutex<Failures>) -> std::sync::MutexGuard<'_, Failures> {
    f.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reports facts filed after their stream ended: not recorded, said as a
/// `tracing` warning (the host's subscriber decides where it goes). The
/// one place the recorder reports the "no fact after the end" rule.
pub(crate) fn report_late(late: &LateFact) {
    tracing::warn!(stream = %late.stream, kind = %late.kind, count = late.count, "reel-recorder: {late}");
}

/// The tools' side of the queue.
pub(crate) struct Queue {
    /// Not behind a lock (filing a fact takes none): closing is a message,
    /// after which the writer closes the channel (see [`Queue::close`]).
    tx: mpsc::UnboundedSender<Msg>,
    /// The facts' clock (see the module docs).
    clock: quanta::Clock,
    /// The next call key (see [`Msg::Call`]).
    next_call: AtomicU64,
    in_flight: Arc<AtomicUsize>,
    room: Arc<Notify>,
    bound: usize,
    /// Over this many facts in flight, a progress report is dropped.
    progress_bound: usize,
    thread: Mutex<Option<JoinHandle<()>>>,
    failure: Arc<Mutex<Failures>>,
}

impl Queue {
    /// Starts the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn Store>, config: &RecorderConfig) -> std::io::Result<Queue> {
        // tokio's unbounded channel recycles its blocks of slots, where
        // std's allocates and zeroes a new block every 31 messages on the
        // sending (the tool's) thread. The writer is a plain thread: it
        // receives with `blocking_recv`.
        let (tx, rx) = mpsc::unbounded_channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
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
            store,
            rx,
            in_flight: in_flight.clone(),
            room: room.clone(),
            redactor: Redactor::new(&config.redact_keys),
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
            in_flight,
            room,
            bound: config.queue_bound.max(1),
            progress_bound: config.progress_bound.max(1),
            thread: Mutex::new(Some(thread)),
            failure,
        })
    }

    /// False once the writer has closed the channel.
    fn send(&self, msg: Msg) -> bool {
        self.tx.send(msg).is_ok()
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
        // One read-modify-write of the count, as filing took before the
        // bound (a load first would take the writer's cache line twice):
        // the count before it says whether there is room.
        if self.in_flight.fetch_add(1, Ordering::Relaxed) >= self.progress_bound {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        let tick = self.tick();
        let msg = Msg::Progress {
            call,
            tick,
            payload,
        };
        if !self.send(msg) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.set_failure(WriteError::FiledAfterShutdown);
        }
        true
    }

    /// Whether a progress report filed now would be queued.
    #[inline]
    pub(crate) fn progress_room(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) < self.progress_bound
    }

    fn file(&self, msg: Msg) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        if !self.send(msg) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.set_failure(WriteError::FiledAfterShutdown);
        }
    }

    pub(crate) fn secret(&self, run: &Arc<str>, secret: Secret) {
        self.send(Msg::Secret {
            run: run.clone(),
            secret,
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
            if self.in_flight.load(Ordering::Relaxed) <= self.bound {
                return;
            }
            notified.await;
        }
    }

    /// Facts filed but not yet appended.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Every write failure so far, for the whole recorder, if any.
    pub(crate) fn failure(&self) -> Option<WriteError> {
        lock_failures(&self.failure).whole()
    }

    fn set_failure(&self, f: WriteError) {
        lock_failures(&self.failure).global.get_or_insert(f);
    }

    /// Closes the queue and waits for the writer to append and flush
    /// everything (blocking). Idempotent. The writer closes the channel when
    /// it meets the close message: what was sent before is written, what is
    /// sent after fails to send (and counts as lost in [`Queue::failure`]).
    pub(crate) fn close(&self) {
        self.send(Msg::Close);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
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

struct Writer {
    store: Arc<dyn Store>,
    rx: mpsc::UnboundedReceiver<Msg>,
    in_flight: Arc<AtomicUsize>,
    room: Arc<Notify>,
    redactor: Redactor,
    /// Whether blocks go through the tripwire.
    tripwire: bool,
    /// The tripwire's encoding buffer, reused.
    buf: Vec<u8>,
    inline_limit: usize,
    flush_every_batch: bool,
    /// How long the writer waits after a drain that did not fill
    /// before it takes the next one (buffered durability only).
    linger: Option<Duration>,
    /// The flusher thread, when the store flushes concurrently (see the
    /// module docs); else the writer flushes itself.
    flusher: Option<(Arc<Flusher>, JoinHandle<()>)>,
    failure: Arc<Mutex<Failures>>,
    clock: quanta::Clock,
    /// What the writer keeps per open run.
    runs: HashMap<Arc<str>, RunState>,
    /// The calls opened for progress reports, by key.
    calls: HashMap<u64, CallSlot>,
}

/// What the writer keeps of an open run, until `run.ended` is written.
#[derive(Default)]
struct RunState {
    /// The tick of the run's first fact (`run.started`): offset zero.
    start: Option<u64>,
    /// Secret values to scrub from the run's facts (memory only): resolved
    /// credentials, and values learned from secret-named keys of its facts.
    secrets: KnownSecrets,
    /// The run's resolved credentials and declared secrets, in raw and
    /// encoded forms: the last check of every block (memory only).
    wire: Tripwire,
    /// Keys of the run's calls in [`Writer::calls`].
    calls: Vec<u64>,
    /// For a call outside any run: its call id, whose `call.ended` is the
    /// stream's last fact (as `run.ended` is a run's).
    outside: Option<String>,
    /// Numbers the stream's facts and progress reports: the one numberer
    /// (`reel::sequence`), so every [`Store`] gets the same numbers.
    seq: Sequencer,
    /// The stream's end was appended: later facts are late.
    ended: bool,
}

/// A call that files progress reports.
struct CallSlot {
    run: Arc<str>,
    call: Arc<str>,
}

/// A fact received, not yet timed: `tick` becomes `at` and `offset`.
struct Pending {
    tick: u64,
    fact: PendingFact,
}

/// A received fact as it waits for its drain to be written: kept as small
/// as it came (a progress report is its payload and its call's id, any
/// other fact stays in its box), so that a drain's batches hold entries
/// of a payload and two words (96 bytes), not 376-byte facts. *Why:* a profile of the record bench had a
/// fifth of the writer's time in the kernel zeroing fresh pages and in
/// copies, most of them the batches' facts, moved whole into growing
/// vectors and again into the store's.
enum PendingFact {
    /// `progress { payload, count: 0 }` of `call`.
    Progress { call: Arc<str>, payload: Value },
    /// Any other fact.
    Other(Box<NewFact>),
}

impl Pending {
    /// The fact, unnumbered (seq 0), at `at` and `offset`.
    fn into_fact(self, at: i64, offset: u64) -> Fact {
        match self.fact {
            PendingFact::Progress { call, payload } => Fact {
                seq: 0,
                at,
                offset,
                // Not `to_string()`: that goes through `Display`.
                call: Some(String::from(&*call)),
                // Numbered when the batch is (`Sequencer`).
                kind: FactKind::Progress(Progress { payload, count: 0 }),
            },
            PendingFact::Other(fact) => {
                let NewFact { call, kind, .. } = *fact;
                Fact {
                    seq: 0,
                    at,
                    offset,
                    call,
                    kind,
                }
            }
        }
    }
}

/// The wall clock, unix nanoseconds (0 before 1970).
pub(crate) fn unix_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The most messages one drain takes before writing.
const DRAIN_MAX: usize = 8192;

/// How long the writer lingers after a drain that did not fill, under
/// buffered durability: what is filed meanwhile wakes no one (a send to a
/// parked `blocking_recv` is a futex wake, and the writer's wakeup a
/// context switch, per message) and is appended as one block. No caller
/// of a buffered recorder waits on the writer; an explicit flush waits at
/// most this much longer. The `mcp-record` bench row's proxy used about a
/// third less CPU with it.
const LINGER: Duration = Duration::from_millis(1);

/// Emptied batch vectors kept for the next drains, at most this many.
const SPARE_MAX: usize = 256;
/// A batch vector holding more facts than this is not kept (a burst's
/// memory goes back to the allocator).
const SPARE_CAP: usize = 4096;

/// The facts of `run` in this drain (the latest runs are the likeliest).
/// A new run's vector comes from `spare` (the emptied vectors of earlier
/// drains): a profile of the record workload had a fifth of the writer's
/// time in the allocator, growing a fresh vector for each call's 302
/// (376-byte) facts and freeing it again.
///
/// `last` is the batch the previous fact went to: a tool files its reports
/// in bursts, so it is the likeliest of all. Runs are found by their `Arc`
/// first (every message of a run carries a clone of one), by their id only
/// when that fails; the run's `Arc` is cloned only for a new batch.
fn batch_of<'a>(
    batches: &'a mut Vec<(Arc<str>, Vec<Pending>)>,
    spare: &mut Vec<Vec<Pending>>,
    last: &mut usize,
    run: &Arc<str>,
) -> &'a mut Vec<Pending> {
    let found = match batches.get(*last) {
        Some((r, _)) if Arc::ptr_eq(r, run) => Some(*last),
        _ => batches
            .iter()
            .rposition(|(r, _)| Arc::ptr_eq(r, run))
            .or_else(|| batches.iter().rposition(|(r, _)| r == run)),
    };
    let i = match found {
        Some(i) => i,
        None => {
            // Sized for a call's worth of facts: growing from empty copies
            // each fact several times over.
            let v = spare.pop().unwrap_or_else(|| Vec::with_capacity(64));
            batches.push((run.clone(), v));
            batches.len() - 1
        }
    };
    *last = i;
    &mut batches[i].1
}

impl Writer {
    fn run(mut self) {
        let mut batches: Vec<(Arc<str>, Vec<Pending>)> = Vec::new();
        let mut spare: Vec<Vec<Pending>> = Vec::new();
        let mut acks = Vec::new();
        let mut closed = Vec::new();
        let mut closing = false;
        while let Some(first) = self.rx.blocking_recv() {
            let mut n = 0;
            let mut last = 0;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Progress {
                        call,
                        tick,
                        payload,
                    } => {
                        n += 1;
                        match self.calls.get(&call) {
                            Some(slot) => {
                                let fact = PendingFact::Progress {
                                    call: slot.call.clone(),
                                    payload,
                                };
                                batch_of(&mut batches, &mut spare, &mut last, &slot.run)
                                    .push(Pending { tick, fact });
                            }
                            // Its run has ended and was forgotten.
                            None => report_late(&LateFact {
                                stream: "(an ended run)".into(),
                                kind: "progress".into(),
                                count: 1,
                            }),
                        }
                    }
                    Msg::Fact { run, tick, fact } => {
                        n += 1;
                        let state = self.runs.entry(run.clone()).or_default();
                        state.start.get_or_insert(tick);
                        if let FactKind::CallStarted(c) = &fact.kind {
                            if c.outside_run.is_some() {
                                state.outside = Some(c.call_id.clone());
                            }
                        }
                        batch_of(&mut batches, &mut spare, &mut last, &run).push(Pending {
                            tick,
                            fact: PendingFact::Other(fact),
                        });
                    }
                    Msg::Call { key, run, call } => {
                        self.runs.entry(run.clone()).or_default().calls.push(key);
                        self.calls.insert(key, CallSlot { run, call });
                    }
                    Msg::Secret { run, secret } => {
                        let state = self.runs.entry(run).or_default();
                        if self.tripwire {
                            state.wire.add(secret.expose());
                        }
                        state.secrets.add(secret)
                    }
                    Msg::Artifact(artifact) => {
                        let ArtifactBytes {
                            run,
                            call,
                            digest,
                            tick,
                            bytes,
                        } = *artifact;
                        // Bytes are stored whole, so the run's tripwire sees
                        // them first (after the secrets filed before them): a
                        // hit withholds the artifact, named by digest, as an
                        // exported tape withholds it.
                        let hit = self
                            .runs
                            .get(&run)
                            .and_then(|state| state.wire.scan(&bytes));
                        match hit {
                            Some(encoding) => {
                                tracing::warn!(
                                    run = %run,
                                    "reel-recorder: run {run}: an artifact ({digest}) holds a secret: not stored (see its redaction.tripped fact)"
                                );
                                let hit = Hit {
                                    field: digest,
                                    encoding,
                                };
                                let fact = NewFact {
                                    at: 0,
                                    offset: 0,
                                    call: Some(call),
                                    kind: tripped("archive", "known-values", "artifact", &hit),
                                };
                                batch_of(&mut batches, &mut spare, &mut last, &run).push(Pending {
                                    tick,
                                    fact: PendingFact::Other(Box::new(fact)),
                                });
                            }
                            // A failed run's facts are dropped: so are the
                            // bytes they would refer to.
                            None if self.failed(&run) => {}
                            None => {
                                if let Err(e) = self.store.put_artifact_of(&run, &bytes) {
                                    self.fail("storing an artifact", Some(&run), 0, &e);
                                }
                            }
                        }
                    }
                    Msg::Flush { run, ack } => acks.push((run, ack)),
                    Msg::RunClosed { run } => closed.push(run),
                    // Later sends fail; `blocking_recv` yields what is
                    // buffered, then ends the loop.
                    Msg::Close => {
                        closing = true;
                        self.rx.close()
                    }
                }
                if n < DRAIN_MAX {
                    next = self.rx.try_recv().ok();
                }
            }
            self.write(&mut batches, &mut spare);
            for run in closed.drain(..) {
                if let Some(state) = self.runs.remove(&run) {
                    for key in state.calls {
                        self.calls.remove(&key);
                    }
                    if let Err(e) = self.store.close_stream(&run) {
                        self.fail("closing its stream", Some(&run), 0, &e);
                    }
                }
            }
            if let (Some((flusher, _)), false) = (&self.flusher, acks.is_empty()) {
                // Appended: the flusher's next flush covers them.
                flusher.hand(&mut acks);
            } else if !acks.is_empty() || self.flush_every_batch {
                if let Err(e) = self.store.flush() {
                    self.fail("flushing", None, 0, &e);
                }
                answer(&self.failure, &mut acks);
            }
            self.in_flight.fetch_sub(n, Ordering::Relaxed);
            self.room.notify_waiters();
            if let (Some(linger), true) = (self.linger, n < DRAIN_MAX && !closing) {
                std::thread::sleep(linger);
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

    fn write(
        &mut self,
        batches: &mut Vec<(Arc<str>, Vec<Pending>)>,
        spare: &mut Vec<Vec<Pending>>,
    ) {
        // Read after every fact of the drain was filed: no tick is later.
        let (wall, now) = (unix_nanos(), self.clock.raw());
        for (run, mut pending) in batches.drain(..) {
            if self.failed(&run) {
                // The run's stream failed: the store takes nothing more
                // of it. Counted in its failure, warned about once.
                lock_failures(&self.failure).dropped(&run, pending.len());
                pending.clear();
                if spare.len() < SPARE_MAX && pending.capacity() <= SPARE_CAP {
                    spare.push(pending);
                }
                continue;
            }
            let start = self
                .runs
                .get(&run)
                .and_then(|s| s.start)
                .unwrap_or_else(|| pending.first().map_or(now, |p| p.tick));
            let clock = &self.clock;
            // Held as `Fact`s from here on (numbered in place below, seq 0
            // until then): each fact is moved once, not once per step.
            let mut facts: Vec<Fact> = pending
                .drain(..)
                .map(|p| {
                    let tick = p.tick;
                    p.into_fact(
                        wall.saturating_sub(clock.delta_as_nanos(tick, now) as i64),
                        clock.delta_as_nanos(start, tick),
                    )
                })
                .collect();
            if spare.len() < SPARE_MAX && pending.capacity() <= SPARE_CAP {
                spare.push(pending);
            }
            // One fact at a time, in order, with the run's secrets: a value
            // under a secret-named key joins them, and is scrubbed from the
            // rest of that fact and from every later fact of the run (an
            // error may echo an argument), never depending on where a
            // drain happened to cut the run's facts.
            let mut closed_run = KnownSecrets::new();
            let secrets = match self.runs.get_mut(&run) {
                Some(state) => &mut state.secrets,
                // Facts of a run already forgotten (filed after its end).
                None => &mut closed_run,
            };
            for fact in &mut facts {
                self.redactor.redact_fact(&mut fact.kind, secrets);
            }
            // run.ended is a run's last fact (and the call.ended of a call
            // outside any run is its stream's): anything filed after it (a
            // late fact racing the end) is reported and dropped, never
            // allowed to take the run's real facts down with it.
            let state = self.runs.entry(run.clone()).or_default();
            // A stream the writer has already forgotten (its end was
            // written and it was closed) comes back only as facts that do
            // not begin a stream: late too, never numbered from 0 again.
            let forgotten = state.seq.next_seq() == 0
                && facts.first().is_some_and(|f| {
                    !matches!(&f.kind, FactKind::RunStarted(_))
                        && !matches!(&f.kind, FactKind::CallStarted(c) if c.outside_run.is_some())
                });
            let end = if state.ended || forgotten {
                Some(0)
            } else {
                let outside = state.outside.as_deref();
                facts
                    .iter()
                    .position(|f| ends_stream(outside, f.call.as_deref(), &f.kind))
                    .map(|end| end + 1)
            };
            let late = match end {
                Some(end) => {
                    state.ended = true;
                    facts.split_off(end)
                }
                None => Vec::new(),
            };
            if forgotten {
                self.runs.remove(&run);
            }
            let Some(state) = self.runs.get_mut(&run) else {
                report_late(&LateFact {
                    stream: run.to_string(),
                    kind: "fact".into(),
                    count: late.len(),
                });
                continue;
            };
            // The tripwire, after redaction and the cut, before numbering:
            // a hit is scrubbed and filed as `redaction.tripped`.
            if state.wire.guard_facts(
                "archive",
                "known-values",
                state.outside.as_deref(),
                &mut facts,
                &mut self.buf,
            ) > 0
            {
                tracing::warn!(
                    run = %run,
                    "reel-recorder: run {run}: a secret got past redaction and was scrubbed (see its redaction.tripped facts)"
                );
            }
            // Spilled after the tripwire, never before: an artifact is
            // written whole, so a payload must be guarded while the scan
            // can still see it.
            let mut spill_err = None;
            for fact in &mut facts {
                let store = &self.store;
                spill_large(&mut fact.kind, self.inline_limit, |bytes| {
                    store.put_artifact_of(&run, bytes).unwrap_or_else(|e| {
                        spill_err = Some(e);
                        String::new()
                    })
                });
            }
            if let Some(e) = spill_err {
                let mut failures = lock_failures(&self.failure);
                failures.record("storing a large payload", Some(&run), facts.len(), &e);
                if failures.failed(&run) {
                    // A fact would refer to bytes the store does not
                    // have: the batch goes no further.
                    facts.clear();
                }
            }
            // Numbered here, after the late facts are cut: the one numberer.
            let first = state.seq.next_seq();
            for fact in &mut facts {
                state.seq.number_in_place(fact);
            }
            let count = facts.len();
            let appended = if facts.is_empty() {
                Ok(())
            } else {
                self.store.append_batch(&run, facts)
            };
            match appended {
                Ok(()) => {}
                Err(StoreError::StreamClosed { .. }) => {
                    if let Some(state) = self.runs.get_mut(&run) {
                        state.seq.rewind(first);
                    }
                    report_late(&LateFact {
                        stream: run.to_string(),
                        kind: "fact".into(),
                        count,
                    });
                }
                Err(e) => {
                    // Not stored: the next batch is numbered from here.
                    if let Some(state) = self.runs.get_mut(&run) {
                        state.seq.rewind(first);
                    }
                    self.fail("appending facts", Some(&run), count, &e);
                }
            }
            if !late.is_empty() {
                let kind = match late
                    .iter()
                    .map(|f| f.kind.name())
                    .collect::<std::collections::BTreeSet<_>>()
                {
                    kinds if kinds.len() == 1 => {
                        kinds.into_iter().next().unwrap_or("fact").to_owned()
                    }
                    _ => "fact".to_owned(),
                };
                report_late(&LateFact {
                    stream: run.to_string(),
                    kind,
                    count: late.len(),
                });
            }
        }
    }

    /// Keeps a failure (see [`Failures::record`]).
    fn fail(&self, what: &str, run: Option<&str>, dropped: usize, e: &StoreError) {
        lock_failures(&self.failure).record(what, run, dropped, e);
    }

    fn failed(&self, run: &str) -> bool {
        lock_failures(&self.failure).failed(run)
    }
}

/// An ack of a [`Msg::Flush`], with the run it asks for.
type Ack = (Option<Arc<str>>, oneshot::Sender<Result<(), WriteError>>);

/// Answers each ack after a flush: its run's failure or the store's, if
/// any (see [`Msg::Flush`]).
fn answer(failures: &Mutex<Failures>, acks: &mut Vec<Ack>) {
    let failures = lock_failures(failures);
    for (run, ack) in acks.drain(..) {
        let _ = ack.send(failures.answer(run.as_deref()));
    }
}

/// The flusher thread's side (see the module docs): the acks of appended
/// facts, waiting for its next flush.
#[derive(Default)]
struct Flusher {
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
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands over the acks of facts already appended (emptying `acks`).
    fn hand(&self, acks: &mut Vec<Ack>) {
        self.lock().acks.append(acks);
        self.wake.notify_one();
    }

    /// After what was handed over is answered, the flusher stops.
    fn close(&self) {
        self.lock().closing = true;
        self.wake.notify_one();
    }

    /// The flusher thread: one flush for every ack handed over since the
    /// last began, then the answer to each (its run's failure or the
    /// store's, if any).
    fn run(&self, store: &dyn Store, failure: &Mutex<Failures>) {
        let mut acks = Vec::new();
        loop {
            {
                let mut queue = self.lock();
                while queue.acks.is_empty() && !queue.closing {
                    queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
                }
                if queue.acks.is_empty() {
                    return;
                }
                std::mem::swap(&mut acks, &mut queue.acks);
            }
            if let Err(e) = store.flush() {
                lock_failures(failure).record("flushing", None, 0, &e);
            }
            answer(failure, &mut acks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Msg, Pending};

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

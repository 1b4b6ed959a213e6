//! The write pipeline: tools file facts into a queue; one writer thread per
//! recorder drains it, redacts, spills large payloads into artifacts,
//! appends each run's facts as one block per drain, and flushes for those
//! waiting on durability (one flush for all of them: group commit).
//!
//! Filing a fact never blocks: the queue is an unbounded channel, and its
//! bound is enforced at the tools' await points ([`Queue::room`]), which
//! wait while more than `queue_bound` facts are in flight. Nothing is ever
//! dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use reel::context::Secret;
use reel::fact::{FactKind, NewFact, Progress};
use reel::redact::{spill_large, Redactor};
use reel::{Archive, ArchiveError};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::config::{Durability, RecorderConfig};

/// A message to the writer.
///
/// Every message is copied into the channel, so each is kept small: a
/// progress report (the hot path, `progress()` is the one call a tool makes
/// in a loop) travels unboxed in [`Msg::Progress`], 128 bytes, without an
/// allocation on the tool's thread; every other fact travels boxed. (With
/// the whole 376-byte `NewFact` inline, the copy into the channel and the
/// channel's zeroed blocks were most of what `progress()` cost.)
pub(crate) enum Msg {
    /// A progress report of a call; the writer builds its fact.
    Progress {
        run: Arc<str>,
        call: Arc<str>,
        at: i64,
        offset: u64,
        progress: Progress,
    },
    /// Any other fact of a run.
    Fact { run: Arc<str>, fact: Box<NewFact> },
    /// A credential value to scrub from this run's facts (kept in memory
    /// only, dropped when the run ends).
    Secret { run: Arc<str>, secret: Secret },
    /// Artifact bytes to keep (content-addressed) so that replay can serve them.
    Artifact { bytes: Vec<u8> },
    /// Everything sent before is appended and flushed: then ack.
    Flush {
        ack: oneshot::Sender<Result<(), String>>,
    },
    /// The run ended: forget its secrets once its facts are written.
    RunClosed { run: Arc<str> },
    /// The queue is closing: take no more messages, write what was sent
    /// before, flush, and stop.
    Close,
}

/// The tools' side of the queue.
pub(crate) struct Queue {
    /// Not behind a lock (filing a fact takes none): closing is a message,
    /// after which the writer closes the channel (see [`Queue::close`]).
    tx: mpsc::UnboundedSender<Msg>,
    in_flight: Arc<AtomicUsize>,
    room: Arc<Notify>,
    bound: usize,
    thread: Mutex<Option<JoinHandle<()>>>,
    failure: Arc<Mutex<Option<String>>>,
}

impl Queue {
    /// Starts the writer thread over `archive`.
    pub(crate) fn start(archive: Archive, config: &RecorderConfig) -> std::io::Result<Queue> {
        // tokio's unbounded channel recycles its blocks of slots, where
        // std's allocates and zeroes a new block every 31 messages on the
        // sending (the tool's) thread. The writer is a plain thread: it
        // receives with `blocking_recv`.
        let (tx, rx) = mpsc::unbounded_channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let room = Arc::new(Notify::new());
        let failure = Arc::new(Mutex::new(None));
        let writer = Writer {
            archive,
            rx,
            in_flight: in_flight.clone(),
            room: room.clone(),
            redactor: Redactor::new(&config.redact_keys),
            inline_limit: config.inline_limit,
            flush_every_batch: config.durability == Durability::EveryFact,
            secrets: HashMap::new(),
            failure: failure.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("reel-writer".into())
            .spawn(move || writer.run())?;
        Ok(Queue {
            tx,
            in_flight,
            room,
            bound: config.queue_bound.max(1),
            thread: Mutex::new(Some(thread)),
            failure,
        })
    }

    /// False once the writer has closed the channel.
    fn send(&self, msg: Msg) -> bool {
        self.tx.send(msg).is_ok()
    }

    /// Files a fact. Never blocks, never fails (after shutdown the fact has
    /// nowhere to go and is counted as lost in [`Queue::failure`]).
    pub(crate) fn fact(&self, run: &Arc<str>, fact: NewFact) {
        self.file(Msg::Fact {
            run: run.clone(),
            fact: Box::new(fact),
        });
    }

    /// Files a progress report of `call` (like [`Queue::fact`]).
    pub(crate) fn progress(
        &self,
        run: &Arc<str>,
        call: &Arc<str>,
        at: i64,
        offset: u64,
        progress: Progress,
    ) {
        self.file(Msg::Progress {
            run: run.clone(),
            call: call.clone(),
            at,
            offset,
            progress,
        });
    }

    fn file(&self, msg: Msg) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        if !self.send(msg) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.set_failure("a fact was filed after the recorder shut down".into());
        }
    }

    pub(crate) fn secret(&self, run: &Arc<str>, secret: Secret) {
        self.send(Msg::Secret {
            run: run.clone(),
            secret,
        });
    }

    pub(crate) fn artifact(&self, bytes: Vec<u8>) {
        self.send(Msg::Artifact { bytes });
    }

    pub(crate) fn run_closed(&self, run: &Arc<str>) {
        self.send(Msg::RunClosed { run: run.clone() });
    }

    /// Waits until everything filed before is appended and durable.
    pub(crate) async fn flush(&self) -> Result<(), String> {
        let (ack, done) = oneshot::channel();
        if !self.send(Msg::Flush { ack }) {
            return Err("the recorder has shut down".into());
        }
        done.await
            .map_err(|_| "the recorder's writer stopped".to_string())?
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

    /// The first write failure, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_failure(&self, f: String) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(f);
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
    archive: Archive,
    rx: mpsc::UnboundedReceiver<Msg>,
    in_flight: Arc<AtomicUsize>,
    room: Arc<Notify>,
    redactor: Redactor,
    inline_limit: usize,
    flush_every_batch: bool,
    secrets: HashMap<Arc<str>, Vec<Secret>>,
    failure: Arc<Mutex<Option<String>>>,
}

/// The most messages one drain takes before writing.
const DRAIN_MAX: usize = 8192;

/// The facts of `run` in this drain (the latest runs are the likeliest).
fn batch_of(batches: &mut Vec<(Arc<str>, Vec<NewFact>)>, run: Arc<str>) -> &mut Vec<NewFact> {
    let i = match batches.iter().rposition(|(r, _)| *r == run) {
        Some(i) => i,
        None => {
            // Sized for a call's worth of facts: growing from empty copies
            // each (376-byte) fact several times over.
            batches.push((run, Vec::with_capacity(64)));
            batches.len() - 1
        }
    };
    &mut batches[i].1
}

impl Writer {
    fn run(mut self) {
        let mut batches: Vec<(Arc<str>, Vec<NewFact>)> = Vec::new();
        let mut acks = Vec::new();
        let mut closed = Vec::new();
        while let Some(first) = self.rx.blocking_recv() {
            let mut n = 0;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Progress {
                        run,
                        call,
                        at,
                        offset,
                        progress,
                    } => {
                        n += 1;
                        let fact = NewFact {
                            at,
                            offset,
                            // Not `to_string()`: that goes through `Display`.
                            call: Some(String::from(&*call)),
                            kind: FactKind::Progress(progress),
                        };
                        batch_of(&mut batches, run).push(fact);
                    }
                    Msg::Fact { run, fact } => {
                        n += 1;
                        batch_of(&mut batches, run).push(*fact);
                    }
                    Msg::Secret { run, secret } => {
                        self.secrets.entry(run).or_default().push(secret)
                    }
                    Msg::Artifact { bytes } => {
                        if let Err(e) = self.archive.put_artifact(&bytes) {
                            self.fail(format!("storing an artifact failed: {e}"));
                        }
                    }
                    Msg::Flush { ack } => acks.push(ack),
                    Msg::RunClosed { run } => closed.push(run),
                    // Later sends fail; `blocking_recv` yields what is
                    // buffered, then ends the loop.
                    Msg::Close => self.rx.close(),
                }
                if n < DRAIN_MAX {
                    next = self.rx.try_recv().ok();
                }
            }
            self.write(&mut batches);
            for run in closed.drain(..) {
                self.secrets.remove(&run);
            }
            if !acks.is_empty() || self.flush_every_batch {
                let result = self.archive.flush().map(|_| ()).map_err(|e| e.to_string());
                if let Err(e) = &result {
                    self.fail(format!("flushing failed: {e}"));
                }
                let result = match self.failure() {
                    Some(f) => Err(f),
                    None => result,
                };
                for ack in acks.drain(..) {
                    let _ = ack.send(result.clone());
                }
            }
            self.in_flight.fetch_sub(n, Ordering::Relaxed);
            self.room.notify_waiters();
        }
        // The queue closed: make everything durable before the thread ends.
        if let Err(e) = self.archive.flush() {
            self.fail(format!("the final flush failed: {e}"));
        }
    }

    fn write(&mut self, batches: &mut Vec<(Arc<str>, Vec<NewFact>)>) {
        for (run, mut facts) in batches.drain(..) {
            // Values under secret-named keys of a call's args are scrubbed
            // from the rest of the run (an error may echo an argument).
            let mut found = Vec::new();
            for fact in &facts {
                if let FactKind::CallStarted(c) = &fact.kind {
                    self.redactor.secret_values(&c.args, &mut found);
                }
            }
            if !found.is_empty() {
                self.secrets
                    .entry(run.clone())
                    .or_default()
                    .extend(found.into_iter().map(Secret::new));
            }
            let secrets: Vec<&str> = self
                .secrets
                .get(&run)
                .map(|s| s.iter().map(Secret::expose).collect())
                .unwrap_or_default();
            let mut spill_err = None;
            for fact in &mut facts {
                self.redactor.redact_fact(&mut fact.kind, &secrets);
                let archive = &self.archive;
                spill_large(&mut fact.kind, self.inline_limit, |bytes| {
                    archive.put_artifact(bytes).unwrap_or_else(|e| {
                        spill_err = Some(e.to_string());
                        String::new()
                    })
                });
            }
            if let Some(e) = spill_err {
                self.fail(format!("run {run}: storing a large payload failed: {e}"));
            }
            // run.ended is a run's last fact: anything filed after it (a
            // late fact racing the end) is reported and dropped, never
            // allowed to take the run's real facts down with it.
            let late = match facts
                .iter()
                .position(|f| matches!(f.kind, FactKind::RunEnded(_)))
            {
                Some(end) => facts.split_off(end + 1),
                None => Vec::new(),
            };
            match self.archive.append(&run, facts) {
                Ok(_) => {}
                Err(ArchiveError::RunClosed { .. }) => {
                    eprintln!("reel-recorder: run {run}: facts filed after the run ended were not recorded");
                }
                Err(e) => self.fail(format!("run {run}: appending facts failed: {e}")),
            }
            if !late.is_empty() {
                eprintln!(
                    "reel-recorder: run {run}: {} fact(s) filed after run.ended were not recorded",
                    late.len()
                );
            }
        }
    }

    fn fail(&self, what: String) {
        eprintln!("reel-recorder: {what}");
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(what);
    }

    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::Msg;

    /// Every message is copied into the channel on the tool's thread: the
    /// progress report, the hot path, stays small and unboxed.
    #[test]
    fn messages_stay_small() {
        assert!(
            std::mem::size_of::<Msg>() <= 128,
            "Msg is {} bytes",
            std::mem::size_of::<Msg>()
        );
    }
}

//! The writer thread: drains the queue, times, redacts, guards, spills,
//! numbers and appends each run's facts, and has the flushes made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use reel::fact::{Fact, FactKind, NewFact, Progress};
use reel::redact::{spill_large, KnownSecrets, Redactor};
use reel::rules::{ends_stream, LateFact};
use reel::sequence::Sequencer;
use reel::store::{Store, StoreError};
use reel::tripwire::{tripped, Hit, Tripwire};
use serde_json::Value;
use tokio::sync::Notify;

use super::hold::Place;
use super::*;

pub(super) struct Writer {
    pub(super) store: Arc<dyn Store>,
    pub(super) rx: inbox::Receiver,
    pub(super) room: Arc<Notify>,
    pub(super) redactor: Redactor,
    /// Whether blocks go through the tripwire.
    pub(super) tripwire: bool,
    /// The tripwire's encoding buffer, reused.
    pub(super) buf: Vec<u8>,
    pub(super) inline_limit: usize,
    pub(super) flush_every_batch: bool,
    /// How long the writer waits after a drain that did not fill
    /// before it takes the next one (buffered durability only).
    pub(super) linger: Option<Duration>,
    /// The flusher thread, when the store flushes concurrently (see the
    /// module docs); else the writer flushes itself.
    pub(super) flusher: Option<(Arc<Flusher>, JoinHandle<()>)>,
    pub(super) failure: Arc<Mutex<Failures>>,
    pub(super) clock: quanta::Clock,
    /// What the writer keeps per open run.
    pub(super) runs: HashMap<Arc<str>, RunState>,
    /// The calls opened for progress reports, by key.
    pub(super) calls: HashMap<u64, CallSlot>,
    /// The streams holding facts back (see `hold`): what each drain looks
    /// at, not every open run.
    pub(super) holding: Vec<Arc<str>>,
}

/// What the writer keeps of an open run, until `run.ended` is written.
#[derive(Default)]
pub(super) struct RunState {
    /// The tick of the run's first fact (`run.started`): offset zero.
    start: Option<u64>,
    /// Secret values to scrub from the run's facts (memory only): resolved
    /// credentials, and values learned from secret-named keys of its facts.
    secrets: KnownSecrets,
    /// The run's resolved credentials and declared secrets, in raw and
    /// encoded forms: the last check of every block (memory only).
    wire: Tripwire,
    /// Keys of the run's calls in [`Writer::calls`].
    pub(super) calls: Vec<u64>,
    /// For a call outside any run: its call id, whose `call.ended` is the
    /// stream's last fact (as `run.ended` is a run's).
    pub(super) outside: Option<String>,
    /// Numbers the stream's facts and progress reports: the one numberer
    /// (`reel::sequence`), so every [`Store`] gets the same numbers.
    seq: Sequencer,
    /// A call outside any run: its facts numbered and not yet appended
    /// (see `hold`), and the tick of the first of them.
    pub(super) held: Vec<Fact>,
    pub(super) held_since: u64,
    /// The stream's end was appended: later facts are late.
    ended: bool,
}

/// A call that files progress reports.
pub(super) struct CallSlot {
    pub(super) run: Arc<str>,
    pub(super) call: Arc<str>,
}

/// A fact received, not yet timed: `tick` becomes `at` and `offset`.
pub(super) struct Pending {
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
pub(super) enum PendingFact {
    /// `progress { payload, count: 0 }` of `call`.
    Progress { call: Arc<str>, payload: Value },
    /// Any other fact.
    Other(Box<NewFact>),
}

impl Pending {
    /// The fact, unnumbered (seq 0), at `at` and `offset`.
    pub(super) fn into_fact(self, at: i64, offset: u64) -> Fact {
        match self.fact {
            PendingFact::Progress { call, payload } => Fact {
                seq: 0,
                at,
                offset,
                // Not `to_string()`: that goes through `Display`.
                call: Some(String::from(&*call)),
                // Numbered when the batch is (`Sequencer`).
                kind: FactKind::Progress(Progress {
                    payload,
                    count: 0,
                    delivered: false,
                }),
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

/// The most messages one drain takes before writing.
const DRAIN_MAX: usize = 8192;

/// How long the writer lingers after a drain that did not fill, under
/// buffered durability: what is filed meanwhile wakes no one (a send to a
/// parked `blocking_recv` is a futex wake, and the writer's wakeup a
/// context switch, per message) and is appended as one block. No caller
/// of a buffered recorder waits on the writer; an explicit flush waits at
/// most this much longer. The `mcp-record` bench row's proxy used about a
/// third less CPU with it.
pub(super) const LINGER: Duration = Duration::from_millis(1);

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
    pub(super) fn run(mut self) {
        let mut batches: Vec<(Arc<str>, Vec<Pending>)> = Vec::new();
        let mut spare: Vec<Vec<Pending>> = Vec::new();
        let mut acks = Vec::new();
        let mut closed = Vec::new();
        let mut closing = false;
        while let Some(first) = self.rx.recv() {
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
                    Msg::Secret { run, secret, fp } => {
                        let state = self.runs.entry(run).or_default();
                        if self.tripwire {
                            state.wire.add(secret.expose());
                        }
                        state.secrets.add_credential(secret, fp.as_ref())
                    }
                    Msg::Artifact(artifact) => {
                        if let Some((run, pending)) = self.artifact(*artifact) {
                            batch_of(&mut batches, &mut spare, &mut last, &run).push(pending);
                        }
                    }
                    Msg::Flush { run, ack } => acks.push((run, ack)),
                    Msg::RunClosed { run } => closed.push(run),
                    // Later sends fail; `recv` yields what is filed,
                    // then ends the loop.
                    Msg::Close => {
                        closing = true;
                        self.rx.close()
                    }
                }
                if n < DRAIN_MAX {
                    next = self.rx.try_recv();
                }
            }
            self.write(&mut batches, &mut spare);
            self.release_held(&acks, closing, self.clock.raw());
            self.settle(&mut closed, &mut acks);
            self.rx.written(n);
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

    pub(super) fn write(
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
                lock(&self.failure).dropped(&run, pending.len());
                pending.clear();
                if spare.len() < SPARE_MAX && pending.capacity() <= SPARE_CAP {
                    spare.push(pending);
                }
                continue;
            }
            let mut facts = self.prepare(&run, &mut pending, (wall, now));
            if spare.len() < SPARE_MAX && pending.capacity() <= SPARE_CAP {
                spare.push(pending);
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
            let ends = end.is_some();
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
                let mut failures = lock(&self.failure);
                failures.record("storing a large payload", Some(&run), facts.len(), &e);
                if failures.failed(&run) {
                    // A fact would refer to bytes the store does not
                    // have: the batch goes no further.
                    facts.clear();
                }
            }
            let place = self.place(&run, &facts, ends);
            self.append(&run, facts, late, place);
        }
    }

    /// Stores an artifact's bytes, unless the run's tripwire finds a
    /// secret in them: then the `redaction.tripped` fact to file instead.
    pub(super) fn artifact(&mut self, artifact: ArtifactBytes) -> Option<(Arc<str>, Pending)> {
        let ArtifactBytes {
            run,
            call,
            digest,
            tick,
            bytes,
        } = artifact;
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
                let fact = PendingFact::Other(Box::new(fact));
                return Some((run, Pending { tick, fact }));
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
        None
    }

    /// A run's pending facts as `Fact`s (seq 0 until numbered), stamped
    /// with their times, redacted one at a time with the run's secrets.
    pub(super) fn prepare(
        &mut self,
        run: &Arc<str>,
        pending: &mut Vec<Pending>,
        (wall, now): (i64, u64),
    ) -> Vec<Fact> {
        let start = self
            .runs
            .get(run)
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
        // One fact at a time, in order, with the run's secrets: a value
        // under a secret-named key joins them, and is scrubbed from the
        // rest of that fact and from every later fact of the run (an
        // error may echo an argument), never depending on where a
        // drain happened to cut the run's facts.
        let mut closed_run = KnownSecrets::new();
        let secrets = match self.runs.get_mut(run) {
            Some(state) => &mut state.secrets,
            // Facts of a run already forgotten (filed after its end).
            None => &mut closed_run,
        };
        for fact in &mut facts {
            self.redactor.redact_fact(&mut fact.kind, secrets);
        }
        facts
    }

    /// Numbers a run's facts (after the late ones were cut: the one
    /// numberer), appends them after any held before them (or, with
    /// [`Place::Hold`], holds them: see `hold`), and reports the late ones.
    pub(super) fn append(
        &mut self,
        run: &Arc<str>,
        mut facts: Vec<Fact>,
        late: Vec<Fact>,
        place: Place,
    ) {
        let Some(state) = self.runs.get_mut(run) else {
            return;
        };
        // Numbered here, after the late facts are cut: the one numberer.
        let mut first = state.seq.next_seq();
        for fact in &mut facts {
            state.seq.number_in_place(fact);
        }
        if place == Place::Hold {
            if state.held.is_empty() {
                state.held_since = self.clock.raw();
                self.holding.push(run.clone());
            }
            state.held.append(&mut facts);
            return;
        }
        if !state.held.is_empty() {
            self.holding.retain(|r| r != run);
            first = state.held[0].seq;
            let mut held = std::mem::take(&mut state.held);
            held.append(&mut facts);
            facts = held;
        }
        let count = facts.len();
        let appended = if facts.is_empty() {
            Ok(())
        } else {
            self.store.append_batch(run, facts)
        };
        match appended {
            Ok(()) => {}
            Err(StoreError::StreamClosed { .. }) => {
                if let Some(state) = self.runs.get_mut(run) {
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
                if let Some(state) = self.runs.get_mut(run) {
                    state.seq.rewind(first);
                }
                self.fail("appending facts", Some(run), count, &e);
            }
        }
        if !late.is_empty() {
            let kind = match late
                .iter()
                .map(|f| f.kind.name())
                .collect::<std::collections::BTreeSet<_>>()
            {
                kinds if kinds.len() == 1 => kinds.into_iter().next().unwrap_or("fact").to_owned(),
                _ => "fact".to_owned(),
            };
            report_late(&LateFact {
                stream: run.to_string(),
                kind,
                count: late.len(),
            });
        }
    }

    /// Keeps a failure (see [`Failures::record`]).
    pub(super) fn fail(&self, what: &str, run: Option<&str>, dropped: usize, e: &StoreError) {
        lock(&self.failure).record(what, run, dropped, e);
    }

    pub(super) fn failed(&self, run: &str) -> bool {
        lock(&self.failure).failed(run)
    }
}

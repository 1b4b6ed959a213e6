//! The replay engine: re-drives recorded calls with a replay context that
//! serves every answer from the record and matches every fact the tool files
//! against it, in order.
//!
//! This module drives the calls (run-level facts, each top-level call,
//! children served or re-driven) and collects the re-derived timeline;
//! `call.rs` re-drives one call; `backend.rs` is the context's backend that answers and matches; the
//! report's types are the core's (`reel::report`), re-exported here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use reel::context::*;
use reel::fact::*;
use reel::redact::{KnownSecrets, Redactor};
use reel::tools::Tools;
use reel::Fact;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::recording::{RecordedCall, Recording};
use reel_core::matching::{diff_kinds, kind_json, resolve_refs, show, FieldDiff, IgnoreRule};

mod backend;
mod call;
use backend::{divergence, CallState, ReplayBackend};
use call::replay_call;
use reel::report::{CallReport, Divergence, DivergenceKind, ReplayReport, ResultCheck, Verdict};

/// How strictly to replay.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplayOptions {
    /// Fields to ignore when matching (JSON pointers per kind).
    pub ignore: Vec<IgnoreRule>,
    /// Compare only each call's result, not its facts.
    pub results_only: bool,
    /// Replay only this top-level call.
    pub only_call: Option<String>,
    /// Test credentials by need; a need without one gets a stand-in that
    /// carries the recorded fingerprint.
    pub credentials: BTreeMap<String, String>,
    /// Extra key names that were redacted when recording (the recorder's
    /// `redact_keys`), so that replayed facts are redacted the same way.
    pub redact_keys: Vec<String>,
    /// Serve child calls from the record even when their tool is registered.
    pub serve_children: bool,
    /// Typed services the replayed tools get with `ctx.get::<T>()`, as the
    /// host registered them live: services are not facts, so the test
    /// registers its own (see [`ReplayOptions::service`]). Not serialised.
    #[serde(skip)]
    pub services: Services,
    /// The fingerprint key the recording was keyed under (see
    /// [`ReplayOptions::keyed`]). Not serialised.
    #[serde(skip)]
    pub keys: Option<reel_archive::Keyring>,
}

impl ReplayOptions {
    /// Registers `service` as the `T` every replayed call's
    /// `ctx.get::<T>()` returns (a test double, or the real thing).
    pub fn service<T: Send + Sync + 'static>(mut self, service: Arc<T>) -> ReplayOptions {
        self.services.insert(service);
        self
    }

    /// Replays under the fingerprint key the recording was made with
    /// (`archive.keyring()` of the recording's archive, or
    /// `Keyring::new(&FingerprintKey::User)` on the machine that recorded),
    /// which proves two things a replay without it cannot:
    ///
    /// - a value redaction hid: the recorder wrote a keyed marker
    ///   (`[REDACTED:` 16 hex `]`) in its place, the replay keys the value
    ///   its tool produced the same way, and equal markers show the value
    ///   unchanged ("exact", not "unproven"); a different one is a
    ///   divergence at its pointer;
    /// - every teardown key a tool registers, keyed and compared with the
    ///   record. Without the key each is bound to the recorded hash at its
    ///   place, which sees a key used where the record has another one
    ///   already bound, but not a renaming of keys the record uses nowhere
    ///   else (the book's Secrets page).
    ///
    /// Without it (another machine, a tape alone) hidden values are
    /// reported unproven; a credential's place is still shown, its marker
    /// coming from its recorded fingerprint.
    pub fn keyed(mut self, keys: &reel_archive::Keyring) -> ReplayOptions {
        self.keys = Some(keys.clone());
        self
    }

    /// Ignores `pointer` (into the fields) of every fact of `kind`.
    pub fn ignore(mut self, kind: &str, pointer: &str) -> ReplayOptions {
        self.ignore.push(IgnoreRule {
            kind: Some(kind.into()),
            pointer: pointer.into(),
        });
        self
    }
}

/// A recording handed to [`replay`]: borrowed (copied into the replay
/// once), owned (moved in: nothing is copied), or a tape read for this
/// replay alone ([`ReplayInput::from_tape`]: not even indexed by copy,
/// which is what a one-shot replay of a tape just read wants).
#[derive(Debug)]
pub enum ReplayInput<'a> {
    /// Borrowed: the caller keeps the recording.
    Borrowed(&'a Recording),
    /// Owned: the replay takes it (boxed: a recording is large to move).
    Owned(Box<Recording>),
    /// A tape indexed for one replay ([`ReplayInput::from_tape`]).
    Tape(Box<TapeRecording>),
}

/// A tape indexed for one replay: each call's facts moved into the call
/// (a [`Recording`] holds every fact twice, in `facts` and in its call,
/// which costs a copy of each; indexing a tape of 20,000 facts that way
/// took a fifth of the time reading it did). Made by
/// [`ReplayInput::from_tape`]; only [`replay`] reads it.
#[derive(Debug)]
pub struct TapeRecording(Recording);

impl ReplayInput<'static> {
    /// Indexes `tape` (read from `source`, which the report names) for one
    /// replay, moving its facts instead of copying them. Fails as
    /// [`Recording::from_tape`] does: a tape that begins neither with
    /// `run.started` nor with the `call.started` of a call outside any run.
    ///
    /// ```
    /// # use reel_replayer::{replay, ReplayInput, ReplayOptions};
    /// # use reel::tools::Tools;
    /// # async fn example(bytes: &[u8], tools: &Tools) -> Result<(), Box<dyn std::error::Error>> {
    /// let tape = reel::tape::Tape::read(bytes)?;
    /// let report = replay(ReplayInput::from_tape("search.tape", tape)?, tools, &ReplayOptions::default()).await;
    /// assert!(report.is_match(), "{report}");
    /// # Ok(()) }
    /// ```
    pub fn from_tape(
        source: impl Into<String>,
        tape: reel::tape::Tape,
    ) -> Result<ReplayInput<'static>, crate::LoadError> {
        Recording::index_moved(source.into(), tape)
            .map(|r| ReplayInput::Tape(Box::new(TapeRecording(r))))
    }
}

impl<'a> From<&'a Recording> for ReplayInput<'a> {
    fn from(recording: &'a Recording) -> Self {
        ReplayInput::Borrowed(recording)
    }
}

impl From<Recording> for ReplayInput<'_> {
    fn from(recording: Recording) -> Self {
        ReplayInput::Owned(Box::new(recording))
    }
}

impl ReplayInput<'_> {
    fn into_owned(self) -> Recording {
        match self {
            ReplayInput::Borrowed(r) => r.clone(),
            ReplayInput::Owned(r) => *r,
            ReplayInput::Tape(t) => t.0,
        }
    }
}

/// Replays a recording against `tools`: `&recording` to keep it, or the
/// recording itself to save copying it.
pub async fn replay<'r>(
    recording: impl Into<ReplayInput<'r>>,
    tools: &Tools,
    options: &ReplayOptions,
) -> ReplayReport {
    let input = recording.into();
    // A tape's index keeps in `facts` only what no call holds (see
    // `Recording::index_moved`); a recording keeps every fact there.
    let moved = matches!(input, ReplayInput::Tape(_));
    let mut recording = input.into_owned();
    // Each call once, shared by its backend and its parent's dispatch, with
    // its payloads stored as artifacts put back in place.
    let calls: HashMap<String, Arc<RecordedCall>> = std::mem::take(&mut recording.calls)
        .into_iter()
        .map(|(id, call)| (id, Arc::new(resolved_call(call, &recording.artifacts))))
        .collect();
    let recorded = recording.facts.len()
        + if moved {
            calls.values().map(|c| c.facts.len()).sum()
        } else {
            0
        };
    // The run's own facts up to the first fact of a call go first, the
    // rest after the calls: in a recording, those before the first fact of
    // a call as they stand; in a tape's index (in seq order), those before
    // the first seq any call holds.
    let first_call_at = if moved {
        let first = recording
            .facts
            .iter()
            .filter(|f| f.call.is_some())
            .map(|f| f.seq)
            .chain(
                calls
                    .values()
                    .filter_map(|c| c.facts.first())
                    .map(|f| f.seq),
            )
            .min();
        recording
            .facts
            .partition_point(|f| first.is_none_or(|s| f.seq < s))
    } else {
        recording
            .facts
            .iter()
            .take_while(|f| f.call.is_none())
            .count()
    };
    let out = Out {
        // Every recorded fact has its replayed counterpart: one allocation.
        facts: Vec::with_capacity(recorded),
        ..Out::default()
    };
    let session = Arc::new(Session {
        moved,
        recording,
        calls,
        tools: tools.clone(),
        redactor: match &options.keys {
            Some(keys) => Redactor::new(&options.redact_keys).keyed({
                let keys = keys.clone();
                reel::redact::Tagger::new(move |b| keys.keyed_mac(reel::redact::TAG_PURPOSE, b))
            }),
            None => Redactor::new(&options.redact_keys),
        },
        options: options.clone(),
        out: Mutex::new(out),
        run_teardowns: Mutex::new(HashMap::new()),
        teardown_hashes: Mutex::new(TeardownHashes::default()),
    });
    let recording = &session.recording;
    let (before_calls, after_calls) = recording.facts.split_at(first_call_at);
    // Run-level facts before the first call (run.started) go first.
    {
        let mut out = session.lock_out();
        for f in before_calls.iter().filter(|f| f.call.is_none()) {
            out.push_fact(f.at, f.offset, None, f.kind.clone());
        }
    }
    // Top-level calls (no parent), in start order.
    for id in &recording.call_order {
        let Some(call) = session.calls.get(id) else {
            continue;
        };
        if call.started.parent_call.is_some()
            || options
                .only_call
                .as_deref()
                .is_some_and(|only| only != call.started.call_id)
        {
            continue;
        }
        let _ = replay_call(&session, call.clone(), None, CancelHandle::new()).await;
    }
    // Run-level facts after the calls began (run-scoped cleanups, run.ended).
    {
        let mut out = session.lock_out();
        for f in after_calls.iter().filter(|f| f.call.is_none()) {
            out.push_fact(f.at, f.offset, None, f.kind.clone());
        }
    }
    let out = std::mem::take(&mut *session.lock_out());
    let mut calls = out.calls;
    calls.sort_by_key(|(order, _)| *order);
    let calls: Vec<_> = calls.into_iter().map(|(_, c)| c).collect();
    ReplayReport {
        source: recording.source.clone(),
        run_id: recording.head.key().to_owned(),
        outside_run: recording.head.run_id().is_none(),
        summary: reel_core::report::ReplaySummary::of(&calls),
        calls,
        facts: out.facts,
        matched_facts: out.matched,
    }
}

struct Session {
    /// The recording came from [`ReplayInput::Tape`]: its `facts` hold only
    /// the facts of no call (see `Recording::index_moved`).
    moved: bool,
    /// The recording, its calls taken out into `calls`.
    recording: Recording,
    /// The recorded calls by id, resolved (see `resolved_call`).
    calls: HashMap<String, Arc<RecordedCall>>,
    tools: Tools,
    redactor: Redactor,
    options: ReplayOptions,
    out: Mutex<Out>,
    /// Run- and session-scoped registrations so far, per `scope:key_hash`.
    run_teardowns: Mutex<HashMap<String, u64>>,
    /// Which recorded (keyed) hash each teardown key of this replay stands
    /// for.
    teardown_hashes: Mutex<TeardownHashes>,
}

/// The recorder keys teardown key hashes under a key a replay does not
/// have, so a replay cannot compute them. It binds instead: the first
/// time the tool registers a key (tool, scope, key), the key is bound to
/// the keyed hash the record holds at that place, and from then on stands
/// for it; a recorded hash already bound to another key is not bound
/// again. So a replay that registers the same keys as the record, in the
/// same places, matches it on any machine, and one that registers a key
/// where the record has another, or one key where the record has two, or
/// two where it has one, diverges. (What it cannot see is a consistent
/// renaming: keys `a`, `b` registered as `b`, `a` throughout; given the
/// key, [`ReplayOptions::keyed`], the replay computes the keyed
/// hash and sees that too.) A recorded unkeyed `sha256:` hash (an older
/// archive) is computed as it was.
#[derive(Default)]
struct TeardownHashes {
    /// The key's unkeyed hash (memory only) to the recorded hash.
    by_key: HashMap<String, String>,
    /// The recorded hashes bound so far.
    bound: HashSet<String>,
}

#[derive(Default)]
struct Out {
    facts: Vec<Fact>,
    /// Numbers the re-derived facts (the one numberer).
    seq: reel::sequence::Sequencer,
    calls: Vec<(u64, CallReport)>,
    matched: u64,
}

impl Out {
    fn push_fact(&mut self, at: i64, offset: u64, call: Option<&str>, kind: FactKind) {
        let fact = self.seq.number(reel::fact::NewFact {
            at,
            offset,
            call: call.map(str::to_owned),
            kind,
        });
        self.facts.push(fact);
    }
}

impl Session {
    fn lock_out(&self) -> std::sync::MutexGuard<'_, Out> {
        reel_core::lock::lock(&self.out)
    }
}

fn outcome_of(result: &Result<Value, ToolError>, reason: Option<String>) -> CallOutcome {
    match result {
        Ok(v) => CallOutcome::Ok { result: v.clone() },
        Err(e) if e.is_cancelled() => CallOutcome::Aborted { reason },
        Err(e) => CallOutcome::Error {
            error: e.to_string(),
            result: e.result().cloned(),
        },
    }
}

/// The call with its payloads that were stored as artifacts (too large to
/// keep inline) put back in place: the tool gets its recorded arguments, and
/// the recorded result compares with the replayed one.
fn resolved_call(mut call: RecordedCall, artifacts: &HashMap<String, Vec<u8>>) -> RecordedCall {
    if artifacts.is_empty() {
        // Nothing was stored as an artifact: nothing to put back.
        return call;
    }
    let mut started = FactKind::CallStarted(call.started.clone());
    resolve_refs(&mut started, artifacts);
    if let FactKind::CallStarted(s) = started {
        call.started = s;
    }
    for f in &mut call.facts {
        resolve_refs(&mut f.kind, artifacts);
    }
    call
}

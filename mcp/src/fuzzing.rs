//! Entry points for the fuzz targets (`fuzz/`): what maps untrusted MCP
//! messages to facts. Not part of the API; hidden from the docs.
//!
//! [`link_session`] is the recording proxy's linker over a session of
//! arbitrary lines, recorded by the real recorder into memory and checked
//! against the stream rules, then loaded as the mock loads a tape
//! ([`crate::cassette::Session::from_tape`]) and matched against; the
//! streamable HTTP proxy's SSE reader and request reader, and the mock's
//! `requestState` opener, run on the same bytes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use reel::fact::{Fact, FactKind, RunStatus};
use reel::lock::lock;
use reel::rules::StreamRules;
use reel::run::RunRecord;
use reel::store::{Store, StoreError};
use reel::tape::Tape;
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use serde_json::Value;

use crate::proxy::link::{Dir, Router};

/// Keeps each stream's facts in memory.
#[derive(Default)]
struct Memory {
    streams: Mutex<HashMap<String, Vec<Fact>>>,
}

impl Store for Memory {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        lock(&self.streams)
            .entry(stream.to_owned())
            .or_default()
            .extend(facts);
        Ok(())
    }

    fn put_artifact(&self, _bytes: &[u8]) -> Result<String, StoreError> {
        Ok(format!("sha256:{}", "0".repeat(64)))
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn close_stream(&self, _stream: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

struct Harness {
    rt: tokio::runtime::Runtime,
    recorder: Recorder,
    memory: Arc<Memory>,
    _dir: tempfile::TempDir,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let memory = Arc::new(Memory::default());
        let recorder = rt.block_on(async {
            let archive = Archive::open(
                dir.path().join("archive"),
                ArchiveConfig {
                    fingerprint_key: FingerprintKey::Key([7; 32]),
                    ..ArchiveConfig::default()
                },
            )
            .expect("an archive");
            Recorder::with_archive_and_store(
                archive,
                memory.clone(),
                RecorderConfig {
                    fingerprint_key: FingerprintKey::Key([7; 32]),
                    serve_live: false,
                    ..RecorderConfig::default()
                },
            )
            .expect("a recorder")
        });
        Harness {
            rt,
            recorder,
            memory,
            _dir: dir,
        }
    })
}

/// The lines of a fuzz input: `>` starts a client-to-server line, `<` a
/// server-to-client one; any other line goes from the server.
fn lines(input: &[u8]) -> impl Iterator<Item = (Dir, &[u8])> {
    input.split(|b| *b == b'\n').map(|line| match line.first() {
        Some(b'>') => (Dir::ClientToServer, &line[1..]),
        Some(b'<') => (Dir::ServerToClient, &line[1..]),
        _ => (Dir::ServerToClient, line),
    })
}

/// Links the session `input` (lines as [`lines`] reads them) as the stdio
/// proxy does, ends it, and returns the run's facts after checking them
/// against the stream rules. Panics when a rule is broken (a bug).
pub fn link_session(input: &[u8]) -> Vec<Fact> {
    let h = harness();
    let id = format!("mcp-{:032x}", rand::random::<u128>());
    let facts = h.rt.block_on(async {
        let run = h
            .recorder
            .start_run(RunStart::new(id.clone()))
            .await
            .expect("a run starts");
        let router = Router::new(Some(run.clone()));
        for (dir, line) in lines(input) {
            router.observe(dir, line);
        }
        router.close().await;
        run.end(RunStatus::Completed).await.expect("the run ends");
        h.recorder.flush().await.expect("the facts are filed");
        lock(&h.memory.streams).remove(&id).unwrap_or_default()
    });
    let mut rules = StreamRules::new(id.clone());
    for fact in &facts {
        if let Err(v) = rules.check(fact) {
            panic!("the linker filed a fact the stream rules refuse: {v:?} ({fact:?})");
        }
    }
    assert!(
        matches!(facts.last().map(|f| &f.kind), Some(FactKind::RunEnded(_))),
        "the stream ends with run.ended"
    );
    facts
}

/// [`link_session`], then the run loaded as `reel mcp mock` loads a tape,
/// and each recorded call matched against its own arguments (a hit) and
/// against changed ones (never a panic).
pub fn link_and_mock(input: &[u8]) {
    let facts = link_session(input);
    let Some(mut record) = facts.first().and_then(RunRecord::from_first) else {
        panic!("the stream starts with run.started");
    };
    for fact in &facts {
        record.observe(fact);
    }
    let tape = Tape::new(record, facts, Vec::new());
    let Ok(session) = crate::cassette::Session::from_tape(&tape, "fuzz".into()) else {
        return;
    };
    let mut used = vec![false; session.calls.len()];
    for (i, call) in session.calls.iter().enumerate() {
        match crate::cassette::matching::find(&session.calls, &used, &call.tool, &call.args, &[]) {
            crate::cassette::Match::Hit(j) => {
                assert!(
                    session.calls[j].tool == call.tool && j <= i,
                    "a hit is a call of that tool, the first unanswered"
                );
                used[j] = true;
            }
            crate::cassette::Match::Miss { .. } => {
                panic!("a recorded call does not match its own arguments")
            }
        }
        let changed = serde_json::json!({ "changed": call.args.clone() });
        let _ = crate::cassette::matching::find(&session.calls, &used, &call.tool, &changed, &[]);
    }
}

/// The HTTP proxy's readers on `input`: the SSE parser (fed whole, and
/// split at every tenth byte, which must give the same events) and the
/// request reader.
pub fn http_readers(input: &[u8]) {
    let mut whole = crate::proxy::http::Sse::default();
    let once = whole.feed(input);
    let mut split = crate::proxy::http::Sse::default();
    let mut parts = Vec::new();
    for chunk in input.chunks(10) {
        parts.extend(split.feed(chunk));
    }
    assert_eq!(once, parts, "chunking changes no event");
    let _ = crate::proxy::http::requests(input);
}

/// The mock's `requestState` opener on an arbitrary state: never opens
/// one it did not seal.
pub fn open_request_state(input: &[u8]) {
    let rounds = crate::cassette::rounds::Rounds::new();
    let state = String::from_utf8_lossy(input);
    let answers: BTreeMap<String, Value> = BTreeMap::new();
    assert!(
        rounds.resume(&state, "tool", Some(&answers)).is_err(),
        "a state this mock did not seal is refused"
    );
}

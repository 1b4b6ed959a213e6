//! The recorder takes any store (`Recorder::with_store`): here one that is
//! not the archive and has none beside it, kept in memory, holding every
//! batch to the stream rules as the archive does. A run with a tool call,
//! progress and a spilled payload (an artifact) reaches it as the facts
//! and bytes the archive stores for the same run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reel::context::{ToolContext, ToolError};
use reel::fact::{Fact, FactKind, RunStatus};
use reel_archive::{FingerprintKey, Store, StoreError, StreamRules};
use reel_recorder::{Recorder, RecorderConfig, RecorderError, RunStart};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

/// Facts in a Vec, artifacts by digest, each stream checked by its rules.
#[derive(Default)]
struct MemoryStore {
    facts: Mutex<Vec<(String, Fact)>>,
    rules: Mutex<HashMap<String, StreamRules>>,
    artifacts: Mutex<HashMap<String, Vec<u8>>>,
}

impl Store for MemoryStore {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        let mut rules = self.rules.lock().unwrap();
        // Whole or not at all: checked on a copy of where the stream stands.
        let mut next = rules
            .get(stream)
            .cloned()
            .unwrap_or_else(|| StreamRules::new(stream));
        for fact in &facts {
            next.check(fact)
                .map_err(|v| StoreError::stream(stream, v.to_string()))?;
        }
        rules.insert(stream.to_owned(), next);
        let mut kept = self.facts.lock().unwrap();
        kept.extend(facts.into_iter().map(|f| (stream.to_owned(), f)));
        Ok(())
    }

    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
        self.artifacts
            .lock()
            .unwrap()
            .insert(digest.clone(), bytes.to_vec());
        Ok(digest)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn close_stream(&self, _stream: &str) -> Result<(), StoreError> {
        Ok(())
    }

    fn has_stream(&self, stream: &str) -> Result<bool, StoreError> {
        Ok(self.rules.lock().unwrap().contains_key(stream))
    }
}

impl MemoryStore {
    fn facts(&self, stream: &str) -> Vec<Fact> {
        let kept = self.facts.lock().unwrap();
        kept.iter()
            .filter(|(s, _)| s == stream)
            .map(|(_, f)| f.clone())
            .collect()
    }
}

fn config() -> RecorderConfig {
    RecorderConfig {
        fingerprint_key: FingerprintKey::Key([5; 32]),
        serve_live: false,
        // A result this large is spilled into an artifact.
        inline_limit: 1024,
        ..RecorderConfig::default()
    }
}

async fn tool(ctx: ToolContext, n: u32) -> Result<Value, ToolError> {
    for i in 0..n {
        ctx.progress(json!({ "message": format!("step {i}") }));
    }
    Ok(json!({ "report": "x".repeat(4096) }))
}

/// Records the workload through `recorder` and shuts it down.
async fn workload(recorder: Recorder) {
    let run = recorder
        .start_run(RunStart::new("r1"))
        .await
        .expect("start");
    let out = run.call("work", 3u32).invoke(tool).await.expect("call");
    assert_eq!(out["report"].as_str().map(str::len), Some(4096));
    run.end(RunStatus::Completed).await.expect("end");
    recorder.shutdown().await.expect("shutdown");
}

/// A fact as JSON without what differs between two recordings of the same
/// run: clock readings, durations and generated invocation ids.
fn comparable(fact: &Fact) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                for key in ["at", "offset", "duration_ns", "invocation_id"] {
                    if o.contains_key(key) {
                        o.insert(key.into(), Value::Null);
                    }
                }
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(fact).expect("serialises");
    strip(&mut v);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_not_the_archive_records_what_the_archive_would() {
    // The run into the archive.
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::open(dir.path(), config()).await.expect("open");
    let archive = recorder.archive().clone();
    workload(recorder).await;
    let stored: Vec<Fact> = archive
        .facts("r1", ..)
        .expect("facts")
        .collect::<Result<_, _>>()
        .expect("read");

    // The same run into memory, with no archive anywhere.
    let memory = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(memory.clone(), config()).expect("recorder");
    assert!(recorder.try_archive().is_none());
    workload(recorder).await;
    let received = memory.facts("r1");

    assert_eq!(
        received.iter().map(comparable).collect::<Vec<_>>(),
        stored.iter().map(comparable).collect::<Vec<_>>()
    );
    let kinds: Vec<&str> = received.iter().map(|f| f.kind.name()).collect();
    assert!(kinds.contains(&"progress"), "{kinds:?}");
    assert!(kinds.contains(&"call.ended"), "{kinds:?}");
    // The spilled result: the same bytes under the same digest.
    let artifacts = memory.artifacts.lock().unwrap().clone();
    assert_eq!(artifacts.len(), 1, "one spilled payload");
    for (digest, bytes) in &artifacts {
        assert_eq!(archive.artifact(digest).expect("read"), Some(bytes.clone()));
        assert!(serde_json::to_string(&received)
            .expect("json")
            .contains(digest.trim_start_matches("sha256:")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_id_the_store_holds_is_refused() {
    let memory = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(memory.clone(), config()).expect("recorder");
    let run = recorder
        .start_run(RunStart::new("r1"))
        .await
        .expect("start");
    run.end(RunStatus::Completed).await.expect("end");
    recorder.shutdown().await.expect("shutdown");

    // A new recorder over the same store: the store says the id is taken.
    let recorder = Recorder::with_store(memory.clone(), config()).expect("recorder");
    match recorder.start_run(RunStart::new("r1")).await {
        Err(RecorderError::RunExists(id)) => assert_eq!(id, "r1"),
        other => panic!("expected RunExists, got {:?}", other.map(|_| ())),
    }
    assert!(matches!(
        memory.facts("r1").last().map(|f| &f.kind),
        Some(FactKind::RunEnded(_))
    ));
}

//! The write pipeline targets a storage trait (`reel_archive::Store`): a
//! second implementation, an in-memory store that keeps every batch it is
//! given, receives through `Recorder::with_store` exactly the facts the
//! same run stores in the archive: the same kinds, calls, payloads, seqs
//! and progress counts, redacted the same, numbered by the writer's one
//! sequencer; only the clock readings and the generated ids differ. A
//! store that cannot make a call's facts durable keeps its result from the
//! host (call-boundary durability).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reel::context::{ContextError, ToolContext, ToolError};
use reel::fact::{Fact, FactKind, Level, RunStatus};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey, Store, StoreError};
use reel_recorder::{Durability, MemoryVault, Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};

const SECRET: &str = "s3cr3t-canary-7f1e";

/// Keeps every batch, per stream, in order.
#[derive(Default)]
struct MemoryStore {
    batches: Mutex<Vec<(String, Vec<Fact>)>>,
    artifacts: Mutex<Vec<Vec<u8>>>,
    flushes: Mutex<usize>,
    closed: Mutex<Vec<String>>,
    /// Every flush fails (a disk or a cluster gone).
    failing: AtomicBool,
}

impl Store for MemoryStore {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        self.batches
            .lock()
            .unwrap()
            .push((stream.to_owned(), facts));
        Ok(())
    }

    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.artifacts.lock().unwrap().push(bytes.to_vec());
        Ok(format!("sha256:{}", "0".repeat(64)))
    }

    fn flush(&self) -> Result<(), StoreError> {
        *self.flushes.lock().unwrap() += 1;
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Other("the device went away".into()));
        }
        Ok(())
    }

    fn close_stream(&self, stream: &str) -> Result<(), StoreError> {
        self.closed.lock().unwrap().push(stream.to_owned());
        Ok(())
    }
}

impl MemoryStore {
    fn facts(&self, stream: &str) -> Vec<Fact> {
        self.batches
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| s == stream)
            .flat_map(|(_, facts)| facts.clone())
            .collect()
    }
}

async fn tool(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
    let token = ctx.credential("api").await?;
    assert_eq!(token.secret().expose(), SECRET);
    let other = ctx.clone();
    for i in 0..n {
        ctx.progress(json!({ "message": format!("step {i}"), "echo": SECRET }));
        other.progress(json!({ "from": "clone", "i": i }));
    }
    ctx.log(Level::Info, json!({ "token": SECRET, "n": n }));
    let doubled = ctx
        .effect("double", &n, move || async move { Ok::<_, String>(n * 2) })
        .await?;
    Ok(doubled)
}

/// The archive a recorder over a memory store reads from (run ids, the
/// fingerprint key): nothing is written to it.
fn reads_archive(dir: &std::path::Path) -> Archive {
    Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([3; 32]),
            ..ArchiveConfig::default()
        },
    )
    .expect("open")
}

fn config() -> RecorderConfig {
    RecorderConfig {
        fingerprint_key: FingerprintKey::Key([3; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    }
}

/// Records the workload through `recorder` and shuts it down.
async fn workload(recorder: Recorder) {
    let run = recorder
        .start_run(RunStart::new("r1"))
        .await
        .expect("start");
    let vault = Arc::new(MemoryVault::new().with("api", SECRET));
    for n in [3u32, 2] {
        let out = run
            .call("work", n)
            .credentials(vault.clone())
            .invoke(tool)
            .await
            .expect("call");
        assert_eq!(out, n * 2);
    }
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
async fn a_second_store_receives_exactly_the_facts_the_archive_stores() {
    // The real run, into the archive.
    let real_dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::open(real_dir.path(), config())
        .await
        .expect("open");
    let archive = recorder.archive().clone();
    workload(recorder).await;
    let stored: Vec<Fact> = archive
        .facts("r1", ..)
        .expect("facts")
        .collect::<Result<_, _>>()
        .expect("read");

    // The same run, into the memory store.
    let dir = tempfile::tempdir().expect("tempdir");
    let reads = reads_archive(dir.path());
    let memory = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(reads.clone(), memory.clone(), config()).expect("recorder");
    workload(recorder).await;
    let received = memory.facts("r1");

    // Nothing reached the archive the recorder reads from.
    assert!(reads.run("r1").is_err());
    assert_eq!(
        received.iter().map(comparable).collect::<Vec<_>>(),
        stored.iter().map(comparable).collect::<Vec<_>>()
    );
    // Numbered by the writer: gapless seqs, progress counted per call in
    // filing order (both clones of the context).
    assert_eq!(
        received.iter().map(|f| f.seq).collect::<Vec<_>>(),
        (0..received.len() as u64).collect::<Vec<_>>()
    );
    for call in ["c1", "c2"] {
        let counts: Vec<u64> = received
            .iter()
            .filter(|f| f.call.as_deref() == Some(call))
            .filter_map(|f| match &f.kind {
                FactKind::Progress(p) => Some(p.count),
                _ => None,
            })
            .collect();
        let n = if call == "c1" { 6 } else { 4 };
        assert_eq!(counts, (1..=n).collect::<Vec<u64>>(), "{call}");
    }
    // Timed and redacted by the writer before the store sees them.
    assert!(received.iter().all(|f| f.at > 0));
    let text = serde_json::to_string(&received).expect("json");
    assert!(!text.contains(SECRET), "a secret reached the store");
    // Flushed at call boundaries, and told the stream is closed.
    assert!(*memory.flushes.lock().unwrap() >= 3);
    assert_eq!(*memory.closed.lock().unwrap(), vec!["r1".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_filed_after_the_run_ended_never_reach_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reads = reads_archive(dir.path());
    let memory = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(reads, memory.clone(), config()).expect("recorder");
    let run = recorder
        .start_run(RunStart::new("r2"))
        .await
        .expect("start");
    let kept: Arc<Mutex<Option<ToolContext>>> = Arc::default();
    let keep = kept.clone();
    run.call("keeps", 0)
        .invoke(move |ctx: ToolContext, _: u32| async move {
            *keep.lock().unwrap() = Some(ctx.clone());
            ctx.progress(json!({ "message": "in time" }));
            Ok::<_, ToolError>(0u32)
        })
        .await
        .expect("call");
    let canceller = run.call("never", 0).canceller();
    run.end(RunStatus::Completed).await.expect("end");
    // After run.ended: a progress report, a log and a cancel, all late.
    let ctx = kept.lock().unwrap().take().expect("kept");
    ctx.progress(json!({ "message": "too late" }));
    ctx.log(Level::Info, "too late");
    canceller.cancel(Some("too late"));
    recorder.shutdown().await.expect("shutdown");

    let received = memory.facts("r2");
    let kinds: Vec<&str> = received.iter().map(|f| f.kind.name()).collect();
    assert_eq!(kinds.last(), Some(&"run.ended"), "{kinds:?}");
    let text = serde_json::to_string(&received).expect("json");
    assert!(!text.contains("too late"), "{kinds:?}");
    assert!(text.contains("in time"));
}

async fn doubler(_ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
    Ok(n * 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_whose_facts_are_not_durable_is_not_handed_back() {
    for durability in [Durability::CallBoundary, Durability::Buffered] {
        let dir = tempfile::tempdir().expect("tempdir");
        let reads = reads_archive(dir.path());
        let memory = Arc::new(MemoryStore::default());
        let config = RecorderConfig {
            durability,
            ..config()
        };
        let recorder = Recorder::with_store(reads, memory.clone(), config).expect("recorder");
        let run = recorder
            .start_run(RunStart::new("r1"))
            .await
            .expect("start");
        let out = run.call("double", 2u32).invoke(doubler).await;
        assert_eq!(out.expect("a durable call"), 4, "{durability:?}");

        memory.failing.store(true, Ordering::SeqCst);
        let out = run.call("double", 3u32).invoke(doubler).await;
        match durability {
            // The host is told, not handed a result nothing says is recorded.
            Durability::CallBoundary => {
                let err = out.expect_err("a call whose facts could not be made durable");
                assert!(
                    matches!(&err, ToolError::Context(ContextError::NotRecorded { detail }) if detail.contains("the device went away")),
                    "{err:?}"
                );
                assert!(err.to_string().contains("its result is withheld"), "{err}");
            }
            // Buffered durability never waits for the store: the result.
            _ => assert_eq!(out.expect("a buffered call"), 6),
        }
        // The store failed to flush, not to take the facts: both calls'
        // ends reached it (the shutdown's final flush fails too, and says so).
        assert!(recorder.shutdown().await.is_err(), "{durability:?}");
        let ends = memory
            .facts("r1")
            .iter()
            .filter(|f| matches!(f.kind, FactKind::CallEnded(_)))
            .count();
        assert_eq!(ends, 2, "{durability:?}");
    }
}

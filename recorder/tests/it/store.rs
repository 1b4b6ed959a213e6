//! The write pipeline targets a storage trait (`reel::store::Store`): a
//! second implementation, an in-memory store that keeps every batch it is
//! given, receives through `Recorder::with_archive_and_store` exactly the facts the
//! same run stores in the archive: the same kinds, calls, payloads, seqs
//! and progress counts, redacted the same, numbered by the writer's one
//! sequencer; only the clock readings and the generated ids differ. A
//! store that cannot make a call's facts durable keeps its result from the
//! host (call-boundary durability). The recorder takes any store: with
//! `Recorder::with_store` alone (no archive anywhere) a run with a tool
//! call, progress and a spilled payload reaches the store as the facts and
//! bytes the archive stores for the same run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reel::context::{ContextError, ToolContext, ToolError};
use reel::fact::{Fact, FactKind, Level, RunStatus};
use reel::rules::StreamRules;
use reel::store::{Store, StoreError};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use reel_recorder::{Durability, MemoryVault, Recorder, RecorderConfig, RecorderError, RunStart};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

const SECRET: &str = "s3cr3t-canary-7f1e";

/// Keeps every batch, per stream, in order, each held whole to its
/// stream's rules as the archive holds it; artifacts by digest.
#[derive(Default)]
struct MemoryStore {
    batches: Mutex<Vec<(String, Vec<Fact>)>>,
    rules: Mutex<HashMap<String, StreamRules>>,
    artifacts: Mutex<HashMap<String, Vec<u8>>>,
    flushes: Mutex<usize>,
    closed: Mutex<Vec<String>>,
    /// Every flush fails (a disk or a cluster gone).
    failing: AtomicBool,
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
        self.batches
            .lock()
            .unwrap()
            .push((stream.to_owned(), facts));
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

    fn has_stream(&self, stream: &str) -> Result<bool, StoreError> {
        Ok(self.rules.lock().unwrap().contains_key(stream))
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
    let recorder = Recorder::with_archive_and_store(reads.clone(), memory.clone(), config())
        .expect("recorder");
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
    let recorder =
        Recorder::with_archive_and_store(reads, memory.clone(), config()).expect("recorder");
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
        let recorder =
            Recorder::with_archive_and_store(reads, memory.clone(), config).expect("recorder");
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

/// Where [`StreamFailingStore`] says that one stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailAt {
    /// The batch's append is refused, naming the stream.
    Append,
    /// The append is taken, the next flush says the stream's block was
    /// not stored (once, as a replicated log does: later flushes do not
    /// say it again).
    Flush,
    /// An artifact for the stream (a spilled payload) is not stored.
    Artifact,
}

/// A store that keeps its streams apart, as the JetStream store does: one
/// stream fails (the others go on), the failure names it
/// (`StoreError::Streams`), and the stream takes nothing more. Keeps the
/// batches it stored, and every batch it was offered for a stream after it
/// failed.
struct StreamFailingStore {
    stored: MemoryStore,
    at: FailAt,
    concurrent: bool,
    /// The stream to fail, once armed.
    armed: Mutex<Option<String>>,
    /// Flush mode: the armed stream's batches were taken and lost.
    lost: AtomicBool,
    /// The stream whose failure the store reported, once it did.
    broken: Mutex<Option<String>>,
    /// Batches offered for the broken stream after the store said so.
    offered_after: Mutex<usize>,
}

const BROKEN: &str = "the cluster did not take the block";

impl StreamFailingStore {
    fn new(at: FailAt, concurrent: bool) -> StreamFailingStore {
        StreamFailingStore {
            stored: MemoryStore::default(),
            at,
            concurrent,
            armed: Mutex::new(None),
            lost: AtomicBool::new(false),
            broken: Mutex::new(None),
            offered_after: Mutex::new(0),
        }
    }

    fn arm(&self, stream: &str) {
        *self.armed.lock().unwrap() = Some(stream.to_owned());
    }

    fn fail(&self, stream: &str) -> StoreError {
        *self.broken.lock().unwrap() = Some(stream.to_owned());
        StoreError::stream(stream, format!("stream {stream:?}: {BROKEN}"))
    }
}

impl Store for StreamFailingStore {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        if self.broken.lock().unwrap().as_deref() == Some(stream) {
            *self.offered_after.lock().unwrap() += 1;
            return Err(StoreError::stream(stream, "an earlier block failed"));
        }
        let armed = self.armed.lock().unwrap().clone();
        if armed.as_deref() == Some(stream) {
            match self.at {
                FailAt::Append => return Err(self.fail(stream)),
                // Taken, never stored: said by the next flush.
                FailAt::Flush => {
                    self.lost.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                FailAt::Artifact => {}
            }
        }
        self.stored.append_batch(stream, facts)
    }

    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.stored.put_artifact(bytes)
    }

    fn put_artifact_of(&self, stream: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let armed = self.armed.lock().unwrap().clone();
        if self.at == FailAt::Artifact && armed.as_deref() == Some(stream) {
            return Err(self.fail(stream));
        }
        self.stored.put_artifact(bytes)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.stored.flush()?;
        if self.at == FailAt::Flush {
            // Reported once: the armed stream's block went missing.
            if self.lost.swap(false, Ordering::SeqCst) {
                let stream = self.armed.lock().unwrap().take().expect("armed");
                return Err(self.fail(&stream));
            }
        }
        Ok(())
    }

    fn close_stream(&self, stream: &str) -> Result<(), StoreError> {
        self.stored.close_stream(stream)
    }

    fn flushes_concurrently(&self) -> bool {
        self.concurrent
    }
}

async fn logger(ctx: ToolContext, big: bool) -> Result<u32, ToolError> {
    ctx.progress(json!({ "message": "working" }));
    if big {
        // Over the inline limit: spilled into an artifact.
        ctx.log(Level::Info, json!({ "blob": "x".repeat(300 * 1024) }));
    }
    Ok(7)
}

fn not_recorded(err: &ToolError) -> &str {
    match err {
        ToolError::Context(ContextError::NotRecorded { detail }) => detail,
        other => panic!("expected NotRecorded, got {other:?}"),
    }
}

fn call_ends(store: &MemoryStore, stream: &str) -> usize {
    store
        .facts(stream)
        .iter()
        .filter(|f| matches!(f.kind, FactKind::CallEnded(_)))
        .count()
}

/// One run's stream fails: that run's calls get `NotRecorded` naming the
/// run and the store's error, and keep getting it (the store said it
/// once); its later facts never reach the store and are counted; every
/// other run, started before or after, keeps recording and its calls
/// return their results. A whole-recorder flush and the shutdown report
/// the failed run. A failure of the store as a whole still fails them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_fails_alone() {
    for at in [FailAt::Append, FailAt::Flush, FailAt::Artifact] {
        for concurrent in [false, true] {
            let case = format!("{at:?}, concurrent flush: {concurrent}");
            let dir = tempfile::tempdir().expect("tempdir");
            let store = Arc::new(StreamFailingStore::new(at, concurrent));
            let recorder = Recorder::with_archive_and_store(
                reads_archive(dir.path()),
                store.clone(),
                config(),
            )
            .expect("recorder");
            let good = recorder
                .start_run(RunStart::new("good"))
                .await
                .expect("start");
            let bad = recorder
                .start_run(RunStart::new("bad"))
                .await
                .expect("start");
            for run in [&good, &bad] {
                let out = run.call("logger", false).invoke(logger).await;
                assert_eq!(out.expect("before the failure"), 7, "{case}");
            }

            store.arm("bad");
            let err = bad
                .call("logger", true)
                .invoke(logger)
                .await
                .expect_err("the failed run's call");
            let detail = not_recorded(&err);
            assert!(detail.contains("run \"bad\""), "{case}: {detail}");
            assert!(detail.contains(BROKEN), "{case}: {detail}");
            assert!(err.to_string().contains("its result is withheld"), "{case}");
            assert_eq!(
                store.broken.lock().unwrap().as_deref(),
                Some("bad"),
                "{case}"
            );

            // The other run, and a run started after the failure, go on.
            let late = recorder
                .start_run(RunStart::new("late"))
                .await
                .expect("start");
            for i in 0..3u32 {
                for run in [&good, &late] {
                    let out = run.call("logger", i == 1).invoke(logger).await;
                    assert_eq!(out.expect("another run's call"), 7, "{case}");
                }
            }
            // The failed run stays failed (its store said so once), and
            // nothing more of it is offered to the store: dropped, counted.
            let err = bad
                .call("logger", false)
                .invoke(logger)
                .await
                .expect_err("the failed run's next call");
            let detail = not_recorded(&err).to_owned();
            assert!(
                detail.contains("run \"bad\"") && detail.contains(BROKEN),
                "{case}: {detail}"
            );
            let ended = bad.end(RunStatus::Completed).await;
            assert!(
                ended
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains(BROKEN)),
                "{case}: {ended:?}"
            );
            good.end(RunStatus::Completed)
                .await
                .expect("the other run ends");
            late.end(RunStatus::Completed)
                .await
                .expect("the late run ends");
            assert_eq!(*store.offered_after.lock().unwrap(), 0, "{case}");

            // The whole recorder knows.
            let whole = recorder.flush().await.expect_err("a whole-recorder flush");
            assert!(whole.to_string().contains("run \"bad\""), "{case}: {whole}");

            // Every fact of the runs that did not fail reached the store,
            // gapless, to their ends.
            for (run, calls) in [("good", 4), ("late", 3)] {
                let facts = store.stored.facts(run);
                assert_eq!(
                    facts.iter().map(|f| f.seq).collect::<Vec<_>>(),
                    (0..facts.len() as u64).collect::<Vec<_>>(),
                    "{case}: {run}"
                );
                assert_eq!(call_ends(&store.stored, run), calls, "{case}: {run}");
                assert_eq!(
                    facts.last().map(|f| f.kind.name()),
                    Some("run.ended"),
                    "{case}"
                );
            }
            // Of the failed run: what was stored before the failure only.
            assert_eq!(call_ends(&store.stored, "bad"), 1, "{case}");
            assert!(
                !store
                    .stored
                    .facts("bad")
                    .iter()
                    .any(|f| f.kind.name() == "run.ended"),
                "{case}"
            );

            // A failure of the store as a whole fails every run.
            store.stored.failing.store(true, Ordering::SeqCst);
            let other = recorder.start_run(RunStart::new("after")).await;
            assert!(
                other
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("the device went away")),
                "{case}: {:?}",
                other.err()
            );

            let shut = recorder
                .shutdown()
                .await
                .expect_err("the shutdown reports it");
            assert!(
                shut.to_string().contains("the device went away"),
                "{case}: {shut}"
            );
        }
    }
}

/// A failed run's failure, reported at shutdown, names the run, the
/// store's error and how many of its facts went unrecorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_names_the_failed_run_and_its_dropped_facts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(StreamFailingStore::new(FailAt::Append, true));
    let recorder =
        Recorder::with_archive_and_store(reads_archive(dir.path()), store.clone(), config())
            .expect("recorder");
    let bad = recorder
        .start_run(RunStart::new("bad"))
        .await
        .expect("start");
    store.arm("bad");
    assert!(bad.call("logger", false).invoke(logger).await.is_err());
    for _ in 0..2 {
        assert!(bad.call("logger", false).invoke(logger).await.is_err());
    }
    let err = recorder.shutdown().await.expect_err("shutdown");
    match &err {
        reel_recorder::RecorderError::Writer(reel_recorder::WriteError::Run(f)) => {
            assert_eq!(f.run, "bad");
            assert!(f.detail.contains(BROKEN), "{f:?}");
            // The refused call's 3 facts (started, progress, ended) and
            // both later calls' 3 each: withheld from the store.
            assert_eq!(f.dropped, 9, "{f:?}");
        }
        other => panic!("expected the run's failure, got {other:?}"),
    }
    assert_eq!(*store.offered_after.lock().unwrap(), 0);
}

// ---- the recorder over a store alone ------------------------------------

fn spilling_config() -> RecorderConfig {
    RecorderConfig {
        fingerprint_key: FingerprintKey::Key([5; 32]),
        serve_live: false,
        // A result this large is spilled into an artifact.
        inline_limit: 1024,
        ..RecorderConfig::default()
    }
}

async fn reporter(ctx: ToolContext, n: u32) -> Result<Value, ToolError> {
    for i in 0..n {
        ctx.progress(json!({ "message": format!("step {i}") }));
    }
    Ok(json!({ "report": "x".repeat(4096) }))
}

/// Records the workload through `recorder` and shuts it down.
async fn spilling_workload(recorder: Recorder) {
    let run = recorder
        .start_run(RunStart::new("r1"))
        .await
        .expect("start");
    let out = run.call("work", 3u32).invoke(reporter).await.expect("call");
    assert_eq!(out["report"].as_str().map(str::len), Some(4096));
    run.end(RunStatus::Completed).await.expect("end");
    recorder.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_not_the_archive_records_what_the_archive_would() {
    // The run into the archive.
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::open(dir.path(), spilling_config())
        .await
        .expect("open");
    let archive = recorder.archive().clone();
    spilling_workload(recorder).await;
    let stored: Vec<Fact> = archive
        .facts("r1", ..)
        .expect("facts")
        .collect::<Result<_, _>>()
        .expect("read");

    // The same run into memory, with no archive anywhere.
    let memory = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(memory.clone(), spilling_config()).expect("recorder");
    assert!(recorder.try_archive().is_none());
    spilling_workload(recorder).await;
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
    let recorder = Recorder::with_store(memory.clone(), spilling_config()).expect("recorder");
    let run = recorder
        .start_run(RunStart::new("r1"))
        .await
        .expect("start");
    run.end(RunStatus::Completed).await.expect("end");
    recorder.shutdown().await.expect("shutdown");

    // A new recorder over the same store: the store says the id is taken.
    let recorder = Recorder::with_store(memory.clone(), spilling_config()).expect("recorder");
    match recorder.start_run(RunStart::new("r1")).await {
        Err(RecorderError::RunExists(id)) => assert_eq!(id, "r1"),
        other => panic!("expected RunExists, got {:?}", other.map(|_| ())),
    }
    assert!(matches!(
        memory.facts("r1").last().map(|f| &f.kind),
        Some(FactKind::RunEnded(_))
    ));
}

/// A tool that files a report, waits for `go`, files another and ends.
async fn paced(ctx: ToolContext, pause_ms: u64) -> Result<u32, ToolError> {
    ctx.progress(json!({ "step": 0 }));
    tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
    ctx.progress(json!({ "step": 1 }));
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    ctx.progress(json!({ "step": 2 }));
    Ok(3)
}

/// The streams the store was given batches of, with how many batches.
fn batches_per_stream(store: &MemoryStore) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for (stream, _) in store.batches.lock().unwrap().iter() {
        *out.entry(stream.clone()).or_default() += 1;
    }
    out
}

/// A call outside any run (a served MCP call) is a light stream: its facts
/// reach the store as one batch, with its `call.ended`, however many
/// drains they were filed across; a long one is appended while it runs
/// (its held facts older than the hold's age); a whole-recorder flush
/// appends what is held; and the facts are the same, numbered the same,
/// as a batch at a time would have given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_outside_any_run_reaches_the_store_as_one_batch_at_its_end() {
    let store = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(store.clone(), config()).unwrap();

    // Short: 20 ms between reports, each its own drain.
    let done = recorder.call("paced", 20).invoke(paced).await.unwrap();
    assert_eq!(done, 3);
    let batches = batches_per_stream(&store);
    assert_eq!(batches.len(), 1, "{batches:?}");
    let (short, n) = batches.iter().next().map(|(s, n)| (s.clone(), *n)).unwrap();
    assert_eq!(n, 1, "one batch for the whole call");
    let facts = store.facts(&short);
    let kinds: Vec<_> = facts.iter().map(|f| f.kind.name()).collect();
    assert_eq!(
        kinds,
        [
            "call.started",
            "progress",
            "progress",
            "progress",
            "call.ended"
        ]
    );
    assert!(facts.iter().enumerate().all(|(i, f)| f.seq == i as u64));

    // Long: its first report is held past the hold's age when the second
    // comes, so the call is in the store while it runs.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let long = recorder
        .call("gated", ())
        .invoke(move |ctx: ToolContext, ()| async move {
            ctx.progress(json!({ "step": 0 }));
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
            ctx.progress(json!({ "step": 1 }));
            let _ = rx.await;
            Ok::<_, ToolError>(1)
        });
    let long = tokio::spawn(long);
    let running = |store: &MemoryStore| {
        batches_per_stream(store)
            .into_iter()
            .find(|(s, _)| *s != short)
            .map(|(s, _)| store.facts(&s))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while running(&store).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "a long call is appended while it runs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let seen = running(&store).unwrap();
    assert_eq!(seen[0].kind.name(), "call.started");
    assert!(!seen.iter().any(|f| f.kind.name() == "call.ended"));

    // A whole-recorder flush appends what is held (here: nothing new, or
    // the second report), and the end comes after it, in order.
    recorder.flush().await.unwrap();
    tx.send(()).unwrap();
    assert_eq!(long.await.unwrap().unwrap(), 1);
    let all = running(&store).unwrap();
    let kinds: Vec<_> = all.iter().map(|f| f.kind.name()).collect();
    assert_eq!(
        kinds,
        ["call.started", "progress", "progress", "call.ended"]
    );
    assert!(all.iter().enumerate().all(|(i, f)| f.seq == i as u64));
    recorder.shutdown().await.unwrap();
}

/// A recorder flushed while a call outside any run holds facts makes them
/// reach the store before the flush returns (nothing filed waits past a
/// flush that covers it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_appends_the_facts_a_call_outside_any_run_holds() {
    let store = Arc::new(MemoryStore::default());
    let recorder = Recorder::with_store(store.clone(), config()).unwrap();
    let (filed_tx, filed_rx) = tokio::sync::oneshot::channel::<()>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let call = recorder
        .call("gated", ())
        .invoke(move |ctx: ToolContext, ()| async move {
            ctx.progress(json!({ "step": 0 }));
            let _ = filed_tx.send(());
            let _ = go_rx.await;
            Ok::<_, ToolError>(1)
        });
    let call = tokio::spawn(call);
    filed_rx.await.unwrap();
    recorder.flush().await.unwrap();
    let facts: Vec<Fact> = store
        .batches
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, f)| f.clone())
        .collect();
    let kinds: Vec<_> = facts.iter().map(|f| f.kind.name()).collect();
    assert_eq!(kinds, ["call.started", "progress"]);
    go_tx.send(()).unwrap();
    call.await.unwrap().unwrap();
    recorder.shutdown().await.unwrap();
}

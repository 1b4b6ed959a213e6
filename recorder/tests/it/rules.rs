//! One test per rule of DESIGN.md and issue 3, against the real archive:
//! each case opens a recorder on a fresh temporary archive, runs a tool,
//! ends the run, shuts the recorder down and reads the run's facts back
//! from the archive (never from memory). Tests are data: small helpers
//! ([`record`], [`call`], [`all!`]) and many small cases.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reel::context::{McpProgress, Report, Stage, SubFlowLogger, ToolContext, ToolError};
use reel::fact::*;
use reel::redact::{artifact_ref, MARKER};
use reel::tools::Tools;
use reel::RunState;
use reel_archive::Archive;
use reel_recorder::{
    CallBuilder, Durability, MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, Run,
    RunStart,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Every `FactKind::$variant` payload of `facts`, in order.
macro_rules! all {
    ($facts:expr, $variant:ident) => {
        $facts
            .iter()
            .filter_map(|f| match &f.kind {
                FactKind::$variant(x) => Some(x),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

/// The single `FactKind::$variant` payload of `facts`.
macro_rules! one {
    ($facts:expr, $variant:ident) => {{
        let found = all!($facts, $variant);
        assert_eq!(
            found.len(),
            1,
            "expected exactly one {}: {:#?}",
            stringify!($variant),
            names(&$facts)
        );
        found[0]
    }};
}

/// An archive closed for writing, open for reading.
struct Book {
    archive: Archive,
    _dir: TempDir,
}

impl Book {
    fn facts(&self, run_id: &str) -> Vec<Fact> {
        read_facts(&self.archive, run_id)
    }
}

fn read_facts(archive: &Archive, run_id: &str) -> Vec<Fact> {
    let facts: Vec<Fact> = archive
        .facts(run_id, ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let seqs: Vec<u64> = facts.iter().map(|f| f.seq).collect();
    let want: Vec<u64> = (0..facts.len() as u64).collect();
    assert_eq!(seqs, want, "seqs of {run_id} are gapless from 0");
    facts
}

/// A recorder on a fresh temporary archive.
struct Lab {
    dir: TempDir,
    recorder: Recorder,
}

impl Lab {
    async fn new(config: RecorderConfig) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::open(dir.path(), config).await.unwrap();
        Lab { dir, recorder }
    }

    async fn run(&self, start: RunStart) -> Run {
        self.recorder.start_run(start).await.unwrap()
    }

    /// Shuts the recorder down (which must succeed) and checks the archive
    /// verifies.
    async fn done(self) -> Book {
        let archive = self.recorder.archive().clone();
        self.recorder.shutdown().await.expect("shutdown succeeds");
        let report = archive.verify().unwrap();
        assert!(report.is_ok(), "archive verifies: {:?}", report.problems);
        Book {
            archive,
            _dir: self.dir,
        }
    }
}

/// Records one run: starts it, hands it to `body`, ends it (completed),
/// shuts down and returns body's output, the run's facts and the archive.
async fn record<T, F, Fut>(config: RecorderConfig, start: RunStart, body: F) -> (T, Vec<Fact>, Book)
where
    F: FnOnce(Run) -> Fut,
    Fut: Future<Output = T>,
{
    let lab = Lab::new(config).await;
    let run = lab.run(start).await;
    let run_id = run.id().to_owned();
    let out = body(run.clone()).await;
    run.end(RunStatus::Completed).await.expect("run ends");
    drop(run);
    let book = lab.done().await;
    let facts = book.facts(&run_id);
    (out, facts, book)
}

/// Records one call of `tool` (named "tool", args `{}`), the call builder
/// prepared by `setup`, in a run "run-1" with the default configuration.
async fn call<O, F, Fut>(
    setup: impl FnOnce(CallBuilder) -> CallBuilder,
    tool: F,
) -> (Result<O, ToolError>, Vec<Fact>)
where
    O: Serialize + DeserializeOwned,
    F: FnOnce(ToolContext, Value) -> Fut,
    Fut: Future<Output = Result<O, ToolError>>,
{
    call_with(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        setup,
        tool,
    )
    .await
}

async fn call_with<O, F, Fut>(
    config: RecorderConfig,
    start: RunStart,
    setup: impl FnOnce(CallBuilder) -> CallBuilder,
    tool: F,
) -> (Result<O, ToolError>, Vec<Fact>)
where
    O: Serialize + DeserializeOwned,
    F: FnOnce(ToolContext, Value) -> Fut,
    Fut: Future<Output = Result<O, ToolError>>,
{
    let (out, facts, _) = record(config, start, |run| async move {
        setup(run.call("tool", json!({}))).invoke(tool).await
    })
    .await;
    (out, facts)
}

fn names(facts: &[Fact]) -> Vec<&str> {
    facts.iter().map(|f| f.kind.name()).collect()
}

/// The facts as the JSON a tape or a viewer would show.
fn as_json(facts: &[Fact]) -> String {
    serde_json::to_string(facts).unwrap()
}

/// `value` with every keyed marker made bare (`[REDACTED:...]` as
/// `[REDACTED]`): the shape of what redaction hid, tags aside.
fn unkeyed(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(reel::marker::strip_tags(s).into_owned()),
        Value::Array(items) => items.iter().map(unkeyed).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (reel::marker::strip_tags(k).into_owned(), unkeyed(v)))
            .collect(),
        other => other.clone(),
    }
}

/// The index of the first fact named `name` (of `call`, when given).
fn pos(facts: &[Fact], name: &str, call: Option<&str>) -> usize {
    facts
        .iter()
        .position(|f| f.kind.name() == name && (call.is_none() || f.call.as_deref() == call))
        .unwrap_or_else(|| panic!("no {name} of {call:?} in {:?}", names(facts)))
}

fn ended(facts: &[Fact], call: &str) -> CallOutcome {
    facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallEnded(e) if f.call.as_deref() == Some(call) => Some(e.outcome.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("call {call} never ended: {:?}", names(facts)))
}

fn config(f: impl FnOnce(&mut RecorderConfig)) -> RecorderConfig {
    let mut c = RecorderConfig::default();
    f(&mut c);
    c
}

/// Every byte of every file under `dir`, file by file.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    crate::canary::files_under(dir)
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A flag set when dropped (to see whether a future was dropped).
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn explode() -> Result<(), String> {
    panic!("cleanup exploded")
}

// ---------------------------------------------------------------------------
// Teardown
// ---------------------------------------------------------------------------

#[tokio::test]
async fn teardown_first_registration_wins_and_the_repeat_never_runs() {
    let first_ran = Arc::new(AtomicUsize::new(0));
    let repeat_ran = Arc::new(AtomicUsize::new(0));
    let (a, b) = (first_ran.clone(), repeat_ran.clone());
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            let first = ctx.on_teardown(TeardownScope::Call, "session-1", move || async move {
                a.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(())
            })?;
            let repeat = ctx.on_teardown(TeardownScope::Call, "session-1", move || async move {
                b.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(())
            })?;
            Ok::<_, ToolError>((first, repeat))
        },
    )
    .await;
    assert_eq!(
        out.unwrap(),
        (true, false),
        "on_teardown reports first/repeat"
    );
    assert_eq!(
        first_ran.load(Ordering::SeqCst),
        1,
        "the first cleanup ran once"
    );
    assert_eq!(repeat_ran.load(Ordering::SeqCst), 0, "the repeat never ran");

    let regs = all!(facts, TeardownRegistered);
    assert_eq!(regs.len(), 2);
    assert!(regs[0].first && !regs[1].first, "{regs:?}");
    assert_eq!(regs[0].key_hash, regs[1].key_hash);
    let ran = one!(facts, TeardownRan);
    assert_eq!(ran.key_hash, regs[0].key_hash);
    assert_eq!(ran.outcome, TeardownOutcome::Ok);
    assert!(pos(&facts, "teardown.ran", None) < pos(&facts, "call.ended", None));
}

#[tokio::test]
async fn teardown_identity_is_tool_scope_and_key() {
    // Two calls of one tool share run-scoped registrations; another tool
    // with the same key, or the same key in another scope, is its own.
    let ran = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let (_, facts, _) = record(RecorderConfig::default(), RunStart::new("run-1"), |run| {
        let ran = ran.clone();
        async move {
            for (tool, scope, label) in [
                ("alpha", TeardownScope::Run, "alpha/run 1st call"),
                ("alpha", TeardownScope::Run, "alpha/run 2nd call"),
                ("beta", TeardownScope::Run, "beta/run"),
                ("alpha", TeardownScope::Call, "alpha/call"),
            ] {
                let ran = ran.clone();
                run.call(tool, json!({}))
                    .invoke(move |ctx: ToolContext, _: Value| async move {
                        ctx.on_teardown(scope, "shared-key", move || async move {
                            ran.lock().unwrap().push(label);
                            Ok::<_, String>(())
                        })?;
                        Ok::<_, ToolError>(())
                    })
                    .await
                    .unwrap();
            }
        }
    })
    .await;
    let firsts: Vec<bool> = all!(facts, TeardownRegistered)
        .iter()
        .map(|r| r.first)
        .collect();
    assert_eq!(firsts, [true, false, true, true]);
    assert_eq!(
        *ran.lock().unwrap(),
        ["alpha/call", "beta/run", "alpha/run 1st call"],
        "call-scoped runs at its call's end; run-scoped at the run's end, reverse order"
    );
}

#[tokio::test]
async fn teardown_scope_not_honoured_is_refused_naming_the_honoured_scopes() {
    use TeardownScope::*;
    for (honoured, asked, names_) in [
        (vec![Call], Run, "call"),
        (vec![Call, Run], Session, "call, run"),
        (vec![], Call, "none"),
    ] {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let want = honoured.clone();
        let (out, facts) = call_with(
            RecorderConfig::default(),
            RunStart::new("run-1").teardown_scopes(honoured.clone()),
            |c| c,
            |ctx: ToolContext, _: Value| async move {
                assert_eq!(ctx.teardown_scopes(), honoured.as_slice());
                let err = ctx
                    .on_teardown(asked, "k", move || async move {
                        r.store(true, Ordering::SeqCst);
                        Ok::<_, String>(())
                    })
                    .unwrap_err();
                Ok::<_, ToolError>(err.to_string())
            },
        )
        .await;
        let message = out.unwrap();
        assert!(
            message.contains(&format!("which honours: {names_};")),
            "{asked:?} refused with {message:?}"
        );
        // Seed 000: it throws "naming the door".
        assert!(
            message.contains("by this door (reel-recorder ") && message.contains("serving a run"),
            "{message}"
        );
        assert!(message.contains(&format!("scope {asked}")), "{message}");
        assert!(!ran.load(Ordering::SeqCst), "a refused cleanup never runs");
        let refused = one!(facts, TeardownRefused);
        assert_eq!(refused.scope, asked);
        assert_eq!(refused.honoured, want);
        assert_eq!(refused.reason, message);
        assert!(all!(facts, TeardownRegistered).is_empty());
        assert!(all!(facts, TeardownRan).is_empty());
    }
}

#[tokio::test]
async fn session_scope_is_not_honoured_without_a_session_by_default() {
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(
                ctx.on_teardown(TeardownScope::Session, "k", || async {
                    Ok::<_, String>(())
                })
                .is_err(),
            )
        },
    )
    .await;
    assert!(out.unwrap());
    one!(facts, TeardownRefused);
}

#[tokio::test]
async fn cleanups_run_once_each_in_reverse_registration_order() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            for i in 1..=5 {
                let o = o.clone();
                ctx.on_teardown(
                    TeardownScope::Call,
                    &format!("key-{i}"),
                    move || async move {
                        o.lock().unwrap().push(i);
                        Ok::<_, String>(())
                    },
                )?;
            }
            Ok::<_, ToolError>(())
        },
    )
    .await;
    out.unwrap();
    let mut hashes: Vec<String> = all!(facts, TeardownRegistered)
        .iter()
        .map(|r| r.key_hash.clone())
        .collect();
    assert_eq!(hashes.len(), 5, "five distinct keys, five hashes");
    assert_eq!(*order.lock().unwrap(), [5, 4, 3, 2, 1]);
    hashes.reverse();
    let ran: Vec<String> = all!(facts, TeardownRan)
        .iter()
        .map(|r| r.key_hash.clone())
        .collect();
    assert_eq!(ran, hashes, "teardown.ran in reverse order, once each");
}

#[tokio::test]
async fn run_scoped_cleanups_run_at_the_run_end_before_run_ended() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (_, facts, _) = record(RecorderConfig::default(), RunStart::new("run-1"), |run| {
        let order = order.clone();
        async move {
            for i in 1..=3 {
                let o = order.clone();
                run.call("tool", json!({}))
                    .invoke(move |ctx: ToolContext, _: Value| async move {
                        ctx.on_teardown(
                            TeardownScope::Run,
                            &format!("k{i}"),
                            move || async move {
                                o.lock().unwrap().push(i);
                                Ok::<_, String>(())
                            },
                        )?;
                        Ok::<_, ToolError>(())
                    })
                    .await
                    .unwrap();
            }
            assert!(
                order.lock().unwrap().is_empty(),
                "nothing runs before the run ends"
            );
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), [3, 2, 1]);
    let ran: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.kind.name() == "teardown.ran")
        .collect();
    assert_eq!(ran.len(), 3);
    assert!(ran.iter().all(|f| f.call.is_none()), "run-level facts");
    let last_call_end = facts
        .iter()
        .rposition(|f| f.kind.name() == "call.ended")
        .unwrap();
    assert!(ran[0].seq as usize > last_call_end);
    assert_eq!(names(&facts).last(), Some(&"run.ended"));
}

#[tokio::test]
async fn a_failing_cleanup_is_recorded_and_the_run_still_ends_normally() {
    let lab = Lab::new(RecorderConfig::default()).await;
    let run = lab.run(RunStart::new("run-1")).await;
    let out = run
        .call("tool", json!({}))
        .invoke(|ctx: ToolContext, _: Value| async move {
            ctx.on_teardown(TeardownScope::Call, "c", || async {
                Err::<(), _>("socket already closed")
            })?;
            ctx.on_teardown(TeardownScope::Run, "r", || async {
                Err::<(), _>("lease lost")
            })?;
            Ok::<_, ToolError>("fine".to_owned())
        })
        .await;
    assert_eq!(
        out.unwrap(),
        "fine",
        "a failing cleanup is never thrown into the call"
    );
    run.end(RunStatus::Completed)
        .await
        .expect("nor into the run");
    let book = lab.done().await;
    let facts = book.facts("run-1");
    let outcomes: Vec<TeardownOutcome> = all!(facts, TeardownRan)
        .iter()
        .map(|r| r.outcome.clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            TeardownOutcome::Error {
                message: "socket already closed".into()
            },
            TeardownOutcome::Error {
                message: "lease lost".into()
            },
        ]
    );
    assert!(matches!(ended(&facts, "c1"), CallOutcome::Ok { .. }));
    assert_eq!(
        book.archive.run("run-1").unwrap().state,
        RunState::Completed
    );
}

#[tokio::test]
async fn a_cleanup_that_overruns_its_time_bound_is_recorded_as_timed_out() {
    let cfg = config(|c| c.teardown_timeout = Duration::from_millis(100));
    let (out, facts) = call_with(
        cfg,
        RunStart::new("run-1"),
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            ctx.on_teardown(TeardownScope::Call, "slow", || async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, String>(())
            })?;
            Ok::<_, ToolError>(1)
        },
    )
    .await;
    assert_eq!(out.unwrap(), 1);
    assert_eq!(one!(facts, TeardownRan).outcome, TeardownOutcome::TimedOut);
    assert!(matches!(ended(&facts, "c1"), CallOutcome::Ok { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_cleanup_is_stopped_before_the_next_one_runs() {
    // Reverse order exists because later resources depend on earlier ones:
    // the cleanup registered first must not run while the one registered
    // after it is still going.
    let cfg = config(|c| c.teardown_timeout = Duration::from_millis(100));
    let overrun_dropped = Arc::new(AtomicBool::new(false));
    let seen_by_next = Arc::new(Mutex::new(None));
    let (d, s) = (overrun_dropped.clone(), seen_by_next.clone());
    let (out, facts) = call_with(
        cfg,
        RunStart::new("run-1"),
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            let d2 = d.clone();
            ctx.on_teardown(TeardownScope::Call, "connection", move || async move {
                *s.lock().unwrap() = Some(d2.load(Ordering::SeqCst));
                Ok::<_, String>(())
            })?;
            ctx.on_teardown(
                TeardownScope::Call,
                "session-on-connection",
                move || async move {
                    let _guard = DropFlag(d);
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok::<_, String>(())
                },
            )?;
            Ok::<_, ToolError>(())
        },
    )
    .await;
    out.unwrap();
    let outcomes: Vec<TeardownOutcome> = all!(facts, TeardownRan)
        .iter()
        .map(|r| r.outcome.clone())
        .collect();
    assert_eq!(outcomes, [TeardownOutcome::TimedOut, TeardownOutcome::Ok]);
    assert_eq!(
        *seen_by_next.lock().unwrap(),
        Some(true),
        "the overrunning cleanup was stopped before the next cleanup ran"
    );
}

#[tokio::test]
async fn a_panicking_cleanup_is_recorded_as_an_error_and_nothing_crashes() {
    let after = Arc::new(AtomicBool::new(false));
    let a = after.clone();
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            ctx.on_teardown(TeardownScope::Call, "other", move || async move {
                a.store(true, Ordering::SeqCst);
                Ok::<_, String>(())
            })?;
            ctx.on_teardown(TeardownScope::Call, "boom", || async { explode() })?;
            Ok::<_, ToolError>("result".to_owned())
        },
    )
    .await;
    assert_eq!(out.unwrap(), "result");
    let ran = all!(facts, TeardownRan);
    assert_eq!(ran.len(), 2);
    assert!(
        matches!(&ran[0].outcome, TeardownOutcome::Error { message } if message.contains("panicked")),
        "{:?}",
        ran[0].outcome
    );
    assert_eq!(
        ran[1].outcome,
        TeardownOutcome::Ok,
        "later cleanups still run"
    );
    assert!(after.load(Ordering::SeqCst));
    assert!(matches!(ended(&facts, "c1"), CallOutcome::Ok { .. }));
}

#[tokio::test]
async fn teardown_keys_are_recorded_only_as_hashes() {
    const KEY: &str = "tenant-acme/user-ann/session-7f3a9c";
    let lab = Lab::new(RecorderConfig::default()).await;
    let run = lab
        .run(RunStart::new("run-1").teardown_scopes([TeardownScope::Call, TeardownScope::Run]))
        .await;
    run.call("tool", json!({}))
        .invoke(|ctx: ToolContext, _: Value| async move {
            ctx.on_teardown(TeardownScope::Call, KEY, || async { Ok::<_, String>(()) })?;
            ctx.on_teardown(TeardownScope::Call, KEY, || async { Ok::<_, String>(()) })?;
            ctx.on_teardown(TeardownScope::Run, KEY, || async { Err::<(), _>("gone") })?;
            let _ = ctx.on_teardown(TeardownScope::Session, KEY, || async {
                Ok::<_, String>(())
            });
            Ok::<_, ToolError>(())
        })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let dir = lab.dir.path().to_path_buf();
    let book = lab.done().await;
    let facts = book.facts("run-1");
    assert_eq!(
        names(&facts),
        [
            "run.started",
            "call.started",
            "teardown.registered",
            "teardown.registered",
            "teardown.registered",
            "teardown.refused",
            "teardown.ran",
            "call.ended",
            "teardown.ran",
            "run.ended"
        ]
    );
    let text = as_json(&facts);
    assert!(!text.contains(KEY), "the raw key is in the facts: {text}");
    assert!(!text.contains("session-7f3a9c"));
    for f in &facts {
        let (scope, hash) = match &f.kind {
            FactKind::TeardownRegistered(t) => (t.scope, &t.key_hash),
            FactKind::TeardownRefused(t) => (t.scope, &t.key_hash),
            FactKind::TeardownRan(t) => (t.scope, &t.key_hash),
            _ => continue,
        };
        assert_eq!(
            hash,
            &reel_recorder::teardown_key_hash(&book.archive, "tool", scope, KEY),
            "the key is recorded as its keyed hash"
        );
    }
    let Book { archive, _dir } = book;
    drop(archive);
    for (path, bytes) in files_under(&dir) {
        assert!(
            !contains(&bytes, KEY.as_bytes()),
            "the raw key is stored in {}",
            path.display()
        );
    }
}

/// A teardown key shaped like a 4-digit PIN: its recorded hash is keyed
/// under the fingerprint key, which is not in the archive, so trying every
/// PIN with what an archive's reader can compute finds nothing (the
/// unkeyed hash of every PIN, under every scope), while under the key the
/// hash is the key's. Two archives with different keys record different
/// hashes of one key.
#[tokio::test]
async fn a_pin_shaped_teardown_key_is_not_found_from_its_recorded_hash() {
    const PIN: &str = "4711";
    let mut recorded = Vec::new();
    for key in [[3u8; 32], [4u8; 32]] {
        let config = RecorderConfig {
            fingerprint_key: reel_archive::FingerprintKey::Key(key),
            ..RecorderConfig::default()
        };
        let (_, facts, book) = record(config, RunStart::new("run-1"), |run| async move {
            run.call("pin", json!({}))
                .invoke(|ctx: ToolContext, _: Value| async move {
                    ctx.on_teardown(TeardownScope::Call, PIN, || async { Ok::<_, String>(()) })?;
                    Ok::<_, ToolError>(())
                })
                .await
                .unwrap();
        })
        .await;
        let hash = one!(facts, TeardownRegistered).key_hash.clone();
        assert_eq!(
            hash,
            reel_recorder::teardown_key_hash(&book.archive, "pin", TeardownScope::Call, PIN)
        );
        assert!(hash.starts_with("hmac-sha256:"), "{hash}");
        let started = std::time::Instant::now();
        let found: Vec<String> = (0..10_000)
            .map(|n| format!("{n:04}"))
            .filter(|guess| {
                [
                    TeardownScope::Call,
                    TeardownScope::Run,
                    TeardownScope::Session,
                ]
                .into_iter()
                .any(|scope| reel::context::teardown_key_hash("pin", scope, guess) == hash)
            })
            .collect();
        assert_eq!(
            found,
            Vec::<String>::new(),
            "guessed from the archive alone in {:?}",
            started.elapsed()
        );
        recorded.push(hash);
    }
    assert_ne!(recorded[0], recorded[1], "the hash depends on the key");
}

// ---------------------------------------------------------------------------
// Fail closed
// ---------------------------------------------------------------------------

#[tokio::test]
async fn without_a_credential_provider_credentials_are_refused_saying_how_to_attach_one() {
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            assert!(!ctx.has_credentials());
            let err = ctx.credential("x").await.unwrap_err();
            Ok::<_, ToolError>(err.to_string())
        },
    )
    .await;
    let message = out.unwrap();
    assert!(message.contains(".credentials("), "{message}");
    assert!(message.contains("has_credentials"), "{message}");
    let refused = one!(facts, CredentialRefused);
    assert_eq!(refused.need, "x");
    assert_eq!(refused.mode, CredentialMode::Pulled);
    assert_eq!(refused.reason, message);
    assert!(all!(facts, CredentialRequested).is_empty());
    assert!(all!(facts, CredentialResolved).is_empty());
}

#[tokio::test]
async fn without_an_artifact_store_put_and_get_are_refused_saying_how_to_attach_one() {
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            assert!(!ctx.has_artifacts());
            let put = ctx
                .artifacts()
                .put("text/plain", b"x".to_vec())
                .await
                .unwrap_err();
            let get = ctx.artifacts().get("art-1").await.unwrap_err();
            Ok::<_, ToolError>((put.to_string(), get.to_string()))
        },
    )
    .await;
    let (put, get) = out.unwrap();
    for message in [&put, &get] {
        assert!(message.contains(".artifacts("), "{message}");
        assert!(message.contains("has_artifacts"), "{message}");
    }
    let refused = all!(facts, ArtifactRefused);
    assert_eq!(refused.len(), 2);
    assert_eq!(
        (
            refused[0].op,
            refused[0].id.as_deref(),
            refused[0].reason.as_str()
        ),
        (ArtifactOp::Put, None, put.as_str())
    );
    assert_eq!(
        (
            refused[1].op,
            refused[1].id.as_deref(),
            refused[1].reason.as_str()
        ),
        (ArtifactOp::Get, Some("art-1"), get.as_str())
    );
    assert!(all!(facts, ArtifactPut).is_empty() && all!(facts, ArtifactGet).is_empty());
}

#[tokio::test]
async fn with_providers_attached_the_context_says_so() {
    let (out, _) = call(
        |c| {
            c.credentials(Arc::new(MemoryVault::new()))
                .artifacts(Arc::new(MemoryArtifactStore::new()))
        },
        |ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>((ctx.has_credentials(), ctx.has_artifacts()))
        },
    )
    .await;
    assert_eq!(out.unwrap(), (true, true));
}

// ---------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------

fn untouched_payload(i: usize) -> Value {
    // Key order deliberately not sorted; Unicode of every width; numbers at
    // the edges; absent (null) and empty kept apart.
    json!({
        "zeta": i,
        "message": format!("Hop {i} — naïve café 日本語 🚀 e\u{301}"),
        "alpha": { "z": [], "a": {}, "m": "", "n": null },
        "nums": [0, -1, u64::MAX, i64::MIN, 0.1, 1.5e300, -0.0],
        "nul": "a\u{0}b",
        "rtl": "שלום",
        "done": i,
    })
}

#[tokio::test]
async fn progress_lands_between_call_started_and_call_ended_counted_and_untouched() {
    const N: usize = 50;
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            for i in 1..=N {
                ctx.progress(untouched_payload(i));
            }
            Ok::<_, ToolError>(())
        },
    )
    .await;
    out.unwrap();
    let start = pos(&facts, "call.started", Some("c1"));
    let end = pos(&facts, "call.ended", Some("c1"));
    let progress: Vec<(usize, &Fact)> = facts
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind.name() == "progress")
        .collect();
    assert_eq!(progress.len(), N);
    for (k, (at, fact)) in progress.iter().enumerate() {
        assert!(start < *at && *at < end, "progress between start and end");
        assert_eq!(fact.call.as_deref(), Some("c1"), "stamped with its call");
        let FactKind::Progress(p) = &fact.kind else {
            unreachable!()
        };
        assert_eq!(p.count, k as u64 + 1);
        let want = untouched_payload(k + 1);
        assert_eq!(p.payload, want, "payload stored untouched");
        // Key order too.
        assert_eq!(
            serde_json::to_string(&p.payload).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
    }
}

fn wall_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// The envelope's times, read on the tool's thread as one clock tick and
/// filled in by the writer: `offset` runs from zero at `run.started` and
/// never goes back within one task; `at` is the wall clock at the fact
/// (between the reads before and after the run), and the two agree: the
/// time between two facts is the same by either.
#[tokio::test]
async fn fact_times_offset_from_the_run_start_and_at_on_the_wall_clock() {
    let before = wall_nanos();
    let (out, facts, _book) = record(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        |run| async move {
            run.call("tool", json!({}))
                .invoke(|ctx: ToolContext, _: Value| async move {
                    ctx.progress(json!({"message": "before the pause"}));
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    ctx.progress(json!({"message": "after the pause"}));
                    Ok::<_, ToolError>(())
                })
                .await
        },
    )
    .await;
    let after = wall_nanos();
    out.unwrap();
    assert_eq!(facts[0].kind.name(), "run.started");
    assert_eq!(facts[0].offset, 0, "offset is zero at run.started");
    for pair in facts.windows(2) {
        assert!(
            pair[0].offset <= pair[1].offset,
            "offsets follow record order in a one-task run: {} then {}",
            pair[0].offset,
            pair[1].offset
        );
    }
    for f in &facts {
        assert!(
            before <= f.at && f.at <= after,
            "seq {}: at {} is on the wall clock between {before} and {after}",
            f.seq,
            f.at
        );
    }
    let progress: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.kind.name() == "progress")
        .collect();
    let by_offset = progress[1].offset - progress[0].offset;
    let by_at = progress[1].at - progress[0].at;
    assert!(
        by_offset >= 30_000_000,
        "the pause shows in offsets: {by_offset} ns"
    );
    assert!(
        (by_at - by_offset as i64).abs() < 5_000_000,
        "at and offset agree on the pause: {by_at} vs {by_offset} ns"
    );
}

#[tokio::test]
async fn mcp_style_progress_maps_onto_progress() {
    let (_, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            ctx.progress_mcp(McpProgress::new(0.0).total(100.0).message("Starting..."));
            ctx.progress_mcp(50.0);
            ctx.progress_mcp(McpProgress::new(75.0).message("Almost there"));
            ctx.report(Report::new().used_model(false));
            Ok::<_, ToolError>(())
        },
    )
    .await;
    let payloads: Vec<&Value> = all!(facts, Progress).iter().map(|p| &p.payload).collect();
    assert_eq!(
        payloads,
        [
            &json!({"progress": 0.0, "total": 100.0, "message": "Starting..."}),
            &json!({"progress": 50.0}),
            &json!({"progress": 75.0, "message": "Almost there"}),
            &json!({"usedModel": false}),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_from_a_concurrent_subtask_keeps_count_in_record_order() {
    const N: u64 = 3000;
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            let sub = ctx.clone();
            let task = tokio::spawn(async move {
                for i in 1..=N {
                    sub.progress(json!({ "from": "sub", "i": i }));
                }
            });
            for i in 1..=N {
                ctx.progress(json!({ "from": "main", "i": i }));
            }
            task.await.unwrap();
            Ok::<_, ToolError>(())
        },
    )
    .await;
    out.unwrap();
    let start = pos(&facts, "call.started", Some("c1"));
    let end = pos(&facts, "call.ended", Some("c1"));
    let mut last = std::collections::HashMap::new();
    let mut counts = Vec::new();
    for (at, f) in facts.iter().enumerate() {
        let FactKind::Progress(p) = &f.kind else {
            continue;
        };
        assert!(start < at && at < end);
        counts.push(p.count);
        let from = p.payload["from"].as_str().unwrap().to_owned();
        let i = p.payload["i"].as_u64().unwrap();
        let prev = last.insert(from.clone(), i).unwrap_or(0);
        assert_eq!(i, prev + 1, "{from}'s reports land in its call order");
    }
    let want: Vec<u64> = (1..=2 * N).collect();
    assert!(
        counts == want,
        "count says how many reports this call made so far, in record order; first disorder at {:?}",
        counts
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .map(|i| &counts[i.saturating_sub(1)..(i + 2).min(counts.len())])
    );
}

// ---------------------------------------------------------------------------
// The report gate
// ---------------------------------------------------------------------------

#[tokio::test]
async fn report_payload_is_kept_only_with_content_logging() {
    for (content_logging, used_model, payload, want) in [
        (
            false,
            Some(true),
            Some(json!({"tokens": 12})),
            json!({"usedModel": true}),
        ),
        (
            true,
            Some(true),
            Some(json!({"tokens": 12})),
            json!({"usedModel": true, "payload": {"tokens": 12}}),
        ),
        (false, Some(false), None, json!({"usedModel": false})),
        (
            true,
            None,
            Some(json!("detail")),
            json!({"payload": "detail"}),
        ),
        (false, None, Some(json!("detail")), json!({})),
        (true, None, None, json!({})),
    ] {
        let (out, facts) = call_with(
            config(|c| c.content_logging = content_logging),
            RunStart::new("run-1"),
            |c| c,
            |ctx: ToolContext, _: Value| async move {
                ctx.report(Report {
                    used_model,
                    payload,
                });
                Ok::<_, ToolError>(())
            },
        )
        .await;
        out.unwrap();
        let p = one!(facts, Progress);
        assert_eq!(
            p.payload, want,
            "content_logging={content_logging} used_model={used_model:?}"
        );
        assert_eq!(p.count, 1);
    }
}

// ---------------------------------------------------------------------------
// Sub-flow logger
// ---------------------------------------------------------------------------

#[tokio::test]
async fn subflow_logger_is_the_same_instance_and_tags_its_logs() {
    let kept: Arc<Mutex<Option<SubFlowLogger>>> = Arc::new(Mutex::new(None));
    let k = kept.clone();
    let (out, facts, _) = record(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        |run| async move {
            let out = run
                .call("tool", json!({}))
                .invoke(|ctx: ToolContext, _: Value| async move {
                    let a = ctx.subflow_logger();
                    let b = ctx.subflow_logger();
                    let other = ctx.named_subflow("other");
                    let same = a.same_instance(&b) && a.name() == "main";
                    let distinct = !a.same_instance(&other);
                    a.log(Level::Debug, json!({"step": 1}));
                    b.log(Level::Info, "two");
                    other.log(Level::Notice, "three");
                    ctx.log(Level::Warning, "plain");
                    *k.lock().unwrap() = Some(a);
                    Ok::<_, ToolError>((same, distinct))
                })
                .await;
            // A logger kept past its call logs nothing (it is bound to it).
            let kept = kept.lock().unwrap().take().unwrap();
            kept.log(Level::Error, "after the call ended");
            out
        },
    )
    .await;
    assert_eq!(out.unwrap(), (true, true));
    assert_eq!(
        names(&facts)[names(&facts).len() - 2..],
        ["call.ended", "run.ended"]
    );
    let logs: Vec<(Level, Option<&str>, &Value)> = all!(facts, Log)
        .iter()
        .map(|l| (l.level, l.subflow.as_deref(), &l.data))
        .collect();
    assert_eq!(
        logs,
        [
            (Level::Debug, Some("main"), &json!({"step": 1})),
            (Level::Info, Some("main"), &json!("two")),
            (Level::Notice, Some("other"), &json!("three")),
            (Level::Warning, None, &json!("plain")),
        ]
    );
}

#[tokio::test]
async fn every_rfc5424_level_is_recorded() {
    let (_, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            for level in Level::ALL {
                ctx.log(level, format!("{level:?}"));
            }
            Ok::<_, ToolError>(())
        },
    )
    .await;
    let levels: Vec<Level> = all!(facts, Log).iter().map(|l| l.level).collect();
    assert_eq!(levels, Level::ALL);
}

// ---------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------

#[tokio::test]
async fn cancel_after_the_call_returned_is_recorded_after_call_ended_and_changes_nothing() {
    let (out, facts, _) = record(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        |run| async move {
            let call = run.call("tool", json!({}));
            let canceller = call.canceller();
            let out = call
                .invoke(|ctx: ToolContext, _: Value| async move {
                    ctx.progress(json!({"done": 1}));
                    Ok::<_, ToolError>(json!({"answer": 42}))
                })
                .await;
            canceller.cancel(Some("user pressed stop too late"));
            out
        },
    )
    .await;
    assert_eq!(out.unwrap(), json!({"answer": 42}));
    assert_eq!(
        names(&facts),
        [
            "run.started",
            "call.started",
            "progress",
            "call.ended",
            "cancel.requested",
            "run.ended"
        ]
    );
    let cancel = &facts[4];
    assert_eq!(cancel.call.as_deref(), Some("c1"));
    assert_eq!(
        cancel.kind,
        FactKind::CancelRequested(CancelRequested {
            reason: Some("user pressed stop too late".into())
        })
    );
    assert_eq!(
        ended(&facts, "c1"),
        CallOutcome::Ok {
            result: json!({"answer": 42})
        },
        "call.ended unchanged"
    );
    assert_eq!(all!(facts, CallEnded).len(), 1);
}

#[tokio::test]
async fn cancel_after_the_run_ended_does_not_break_the_recorder() {
    let lab = Lab::new(RecorderConfig::default()).await;
    let run = lab.run(RunStart::new("run-1")).await;
    let call = run.call("tool", json!({}));
    let canceller = call.canceller();
    call.invoke(|_: ToolContext, _: Value| async move { Ok::<_, ToolError>(()) })
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    canceller.cancel(Some("stop pressed after everything ended"));

    // The recorder goes on recording other runs, and says all is well.
    let next = lab.run(RunStart::new("run-2")).await;
    next.call("tool", json!({}))
        .invoke(|_: ToolContext, _: Value| async move { Ok::<_, ToolError>(()) })
        .await
        .unwrap();
    next.end(RunStatus::Completed)
        .await
        .expect("a later run ends normally");
    let book = lab.done().await;
    assert_eq!(
        names(&book.facts("run-1")),
        ["run.started", "call.started", "call.ended", "run.ended"]
    );
    assert_eq!(
        book.archive.run("run-2").unwrap().state,
        RunState::Completed
    );
}

#[tokio::test]
async fn cancel_during_the_call_aborts_a_tool_that_checks_with_the_reason() {
    let (out, facts, _) = record(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        |run| async move {
            let (started, mut waiting) = tokio::sync::mpsc::unbounded_channel();
            let call = run.call("tool", json!({}));
            let canceller = call.canceller();
            let host = async move {
                waiting.recv().await.unwrap();
                canceller.cancel(Some("user pressed stop"));
            };
            let tool = call.invoke(|ctx: ToolContext, _: Value| async move {
                ctx.progress(json!({"message": "waiting"}));
                ctx.check_cancel()?;
                started.send(()).unwrap();
                ctx.cancelled().await;
                ctx.check_cancel()?;
                Ok::<_, ToolError>(json!("never"))
            });
            let (out, ()) = tokio::join!(tool, host);
            out
        },
    )
    .await;
    let err = out.unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
    assert_eq!(
        names(&facts),
        [
            "run.started",
            "call.started",
            "progress",
            "cancel.requested",
            "call.ended",
            "run.ended"
        ]
    );
    assert_eq!(
        ended(&facts, "c1"),
        CallOutcome::Aborted {
            reason: Some("user pressed stop".into())
        }
    );
}

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_failing_declared_credential_stops_the_tool_before_it_runs() {
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let (out, facts) = call(
        |c| {
            c.needs("github").credentials(Arc::new(
                MemoryVault::new().failing("github", "token expired; re-authorise"),
            ))
        },
        |_: ToolContext, _: Value| async move {
            r.store(true, Ordering::SeqCst);
            Ok::<_, ToolError>(())
        },
    )
    .await;
    assert!(!ran.load(Ordering::SeqCst), "the tool body never ran");
    let err = out.unwrap_err();
    assert!(err.to_string().contains("token expired"), "{err}");
    assert_eq!(
        names(&facts),
        [
            "run.started",
            "call.started",
            "credential.requested",
            "credential.failed",
            "call.ended",
            "run.ended"
        ]
    );
    let requested = one!(facts, CredentialRequested);
    assert_eq!(
        (requested.need.as_str(), requested.mode),
        ("github", CredentialMode::Declared)
    );
    let failed = one!(facts, CredentialFailed);
    assert_eq!(failed.reason, "token expired; re-authorise");
    assert!(
        matches!(ended(&facts, "c1"), CallOutcome::Error { error, .. } if error.contains("token expired"))
    );
}

#[tokio::test]
async fn a_declared_credential_resolves_before_the_tool_and_only_its_fingerprint_is_kept() {
    const SECRET: &str = "ghp_declaredSecretQXZJ";
    let (out, facts) = call(
        |c| {
            c.needs("github")
                .credentials(Arc::new(MemoryVault::new().with("github", SECRET)))
        },
        |ctx: ToolContext, _: Value| async move {
            let c = ctx
                .declared_credential()
                .cloned()
                .expect("declared credential");
            assert_eq!(c.secret().expose(), SECRET);
            assert!(!format!("{c:?}").contains(SECRET));
            let pulled = ctx.credential("github").await?;
            Ok::<_, ToolError>((c.fingerprint.0.clone(), pulled.fingerprint.0.clone()))
        },
    )
    .await;
    let (declared, pulled) = out.unwrap();
    assert_eq!(declared, pulled, "same credential, same fingerprint");
    let resolved = all!(facts, CredentialResolved);
    assert_eq!(resolved.len(), 2);
    assert_eq!(resolved[0].mode, CredentialMode::Declared);
    assert_eq!(resolved[1].mode, CredentialMode::Pulled);
    assert_eq!(resolved[0].fingerprint.0, declared);
    assert_eq!(
        names(&facts)[1..6],
        [
            "call.started",
            "credential.requested",
            "credential.resolved",
            "credential.requested",
            "credential.resolved"
        ],
        "the declared need resolves before the tool runs"
    );
    assert!(!as_json(&facts).contains(SECRET));
}

// ---------------------------------------------------------------------------
// Artifacts
// ---------------------------------------------------------------------------

fn tenant(t: &str) -> Identity {
    Identity {
        tenant: Some(t.into()),
        principal: Some("ann".into()),
        conversation: Some("conv-1".into()),
    }
}

#[tokio::test]
async fn artifact_scope_cannot_be_widened_and_put_stamps_its_origin() {
    let store = Arc::new(MemoryArtifactStore::new());
    let lab = Lab::new(RecorderConfig::default()).await;
    let get = |run: Run, id: String| {
        let store = store.clone();
        async move {
            let out = run
                .call("reader", json!({}))
                .artifacts(store)
                .invoke(move |ctx: ToolContext, _: Value| async move {
                    let found = ctx.artifacts().get(&id).await?;
                    Ok::<_, ToolError>(found)
                })
                .await
                .unwrap();
            run.end(RunStatus::Completed).await.unwrap();
            out
        }
    };

    let a = lab.run(RunStart::new("run-a").identity(tenant("A"))).await;
    let meta = a
        .call("writer", json!({}))
        .artifacts(store.clone())
        .invoke(|ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(
                ctx.artifacts()
                    .put("text/plain", b"tenant A's report".to_vec())
                    .await?,
            )
        })
        .await
        .unwrap();
    a.end(RunStatus::Completed).await.unwrap();

    let b = lab.run(RunStart::new("run-b").identity(tenant("B"))).await;
    let from_b = get(b, meta.id.clone()).await;
    let a2 = lab.run(RunStart::new("run-a2").identity(tenant("A"))).await;
    let from_a2 = get(a2, meta.id.clone()).await;
    let none = lab.run(RunStart::new("run-none")).await;
    let from_none = get(none, meta.id.clone()).await;
    let book = lab.done().await;

    assert_eq!(from_b, None, "another tenant cannot read it");
    assert_eq!(from_none, None, "a run without identity cannot read it");
    let (found, bytes) = from_a2.expect("the same scope reads it");
    assert_eq!(bytes, b"tenant A's report");
    assert_eq!(found, meta);

    assert_eq!(
        meta.origin,
        Origin {
            run_id: Some("run-a".into()),
            call_id: "c1".into()
        }
    );
    assert_eq!(
        meta.scope,
        Identity {
            conversation: Some("conversation:conv-1".into()),
            ..tenant("A")
        },
        "scope = the run's identity, its conversation marked as named (recorder/tests/it/isolation.rs has the rest)"
    );
    assert_eq!(meta.size, bytes.len() as u64);
    let put = book.facts("run-a");
    assert_eq!(one!(put, ArtifactPut).meta, meta);
    assert_eq!(
        book.archive.artifact(&meta.digest).unwrap().as_deref(),
        Some(&b"tenant A's report"[..]),
        "the bytes are in the archive for replay"
    );
    let b_facts = book.facts("run-b");
    let got = one!(b_facts, ArtifactGet);
    assert_eq!((got.id.as_str(), &got.meta), (meta.id.as_str(), &None));
}

// ---------------------------------------------------------------------------
// Identity
// ---------------------------------------------------------------------------

#[tokio::test]
async fn identity_and_session_are_what_the_caller_supplied_never_synthesised() {
    let only_tenant = Identity {
        tenant: Some("acme".into()),
        principal: None,
        conversation: None,
    };
    let empty = Identity {
        tenant: Some(String::new()),
        principal: None,
        conversation: Some(String::new()),
    };
    for (start, identity, session) in [
        (RunStart::new("r"), None, None),
        (
            RunStart::new("r").identity(only_tenant.clone()),
            Some(only_tenant.clone()),
            None,
        ),
        // An empty session id is refused (recorder/tests/it/isolation.rs).
        (
            RunStart::new("r").identity(empty.clone()),
            Some(empty.clone()),
            None,
        ),
        (RunStart::new("r").session("sess-9"), None, Some("sess-9")),
    ] {
        let (out, facts, book) = record(RecorderConfig::default(), start, |run| async move {
            run.call("tool", json!({}))
                .invoke(|ctx: ToolContext, _: Value| async move {
                    Ok::<_, ToolError>((
                        ctx.identity().cloned(),
                        ctx.session_id().map(str::to_owned),
                        ctx.run_id().map(str::to_owned),
                    ))
                })
                .await
        })
        .await;
        let (seen_identity, seen_session, run_id) = out.unwrap();
        assert_eq!(
            seen_identity, identity,
            "the tool sees the caller's identity"
        );
        assert_eq!(seen_session.as_deref(), session);
        assert_eq!(run_id.as_deref(), Some("r"));
        let started = one!(facts, RunStarted);
        assert_eq!(started.identity, identity);
        assert_eq!(started.session_id.as_deref(), session);
        let data = serde_json::to_value(&facts[0]).unwrap()["data"].clone();
        let data = data.as_object().unwrap();
        assert_eq!(
            data.get("identity"),
            Some(&serde_json::to_value(&identity).unwrap()),
            "absent is recorded as null, present as given"
        );
        let record = book.archive.run("r").unwrap();
        assert_eq!(record.identity, identity);
        assert_eq!(record.session_id.as_deref(), session);
    }
}

// ---------------------------------------------------------------------------
// Nested dispatch
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_child_call_links_to_its_parent_and_files_under_its_own_id() {
    let tools = Tools::new().register("double", |ctx: ToolContext, n: u64| async move {
        for i in 0..n {
            ctx.progress(json!({ "i": i }));
        }
        Ok::<_, ToolError>(n * 2)
    });
    let (out, facts) = call(
        |c| c.dispatcher(tools),
        |ctx: ToolContext, _: Value| async move {
            assert!(ctx.can_dispatch());
            ctx.progress(json!({"parent": "before"}));
            let doubled = ctx.dispatch("double", 3).await?;
            let missing = ctx.dispatch("nope", 1).await.unwrap_err();
            Ok::<_, ToolError>((doubled, missing.to_string()))
        },
    )
    .await;
    let (doubled, missing) = out.unwrap();
    assert_eq!(doubled, json!(6));
    assert!(missing.contains("nope"), "{missing}");

    let started = all!(facts, CallStarted);
    let parents: Vec<(&str, &str, Option<&str>)> = started
        .iter()
        .map(|c| {
            (
                c.call_id.as_str(),
                c.tool_name.as_str(),
                c.parent_call.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        parents,
        [
            ("c1", "tool", None),
            ("c2", "double", Some("c1")),
            ("c3", "nope", Some("c1"))
        ]
    );
    let child: Vec<&str> = facts
        .iter()
        .filter(|f| f.call.as_deref() == Some("c2"))
        .map(|f| f.kind.name())
        .collect();
    assert_eq!(
        child,
        [
            "call.started",
            "progress",
            "progress",
            "progress",
            "call.ended"
        ]
    );
    assert_eq!(ended(&facts, "c2"), CallOutcome::Ok { result: json!(6) });
    assert!(matches!(ended(&facts, "c3"), CallOutcome::Error { .. }));
    let parent_progress: Vec<&Fact> = facts
        .iter()
        .filter(|f| f.call.as_deref() == Some("c1") && f.kind.name() == "progress")
        .collect();
    assert_eq!(
        parent_progress.len(),
        1,
        "the child's progress is not the parent's"
    );
    // The children lie inside the parent.
    assert!(pos(&facts, "call.started", Some("c2")) > pos(&facts, "call.started", Some("c1")));
    assert!(pos(&facts, "call.ended", Some("c3")) < pos(&facts, "call.ended", Some("c1")));
}

#[tokio::test]
async fn dispatch_without_a_dispatcher_fails_closed_saying_how_to_attach_one() {
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            assert!(!ctx.can_dispatch());
            Ok::<_, ToolError>(
                ctx.dispatch("other", json!({}))
                    .await
                    .unwrap_err()
                    .to_string(),
            )
        },
    )
    .await;
    let message = out.unwrap();
    assert!(message.contains(".dispatcher("), "{message}");
    assert!(message.contains("other"), "{message}");
    assert_eq!(all!(facts, CallStarted).len(), 1, "no child call was made");
}

// ---------------------------------------------------------------------------
// Respond and output history
// ---------------------------------------------------------------------------

#[tokio::test]
async fn respond_ends_the_call_with_its_value_and_output_history_keeps_order() {
    let histories = Arc::new(Mutex::new(Vec::new()));
    let h = histories.clone();
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            assert!(ctx.output_history().is_empty());
            ctx.set_output_as(json!({"draft": 1}), Stage::new("draft"));
            ctx.set_output_as(
                json!({"draft": 2}),
                Stage::new("refined").note("after ranking"),
            );
            h.lock().unwrap().push(ctx.output_history());
            let responded = ctx.respond(json!({"final": 3}));
            h.lock().unwrap().push(ctx.output_history());
            responded
        },
    )
    .await;
    let value = out.unwrap();
    let (before, after) = {
        let h = histories.lock().unwrap();
        (h[0].clone(), h[1].clone())
    };
    assert_eq!(before, [json!({"draft": 1}), json!({"draft": 2})]);
    assert_eq!(
        after,
        [
            json!({"draft": 1}),
            json!({"draft": 2}),
            json!({"final": 3})
        ]
    );
    assert_eq!(value, json!({"final": 3}));
    let outputs: Vec<(Value, Option<&str>, Option<&str>)> = all!(facts, CallOutput)
        .iter()
        .map(|o| (o.value.clone(), o.stage.as_deref(), o.note.as_deref()))
        .collect();
    assert_eq!(
        outputs,
        [
            (json!({"draft": 1}), Some("draft"), None),
            (json!({"draft": 2}), Some("refined"), Some("after ranking")),
            (json!({"final": 3}), Some("respond"), None),
        ]
    );
    assert_eq!(
        ended(&facts, "c1"),
        CallOutcome::Ok {
            result: json!({"final": 3})
        }
    );
    assert_eq!(
        pos(&facts, "call.ended", None),
        pos(&facts, "call.output", None) + 3
    );
}

// ---------------------------------------------------------------------------
// Effects, clock, randomness
// ---------------------------------------------------------------------------

#[tokio::test]
async fn effects_clock_and_randomness_are_recorded_with_their_values() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let (out, facts) = call(
        |c| c,
        |ctx: ToolContext, _: Value| async move {
            let r1 = r.clone();
            let ok: Value = ctx
                .effect(
                    "http.get",
                    &json!({"url": "https://example.test/a"}),
                    move || async move {
                        r1.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, String>(json!({"status": 200, "body": "ünïcode"}))
                    },
                )
                .await?;
            let err = ctx
                .effect(
                    "http.post",
                    &json!({"url": "https://example.test/b"}),
                    move || async move {
                        r.fetch_add(1, Ordering::SeqCst);
                        Err::<Value, _>("upstream answered 503")
                    },
                )
                .await
                .unwrap_err();
            let t = ctx.now();
            let x = ctx.random();
            Ok::<_, ToolError>((ok, err.to_string(), t, x))
        },
    )
    .await;
    let (ok, err, t, x) = out.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "each effect closure ran exactly once"
    );
    assert_eq!(ok, json!({"status": 200, "body": "ünïcode"}));
    assert_eq!(err, "upstream answered 503");
    let effects = all!(facts, Effect);
    assert_eq!(
        effects,
        [
            &Effect {
                name: "http.get".into(),
                request: json!({"url": "https://example.test/a"}),
                outcome: EffectOutcome::Ok(json!({"status": 200, "body": "ünïcode"})),
            },
            &Effect {
                name: "http.post".into(),
                request: json!({"url": "https://example.test/b"}),
                outcome: EffectOutcome::Err("upstream answered 503".into()),
            },
        ]
    );
    assert_eq!(one!(facts, Clock).unix_nanos, t);
    assert_eq!(one!(facts, Random).value, x);
    assert!(t > 1_600_000_000_000_000_000, "unix nanoseconds");
}

// ---------------------------------------------------------------------------
// Redaction and large payloads
// ---------------------------------------------------------------------------

/// A payload with secret-named keys (default rules and the user rule
/// `customer_pin`) and neighbours that must stay.
fn sensitive(place: &str) -> Value {
    json!({
        "place": place,
        "password": "pw-value-1",
        "access_token": "tok-value-2",
        "secret": "sec-value-3",
        "Authorization": "Bearer auth-value-4",
        "apiKey": "key-value-5",
        "customerPin": "pin-value-6",
        "nested": [{ "x-api-key": "key-value-7", "max_tokens": 5, "username": "ann" }],
    })
}

fn redacted(place: &str) -> Value {
    json!({
        "place": place,
        "password": MARKER,
        "access_token": MARKER,
        "secret": MARKER,
        "Authorization": MARKER,
        "apiKey": MARKER,
        "customerPin": MARKER,
        "nested": [{ "x-api-key": MARKER, "max_tokens": 5, "username": "ann" }],
    })
}

const SENSITIVE_VALUES: [&str; 7] = [
    "pw-value-1",
    "tok-value-2",
    "sec-value-3",
    "auth-value-4",
    "key-value-5",
    "pin-value-6",
    "key-value-7",
];

#[tokio::test]
async fn secret_named_keys_are_redacted_everywhere_a_payload_goes() {
    let cfg = config(|c| c.redact_keys = vec!["customer_pin".into()]);
    let (_, facts, book) = record(cfg, RunStart::new("run-1"), |run| async move {
        run.call("tool", sensitive("args"))
            .invoke(|ctx: ToolContext, args: Value| async move {
                assert_eq!(args, sensitive("args"), "the tool sees its real args");
                ctx.progress(sensitive("progress"));
                ctx.log(Level::Info, sensitive("log"));
                ctx.set_output(sensitive("output"));
                let echoed: Value = ctx
                    .effect("echo", &sensitive("effect.request"), || async {
                        Ok::<_, String>(sensitive("effect.result"))
                    })
                    .await?;
                assert_eq!(
                    echoed,
                    sensitive("effect.result"),
                    "the tool sees the real result"
                );
                Ok::<_, ToolError>(sensitive("result"))
            })
            .await
            .unwrap();
    })
    .await;
    // Each hidden value's marker is keyed (its tag told apart from the
    // others'); compared here as bare markers.
    let c = one!(facts, CallStarted);
    assert_eq!(unkeyed(&c.args), redacted("args"));
    assert_eq!(
        unkeyed(&one!(facts, Progress).payload),
        redacted("progress")
    );
    assert_eq!(unkeyed(&one!(facts, Log).data), redacted("log"));
    assert_eq!(unkeyed(&one!(facts, CallOutput).value), redacted("output"));
    let e = one!(facts, Effect);
    assert_eq!(unkeyed(&e.request), redacted("effect.request"));
    let EffectOutcome::Ok(result) = &e.outcome else {
        panic!("{:?}", e.outcome)
    };
    assert_eq!(unkeyed(result), redacted("effect.result"));
    let CallOutcome::Ok { result } = ended(&facts, "c1") else {
        panic!("not ok")
    };
    assert_eq!(unkeyed(&result), redacted("result"));
    // The same value under two keys is tagged alike; another apart.
    let tag = |k: &str| c.args[k].as_str().unwrap().to_owned();
    assert!(tag("password").starts_with("[REDACTED:"), "{}", c.args);
    assert_ne!(tag("password"), tag("secret"));
    let text = as_json(&facts);
    for v in SENSITIVE_VALUES {
        assert!(!text.contains(v), "{v} in {text}");
    }
    drop(book);
}

fn large(tag: &str, n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({ "i": i, "text": format!("{tag} line {i}: ünïcödé ✓ 日本") }))
        .collect();
    json!({ "tag": tag, "items": items, "z_last": true, "a_first": false })
}

#[tokio::test]
async fn a_payload_over_the_inline_limit_is_stored_whole_as_an_artifact_reference() {
    let cfg = config(|c| c.inline_limit = 2048);
    let (_, facts, book) = record(cfg, RunStart::new("run-1"), |run| async move {
        run.call("tool", large("args", 100))
            .invoke(|ctx: ToolContext, _: Value| async move {
                ctx.progress(large("progress", 200));
                ctx.progress(json!({"message": "small stays inline"}));
                ctx.log(Level::Info, large("log", 100));
                ctx.set_output_as(large("output", 100), Stage::new("draft"));
                Ok::<_, ToolError>(large("result", 300))
            })
            .await
            .unwrap();
    })
    .await;
    let check = |stored: &Value, original: Value| {
        let digest = artifact_ref(stored)
            .unwrap_or_else(|| panic!("not an artifact reference: {stored}"))
            .to_owned();
        assert!(digest.starts_with("sha256:"), "{digest}");
        assert_eq!(stored["media_type"], json!("application/json"));
        let bytes = book
            .archive
            .artifact(&digest)
            .unwrap()
            .expect("the referenced bytes are in the archive");
        assert_eq!(stored["size"], json!(bytes.len()));
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, original, "nothing cut");
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&original).unwrap(),
            "key order kept"
        );
    };
    check(&one!(facts, CallStarted).args, large("args", 100));
    let progress = all!(facts, Progress);
    check(&progress[0].payload, large("progress", 200));
    assert_eq!(
        progress[1].payload,
        json!({"message": "small stays inline"})
    );
    assert_eq!(progress.iter().map(|p| p.count).collect::<Vec<_>>(), [1, 2]);
    check(&one!(facts, Log).data, large("log", 100));
    check(&one!(facts, CallOutput).value, large("output", 100));
    let CallOutcome::Ok { result } = ended(&facts, "c1") else {
        panic!("call failed")
    };
    check(&result, large("result", 300));
}

#[tokio::test]
async fn a_spilled_payload_is_redacted_before_it_is_stored() {
    let cfg = config(|c| {
        c.inline_limit = 1024;
        c.redact_keys = vec!["customer_pin".into()];
    });
    let (_, facts, book) = record(cfg, RunStart::new("run-1"), |run| async move {
        run.call("tool", json!({}))
            .invoke(|ctx: ToolContext, _: Value| async move {
                let mut payload = large("big", 100);
                payload["creds"] = sensitive("big");
                ctx.progress(payload);
                Ok::<_, ToolError>(())
            })
            .await
            .unwrap();
    })
    .await;
    let stored = &one!(facts, Progress).payload;
    let digest = artifact_ref(stored).expect("spilled");
    let bytes = book.archive.artifact(digest).unwrap().unwrap();
    let back: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(unkeyed(&back["creds"]), redacted("big"));
    for v in SENSITIVE_VALUES {
        assert!(
            !contains(&bytes, v.as_bytes()),
            "{v} stored in the spilled artifact"
        );
    }
}

// ---------------------------------------------------------------------------
// Durability modes
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_durability_mode_records_every_fact() {
    const CALLS: usize = 4;
    const PROGRESS: usize = 25;
    for durability in [
        Durability::Buffered,
        Durability::CallBoundary,
        Durability::EveryFact,
    ] {
        let cfg = config(|c| c.durability = durability);
        let (_, facts, book) = record(cfg, RunStart::new("run-1"), |run| async move {
            for call in 0..CALLS {
                run.call("tool", json!({ "call": call }))
                    .invoke(move |ctx: ToolContext, _: Value| async move {
                        for i in 0..PROGRESS {
                            ctx.progress(json!({ "call": call, "i": i }));
                            if i % 10 == 0 {
                                ctx.log(Level::Debug, json!({ "i": i }));
                            }
                        }
                        ctx.now();
                        Ok::<_, ToolError>(call)
                    })
                    .await
                    .unwrap();
            }
        })
        .await;
        let per_call = 1 + PROGRESS + PROGRESS.div_ceil(10) + 1 + 1;
        assert_eq!(facts.len(), 2 + CALLS * per_call, "{durability:?}");
        for call in 0..CALLS {
            let id = format!("c{}", call + 1);
            let progress: Vec<u64> = facts
                .iter()
                .filter(|f| f.call.as_deref() == Some(id.as_str()))
                .filter_map(|f| match &f.kind {
                    FactKind::Progress(p) => {
                        assert_eq!(p.payload["call"], json!(call));
                        Some(p.count)
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(
                progress,
                (1..=PROGRESS as u64).collect::<Vec<_>>(),
                "{durability:?}"
            );
        }
        let record = book.archive.run("run-1").unwrap();
        assert_eq!(record.state, RunState::Completed);
        assert_eq!(
            (record.facts, record.calls, record.ended_calls),
            (facts.len() as u64, CALLS as u64, CALLS as u64)
        );
    }
}

#[tokio::test]
async fn a_secret_named_key_nested_deeper_than_the_depth_cap_is_still_redacted() {
    let deep = |leaf: Value| {
        let mut v = leaf;
        for _ in 0..(reel::redact::MAX_JSON_DEPTH + 20) {
            v = json!([v]);
        }
        json!({ "deep": v })
    };
    let (_, facts, _) = record(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        |run| async move {
            run.call("tool", json!({}))
                .invoke(move |ctx: ToolContext, _: Value| async move {
                    ctx.progress(deep(
                        json!({ "password": "pw-deep-value", "kept": "visible-leaf" }),
                    ));
                    Ok::<_, ToolError>(())
                })
                .await
                .unwrap();
        },
    )
    .await;
    let text = as_json(&facts);
    assert!(
        text.contains("visible-leaf"),
        "the deep leaf is kept (as text)"
    );
    assert!(
        !text.contains("pw-deep-value"),
        "a secret-named key deep in a payload escaped redaction: {}",
        &text[text.find("pw-deep").unwrap().saturating_sub(80)..][..120]
    );
}

#[tokio::test]
async fn a_credential_value_is_scrubbed_from_every_free_text_field() {
    const TOKEN: &str = "tok_QXZJKVWYBGHMNPUL";
    let (out, facts) = call(
        |c| c.credentials(Arc::new(MemoryVault::new().with("api", TOKEN))),
        |ctx: ToolContext, _: Value| async move {
            let token = ctx.credential("api").await?;
            let t = token.secret().expose().to_owned();
            ctx.progress(json!({ "message": format!("calling with {t}") }));
            ctx.log(Level::Info, format!("token is {t}"));
            ctx.set_output_as(
                json!({ "header": format!("Bearer {t}") }),
                Stage::new(format!("stage-{t}")).note(format!("called the API with {t}")),
            );
            let t2 = t.clone();
            let _: Value = ctx
                .effect(
                    "api.call",
                    &json!({ "auth_header": format!("Bearer {t}"), t.clone(): 1 }),
                    move || async move { Ok::<_, String>(json!({ "echo": t2 })) },
                )
                .await?;
            ctx.on_teardown(TeardownScope::Call, "conn", {
                let t = t.clone();
                move || async move { Err::<(), _>(format!("closing {t} failed")) }
            })?;
            Err::<(), _>(ToolError::msg(format!("request failed with token {t}")))
        },
    )
    .await;
    assert!(
        out.unwrap_err().to_string().contains(TOKEN),
        "the host sees the tool's own error"
    );
    let text = as_json(&facts);
    assert!(
        !text.contains(TOKEN),
        "the credential value is persisted: {text}"
    );
    assert!(text.matches("[REDACTED:").count() >= 9, "{text}");
}

/// A value under a secret-named key of the args is scrubbed from the rest of
/// the run: here the argument error that echoes it.
#[tokio::test]
async fn an_argument_error_does_not_echo_a_secret_named_value() {
    #[derive(Debug, serde::Deserialize)]
    struct Args {
        #[allow(dead_code)]
        password: u32,
    }
    async fn strict(_ctx: ToolContext, _args: Args) -> Result<Value, ToolError> {
        Ok(json!(null))
    }
    let (out, facts, _) = record(
        RecorderConfig::default(),
        RunStart::new("run-1"),
        |run| async move {
            run.call("strict", json!({ "password": "hunter2-canary" }))
                .invoke(strict)
                .await
        },
    )
    .await;
    let err = out.expect_err("the args do not fit");
    // The error handed to the host names what was wrong...
    assert!(err.to_string().contains("invalid type"), "{err}");
    // ...but nothing recorded carries the value.
    let text = as_json(&facts);
    assert!(!text.contains("hunter2-canary"), "{text}");
    assert!(text.contains("[REDACTED:"));
}

/// An accepted answer is checked against the question's schema, and what
/// does not fit is recorded with the answer.
#[tokio::test]
async fn an_accepted_answer_that_does_not_fit_the_schema_records_validation_errors() {
    use reel::context::Elicitation;
    let elicitor = Arc::new(reel_recorder::ScriptedElicitor::new([
        ElicitOutcome::Accept {
            content: json!({ "confirm": "yes" }),
        },
    ]));
    let schema = json!({
        "type": "object",
        "properties": { "confirm": { "type": "boolean" }, "reason": { "type": "string" } },
        "required": ["confirm", "reason"]
    });
    let (out, facts) = call(
        move |c| c.elicitor(elicitor),
        move |ctx, _| async move {
            let answer = ctx.elicit(Elicitation::form("Sure?", schema)).await?;
            Ok(answer.validation_errors)
        },
    )
    .await;
    let errors = out.unwrap();
    // The full JSON Schema, each failing place by JSON pointer.
    assert_eq!(
        errors,
        [
            "(root): \"reason\" is a required property",
            "/confirm: \"yes\" is not of type \"boolean\""
        ]
    );
    let answered = one!(facts, ElicitAnswered);
    assert_eq!(answered.validation_errors, errors);
}

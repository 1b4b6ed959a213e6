//! The offline guarantee: replay never runs an effect closure, never runs a
//! cleanup and never waits on the wall clock. Each tool here is recorded
//! with closures that work (and are shown to have run), then replayed with a
//! version whose closures would panic or reach out, and sets a flag first:
//! the replay matches and the flags stay down.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reel::context::{ToolContext, ToolError};
use reel::fact::{FactKind, RunStatus, TeardownOutcome, TeardownScope};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig, RunStart};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::support::assert_clean;

/// What the effect and cleanup closures do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Recording: really probe the port, really clean up.
    Live,
    /// Replay: panic if ever run.
    Panics,
    /// Replay: would connect out (to a closed port) if ever run.
    WouldConnect,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProbeArgs {
    port: u16,
}

#[derive(Default)]
struct Flags {
    /// An effect closure ran.
    effect_ran: AtomicBool,
    /// A cleanup ran.
    cleanup_ran: AtomicUsize,
}

/// Probes a TCP port through a journaled effect and registers a call- and
/// a run-scoped cleanup.
async fn probe(
    ctx: ToolContext,
    args: ProbeArgs,
    mode: Mode,
    flags: Arc<Flags>,
) -> Result<Value, ToolError> {
    ctx.progress(json!({ "message": format!("probing 127.0.0.1:{}", args.port) }));
    let port = args.port;
    let f = flags.clone();
    let status: Value = ctx
        .effect(
            "tcp.probe",
            &json!({ "host": "127.0.0.1", "port": port }),
            move || async move {
                f.effect_ran.store(true, Ordering::SeqCst);
                match mode {
                    Mode::Live => {
                        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                            Ok(_) => Ok(json!({ "open": true })),
                            Err(_) => Ok(json!({ "open": false })),
                        }
                    }
                    Mode::Panics => panic!("replay ran the effect closure"),
                    Mode::WouldConnect => {
                        // Reaching this line is the failure; the flag above
                        // already tells. No connection is made.
                        Err(format!("would connect to 127.0.0.1:{port}"))
                    }
                }
            },
        )
        .await?;
    for scope in [TeardownScope::Call, TeardownScope::Run] {
        let f = flags.clone();
        ctx.on_teardown(scope, &format!("probe:{port}"), move || async move {
            f.cleanup_ran.fetch_add(1, Ordering::SeqCst);
            match mode {
                Mode::Live => Ok(()),
                Mode::Panics => panic!("replay ran a cleanup"),
                Mode::WouldConnect => Err(format!("would connect to 127.0.0.1:{port}")),
            }
        })?;
    }
    ctx.progress(json!({ "message": "probed", "status": status }));
    Ok(json!({ "port": port, "status": status }))
}

fn probe_tools(mode: Mode, flags: Arc<Flags>) -> Tools {
    Tools::new().register("probe", move |ctx, args: ProbeArgs| {
        probe(ctx, args, mode, flags.clone())
    })
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

/// Records one call of `tool` with `args` in a fresh archive and writes its
/// tape into `dir`; returns the tape's path.
async fn record_tape<A: Serialize>(
    dir: &std::path::Path,
    name: &str,
    args: A,
    tools: &Tools,
) -> std::path::PathBuf {
    let recorder = Recorder::open(dir.join("archive"), RecorderConfig::default())
        .await
        .unwrap();
    let run = recorder.start_run(RunStart::new(name)).await.unwrap();
    run.call(name, args)
        .invoke_erased(tools.get(name).unwrap())
        .await
        .unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let path = dir.join(format!("{name}.tape.jsonl"));
    let mut file = std::fs::File::create(&path).unwrap();
    Tape::export(&archive, name)
        .unwrap()
        .write(&mut file)
        .unwrap();
    path
}

/// Records `probe` live and checks that the live closures really ran.
async fn record_probe(dir: &std::path::Path) -> Recording {
    let live = Arc::new(Flags::default());
    let port = closed_port();
    let path = record_tape(
        dir,
        "probe",
        ProbeArgs { port },
        &probe_tools(Mode::Live, live.clone()),
    )
    .await;
    assert!(live.effect_ran.load(Ordering::SeqCst), "live effect ran");
    assert_eq!(
        live.cleanup_ran.load(Ordering::SeqCst),
        2,
        "live cleanups ran"
    );
    let recording = Recording::from_tape_file(path).unwrap();
    let ran: Vec<(TeardownScope, TeardownOutcome)> = recording
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::TeardownRan(t) => Some((t.scope, t.outcome.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ran,
        [
            (TeardownScope::Call, TeardownOutcome::Ok),
            (TeardownScope::Run, TeardownOutcome::Ok)
        ]
    );
    recording
}

/// Gives anything a replay might have spawned a chance to run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_closure_that_would_panic_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let recording = record_probe(dir.path()).await;
    let flags = Arc::new(Flags::default());
    let report = replay(
        &recording,
        &probe_tools(Mode::Panics, flags.clone()),
        &ReplayOptions::default(),
    )
    .await;
    settle().await;
    assert_clean(&report);
    assert!(
        !flags.effect_ran.load(Ordering::SeqCst),
        "replay ran an effect"
    );
    assert_eq!(
        flags.cleanup_ran.load(Ordering::SeqCst),
        0,
        "replay ran a cleanup"
    );
    // The tool got the recorded outcome instead.
    assert_eq!(
        report.calls[0].result.actual,
        recording.calls["c1"].ended().map(|e| e.outcome.clone())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effect_closure_that_would_connect_out_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let recording = record_probe(dir.path()).await;
    let flags = Arc::new(Flags::default());
    let report = replay(
        &recording,
        &probe_tools(Mode::WouldConnect, flags.clone()),
        &ReplayOptions::default(),
    )
    .await;
    settle().await;
    assert_clean(&report);
    assert!(
        !flags.effect_ran.load(Ordering::SeqCst),
        "replay ran an effect"
    );
    assert_eq!(
        flags.cleanup_ran.load(Ordering::SeqCst),
        0,
        "replay ran a cleanup"
    );
}

#[tokio::test]
async fn cleanups_never_run_in_replay() {
    let dir = tempfile::tempdir().unwrap();
    let recording = record_probe(dir.path()).await;
    let flags = Arc::new(Flags::default());
    let tools = probe_tools(Mode::Panics, flags.clone());
    // Through the test helper too (its own runtime), twice.
    let tape = dir.path().join("probe.tape.jsonl");
    for _ in 0..2 {
        let report = reel_replayer::support::replay_tape(
            "",
            tape.to_str().unwrap(),
            &tools,
            &ReplayOptions::default(),
        );
        assert_clean(&report);
    }
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    settle().await;
    assert_clean(&report);
    assert_eq!(
        flags.cleanup_ran.load(Ordering::SeqCst),
        0,
        "replay ran a cleanup"
    );
    assert!(!flags.effect_ran.load(Ordering::SeqCst));
    // The recorded cleanups stand in the timeline, as recorded.
    let ran = report
        .facts
        .iter()
        .filter(|f| matches!(f.kind, FactKind::TeardownRan(_)))
        .count();
    assert_eq!(ran, 2, "{report}");
}

/// Sleeps ten minutes (tokio time) between its facts.
async fn nap(ctx: ToolContext, minutes: u64) -> Result<Value, ToolError> {
    let long = Duration::from_secs(minutes * 60);
    ctx.progress(json!({ "message": "falling asleep" }));
    let start = tokio::time::Instant::now();
    tokio::time::sleep(long).await;
    // The sleep really happened, in the runtime's time.
    let slept = start.elapsed() >= long;
    ctx.progress(json!({ "message": "woke up", "slept": slept }));
    tokio::time::sleep(long).await;
    ctx.log(
        reel::fact::Level::Info,
        json!({ "message": "napped twice" }),
    );
    Ok(json!({ "minutes": minutes * 2, "slept": slept }))
}

#[tokio::test(start_paused = true)]
async fn a_ten_minute_sleep_replays_in_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new().register("nap", nap);
    // Recorded on a paused clock too, or recording would take 20 minutes.
    let wall = Instant::now();
    let tape = record_tape(dir.path(), "nap", 10u64, &tools).await;
    assert!(wall.elapsed() < Duration::from_secs(30));

    let wall = Instant::now();
    let report = reel_replayer::support::replay_tape(
        "",
        tape.to_str().unwrap(),
        &tools,
        &ReplayOptions::default(),
    );
    let took = wall.elapsed();
    assert_clean(&report);
    assert!(
        took < Duration::from_secs(30),
        "a replay of two ten-minute sleeps took {took:?} of wall time"
    );
    let c1 = &report.calls[0];
    assert_eq!(c1.facts_replayed, 3);
    assert_eq!(
        c1.result.actual,
        Some(reel::fact::CallOutcome::Ok {
            result: json!({ "minutes": 20, "slept": true })
        })
    );
}

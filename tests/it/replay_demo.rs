//! Replay tests as a user writes them: tapes recorded from the demo tools
//! are committed under tests/tapes/, replayed against today's tools, and
//! their reports snapshotted with insta (in tests/it/snapshots/, insta's place).
//!
//! To refresh a tape after an intended change of behaviour:
//! `reel demo --archive /tmp/a && reel export demo-deploy -o tests/tapes/demo-deploy.tape.jsonl --archive /tmp/a`.

use reel_replayer::{assert_replay_snapshot, assert_replays};

#[test]
fn deploy_still_behaves() {
    assert_replay_snapshot!("tests/tapes/demo-deploy.tape.jsonl", reel_demo::tools());
}

#[test]
fn search_with_nested_dispatch_still_behaves() {
    assert_replay_snapshot!("tests/tapes/demo-search.tape.jsonl", reel_demo::tools());
}

#[test]
fn cancelled_walk_still_stops_at_hop_three() {
    let report = assert_replay_snapshot!(
        "tests/tapes/demo-walk-cancelled.tape.jsonl",
        reel_demo::tools()
    );
    let progress = report
        .facts
        .iter()
        .filter(|f| f.kind.name() == "progress")
        .count();
    assert_eq!(progress, 3, "cancellation fires where it was recorded");
}

#[test]
fn failed_credential_still_stops_deploy() {
    assert_replay_snapshot!(
        "tests/tapes/demo-deploy-failed.tape.jsonl",
        reel_demo::tools()
    );
}

#[tokio::test]
async fn degraded_audit_replays_from_an_async_test() {
    assert_replays!(
        "tests/tapes/demo-audit-degraded.tape.jsonl",
        reel_demo::tools()
    );
}

/// Records the demo's search (nested dispatch, artifacts: random artifact
/// and invocation ids) straight into a tape with `TapeRecording`.
async fn search_tape(path: &std::path::Path) -> reel::RunRecord {
    use reel::fact::RunStatus;
    use reel_recorder::{MemoryArtifactStore, RunStart, TapeRecording};
    let tools = reel_demo::tools();
    let recording = TapeRecording::start(RunStart::new("search-1"))
        .await
        .expect("a run in a temporary archive");
    let out = recording
        .run()
        .call("search", "sled block layout")
        .artifacts(std::sync::Arc::new(MemoryArtifactStore::new()))
        .dispatcher(tools.clone())
        .invoke_tool(&tools)
        .await;
    assert!(out.is_ok(), "the search runs: {out:?}");
    recording
        .finish(RunStatus::Completed, path)
        .await
        .expect("the tape is written")
}

/// The short path from a run to a replay test: a run recorded with
/// `TapeRecording` is a tape (its folder made) that replays, and recording
/// the same behaviour again changes no line of its snapshot (random
/// artifact and invocation ids are numbered, times redacted).
#[tokio::test]
async fn a_run_recorded_into_a_tape_replays_and_snapshots_stably() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (
        dir.path().join("tapes/first.tape.jsonl"),
        dir.path().join("tapes/second.tape.jsonl"),
    );
    let record = search_tape(&first).await;
    assert_eq!((record.run_id.as_str(), record.calls), ("search-1", 3));
    search_tape(&second).await;
    let (a, b) = (
        std::fs::read_to_string(&first).unwrap(),
        std::fs::read_to_string(&second).unwrap(),
    );
    assert!(
        a.contains("\"art-") && a != b,
        "two recordings differ in their random ids"
    );
    let snapshot = |path: &std::path::Path| {
        let report = assert_replays!(path.to_str().unwrap(), reel_demo::tools());
        let mut value = reel_replayer::support::snapshot_value(&report);
        strip_times(&mut value);
        // The tape's path, as the test names it (one name in a real test).
        value["source"] = "[tape]".into();
        value
    };
    let (sa, sb) = (snapshot(&first), snapshot(&second));
    assert!(sa.to_string().contains("art-[1]"), "ids numbered");
    assert_eq!(sa, sb, "the same behaviour, the same snapshot");
}

/// What the snapshot settings redact (times, durations, clock reads).
fn strip_times(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for key in ["at", "offset", "duration_ns", "unix_nanos"] {
                map.remove(key);
            }
            map.values_mut().for_each(strip_times);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_times),
        _ => {}
    }
}

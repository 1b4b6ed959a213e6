//! Replay tests as a user writes them: tapes recorded from the demo tools
//! are committed under tests/tapes/, replayed against today's tools, and
//! their reports snapshotted with insta (under snapshots/).
//!
//! To refresh a tape after an intended change of behaviour:
//! `reel demo --archive /tmp/a && reel export demo-deploy -o tests/tapes/demo-deploy.tape.jsonl --archive /tmp/a`.

use reel_recorder::demo;
use reel_replayer::{assert_replay_snapshot, assert_replays};

#[test]
fn deploy_still_behaves() {
    assert_replay_snapshot!("tests/tapes/demo-deploy.tape.jsonl", demo::tools());
}

#[test]
fn search_with_nested_dispatch_still_behaves() {
    assert_replay_snapshot!("tests/tapes/demo-search.tape.jsonl", demo::tools());
}

#[test]
fn cancelled_walk_still_stops_at_hop_three() {
    let report =
        assert_replay_snapshot!("tests/tapes/demo-walk-cancelled.tape.jsonl", demo::tools());
    let progress = report
        .facts
        .iter()
        .filter(|f| f.kind.name() == "progress")
        .count();
    assert_eq!(progress, 3, "cancellation fires where it was recorded");
}

#[test]
fn failed_credential_still_stops_deploy() {
    assert_replay_snapshot!("tests/tapes/demo-deploy-failed.tape.jsonl", demo::tools());
}

#[tokio::test]
async fn degraded_audit_replays_from_an_async_test() {
    assert_replays!("tests/tapes/demo-audit-degraded.tape.jsonl", demo::tools());
}

//! The demo runs: recorded into a real archive, they verify and together use
//! every fact kind of the catalogue.

use std::collections::BTreeSet;

use reel::{FactKind, RunState};
use reel_recorder::{Recorder, RecorderConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_use_every_fact_kind_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path(), RecorderConfig::default())
        .await
        .unwrap();
    let ids = reel_demo::record(&recorder).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let mut kinds = BTreeSet::new();
    for id in &ids {
        for fact in archive.facts(id, ..).unwrap() {
            kinds.insert(fact.unwrap().kind.name().to_owned());
        }
    }
    // Kinds that record one of the recorder's own guards going off (a
    // report dropped by a full queue, a secret caught by the tripwire)
    // never happen in a healthy demo: `progress_storm.rs`,
    // `replayer/tests/it/progress_dropped.rs` and `tripwire.rs` record them.
    const GUARDS: &[&str] = &["progress.dropped", "redaction.tripped"];
    // A model call is taken in from an agent framework's spans (`reel
    // collect`, collect/tests/it/), never filed by a tool's context.
    const TAKEN_IN: &[&str] = &["model.called"];
    let missing: Vec<_> = FactKind::KNOWN
        .iter()
        .filter(|k| !kinds.contains(**k) && !GUARDS.contains(k) && !TAKEN_IN.contains(k))
        .collect();
    assert!(missing.is_empty(), "demo runs never use {missing:?}");

    let states: Vec<_> = ids
        .iter()
        .map(|id| archive.run(id).unwrap().state)
        .collect();
    assert_eq!(
        states,
        [
            RunState::Completed,
            RunState::Completed,
            RunState::Cancelled,
            RunState::Failed,
            RunState::Completed
        ]
    );
    let report = archive.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    // What a host claims ahead (`reel demo --nats`) is what is recorded:
    // the ids in order, each under its tenant.
    assert_eq!(ids, reel_demo::run_ids(""));
    for (id, name) in ids.iter().zip(reel_demo::RUN_NAMES) {
        let identity = archive.run(id).unwrap().identity;
        let tenant = identity.and_then(|i| i.tenant);
        assert_eq!(tenant.as_deref(), reel_demo::tenant_of(name), "{id}");
    }
}

#[tokio::test]
async fn demo_twice_gets_new_ids() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path(), RecorderConfig::default())
        .await
        .unwrap();
    let first = reel_demo::record(&recorder).await.unwrap();
    let second = reel_demo::record(&recorder).await.unwrap();
    assert_eq!(first[0], "demo-deploy");
    assert_eq!(second, reel_demo::run_ids("-2"));
    assert_eq!(reel_demo::next_suffix("-2"), "-3");
    assert_eq!(reel_demo::free_suffix(recorder.archive(), "-2"), "-3");
    recorder.shutdown().await.unwrap();
}

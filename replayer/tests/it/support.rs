//! What the replay tests share: record a run through the real recorder into a
//! real archive, export its tape, and load the tape as a [`Recording`];
//! what a clean replay is; the result of a recorded call.

use std::future::Future;

use reel::fact::CallOutcome;
use reel::fact::RunStatus;
use reel::report::ReplayReport;
use reel::tape::Tape;
use reel_archive::FingerprintKey;
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig, Run, RunStart};
use reel_replayer::Recording;
use serde_json::Value;

/// Records run `name` (the host's calls are `host`), ends it with `status`,
/// and gives back the recording read from its exported tape. The archive and
/// the tape live in a temporary directory; the fingerprint key is the test's
/// own, so nothing is written outside it.
pub async fn record<F, Fut>(name: &str, status: RunStatus, host: F) -> Recording
where
    F: FnOnce(Run) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        fingerprint_key: FingerprintKey::Key([9; 32]),
        serve_live: false,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path().join("archive"), config)
        .await
        .unwrap();
    let run = recorder.start_run(RunStart::new(name)).await.unwrap();
    host(run.clone()).await;
    run.end(status).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let path = dir.path().join(format!("{name}.tape.jsonl"));
    let mut file = std::fs::File::create(&path).unwrap();
    Tape::export(&archive, name)
        .unwrap()
        .write(&mut file)
        .unwrap();
    drop(file);
    Recording::from_tape_file(&path).unwrap()
}

/// Fails, showing the report, unless the replay is clean: it matched,
/// every call's result matched, every recorded fact was replayed and no
/// call caused an effect the recording lacks.
pub fn assert_clean(report: &ReplayReport) {
    assert!(report.is_match(), "{report}");
    for c in &report.calls {
        assert!(c.unrecorded_effects.is_empty(), "{report}");
        assert!(c.result.matches, "{report}");
        assert_eq!(c.facts_replayed, c.facts_expected, "{report}");
    }
}

/// The result of the recorded call `call`, which ended ok.
pub fn result_of(recording: &Recording, call: &str) -> Value {
    match &recording.calls[call]
        .ended()
        .expect("the call ended")
        .outcome
    {
        CallOutcome::Ok { result } => result.clone(),
        other => panic!("call {call} ended {other:?}, not ok"),
    }
}

//! What the replay tests share: record a run through the real recorder into a
//! real archive, export its tape, and load the tape as a [`Recording`].

use std::future::Future;

use reel::fact::RunStatus;
use reel::tape::Tape;
use reel_archive::FingerprintKey;
use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig, Run, RunStart};
use reel_replayer::Recording;

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

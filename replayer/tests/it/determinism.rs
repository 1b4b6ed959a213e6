//! Determinism: replaying the same tape gives byte-identical serialized
//! reports, 50 times in a row, and on every kind of runtime.

use std::path::{Path, PathBuf};

use reel::tape::Tape;

use reel_archive::TapeExt;
use reel_recorder::{Recorder, RecorderConfig};
use reel_replayer::support::replay_tape;
use reel_replayer::{replay, Recording, ReplayOptions};

const REPLAYS: usize = 50;

/// Records the demo runs into a fresh archive and writes one tape per run.
fn record_demo_tapes(dir: &Path) -> Vec<(String, PathBuf)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let recorder = Recorder::open(dir.join("archive"), RecorderConfig::default())
            .await
            .unwrap();
        let ids = reel_demo::record(&recorder).await.unwrap();
        let archive = recorder.archive().clone();
        recorder.shutdown().await.unwrap();
        ids.into_iter()
            .map(|id| {
                let path = dir.join(format!("{id}.tape.jsonl"));
                let mut file = std::fs::File::create(&path).unwrap();
                Tape::export(&archive, &id)
                    .unwrap()
                    .write(&mut file)
                    .unwrap();
                (id, path)
            })
            .collect()
    })
}

/// Replays `tape` with `replay` on `rt`, the report named as `replay_tape`
/// names it (after the tape as given).
fn replay_on(rt: &tokio::runtime::Runtime, tape: &str) -> Vec<u8> {
    let mut recording = Recording::from_tape_file(tape).unwrap();
    recording.source = tape.to_owned();
    let report = rt.block_on(replay(
        &recording,
        &reel_demo::tools(),
        &ReplayOptions::default(),
    ));
    assert!(report.is_match(), "{report}");
    serde_json::to_vec(&report).unwrap()
}

#[test]
fn fifty_replays_of_each_demo_tape_are_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let tapes = record_demo_tapes(dir.path());
    assert_eq!(tapes.len(), 5, "the demo records five runs");
    let tools = reel_demo::tools();
    let options = ReplayOptions::default();
    for (id, path) in &tapes {
        let tape = path.to_str().unwrap();
        let first = replay_tape("", tape, &tools, &options);
        assert!(first.is_match(), "{id}:\n{first}");
        assert!(!first.facts.is_empty() && !first.calls.is_empty(), "{id}");
        let first = serde_json::to_vec(&first).unwrap();
        for i in 1..REPLAYS {
            let again = serde_json::to_vec(&replay_tape("", tape, &tools, &options)).unwrap();
            assert!(
                again == first,
                "{id}: replay {i} differs from the first:\n{}\n---\n{}",
                String::from_utf8_lossy(&first),
                String::from_utf8_lossy(&again)
            );
        }
    }
}

#[test]
fn every_runtime_gives_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let tapes = record_demo_tapes(dir.path());
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let plain = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (id, path) in &tapes {
        let tape = path.to_str().unwrap();
        let reference = serde_json::to_vec(&replay_tape(
            "",
            tape,
            &reel_demo::tools(),
            &ReplayOptions::default(),
        ))
        .unwrap();
        for (name, rt) in [
            ("multi-thread", &multi),
            ("current-thread, paused", &paused),
            ("current-thread", &plain),
        ] {
            for _ in 0..3 {
                let report = replay_on(rt, tape);
                assert!(
                    report == reference,
                    "{id}: the {name} runtime gives another report:\n{}\n---\n{}",
                    String::from_utf8_lossy(&reference),
                    String::from_utf8_lossy(&report)
                );
            }
        }
    }
}

#[test]
fn the_archive_and_its_tape_give_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let recorder = Recorder::open(dir.path().join("archive"), RecorderConfig::default())
            .await
            .unwrap();
        let ids = reel_demo::record(&recorder).await.unwrap();
        let archive = recorder.archive().clone();
        recorder.shutdown().await.unwrap();
        for id in &ids {
            let mut from_archive = Recording::from_archive(&archive, id).unwrap();
            let mut bytes = Vec::new();
            Tape::export(&archive, id)
                .unwrap()
                .write(&mut bytes)
                .unwrap();
            let mut from_tape =
                Recording::from_tape("tape".into(), Tape::read(&bytes[..]).unwrap()).unwrap();
            from_archive.source = "same".into();
            from_tape.source = "same".into();
            let options = ReplayOptions::default();
            let a = replay(&from_archive, &reel_demo::tools(), &options).await;
            let b = replay(&from_tape, &reel_demo::tools(), &options).await;
            assert!(a.is_match(), "{id}:\n{a}");
            assert_eq!(
                serde_json::to_vec(&a).unwrap(),
                serde_json::to_vec(&b).unwrap(),
                "{id}"
            );
        }
    });
}

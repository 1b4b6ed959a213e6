//! The journal in the archive's writer (`reel_archive`'s `wal`): what a
//! reader finds while the writer is gone without a checkpoint, a torn
//! tail that is not damage, a cut inside the acknowledged part that is,
//! and sled's unfinished snapshot left by a kill.

use crate::support::copy_dir;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reel::fact::{FactKind, NewFact, Producer, Progress, RunStarted};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use serde_json::json;

fn config(read_only: bool) -> ArchiveConfig {
    ArchiveConfig {
        fingerprint_key: FingerprintKey::Key([9; 32]),
        read_only,
        ..ArchiveConfig::default()
    }
}

fn fact(kind: FactKind) -> NewFact {
    NewFact {
        at: 1,
        offset: 0,
        call: None,
        kind,
    }
}

fn started(run: &str) -> NewFact {
    fact(FactKind::RunStarted(RunStarted {
        run_id: run.into(),
        session_id: None,
        identity: None,
        producer: Producer {
            name: "wal".into(),
            version: "1".into(),
        },
        labels: Default::default(),
        teardown_scopes: vec![],
    }))
}

fn progress(i: u64) -> NewFact {
    fact(FactKind::Progress(Progress {
        payload: json!({"step": i}),
        count: i + 1,
        delivered: false,
    }))
}

/// A writer's archive with one run of 1 + 10 x 5 facts, flushed (the
/// journal synced, no checkpoint), copied while the writer holds it: the
/// state a kill leaves.
fn held_copy(into: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("held");
    let archive = Archive::open(&dir, config(false)).unwrap();
    archive.append("r", vec![started("r")]).unwrap();
    for b in 0..10 {
        archive
            .append("r", (0..5).map(|i| progress(b * 5 + i)).collect())
            .unwrap();
    }
    archive.flush().unwrap();
    copy_dir(&dir, into);
}

fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                out.insert(entry.path(), std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

fn facts(dir: &Path) -> usize {
    let archive = Archive::open(dir, config(true)).expect("a reader opens");
    archive
        .facts("r", ..)
        .unwrap()
        .filter(|f| f.is_ok())
        .count()
}

/// The last segment file of the archive's journal.
fn last_segment(dir: &Path) -> PathBuf {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("journal").join("main"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segments.sort();
    segments.pop().expect("a segment")
}

/// A reader of a store whose writer is gone reads every fact the journal
/// holds past the checkpoint, and leaves every file as it was.
#[test]
fn a_reader_after_a_kill_reads_the_journal_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    held_copy(&dir);
    let before = files(&dir);
    assert_eq!(facts(&dir), 51);
    assert!(files(&dir) == before, "reading changed a file");
    // A writer applies the journal and checkpoints: the same facts.
    drop(Archive::open(&dir, config(false)).unwrap());
    assert_eq!(facts(&dir), 51);
}

/// Bytes past the last frame (a write cut by the kill) are a torn tail:
/// no damage, every frame before them read.
#[test]
fn a_torn_tail_is_cut_without_an_alarm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    held_copy(&dir);
    let last = last_segment(&dir);
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&[0x5a; 37]);
    std::fs::write(&last, &bytes).unwrap();
    assert_eq!(facts(&dir), 51);
    drop(Archive::open(&dir, config(false)).expect("a writer opens past a torn tail"));
    assert_eq!(facts(&dir), 51);
}

/// A journal cut inside what the control record says was acknowledged is
/// damage, named, for a reader and a writer alike, and neither writes.
#[test]
fn a_cut_inside_the_acknowledged_part_is_named_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    held_copy(&dir);
    let last = last_segment(&dir);
    let len = std::fs::metadata(&last).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    file.set_len(len - 10).unwrap();
    let before = files(&dir);
    for read_only in [true, false] {
        let err = Archive::open(&dir, config(read_only)).expect_err("damage");
        assert!(err.is_damage(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("journal") && text.contains("reel salvage"),
            "{text}"
        );
        assert!(files(&dir) == before, "a refused open wrote");
    }
}

/// An empty `snap.*.generating` (sled killed while writing a snapshot)
/// does not make the store read as damaged: a reader's copy leaves it
/// out, a writer removes it before sled opens the store.
#[test]
fn sleds_unfinished_snapshot_is_no_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("copy");
    held_copy(&dir);
    std::fs::write(dir.join("snap.7FFFFFFFFFFFFFFF.generating"), b"").unwrap();
    assert_eq!(facts(&dir), 51);
    drop(Archive::open(&dir, config(false)).expect("a writer opens"));
    assert!(!dir.join("snap.7FFFFFFFFFFFFFFF.generating").exists());
    assert_eq!(facts(&dir), 51);
}

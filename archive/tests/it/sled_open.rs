//! Why a reader after a crash reads a copy of the store (issue 42), file
//! by file: sled 0.34.7 has no read-only open, and its open of a store
//! that its writer did not close writes to that store, even when the
//! writer was killed right after a checkpoint (sled's log flushed and
//! synced): it writes a new snapshot recording how far it recovered, and
//! pads the log's last segment from the recovered tip (or, for a log that
//! ends on a segment's edge, starts the next one). A writer's close does
//! the same once more before it seals, so a sealed store is one sled opens
//! without writing (see `Drop for Inner`). This pins that behaviour: the
//! day a sled release opens such a store without writing, a reader after
//! a crash can read it in place, and this test fails to say so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{copy_dir, files_under};
use reel::fact::{FactKind, NewFact, Producer, Progress, RunStarted};
use reel_archive::{Archive, ArchiveConfig, FingerprintKey};
use serde_json::json;

fn fact(kind: FactKind) -> NewFact {
    NewFact {
        at: 1,
        offset: 0,
        call: None,
        kind,
    }
}

/// Appends `runs` runs of 1 + 40 facts, from run number `first`.
fn runs(archive: &Archive, first: u64, runs: u64) {
    for r in first..first + runs {
        let run = format!("run-{r}");
        let mut facts = vec![fact(FactKind::RunStarted(RunStarted {
            run_id: run.clone(),
            session_id: None,
            identity: None,
            producer: Producer {
                name: "sled-open".into(),
                version: "1".into(),
            },
            labels: Default::default(),
            teardown_scopes: vec![],
        }))];
        facts.extend((0..40u64).map(|i| {
            fact(FactKind::Progress(Progress {
                payload: json!({"step": i, "run": r, "note": "x".repeat(64)}),
                count: i + 1,
                delivered: false,
            }))
        }));
        archive.append(&run, facts).unwrap();
    }
}

/// sled's store files under `dir` (its `conf`, `db`, snapshots and blobs:
/// not reel's control record nor the journal), with their bytes.
fn store(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files_under(dir)
        .into_iter()
        .filter(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            !rel.starts_with("reel.") && !rel.starts_with("journal")
        })
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.strip_prefix(dir).unwrap().to_path_buf(), bytes)
        })
        .collect()
}

/// What sled's open and close of the store in `dir` changed, a line per
/// file changed, added or removed.
fn sled_open_changes(dir: &Path) -> Vec<String> {
    let before = store(dir);
    drop(
        sled::Config::new()
            .path(dir)
            .flush_every_ms(None)
            .open()
            .unwrap(),
    );
    let after = store(dir);
    let mut changes = Vec::new();
    for (path, old) in &before {
        match after.get(path) {
            None => changes.push(format!("{} removed", path.display())),
            Some(new) if new != old => {
                let differ: Vec<usize> = (0..old.len().max(new.len()))
                    .filter(|&i| old.get(i) != new.get(i))
                    .collect();
                changes.push(format!(
                    "{} ({} bytes, then {}): {} bytes differ, offsets {}..={}",
                    path.display(),
                    old.len(),
                    new.len(),
                    differ.len(),
                    differ[0],
                    differ[differ.len() - 1]
                ));
            }
            Some(_) => {}
        }
    }
    for (path, new) in &after {
        if !before.contains_key(path) {
            changes.push(format!("{} added ({} bytes)", path.display(), new.len()));
        }
    }
    changes
}

/// A store copied while its writer holds it (what a kill leaves, as far
/// as a reader can tell), right after a checkpoint and after more appends
/// past it: sled's open writes to it in both cases.
#[test]
fn sleds_open_of_a_store_its_writer_did_not_close_writes_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("held");
    let archive = Archive::open(
        &dir,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([5; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    runs(&archive, 0, 300);
    archive.checkpoint().unwrap();
    let at_checkpoint = tmp.path().join("at-checkpoint");
    copy_dir(&dir, &at_checkpoint);
    runs(&archive, 300, 300);
    archive.flush().unwrap();
    let past_checkpoint = tmp.path().join("past-checkpoint");
    copy_dir(&dir, &past_checkpoint);
    drop(archive);
    for (what, copy) in [
        ("killed right after a checkpoint", &at_checkpoint),
        ("killed past a checkpoint", &past_checkpoint),
    ] {
        let changes = sled_open_changes(copy);
        eprintln!("sled's open of a store {what}:");
        for change in &changes {
            eprintln!("  {change}");
        }
        assert!(
            !changes.is_empty(),
            "sled's open of a store {what} wrote nothing to it: a reader after a crash could \
             read such a store in place (see archive/src/open.rs, `check_before_open`)"
        );
    }
}

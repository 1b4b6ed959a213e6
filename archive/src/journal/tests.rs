use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::frame::{Header, HEADER_LEN};
use reel_core::lock::lock;

use super::*;

fn quiet() -> JournalConfig {
    JournalConfig {
        sync_within: None,
        ..JournalConfig::default()
    }
}

fn records(i: u64) -> Vec<Vec<u8>> {
    (0..i % 4)
        .map(|r| format!("batch {i} record {r} {}", "x".repeat((i * 7 % 50) as usize)).into_bytes())
        .collect()
}

fn append(j: &Journal, i: u64, wait: Wait) -> Position {
    let r = records(i);
    let refs: Vec<&[u8]> = r.iter().map(|r| r.as_slice()).collect();
    j.append(&refs, wait).expect("append")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    scan::list(dir)
        .expect("list")
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

/// Every file's bytes, by name: to show a scan changed nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let p = e.expect("entry").path();
            let b = std::fs::read(&p).expect("read");
            (p, b)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn batches_read_back_in_order_after_a_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, found) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    assert!(found.batches.is_empty() && found.cut.is_none() && found.tail().is_none());
    let ends: Vec<Position> = (0..10).map(|i| append(&j, i, Wait::Synced)).collect();
    assert_eq!(j.synced(), ends[9]);
    let end = j.close().expect("close");
    assert_eq!(end, ends[9]);
    let before = snapshot(dir.path());
    let found = scan(dir.path(), 0, end).expect("scan");
    assert_eq!(snapshot(dir.path()), before, "a scan writes nothing");
    assert_eq!(found.end, end);
    assert_eq!((found.unacknowledged, found.cut.clone()), (0, None));
    let got: Vec<_> = found.batches.iter().map(|b| b.records.clone()).collect();
    assert_eq!(got, (0..10).map(records).collect::<Vec<_>>());
    assert_eq!(
        found.batches.iter().map(|b| b.end).collect::<Vec<_>>(),
        ends
    );
    // From a checkpoint in the middle: the batches after it.
    let from = scan(dir.path(), ends[3], end).expect("scan from a checkpoint");
    assert_eq!(from.batches.len(), 6);
    assert_eq!(from.batches[0].position, ends[3]);
}

#[test]
fn files_rotate_by_size_and_a_checkpoint_drops_the_ones_it_covers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = JournalConfig {
        segment_bytes: 300,
        ..quiet()
    };
    let (j, _) = Journal::open(dir.path(), config, 0, 0).expect("open");
    let ends: Vec<Position> = (0..40).map(|i| append(&j, i, Wait::Written)).collect();
    j.sync_to(ends[39]).expect("sync");
    let stats = j.stats();
    assert!(stats.segments > 3, "{stats:?}");
    assert_eq!(files(dir.path()).len() as u64, stats.segments);
    assert_eq!(
        scan(dir.path(), 0, ends[39]).expect("scan").batches.len(),
        40
    );
    let dropped = j.checkpointed(ends[20]).expect("checkpoint");
    assert!(dropped > 0);
    assert_eq!(
        files(dir.path()).len() as u64,
        stats.segments - dropped as u64
    );
    let found = scan(dir.path(), ends[20], ends[39]).expect("scan after the drop");
    assert_eq!(found.batches.len(), 19);
    // Before the checkpoint, the journal is gone: asked for it, it is
    // missing (damage when it was acknowledged).
    let err = scan(dir.path(), 0, ends[39]).expect_err("dropped");
    assert!(err.is_damage(), "{err}");
    // The active file is never dropped, even by a checkpoint at its end.
    j.checkpointed(ends[39]).expect("checkpoint all");
    assert!(!files(dir.path()).is_empty());
    assert_eq!(
        scan(dir.path(), ends[39], ends[39]).expect("scan").batches,
        vec![]
    );
}

/// The last file of a journal, cut inside its last frame: the batches
/// before the cut read, those past the acknowledged position are the
/// tail, and the tail says where it was cut.
#[test]
fn a_torn_tail_past_the_acknowledged_position_is_reported_not_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let acked: Vec<Position> = (0..3).map(|i| append(&j, i, Wait::Synced)).collect();
    let acked = acked[2];
    let tail: Vec<Position> = (3..7).map(|i| append(&j, i, Wait::Written)).collect();
    drop(j);
    let last = files(dir.path()).pop().expect("a file");
    let len = std::fs::metadata(&last).expect("meta").len();
    let cut_at = len - 3;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .and_then(|f| f.set_len(cut_at))
        .expect("truncate");
    let found = scan(dir.path(), 0, acked).expect("a torn tail is not damage");
    assert_eq!(found.batches.len(), 6);
    assert_eq!(found.unacknowledged, 3);
    assert_eq!(found.end, tail[2]);
    let cut = found.cut.clone().expect("cut");
    assert_eq!(
        (cut.reason, cut.position, cut.file),
        (CutReason::Short, tail[2], last)
    );
    let said = found.tail().expect("a tail");
    assert!(
        said.starts_with("3 batches (") && said.contains("never acknowledged"),
        "{said}"
    );
    assert!(
        said.contains("a frame cut short by the end of its file at offset"),
        "{said}"
    );
}

#[test]
fn damage_inside_the_acknowledged_part_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let ends: Vec<Position> = (0..5).map(|i| append(&j, i, Wait::Synced)).collect();
    drop(j);
    let file = files(dir.path()).pop().expect("a file");
    let whole = std::fs::read(&file).expect("read");
    let write = |bytes: &[u8]| std::fs::write(&file, bytes).expect("write");

    // A flipped byte in the third frame.
    let mut flipped = whole.clone();
    let at = HEADER_LEN + ends[1] as usize + 20;
    flipped[at] ^= 0x40;
    write(&flipped);
    let before = snapshot(dir.path());
    let err = scan(dir.path(), 0, ends[4]).expect_err("damage");
    // Neither a reader nor a writer's open changes a damaged journal.
    let opened = Journal::open(dir.path(), quiet(), 0, ends[4]).err();
    assert!(opened.is_some_and(|e| e.is_damage()));
    assert_eq!(snapshot(dir.path()), before);
    let JournalError::Damaged { end, cut, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*end, ends[1]);
    let cut = cut.as_deref().expect("a cut");
    assert_eq!(cut.reason, CutReason::BadChecksum);
    assert_eq!(cut.offset, (HEADER_LEN as u64) + ends[1]);
    assert!(err.is_damage());
    assert!(
        err.to_string().contains("a bad checksum at offset"),
        "{err}"
    );
    // Told of an older acknowledged position, the scan still finds the
    // later frames that were written after the damaged one was synced.
    let err = scan(dir.path(), 0, ends[1]).expect_err("still damage");
    assert!(err.is_damage(), "{err}");

    // A file cut on a frame boundary before the acknowledged position.
    write(&whole[..HEADER_LEN + ends[2] as usize]);
    let err = scan(dir.path(), 0, ends[4]).expect_err("ends early");
    let JournalError::Damaged { end, cut, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!((*end, cut.is_none()), (ends[2], true));
    assert!(
        err.to_string()
            .contains("whole trailing batches are missing"),
        "{err}"
    );

    // No journal at all where acknowledged batches should be.
    std::fs::remove_file(&file).expect("remove");
    let err = scan(dir.path(), 0, ends[4]).expect_err("missing");
    assert!(err.is_damage(), "{err}");
}

/// A writer that reopens after a torn tail continues at the valid end:
/// later scans pass over the old tail, and report it as an earlier cut.
/// So does a file cut while being created (its header unread).
#[test]
fn a_writer_reopened_after_a_crash_continues_past_the_torn_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let acked: Vec<Position> = (0..3).map(|i| append(&j, i, Wait::Synced)).collect();
    let acked = acked[2];
    append(&j, 3, Wait::Written);
    drop(j);
    let first = files(dir.path()).pop().expect("file");
    let len = std::fs::metadata(&first).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .and_then(|f| f.set_len(len - 1))
        .expect("truncate");
    // A file whose creation was cut before its header was written.
    std::fs::write(dir.path().join(scan::file_name(2)), b"REEL").expect("write");

    let (j, found) = Journal::open(dir.path(), quiet(), 0, acked).expect("reopen");
    assert_eq!((found.batches.len(), found.end), (3, acked));
    assert_eq!(found.cut.as_ref().map(|c| c.reason), Some(CutReason::Short));
    let later: Vec<Position> = (10..13).map(|i| append(&j, i, Wait::Synced)).collect();
    drop(j);
    let found = scan(dir.path(), 0, later[2]).expect("no false alarm");
    assert_eq!(found.batches.len(), 6);
    assert_eq!(found.batches[3].records, records(10));
    assert_eq!(found.batches[3].position, acked);
    assert_eq!(found.cut, None);
    let reasons: Vec<_> = found.earlier_cuts.iter().map(|c| c.reason).collect();
    assert_eq!(reasons, vec![CutReason::Short, CutReason::BadHeader]);
}

#[test]
fn a_second_writer_on_one_journal_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let err = Journal::open(dir.path(), quiet(), 0, 0)
        .err()
        .expect("locked");
    assert!(matches!(err, JournalError::Locked { .. }), "{err}");
    drop(j);
    Journal::open(dir.path(), quiet(), 0, 0).expect("free again");
}

#[test]
fn writer_ids_name_directories_and_nothing_else() {
    let archive = Path::new("/a");
    assert_eq!(
        writer_dir(archive, "mcp-1_x").expect("ok"),
        PathBuf::from("/a/journal/mcp-1_x")
    );
    for bad in ["", "..", "a/b", "é", &"x".repeat(65)] {
        assert!(writer_dir(archive, bad).is_err(), "{bad:?}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(writers(dir.path()).expect("none"), Vec::<String>::new());
    for w in ["b", "a"] {
        Journal::open(&writer_dir(dir.path(), w).expect("dir"), quiet(), 0, 0).expect("open");
    }
    assert_eq!(writers(dir.path()).expect("two"), vec!["a", "b"]);
}

/// Past the unapplied bound a writer waits for a checkpoint, and the wait
/// is counted.
#[test]
fn writers_wait_for_the_checkpointer_past_the_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = JournalConfig {
        unapplied_bytes: 200,
        ..quiet()
    };
    let (j, _) = Journal::open(dir.path(), config, 0, 0).expect("open");
    let big = [0u8; 150];
    let first = j.append(&[&big], Wait::Written).expect("under the bound");
    std::thread::scope(|s| {
        let waiter = s.spawn(|| j.append(&[&big], Wait::Synced));
        while j.stats().bound_waits == 0 {
            std::thread::yield_now();
        }
        assert_eq!(j.synced(), 0, "still waiting");
        j.checkpointed(first).expect("checkpoint");
        let end = waiter.join().expect("join").expect("append");
        assert_eq!(end, 2 * first);
    });
    assert_eq!(j.stats().bound_waits, 1);
}

/// Concurrent writers: every batch durable when its append returns, in
/// one order, and fewer syncs than batches can happen (never more).
#[test]
fn concurrent_writers_share_syncs_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = JournalConfig {
        segment_bytes: 4096,
        ..quiet()
    };
    let (j, _) = Journal::open(dir.path(), config, 0, 0).expect("open");
    let ends: Vec<(u64, Position)> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let j = &j;
                s.spawn(move || {
                    (0..50u64)
                        .map(|n| {
                            let id = t * 1000 + n;
                            let end = append(j, id, Wait::Synced);
                            assert!(j.synced() >= end, "durable on return");
                            (id, end)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("join"))
            .collect()
    });
    let stats = j.stats();
    assert_eq!(stats.batches, 200);
    assert!(stats.syncs <= 200 + stats.segments, "{stats:?}");
    let end = j.close().expect("close");
    let found = scan(dir.path(), 0, end).expect("scan");
    assert_eq!(found.batches.len(), 200);
    for (id, end) in ends {
        let b = found
            .batches
            .iter()
            .find(|b| b.end == end)
            .expect("every acknowledged batch");
        assert_eq!(b.records, records(id));
    }
}

/// The syncing thread syncs what buffered writers left written.
#[test]
fn buffered_batches_are_synced_by_the_journal_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = JournalConfig {
        sync_within: Some(Duration::from_millis(5)),
        ..JournalConfig::default()
    };
    let (j, _) = Journal::open(dir.path(), config, 0, 0).expect("open");
    let end = append(&j, 1, Wait::Written);
    while j.synced() < end {
        std::thread::yield_now();
    }
    assert!(j.stats().syncs >= 1);
}

#[test]
fn a_newer_format_is_not_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = Header { seq: 1, base: 0 }.encode();
    h[8..12].copy_from_slice(&9u32.to_le_bytes());
    let crc = crc32c::crc32c(&h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.path().join(scan::file_name(1)), h).expect("write");
    let err = scan(dir.path(), 0, 0).expect_err("newer");
    assert!(
        matches!(err, JournalError::NewerFormat { found: 9, .. }),
        "{err}"
    );
    assert!(!err.is_damage());
}

#[test]
fn a_batch_too_large_for_a_frame_is_refused() {
    assert!(frame::payload(&[&[]]).is_some());
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let big = vec![0u8; frame::MAX_PAYLOAD];
    let err = j.append(&[&big], Wait::Written).expect_err("too large");
    assert!(matches!(err, JournalError::TooLarge), "{err}");
}

/// Salvage finds every intact frame past a damaged one, and in a file
/// whose header is damaged.
#[test]
fn salvage_recovers_every_frame_but_the_damaged_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let ends: Vec<Position> = (0..10).map(|i| append(&j, i, Wait::Synced)).collect();
    drop(j);
    let file = files(dir.path()).pop().expect("a file");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes[HEADER_LEN + ends[3] as usize + 5] ^= 1;
    bytes[3] ^= 1;
    std::fs::write(&file, &bytes).expect("write");
    // A file cut while being created holds nothing, and is no alarm.
    std::fs::write(dir.path().join(scan::file_name(2)), b"").expect("write");
    let report = salvage(dir.path()).expect("salvage");
    let got: Vec<u64> = report.frames.iter().map(|f| f.batch.end).collect();
    let mut want = ends.clone();
    want.remove(4);
    assert_eq!(got, want);
    assert_eq!(report.damaged_bytes, ends[4] - ends[3]);
    assert_eq!(report.unreadable, Vec::<PathBuf>::new());
    assert_eq!(report.frames[4].batch.records, records(5));
    assert_eq!(report.frames[4].offset, HEADER_LEN as u64 + ends[4]);
}

/// Group commit: writers that queue while a leader writes are written by
/// the next leader together, with one sync for all of them.
#[test]
fn writers_queued_behind_a_leader_share_one_write_and_one_sync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let before = j.stats();
    std::thread::scope(|s| {
        // The file held: the first writer leads and waits for it.
        let held = lock(&j.shared.active);
        let first = s.spawn(|| append(&j, 0, Wait::Synced));
        while !lock(&j.shared.state).leading {
            std::thread::yield_now();
        }
        let others: Vec<_> = (1..6u64)
            .map(|i| {
                let j = &j;
                s.spawn(move || append(j, i, Wait::Synced))
            })
            .collect();
        while lock(&j.shared.state).pending.len() < 5 {
            std::thread::yield_now();
        }
        drop(held);
        first.join().expect("join");
        for o in others {
            o.join().expect("join");
        }
    });
    let after = j.stats();
    assert_eq!(after.batches - before.batches, 6);
    assert_eq!(after.writes - before.writes, 2, "{after:?}");
    assert_eq!(after.syncs - before.syncs, 2, "{after:?}");
}

/// A failed write stops the journal: the writer waiting for it and every
/// later one get the failure, never an acknowledgement.
#[test]
fn a_failed_write_stops_the_journal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    append(&j, 1, Wait::Synced);
    // The active file swapped for a read-only handle: the next write fails.
    let path = files(dir.path()).pop().expect("a file");
    lock(&j.shared.active).file = File::open(&path).expect("open");
    let err = j.append(&[b"x"], Wait::Synced).expect_err("failed write");
    assert!(matches!(err, JournalError::Failed { .. }), "{err}");
    let err = j.append(&[b"y"], Wait::Written).expect_err("stopped");
    assert!(matches!(err, JournalError::Failed { .. }), "{err}");
    assert!(j.sync_to(u64::MAX).is_err());
}

/// The caller's acknowledged position may lag (a control record written
/// without a sync): the journal's own later frames still say the damaged
/// part was synced, so it is damage, not a torn tail.
#[test]
fn later_frames_prove_damage_a_lagging_record_would_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (j, _) = Journal::open(dir.path(), quiet(), 0, 0).expect("open");
    let ends: Vec<Position> = (0..6).map(|i| append(&j, i, Wait::Synced)).collect();
    drop(j);
    let file = files(dir.path()).pop().expect("a file");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes[HEADER_LEN + ends[1] as usize + 30] ^= 8;
    std::fs::write(&file, &bytes).expect("write");
    // Told nothing was acknowledged, the scan still knows batch 5 was
    // written after batch 4 was synced.
    let err = scan(dir.path(), 0, 0).expect_err("damage");
    let JournalError::Damaged {
        acknowledged, end, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!((*acknowledged, *end), (ends[4], ends[1]), "{err}");
    assert!(
        err.to_string().contains("journal's own later frames"),
        "{err}"
    );
    // A cut tail claims nothing past itself: no alarm.
    let mut clean = bytes.clone();
    clean[HEADER_LEN + ends[1] as usize + 30] ^= 8;
    std::fs::write(&file, &clean[..HEADER_LEN + ends[5] as usize - 1]).expect("write");
    let found = scan(dir.path(), 0, 0).expect("a torn tail");
    assert_eq!((found.batches.len(), found.acknowledged), (5, ends[3]));
    assert_eq!(found.unacknowledged, 1);
}

/// A first position near the end of the range (from a file's header) and
/// an intact frame there: no overflow, a cut.
#[test]
fn positions_at_the_end_of_the_range_do_not_overflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = u64::MAX - 10;
    let mut bytes = Header { seq: 1, base }.encode().to_vec();
    bytes.extend(frame::Unplaced::new(&[b"x"]).expect("small").place(base, 0));
    std::fs::write(dir.path().join(scan::file_name(1)), &bytes).expect("write");
    let found = scan(dir.path(), base, base).expect("a cut, past the acknowledged position");
    assert_eq!(found.cut.map(|c| c.reason), Some(CutReason::WrongPosition));
    let report = salvage(dir.path()).expect("salvage");
    assert_eq!(report.frames.len(), 1);
}

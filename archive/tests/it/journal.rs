//! The journal's recovery, by property: a journal cut at any byte recovers
//! exactly the batches whole before the cut, and is damage exactly when the
//! cut falls before the acknowledged position; a flipped byte inside the
//! acknowledged part is named damage, and one past it is a reported cut,
//! never a silent change.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use reel_archive::journal::{scan, Journal, JournalConfig, JournalError, Position, Wait};

/// A journal written with these batches, in a fresh directory: its files
/// in order, and each batch's end as a byte offset into the files laid
/// end to end (with each batch's end position).
struct Written {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
    /// (end position, end offset in the concatenated files).
    ends: Vec<(Position, u64)>,
    /// Each batch's record of the position synced before it was written.
    claims: Vec<Position>,
}

fn write(batches: &[Vec<Vec<u8>>], segment_bytes: u64) -> Written {
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig {
        segment_bytes,
        sync_within: None,
        ..JournalConfig::default()
    };
    let (journal, _) = Journal::open(dir.path(), config, 0, 0).unwrap();
    let mut positions = Vec::new();
    for b in batches {
        let refs: Vec<&[u8]> = b.iter().map(|r| r.as_slice()).collect();
        positions.push(journal.append(&refs, Wait::Written).unwrap());
    }
    journal.close().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    files.sort();
    // Each file's first position (header bytes 20..28) and where it
    // starts in the concatenation.
    let mut laid = Vec::new();
    let mut at = 0u64;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let base = u64::from_le_bytes(bytes[20..28].try_into().unwrap());
        laid.push((base, at));
        at += bytes.len() as u64;
    }
    let mut ends = Vec::new();
    let mut start = 0;
    for &end in &positions {
        // The file holding the batch: the last whose base is at most its start.
        let &(base, file_at) = laid.iter().rev().find(|(base, _)| *base <= start).unwrap();
        ends.push((end, file_at + 32 + (end - base)));
        start = end;
    }
    let claims = scan(dir.path(), 0, 0)
        .unwrap()
        .batches
        .iter()
        .map(|b| b.synced_before)
        .collect();
    Written {
        dir,
        files,
        ends,
        claims,
    }
}

/// Cuts the journal, laid end to end, at byte `at`: the file holding it is
/// cut there, the later ones emptied (as a crash while creating them).
fn cut(files: &[PathBuf], at: u64) {
    let mut start = 0;
    for f in files {
        let len = std::fs::metadata(f).unwrap().len();
        let keep = at.saturating_sub(start).min(len);
        std::fs::OpenOptions::new()
            .write(true)
            .open(f)
            .unwrap()
            .set_len(keep)
            .unwrap();
        start += len;
    }
}

/// Flips byte `at` of the journal laid end to end.
fn flip(files: &[PathBuf], mut at: u64, with: u8) {
    for f in files {
        let mut bytes = std::fs::read(f).unwrap();
        if at < bytes.len() as u64 {
            bytes[at as usize] ^= with;
            std::fs::write(f, bytes).unwrap();
            return;
        }
        at -= bytes.len() as u64;
    }
    unreachable!("offset past the journal")
}

fn total(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

fn batches() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    prop::collection::vec(
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..4),
        1..16,
    )
}

/// The acknowledged position for `acked` batches, and the byte it needs.
fn acknowledged(w: &Written, acked: usize) -> (Position, u64) {
    match acked {
        0 => (0, 0),
        n => w.ends[n - 1],
    }
}

fn check_prefix(dir: &Path, batches: &[Vec<Vec<u8>>], w: &Written, acked: usize, at: u64) {
    let (ack, needed) = acknowledged(w, acked);
    let whole = w.ends.iter().filter(|(_, off)| *off <= at).count();
    // The journal's own frames may say more was acknowledged.
    let claimed = w.claims[..whole]
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(ack);
    match scan(dir, 0, ack) {
        Ok(found) => {
            assert!(
                at >= needed,
                "cut at {at} before the acknowledged byte {needed}, and no alarm"
            );
            let got: Vec<_> = found.batches.iter().map(|b| b.records.clone()).collect();
            assert_eq!(got, batches[..whole], "cut at {at}");
            let past = w.ends[..whole]
                .iter()
                .filter(|(end, _)| *end > claimed)
                .count();
            assert_eq!(found.unacknowledged, past);
            assert_eq!(found.acknowledged, claimed);
            let end = match whole {
                0 => 0,
                n => w.ends[n - 1].0,
            };
            assert_eq!(found.end, end, "cut at {at}");
        }
        Err(e) => {
            assert!(
                at < needed,
                "cut at {at} past the acknowledged byte {needed}: {e}"
            );
            assert!(matches!(e, JournalError::Damaged { .. }), "{e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any prefix of a journal recovers exactly the batches whole in it;
    /// it is damage exactly when it ends before the acknowledged position.
    #[test]
    fn any_prefix_recovers_the_batches_before_it(
        batches in batches(),
        segment_bytes in 48u64..400,
        acked in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
    ) {
        let w = write(&batches, segment_bytes);
        let acked = acked.index(batches.len() + 1);
        let at = at.index(total(&w.files) as usize + 1) as u64;
        cut(&w.files, at);
        check_prefix(w.dir.path(), &batches, &w, acked, at);
    }

    /// One flipped byte: inside the acknowledged part (by the caller's
    /// position, or by a later frame's record of what was synced) it is
    /// damage; past it, the batches before the flipped frame are recovered
    /// and the cut is reported.
    #[test]
    fn a_flipped_byte_is_never_silent(
        batches in batches(),
        segment_bytes in 48u64..400,
        acked in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        with in 1u8..=255,
    ) {
        let w = write(&batches, segment_bytes);
        let acked = acked.index(batches.len() + 1);
        let (ack, needed) = acknowledged(&w, acked);
        let at = at.index(total(&w.files) as usize) as u64;
        flip(&w.files, at, with);
        // The batch the flip falls in (or the first of the file whose
        // header it falls in), and where the journal then stops.
        let hit = w.ends.iter().filter(|(_, off)| *off <= at).count();
        let stop = if hit == 0 { 0 } else { w.ends[hit - 1].0 };
        let later = w.claims.iter().skip(hit + 1).copied().max().unwrap_or(0);
        let damage = at < needed || later > stop;
        match scan(w.dir.path(), 0, ack) {
            Ok(found) => {
                prop_assert!(!damage, "flip at {} inside the acknowledged part (to byte {}, or position {} by a later frame), no alarm", at, needed, later);
                prop_assert!(found.cut.is_some(), "flip at {} past the acknowledged part, and no cut reported", at);
                let got: Vec<_> = found.batches.iter().map(|b| b.records.clone()).collect();
                prop_assert_eq!(&got[..], &batches[..got.len()]);
                // Exactly the batches wholly before the flipped byte.
                let before = w.ends.iter().filter(|(_, off)| *off <= at).count();
                prop_assert_eq!(got.len(), before, "flip at {}", at);
            }
            Err(e) => {
                prop_assert!(damage, "flip at {} past the acknowledged part: {}", at, e);
                prop_assert!(e.is_damage(), "{}", e);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Arbitrary bytes in a journal's files (some behind an intact header,
    /// with frames that may claim any length or position) never make a
    /// scan or a salvage panic, and a scan that succeeds reaches the
    /// acknowledged position it was given.
    #[test]
    fn arbitrary_files_never_panic(
        files in prop::collection::vec(
            (any::<bool>(), any::<u64>(), prop::collection::vec(any::<u8>(), 0..300)),
            1..4,
        ),
        from in prop_oneof![Just(0u64), any::<u64>()],
        ack in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, (header, base, body)) in files.iter().enumerate() {
            let seq = i as u64 + 1;
            let mut bytes = Vec::new();
            if *header {
                bytes.extend_from_slice(b"REELJNL\0");
                bytes.extend_from_slice(&1u32.to_le_bytes());
                bytes.extend_from_slice(&seq.to_le_bytes());
                bytes.extend_from_slice(&base.to_le_bytes());
                let crc = crc32c_of(&bytes);
                bytes.extend_from_slice(&crc.to_le_bytes());
            }
            bytes.extend_from_slice(body);
            std::fs::write(dir.path().join(format!("{seq:012}.wal")), bytes).unwrap();
        }
        if let Ok(found) = scan(dir.path(), from, ack) {
            prop_assert!(found.end >= ack);
        }
        let _ = reel_archive::journal::salvage(dir.path()).unwrap();
    }
}

/// CRC32C (Castagnoli), bit by bit: the test's own, to write headers the
/// journal must accept without borrowing its code.
fn crc32c_of(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn the_tests_crc_is_crc32c() {
    assert_eq!(crc32c_of(b"123456789"), 0xE306_9283);
}

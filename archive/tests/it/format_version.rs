//! The archive's format version: an archive stamped newer than this reel
//! reads is refused with "written by a newer reel", naming both versions,
//! before anything of it is read (an older reader would otherwise take
//! every block of a newer version for damage); an older archive opens, reads,
//! keeps its stamp while it is only read, and is raised to this reel's
//! format when this reel first writes a run into it.

use std::path::Path;

use reel::fact::{FactKind, NewFact, Producer, RunEnded, RunStarted, RunStatus};
use reel_archive::{Archive, ArchiveConfig, ArchiveError, FingerprintKey, FORMAT_VERSION};

fn config() -> ArchiveConfig {
    ArchiveConfig {
        fingerprint_key: FingerprintKey::Key([7; 32]),
        ..ArchiveConfig::default()
    }
}

fn run(archive: &Archive, id: &str) {
    let fact = |kind| NewFact {
        at: 1,
        offset: 0,
        call: None,
        kind,
    };
    archive
        .append(
            id,
            vec![
                fact(FactKind::RunStarted(RunStarted {
                    run_id: id.into(),
                    session_id: None,
                    identity: None,
                    producer: Producer {
                        name: "format".into(),
                        version: "0".into(),
                    },
                    labels: Default::default(),
                    teardown_scopes: vec![],
                })),
                fact(FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                })),
            ],
        )
        .expect("append");
    archive.flush().expect("flush");
}

/// The stamp in the archive's `meta` tree, read and written through sled
/// itself (as another reel would find it).
fn stamp(dir: &Path, set: Option<u32>) -> u32 {
    // sled's threads may hold the lock a moment after the archive closed.
    let started = std::time::Instant::now();
    let db = loop {
        match sled::open(dir) {
            Ok(db) => break db,
            Err(e) if started.elapsed() < std::time::Duration::from_secs(5) => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("sled opens: {e}"),
        }
    };
    let meta = db.open_tree("meta").expect("meta");
    if let Some(v) = set {
        meta.insert("format", &v.to_be_bytes()).expect("insert");
        db.flush().expect("flush");
    }
    let v = meta.get("format").expect("get").expect("stamped");
    u32::from_be_bytes(v.as_ref().try_into().expect("4 bytes"))
}

#[test]
fn this_reel_stamps_format_6_for_run_summaries() {
    assert_eq!(FORMAT_VERSION, 6);
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), config()).expect("open");
    assert_eq!(archive.format_version(), FORMAT_VERSION);
    run(&archive, "r");
    drop(archive);
    assert_eq!(stamp(dir.path(), None), FORMAT_VERSION);
}

#[test]
fn a_newer_archive_is_refused_with_upgrade_reel_not_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), config()).expect("open");
    run(&archive, "r");
    drop(archive);
    let newer = FORMAT_VERSION + 1;
    stamp(dir.path(), Some(newer));
    let err = Archive::open(dir.path(), config()).expect_err("a newer archive is refused");
    match &err {
        ArchiveError::NewerFormat {
            found, supported, ..
        } => assert_eq!((*found, *supported), (newer, FORMAT_VERSION)),
        other => panic!("not the newer-format error: {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "written by a newer reel (format {newer}; this reel reads up to {FORMAT_VERSION}): upgrade reel"
        )),
        "{message}"
    );
    assert!(!message.contains("damaged"), "{message}");
    // Refusing wrote nothing: the stamp is the newer reel's still.
    assert_eq!(stamp(dir.path(), None), newer);
}

#[test]
fn a_format_1_archive_reads_keeps_its_stamp_and_is_raised_on_first_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), config()).expect("open");
    run(&archive, "old");
    drop(archive);
    stamp(dir.path(), Some(1));

    // Opened to read: the run reads and verifies, and the stamp stays 1,
    // so the reel that wrote the archive still reads it.
    let archive = Archive::open(dir.path(), config()).expect("a format-1 archive opens");
    assert_eq!(archive.format_version(), 1);
    let facts: Vec<_> = archive
        .facts("old", ..)
        .expect("facts")
        .collect::<Result<_, _>>()
        .expect("read");
    assert_eq!(facts.len(), 2);
    assert!(archive.verify().expect("verify").is_ok());
    drop(archive);
    assert_eq!(stamp(dir.path(), None), 1);

    // Written to: raised before the new run's first block.
    let archive = Archive::open(dir.path(), config()).expect("open");
    run(&archive, "new");
    assert_eq!(archive.format_version(), FORMAT_VERSION);
    drop(archive);
    assert_eq!(stamp(dir.path(), None), FORMAT_VERSION);
}

/// Format 4 keeps artifact bytes in files: the first artifact put into an
/// older archive raises its stamp (an older reel would not find the file,
/// and must say "upgrade", not serve a run without its artifacts), and the
/// artifacts an older reel kept in sled still read and verify.
#[test]
fn artifacts_of_an_older_archive_read_and_a_new_one_raises_the_stamp() {
    use sha2::{Digest as _, Sha256};
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), config()).expect("open");
    run(&archive, "r");
    drop(archive);
    // As format 3 wrote it: the stamp, and the bytes in sled's tree.
    stamp(dir.path(), Some(3));
    let old = b"kept in sled by an older reel".to_vec();
    let old_digest: [u8; 32] = Sha256::digest(&old).into();
    {
        let db = sled::open(dir.path()).expect("sled");
        db.open_tree("artifacts")
            .expect("tree")
            .insert(old_digest, old.clone())
            .expect("insert");
        db.flush().expect("flush");
    }
    let archive = Archive::open(dir.path(), config()).expect("open");
    assert_eq!(archive.format_version(), 3, "only read so far");
    let shown = format!("sha256:{}", hex::encode(old_digest));
    assert_eq!(archive.artifact(&shown).expect("read"), Some(old.clone()));
    // The same bytes again: found in sled, no file written.
    assert_eq!(archive.put_artifact(&old).expect("put"), shown);
    assert!(!dir.path().join("artifacts").exists());
    assert_eq!(archive.format_version(), 3);
    // New bytes: a file, and the stamp raised.
    let new = archive.put_artifact(b"a file of its own").expect("put");
    archive.flush().expect("flush");
    assert_eq!(archive.format_version(), FORMAT_VERSION);
    assert_eq!(
        archive.artifact(&new).expect("read").as_deref(),
        Some(&b"a file of its own"[..])
    );
    let report = archive.verify().expect("verify");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.artifacts, 2);
    drop(archive);
    assert_eq!(stamp(dir.path(), None), FORMAT_VERSION);
}

/// An archive as reel format 4 left it (no `journal/` directory, a
/// control record without the journal's positions, stamped 4) opens, reads
/// and verifies, to read and to write; keeps its stamp while only read;
/// and is raised to format 5 (the journal) by its first write, after
/// which both runs read.
#[test]
fn a_format_4_archive_without_a_journal_opens_reads_and_is_raised_on_first_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = Archive::open(dir.path(), config()).expect("open");
    run(&archive, "old");
    drop(archive);
    stamp(dir.path(), Some(4));
    // As format 4 wrote it: no journal, and slots of 89 bytes (the bytes
    // after them, the journal's extension, are not a format-4 reel's).
    std::fs::remove_dir_all(dir.path().join("journal")).expect("a journal to remove");
    let control = dir.path().join("reel.control");
    let mut bytes = std::fs::read(&control).expect("the control record");
    for slot in [0usize, 512] {
        if bytes.len() >= slot + 129 {
            bytes[slot + 89..slot + 129].fill(0);
        }
    }
    std::fs::write(&control, &bytes).expect("write");
    let count = |archive: &Archive, id: &str| {
        archive
            .facts(id, ..)
            .expect("facts")
            .collect::<Result<Vec<_>, _>>()
            .expect("read")
            .len()
    };
    let read_only = ArchiveConfig {
        read_only: true,
        ..config()
    };
    let reader =
        Archive::open(dir.path(), read_only.clone()).expect("a format-4 archive opens to read");
    assert_eq!((reader.format_version(), count(&reader, "old")), (4, 2));
    assert!(reader.verify().expect("verify").is_ok());
    drop(reader);
    let writer = Archive::open(dir.path(), config()).expect("a format-4 archive opens to write");
    assert_eq!((writer.format_version(), count(&writer, "old")), (4, 2));
    drop(writer);
    assert_eq!(stamp(dir.path(), None), 4, "only read: the stamp stays");
    let writer = Archive::open(dir.path(), config()).expect("open");
    run(&writer, "new");
    assert_eq!(writer.format_version(), FORMAT_VERSION);
    drop(writer);
    assert_eq!(stamp(dir.path(), None), FORMAT_VERSION);
    let reader = Archive::open(dir.path(), read_only).expect("open");
    assert_eq!((count(&reader, "old"), count(&reader, "new")), (2, 2));
    assert!(reader.verify().expect("verify").is_ok());
}

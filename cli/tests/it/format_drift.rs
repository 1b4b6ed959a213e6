//! Format drift, both ways, through the real binary: an archive or a tape
//! written by a newer reel gets an error that says so and names the
//! version, with exit code 1 (damage exits 2), from every verb; an archive
//! of the previous format (1) still reads, and stays format 1 while it is
//! only read.

use std::path::Path;

use crate::support::reel;

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// The archive's format stamp, read and (when `set`) written through sled,
/// as another reel would.
fn stamp(dir: &Path, set: Option<u32>) -> u32 {
    let started = std::time::Instant::now();
    let db = loop {
        match sled::open(dir) {
            Ok(db) => break db,
            Err(_) if started.elapsed().as_secs() < 5 => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(e) => panic!("sled opens the archive: {e}"),
        }
    };
    let meta = db.open_tree("meta").expect("meta");
    if let Some(v) = set {
        meta.insert("format", &v.to_be_bytes()).expect("insert");
        db.flush().expect("flush");
    }
    let v = meta.get("format").expect("read").expect("a stamp");
    u32::from_be_bytes(v.as_ref().try_into().expect("4 bytes"))
}

fn demo(config: &Path, archive: &Path) {
    let out = reel(config, &["demo", "--archive", archive.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_newer_archive_is_named_as_such_by_every_verb_never_as_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    demo(&config, &archive);
    let (newer, this) = (
        reel_archive::FORMAT_VERSION + 1,
        reel_archive::FORMAT_VERSION,
    );
    stamp(&archive, Some(newer));
    let dir = archive.to_str().unwrap();
    let into = tmp.path().join("salvaged");
    for verb in [
        vec!["--archive", dir, "verify"],
        vec!["--archive", dir, "runs"],
        vec!["--archive", dir, "show", "demo-deploy"],
        vec!["--archive", dir, "stats"],
        vec!["--archive", dir, "export", "demo-deploy", "-o", "-"],
        vec!["--archive", dir, "prune", "--older-than", "0s"],
        vec!["salvage", dir, "--into", into.to_str().unwrap()],
    ] {
        let out = reel(&config, &verb);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{verb:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "written by a newer reel (format {newer}; this reel reads up to {this}): upgrade reel"
            )),
            "{verb:?}: {stderr}"
        );
        assert!(!stderr.contains("damaged"), "{verb:?}: {stderr}");
    }
    // Refusing wrote nothing.
    assert_eq!(stamp(&archive, None), newer);
}

#[test]
fn a_format_1_archive_reads_and_keeps_its_stamp() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    demo(&config, &archive);
    stamp(&archive, Some(1));
    let dir = archive.to_str().unwrap();
    for verb in [
        vec!["--archive", dir, "verify"],
        vec!["--archive", dir, "runs"],
        vec!["--archive", dir, "show", "demo-deploy"],
        vec!["--archive", dir, "export", "demo-deploy", "-o", "-"],
    ] {
        let out = reel(&config, &verb);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{verb:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(stamp(&archive, None), 1);
}

#[test]
fn a_tape_of_a_newer_format_is_named_as_such_never_as_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let archive = tmp.path().join("archive");
    demo(&config, &archive);
    let dir = archive.to_str().unwrap();
    let out = reel(
        &config,
        &["--archive", dir, "export", "demo-deploy", "-o", "-"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tape = text(&out.stdout);
    assert!(tape.starts_with("{\"format\":\"reel.tape.v1\""), "{tape}");
    let newer = tmp.path().join("newer.tape.jsonl");
    std::fs::write(&newer, tape.replacen("reel.tape.v1", "reel.tape.v3", 1)).unwrap();
    let fresh = tmp.path().join("fresh");
    let out = reel(
        &config,
        &[
            "--archive",
            fresh.to_str().unwrap(),
            "import",
            newer.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 1")
            && stderr.contains("\"reel.tape.v3\" was written by a newer reel"),
        "{stderr}"
    );
    assert!(
        stderr.contains("upgrade reel") && !stderr.contains("damaged"),
        "{stderr}"
    );
}

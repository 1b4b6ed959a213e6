//! After a crash, a read says how far the journal's written tail reached
//! and where it was cut (issue 42): a recorder is killed mid-run, bytes a
//! write cut short are left past the journal's end, and `reel runs`,
//! `reel show` and `reel verify` each say the tail once on stderr, with
//! their usual exit code (a torn tail that was never acknowledged is not
//! damage), `reel verify --json` carries it, and no file changes.

use std::path::Path;

use crate::console::recording_live;
use crate::support::{files_under, reel};

const SAID: &str = "written after the last acknowledged flush and never acknowledged";

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// Every regular file under `dir` with its bytes (the killed recorder's
/// socket stays behind and is no file to read).
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = files_under(dir);
    files.sort();
    files
        .into_iter()
        .filter(|f| f.is_file())
        .map(|f| {
            let bytes = std::fs::read(&f).unwrap();
            (f, bytes)
        })
        .collect()
}

#[test]
fn a_read_after_a_crash_says_the_torn_tail_once_without_alarm() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("archive");
    let config = tmp.path().join("config");
    let mut recorder = recording_live(&archive, 400, 20);
    // Let the live run write some hops, then kill the writer mid-run.
    std::thread::sleep(std::time::Duration::from_millis(800));
    recorder.kill().unwrap();
    recorder.wait().unwrap();
    // A write the crash cut short: bytes past the journal's last frame,
    // beyond anything a sync acknowledged.
    let mut segments: Vec<_> = files_under(&archive.join("journal").join("main"))
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "wal"))
        .collect();
    segments.sort();
    let last = segments.last().expect("the killed writer left a journal");
    let mut bytes = std::fs::read(last).unwrap();
    let cut_at = bytes.len();
    bytes.extend_from_slice(&[0xA5; 40]);
    std::fs::write(last, &bytes).unwrap();
    let before = snapshot(&archive);

    let dir = archive.to_str().unwrap();
    let runs = reel(&config, &["--archive", dir, "runs", "--json"]);
    assert!(runs.status.success(), "{}", text(&runs.stderr));
    let page: serde_json::Value = serde_json::from_slice(&runs.stdout).expect("JSON");
    let id = page["runs"][0]["run_id"]
        .as_str()
        .expect("a run")
        .to_owned();
    let show = reel(&config, &["--archive", dir, "show", &id]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    let verify = reel(&config, &["--archive", dir, "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stderr));
    for (verb, out) in [("runs", &runs), ("show", &show), ("verify", &verify)] {
        let stderr = text(&out.stderr);
        assert_eq!(stderr.matches(SAID).count(), 1, "reel {verb}: {stderr}");
        assert!(stderr.contains("the last "), "reel {verb}: {stderr}");
        assert!(
            stderr.contains(&format!("at offset {cut_at} of ")),
            "reel {verb} names where the tail was cut ({cut_at}): {stderr}"
        );
        assert!(stderr.contains("not damage"), "reel {verb}: {stderr}");
    }
    assert!(
        text(&verify.stdout).contains("ok"),
        "{}",
        text(&verify.stdout)
    );

    let json = reel(&config, &["--archive", dir, "verify", "--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let tail = report["torn_tail"]
        .as_str()
        .expect("verify --json carries the tail");
    assert!(
        tail.contains(SAID) && tail.contains(&format!("at offset {cut_at} of ")),
        "{tail}"
    );
    assert!(
        report["problems"].as_array().unwrap().is_empty(),
        "{report}"
    );

    assert!(
        snapshot(&archive) == before,
        "a read changed the archive's files"
    );
}

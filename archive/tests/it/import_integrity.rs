//! Import integrity: an import is all or nothing, and it refuses what
//! `append` refuses and what `verify` calls damage.
//!
//! A refused import must leave the archive byte-for-byte unchanged: every
//! sled tree (records, blocks, the artifact index, indexes, run ids, meta)
//! is dumped through sled itself with the archive closed, before and after
//! the import, with every artifact file, and the dumps must be equal. The cases are rows checked by
//! [`refused_unchanged`]; the property test at the end mutates tapes at
//! random and holds import to "refused and unchanged, or accepted and
//! verified".
//!
//! The CLI cases run the real `reel` binary, which lives in another package
//! of the workspace: `cargo test --workspace` builds it before any test runs;
//! alone, build it first (`cargo build -p reel-cli`), or point
//! `REEL_BIN` at it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Value};

use reel::fact::{Fact, FactKind, Level, Log, NewFact, RunEnded, RunStatus};
use reel::run::{RunRecord, RunState};
use reel::tape::{Tape, TapeError};
use reel_archive::TapeExt;
use reel_archive::{Archive, ArchiveConfig, ArchiveError};
use reel_core::rules::Rule;

const SEARCH: &[u8] = include_bytes!("../../../tests/tapes/demo-search.tape.jsonl");
const AUDIT: &[u8] = include_bytes!("../../../tests/tapes/demo-audit-degraded.tape.jsonl");
const DEPLOY: &[u8] = include_bytes!("../../../tests/tapes/demo-deploy.tape.jsonl");

// ---------------------------------------------------------------------------
// The archive, seen through sled
// ---------------------------------------------------------------------------

/// Every tree of a closed archive: tree name -> every (key, value), in order.
type Dump = BTreeMap<Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>>;

/// Opens the closed archive in `dir` with sled itself (waiting out the
/// moment sled's own threads hold the lock after a close) and reads every
/// tree in full.
fn dump(dir: &Path) -> Dump {
    let started = std::time::Instant::now();
    let db = loop {
        match sled::open(dir) {
            Ok(db) => break db,
            Err(_) if started.elapsed() < std::time::Duration::from_secs(10) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(e) => panic!("sled does not open {}: {e}", dir.display()),
        }
    };
    let mut out = Dump::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name).expect("open a listed tree");
        let items = tree
            .iter()
            .map(|kv| {
                let (k, v) = kv.expect("read a tree");
                (k.to_vec(), v.to_vec())
            })
            // The control record numbers flushes: a flush with nothing
            // new still counts one, and says nothing of the content.
            .filter(|(k, _)| !(name == b"meta" && k == b"control"))
            .collect();
        out.insert(name.to_vec(), items);
    }
    // The artifact files beside sled's store (`artifacts/xx/...`), as one
    // more "tree": path -> bytes.
    let mut files = Vec::new();
    let mut todo = vec![dir.join("artifacts")];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.push((
                    name.into_bytes(),
                    std::fs::read(&path).expect("read a file"),
                ));
            }
        }
    }
    files.sort();
    out.insert(b"artifact files".to_vec(), files);
    out
}

/// What differs between two dumps, per tree (empty when nothing does).
fn differences(before: &Dump, after: &Dump) -> String {
    let mut out = String::new();
    let names: std::collections::BTreeSet<_> = before.keys().chain(after.keys()).collect();
    for name in names {
        let (a, b) = (before.get(name), after.get(name));
        if a != b {
            let count = |d: Option<&Vec<_>>| d.map_or(0, Vec::len);
            out.push_str(&format!(
                "tree {:?}: {} entries before, {} after; ",
                String::from_utf8_lossy(name),
                count(a),
                count(b)
            ));
        }
    }
    out
}

fn open(dir: &Path) -> Archive {
    Archive::open(dir, ArchiveConfig::default()).expect("archive opens")
}

/// Reads `bytes` as a tape and imports it into the archive in `dir` (opened
/// for this and closed again, flushed), as `reel import` does.
fn import_bytes(dir: &Path, bytes: &[u8]) -> Result<RunRecord, TapeError> {
    let (tape, lines) = Tape::read_with_lines(bytes)?;
    let archive = open(dir);
    let result = tape.import_with_lines(&archive, &lines);
    archive.flush().expect("flush");
    result
}

/// Imports the in-memory `tape` into the archive in `dir`.
fn import_tape(dir: &Path, tape: &Tape) -> Result<RunRecord, TapeError> {
    let archive = open(dir);
    let result = tape.import(&archive);
    archive.flush().expect("flush");
    result
}

/// Runs `import` against the closed archive in `dir`: it must be refused
/// with an error containing `expect`, and leave every tree as it was.
fn refused_unchanged(
    name: &str,
    dir: &Path,
    import: impl FnOnce(&Path) -> Result<RunRecord, TapeError>,
    expect: &str,
) {
    let before = dump(dir);
    let result = import(dir);
    let after = dump(dir);
    match result {
        Ok(r) => panic!(
            "{name}: the import was accepted (run {}), not refused",
            r.run_id
        ),
        Err(e) => assert!(
            e.to_string().contains(expect),
            "{name}: refused with {e:?}, which does not say {expect:?}"
        ),
    }
    assert!(
        before == after,
        "{name}: the refused import changed the archive: {}",
        differences(&before, &after)
    );
}

// ---------------------------------------------------------------------------
// Tapes, edited
// ---------------------------------------------------------------------------

/// A tape's lines as JSON: the header, the facts, the artifacts.
struct Parts {
    header: Value,
    facts: Vec<Value>,
    artifacts: Vec<Value>,
}

fn parts(bytes: &[u8]) -> Parts {
    let text = std::str::from_utf8(bytes).expect("a committed tape is UTF-8");
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = serde_json::from_str(lines.next().expect("a header")).expect("header JSON");
    let (mut facts, mut artifacts) = (Vec::new(), Vec::new());
    for line in lines {
        let v: Value = serde_json::from_str(line).expect("line JSON");
        if v.get("artifact").is_some() {
            artifacts.push(v);
        } else {
            facts.push(v);
        }
    }
    Parts {
        header,
        facts,
        artifacts,
    }
}

impl Parts {
    fn write(&self) -> Vec<u8> {
        let mut out = String::new();
        for v in std::iter::once(&self.header)
            .chain(&self.facts)
            .chain(&self.artifacts)
        {
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out.into_bytes()
    }

    /// Gives the run a new id (in the header and in its run.started).
    fn rename(mut self, run_id: &str) -> Parts {
        self.header["run"]["run_id"] = json!(run_id);
        self.facts[0]["data"]["run_id"] = json!(run_id);
        self
    }

    /// Renumbers the facts from 0 and makes the header count them, as a
    /// careful hand edit would: only the stream rules are left to object.
    fn renumbered(mut self) -> Parts {
        for (i, f) in self.facts.iter_mut().enumerate() {
            f["seq"] = json!(i);
        }
        self.header["run"]["facts"] = json!(self.facts.len());
        self
    }
}

/// The demo-search tape under another id, so the archive does not have it.
fn search_as(run_id: &str) -> Parts {
    parts(SEARCH).rename(run_id)
}

/// A fresh archive in a new directory holding the reproduction's state: the
/// audit run imported under the id `demo-search`, and demo-deploy (with its
/// artifact). Closed on return.
fn base() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let renamed = parts(AUDIT).rename("demo-search").write();
    import_bytes(dir.path(), &renamed).expect("the renamed audit tape imports");
    import_bytes(dir.path(), DEPLOY).expect("demo-deploy imports");
    dir
}

// ---------------------------------------------------------------------------
// A refused import leaves no trace
// ---------------------------------------------------------------------------

#[test]
fn an_accepted_import_changes_the_dump() {
    // The control for every refusal below: the dump sees an import.
    let dir = base();
    let before = dump(dir.path());
    let record = import_bytes(dir.path(), &search_as("demo-search-2").write()).expect("import");
    assert_eq!(record.facts, 24);
    let after = dump(dir.path());
    let diff = differences(&before, &after);
    for tree in [
        "runs",
        "run_ids",
        "events",
        "artifact_files",
        "artifact files",
        "by_time",
        "by_status",
    ] {
        assert!(
            diff.contains(&format!("{tree:?}")),
            "{tree} unchanged: {diff}"
        );
    }
    let archive = open(dir.path());
    let report = archive.verify().expect("verify");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(archive.stats().expect("stats").artifacts, 3);
}

#[test]
fn a_run_that_exists_is_refused_and_nothing_of_it_is_stored() {
    let dir = base();
    // The archive holds demo-search (the renamed audit run, no artifacts)
    // and demo-deploy's one artifact; the real demo-search brings two more.
    refused_unchanged(
        "run already exists",
        dir.path(),
        |d| import_bytes(d, SEARCH),
        "run \"demo-search\" already exists",
    );
    assert_eq!(open(dir.path()).stats().expect("stats").artifacts, 1);
}

#[test]
fn broken_streams_are_refused_and_nothing_of_them_is_stored() {
    let dir = base();
    let d = dir.path();
    let tape = |edit: fn(&mut Parts)| {
        move |d: &Path| {
            let mut p = search_as("demo-search-2");
            edit(&mut p);
            import_bytes(d, &p.renumbered().write())
        }
    };
    refused_unchanged(
        "first fact not run.started",
        d,
        tape(|p| {
            p.facts.remove(0);
        }),
        "line 2: call.started at seq 0: the run does not begin with run.started",
    );
    refused_unchanged(
        "a fact after run.ended",
        d,
        tape(|p| {
            let n = p.facts.len();
            p.facts.swap(n - 2, n - 1);
        }),
        "line 25: call.ended at seq 23: a fact after run.ended (seq 22): run.ended must be the run's last fact",
    );
    refused_unchanged(
        "a second run.ended",
        d,
        tape(|p| {
            let last = p.facts.last().cloned().expect("facts");
            p.facts.push(last);
        }),
        "line 26: run.ended at seq 24: a fact after run.ended (seq 23)",
    );
    refused_unchanged(
        "run.started naming another run",
        d,
        tape(|p| p.facts[0]["data"]["run_id"] = json!("someone-else")),
        "line 2: run.started names run \"someone-else\" but the header (line 1) names \"demo-search-2\"",
    );
    refused_unchanged(
        "seq gap in the file",
        d,
        |d| {
            let mut p = search_as("demo-search-2");
            p.facts[5]["seq"] = json!(6);
            import_bytes(d, &p.write())
        },
        "line 7: fact has seq 6 where 5 was expected",
    );
    refused_unchanged(
        "seq gap in a tape built in memory",
        d,
        |d| {
            let (mut tape, _) = Tape::read_with_lines(&search_as("demo-search-2").write()[..])
                .expect("the tape reads");
            tape.facts.remove(5);
            tape.header.run.facts -= 1;
            import_tape(d, &tape)
        },
        "line 7: artifact.put at seq 6: seqs are not gapless: seq 5 was expected here",
    );
}

#[test]
fn a_duplicated_run_started_is_refused_naming_its_line() {
    let dir = base();
    let mut p = search_as("demo-search-2");
    let first = p.facts[0].clone();
    p.facts.insert(1, first);
    let bytes = p.renumbered().write();
    refused_unchanged(
        "duplicated run.started, renumbered",
        dir.path(),
        |d| import_bytes(d, &bytes),
        "line 3: run.started at seq 1: a second run.started inside the run: only a run's first \
         fact may be run.started; nothing was imported: fix this line, or export the run again",
    );
    // The line is the one in the file, blank lines counted.
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .expect("a header line");
    let mut with_blank = bytes[..=nl].to_vec();
    with_blank.push(b'\n');
    with_blank.extend_from_slice(&bytes[nl + 1..]);
    refused_unchanged(
        "duplicated run.started after a blank line",
        dir.path(),
        |d| import_bytes(d, &with_blank),
        "line 4: run.started at seq 1: a second run.started",
    );
}

#[test]
fn artifacts_that_do_not_match_their_digest_are_refused() {
    let dir = base();
    let d = dir.path();
    refused_unchanged(
        "artifact bytes edited in the file",
        d,
        |d| {
            let mut p = search_as("demo-search-2");
            let b64 = p.artifacts[1]["base64"]
                .as_str()
                .expect("base64")
                .to_owned();
            let flipped = if b64.starts_with('A') { "B" } else { "A" };
            p.artifacts[1]["base64"] = json!(format!("{flipped}{}", &b64[1..]));
            import_bytes(d, &p.write())
        },
        "line 27: artifact sha256:",
    );
    refused_unchanged(
        "artifact bytes swapped in a tape built in memory",
        d,
        |d| {
            let (mut tape, _) = Tape::read_with_lines(&search_as("demo-search-2").write()[..])
                .expect("the tape reads");
            let (a, b) = (tape.artifacts[0].1.clone(), tape.artifacts[1].1.clone());
            tape.artifacts[0].1 = b;
            tape.artifacts[1].1 = a;
            import_tape(d, &tape)
        },
        "line 26: artifact sha256:",
    );
    // And through the archive's own API: the refusal names the artifact.
    let archive = open(d);
    let facts = Tape::read(&search_as("demo-search-2").write()[..])
        .expect("reads")
        .facts;
    match archive
        .import_run_with_artifacts(&facts, &[(format!("sha256:{}", "0".repeat(64)), vec![1])])
    {
        Err(ArchiveError::ImportArtifactMismatch { index: 0, .. }) => {}
        other => panic!("a mismatched artifact should be refused, got {other:?}"),
    }
    assert!(matches!(
        archive.run("demo-search-2"),
        Err(ArchiveError::UnknownRun { .. })
    ));
}

#[test]
fn cut_and_malformed_tapes_are_refused() {
    let dir = base();
    let d = dir.path();
    let full = search_as("demo-search-2").write();
    let line_ends: Vec<usize> = full
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i)
        .collect();
    refused_unchanged(
        "cut after a line, among the facts",
        d,
        |d| import_bytes(d, &full[..=line_ends[11]]),
        "line 1: the header counts 24 facts but the tape holds 11 (the last is on line 12): the tape is cut short",
    );
    refused_unchanged(
        "cut after the header",
        d,
        |d| import_bytes(d, &full[..=line_ends[0]]),
        "the header counts 24 facts but the tape holds 0",
    );
    refused_unchanged(
        "cut inside a fact line",
        d,
        |d| import_bytes(d, &full[..line_ends[11] - 20]),
        "line 12, column",
    );
    refused_unchanged(
        "cut inside the last artifact line",
        d,
        |d| import_bytes(d, &full[..full.len() - 10]),
        "line 27",
    );
    refused_unchanged(
        "last line malformed",
        d,
        |d| {
            let mut bytes = full.clone();
            bytes.extend_from_slice(b"{\"seq\":24,\"at\":\n");
            import_bytes(d, &bytes)
        },
        "line 28, column",
    );
    refused_unchanged(
        "a header alone",
        d,
        |d| {
            let mut p = search_as("demo-search-2");
            p.facts.clear();
            p.artifacts.clear();
            import_bytes(d, &p.renumbered().write())
        },
        "line 2: the tape holds no facts",
    );
}

// ---------------------------------------------------------------------------
// The reproduction, through the real binary
// ---------------------------------------------------------------------------

/// The `reel` binary of this build: `REEL_BIN`, or the one beside this test's
/// directory of test binaries (`target/<profile>/reel`).
fn reel_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("REEL_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(format!("reel{}", std::env::consts::EXE_SUFFIX)))
        .expect("the test binary is in target/<profile>/deps");
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build -p reel-cli` (or `cargo test --workspace`), or set REEL_BIN",
        bin.display()
    );
    bin
}

fn reel(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(reel_bin())
        .args(args)
        .arg("--archive")
        .arg(dir)
        .env_remove("REEL_ARCHIVE")
        .output()
        .expect("run reel");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats_artifacts(dir: &Path) -> String {
    let (code, out, err) = reel(&["stats"], dir);
    assert_eq!(code, 0, "reel stats: {err}");
    out.lines()
        .find(|l| l.starts_with("artifacts"))
        .unwrap_or_else(|| panic!("no artifacts line in {out}"))
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_reproduction_through_reel_leaves_the_archive_unchanged() {
    let work = tempfile::tempdir().expect("tempdir");
    let demo = work.path().join("demo");
    let (code, _, err) = reel(&["demo"], &demo);
    assert_eq!(code, 0, "reel demo: {err}");
    let audit = work.path().join("audit.jsonl");
    let search = work.path().join("search.jsonl");
    for (run, file) in [("demo-audit-degraded", &audit), ("demo-search", &search)] {
        let file = file.to_str().expect("UTF-8 path");
        let (code, _, err) = reel(&["export", run, "-o", file], &demo);
        assert_eq!(code, 0, "reel export {run}: {err}");
    }
    let renamed = work.path().join("renamed.jsonl");
    let bytes = std::fs::read(&audit).expect("read the audit tape");
    std::fs::write(&renamed, parts(&bytes).rename("demo-search").write()).expect("write");

    let fresh = work.path().join("fresh");
    let (code, _, err) = reel(&["import", renamed.to_str().expect("UTF-8")], &fresh);
    assert_eq!(code, 0, "importing the renamed tape: {err}");
    assert_eq!(stats_artifacts(&fresh), "0");
    let before = dump(&fresh);
    let (code, _, err) = reel(&["import", search.to_str().expect("UTF-8")], &fresh);
    assert_eq!(code, 1, "importing demo-search again must fail: {err}");
    assert!(err.contains("\"demo-search\" already exists"), "{err}");
    let after = dump(&fresh);
    assert!(
        before == after,
        "the archive changed: {}",
        differences(&before, &after)
    );
    assert_eq!(stats_artifacts(&fresh), "0");

    // A duplicated run.started: refused with its line, and verify stays clean.
    let mut p = parts(&std::fs::read(&search).expect("read")).rename("demo-search-2");
    let first = p.facts[0].clone();
    p.facts.insert(1, first);
    let dup = work.path().join("dup.jsonl");
    std::fs::write(&dup, p.renumbered().write()).expect("write");
    let (code, _, err) = reel(&["import", dup.to_str().expect("UTF-8")], &fresh);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "dup.jsonl: line 3: run.started at seq 1: a second run.started inside the run"
        ),
        "{err}"
    );
    assert!(
        before == dump(&fresh),
        "the refused tape changed the archive"
    );
    let (code, out, err) = reel(&["verify"], &fresh);
    assert_eq!(code, 0, "verify: {out}{err}");
}

// ---------------------------------------------------------------------------
// Concurrent imports of one run id
// ---------------------------------------------------------------------------

/// Work for one thread of a [`race`].
type Job<T> = Box<dyn FnOnce() -> T + Send>;

/// Runs `jobs` at once (released together) and returns their results.
fn race<T: Send + 'static>(jobs: Vec<Job<T>>) -> Vec<T> {
    let gate = Arc::new(Barrier::new(jobs.len()));
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|job| {
            let gate = gate.clone();
            std::thread::spawn(move || {
                gate.wait();
                job()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("no thread panics"))
        .collect()
}

#[test]
fn concurrent_imports_of_one_run_id_have_exactly_one_winner() {
    let search = Tape::read(SEARCH).expect("reads");
    let audit = Tape::read(&parts(AUDIT).rename("demo-search").write()[..]).expect("reads");
    for round in 0..6 {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = open(dir.path());
        // Two tapes of one id, twice each: the search tape brings two
        // artifacts, the audit tape none.
        let jobs: Vec<Job<(bool, Result<RunRecord, TapeError>)>> = (0..4)
            .map(|i| {
                let (archive, tape) = (
                    archive.clone(),
                    if i % 2 == 0 {
                        search.clone()
                    } else {
                        audit.clone()
                    },
                );
                let job = move || (i % 2 == 0, tape.import(&archive));
                Box::new(job) as Job<_>
            })
            .collect();
        let results = race(jobs);
        let winners: Vec<bool> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(is_search, _)| *is_search)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (_, r) in &results {
            match r {
                Ok(_) => {}
                Err(TapeError::Store(e))
                    if matches!(
                        e.downcast_ref::<ArchiveError>(),
                        Some(ArchiveError::RunExists { .. })
                    ) => {}
                Err(e) => panic!("round {round}: a loser failed otherwise: {e}"),
            }
        }
        let winner = if winners[0] { &search } else { &audit };
        let facts: Vec<Fact> = archive
            .facts("demo-search", ..)
            .expect("facts")
            .collect::<Result<_, _>>()
            .expect("read");
        assert_eq!(&facts, &winner.facts, "round {round}");
        // Only the winner's artifacts are stored.
        assert_eq!(
            archive.stats().expect("stats").artifacts,
            winner.artifacts.len() as u64,
            "round {round}"
        );
        let report = archive.verify().expect("verify");
        assert!(report.is_ok(), "round {round}: {:?}", report.problems);
    }
}

#[test]
fn an_append_and_an_import_of_one_run_id_have_exactly_one_winner() {
    let tape = Tape::read(SEARCH).expect("reads");
    for round in 0..6 {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = open(dir.path());
        let (a, b, t) = (archive.clone(), archive.clone(), tape.clone());
        let started = tape.facts[0].clone().into_new();
        let jobs: Vec<Job<bool>> = vec![
            Box::new(move || a.append("demo-search", vec![started]).is_ok()),
            Box::new(move || t.import(&b).is_ok()),
        ];
        let wins = race(jobs);
        assert_eq!(
            wins.iter().filter(|&&w| w).count(),
            1,
            "round {round}: {wins:?}"
        );
        let record = archive.run("demo-search").expect("the winner's run");
        assert_eq!(record.facts, if wins[1] { 24 } else { 1 }, "round {round}");
        let report = archive.verify().expect("verify");
        assert!(report.is_ok(), "round {round}: {:?}", report.problems);
    }
}

// ---------------------------------------------------------------------------
// Append and import refuse the same streams
// ---------------------------------------------------------------------------

#[test]
fn append_refuses_what_import_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = open(dir.path());
    let facts = Tape::read(SEARCH).expect("reads").facts;
    let log = |seq| Fact {
        seq,
        at: 1,
        offset: 1,
        call: None,
        kind: FactKind::Log(Log {
            level: Level::Info,
            logger: None,
            subflow: None,
            data: json!("late"),
            delivered: true,
            in_flight: Vec::new(),
        }),
    };
    let mut after_end = facts.clone();
    after_end.push(log(after_end.len() as u64));
    let mut second_start = facts[..3].to_vec();
    second_start.push(Fact {
        seq: 3,
        ..facts[0].clone()
    });
    let mut no_start = facts[1..].to_vec();
    for (i, f) in no_start.iter_mut().enumerate() {
        f.seq = i as u64;
    }
    for (name, stream, rule) in [
        (
            "after run.ended",
            after_end,
            Rule::NothingAfterRunEnded { ended: 23 },
        ),
        ("second run.started", second_start, Rule::OneRunStarted),
        ("no run.started", no_start, Rule::BeginsWithRunStarted),
    ] {
        match archive.import_run(stream.clone()) {
            Err(ArchiveError::ImportBreaksRule { violation, .. }) => {
                assert_eq!(violation.rule, rule, "{name}")
            }
            other => panic!("{name}: import should break {rule:?}, got {other:?}"),
        }
        let batch: Vec<NewFact> = stream.into_iter().map(Fact::into_new).collect();
        match archive.append("demo-search", batch) {
            Err(ArchiveError::InvalidFacts { detail, .. }) => {
                assert!(detail.contains(&rule.to_string()), "{name}: {detail}")
            }
            other => panic!("{name}: append should be refused, got {other:?}"),
        }
        assert!(
            matches!(
                archive.run("demo-search"),
                Err(ArchiveError::UnknownRun { .. })
            ),
            "{name}: a refused append stored the run"
        );
    }
    let report = archive.verify().expect("verify");
    assert!(report.is_ok() && report.runs == 0, "{report:?}");
}

// ---------------------------------------------------------------------------
// The property: never accepted-then-damaged
// ---------------------------------------------------------------------------

/// A valid run: run.started, facts of any other kind, maybe run.ended, and
/// artifacts that a log fact refers to; split into batches at `cuts`.
#[derive(Debug, Clone)]
struct ValidRun {
    facts: Vec<Fact>,
    artifacts: Vec<Vec<u8>>,
    end: Option<RunStatus>,
    cuts: Vec<usize>,
}

fn valid_run() -> impl Strategy<Value = ValidRun> {
    (
        reel::strategy::facts_of_run("prop"),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..3),
        prop::option::of(prop::sample::select(vec![
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ])),
        prop::collection::vec(0usize..12, 0..3),
    )
        .prop_map(|(facts, artifacts, end, cuts)| {
            // Only the first fact starts the run and nothing but the last
            // ends it: the rules the archive keeps.
            let facts = facts
                .into_iter()
                .enumerate()
                .filter(|(i, f)| {
                    *i == 0 || !(f.kind.begins_stream() || matches!(f.kind, FactKind::RunEnded(_)))
                })
                .map(|(_, f)| f)
                .collect();
            ValidRun {
                facts,
                artifacts,
                end,
                cuts,
            }
        })
}

/// A single edit of a tape's lines. A line is picked by an index taken
/// modulo the lines after the header; index 0 is the header itself.
#[derive(Debug, Clone)]
enum Mutation {
    Drop(usize),
    Duplicate(usize),
    Swap(usize, usize),
    /// Gives one line the seq `seq`.
    Reseq(usize, u64),
}

fn mutation() -> impl Strategy<Value = (Mutation, bool)> {
    (
        prop_oneof![
            (0usize..40).prop_map(Mutation::Drop),
            (0usize..40).prop_map(Mutation::Duplicate),
            (0usize..40, 0usize..40).prop_map(|(a, b)| Mutation::Swap(a, b)),
            (0usize..40, 0u64..14).prop_map(|(i, s)| Mutation::Reseq(i, s)),
        ],
        // Mostly renumbered, as a careful hand edit would: those reach the
        // stream rules instead of the reader's seq check.
        prop::bool::weighted(0.75),
    )
}

/// Applies `m` to the tape's lines; with `renumber`, then numbers the fact
/// lines from 0 and makes the header count them.
fn mutate(tape: &[u8], m: &Mutation, renumber: bool) -> Vec<u8> {
    let text = std::str::from_utf8(tape).expect("UTF-8");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // A tape has its header and at least its run.started.
    let n = lines.len();
    let pick = |i: usize| if i == 0 { 0 } else { 1 + (i - 1) % (n - 1) };
    match *m {
        Mutation::Drop(i) => {
            lines.remove(pick(i));
        }
        Mutation::Duplicate(i) => {
            let line = lines[pick(i)].clone();
            lines.insert(pick(i), line);
        }
        Mutation::Swap(a, b) => lines.swap(pick(a), pick(b)),
        Mutation::Reseq(i, seq) => {
            if let Ok(mut v) = serde_json::from_str::<Value>(&lines[pick(i)]) {
                if v.get("seq").is_some() {
                    v["seq"] = json!(seq);
                    lines[pick(i)] = v.to_string();
                }
            }
        }
    }
    if renumber {
        let mut seq = 0u64;
        for line in lines.iter_mut() {
            if let Ok(mut v) = serde_json::from_str::<Value>(line) {
                if v.get("seq").is_some() && v.get("kind").is_some() {
                    v["seq"] = json!(seq);
                    seq += 1;
                    *line = v.to_string();
                }
            }
        }
        if let Some(Ok(mut header)) = lines.first().map(|l| serde_json::from_str::<Value>(l)) {
            if header.get("format").is_some() {
                header["run"]["facts"] = json!(seq);
                lines[0] = header.to_string();
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out.into_bytes()
}

/// Records `run` (as `run_id`) into `source` through `append`, exports it,
/// and returns the tape's bytes.
fn record_and_export(source: &Archive, run_id: &str, run: &ValidRun) -> Vec<u8> {
    let mut facts: Vec<NewFact> = run.facts.iter().cloned().map(Fact::into_new).collect();
    if let FactKind::RunStarted(s) = &mut facts[0].kind {
        s.run_id = run_id.into();
    }
    let digests: Vec<String> = run
        .artifacts
        .iter()
        .map(|bytes| source.put_artifact(bytes).expect("put artifact"))
        .collect();
    if !digests.is_empty() {
        facts.push(NewFact {
            at: 5,
            offset: 5,
            call: None,
            kind: FactKind::Log(Log {
                level: Level::Info,
                logger: None,
                subflow: None,
                data: json!(digests),
                delivered: true,
                in_flight: Vec::new(),
            }),
        });
    }
    if let Some(status) = run.end {
        facts.push(NewFact {
            at: 9,
            offset: 9,
            call: None,
            kind: FactKind::RunEnded(RunEnded { status }),
        });
    }
    let mut cuts: Vec<usize> = run
        .cuts
        .iter()
        .map(|c| 1 + c % facts.len())
        .filter(|&c| c < facts.len())
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut rest = facts;
    let mut batches = Vec::new();
    for cut in cuts.into_iter().rev() {
        batches.push(rest.split_off(cut));
    }
    batches.push(rest);
    for batch in batches.into_iter().rev() {
        source.append(run_id, batch).expect("a valid run appends");
    }
    let mut bytes = Vec::new();
    Tape::export(source, run_id)
        .expect("export")
        .write(&mut bytes)
        .expect("write");
    bytes
}

#[test]
fn import_round_trips_and_never_accepts_damage() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let source = open(&scratch.path().join("source"));
    let copy = open(&scratch.path().join("copy"));
    // The target of the mutated tapes: closed between cases, so its trees
    // can be dumped through sled.
    let target = scratch.path().join("target");
    import_bytes(&target, DEPLOY).expect("the target starts with a run");

    let config = Config {
        cases: 64,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::XorShift));
    let case = std::cell::Cell::new(0u64);
    let (refused, accepted) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    // Refusals by a stream rule (not by the tape parser or the header's
    // count): the mutations reach the rules.
    let by_rule = std::cell::Cell::new(0u32);
    let outcome = runner.run(&(valid_run(), mutation()), |(run, (m, renumber))| {
        case.set(case.get() + 1);
        let run_id = format!("prop-{}", case.get());
        let bytes = record_and_export(&source, &run_id, &run);

        // The exported tape round-trips through import and export.
        let (tape, lines) = Tape::read_with_lines(&bytes[..])
            .map_err(|e| TestCaseError::fail(format!("the exported tape reads: {e}")))?;
        let record = tape
            .import_with_lines(&copy, &lines)
            .map_err(|e| TestCaseError::fail(format!("the exported tape imports: {e}")))?;
        let again = Tape::export(&copy, &run_id).expect("export the copy");
        prop_assert_eq!(&again.facts, &tape.facts);
        prop_assert_eq!(&again.artifacts, &tape.artifacts);
        let mut want = tape.header.run.clone();
        if want.state == RunState::Running {
            want.state = RunState::Incomplete;
        }
        prop_assert_eq!(&record, &want);
        prop_assert_eq!(&again.header.run, &want);

        // A mutated tape: refused with the target unchanged, or accepted
        // with the target sound and holding what the tape says.
        let mutated = mutate(&bytes, &m, renumber);
        let before = dump(&target);
        let result = import_bytes(&target, &mutated);
        let after = dump(&target);
        match result {
            Err(e) => {
                refused.set(refused.get() + 1);
                if e.to_string()
                    .contains("nothing was imported: fix this line")
                {
                    by_rule.set(by_rule.get() + 1);
                }
                prop_assert!(
                    before == after,
                    "{:?} (renumber {}) was refused ({}) but changed the archive: {}",
                    m,
                    renumber,
                    e,
                    differences(&before, &after)
                );
            }
            Ok(record) => {
                accepted.set(accepted.get() + 1);
                let archive = open(&target);
                let report = archive.verify().expect("verify");
                prop_assert!(
                    report.is_ok(),
                    "{:?} (renumber {}) was accepted, then verify found {:?}",
                    m,
                    renumber,
                    report.problems
                );
                let read = Tape::read(&mutated[..]).expect("it imported, so it reads");
                let stored: Vec<Fact> = archive
                    .facts(&record.run_id, ..)
                    .expect("facts")
                    .collect::<Result<_, _>>()
                    .expect("read back");
                prop_assert_eq!(&stored, &read.facts);
                for (digest, bytes) in &read.artifacts {
                    prop_assert_eq!(
                        archive.artifact(digest).expect("artifact"),
                        Some(bytes.clone())
                    );
                }
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    // Both outcomes came up, so both branches above were exercised.
    let (refused, accepted, by_rule) = (refused.get(), accepted.get(), by_rule.get());
    assert!(
        refused > 0 && accepted > 0 && by_rule > 0,
        "refused {refused} ({by_rule} by a stream rule), accepted {accepted}"
    );
}

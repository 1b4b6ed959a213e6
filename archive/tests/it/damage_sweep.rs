//! Damage is never silent, swept: one flipped byte at every k-th offset of
//! every file of a real store, and cuts at 50 offsets, each on a copy taken
//! fresh from a writer (never one reel has reopened since), in the two
//! states a user has: a store its writer closed, and one whose writer was
//! killed after a flush (its files copied while it still held them).
//!
//! For every damaged copy:
//! - nothing panics;
//! - a read-only open and `verify` either find every fact of the original,
//!   exactly, or report damage (the CLI's exit code 2): a silent loss is a
//!   store that opens, verifies and reads as whole while facts are missing
//!   or different, and there must be none;
//! - reading leaves every file byte for byte as it was;
//! - salvage recovers every block of a run whose first block the damage
//!   did not touch, invents no fact, and says it lost something (exit 2)
//!   whenever it recovered less than the original.
//!
//! The counts are printed (`--nocapture`).

use crate::support::copy_dir;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use reel::fact::{Fact, FactKind, NewFact, Producer, Progress, RunEnded, RunStarted, RunStatus};
use reel_archive::{Archive, ArchiveConfig, ArchiveError, FingerprintKey, RunFilter};
use serde_json::json;

fn config(read_only: bool) -> ArchiveConfig {
    ArchiveConfig {
        fingerprint_key: FingerprintKey::Key([5; 32]),
        read_only,
        ..ArchiveConfig::default()
    }
}

fn fact(kind: FactKind) -> NewFact {
    NewFact {
        at: 1_700_000_000_000_000_000,
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
            name: "sweep".into(),
            version: "1".into(),
        },
        labels: Default::default(),
        teardown_scopes: vec![],
    }))
}

/// A progress report whose payload does not compress away: `n` bytes of
/// pseudo-random text.
fn progress(i: u64, n: usize) -> NewFact {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let text: String = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    fact(FactKind::Progress(Progress {
        payload: json!({"message": format!("step {i}"), "noise": text}),
        count: i + 1,
        delivered: false,
    }))
}

fn ended() -> NewFact {
    fact(FactKind::RunEnded(RunEnded {
        status: RunStatus::Completed,
    }))
}

/// Writes the runs of the sweep: closed runs of many small blocks, a run
/// with a block large enough for sled to keep in a blob file of its own,
/// artifacts (one a blob file), and a run left running. Flushed.
fn write_runs(archive: &Archive) {
    for (r, run) in ["alpha", "beta"].iter().enumerate() {
        archive.append(run, vec![started(run)]).unwrap();
        for b in 0..6u64 {
            let facts = (0..4)
                .map(|i| progress(r as u64 * 100 + b * 4 + i, 200))
                .collect();
            archive.append(run, facts).unwrap();
        }
        archive.append(run, vec![ended()]).unwrap();
    }
    archive.append("spilled", vec![started("spilled")]).unwrap();
    archive
        .append(
            "spilled",
            (0..40).map(|i| progress(1000 + i, 2048)).collect(),
        )
        .unwrap();
    archive.append("spilled", vec![ended()]).unwrap();
    archive.put_artifact(b"a small artifact").unwrap();
    let big: Vec<u8> = (0..300 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    archive.put_artifact(&big).unwrap();
    archive.append("open", vec![started("open")]).unwrap();
    archive
        .append("open", (0..3).map(|i| progress(2000 + i, 300)).collect())
        .unwrap();
    archive.flush().unwrap();
}

/// Every file of a directory with its bytes, by path relative to it.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let rel = entry.path().strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

type Facts = BTreeMap<String, Vec<Fact>>;

/// What a read-only open reads of every run (the facts that read; the
/// gaps are counted), whether `verify` found it sound, or the error it met.
fn read_all(dir: &Path) -> Result<(Facts, bool, usize), ArchiveError> {
    let archive = Archive::open(dir, config(true))?;
    let report = archive.verify()?;
    let mut out = Facts::new();
    let mut gaps = 0;
    let mut filter = RunFilter::default();
    loop {
        let page = archive.list_runs(&filter)?;
        gaps += page.damaged.len();
        for run in &page.runs {
            let mut facts = Vec::new();
            for item in archive.facts(&run.run_id, ..)? {
                match item {
                    Ok(f) => facts.push(f),
                    Err(e) if e.is_damage() => gaps += 1,
                    Err(e) => return Err(e),
                }
            }
            out.insert(run.run_id.clone(), facts);
        }
        match page.next {
            Some(next) => filter.cursor = Some(next),
            None => break,
        }
    }
    Ok((out, report.is_ok(), gaps))
}

/// A block of the original store: its bytes, run and seqs.
struct Block {
    bytes: Vec<u8>,
    run: String,
    first: u64,
    count: u64,
}

/// The blocks of the store in `dir`, read with sled from a copy.
fn blocks(dir: &Path) -> Vec<Block> {
    let scratch = tempfile::tempdir().unwrap();
    copy_dir(dir, scratch.path());
    let db = sled::open(scratch.path()).unwrap();
    let run_ids: HashMap<Vec<u8>, String> = db
        .open_tree("run_ids")
        .unwrap()
        .iter()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (v.to_vec(), String::from_utf8(k.to_vec()).unwrap())
        })
        .collect();
    db.open_tree("events")
        .unwrap()
        .iter()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            Block {
                run: run_ids[&k[..8]].clone(),
                first: u64::from_be_bytes(k[8..16].try_into().unwrap()),
                count: u64::from(u32::from_be_bytes(v[1..5].try_into().unwrap())),
                bytes: v.to_vec(),
            }
        })
        .collect()
}

/// Where `needle` occurs in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    memchr::memmem::find_iter(haystack, needle).collect()
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Flip(usize),
    Cut(usize),
}

#[derive(Default, Debug)]
struct Counts {
    cases: u64,
    whole: u64,
    damage_reported: u64,
    silent_losses: u64,
    wrong_errors: u64,
    changed_by_reading: u64,
    salvage_missed_untouched: u64,
    salvage_invented: u64,
    salvage_silent: u64,
}

/// Damages a copy of `original` at `(file, damage)` and checks it.
fn check_one(
    original: &Path,
    want: &Facts,
    blocks: &[Block],
    file: &Path,
    damage: Damage,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) {
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("archive");
    copy_dir(original, &copy);
    let path = copy.join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    match damage {
        Damage::Flip(at) => bytes[at] ^= 0x5a,
        Damage::Cut(at) => bytes.truncate(at),
    }
    std::fs::write(&path, &bytes).unwrap();
    let name = format!("{} {:?}", file.display(), damage);
    counts.cases += 1;
    let before = files(&copy);

    // Read as every read verb does: a read-only open, verify, every run.
    let read = std::panic::catch_unwind(|| read_all(&copy));
    match read {
        Err(_) => failures.push(format!("{name}: reading panicked")),
        Ok(Ok((got, verified, gaps))) => {
            if got == *want && verified && gaps == 0 {
                counts.whole += 1;
            } else if verified && gaps == 0 {
                counts.silent_losses += 1;
                failures.push(format!(
                    "{name}: SILENT: verify says ok, but reading gives {} runs / {} facts of {} / {}",
                    got.len(),
                    got.values().map(Vec::len).sum::<usize>(),
                    want.len(),
                    want.values().map(Vec::len).sum::<usize>(),
                ));
            } else {
                counts.damage_reported += 1;
            }
        }
        Ok(Err(e)) if e.is_damage() => counts.damage_reported += 1,
        Ok(Err(e)) => {
            counts.wrong_errors += 1;
            failures.push(format!("{name}: an error that is not damage: {e}"));
        }
    }
    if files(&copy) != before {
        counts.changed_by_reading += 1;
        failures.push(format!("{name}: reading changed the files"));
    }

    // Salvage: every block of a run whose first block is intact somewhere.
    let into = work.path().join("salvaged");
    let salvaged = std::panic::catch_unwind(|| {
        reel_archive::salvage(&copy, &into, config(false)).map(|report| {
            let got = read_all(&into).map(|(facts, _, _)| facts);
            (report, got)
        })
    });
    let (report, got) = match salvaged {
        Err(_) => {
            failures.push(format!("{name}: salvage panicked"));
            return;
        }
        Ok(Err(e)) => {
            failures.push(format!("{name}: salvage failed: {e}"));
            return;
        }
        Ok(Ok((report, Ok(got)))) => (report, got),
        Ok(Ok((_, Err(e)))) => {
            failures.push(format!("{name}: the salvaged archive does not read: {e}"));
            return;
        }
    };
    let originals = files(original);
    let intact = |block: &Block| -> bool {
        originals.iter().any(|(f, data)| {
            occurrences(data, &block.bytes).into_iter().any(|at| {
                let end = at + block.bytes.len();
                if f != file {
                    return true;
                }
                match damage {
                    Damage::Flip(o) => !(at..end).contains(&o),
                    Damage::Cut(o) => end <= o,
                }
            })
        })
    };
    for (run, facts) in &got {
        let original = want.get(run);
        for f in facts {
            if original.and_then(|o| o.get(f.seq as usize)) != Some(f) {
                counts.salvage_invented += 1;
                failures.push(format!(
                    "{name}: salvage holds {run} seq {} unlike the original",
                    f.seq
                ));
                break;
            }
        }
    }
    for run in want.keys() {
        let of_run: Vec<&Block> = blocks.iter().filter(|b| &b.run == run).collect();
        let Some(first) = of_run.iter().find(|b| b.first == 0) else {
            continue;
        };
        if !intact(first) {
            continue;
        }
        for block in of_run.iter().filter(|b| intact(b)) {
            let held = got.get(run).is_some_and(|facts| {
                (block.first..block.first + block.count)
                    .all(|seq| facts.iter().any(|f| f.seq == seq))
            });
            if !held {
                counts.salvage_missed_untouched += 1;
                failures.push(format!(
                    "{name}: salvage missed the intact block {run} seq {}..{}",
                    block.first,
                    block.first + block.count
                ));
            }
        }
    }
    let recovered_all = got == *want;
    let says_lost = report.lost_anything();
    if !recovered_all && !says_lost {
        counts.salvage_silent += 1;
        failures.push(format!(
            "{name}: salvage recovered {} of {} facts and says nothing was lost",
            got.values().map(Vec::len).sum::<usize>(),
            want.values().map(Vec::len).sum::<usize>()
        ));
    }
}

/// Sweeps one state of the store.
fn sweep(state: &str, original: &Path) -> (Counts, Vec<String>) {
    let (want, verified, gaps) = read_all(original).expect("the undamaged store reads");
    assert!(
        verified && gaps == 0,
        "{state}: the undamaged store verifies"
    );
    assert_eq!(want.len(), 4, "{state}: every run is there");
    let blocks = blocks(original);
    assert!(blocks.len() > 15, "{state}: many blocks");
    let store: Vec<(PathBuf, usize)> = files(original)
        .into_iter()
        .map(|(f, data)| (f, data.len()))
        .collect();
    let total: usize = store.iter().map(|(_, n)| n).sum();
    // Flips: about 240 positions over all files, each file at least 4;
    // cuts: 50.
    let step = (total / 240).max(1);
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    for (f, len) in &store {
        let mut offsets: Vec<usize> = (0..*len).step_by(step).collect();
        for extra in [0, len / 3, len / 2, len.saturating_sub(1)] {
            if !offsets.contains(&extra) && extra < *len {
                offsets.push(extra);
            }
        }
        for at in offsets {
            check_one(
                original,
                &want,
                &blocks,
                f,
                Damage::Flip(at),
                &mut counts,
                &mut failures,
            );
        }
    }
    let cut_step = (total / 50).max(1);
    let mut base = 0;
    for (f, len) in &store {
        let mut at = (cut_step - base % cut_step) % cut_step;
        while at < *len {
            check_one(
                original,
                &want,
                &blocks,
                f,
                Damage::Cut(at),
                &mut counts,
                &mut failures,
            );
            at += cut_step;
        }
        base += len;
    }
    println!("{state}: {counts:?}");
    (counts, failures)
}

#[test]
fn one_damaged_byte_is_never_a_silent_loss() {
    let tmp = tempfile::tempdir().unwrap();

    // A store its writer closed.
    let closed = tmp.path().join("closed");
    {
        let archive = Archive::open(&closed, config(false)).unwrap();
        write_runs(&archive);
    }
    // A store whose writer was killed after its last flush: its files as
    // they were while it still held them.
    let killed = tmp.path().join("killed");
    let held = tmp.path().join("held");
    {
        let archive = Archive::open(&held, config(false)).unwrap();
        write_runs(&archive);
        copy_dir(&held, &killed);
    }

    // A sealed, whole store is read in place: its store files stay byte
    // for byte (only the seal in reel.control is refreshed).
    let store_files = |dir: &Path| {
        let mut f = files(dir);
        f.retain(|p, _| !p.to_string_lossy().starts_with("reel."));
        f
    };
    let before = store_files(&closed);
    for _ in 0..3 {
        read_all(&closed).expect("the closed store reads");
    }
    assert!(
        store_files(&closed) == before,
        "reading the sealed store changed its files"
    );

    let mut all = Vec::new();
    let mut totals = Vec::new();
    for (state, dir) in [("closed", &closed), ("killed", &killed)] {
        let (counts, failures) = sweep(state, dir);
        assert!(counts.cases >= 250, "{state}: {} cases", counts.cases);
        totals.push((state, counts));
        all.extend(failures.into_iter().map(|f| format!("{state}: {f}")));
    }
    for (state, counts) in &totals {
        assert!(
            counts.damage_reported > 0,
            "{state}: the sweep damaged nothing that matters: {counts:?}"
        );
    }
    assert!(
        all.is_empty(),
        "{} failures:\n{}",
        all.len(),
        all.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The seal does not hide damage written into the sealed store itself:
/// a writer's open (which trusts a sealed store) finds the store changed
/// since its seal, probes a copy, and refuses before sled rewrites it.
#[test]
fn a_byte_flipped_in_a_sealed_store_stops_a_writer_before_sled_rewrites_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sealed");
    {
        let archive = Archive::open(&dir, config(false)).unwrap();
        write_runs(&archive);
    }
    let (want, _, _) = read_all(&dir).unwrap();
    let db = dir.join("db");
    let len = std::fs::metadata(&db).unwrap().len() as usize;
    let mut refused = 0;
    for frac in [2, 3, 5, 8] {
        let copy = tmp.path().join(format!("in-place-{frac}"));
        copy_dir(&dir, &copy);
        // Sealed as the copy is: a writer's close of the copy seals it.
        drop(Archive::open(&copy, config(false)).unwrap());
        let path = copy.join("db");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[len / frac] ^= 0x81;
        // Written in place: same inode, as a disk or a stray write would.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .unwrap();
        let before = files(&copy);
        match Archive::open(&copy, config(false)) {
            Err(e) => {
                assert!(e.is_damage(), "1/{frac}: {e}");
                assert_eq!(files(&copy), before, "1/{frac}: refused, yet written");
                refused += 1;
            }
            Ok(archive) => {
                drop(archive);
                let (got, verified, gaps) = read_all(&copy).unwrap();
                assert!(
                    !verified || gaps > 0 || got == want,
                    "1/{frac}: SILENT loss after a writer's open"
                );
            }
        }
    }
    assert!(
        refused > 0,
        "no flip stopped the writer: the test checks nothing"
    );
}

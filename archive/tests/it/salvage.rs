//! `salvage` over many random damages of a real archive (the demo runs,
//! recorded by the recorder, and a run with an artifact large enough for
//! sled to keep it in a blob file): flipped bytes, zeroed ranges and
//! truncations of sled's `db`, a deleted or damaged blob, a damaged `conf`
//! (sled refuses to open), a damaged snapshot when sled wrote one. Each
//! time: no panic, the fresh archive verifies, and every fact it holds is
//! the one recorded under that run and seq. The share of facts recovered
//! is printed.

use crate::support::copy_dir;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use reel::fact::{Fact, FactKind, Level, Log, NewFact, Producer, RunEnded, RunStarted, RunStatus};
use reel_archive::{salvage, Archive, ArchiveConfig, FingerprintKey};

fn config() -> ArchiveConfig {
    ArchiveConfig {
        fingerprint_key: FingerprintKey::Key([3; 32]),
        ..ArchiveConfig::default()
    }
}

/// Bytes lz4 and sled cannot shrink: a xorshift sequence.
fn noise(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Records the archive; returns every fact by (run, seq) and every
/// artifact by digest, as the original holds them.
type Recorded = (HashMap<(String, u64), Fact>, HashMap<String, Vec<u8>>);

fn record(dir: &Path) -> Recorded {
    let archive = Archive::open(dir, config()).expect("open");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let recorder = reel_recorder::Recorder::with_archive(archive.clone(), Default::default())
            .expect("recorder");
        reel_demo::record(&recorder).await.expect("demo");
        recorder.shutdown().await.expect("shutdown");
    });
    // A run with a large artifact (a file of its own, see the archive's
    // `files`) and a block larger than sled keeps inline (a blob file: its
    // first log carries incompressible padding).
    let big = noise(300_000, 0x9e37_79b9_7f4a_7c15);
    let pad = hex::encode(noise(200_000, 0x2545_f491_4f6c_dd1d));
    let digest = archive.put_artifact(&big).expect("artifact");
    let fact = |kind| NewFact {
        at: 5,
        offset: 0,
        call: None,
        kind,
    };
    archive
        .append(
            "big-artifact",
            vec![fact(FactKind::RunStarted(RunStarted {
                run_id: "big-artifact".into(),
                session_id: None,
                identity: None,
                producer: Producer {
                    name: "salvage-test".into(),
                    version: "0".into(),
                },
                labels: Default::default(),
                teardown_scopes: vec![],
            }))],
        )
        .expect("append");
    for i in 0..20 {
        archive
            .append(
                "big-artifact",
                vec![fact(FactKind::Log(Log {
                    level: Level::Info,
                    logger: None,
                    subflow: None,
                    data: if i == 0 {
                        serde_json::json!({"step": i, "artifact": {"digest": digest, "size": big.len()}, "pad": pad})
                    } else {
                        serde_json::json!({"step": i, "artifact": {"digest": digest, "size": big.len()}})
                    },
                    delivered: true, in_flight: Vec::new(),
                }))],
            )
            .expect("append");
    }
    archive
        .append(
            "big-artifact",
            vec![fact(FactKind::RunEnded(RunEnded {
                status: RunStatus::Completed,
            }))],
        )
        .expect("append");
    archive.flush().expect("flush");
    let mut facts = HashMap::new();
    let mut artifacts = HashMap::new();
    for run in archive.run_ids() {
        let run = run.expect("run id");
        for fact in archive.facts(&run, ..).expect("facts") {
            let fact = fact.expect("fact");
            for d in reel::tape::referenced_digests([&fact]) {
                let bytes = archive.artifact(&d).expect("read").expect("stored");
                artifacts.insert(d, bytes);
            }
            facts.insert((run.clone(), fact.seq), fact);
        }
    }
    drop(archive);
    // sled's threads let go of the directory a moment after the last handle.
    let started = std::time::Instant::now();
    while sled::open(dir).is_err() && started.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (facts, artifacts)
}

fn files(dir: &Path, sub: &str, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir.join(sub))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The length of a file up to its last byte that is not zero: sled
/// preallocates segments, and damage past the data would miss it.
fn used(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(1, |i| i + 1)
}

fn flip(path: &Path, rng: &mut impl Rng, n: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    if bytes.is_empty() {
        return;
    }
    let used = used(&bytes);
    for _ in 0..n {
        let at = rng.random_range(0..used);
        bytes[at] ^= 1 << rng.random_range(0..8);
    }
    std::fs::write(path, bytes).unwrap();
}

/// Damages the copy in `dir` one way, chosen by `kind`; returns its name.
/// `blocks` are the original's stored blocks.
fn damage(dir: &Path, kind: usize, rng: &mut impl Rng, blocks: &[Vec<u8>]) -> &'static str {
    let db = dir.join("db");
    let blobs = files(dir, "blobs", "");
    let snaps = files(dir, "", "snap.");
    match kind % 8 {
        7 => {
            // One block lost wherever sled keeps a copy, at a random byte
            // (its header or its facts), and sled refuses the store.
            let block = &blocks[rng.random_range(0..blocks.len())];
            let at = rng.random_range(0..block.len());
            damage_every_copy(dir, block, at);
            std::fs::write(dir.join("conf"), b"").unwrap();
            "every copy of one block damaged"
        }
        0 => {
            flip(&db, rng, 1);
            "one flipped byte in db"
        }
        1 => {
            let n = rng.random_range(2..40);
            flip(&db, rng, n);
            "flipped bytes in db"
        }
        2 => {
            let mut bytes = std::fs::read(&db).unwrap();
            let len = used(&bytes);
            bytes.truncate(rng.random_range(0..len));
            std::fs::write(&db, bytes).unwrap();
            "truncated db"
        }
        3 => {
            let mut bytes = std::fs::read(&db).unwrap();
            let at = rng.random_range(0..used(&bytes));
            let end = (at + 4096).min(bytes.len());
            bytes[at..end].fill(0);
            std::fs::write(&db, bytes).unwrap();
            // and sled refuses its conf
            std::fs::write(dir.join("conf"), b"segment_size: x\n").unwrap();
            "a zeroed range in db, a damaged conf"
        }
        4 => match blobs.first() {
            Some(blob) => {
                std::fs::remove_file(blob).unwrap();
                "deleted blob"
            }
            None => {
                flip(&db, rng, 3);
                "flipped bytes in db (no blob)"
            }
        },
        5 => match blobs.first() {
            Some(blob) => {
                flip(blob, rng, 1);
                "a flipped byte in a blob"
            }
            None => {
                flip(&db, rng, 3);
                "flipped bytes in db (no blob)"
            }
        },
        _ => match snaps.first() {
            Some(snap) => {
                flip(snap, rng, 4);
                "damaged snapshot"
            }
            None => {
                flip(&db, rng, 1);
                std::fs::write(dir.join("conf"), b"").unwrap();
                "a flipped byte in db, an emptied conf (no snapshot)"
            }
        },
    }
}

#[test]
fn salvage_recovers_only_what_was_recorded_whatever_the_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("original");
    let (recorded, artifacts) = record(&original);
    let blocks = stored_blocks(&original);
    assert!(
        !files(&original, "blobs", "").is_empty(),
        "the large block is in a blob file"
    );
    let total = recorded.len() as u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let mut shares: Vec<(&str, u64, u64)> = Vec::new();
    let (mut sled_refused, mut broken) = (0, 0);
    const ROUNDS: usize = 16;
    for round in 0..ROUNDS {
        let copy = tmp.path().join(format!("damaged-{round}"));
        copy_dir(&original, &copy);
        let how = damage(&copy, round, &mut rng, &blocks);
        let into = tmp.path().join(format!("salvaged-{round}"));
        let report = salvage(&copy, &into, config())
            .unwrap_or_else(|e| panic!("round {round} ({how}): salvage failed: {e}"));
        sled_refused += usize::from(report.sled_refused.is_some());
        broken += report.runs_broken;
        let fresh = Archive::open(&into, config()).expect("the fresh archive opens");
        let verified = fresh.verify().expect("verify runs");
        assert!(
            verified.is_ok(),
            "round {round} ({how}): {:?}",
            verified.problems
        );
        let mut got = 0u64;
        for run in fresh.run_ids() {
            let run = run.expect("run id");
            for fact in fresh.facts(&run, ..).expect("facts") {
                match fact {
                    Ok(fact) => {
                        let want = recorded.get(&(run.clone(), fact.seq));
                        assert_eq!(
                            want,
                            Some(&fact),
                            "round {round} ({how}): run {run} seq {}",
                            fact.seq
                        );
                        got += 1;
                        for d in reel::tape::referenced_digests([&fact]) {
                            if let Some(bytes) = fresh.artifact(&d).expect("read") {
                                assert_eq!(Some(&bytes), artifacts.get(&d));
                            }
                        }
                    }
                    Err(e) => {
                        let gap = e.gap().expect("only gaps");
                        assert!(gap.detail.contains("reel salvage"), "{e}");
                    }
                }
            }
        }
        assert_eq!(got, report.facts_recovered, "round {round} ({how})");
        println!(
            "round {round} ({how}): sled {}, {got}/{total} facts, {} runs broken, {} blocks unplaced, {} artifacts lost",
            if report.sled_refused.is_some() { "refused" } else { "opened" },
            report.runs_broken,
            report.blocks_unplaced,
            report.artifacts_lost
        );
        shares.push((how, got, total));
        drop(fresh);
        let _ = std::fs::remove_dir_all(&copy);
        let _ = std::fs::remove_dir_all(&into);
    }
    let (got, all): (u64, u64) = shares.iter().fold((0, 0), |(a, b), s| (a + s.1, b + s.2));
    println!(
        "salvage: {ROUNDS} damaged copies, sled refused {sled_refused}, {broken} broken chains marked; {got}/{all} facts recovered ({:.1}%)",
        got as f64 * 100.0 / all as f64
    );
    assert!(sled_refused > 0, "some damage makes sled refuse the store");
}

/// Flips the byte at `offset` of every copy of `value` in every file of
/// `dir`; returns how many copies there were.
fn damage_every_copy(dir: &Path, value: &[u8], offset: usize) -> usize {
    let mut copies = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let mut bytes = std::fs::read(&path).unwrap();
            let hits: Vec<usize> = bytes
                .windows(value.len())
                .enumerate()
                .filter(|(_, w)| *w == value)
                .map(|(i, _)| i)
                .collect();
            for i in &hits {
                bytes[i + offset] ^= 0x10;
            }
            if !hits.is_empty() {
                copies += hits.len();
                std::fs::write(&path, bytes).unwrap();
            }
        }
    }
    copies
}

/// Every stored block of the archive, read through sled.
fn stored_blocks(dir: &Path) -> Vec<Vec<u8>> {
    let db = sled::open(dir).expect("sled opens the original");
    let events = db.open_tree("events").expect("events");
    let blocks = events
        .iter()
        .values()
        .map(|v| v.expect("reads").to_vec())
        .collect();
    drop(db);
    let started = std::time::Instant::now();
    while sled::open(dir).is_err() && started.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    blocks
}

/// The stored block of the big-artifact run that holds its step 10 (seq
/// 11).
fn block_of_step_10(dir: &Path) -> Vec<u8> {
    stored_blocks(dir)
        .into_iter()
        .find(|v| v.windows(6).any(|w| w == b"\xa4step\x0a"))
        .expect("the block of step 10")
}

/// A block lost in every copy, its header intact: the run is recovered on
/// both sides of it, its chain marked broken at exactly that seq; reading
/// the run shows the gap as salvage's, and `verify` lists it as a known
/// loss, not as damage. With the header's digest damaged too, nothing
/// links the rest to the run: the run is recovered up to the loss
/// (incomplete) and the rest is reported as unplaced blocks.
#[test]
fn a_lost_block_breaks_the_chain_where_it_was_and_nowhere_else() {
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("original");
    let (recorded, _) = record(&original);
    let block = block_of_step_10(&original);
    let run_facts = recorded.keys().filter(|(r, _)| r == "big-artifact").count() as u64;

    // The payload damaged, the header intact.
    let copy = tmp.path().join("payload");
    copy_dir(&original, &copy);
    std::fs::write(copy.join("conf"), b"").unwrap();
    assert!(damage_every_copy(&copy, &block, 80) > 0);
    let into = tmp.path().join("payload-salvaged");
    let report = salvage(&copy, &into, config()).expect("salvage");
    assert!(report.sled_refused.is_some());
    let run = report
        .runs
        .iter()
        .find(|r| r.run_id == "big-artifact")
        .expect("recovered");
    assert_eq!(
        run.lost,
        [reel_archive::LostSeqs {
            first: 11,
            last: 11
        }]
    );
    assert_eq!(run.facts, run_facts - 1);
    assert_eq!(run.state, reel::run::RunState::Completed);
    assert_eq!(report.runs_broken, 1);
    assert_eq!(report.facts_lost, 1);
    let fresh = Archive::open(&into, config()).expect("opens");
    let verified = fresh.verify().expect("verify");
    assert!(verified.is_ok(), "{:?}", verified.problems);
    assert_eq!(
        verified.known_losses.len(),
        1,
        "{:?}",
        verified.known_losses
    );
    assert_eq!(verified.known_losses[0].seqs, Some((11, Some(11))));
    let gaps: Vec<_> = fresh
        .facts("big-artifact", ..)
        .unwrap()
        .filter_map(|f| f.err())
        .collect();
    assert_eq!(gaps.len(), 1);
    let gap = gaps[0].gap().expect("a gap");
    assert_eq!((gap.first, gap.last), (11, Some(11)));
    assert!(gap.detail.contains("reel salvage"), "{}", gap.detail);
    drop(fresh);

    // The header's own digest damaged too, and no journal (its frames'
    // keys would name the run of every block after the loss: what sled's
    // raw files alone cannot).
    let copy = tmp.path().join("header");
    copy_dir(&original, &copy);
    std::fs::write(copy.join("conf"), b"").unwrap();
    std::fs::remove_dir_all(copy.join("journal")).unwrap();
    assert!(damage_every_copy(&copy, &block, 80) > 0);
    let mut broken_header = block.clone();
    broken_header[80] ^= 0x10;
    assert!(damage_every_copy(&copy, &broken_header, 40) > 0);
    let into = tmp.path().join("header-salvaged");
    let report = salvage(&copy, &into, config()).expect("salvage");
    let run = report
        .runs
        .iter()
        .find(|r| r.run_id == "big-artifact")
        .expect("recovered");
    assert_eq!(
        (run.facts, run.state),
        (11, reel::run::RunState::Incomplete)
    );
    assert!(run.lost.is_empty());
    assert_eq!(report.blocks_unplaced, run_facts - 12);
    let fresh = Archive::open(&into, config()).expect("opens");
    let verified = fresh.verify().expect("verify");
    assert!(verified.is_ok(), "{:?}", verified.problems);
}

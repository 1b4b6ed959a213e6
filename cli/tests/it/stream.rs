//! `reel show` streams a run: the viewer holds no facts, however long the
//! run. The test builds one run of 1,000,000 facts and one of 200,000 (same
//! shape), runs `reel show --json` on each with its output read slowly
//! enough for the child to stay alive, and samples the child's resident
//! memory from /proc.
//!
//! What grows: sled 0.34.7 keeps the pages a process has read resident
//! (measured here: iterating 196 MB of blocks with sled alone grows RSS by
//! 192 MB whatever `cache_capacity` is set to), so reading a run costs about
//! its stored bytes. What must not grow: anything of the viewer's own. The
//! test asserts that each extra fact costs no more resident memory than its
//! stored size plus a margin, far below what holding decoded facts would
//! cost (a `Fact` alone is 300+ bytes before its payload's heap).
//! Timings are never asserted.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reel::fact::*;
use reel::NewFact;
use reel_archive::{Archive, ArchiveConfig};
use serde_json::json;

fn fact(offset: u64, call: Option<&str>, kind: FactKind) -> NewFact {
    NewFact {
        at: 1_800_000_000_000_000_000 + offset as i64,
        offset,
        call: call.map(str::to_owned),
        kind,
    }
}

/// Appends a run of `n` progress facts in one call, in blocks of 10,000.
const BATCH: u64 = 500;
pub fn build(archive: &Archive, run_id: &str, n: u64) {
    archive
        .append(
            run_id,
            vec![
                fact(
                    0,
                    None,
                    FactKind::RunStarted(RunStarted {
                        run_id: run_id.into(),
                        session_id: None,
                        identity: None,
                        producer: Producer {
                            name: "stream-test".into(),
                            version: "0".into(),
                        },
                        labels: Default::default(),
                        teardown_scopes: vec![],
                    }),
                ),
                fact(
                    1,
                    Some("c1"),
                    FactKind::CallStarted(CallStarted {
                        call_id: "c1".into(),
                        tool_name: "walk".into(),
                        tool_id: None,
                        parent_call: None,
                        iteration: 0,
                        invocation_id: None,
                        mode: CallMode::Async,
                        protocol: None,
                        platform: None,
                        client_info: None,
                        args: json!(n),
                        wanted: None,
                        attached: None,
                        spec: None,
                        dispatch_tools: None,
                        outside_run: None,
                    }),
                ),
            ],
        )
        .unwrap();
    let mut i = 0;
    while i < n {
        let batch: Vec<NewFact> = (i..(i + BATCH).min(n))
            .map(|k| {
                fact(k + 2, Some("c1"), FactKind::Progress(Progress {
                    payload: json!({ "message": format!("Hop {k} of {n}"), "done": k, "pad": "x".repeat(64) }),
                    count: k + 1,
                delivered: false,
                }))
            })
            .collect();
        i += batch.len() as u64;
        archive.append(run_id, batch).unwrap();
    }
    archive
        .append(
            run_id,
            vec![
                fact(
                    n + 2,
                    Some("c1"),
                    FactKind::CallEnded(CallEnded {
                        outcome: CallOutcome::Ok { result: json!(n) },
                        duration_ns: n,
                        invocation_id: None,
                    }),
                ),
                fact(
                    n + 3,
                    None,
                    FactKind::RunEnded(RunEnded {
                        status: RunStatus::Completed,
                    }),
                ),
            ],
        )
        .unwrap();
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `reel show RUN --json`, reading its output slowly; returns (facts
/// read, peak resident memory in KiB). The document is indented: each fact
/// opens on a line of its own, `    {` (its depth, 4).
fn show_peak(dir: &Path, run: &str) -> (u64, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["show", run, "--json", "--archive"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(kib) = rss_kib(pid) {
                    peak.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut lines = 0u64;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if line.unwrap() != "    {" {
            continue;
        }
        lines += 1;
        if lines.is_multiple_of(50_000) {
            // Let the sampler see the child mid-stream.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(child.wait().unwrap().success());
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    (lines, peak.load(Ordering::Relaxed))
}

#[test]
fn show_of_a_million_facts_streams_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let stored_per_fact = {
        let archive = Archive::open(dir.path(), ArchiveConfig::default()).unwrap();
        build(&archive, "small", 200_000);
        let before = archive.stats().unwrap().bytes_on_disk;
        build(&archive, "big", 1_000_000);
        archive.flush().unwrap();
        let after = archive.stats().unwrap().bytes_on_disk;
        (after.saturating_sub(before)) as f64 / 1_000_000.0
    };
    let (small_lines, small_peak) = show_peak(dir.path(), "small");
    let (big_lines, big_peak) = show_peak(dir.path(), "big");
    // Every fact came out.
    assert_eq!(big_lines, 1_000_004, "facts of the big run");
    assert_eq!(small_lines, 200_004, "facts of the small run");
    let per_extra_fact = (big_peak.saturating_sub(small_peak) * 1024) as f64 / 800_000.0;
    eprintln!(
        "peak resident memory: 200k facts {small_peak} KiB, 1M facts {big_peak} KiB: \
         {per_extra_fact:.0} B per extra fact; stored {stored_per_fact:.0} B per fact"
    );
    let held_fact = std::mem::size_of::<reel::Fact>() as f64;
    assert!(
        per_extra_fact < stored_per_fact * 1.25 + 16.0,
        "the viewer's memory grew with the run: {per_extra_fact:.0} B per extra fact, \
         stored size {stored_per_fact:.0} B per fact (holding facts would add {held_fact} B+ each)"
    );
}

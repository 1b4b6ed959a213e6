//! `reel runs` over an archive of 100,000 runs answers from the indexes.
//!
//! The archive is built directly with `reel_archive::Archive::append` (tiny runs of
//! two facts: run.started and run.ended), then the facts of every run no
//! listing here returns are deleted through sled: a listing that read one
//! of them would fail (a run whose facts are gone is damage), so answering
//! right proves it reads only the indexes, and the records and facts of
//! the runs it returns (their facts for the ANOMALIES column, which counts
//! as `reel show` does). Timings are never asserted (see DESIGN.md,
//! Performance).

use std::path::Path;
use std::process::Command;

use reel::fact::{FactKind, Identity, NewFact, Producer, RunEnded, RunStarted, RunStatus};
use reel_archive::{Archive, ArchiveConfig};
use serde_json::Value;

const RUNS: u64 = 100_000;
/// Run `i` starts at `BASE + i` milliseconds.
const BASE: i64 = 1_800_000_000_000_000_000;
const MS: i64 = 1_000_000;

fn run_id(i: u64) -> String {
    format!("run-{i:06}")
}

fn tenant(i: u64) -> String {
    format!("t{}", i % 10)
}

/// Every 997th run failed; the others completed.
fn failed(i: u64) -> bool {
    i.is_multiple_of(997)
}

fn facts(i: u64) -> Vec<NewFact> {
    let at = BASE + i as i64 * MS;
    vec![
        NewFact {
            at,
            offset: 0,
            call: None,
            kind: FactKind::RunStarted(RunStarted {
                run_id: run_id(i),
                session_id: None,
                identity: Some(Identity {
                    tenant: Some(tenant(i)),
                    principal: None,
                    conversation: None,
                }),
                producer: Producer {
                    name: "scale-test".into(),
                    version: "0".into(),
                },
                labels: Default::default(),
                teardown_scopes: vec![],
            }),
        },
        NewFact {
            at: at + 500_000,
            offset: 500_000,
            call: None,
            kind: FactKind::RunEnded(RunEnded {
                status: if failed(i) {
                    RunStatus::Failed
                } else {
                    RunStatus::Completed
                },
            }),
        },
    ]
}

/// Builds the archive on two threads (the runs are independent).
fn build(dir: &Path) {
    let archive = Archive::open(dir, ArchiveConfig::default()).expect("archive opens");
    std::thread::scope(|s| {
        for part in 0..2u64 {
            let archive = archive.clone();
            s.spawn(move || {
                for i in (part..RUNS).step_by(2) {
                    archive.append(&run_id(i), facts(i)).expect("append");
                }
            });
        }
    });
    archive.flush().expect("flush");
}

/// Deletes, through sled, the facts of every run but `keep`.
fn delete_facts_but(dir: &Path, keep: &std::collections::HashSet<u64>) {
    let db = sled::open(dir).expect("sled opens the archive");
    let run_ids = db.open_tree("run_ids").expect("run_ids");
    let kept: std::collections::HashSet<Vec<u8>> = keep
        .iter()
        .filter_map(|&i| run_ids.get(run_id(i)).expect("read").map(|o| o.to_vec()))
        .collect();
    assert_eq!(kept.len(), keep.len(), "every kept run is stored");
    let events = db.open_tree("events").expect("events");
    let mut deleted = 0u64;
    for key in events.iter().keys() {
        let key = key.expect("read");
        if !kept.contains(&key[..8]) {
            events.remove(&key).expect("remove");
            deleted += 1;
        }
    }
    assert!(
        deleted as usize >= (RUNS as usize - keep.len()),
        "{deleted}"
    );
    db.flush().expect("flush");
}

fn runs(dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_reel"))
        .arg("--archive")
        .arg(dir)
        .args(["runs", "--json"])
        .args(args)
        .env_remove("REEL_ARCHIVE")
        .output()
        .expect("reel runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "reel runs {args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// (run id, state, facts) of each listed run.
fn listed(page: &Value) -> Vec<(String, String, u64)> {
    page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().expect("id").to_owned(),
                r["state"].as_str().expect("state").to_owned(),
                r["facts"].as_u64().expect("facts"),
            )
        })
        .collect()
}

fn expected(ids: impl IntoIterator<Item = u64>) -> Vec<(String, String, u64)> {
    ids.into_iter()
        .map(|i| {
            let state = if failed(i) { "failed" } else { "completed" };
            (run_id(i), state.to_owned(), 2)
        })
        .collect()
}

fn time_of(i: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos((BASE + i as i64 * MS) as u64);
    humantime::format_rfc3339_nanos(t).to_string()
}

/// The newest matching runs, from the end.
fn newest(n: usize, keep: impl Fn(u64) -> bool) -> Vec<u64> {
    (0..RUNS).rev().filter(|&i| keep(i)).take(n).collect()
}

#[test]
fn runs_lists_the_newest_of_100000_from_the_indexes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("archive");
    build(&dir);

    let cases: Vec<(Vec<String>, Vec<u64>, bool)> = vec![
        // The default page: the newest 50, and a cursor for more.
        (vec![], newest(50, |_| true), true),
        (
            vec![
                "--tenant".into(),
                "t3".into(),
                "--limit".into(),
                "20".into(),
            ],
            newest(20, |i| i % 10 == 3),
            true,
        ),
        (
            vec!["--status".into(), "failed".into()],
            newest(50, failed),
            true,
        ),
        (
            vec![
                "--status".into(),
                "failed".into(),
                "--limit".into(),
                "200".into(),
            ],
            newest(200, failed),
            false,
        ),
        (
            vec!["--since".into(), time_of(RUNS - 10)],
            newest(10, |_| true),
            false,
        ),
        (
            vec![
                "--until".into(),
                time_of(1_000),
                "--limit".into(),
                "5".into(),
            ],
            vec![999, 998, 997, 996, 995],
            true,
        ),
        (
            vec![
                "--tenant".into(),
                "t0".into(),
                "--status".into(),
                "failed".into(),
                "--since".into(),
                time_of(50_000),
            ],
            (50_000..RUNS)
                .rev()
                .filter(|&i| i % 10 == 0 && failed(i))
                .collect(),
            false,
        ),
    ];
    let second_page: Vec<u64> = (0..RUNS).rev().skip(50).take(50).collect();
    let keep: std::collections::HashSet<u64> = cases
        .iter()
        .flat_map(|(_, ids, _)| ids.iter().copied())
        .chain(second_page.iter().copied())
        .collect();
    delete_facts_but(&dir, &keep);
    for (args, ids, more) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let page = runs(&dir, &args);
        assert_eq!(listed(&page), expected(ids), "reel runs {args:?}");
        assert_eq!(!page["next"].is_null(), more, "a cursor for {args:?}");
    }

    // The cursor continues exactly after the first page.
    let first = runs(&dir, &[]);
    let cursor = first["next"].as_str().expect("a cursor").to_owned();
    let second = runs(&dir, &["--cursor", &cursor]);
    assert_eq!(listed(&second), expected(second_page));
}

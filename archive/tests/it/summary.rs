//! Run summaries (format 6): the one an ended run stores is the one its
//! facts give; it survives a reopen (journaled with the run's last block);
//! an overview merges stored summaries and summarizes runs without one
//! (a running run) from their facts; an import stores one; prune removes
//! it with the run.

use reel_archive::{Archive, ArchiveConfig, RunFilter};
use reel_core::fact::*;
use reel_core::run::RunState;
use reel_core::summary::SummaryBuilder;
use serde_json::json;

fn config() -> ArchiveConfig {
    ArchiveConfig {
        fingerprint_key: reel_archive::FingerprintKey::Key([7; 32]),
        ..ArchiveConfig::default()
    }
}

fn fact(at: i64, call: Option<&str>, kind: FactKind) -> NewFact {
    NewFact {
        at,
        offset: 0,
        call: call.map(Into::into),
        kind,
    }
}

fn started(id: &str, tenant: &str) -> FactKind {
    FactKind::RunStarted(RunStarted {
        run_id: id.into(),
        session_id: None,
        identity: Some(Identity {
            tenant: Some(tenant.into()),
            principal: None,
            conversation: None,
        }),
        producer: Producer {
            name: "test".into(),
            version: "1".into(),
        },
        labels: Default::default(),
        teardown_scopes: vec![],
    })
}

fn call(id: &str, tool: &str) -> FactKind {
    FactKind::CallStarted(CallStarted {
        call_id: id.into(),
        tool_name: tool.into(),
        tool_id: None,
        parent_call: None,
        iteration: 0,
        invocation_id: None,
        mode: CallMode::Async,
        protocol: None,
        platform: None,
        client_info: None,
        args: json!({}),
        wanted: None,
        attached: None,
        spec: None,
        dispatch_tools: None,
        outside_run: None,
    })
}

fn ended(ns: u64, error: bool) -> FactKind {
    FactKind::CallEnded(CallEnded {
        outcome: if error {
            CallOutcome::Error {
                error: "no".into(),
                result: None,
            }
        } else {
            CallOutcome::Ok { result: json!(1) }
        },
        duration_ns: ns,
        invocation_id: None,
    })
}

fn progress() -> FactKind {
    FactKind::Progress(Progress {
        payload: json!({"message": "step"}),
        count: 0,
        delivered: false,
    })
}

/// A run at `at` of `n` calls of `fetch` (every third an error, two
/// progress reports each) and one of `search`; ended unless `open`.
fn run(archive: &Archive, id: &str, at: i64, n: u64, open: bool) {
    let mut facts = vec![fact(at, None, started(id, "acme"))];
    for i in 0..n {
        let c = format!("f{i}");
        facts.push(fact(at + 1, Some(&c), call(&c, "fetch")));
        facts.push(fact(at + 2, Some(&c), progress()));
        facts.push(fact(at + 2, Some(&c), progress()));
        facts.push(fact(
            at + 3,
            Some(&c),
            ended((i + 1) * 1_000_000, i % 3 == 0),
        ));
    }
    // Appended in two batches: the summary spans blocks.
    archive.append(id, facts).unwrap();
    let mut rest = vec![
        fact(at + 4, Some("s"), call("s", "search")),
        fact(at + 5, Some("s"), ended(7_000, false)),
    ];
    if !open {
        rest.push(fact(
            at + 6,
            None,
            FactKind::RunEnded(RunEnded {
                status: RunStatus::Completed,
            }),
        ));
    }
    archive.append(id, rest).unwrap();
}

#[test]
fn an_ended_run_stores_the_summary_its_facts_give_and_keeps_it_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(dir.path(), config()).unwrap();
    run(&archive, "a", 1_000, 10, false);
    let stored = archive.run_summary("a").unwrap();
    let mut from_facts = SummaryBuilder::default();
    for f in archive.facts("a", ..).unwrap() {
        from_facts.observe(&f.unwrap());
    }
    assert_eq!(stored, from_facts.finish(&archive.run("a").unwrap()));
    let fetch = &stored.tools["fetch"];
    assert_eq!((fetch.calls, fetch.errors, fetch.progress), (10, 4, 20));
    assert_eq!(fetch.durations.count(), 10);
    assert_eq!(stored.state, RunState::Completed);
    archive.flush().unwrap();
    drop(archive);
    // Read back by a reader: stored (journaled, then checkpointed).
    let reader = Archive::open(
        dir.path(),
        ArchiveConfig {
            read_only: true,
            ..config()
        },
    )
    .unwrap();
    let overview = reader.overview(&RunFilter::default(), 4).unwrap();
    assert_eq!((overview.runs, overview.from_facts), (1, 0));
    assert_eq!(overview.tools["fetch"].total, *fetch);
}

#[test]
fn an_overview_merges_stored_summaries_and_reads_a_running_run_from_its_facts() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(dir.path(), config()).unwrap();
    run(&archive, "a", 1_000, 3, false);
    run(&archive, "b", 2_000, 6, false);
    run(&archive, "live", 3_000, 1, true);
    let all = archive.overview(&RunFilter::default(), 2).unwrap();
    assert_eq!((all.runs, all.from_facts), (3, 1));
    assert_eq!(all.by_state[&RunState::Running], 1);
    let fetch = &all.tools["fetch"].total;
    assert_eq!(
        (fetch.calls, fetch.errors, fetch.progress),
        (10, 1 + 2 + 1, 20)
    );
    // p50 of 1,2,3 ms, 1..6 ms and 1 ms: 2 ms, within a bucket.
    let p50 = fetch.durations.quantile(0.5).unwrap();
    assert!((1_900_000..=2_100_000).contains(&p50), "{p50}");
    assert_eq!(all.tools["search"].total.calls, 3);
    // Filtered like the table: a window, a status.
    let window = RunFilter {
        since: Some(1_500),
        until: Some(2_500),
        ..RunFilter::default()
    };
    let b = archive.overview(&window, 1).unwrap();
    assert_eq!((b.runs, b.tools["fetch"].total.calls), (1, 6));
    let done = RunFilter {
        status: Some(RunState::Completed),
        ..RunFilter::default()
    };
    assert_eq!(archive.overview(&done, 1).unwrap().runs, 2);
    // The runs per state from the status index alone are the overview's.
    for filter in [RunFilter::default(), window, done] {
        let full = archive.overview(&filter, 3).unwrap();
        let runs = archive.runs_over_time(&filter, 3).unwrap();
        assert_eq!(
            (runs.since, runs.until, &runs.by_state, &runs.run_buckets),
            (full.since, full.until, &full.by_state, &full.run_buckets),
            "{filter:?}"
        );
        assert!(runs.tools.is_empty());
    }
}

#[test]
fn an_import_stores_a_summary_and_prune_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(dir.path(), config()).unwrap();
    run(&archive, "a", 1_000, 2, false);
    let facts: Vec<Fact> = archive
        .facts("a", ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let other = tempfile::tempdir().unwrap();
    let into = Archive::open(other.path(), config()).unwrap();
    into.import_run(facts).unwrap();
    let o = into.overview(&RunFilter::default(), 1).unwrap();
    assert_eq!((o.runs, o.from_facts), (1, 0));
    assert_eq!(
        o.tools["fetch"].total,
        archive.run_summary("a").unwrap().tools["fetch"]
    );
    let filter = reel_archive::PruneFilter {
        started_before: i64::MAX,
        tenant: None,
        status: None,
    };
    into.prune(&filter, false, &mut |_, _| {}).unwrap();
    assert_eq!(into.overview(&RunFilter::default(), 1).unwrap().runs, 0);
}

//! `reel runs` with filters: `Archive::list_runs` over a large and a small
//! archive of the same make-up.

use std::hint::black_box;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use reel::fact::*;
use reel::{NewFact, RunState};
use reel_archive::journal::JournalConfig;
use reel_archive::RunFilter;
use reel_archive::{Archive, ArchiveConfig};
use serde_json::json;

/// Tenants the runs are spread over (round robin).
pub const TENANTS: usize = 5;
/// Run outcomes, spread round robin with a different period than tenants.
const STATUSES: [RunStatus; 3] = [
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
];
/// Tools the runs call.
const TOOLS: [&str; 4] = ["search", "deploy", "walk", "audit"];

/// The filter timed: one tenant, failed runs, the first page of 50 — with
/// these proportions both archives hold more than 50 matches once they have
/// 1,000 runs, so both queries return a full page.
pub fn filter() -> RunFilter {
    RunFilter {
        tenant: Some(tenant(2)),
        status: Some(RunState::Failed),
        limit: Some(50),
        ..RunFilter::default()
    }
}

fn tenant(i: usize) -> String {
    format!("tenant-{i:02}")
}

/// Creates an archive of `runs` runs in `dir`: each run has run.started
/// (with a tenant), one call (started and ended) and run.ended, appended as
/// one batch; runs start one second apart.
pub fn build(dir: &Path, runs: usize) -> io::Result<Archive> {
    build_with(dir, runs, 0)
}

/// [`build`], with `progress` progress reports in each run's call (between
/// its start and its end, in the same batch): the same runs, more facts.
pub fn build_with(dir: &Path, runs: usize, progress: usize) -> io::Result<Archive> {
    let archive = Archive::open(dir, ArchiveConfig::default()).map_err(io::Error::other)?;
    fill(&archive, runs, progress)?;
    Ok(archive)
}

/// Opens the archive in `dir` only to read, as `reel runs` opens it.
pub fn open_read_only(dir: &Path) -> io::Result<Archive> {
    let config = ArchiveConfig {
        read_only: true,
        ..ArchiveConfig::default()
    };
    Archive::open(dir, config).map_err(io::Error::other)
}

/// Appends [`build_with`]'s runs to `archive`, then flushes.
pub fn fill(archive: &Archive, runs: usize, progress: usize) -> io::Result<()> {
    let base = 1_700_000_000_000_000_000i64;
    for i in 0..runs {
        let run_id = format!("run-{i:07}");
        let at = base + i as i64 * 1_000_000_000;
        let fact = |offset: u64, call: Option<&str>, kind| NewFact {
            at: at + offset as i64,
            offset,
            call: call.map(str::to_owned),
            kind,
        };
        let tool = TOOLS[i % TOOLS.len()];
        let mut facts = vec![
            fact(
                0,
                None,
                FactKind::RunStarted(RunStarted {
                    run_id: run_id.clone(),
                    session_id: None,
                    identity: Some(Identity {
                        tenant: Some(tenant(i % TENANTS)),
                        principal: Some(format!("user-{}", i % 97)),
                        conversation: None,
                    }),
                    producer: Producer {
                        name: "reel-bench".into(),
                        version: "1".into(),
                    },
                    labels: Default::default(),
                    teardown_scopes: vec![TeardownScope::Call, TeardownScope::Run],
                }),
            ),
            fact(
                1_000,
                Some("c1"),
                FactKind::CallStarted(CallStarted {
                    call_id: "c1".into(),
                    tool_name: tool.into(),
                    tool_id: None,
                    parent_call: None,
                    iteration: 0,
                    invocation_id: None,
                    mode: CallMode::Async,
                    protocol: None,
                    platform: None,
                    client_info: None,
                    args: json!({ "n": i }),
                    wanted: None,
                    attached: Some(Attached::default()),
                    spec: None,
                    dispatch_tools: None,
                    outside_run: None,
                }),
            ),
            fact(
                2_000,
                Some("c1"),
                FactKind::CallEnded(CallEnded {
                    outcome: CallOutcome::Ok { result: json!(i) },
                    duration_ns: 1_000,
                    invocation_id: None,
                }),
            ),
            fact(
                3_000,
                None,
                FactKind::RunEnded(RunEnded {
                    status: STATUSES[(i / 7) % STATUSES.len()],
                }),
            ),
        ];
        let reports = (0..progress).map(|k| {
            fact(
                1_001 + k as u64,
                Some("c1"),
                FactKind::Progress(Progress {
                    payload: json!({ "message": format!("step {k} of {progress}"), "done": k }),
                    count: 0,
                    delivered: false,
                }),
            )
        });
        facts.splice(2..2, reports);
        archive.append(&run_id, facts).map_err(io::Error::other)?;
    }
    archive.flush().map_err(io::Error::other)?;
    Ok(())
}

/// The `open-after-crash` row's writer (`reel-bench --crash-writer DIR
/// RUNS PROGRESS`, a child process): fills a new archive in `dir` with
/// [`build_with`]'s runs while its journal is never checkpointed
/// ([`JournalConfig::checkpoint_when_half_full`], with a bound of 16 GiB),
/// flushes (every run acknowledged: the journal synced), prints the bytes
/// journaled past the last checkpoint and the checkpoints made (`BYTES
/// CHECKPOINTS`), and waits to be killed.
pub fn crash_writer_main(dir: &Path, runs: usize, progress: usize) -> io::Result<()> {
    use std::io::Write as _;
    let config = ArchiveConfig {
        journal: JournalConfig {
            unapplied_bytes: 16 << 30,
            checkpoint_when_half_full: true,
            ..JournalConfig::default()
        },
        ..ArchiveConfig::default()
    };
    let archive = Archive::open(dir, config).map_err(io::Error::other)?;
    fill(&archive, runs, progress)?;
    let figures = archive
        .journal_figures()
        .ok_or_else(|| io::Error::other("a writer's archive has a journal"))?;
    let mut out = io::stdout().lock();
    writeln!(out, "{} {}", figures.unapplied_bytes, figures.checkpoints)?;
    out.flush()?;
    loop {
        std::thread::park();
    }
}

/// Times `queries` identical `list_runs(filter())` calls; returns the mean
/// time per query and the runs the last one returned.
pub fn time_queries(archive: &Archive, queries: usize) -> io::Result<(Duration, usize)> {
    let filter = filter();
    let mut returned = 0;
    let started = Instant::now();
    for _ in 0..queries {
        let page = archive.list_runs(&filter).map_err(io::Error::other)?;
        returned = page.runs.len();
        black_box(page);
    }
    Ok((started.elapsed() / queries.max(1) as u32, returned))
}

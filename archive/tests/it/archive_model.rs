//! Model-based test of the archive.
//!
//! The reference model is an in-memory list of runs (in creation order), each
//! with its facts, state, identity, tools and start time. Random sequences of
//! transitions (start, append, end, append to a closed or unknown run, start
//! or import an existing id again, import a new run, reopen, read a seq
//! range, list with a filter and page through it) run against both the model
//! and a real [`Archive`] in a temporary directory; after every step each
//! run's facts (gapless from 0) and record must agree with the model, and at
//! the end `verify` finds nothing wrong.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Bound, RangeBounds};

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use serde_json::json;

use reel::fact::{
    CallEnded, CallMode, CallOutcome, CallStarted, Fact, FactKind, Identity, Level, Log, NewFact,
    Producer, Progress, RunEnded, RunStarted, RunStatus,
};
use reel::run::{RunRecord, RunState};
use reel_archive::{Archive, ArchiveConfig, ArchiveError, RunFilter};

const TENANTS: [&str; 3] = ["", "acme", "acme2"];
const TOOLS: [&str; 3] = ["fetch", "fetch2", "search"];
/// Start times: few enough that ties happen, signed so that the sign-bit
/// flip of the index keys is exercised.
const TIMES: [i64; 5] = [-2_000, -1_000, 0, 1_000, 2_000];

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct ModelRun {
    id: String,
    identity: Option<Identity>,
    started_at: i64,
    ended_at: Option<i64>,
    state: RunState,
    facts: Vec<Fact>,
    calls: u64,
    tools: BTreeSet<String>,
}

impl ModelRun {
    fn tenant(&self) -> Option<&str> {
        self.identity.as_ref()?.tenant.as_deref()
    }

    fn push(&mut self, fact: NewFact) {
        let fact = fact.with_seq(self.facts.len() as u64);
        match &fact.kind {
            FactKind::CallStarted(c) => {
                self.calls += 1;
                self.tools.insert(c.tool_name.clone());
            }
            FactKind::RunEnded(e) => {
                self.state = e.status.into();
                self.ended_at = Some(fact.at);
            }
            _ => {}
        }
        self.facts.push(fact);
    }
}

/// Runs in creation order.
#[derive(Clone, Debug, Default)]
struct Model {
    runs: Vec<ModelRun>,
}

impl Model {
    fn find(&self, id: &str) -> Option<&ModelRun> {
        self.runs.iter().find(|r| r.id == id)
    }

    /// What `list_runs` must answer, ignoring the limit: newest start first,
    /// ties broken by creation order, newest first.
    fn list(&self, f: &RunFilter) -> Vec<String> {
        let mut hits: Vec<(i64, usize, &ModelRun)> = self
            .runs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                f.tenant.as_deref().is_none_or(|t| r.tenant() == Some(t))
                    && f.tool.as_ref().is_none_or(|t| r.tools.contains(t))
                    && f.status.is_none_or(|s| r.state == s)
                    && f.since.is_none_or(|s| r.started_at >= s)
                    && f.until.is_none_or(|u| r.started_at < u)
            })
            .map(|(i, r)| (r.started_at, i, r))
            .collect();
        hits.sort_by_key(|&(started, created, _)| std::cmp::Reverse((started, created)));
        hits.into_iter().map(|(_, _, r)| r.id.clone()).collect()
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// Append `run.started` (plus a few facts) for a new id.
    Start {
        id: String,
        identity: Option<Identity>,
        at: i64,
        extra: Vec<NewFact>,
    },
    /// Append a batch to the run at this index (rejected once it is closed).
    Append { run: usize, facts: Vec<NewFact> },
    /// Append a batch ending with `run.ended`.
    End {
        run: usize,
        facts: Vec<NewFact>,
        status: RunStatus,
    },
    /// Append `run.started` again for an existing run id.
    StartAgain { run: usize },
    /// Import a whole run under a new id; one that never ended becomes
    /// incomplete.
    ImportNew {
        id: String,
        identity: Option<Identity>,
        at: i64,
        facts: Vec<NewFact>,
        end: Option<RunStatus>,
    },
    /// Import a run under the id of an existing one.
    ImportExisting { run: usize },
    /// Append to a run id that was never started, without `run.started`.
    AppendUnknown { facts: Vec<NewFact> },
    /// Drop the archive and open it again.
    Reopen,
    /// Read a seq range of a run.
    Read {
        run: usize,
        start: Bound<u64>,
        end: Bound<u64>,
    },
    /// List with a filter; page through with the cursor.
    List { filter: RunFilter },
}

fn run_started(id: &str, identity: Option<Identity>, at: i64) -> NewFact {
    NewFact {
        at,
        offset: 0,
        call: None,
        kind: FactKind::RunStarted(RunStarted {
            run_id: id.into(),
            session_id: None,
            identity,
            producer: Producer {
                name: "archive-model".into(),
                version: "0".into(),
            },
            labels: BTreeMap::new(),
            teardown_scopes: Vec::new(),
        }),
    }
}

fn kind_strategy() -> BoxedStrategy<FactKind> {
    prop_oneof![
        // Counts from 1: a count of 0 asks the archive's sequencer to
        // number the report (see `Archive::append`), which the sequencer's
        // own tests cover; the model holds the archive to storing what it
        // is given.
        3 => (1u64..1000).prop_map(|n| FactKind::Progress(Progress {
            payload: json!({"message": format!("step {n}"), "n": n}),
            count: n,
        delivered: false,
        })),
        2 => (0usize..Level::ALL.len(), any::<bool>(), proptest::option::of(0u8..3)).prop_map(
            |(level, delivered, logger)| FactKind::Log(Log {
                level: Level::ALL[level],
                logger: logger.map(|l| format!("logger-{l}")),
                subflow: None,
                data: json!(["a", level, {"nested": null}]),
                delivered, in_flight: Vec::new(),
            })
        ),
        2 => (0usize..TOOLS.len(), 0u32..50).prop_map(|(tool, n)| {
            FactKind::CallStarted(CallStarted {
                call_id: format!("call-{n}"),
                tool_name: TOOLS[tool].into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: None,
                mode: CallMode::Sync,
                protocol: None,
                platform: None,
                client_info: None,
                args: json!({"q": n, "s": ""}),
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            })
        }),
        2 => (0u8..3, 0u64..1_000_000).prop_map(|(o, d)| FactKind::CallEnded(CallEnded {
            outcome: match o {
                0 => CallOutcome::Ok { result: json!({"hits": d}) },
                1 => CallOutcome::Error { error: "boom".into(), result: None },
                _ => CallOutcome::Aborted { reason: None },
            },
            duration_ns: d,
            invocation_id: None,
        })),
        1 => (0i64..100).prop_map(|n| FactKind::Unknown {
            kind: "future.thing".into(),
            data: json!({"n": -n, "s": "x"}),
        }),
    ]
    .boxed()
}

fn fact_strategy() -> BoxedStrategy<NewFact> {
    (kind_strategy(), 0i64..5_000, proptest::option::of(0u8..3))
        .prop_map(|(kind, at, call)| NewFact {
            at,
            offset: at as u64,
            call: call.map(|c| format!("call-{c}")),
            kind,
        })
        .boxed()
}

fn identity_strategy() -> BoxedStrategy<Option<Identity>> {
    prop_oneof![
        Just(None),
        Just(Some(Identity {
            tenant: None,
            principal: Some("someone".into()),
            conversation: None,
        })),
        (0usize..TENANTS.len()).prop_map(|t| Some(Identity {
            tenant: Some(TENANTS[t].into()),
            principal: None,
            conversation: None,
        })),
    ]
    .boxed()
}

/// Whether no call id of `batch` is started twice, in it or after `before`.
fn fresh_calls(before: &[Fact], batch: &[NewFact]) -> bool {
    let mut seen = BTreeSet::new();
    let mut kinds = before
        .iter()
        .map(|f| &f.kind)
        .chain(batch.iter().map(|f| &f.kind));
    kinds.all(|kind| match kind {
        FactKind::CallStarted(c) => seen.insert(c.call_id.clone()),
        _ => true,
    })
}

fn status_strategy() -> BoxedStrategy<RunStatus> {
    prop_oneof![
        Just(RunStatus::Completed),
        Just(RunStatus::Failed),
        Just(RunStatus::Cancelled)
    ]
    .boxed()
}

fn bound_strategy() -> BoxedStrategy<Bound<u64>> {
    prop_oneof![
        Just(Bound::Unbounded),
        (0u64..30).prop_map(Bound::Included),
        (0u64..30).prop_map(Bound::Excluded),
    ]
    .boxed()
}

fn filter_strategy() -> BoxedStrategy<RunFilter> {
    let time = prop_oneof![
        (0usize..TIMES.len()).prop_map(|i| TIMES[i]),
        (0usize..TIMES.len()).prop_map(|i| TIMES[i] + 1),
    ];
    (
        proptest::option::weighted(0.3, 0usize..TENANTS.len()),
        proptest::option::weighted(0.3, 0usize..TOOLS.len()),
        proptest::option::weighted(0.3, 0usize..RunState::ALL.len()),
        proptest::option::weighted(0.3, time.clone()),
        proptest::option::weighted(0.3, time),
        proptest::option::of(0usize..5),
    )
        .prop_map(|(tenant, tool, status, since, until, limit)| RunFilter {
            tenant: tenant.map(|t| TENANTS[t].into()),
            tool: tool.map(|t| TOOLS[t].into()),
            status: status.map(|s| RunState::ALL[s]),
            since,
            until,
            limit,
            cursor: None,
        })
        .boxed()
}

struct ArchiveModel;

impl ReferenceStateMachine for ArchiveModel {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Step> {
        let n = state.runs.len();
        let start = (
            identity_strategy(),
            0usize..TIMES.len(),
            proptest::collection::vec(fact_strategy(), 0..4),
        )
            .prop_map(move |(identity, t, extra)| Step::Start {
                id: format!("run-{n}"),
                identity,
                at: TIMES[t],
                extra,
            });
        let import = (
            identity_strategy(),
            0usize..TIMES.len(),
            proptest::collection::vec(fact_strategy(), 0..10),
            proptest::option::of(status_strategy()),
        )
            .prop_map(move |(identity, t, facts, end)| Step::ImportNew {
                id: format!("run-{n}"),
                identity,
                at: TIMES[t],
                facts,
                end,
            });
        let list = filter_strategy().prop_map(|filter| Step::List { filter });
        let unknown = proptest::collection::vec(fact_strategy(), 1..3)
            .prop_map(|facts| Step::AppendUnknown { facts });
        if n == 0 {
            return prop_oneof![
                4 => start,
                1 => import,
                1 => Just(Step::Reopen),
                1 => list,
                1 => unknown,
            ]
            .boxed();
        }
        prop_oneof![
            3 => start,
            6 => (0..n, proptest::collection::vec(fact_strategy(), 1..20))
                .prop_map(|(run, facts)| Step::Append { run, facts }),
            2 => (0..n, proptest::collection::vec(fact_strategy(), 0..4), status_strategy())
                .prop_map(|(run, facts, status)| Step::End { run, facts, status }),
            1 => (0..n).prop_map(|run| Step::StartAgain { run }),
            1 => import,
            1 => (0..n).prop_map(|run| Step::ImportExisting { run }),
            1 => unknown,
            1 => Just(Step::Reopen),
            2 => (0..n, bound_strategy(), bound_strategy())
                .prop_map(|(run, start, end)| Step::Read { run, start, end }),
            3 => list,
        ]
        .boxed()
    }

    fn preconditions(state: &Model, step: &Step) -> bool {
        // A call id is started once in a run (rule 5 of the stream rules,
        // whose refusal `call_ids.rs` shows): the model's batches keep it.
        match step {
            Step::Start { id, extra, .. } => state.find(id).is_none() && fresh_calls(&[], extra),
            Step::ImportNew { id, facts, .. } => {
                state.find(id).is_none() && fresh_calls(&[], facts)
            }
            Step::Append { run, facts } | Step::End { run, facts, .. } => {
                *run < state.runs.len() && fresh_calls(&state.runs[*run].facts, facts)
            }
            Step::StartAgain { run } | Step::ImportExisting { run } | Step::Read { run, .. } => {
                *run < state.runs.len()
            }
            Step::AppendUnknown { .. } | Step::Reopen | Step::List { .. } => true,
        }
    }

    fn apply(mut state: Model, step: &Step) -> Model {
        match step {
            Step::Start {
                id,
                identity,
                at,
                extra,
            } => {
                let mut run = ModelRun {
                    id: id.clone(),
                    identity: identity.clone(),
                    started_at: *at,
                    ended_at: None,
                    state: RunState::Running,
                    facts: Vec::new(),
                    calls: 0,
                    tools: BTreeSet::new(),
                };
                run.push(run_started(id, identity.clone(), *at));
                for f in extra {
                    run.push(f.clone());
                }
                state.runs.push(run);
            }
            Step::Append { run, facts } => {
                let run = &mut state.runs[*run];
                if !run.state.is_closed() {
                    for f in facts {
                        run.push(f.clone());
                    }
                }
            }
            Step::End { run, facts, status } => {
                let run = &mut state.runs[*run];
                if !run.state.is_closed() {
                    for f in end_batch(facts, *status) {
                        run.push(f);
                    }
                }
            }
            Step::ImportNew {
                id,
                identity,
                at,
                facts,
                end,
            } => {
                let mut run = ModelRun {
                    id: id.clone(),
                    identity: identity.clone(),
                    started_at: *at,
                    ended_at: None,
                    state: RunState::Running,
                    facts: Vec::new(),
                    calls: 0,
                    tools: BTreeSet::new(),
                };
                for f in import_batch(id, identity, *at, facts, *end) {
                    run.push(f);
                }
                if run.state == RunState::Running {
                    run.state = RunState::Incomplete;
                }
                state.runs.push(run);
            }
            Step::Reopen => {
                for run in &mut state.runs {
                    if run.state == RunState::Running {
                        run.state = RunState::Incomplete;
                    }
                }
            }
            Step::StartAgain { .. }
            | Step::ImportExisting { .. }
            | Step::AppendUnknown { .. }
            | Step::Read { .. }
            | Step::List { .. } => {}
        }
        state
    }
}

fn import_batch(
    id: &str,
    identity: &Option<Identity>,
    at: i64,
    facts: &[NewFact],
    end: Option<RunStatus>,
) -> Vec<NewFact> {
    let mut batch = vec![run_started(id, identity.clone(), at)];
    match end {
        Some(status) => batch.extend(end_batch(facts, status)),
        None => batch.extend(facts.iter().cloned()),
    }
    batch
}

fn end_batch(facts: &[NewFact], status: RunStatus) -> Vec<NewFact> {
    let mut batch = facts.to_vec();
    batch.push(NewFact {
        at: 9_000,
        offset: 9_000,
        call: None,
        kind: FactKind::RunEnded(RunEnded { status }),
    });
    batch
}

// ---------------------------------------------------------------------------
// The system under test
// ---------------------------------------------------------------------------

struct Sut {
    // Declared before `dir` so the archive closes before the directory goes.
    archive: Option<Archive>,
    dir: tempfile::TempDir,
    /// Each run's state before the step being applied (the model handed to
    /// `apply` is the state after it).
    before: HashMap<String, RunState>,
}

impl Sut {
    fn archive(&self) -> &Archive {
        self.archive.as_ref().expect("archive is open")
    }
}

fn open(dir: &std::path::Path) -> Archive {
    Archive::open(dir, ArchiveConfig::default()).expect("archive opens")
}

fn expect_closed(result: Result<std::ops::Range<u64>, ArchiveError>, run: &ModelRun) {
    match result {
        Err(ArchiveError::RunClosed { run_id, state }) => {
            assert_eq!(run_id, run.id);
            assert_eq!(state, run.state, "RunClosed names the run's state");
        }
        other => panic!(
            "append to {} ({}) should be rejected as closed, got {other:?}",
            run.id, run.state
        ),
    }
}

fn check_record(record: &RunRecord, run: &ModelRun) {
    assert_eq!(record.run_id, run.id);
    assert_eq!(record.identity, run.identity, "{}: identity", run.id);
    assert_eq!(record.state, run.state, "{}: state", run.id);
    assert_eq!(record.started_at, run.started_at, "{}: started_at", run.id);
    assert_eq!(record.ended_at, run.ended_at, "{}: ended_at", run.id);
    assert_eq!(record.facts, run.facts.len() as u64, "{}: facts", run.id);
    assert_eq!(record.calls, run.calls, "{}: calls", run.id);
    assert_eq!(record.tools, run.tools, "{}: tools", run.id);
    assert_eq!(record.session_id, None);
    assert!(record.labels.is_empty());
}

fn check_list(archive: &Archive, model: &Model, filter: &RunFilter) {
    let all = model.list(filter);
    let limit = match filter.limit {
        None | Some(0) => 100,
        Some(n) => n,
    };
    // One page.
    let page = archive.list_runs(filter).expect("list_runs");
    let ids: Vec<String> = page.runs.iter().map(|r| r.run_id.clone()).collect();
    let want: Vec<String> = all.iter().take(limit).cloned().collect();
    assert_eq!(ids, want, "first page of {filter:?}");
    assert_eq!(
        page.next.is_some(),
        all.len() > limit,
        "next cursor of {filter:?}"
    );
    for r in &page.runs {
        check_record(r, model.find(&r.run_id).expect("listed run is known"));
    }
    // Every page, following the cursor.
    let mut pages = 0;
    let mut seen = Vec::new();
    let mut f = filter.clone();
    loop {
        let page = archive.list_runs(&f).expect("list_runs page");
        pages += 1;
        assert!(pages <= all.len() + 1, "paging {filter:?} does not end");
        assert!(page.runs.len() <= limit);
        if page.next.is_some() {
            assert_eq!(page.runs.len(), limit, "a page before the last is full");
        }
        seen.extend(page.runs.into_iter().map(|r| r.run_id));
        match page.next {
            Some(c) => f.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, all, "pages of {filter:?}");
}

impl StateMachineTest for ArchiveModel {
    type SystemUnderTest = Sut;
    type Reference = ArchiveModel;

    fn init_test(_: &Model) -> Sut {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = Some(open(dir.path()));
        Sut {
            archive,
            dir,
            before: HashMap::new(),
        }
    }

    fn apply(mut sut: Sut, model: &Model, step: Step) -> Sut {
        // `model` is the state after `step`.
        let archive = sut.archive();
        match step {
            Step::Start {
                id,
                identity,
                at,
                extra,
            } => {
                let mut batch = vec![run_started(&id, identity, at)];
                batch.extend(extra);
                let n = batch.len() as u64;
                assert_eq!(archive.append(&id, batch).expect("start"), 0..n);
            }
            Step::Append { run, facts } => {
                let m = &model.runs[run];
                let n = facts.len();
                let result = archive.append(&m.id, facts);
                check_append(result, m, n, sut.before[&m.id]);
            }
            Step::End { run, facts, status } => {
                let m = &model.runs[run];
                let batch = end_batch(&facts, status);
                let n = batch.len();
                let result = archive.append(&m.id, batch);
                check_append(result, m, n, sut.before[&m.id]);
            }
            Step::StartAgain { run } => {
                let m = &model.runs[run];
                let result = archive.append(&m.id, vec![run_started(&m.id, None, 0)]);
                if m.state.is_closed() {
                    expect_closed(result, m);
                } else {
                    match result {
                        Err(ArchiveError::RunExists { run_id }) => assert_eq!(run_id, m.id),
                        other => panic!(
                            "a second run.started for running {} should be rejected, got {other:?}",
                            m.id
                        ),
                    }
                }
            }
            Step::ImportNew {
                id,
                identity,
                at,
                facts,
                end,
            } => {
                let facts = import_batch(&id, &identity, at, &facts, end)
                    .into_iter()
                    .enumerate()
                    .map(|(i, f)| f.with_seq(i as u64));
                let record = archive.import_run(facts).expect("import");
                check_record(&record, model.find(&id).expect("imported run"));
            }
            Step::ImportExisting { run } => {
                let m = &model.runs[run];
                let copy = m.facts.clone();
                match archive.import_run(copy) {
                    Err(ArchiveError::RunExists { run_id }) => assert_eq!(run_id, m.id),
                    other => panic!("importing {} again should be refused, got {other:?}", m.id),
                }
            }
            Step::AppendUnknown { facts } => {
                match archive.append("never-started", facts) {
                    Err(ArchiveError::InvalidFacts { run_id, .. }) => {
                        assert_eq!(run_id, "never-started")
                    }
                    other => panic!("append without run.started should fail, got {other:?}"),
                }
                assert!(matches!(
                    archive.run("never-started"),
                    Err(ArchiveError::UnknownRun { .. })
                ));
            }
            Step::Reopen => {
                sut.archive = None;
                sut.archive = Some(open(sut.dir.path()));
                let report = sut.archive().verify().expect("verify");
                assert!(report.is_ok(), "verify after reopen: {:?}", report.problems);
                assert_eq!(report.runs, model.runs.len() as u64);
                let facts: usize = model.runs.iter().map(|r| r.facts.len()).sum();
                assert_eq!(report.facts, facts as u64);
            }
            Step::Read { run, start, end } => {
                let m = &model.runs[run];
                let got: Vec<Fact> = archive
                    .facts(&m.id, (start, end))
                    .expect("facts")
                    .collect::<Result<_, _>>()
                    .expect("every fact reads");
                let want: Vec<Fact> = m
                    .facts
                    .iter()
                    .filter(|f| (start, end).contains(&f.seq))
                    .cloned()
                    .collect();
                assert_eq!(got, want, "{} facts in {:?}", m.id, (start, end));
            }
            Step::List { filter } => check_list(archive, model, &filter),
        }
        sut.before = model.runs.iter().map(|r| (r.id.clone(), r.state)).collect();
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        let archive = sut.archive();
        for m in &model.runs {
            let facts: Vec<Fact> = archive
                .facts(&m.id, ..)
                .expect("facts")
                .collect::<Result<_, _>>()
                .expect("every fact reads");
            for (i, f) in facts.iter().enumerate() {
                assert_eq!(f.seq, i as u64, "{}: seqs are gapless from 0", m.id);
            }
            assert_eq!(facts, m.facts, "{}: facts", m.id);
            check_record(&archive.run(&m.id).expect("run"), m);
        }
        assert!(matches!(
            archive.run("no-such-run"),
            Err(ArchiveError::UnknownRun { .. })
        ));
        assert!(matches!(
            archive.facts("no-such-run", ..),
            Err(ArchiveError::UnknownRun { .. })
        ));
        // run_ids: every run, by start time then creation.
        let ids: Vec<String> = archive
            .run_ids()
            .collect::<Result<_, _>>()
            .expect("run_ids");
        let mut want: Vec<(i64, usize, String)> = model
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.started_at, i, r.id.clone()))
            .collect();
        want.sort();
        let want: Vec<String> = want.into_iter().map(|(_, _, id)| id).collect();
        assert_eq!(ids, want, "run_ids");
        let stats = archive.stats().expect("stats");
        assert_eq!(stats.runs, model.runs.len() as u64);
        let facts: usize = model.runs.iter().map(|r| r.facts.len()).sum();
        assert_eq!(stats.facts, facts as u64);
    }

    fn teardown(sut: Sut, model: Model) {
        let report = sut.archive().verify().expect("verify");
        assert!(report.is_ok(), "verify: {:?}", report.problems);
        assert_eq!(report.runs, model.runs.len() as u64);
        let facts: usize = model.runs.iter().map(|r| r.facts.len()).sum();
        assert_eq!(report.facts, facts as u64);
    }
}

/// Checks the answer to appending `n` facts to `m` (the model after the step),
/// which stood in state `before` until then.
fn check_append(
    result: Result<std::ops::Range<u64>, ArchiveError>,
    m: &ModelRun,
    n: usize,
    before: RunState,
) {
    if before.is_closed() {
        expect_closed(result, m);
    } else {
        let end = m.facts.len() as u64;
        assert_eq!(result.expect("append"), end - n as u64..end, "{}", m.id);
    }
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: 64,
        max_shrink_iters: 2_000,
        failure_persistence: None,
        .. Config::default()
    })]

    #[test]
    fn archive_agrees_with_model(sequential 1..30 => ArchiveModel);
}

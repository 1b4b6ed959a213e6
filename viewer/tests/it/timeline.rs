//! `Timeline` from hand-built fact lists: anomalies, ledgers, the call tree
//! and durations. Each anomaly case is one row fed to [`check`]: the steps
//! of a run and the anomaly lines an operator must read.

use reel_core::fact::*;
use reel_core::gap::Gap;
use reel_core::{Fact, RunRecord};
use reel_viewer::render::sink::RunSink;
use reel_viewer::render::text::{Color, TextRenderer, TextWriter};
use reel_viewer::timeline::{Anomaly, Timeline, TimelineBuilder};
use serde_json::json;

/// One step of a hand-built run: a fact (its call and kind), or a hole in
/// the seq numbers.
enum Step {
    Fact(Option<String>, Box<FactKind>),
    Skip(u64),
}

/// Numbers the steps: seqs from 0, one per fact (a `Skip` leaves seqs
/// out), offsets 1 µs per seq, wall clock from a fixed start.
fn number(steps: Vec<Step>) -> Vec<Fact> {
    let mut seq = 0;
    let mut out = Vec::new();
    for step in steps {
        match step {
            Step::Skip(n) => seq += n,
            Step::Fact(call, kind) => {
                out.push(Fact {
                    seq,
                    at: 1_800_000_000_000_000_000 + seq as i64 * 1_000,
                    offset: seq * 1_000,
                    call,
                    kind: *kind,
                });
                seq += 1;
            }
        }
    }
    out
}

fn build(steps: Vec<Step>) -> Timeline {
    Timeline::build(&number(steps))
}

/// The anomaly lines of the run the steps make, in the order found.
fn check(name: &str, steps: Vec<Step>, expected: &[&str]) {
    let t = build(steps);
    let got: Vec<String> = t.anomalies.iter().map(Anomaly::describe).collect();
    assert_eq!(got, expected, "case {name:?}");
}

fn run_fact(kind: FactKind) -> Step {
    Step::Fact(None, Box::new(kind))
}

fn in_call(call: &str, kind: FactKind) -> Step {
    Step::Fact(Some(call.into()), Box::new(kind))
}

fn started() -> Step {
    run_fact(FactKind::RunStarted(RunStarted {
        run_id: "r1".into(),
        session_id: None,
        identity: None,
        producer: Producer {
            name: "timeline-test".into(),
            version: "0".into(),
        },
        labels: Default::default(),
        teardown_scopes: vec![TeardownScope::Call, TeardownScope::Run],
    }))
}

fn child(call: &str, tool: &str, parent: Option<&str>) -> Step {
    in_call(
        call,
        FactKind::CallStarted(CallStarted {
            call_id: call.into(),
            tool_name: tool.into(),
            tool_id: None,
            parent_call: parent.map(Into::into),
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
        }),
    )
}

fn call(call: &str, tool: &str) -> Step {
    child(call, tool, None)
}

fn progress(call: &str, message: &str, count: u64) -> Step {
    in_call(
        call,
        FactKind::Progress(Progress {
            payload: json!({ "message": message }),
            count,
            delivered: false,
        }),
    )
}

fn ended(call: &str, duration_ns: u64) -> Step {
    in_call(
        call,
        FactKind::CallEnded(CallEnded {
            outcome: CallOutcome::Ok { result: json!(1) },
            duration_ns,
            invocation_id: None,
        }),
    )
}

fn failed(call: &str, error: &str, duration_ns: u64) -> Step {
    in_call(
        call,
        FactKind::CallEnded(CallEnded {
            outcome: CallOutcome::Error {
                error: error.into(),
                result: None,
            },
            duration_ns,
            invocation_id: None,
        }),
    )
}

fn credential_failed(call: &str, need: &str) -> Step {
    in_call(
        call,
        FactKind::CredentialFailed(CredentialFailed {
            need: need.into(),
            mode: CredentialMode::Declared,
            reason: "token expired".into(),
        }),
    )
}

fn credential_resolved(call: &str, need: &str) -> Step {
    in_call(
        call,
        FactKind::CredentialResolved(CredentialResolved {
            need: need.into(),
            mode: CredentialMode::Pulled,
            kind: None,
            fingerprint: Fingerprint("hmac-sha256:00".into()),
            expires_at: None,
        }),
    )
}

fn registered(call: &str, scope: TeardownScope, key: &str, first: bool) -> Step {
    in_call(
        call,
        FactKind::TeardownRegistered(TeardownRegistered {
            scope,
            key_hash: key.into(),
            first,
            registrations: 0,
            registered_at: 0,
        }),
    )
}

fn ran(scope: TeardownScope, key: &str, outcome: TeardownOutcome) -> Step {
    run_fact(FactKind::TeardownRan(TeardownRan {
        scope,
        key_hash: key.into(),
        outcome,
        duration_ns: 5_000,
        registrations: 0,
        last_registered_at: 0,
    }))
}

fn cancel(call: &str) -> Step {
    in_call(
        call,
        FactKind::CancelRequested(CancelRequested {
            reason: Some("stop".into()),
        }),
    )
}

fn run_ended(status: RunStatus) -> Step {
    run_fact(FactKind::RunEnded(RunEnded { status }))
}

fn log(call: &str) -> Step {
    in_call(
        call,
        FactKind::Log(Log {
            level: Level::Info,
            logger: None,
            subflow: None,
            data: json!("hello"),
            delivered: true,
            in_flight: Vec::new(),
        }),
    )
}

use TeardownScope::{Call as CallScope, Run as RunScope};

#[test]
fn anomalies() {
    let done = || run_ended(RunStatus::Completed);
    let cases: Vec<(&str, Vec<Step>, &[&str])> = vec![
        (
            "a clean run",
            vec![
                started(),
                call("c1", "walk"),
                progress("c1", "Hop 1", 1),
                ended("c1", 9),
                done(),
            ],
            &[],
        ),
        ("an empty run that ended", vec![started(), done()], &[]),
        (
            "call never ended",
            vec![
                started(),
                call("c1", "walk"),
                progress("c1", "Hop 1", 1),
                done(),
            ],
            &["call c1 (started at #1) never ended"],
        ),
        (
            "two calls never ended, in start order",
            vec![
                started(),
                call("c1", "a"),
                call("c2", "b"),
                ended("c1", 1),
                call("c3", "c"),
                done(),
            ],
            &[
                "call c2 (started at #2) never ended",
                "call c3 (started at #4) never ended",
            ],
        ),
        (
            "progress after end",
            vec![
                started(),
                call("c1", "walk"),
                progress("c1", "Hop 1", 1),
                ended("c1", 9),
                progress("c1", "Hop 2", 2),
                done(),
            ],
            &["call c1 reported progress after it ended (#4)"],
        ),
        (
            "teardown registered, never ran",
            vec![
                started(),
                call("c1", "deploy"),
                registered("c1", RunScope, "sha256:k1", true),
                ended("c1", 9),
                done(),
            ],
            &["cleanup sha256:k1 (run scope, registered at #2) never ran"],
        ),
        (
            "teardown registered and ran: no anomaly",
            vec![
                started(),
                call("c1", "deploy"),
                registered("c1", RunScope, "sha256:k1", true),
                ended("c1", 9),
                ran(RunScope, "sha256:k1", TeardownOutcome::Ok),
                done(),
            ],
            &[],
        ),
        (
            "teardown registered twice, ran once: no anomaly",
            vec![
                started(),
                call("c1", "deploy"),
                registered("c1", RunScope, "sha256:k1", true),
                registered("c1", RunScope, "sha256:k1", false),
                ended("c1", 9),
                ran(RunScope, "sha256:k1", TeardownOutcome::Ok),
                done(),
            ],
            &[],
        ),
        (
            "same key, another scope: a separate cleanup",
            vec![
                started(),
                call("c1", "deploy"),
                registered("c1", RunScope, "sha256:k1", true),
                registered("c1", CallScope, "sha256:k1", true),
                ended("c1", 9),
                ran(RunScope, "sha256:k1", TeardownOutcome::Ok),
                done(),
            ],
            &["cleanup sha256:k1 (call scope, registered at #3) never ran"],
        ),
        (
            "a cleanup that ran and failed: failed, not 'never ran'",
            vec![
                started(),
                call("c1", "deploy"),
                registered("c1", CallScope, "sha256:k1", true),
                ran(
                    CallScope,
                    "sha256:k1",
                    TeardownOutcome::Error {
                        message: "gone".into(),
                    },
                ),
                ended("c1", 9),
                done(),
            ],
            &["cleanup sha256:k1 (call scope) failed at #3: gone"],
        ),
        (
            "a cleanup that did not finish in time",
            vec![
                started(),
                call("c1", "deploy"),
                registered("c1", RunScope, "sha256:k1", true),
                ended("c1", 9),
                ran(RunScope, "sha256:k1", TeardownOutcome::TimedOut),
                done(),
            ],
            &["cleanup sha256:k1 (run scope) failed at #4: timed out"],
        ),
        (
            "failed credential",
            vec![
                started(),
                call("c1", "deploy"),
                credential_failed("c1", "github"),
                failed("c1", "no token", 9),
                run_ended(RunStatus::Failed),
            ],
            &["credential \"github\" failed (#2, call c1)"],
        ),
        (
            "a resolved credential is not an anomaly",
            vec![
                started(),
                call("c1", "deploy"),
                credential_resolved("c1", "github"),
                ended("c1", 9),
                done(),
            ],
            &[],
        ),
        (
            "cancellation after end",
            vec![
                started(),
                call("c1", "walk"),
                ended("c1", 9),
                cancel("c1"),
                run_ended(RunStatus::Cancelled),
            ],
            &["cancellation of call c1 arrived after it ended (#3)"],
        ),
        (
            "cancellation before end is not an anomaly",
            vec![
                started(),
                call("c1", "walk"),
                cancel("c1"),
                ended("c1", 9),
                done(),
            ],
            &[],
        ),
        (
            "a gap: the seq numbers skip",
            vec![
                started(),
                call("c1", "walk"),
                Step::Skip(3),
                ended("c1", 9),
                done(),
            ],
            &["facts #2 to #4 could not be read: the seq numbers skip"],
        ),
        (
            "a gap of one fact",
            vec![
                started(),
                call("c1", "walk"),
                ended("c1", 9),
                Step::Skip(1),
                done(),
            ],
            &["fact #3 could not be read: the seq numbers skip"],
        ),
        (
            "unknown call id",
            vec![
                started(),
                call("c1", "walk"),
                log("ghost"),
                ended("c1", 9),
                done(),
            ],
            &["fact #2 names call ghost, which never started"],
        ),
        (
            "progress of an unknown call: one anomaly, not a crash",
            vec![started(), progress("ghost", "Hop 1", 1), done()],
            &["fact #1 names call ghost, which never started"],
        ),
        (
            "unended run",
            vec![started(), call("c1", "walk"), ended("c1", 9)],
            &["the run never ended (still running, or its writer stopped)"],
        ),
        (
            "no facts at all",
            vec![],
            &["the run never ended (still running, or its writer stopped)"],
        ),
        (
            "everything at once, in the order found",
            vec![
                started(),
                call("c1", "deploy"),
                credential_failed("c1", "github"),
                registered("c1", RunScope, "sha256:k1", true),
                ended("c1", 9),
                progress("c1", "late", 1),
                cancel("c1"),
                Step::Skip(2),
                call("c2", "walk"),
                log("ghost"),
            ],
            &[
                "credential \"github\" failed (#2, call c1)",
                "call c1 reported progress after it ended (#5)",
                "cancellation of call c1 arrived after it ended (#6)",
                "facts #7 to #8 could not be read: the seq numbers skip",
                "fact #10 names call ghost, which never started",
                "call c2 (started at #9) never ended",
                "cleanup sha256:k1 (run scope, registered at #3) never ran",
                "the run never ended (still running, or its writer stopped)",
            ],
        ),
    ];
    for (name, steps, expected) in cases {
        check(name, steps, expected);
    }
}

/// The anomaly lines of a run whose record is in `state`, as `reel show`
/// builds its timeline.
fn described_for(state: reel_core::RunState, steps: Vec<Step>) -> Vec<String> {
    let facts = number(steps);
    let mut record = RunRecord::from_first(&facts[0]).expect("a run");
    record.state = state;
    let mut b = TimelineBuilder::for_record(&record);
    for f in &facts {
        b.push(f);
    }
    b.finish().anomalies.iter().map(Anomaly::describe).collect()
}

#[test]
fn a_live_run_is_not_flagged_for_what_it_has_not_done_yet() {
    let running = || {
        vec![
            started(),
            call("c1", "deploy"),
            credential_failed("c1", "github"),
            registered("c1", RunScope, "sha256:k1", true),
        ]
    };
    // Still being recorded: the open call, the cleanup not run yet and
    // the missing end are what a live run looks like; the rest counts.
    assert_eq!(
        described_for(reel_core::RunState::Running, running()),
        ["credential \"github\" failed (#2, call c1)"]
    );
    // Its writer stopped: now they are anomalies.
    assert_eq!(
        described_for(reel_core::RunState::Incomplete, running()),
        [
            "credential \"github\" failed (#2, call c1)",
            "call c1 (started at #1) never ended",
            "cleanup sha256:k1 (run scope, registered at #3) never ran",
            "the run never ended (still running, or its writer stopped)",
        ]
    );
    // A live record whose run.ended arrived meanwhile (`tail` follows it
    // to its end) is closed.
    let mut ended_meanwhile = running();
    ended_meanwhile.push(run_ended(RunStatus::Completed));
    assert_eq!(
        described_for(reel_core::RunState::Running, ended_meanwhile),
        [
            "credential \"github\" failed (#2, call c1)",
            "call c1 (started at #1) never ended",
            "cleanup sha256:k1 (run scope, registered at #3) never ran",
        ]
    );
}

#[test]
fn anomalies_point_at_their_fact() {
    let t = build(vec![
        started(),
        call("c1", "walk"),
        ended("c1", 9),
        cancel("c1"),
    ]);
    let seqs: Vec<Option<u64>> = t.anomalies.iter().map(Anomaly::seq).collect();
    assert_eq!(seqs, vec![Some(3), None]);
}

#[test]
fn teardown_ledger_counts_repeats() {
    let t = build(vec![
        started(),
        call("c1", "deploy"),
        registered("c1", RunScope, "sha256:k1", true),
        registered("c1", RunScope, "sha256:k1", false),
        registered("c1", RunScope, "sha256:k1", false),
        registered("c1", CallScope, "sha256:k2", true),
        ran(CallScope, "sha256:k2", TeardownOutcome::TimedOut),
        ended("c1", 9),
        ran(RunScope, "sha256:k1", TeardownOutcome::Ok),
        run_ended(RunStatus::Completed),
    ]);
    let ledger: Vec<_> = t
        .teardowns
        .iter()
        .map(|d| {
            (
                d.scope,
                d.key_hash.as_str(),
                d.call.as_deref(),
                d.registered_seq,
                d.repeats,
                d.ran_seq,
                d.outcome.clone(),
            )
        })
        .collect();
    assert_eq!(
        ledger,
        vec![
            (
                RunScope,
                "sha256:k1",
                Some("c1"),
                2,
                2,
                Some(8),
                Some(TeardownOutcome::Ok)
            ),
            (
                CallScope,
                "sha256:k2",
                Some("c1"),
                5,
                0,
                Some(6),
                Some(TeardownOutcome::TimedOut)
            ),
        ]
    );
    // The one that timed out is an anomaly; repeats are not.
    let anomalies: Vec<String> = t.anomalies.iter().map(Anomaly::describe).collect();
    assert_eq!(
        anomalies,
        ["cleanup sha256:k2 (call scope) failed at #6: timed out"]
    );
}

#[test]
fn credential_ledger() {
    let t = build(vec![
        started(),
        call("c1", "deploy"),
        credential_resolved("c1", "github"),
        credential_failed("c1", "vault"),
        ended("c1", 9),
        run_ended(RunStatus::Completed),
    ]);
    let ledger: Vec<_> = t
        .credentials
        .iter()
        .map(|c| {
            (
                c.seq,
                c.need.as_str(),
                c.outcome.as_str(),
                c.fingerprint.as_deref(),
                c.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        ledger,
        vec![
            (2, "github", "resolved", Some("hmac-sha256:00"), None),
            (3, "vault", "failed", None, Some("token expired")),
        ]
    );
}

fn gap(first: u64, last: Option<u64>, detail: &str) -> Gap {
    Gap {
        first,
        last,
        detail: detail.into(),
    }
}

/// A progress report numbers itself (`count`, the writer's): after a gap
/// that swallowed report 2, report 3 says 3 on its fact line and the
/// summary says 3 too, not the 2 reports the reader happened to see.
#[test]
fn the_stored_progress_count_survives_a_gap() {
    let facts = number(vec![
        started(),
        call("c1", "walk"),
        generic_progress("c1", 1),
        Step::Skip(1),
        generic_progress("c1", 3),
        ended("c1", 9),
        run_ended(RunStatus::Completed),
    ]);
    let record = RunRecord::from_first(&facts[0]).expect("a run's head");
    let mut text = Vec::new();
    let mut w =
        TextWriter::start(&mut text, TextRenderer::new(Color::Plain), &record).expect("memory");
    w.fact(&facts[0], true).expect("memory");
    w.fact(&facts[1], true).expect("memory");
    w.fact(&facts[2], true).expect("memory");
    w.gap(&gap(3, Some(3), "checksum mismatch"))
        .expect("memory");
    for f in &facts[3..] {
        w.fact(f, true).expect("memory");
    }
    let t = w.finish().expect("memory");
    let text = String::from_utf8(text).expect("UTF-8");
    let third = "`walk` reported progress (3 so far)…";
    let line = text
        .lines()
        .find(|l| l.contains("#4 "))
        .expect("the line of fact #4");
    assert!(line.contains(third), "{line}\n{text}");
    assert!(
        text.contains(&format!("last progress: {third}")),
        "the summary agrees with the fact line:\n{text}"
    );
    let c1 = t.call("c1").expect("c1");
    assert_eq!(c1.progress, 3);
    assert_eq!(c1.last_progress.as_deref(), Some(third));
    assert_eq!(
        t.anomalies,
        vec![Anomaly::Gap(gap(3, Some(3), "checksum mismatch"))]
    );
}

/// Reports the recorder dropped (`progress.dropped`) are counted: the
/// report after them carries the count, and drops after the last report
/// add to the call's count.
#[test]
fn dropped_reports_are_counted() {
    let dropped = |count| in_call("c1", FactKind::ProgressDropped(ProgressDropped { count }));
    let t = build(vec![
        started(),
        call("c1", "walk"),
        generic_progress("c1", 1),
        dropped(10),
        generic_progress("c1", 12),
        dropped(5),
        ended("c1", 9),
        run_ended(RunStatus::Completed),
    ]);
    assert_eq!(t.call("c1").expect("c1").progress, 17);
    assert!(t.anomalies.is_empty(), "{:?}", t.anomalies);
}

fn generic_progress(call: &str, count: u64) -> Step {
    in_call(
        call,
        FactKind::Progress(Progress {
            payload: json!({ "done": count }),
            count,
            delivered: false,
        }),
    )
}

#[test]
fn push_gap_marks_the_damage_once() {
    let facts = number(vec![
        started(),
        call("c1", "walk"),
        Step::Skip(4),
        ended("c1", 9),
        run_ended(RunStatus::Completed),
    ]);
    // A reader that knows the damaged range (2..=5) reports it, then goes on.
    let mut b = TimelineBuilder::default();
    b.push(&facts[0]);
    b.push(&facts[1]);
    b.push_gap(&gap(2, Some(5), "checksum mismatch"));
    b.push(&facts[2]);
    b.push(&facts[3]);
    let t = b.finish();
    let lines: Vec<String> = t.anomalies.iter().map(Anomaly::describe).collect();
    assert_eq!(
        lines,
        vec!["facts #2 to #5 could not be read: checksum mismatch"]
    );
    assert_eq!(t.facts, 4);
    assert_eq!(t.call("c1").and_then(|c| c.duration_ns), Some(9));
}

#[test]
fn push_gap_of_unknown_extent_is_completed_by_the_next_fact() {
    let facts = number(vec![
        started(),
        call("c1", "walk"),
        Step::Skip(4),
        ended("c1", 9),
        run_ended(RunStatus::Completed),
    ]);
    // A damaged block whose end is unknown, then facts after it: one gap,
    // its end learnt from the next fact read (not a second gap for the
    // same facts).
    let mut b = TimelineBuilder::default();
    b.push(&facts[0]);
    b.push(&facts[1]);
    b.push_gap(&gap(2, None, "unreadable header"));
    b.push(&facts[2]);
    b.push(&facts[3]);
    let t = b.finish();
    assert_eq!(
        t.anomalies,
        vec![Anomaly::Gap(gap(2, Some(5), "unreadable header"))]
    );
}

#[test]
fn push_gap_at_the_end_stays_open() {
    let facts = number(vec![started(), call("c1", "walk")]);
    let mut b = TimelineBuilder::default();
    b.push(&facts[0]);
    b.push(&facts[1]);
    b.push_gap(&gap(2, None, "unreadable header"));
    let t = b.finish();
    let lines: Vec<String> = t.anomalies.iter().map(Anomaly::describe).collect();
    assert_eq!(
        lines,
        vec![
            "facts from #2 on could not be read: unreadable header",
            "call c1 (started at #1) never ended",
            "the run never ended (still running, or its writer stopped)",
        ]
    );
}

#[test]
fn call_tree_of_nested_dispatch() {
    // c1 search -> c2 fetch -> c3 parse; c1 -> c4 fetch; c5 audit at the top.
    let t = build(vec![
        started(),
        call("c1", "search"),
        child("c2", "fetch", Some("c1")),
        child("c3", "parse", Some("c2")),
        ended("c3", 1_000),
        ended("c2", 2_000),
        child("c4", "fetch", Some("c1")),
        ended("c4", 3_000),
        ended("c1", 10_000),
        call("c5", "audit"),
        ended("c5", 500),
        run_ended(RunStatus::Completed),
    ]);
    let tree: Vec<_> = t
        .calls
        .iter()
        .map(|c| {
            (
                c.call_id.as_str(),
                c.tool.as_str(),
                c.depth,
                c.parent.as_deref(),
                c.children.iter().map(String::as_str).collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(
        tree,
        vec![
            ("c1", "search", 0, None, vec!["c2", "c4"]),
            ("c2", "fetch", 1, Some("c1"), vec!["c3"]),
            ("c3", "parse", 2, Some("c2"), vec![]),
            ("c4", "fetch", 1, Some("c1"), vec![]),
            ("c5", "audit", 0, None, vec![]),
        ]
    );
    let roots: Vec<&str> = t.roots().map(|c| c.call_id.as_str()).collect();
    assert_eq!(roots, vec!["c1", "c5"]);
    assert!(t.anomalies.is_empty(), "{:?}", t.anomalies);
}

#[test]
fn a_child_of_an_unknown_parent_is_a_root_at_depth_zero() {
    let t = build(vec![
        started(),
        child("c2", "fetch", Some("gone")),
        ended("c2", 1),
        run_ended(RunStatus::Completed),
    ]);
    let c2 = t.call("c2").expect("c2");
    assert_eq!((c2.depth, c2.parent.as_deref()), (0, Some("gone")));
}

#[test]
fn durations() {
    let t = build(vec![
        started(),                      // offset 0
        call("c1", "walk"),             // 1 µs
        progress("c1", "Hop 1", 1),     // 2 µs
        progress("c1", "  Hop 2  ", 2), // 3 µs
        failed("c1", "boom", 2_500),    // 4 µs
        call("c2", "walk"),             // 5 µs, never ends
        run_ended(RunStatus::Failed),   // 6 µs
    ]);
    let c1 = t.call("c1").expect("c1");
    assert_eq!(c1.started_offset, 1_000);
    assert_eq!(c1.ended_offset, Some(4_000));
    // The recorded duration, not the offsets' difference.
    assert_eq!(c1.duration_ns, Some(2_500));
    assert_eq!(c1.status, Some(CallStatus::Error));
    assert_eq!(c1.error.as_deref(), Some("boom"));
    assert_eq!((c1.facts, c1.progress), (4, 2));
    assert_eq!(c1.last_progress.as_deref(), Some("Hop 2"));
    let c2 = t.call("c2").expect("c2");
    assert_eq!(
        (c2.duration_ns, c2.status, c2.ended_seq),
        (None, None, None)
    );
    assert_eq!(t.ended, Some((RunStatus::Failed, 6_000)));
    assert_eq!(t.duration_ns(), 6_000);
    assert_eq!(t.facts, 7);
    assert_eq!(t.kinds.get("progress"), Some(&2));
    assert_eq!(t.run.as_ref().map(|r| r.run_id.as_str()), Some("r1"));
}

#[test]
fn an_unended_run_lasts_until_its_last_fact() {
    let t = build(vec![
        started(),
        call("c1", "walk"),
        progress("c1", "Hop 1", 1),
    ]);
    assert_eq!(t.ended, None);
    assert_eq!(t.duration_ns(), 2_000);
}

/// A fact numbered u64::MAX (possible only in a hand-written tape) is taken
/// in without overflow.
#[test]
fn the_largest_seq_does_not_overflow() {
    use reel_core::fact::{FactKind, Progress};
    let fact = reel_core::Fact {
        seq: u64::MAX,
        at: 0,
        offset: 0,
        call: None,
        kind: FactKind::Progress(Progress {
            payload: serde_json::json!({}),
            count: 1,
            delivered: false,
        }),
    };
    let t = reel_viewer::timeline::Timeline::build([&fact]);
    assert_eq!(t.facts, 1);
    let mut record = reel_core::RunRecord {
        run_id: "r".into(),
        outside_run: None,
        session_id: None,
        identity: None,
        labels: Default::default(),
        state: reel_core::RunState::Running,
        started_at: 0,
        ended_at: None,
        facts: 0,
        calls: 0,
        ended_calls: 0,
        failed_credentials: 0,
        tools: Default::default(),
    };
    record.observe(&fact);
    assert_eq!(record.facts, u64::MAX);
}

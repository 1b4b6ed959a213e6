//! A timeline built from views (`TimelineBuilder::push_view`, what `reel
//! runs`, the console and the bench read archives with) is the timeline
//! built from whole facts (`push`), fact for fact, over arbitrary runs:
//! every kind (unknown ones included), calls started and ended, nested,
//! unknown or repeated, progress with and without a count, dropped
//! reports, reports after the end, facts after the run's end, holes in the
//! seqs and gaps reported by the reader, live runs and closed ones.

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngAlgorithm};
use reel_core::codec::{decode_fact, decode_fact_view, encode_fact, FactView};
use reel_core::fact::*;
use reel_core::gap::Gap;
use reel_core::run::{RunRecord, RunState};
use reel_core::strategy;
use reel_core::Fact;
use reel_viewer::timeline::TimelineBuilder;

/// The calls a run's facts name (and one no fact starts).
const CALLS: [&str; 4] = ["c1", "c2", "c3", "never-started"];

/// One step of a run.
#[derive(Debug, Clone)]
enum Step {
    /// A fact of call `CALLS[call]` (none: run-level).
    Fact(Option<usize>, Box<FactKind>),
    /// Seqs left out (a hole in the numbers).
    Skip(u64),
    /// A gap the reader reports, of known extent or not.
    Gap(Option<u64>),
}

fn call_started(call: usize, parent: Option<usize>, tool: &str) -> FactKind {
    FactKind::CallStarted(CallStarted {
        call_id: CALLS[call].into(),
        tool_name: tool.into(),
        tool_id: None,
        parent_call: parent.map(|p| CALLS[p].into()),
        iteration: 0,
        invocation_id: None,
        mode: CallMode::Async,
        protocol: None,
        platform: None,
        client_info: None,
        args: serde_json::json!({}),
        wanted: None,
        attached: None,
        spec: None,
        dispatch_tools: None,
        outside_run: None,
    })
}

fn call() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![4 => (0..CALLS.len()).prop_map(Some), 1 => Just(None)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0..3usize, prop::option::of(0..3usize), prop::sample::select(vec!["busy", "fetch"]))
            .prop_map(|(c, p, tool)| Step::Fact(Some(c), Box::new(call_started(c, p, tool)))),
        8 => (call(), strategy::json_value(), prop_oneof![Just(0u64), 1..6u64, any::<u64>()])
            .prop_map(|(c, payload, count)| {
                Step::Fact(c, Box::new(FactKind::Progress(Progress { payload, count, delivered: false })))
            }),
        1 => (call(), 1..4u64)
            .prop_map(|(c, count)| Step::Fact(c, Box::new(FactKind::ProgressDropped(ProgressDropped { count })))),
        2 => (call(), any::<u64>(), prop_oneof![
                strategy::json_value().prop_map(|result| CallOutcome::Ok { result }),
                any::<String>().prop_map(|error| CallOutcome::Error { error, result: None }),
                Just(CallOutcome::Aborted { reason: None }),
            ])
            .prop_map(|(c, duration_ns, outcome)| {
                Step::Fact(c, Box::new(FactKind::CallEnded(CallEnded { outcome, duration_ns, invocation_id: None })))
            }),
        3 => (call(), strategy::fact_kind()).prop_map(|(c, kind)| Step::Fact(c, Box::new(kind))),
        1 => (1..3u64).prop_map(Step::Skip),
        1 => prop::option::of(0..3u64).prop_map(Step::Gap),
    ]
}

/// A run: maybe its `run.started`, then the steps.
fn run() -> impl Strategy<Value = (bool, Vec<Step>, bool)> {
    (
        any::<bool>(),
        prop::collection::vec(step(), 0..40),
        any::<bool>(),
    )
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        rng_algorithm: RngAlgorithm::ChaCha,
        ..ProptestConfig::default()
    }
}

fn builder(live: bool, started: &Fact) -> TimelineBuilder {
    let mut record = RunRecord::from_first(started).expect("run.started heads a record");
    record.state = if live {
        RunState::Running
    } else {
        RunState::Completed
    };
    TimelineBuilder::for_record(&record)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_timeline_from_views_is_the_timeline_from_facts(
        (head, steps, live) in run(),
        started in strategy::run_started("run-1"),
    ) {
        let started = Fact { seq: 0, at: 1, offset: 0, call: None, kind: FactKind::RunStarted(started) };
        let mut owned = builder(live, &started);
        let mut views = builder(live, &started);
        let mut seq = 0u64;
        let head = head.then_some(Step::Fact(None, Box::new(started.kind.clone())));
        for step in head.into_iter().chain(steps) {
            let (call, kind) = match step {
                Step::Skip(n) => {
                    seq += n;
                    continue;
                }
                Step::Gap(len) => {
                    let gap = Gap { first: seq, last: len.map(|l| seq + l), detail: "lost".into() };
                    owned.push_gap(&gap);
                    views.push_gap(&gap);
                    seq += len.map_or(1, |l| l + 1);
                    continue;
                }
                Step::Fact(call, kind) => (call, kind),
            };
            let fact = Fact {
                seq,
                at: seq as i64 * 7,
                offset: seq * 1_000,
                call: call.map(|c| CALLS[c].to_owned()),
                kind: *kind,
            };
            seq += 1;
            let mut bytes = Vec::new();
            encode_fact(&fact, &mut bytes).expect("encodes");
            owned.push(&decode_fact(&bytes).expect("decodes"));
            let view = decode_fact_view(&bytes).expect("reads");
            // The reports are what the views leave unbuilt.
            prop_assert_eq!(
                matches!(view, FactView::Progress(_)),
                matches!(fact.kind, FactKind::Progress(_))
            );
            views.push_view(&view);
            for c in CALLS {
                prop_assert_eq!(owned.progress_count(c), views.progress_count(c));
                prop_assert_eq!(owned.call_info(c), views.call_info(c));
            }
        }
        let (owned, views) = (owned.finish(), views.finish());
        prop_assert_eq!(&views, &owned);
        // Rendered alike too (the snapshots' form).
        prop_assert_eq!(
            serde_json::to_string(&views).expect("json"),
            serde_json::to_string(&owned).expect("json")
        );
    }
}

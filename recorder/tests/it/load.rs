//! Load: 64 concurrent runs of 2,000 facts each on a 2-thread runtime.
//!
//! Each run is its own task; within a run, six calls go in three rounds of
//! two concurrent calls, each call filing 331 progress and log facts (with a
//! per-call sequence number in the payload) and yielding now and then. Then:
//! nothing is lost (each run has exactly 2,000 facts), every run verifies,
//! seqs are gapless, and per-call order holds (each call's facts lie between
//! its call.started and call.ended, progress counts run 1..N and the
//! payload's sequence numbers increase).

use std::time::Instant;

use reel::context::{ToolContext, ToolError};
use reel::fact::{CallOutcome, Fact, FactKind, Level, RunStatus};
use reel::RunState;
use reel_recorder::{Durability, Recorder, RecorderConfig, Run, RunStart};
use serde_json::{json, Value};

const RUNS: usize = 64;
const FACTS_PER_RUN: usize = 2_000;
const CALLS: usize = 6;
/// Facts a call files between its call.started and call.ended.
const PER_CALL: usize = (FACTS_PER_RUN - 2) / CALLS - 2;

/// Whether the `i`th fact of a call is a log line (else progress).
fn is_log(i: usize) -> bool {
    i % 4 == 3
}

async fn busy(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    let run = args["run"].as_u64().unwrap();
    let call = args["call"].as_u64().unwrap();
    for i in 0..PER_CALL {
        let payload = json!({ "run": run, "call": call, "seq": i, "message": format!("step {i}") });
        if is_log(i) {
            ctx.log(Level::Debug, payload);
        } else {
            ctx.progress(payload);
        }
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    Ok(json!({ "run": run, "call": call }))
}

async fn one_run(run: Run, r: usize) {
    for round in 0..CALLS / 2 {
        let a = run
            .call("busy", json!({ "run": r, "call": 2 * round }))
            .invoke(busy);
        let b = run
            .call("busy", json!({ "run": r, "call": 2 * round + 1 }))
            .invoke(busy);
        let (a, b) = tokio::join!(a, b);
        a.unwrap();
        b.unwrap();
    }
    run.end(RunStatus::Completed).await.unwrap();
}

fn check_run(facts: &[Fact], r: usize) {
    assert_eq!(facts.len(), FACTS_PER_RUN, "run {r}: facts lost or added");
    for (i, f) in facts.iter().enumerate() {
        assert_eq!(f.seq, i as u64, "run {r}: seqs gapless from 0");
    }
    assert_eq!(facts[0].kind.name(), "run.started");
    assert_eq!(facts[FACTS_PER_RUN - 1].kind.name(), "run.ended");
    for c in 1..=CALLS {
        let id = format!("c{c}");
        let mine: Vec<&Fact> = facts
            .iter()
            .filter(|f| f.call.as_deref() == Some(id.as_str()))
            .collect();
        assert_eq!(mine.len(), PER_CALL + 2, "run {r} call {id}");
        assert_eq!(mine[0].kind.name(), "call.started", "run {r} call {id}");
        let FactKind::CallEnded(end) = &mine[PER_CALL + 1].kind else {
            panic!(
                "run {r} call {id}: last fact is {}",
                mine[PER_CALL + 1].kind.name()
            )
        };
        assert!(matches!(end.outcome, CallOutcome::Ok { .. }));
        let mut count = 0;
        for (i, f) in mine[1..=PER_CALL].iter().enumerate() {
            let payload = match &f.kind {
                FactKind::Progress(p) => {
                    assert!(!is_log(i), "run {r} call {id}: fact {i} out of order");
                    count += 1;
                    assert_eq!(p.count, count, "run {r} call {id}: progress count");
                    &p.payload
                }
                FactKind::Log(l) => {
                    assert!(is_log(i), "run {r} call {id}: fact {i} out of order");
                    &l.data
                }
                other => panic!("run {r} call {id}: unexpected {}", other.name()),
            };
            assert_eq!(payload["seq"], json!(i), "run {r} call {id}: call order");
            assert_eq!(
                payload["run"],
                json!(r),
                "run {r} call {id}: facts of another run"
            );
        }
    }
}

async fn load(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig {
        durability,
        ..RecorderConfig::default()
    };
    let recorder = Recorder::open(dir.path(), config).await.unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for r in 0..RUNS {
        let recorder = recorder.clone();
        tasks.push(tokio::spawn(async move {
            let run = recorder
                .start_run(RunStart::new(format!("load-{r}")))
                .await
                .unwrap();
            one_run(run, r).await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();
    let recorded = started.elapsed();

    let started = Instant::now();
    for r in 0..RUNS {
        let id = format!("load-{r}");
        let facts: Vec<Fact> = archive
            .facts(&id, ..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        check_run(&facts, r);
        let record = archive.run(&id).unwrap();
        assert_eq!(record.state, RunState::Completed);
        assert_eq!(record.facts, FACTS_PER_RUN as u64);
        assert_eq!(
            (record.calls, record.ended_calls),
            (CALLS as u64, CALLS as u64)
        );
    }
    let report = archive.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.runs, RUNS as u64);
    assert_eq!(report.facts, (RUNS * FACTS_PER_RUN) as u64);
    eprintln!(
        "load ({durability:?}): {RUNS} runs x {FACTS_PER_RUN} facts recorded in {recorded:?} \
         ({:.0} facts/s), read back and verified in {:?}",
        (RUNS * FACTS_PER_RUN) as f64 / recorded.as_secs_f64(),
        started.elapsed()
    );
}

#[test]
fn the_workload_adds_up() {
    assert_eq!(2 + CALLS * (PER_CALL + 2), FACTS_PER_RUN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_runs_lose_nothing_and_keep_call_order() {
    load(Durability::CallBoundary).await;
}

//! Property: any run recorded from a deterministic tool over arbitrary
//! inputs replays with zero divergences, from the archive and from the
//! written-then-read tape, and re-derives the recorded timeline exactly.
//!
//! The tool reads its script from its arguments (so the record holds
//! everything it needs) and does what each step says: progress, log, a
//! journaled effect with an arbitrary outcome, an output, a clock read, a
//! random draw, an artifact put, a pulled credential (and a progress line
//! that leaks it), a question, a teardown registration, a child call running
//! a script of its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reel::context::{BoxFuture, Elicitation, Stage, ToolContext, ToolError};
use reel::fact::{ElicitOutcome, Level, RunStatus, TeardownScope};
use reel::strategy::{json_value, unicode_string};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::TapeExt;
use reel_core::matching::resolve_refs;
use reel_recorder::{
    MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, RunStart, ScriptedElicitor,
};
use reel_replayer::{replay, Recording, ReplayInput, ReplayOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Long enough never to occur by chance in an arbitrary payload (every
/// occurrence of a resolved secret is scrubbed from the record).
const SECRET: &str = "svc-Secret-4f9c2b7e0d1a6e38";

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Step {
    Progress(Value),
    Log(Level, Value),
    Effect(String, Value, Result<Value, String>),
    Output(Value),
    Clock,
    Random,
    Put(Vec<u8>),
    Credential,
    LeakSecret,
    Ask(String, Value),
    Teardown(TeardownScope, String),
    Child(Vec<Step>),
}

fn scripted(ctx: ToolContext, steps: Vec<Step>) -> BoxFuture<'static, Result<Value, ToolError>> {
    Box::pin(async move {
        let mut seen = Vec::new();
        let mut secret = None;
        for step in steps {
            match step {
                Step::Progress(payload) => ctx.progress(payload),
                Step::Log(level, data) => ctx.log(level, data),
                Step::Effect(name, request, outcome) => {
                    let got: Result<Value, ToolError> = ctx
                        .effect(&name, &request, move || async move { outcome })
                        .await;
                    seen.push(match got {
                        Ok(v) => json!({ "ok": v }),
                        Err(e) => json!({ "err": e.to_string() }),
                    });
                }
                Step::Output(value) => ctx.set_output_as(value, Stage::new("step")),
                Step::Clock => seen.push(json!(ctx.now())),
                Step::Random => seen.push(json!(ctx.random())),
                Step::Put(bytes) => {
                    let meta = ctx
                        .artifacts()
                        .put("application/octet-stream", bytes)
                        .await?;
                    seen.push(json!({ "id": meta.id, "digest": meta.digest, "size": meta.size }));
                }
                Step::Credential => {
                    let c = ctx.credential("svc").await?;
                    seen.push(json!(c.fingerprint.0));
                    secret = Some(c.secret().expose().to_owned());
                }
                Step::LeakSecret => {
                    if let Some(s) = &secret {
                        ctx.progress(json!({ "message": format!("using {s} now") }));
                    }
                }
                Step::Ask(message, schema) => {
                    let answer = ctx.elicit(Elicitation::form(message, schema)).await?;
                    seen.push(json!({
                        "answer": format!("{:?}", answer.outcome),
                        "errors": answer.validation_errors,
                    }));
                }
                Step::Teardown(scope, key) => {
                    let first = ctx.on_teardown(scope, &key, || async { Ok::<_, String>(()) });
                    seen.push(json!(format!("{first:?}")));
                }
                Step::Child(steps) => {
                    let got = ctx.dispatch("scripted", steps).await;
                    seen.push(match got {
                        Ok(v) => v,
                        Err(e) => json!({ "err": e.to_string() }),
                    });
                }
            }
        }
        Ok(json!({ "seen": seen }))
    })
}

fn leaf_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => json_value().prop_map(Step::Progress),
        2 => (proptest::sample::select(Level::ALL.to_vec()), json_value())
            .prop_map(|(l, v)| Step::Log(l, v)),
        2 => (
            unicode_string(),
            json_value(),
            prop_oneof![
                json_value().prop_map(Ok),
                unicode_string().prop_map(Err),
            ],
        )
            .prop_map(|(n, r, o)| Step::Effect(n, r, o)),
        1 => json_value().prop_map(Step::Output),
        1 => Just(Step::Clock),
        1 => Just(Step::Random),
        1 => vec(any::<u8>(), 0..64).prop_map(Step::Put),
        1 => Just(Step::Credential),
        1 => Just(Step::LeakSecret),
        1 => (unicode_string(), json_value()).prop_map(|(m, s)| Step::Ask(m, s)),
        1 => (
            proptest::sample::select(vec![
                TeardownScope::Call,
                TeardownScope::Run,
                TeardownScope::Session,
            ]),
            "[a-c]{1,2}",
        )
            .prop_map(|(scope, key)| Step::Teardown(scope, key)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => leaf_step(),
        1 => vec(leaf_step(), 0..6).prop_map(Step::Child),
    ]
}

fn answer() -> impl Strategy<Value = ElicitOutcome> {
    prop_oneof![
        json_value().prop_map(|content| ElicitOutcome::Accept { content }),
        Just(ElicitOutcome::Decline),
        Just(ElicitOutcome::Cancel),
    ]
}

#[test]
fn any_deterministic_run_replays_with_zero_divergences() {
    check_runs(RecorderConfig::default());
}

/// Payloads larger than the inline limit are stored as artifacts and
/// referenced from the facts: replay serves and matches them whole.
#[test]
fn runs_with_spilled_payloads_replay_with_zero_divergences() {
    check_runs(RecorderConfig {
        inline_limit: 64,
        ..RecorderConfig::default()
    });
}

fn check_runs(config: RecorderConfig) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let recorder = rt
        .block_on(Recorder::open(dir.path().join("archive"), config))
        .unwrap();
    let store = Arc::new(MemoryArtifactStore::new());
    let vault = Arc::new(MemoryVault::new().with("svc", SECRET));
    let tools = Tools::new().register("scripted", scripted);
    let runs = AtomicU64::new(0);

    let mut runner = TestRunner::new(Config {
        cases: 32,
        failure_persistence: None,
        ..Config::default()
    });
    let input = (vec(step(), 0..12), vec(answer(), 0..4));
    let result = runner.run(&input, |(steps, answers)| {
        let id = format!("prop-{}", runs.fetch_add(1, Ordering::Relaxed));
        rt.block_on(async {
            let run = recorder.start_run(RunStart::new(&id)).await.unwrap();
            let live = run
                .call("scripted", &steps)
                .credentials(vault.clone())
                .artifacts(store.clone())
                .elicitor(Arc::new(ScriptedElicitor::new(answers)))
                .dispatcher(tools.clone())
                .invoke(scripted)
                .await;
            prop_assert!(live.is_ok(), "the live run failed: {live:?}");
            run.end(RunStatus::Completed).await.unwrap();
            recorder.flush().await.unwrap();
            let archive = recorder.archive();

            let from_archive = Recording::from_archive(archive, &id).unwrap();
            let path = dir.path().join(format!("{id}.tape.jsonl"));
            let mut file = std::fs::File::create(&path).unwrap();
            Tape::export(archive, &id)
                .unwrap()
                .write(&mut file)
                .unwrap();
            drop(file);
            let text = std::fs::read_to_string(&path).unwrap();
            prop_assert!(!text.contains(SECRET), "the tape holds the secret");
            let from_tape = Recording::from_tape_file(&path).unwrap();
            prop_assert_eq!(&from_tape.facts, &from_archive.facts);

            for recording in [&from_archive, &from_tape] {
                let report = replay(recording, &tools, &ReplayOptions::default()).await;
                prop_assert!(
                    report.is_match(),
                    "{}: {:?}\n{report}",
                    recording.source,
                    report.problems()
                );
                prop_assert_eq!(report.calls.len(), recording.calls.len());
                for call in &report.calls {
                    prop_assert!(call.result.matches);
                    prop_assert!(call.unrecorded_effects.is_empty());
                    prop_assert_eq!(call.facts_replayed, call.facts_expected);
                }
                let expected: usize = report.calls.iter().map(|c| c.facts_expected).sum();
                prop_assert_eq!(report.matched_facts as usize, expected);
                // The re-derived timeline is the recorded one (with payloads
                // that were stored as artifacts in place).
                let mut recorded = recording.facts.clone();
                for f in &mut recorded {
                    resolve_refs(&mut f.kind, &recording.artifacts);
                }
                prop_assert_eq!(&report.facts, &recorded);
            }

            // The tape indexed for one replay (its facts moved into their
            // calls, not copied) replays exactly as the recording does:
            // re-driven with the tools, and served with none (a missing
            // tool: the recorded facts, children's and spilled payloads
            // included, stand in the timeline).
            for tools in [tools.clone(), Tools::new()] {
                let expected = replay(&from_tape, &tools, &ReplayOptions::default()).await;
                let tape = Tape::read(std::io::BufReader::new(std::fs::File::open(&path).unwrap()))
                    .unwrap();
                let input = ReplayInput::from_tape(from_tape.source.clone(), tape).unwrap();
                let got = replay(input, &tools, &ReplayOptions::default()).await;
                prop_assert_eq!(&got.calls, &expected.calls);
                prop_assert_eq!(&got.facts, &expected.facts);
                prop_assert_eq!(got.matched_facts, expected.matched_facts);
                prop_assert_eq!(&got.source, &expected.source);
            }
            Ok::<(), TestCaseError>(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    rt.block_on(recorder.shutdown()).unwrap();
}

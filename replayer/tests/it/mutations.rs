//! Mutation tests, as data: a tool that uses every capability of the context
//! is recorded into a real archive, exported as a tape, and replayed against
//! a variant of itself changed in exactly one aspect. Each variant must be
//! reported at the exact fact index and field.
//!
//! Fact indices of the original `ship` call (`c1`), as the replayer counts
//! them (`call.started` is 0; the tool's facts count from 1; host facts such
//! as `teardown.ran` are not counted; the result is compared at one past the
//! last tool fact):
//!
//! | index | fact |
//! |---|---|
//! | 0 | call.started |
//! | 1, 2 | credential.requested / .resolved (declared `vault`) |
//! | 3, 4 | credential.requested / .resolved (pulled `github`) |
//! | 5 | progress "Hop 3 of 12" |
//! | 6 | log "planning" |
//! | 7 | effect `github.plan` |
//! | 8, 9 | elicit.requested / .answered |
//! | 10 | artifact.put |
//! | 11 | teardown.registered (run scope) |
//! | - | the child call `c2` of `count` (its own facts, under `c2`) |
//! | 12 | clock |
//! | 13 | random |
//! | 14 | call.output |
//! | 15 | progress "Done" |
//! | 16 | the result (call.ended) |

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use reel::context::{Elicitation, Stage, ToolContext, ToolError};
use reel::fact::{ElicitOutcome, FactKind, Identity, Level, RunStatus, TeardownScope};
use reel::report::{DivergenceKind, ReplayReport, Verdict};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::TapeExt;
use reel_recorder::{
    MemoryArtifactStore, MemoryVault, Recorder, RecorderConfig, RunStart, ScriptedElicitor,
};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Which one aspect of `ship` is changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Original,
    ProgressMessage,
    ArtifactBytes,
    CredentialNeed,
    TeardownScope,
    ElicitSchema,
    EffectRequest,
    ChildArgs,
    SwapLogAndProgress,
    ExtraLogMiddle,
    ExtraLogAtEnd,
    Result,
    UnrecordedEffectMiddle,
    UnrecordedEffectAtEnd,
    MissingLastProgress,
    PutEarly,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ShipArgs {
    service: String,
    hops: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CountArgs {
    n: u32,
}

/// Set by the closure of an effect the record does not have; replay must
/// never run it.
static PREFLIGHT_RAN: AtomicBool = AtomicBool::new(false);

/// The tool under test, in every variant.
async fn ship(ctx: ToolContext, args: ShipArgs, v: Variant) -> Result<Value, ToolError> {
    use Variant as V;
    let declared = ctx
        .declared_credential()
        .cloned()
        .ok_or_else(|| ToolError::msg("ship needs its declared vault credential"))?;
    let need = if v == V::CredentialNeed {
        "gitlab"
    } else {
        "github"
    };
    let pulled = ctx.credential(need).await?;

    if v == V::PutEarly {
        // The artifact one step early, where the record has the progress.
        ctx.artifacts()
            .put("text/plain", b"plan: build, push\n".to_vec())
            .await?;
    }
    let shown_total = if v == V::ProgressMessage {
        args.hops + 1
    } else {
        args.hops
    };
    let progress = json!({
        "message": format!("Hop 3 of {shown_total}"),
        "done": 3,
        "total": args.hops,
    });
    let planning = json!({ "message": "planning", "service": args.service });
    if v == V::SwapLogAndProgress {
        ctx.log(Level::Info, planning);
        ctx.progress(progress);
    } else {
        ctx.progress(progress);
        if v == V::ExtraLogMiddle {
            ctx.log(Level::Debug, json!({ "message": "one line too many" }));
        }
        ctx.log(Level::Info, planning);
    }
    if v == V::UnrecordedEffectMiddle {
        preflight(&ctx, &args.service).await;
    }

    let dry_run = v != V::EffectRequest;
    let plan: Value = ctx
        .effect(
            "github.plan",
            &json!({ "service": args.service, "dry_run": dry_run }),
            move || async move { Ok::<_, String>(json!({ "steps": ["build", "push"] })) },
        )
        .await?;

    let confirm_type = if v == V::ElicitSchema {
        "string"
    } else {
        "boolean"
    };
    let schema = json!({
        "type": "object",
        "properties": { "confirm": { "type": confirm_type } },
        "required": ["confirm"]
    });
    let answer = ctx
        .elicit(Elicitation::form(format!("Ship {}?", args.service), schema).ttl_ms(30_000))
        .await?;
    let confirmed = matches!(
        &answer.outcome,
        ElicitOutcome::Accept { content } if content["confirm"] == json!(true)
    );

    let body: &[u8] = if v == V::ArtifactBytes {
        b"plan: build, push!\n"
    } else {
        b"plan: build, push\n"
    };
    let meta = ctx.artifacts().put("text/plain", body.to_vec()).await?;

    let scope = if v == V::TeardownScope {
        TeardownScope::Call
    } else {
        TeardownScope::Run
    };
    ctx.on_teardown(scope, "ship-session", || async { Ok::<_, String>(()) })?;

    let n = if v == V::ChildArgs { 3 } else { 2 };
    let child = ctx.dispatch("count", CountArgs { n }).await?;

    let t = ctx.now();
    let r = ctx.random();
    ctx.set_output_as(json!({ "plan": plan }), Stage::new("plan"));
    if v != V::MissingLastProgress {
        ctx.progress(json!({ "message": "Done", "done": args.hops, "total": args.hops }));
    }
    if v == V::ExtraLogAtEnd {
        ctx.log(Level::Info, json!({ "message": "one line too many" }));
    }
    if v == V::UnrecordedEffectAtEnd {
        preflight(&ctx, &args.service).await;
    }
    let status = if v == V::Result {
        "shipped!"
    } else {
        "shipped"
    };
    Ok(json!({
        "status": status,
        "confirmed": confirmed,
        "artifact": meta.id,
        "digest": meta.digest,
        "child": child,
        "clock": t,
        "random": r,
        "declared": declared.fingerprint.0,
        "pulled": pulled.fingerprint.0,
    }))
}

/// An effect the record does not have. Its outcome is ignored, so that the
/// tool goes on.
async fn preflight(ctx: &ToolContext, service: &str) {
    let _ = ctx
        .effect(
            "github.preflight",
            &json!({ "service": service }),
            || async {
                PREFLIGHT_RAN.store(true, Ordering::SeqCst);
                Ok::<_, String>(json!("ready"))
            },
        )
        .await;
}

/// The child tool.
async fn count(ctx: ToolContext, args: CountArgs) -> Result<Value, ToolError> {
    for i in 1..=args.n {
        ctx.progress(json!({ "message": format!("Count {i} of {}", args.n) }));
    }
    let n = u64::from(args.n);
    let sum: u64 = ctx
        .effect("math.sum", &json!({ "n": n }), move || async move {
            Ok::<_, String>((1..=n).sum::<u64>())
        })
        .await?;
    Ok(json!({ "n": n, "sum": sum }))
}

fn tools(v: Variant) -> Tools {
    Tools::new()
        .register("ship", move |ctx, args: ShipArgs| ship(ctx, args, v))
        .register("count", count)
}

/// Records one run with `ship` (variant `original`) as call `c1` and, when
/// `second` is set, a plain `count` call after it; exports the run as a tape
/// file and loads it back.
async fn record(original: Variant, second: bool) -> Recording {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path().join("archive"), RecorderConfig::default())
        .await
        .unwrap();
    let run = recorder
        .start_run(RunStart::new("mutations").identity(Identity {
            tenant: Some("acme".into()),
            principal: Some("ann".into()),
            conversation: None,
        }))
        .await
        .unwrap();
    let vault = Arc::new(
        MemoryVault::new()
            .with("vault", "vault-s3cr3t-value")
            .with("github", "ghp_s3cr3tValue"),
    );
    let out = run
        .call(
            "ship",
            ShipArgs {
                service: "billing".into(),
                hops: 12,
            },
        )
        .needs("vault")
        .credentials(vault)
        .artifacts(Arc::new(MemoryArtifactStore::new()))
        .elicitor(Arc::new(ScriptedElicitor::new([ElicitOutcome::Accept {
            content: json!({ "confirm": true }),
        }])))
        .dispatcher(tools(original))
        .invoke(move |ctx, args: ShipArgs| ship(ctx, args, original))
        .await
        .unwrap();
    assert_eq!(out["status"], json!("shipped"));
    assert_eq!(out["child"], json!({ "n": 2, "sum": 3 }));
    if second {
        run.call("count", CountArgs { n: 4 })
            .invoke(count)
            .await
            .unwrap();
    }
    run.end(RunStatus::Completed).await.unwrap();
    let archive = recorder.archive().clone();
    recorder.shutdown().await.unwrap();

    let path = dir.path().join("mutations.tape.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    Tape::export(&archive, "mutations")
        .unwrap()
        .write(&mut file)
        .unwrap();
    drop(file);
    Recording::from_tape_file(&path).unwrap()
}

/// The recorded seq the replayer names for a divergence at `index` of
/// `call`: `call.started` at 0, the tool's facts from 1, the result one past
/// them; `None` where the record has nothing.
fn recorded_seq(rec: &Recording, call: &str, index: usize, kind: DivergenceKind) -> Option<u64> {
    let c = &rec.calls[call];
    if index == 0 {
        return Some(c.started_seq);
    }
    let tool_facts: Vec<u64> = c
        .facts
        .iter()
        .filter(|f| {
            !matches!(
                f.kind,
                FactKind::CallStarted(_)
                    | FactKind::CallEnded(_)
                    | FactKind::CancelRequested(_)
                    | FactKind::TeardownRan(_)
            )
        })
        .map(|f| f.seq)
        .collect();
    match kind {
        DivergenceKind::Result => c
            .facts
            .iter()
            .find(|f| matches!(f.kind, FactKind::CallEnded(_)))
            .map(|f| f.seq),
        _ => tool_facts.get(index - 1).copied(),
    }
}

/// What a mutation must be reported as.
struct Expect {
    /// The call reported as diverged.
    call: &'static str,
    /// The kind of divergence.
    kind: DivergenceKind,
    /// The fact index (0: call.started).
    index: usize,
    /// A prefix of the first differing field's path; for divergences without
    /// a field diff (extra, missing, unrecorded), the fact kind's name.
    at: &'static str,
}

/// Records `original`, replays the recording against `mutated` and checks
/// that exactly the expected call diverged, at the expected index and field.
async fn check(original: Variant, mutated: Variant, want: Expect) -> (Recording, ReplayReport) {
    check_with(original, mutated, want, &ReplayOptions::default()).await
}

async fn check_with(
    original: Variant,
    mutated: Variant,
    want: Expect,
    options: &ReplayOptions,
) -> (Recording, ReplayReport) {
    let rec = record(original, false).await;

    // The unchanged tool replays cleanly: the mutation is what differs.
    let clean = replay(&rec, &tools(original), options).await;
    assert!(clean.is_match(), "the original does not replay:\n{clean}");

    let report = replay(&rec, &tools(mutated), options).await;
    assert!(!report.is_match(), "{mutated:?} was not noticed:\n{report}");
    for c in &report.calls {
        if c.call_id != want.call {
            assert_eq!(
                c.verdict,
                Verdict::Matched,
                "{mutated:?}: only {} should diverge:\n{report}",
                want.call
            );
        }
    }
    let call = report
        .calls
        .iter()
        .find(|c| c.call_id == want.call)
        .unwrap_or_else(|| panic!("{mutated:?}: no report for {}:\n{report}", want.call));
    assert_eq!(call.verdict, Verdict::Diverged, "{mutated:?}:\n{report}");
    let d = call.divergence.as_ref().expect("a divergence");
    assert_eq!(d.kind, want.kind, "{mutated:?}: {}", d.line);
    assert_eq!(d.index, want.index, "{mutated:?}: {}", d.line);
    assert_eq!(
        d.seq,
        recorded_seq(&rec, want.call, want.index, want.kind),
        "{mutated:?}: {}",
        d.line
    );
    match d.diff.first() {
        Some(first) => {
            assert!(
                first.path.starts_with(want.at),
                "{mutated:?}: first differing field {:?}, wanted {:?}: {}",
                first.path,
                want.at,
                d.line
            );
            assert!(
                d.line.contains(&format!("{}: expected ", first.path)),
                "{mutated:?}: {}",
                d.line
            );
        }
        None => {
            let subject = match d.kind {
                DivergenceKind::MissingFact => d.expected.as_ref(),
                _ => d.actual.as_ref(),
            };
            assert_eq!(
                subject.map(|s| s["kind"].clone()),
                Some(json!(want.at)),
                "{mutated:?}: {}",
                d.line
            );
        }
    }
    // For a fact mismatch, the recorded side is the recorded fact at that index.
    if d.kind == DivergenceKind::FactMismatch {
        let seq = d.seq.expect("a recorded seq") as usize;
        let recorded = serde_json::to_value(&rec.facts[seq]).unwrap();
        assert_eq!(
            d.expected.as_ref().map(|e| &e["kind"]),
            Some(&recorded["kind"]),
            "{mutated:?}: {}",
            d.line
        );
    }
    let tool = &call.tool;
    let head = match d.seq {
        Some(s) => format!("call {} `{tool}`, fact {} (seq {s})", want.call, want.index),
        None => format!("call {} `{tool}`, fact {}", want.call, want.index),
    };
    assert!(d.line.starts_with(&head), "{mutated:?}: {}", d.line);
    assert_eq!(report.problems(), vec![d.line.clone()]);
    (rec, report)
}

#[tokio::test]
async fn a_progress_message() {
    let (_, report) = check(
        Variant::Original,
        Variant::ProgressMessage,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 5,
            at: "progress:/payload/message",
        },
    )
    .await;
    let d = report.calls[0].divergence.as_ref().unwrap();
    assert_eq!(d.diff.len(), 1, "{:?}", d.diff);
    assert_eq!(d.diff[0].expected, Some(json!("Hop 3 of 12")));
    assert_eq!(d.diff[0].actual, Some(json!("Hop 3 of 13")));
    assert_eq!(
        d.line,
        r#"call c1 `ship`, fact 5 (seq 6), progress:/payload/message: expected "Hop 3 of 12", got "Hop 3 of 13""#
    );
}

#[tokio::test]
async fn artifact_bytes() {
    let (_, report) = check(
        Variant::Original,
        Variant::ArtifactBytes,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 10,
            at: "artifact.put:/meta/",
        },
    )
    .await;
    let d = report.calls[0].divergence.as_ref().unwrap();
    let paths: Vec<&str> = d.diff.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["artifact.put:/meta/digest", "artifact.put:/meta/size"],
        "{}",
        d.line
    );
}

#[tokio::test]
async fn a_credential_need() {
    check(
        Variant::Original,
        Variant::CredentialNeed,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 3,
            at: "credential.requested:/need",
        },
    )
    .await;
}

#[tokio::test]
async fn a_teardown_scope() {
    let (rec, report) = check(
        Variant::Original,
        Variant::TeardownScope,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 11,
            at: "teardown.registered:/scope",
        },
    )
    .await;
    // Both scopes are honoured: the registration was not refused.
    assert!(rec.head.teardown_scopes().contains(&TeardownScope::Call));
    assert!(rec.head.teardown_scopes().contains(&TeardownScope::Run));
    let d = report.calls[0].divergence.as_ref().unwrap();
    assert_eq!(d.diff[0].expected, Some(json!("run")));
    assert_eq!(d.diff[0].actual, Some(json!("call")));
    assert_eq!(
        d.actual.as_ref().unwrap()["kind"],
        json!("teardown.registered")
    );
}

#[tokio::test]
async fn an_elicitation_schema() {
    let (_, report) = check(
        Variant::Original,
        Variant::ElicitSchema,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 8,
            at: "elicit.requested:/schema",
        },
    )
    .await;
    let d = report.calls[0].divergence.as_ref().unwrap();
    assert_eq!(
        d.diff[0].path,
        "elicit.requested:/schema/properties/confirm/type"
    );
}

#[tokio::test]
async fn an_effect_request() {
    let (_, report) = check(
        Variant::Original,
        Variant::EffectRequest,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 7,
            at: "effect:/request/dry_run",
        },
    )
    .await;
    assert!(report.calls[0].unrecorded_effects.is_empty());
}

#[tokio::test]
async fn a_child_calls_args() {
    let (_, report) = check(
        Variant::Original,
        Variant::ChildArgs,
        Expect {
            call: "c2",
            kind: DivergenceKind::ChildCall,
            index: 0,
            at: "call.started:/args",
        },
    )
    .await;
    let child = report.calls.iter().find(|c| c.call_id == "c2").unwrap();
    assert_eq!(child.parent.as_deref(), Some("c1"));
    assert_eq!(child.tool, "count");
    let d = child.divergence.as_ref().unwrap();
    assert_eq!(d.diff[0].path, "call.started:/args/n");
    assert_eq!(d.diff[0].expected, Some(json!(2)));
    assert_eq!(d.diff[0].actual, Some(json!(3)));
}

#[tokio::test]
async fn the_order_of_two_facts() {
    let (_, report) = check(
        Variant::Original,
        Variant::SwapLogAndProgress,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 5,
            at: "kind",
        },
    )
    .await;
    let d = report.calls[0].divergence.as_ref().unwrap();
    assert_eq!(d.diff[0].expected, Some(json!("progress")));
    assert_eq!(d.diff[0].actual, Some(json!("log")));
}

#[tokio::test]
async fn one_extra_log_line_in_the_middle() {
    let (_, report) = check(
        Variant::Original,
        Variant::ExtraLogMiddle,
        Expect {
            call: "c1",
            kind: DivergenceKind::FactMismatch,
            index: 6,
            at: "log:/",
        },
    )
    .await;
    let d = report.calls[0].divergence.as_ref().unwrap();
    assert_eq!(d.actual.as_ref().unwrap()["data"]["level"], json!("debug"));
}

#[tokio::test]
async fn one_extra_log_line_at_the_end() {
    let (_, report) = check(
        Variant::Original,
        Variant::ExtraLogAtEnd,
        Expect {
            call: "c1",
            kind: DivergenceKind::ExtraFact,
            index: 16,
            at: "log",
        },
    )
    .await;
    let c1 = &report.calls[0];
    assert_eq!(c1.facts_expected, 15);
    assert_eq!(c1.facts_replayed, 16);
    // The extra line is the only difference: the result still matches.
    assert!(c1.result.matches, "{report}");
}

#[tokio::test]
async fn one_missing_fact() {
    let (_, report) = check(
        Variant::Original,
        Variant::MissingLastProgress,
        Expect {
            call: "c1",
            kind: DivergenceKind::MissingFact,
            index: 15,
            at: "progress",
        },
    )
    .await;
    let c1 = &report.calls[0];
    assert_eq!(c1.facts_replayed, 14);
    assert!(c1.result.matches, "{report}");
}

#[tokio::test]
async fn the_result() {
    let (_, report) = check(
        Variant::Original,
        Variant::Result,
        Expect {
            call: "c1",
            kind: DivergenceKind::Result,
            index: 16,
            at: "call.ended:/outcome",
        },
    )
    .await;
    let c1 = &report.calls[0];
    assert!(!c1.result.matches);
    let d = c1.divergence.as_ref().unwrap();
    // Down to the leaf that changed, not the whole result.
    assert_eq!(d.diff.len(), 1, "{:?}", d.diff);
    assert_eq!(d.diff[0].path, "call.ended:/outcome/result/status");
    assert!(
        d.line
            .ends_with(r#"call.ended:/outcome/result/status: expected "shipped", got "shipped!""#),
        "{}",
        d.line
    );
}

/// A step taken early (an artifact put where the record has the progress)
/// is said as that, not as the `artifact.refused` fact replay's refusal
/// produced.
#[tokio::test]
async fn a_step_taken_early_is_named_as_a_step() {
    let rec = record(Variant::Original, false).await;
    let report = replay(&rec, &tools(Variant::PutEarly), &ReplayOptions::default()).await;
    let c1 = &report.calls[0];
    assert_eq!(c1.verdict, Verdict::Diverged, "{report}");
    let d = c1.divergence.as_ref().expect("a divergence");
    assert_eq!(
        (d.kind, d.index),
        (DivergenceKind::FactMismatch, 5),
        "{}",
        d.line
    );
    assert!(
        d.line.contains(r#"the record has "progress" here, but the tool asked for something else (the record has no artifact.put here)"#)
            && d.line.contains("out of step"),
        "{}",
        d.line
    );
    // The report's header counts as the line does.
    let shown = report.to_string();
    assert!(
        shown.contains("DIVERGED (") && shown.contains("recorded facts of the tool replayed)"),
        "{shown}"
    );
}

#[tokio::test]
async fn an_unrecorded_effect_in_the_middle() {
    let (_, report) = check(
        Variant::Original,
        Variant::UnrecordedEffectMiddle,
        Expect {
            call: "c1",
            kind: DivergenceKind::UnrecordedEffect,
            index: 7,
            at: "effect",
        },
    )
    .await;
    let c1 = &report.calls[0];
    assert_eq!(
        c1.unrecorded_effects.first().map(String::as_str),
        Some("github.preflight"),
        "{report}"
    );
    let d = c1.divergence.as_ref().unwrap();
    assert_eq!(
        d.actual.as_ref().unwrap()["data"]["name"],
        json!("github.preflight")
    );
    assert!(
        !PREFLIGHT_RAN.load(Ordering::SeqCst),
        "replay ran an effect"
    );
}

#[tokio::test]
async fn an_unrecorded_effect_at_the_end() {
    let (_, report) = check(
        Variant::Original,
        Variant::UnrecordedEffectAtEnd,
        Expect {
            call: "c1",
            kind: DivergenceKind::UnrecordedEffect,
            index: 16,
            at: "effect",
        },
    )
    .await;
    let c1 = &report.calls[0];
    assert_eq!(c1.unrecorded_effects, ["github.preflight"], "{report}");
    let d = c1.divergence.as_ref().unwrap();
    assert_eq!(d.seq, None);
    assert!(
        d.line.contains("github.preflight") && d.line.contains("not in the record"),
        "{}",
        d.line
    );
    assert!(report
        .to_string()
        .contains("unrecorded effect \"github.preflight\""));
    assert!(
        !PREFLIGHT_RAN.load(Ordering::SeqCst),
        "replay ran an effect"
    );
}

#[tokio::test]
async fn a_tool_missing_from_the_registry() {
    let rec = record(Variant::Original, false).await;
    let report = replay(
        &rec,
        &Tools::new().register("count", count),
        &ReplayOptions::default(),
    )
    .await;
    assert!(!report.is_match());
    let c1 = &report.calls[0];
    assert_eq!(c1.call_id, "c1");
    assert_eq!(c1.verdict, Verdict::MissingTool);
    assert!(c1.divergence.is_none());
    assert_eq!(
        report.problems(),
        ["call c1 `ship`: no tool \"ship\" in the registry: register it to replay this call"]
    );
    // Nothing was replayed: the recorded facts stand in the timeline, the
    // child's included.
    let kinds = |facts: &[reel::Fact]| -> Vec<(Option<String>, String)> {
        facts
            .iter()
            .map(|f| (f.call.clone(), f.kind.name().to_owned()))
            .collect()
    };
    assert_eq!(kinds(&report.facts), kinds(&rec.facts), "{report}");
}

#[tokio::test]
async fn ignore_rules_make_a_mutated_field_match() {
    let rec = record(Variant::Original, false).await;
    let mutated = tools(Variant::ProgressMessage);

    let options = ReplayOptions::default().ignore("progress", "/payload/message");
    let report = replay(&rec, &mutated, &options).await;
    assert!(report.is_match(), "{report}");

    // A rule for another kind, or another field, does not hide it.
    for options in [
        ReplayOptions::default().ignore("log", "/payload/message"),
        ReplayOptions::default().ignore("progress", "/payload/total"),
        ReplayOptions::default().ignore("progress", "/message"),
    ] {
        let report = replay(&rec, &mutated, &options).await;
        let d = report.calls[0].divergence.as_ref().expect("diverged");
        assert_eq!(d.index, 5, "{options:?}: {}", d.line);
        assert_eq!(d.diff[0].path, "progress:/payload/message", "{options:?}");
    }

    // A rule may name no kind: it applies to every kind.
    let mut options = ReplayOptions::default();
    options.ignore.push(reel_core::matching::IgnoreRule {
        kind: None,
        pointer: "/payload/message".into(),
    });
    assert!(replay(&rec, &mutated, &options).await.is_match());
}

#[tokio::test]
async fn results_only_ignores_facts_but_not_the_result() {
    let rec = record(Variant::Original, false).await;
    let options = ReplayOptions {
        results_only: true,
        ..ReplayOptions::default()
    };
    for v in [
        Variant::ProgressMessage,
        Variant::SwapLogAndProgress,
        Variant::ExtraLogAtEnd,
        Variant::TeardownScope,
        Variant::ChildArgs,
    ] {
        let report = replay(&rec, &tools(v), &options).await;
        assert!(report.is_match(), "{v:?} with results_only:\n{report}");
    }
    let report = replay(&rec, &tools(Variant::Result), &options).await;
    assert!(!report.is_match());
    let c1 = &report.calls[0];
    assert_eq!(c1.verdict, Verdict::Diverged);
    let d = c1.divergence.as_ref().unwrap();
    assert_eq!(d.kind, DivergenceKind::Result);
    assert_eq!(d.diff[0].path, "call.ended:/outcome/result/status");
}

#[tokio::test]
async fn only_call_replays_one_call_by_id() {
    let rec = record(Variant::Original, true).await;
    assert_eq!(rec.call_order, ["c1", "c2", "c3"]);
    let mutated = tools(Variant::ProgressMessage);

    // Only c3 (`count`): the mutated c1 is not replayed at all.
    let options = ReplayOptions {
        only_call: Some("c3".into()),
        ..ReplayOptions::default()
    };
    let report = replay(&rec, &mutated, &options).await;
    assert!(report.is_match(), "{report}");
    let ids: Vec<&str> = report.calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["c3"]);
    assert!(report
        .facts
        .iter()
        .all(|f| f.call.is_none() || f.call.as_deref() == Some("c3")));

    // Only c1: with its child, and the mutation is found.
    let options = ReplayOptions {
        only_call: Some("c1".into()),
        ..ReplayOptions::default()
    };
    let report = replay(&rec, &mutated, &options).await;
    let ids: Vec<&str> = report.calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    assert_eq!(report.calls[0].verdict, Verdict::Diverged);
    assert_eq!(report.calls[1].verdict, Verdict::Matched);

    // An id the record does not have replays nothing.
    let options = ReplayOptions {
        only_call: Some("c9".into()),
        ..ReplayOptions::default()
    };
    let report = replay(&rec, &mutated, &options).await;
    assert!(report.calls.is_empty());
}

#[tokio::test]
async fn children_served_from_the_record() {
    let rec = record(Variant::Original, false).await;
    let options = ReplayOptions {
        serve_children: true,
        ..ReplayOptions::default()
    };
    let report = replay(&rec, &tools(Variant::Original), &options).await;
    assert!(report.is_match(), "{report}");
    let verdicts: Vec<(&str, Verdict)> = report
        .calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [("c1", Verdict::Matched), ("c2", Verdict::Served)]
    );
    let kinds = |facts: &[reel::Fact]| -> Vec<(Option<String>, String)> {
        facts
            .iter()
            .map(|f| (f.call.clone(), f.kind.name().to_owned()))
            .collect()
    };
    assert_eq!(kinds(&report.facts), kinds(&rec.facts), "{report}");

    // A served child dispatched with other args is still reported.
    let report = replay(&rec, &tools(Variant::ChildArgs), &options).await;
    let c2 = &report.calls[1];
    assert_eq!(c2.verdict, Verdict::Diverged, "{report}");
    let d = c2.divergence.as_ref().unwrap();
    assert_eq!(d.kind, DivergenceKind::ChildCall);
    assert_eq!(d.diff[0].path, "call.started:/args/n");
}

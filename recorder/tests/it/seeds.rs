//! The seeds' rules the second audit (issue 32) found partly kept, one
//! test each, against the real recorder and archive: every case records
//! into a fresh temporary archive, shuts the recorder down, checks the
//! archive verifies and reads the facts back from it (never from memory).

use std::sync::Arc;

use reel::context::{ToolContext, ToolError};
use reel::fact::*;
use reel_archive::Archive;
use reel_recorder::{Recorder, RecorderConfig, Run, RunStart};
use serde_json::{json, Value};
use tempfile::TempDir;

/// A recorder on a fresh temporary archive.
struct Lab {
    dir: TempDir,
    recorder: Recorder,
}

impl Lab {
    async fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::open(dir.path(), RecorderConfig::default())
            .await
            .unwrap();
        Lab { dir, recorder }
    }

    async fn run(&self, id: &str) -> Run {
        self.recorder.start_run(RunStart::new(id)).await.unwrap()
    }

    /// Shuts the recorder down, checks the archive verifies and returns
    /// the facts of `stream`.
    async fn facts(self, stream: &str) -> (Vec<Fact>, Archive, TempDir) {
        let archive = self.recorder.archive().clone();
        self.recorder.shutdown().await.expect("shutdown");
        let report = archive.verify().unwrap();
        assert!(report.is_ok(), "archive verifies: {:?}", report.problems);
        let facts: Vec<Fact> = archive
            .facts(stream, ..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        (facts, archive, self.dir)
    }
}

/// The call ids of the `call.started` facts, in order.
fn started_ids(facts: &[Fact]) -> Vec<String> {
    facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c) => Some(c.call_id.clone()),
            _ => None,
        })
        .collect()
}

async fn echo(_ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    Ok(args)
}

// ---------------------------------------------------------------------------
// Item 10: host-chosen call ids are unique within a run
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_second_call_with_a_taken_id_is_refused_before_anything_is_filed() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let first = run.call("search", json!({"q": 1})).call_id("dup");
    assert_eq!(first.invoke(echo).await.unwrap(), json!({"q": 1}));
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = ran.clone();
    let err = run
        .call("fetch", json!({}))
        .call_id("dup")
        .invoke(move |_ctx: ToolContext, _: Value| async move {
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ToolError>(json!(2))
        })
        .await
        .expect_err("the second call with a taken id is refused");
    let message = err.to_string();
    assert!(
        message.contains("call id \"dup\" is taken in run \"r\"")
            && message.contains("give each call its own id"),
        "{message}"
    );
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "the tool never ran"
    );
    // The same id while the first call still runs is refused too.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (entered_tx, entered) = tokio::sync::oneshot::channel::<()>();
    let long = run.call("wait", json!({})).call_id("busy").invoke(
        move |_ctx: ToolContext, _: Value| async move {
            let _ = entered_tx.send(());
            let _ = rx.await;
            Ok::<_, ToolError>(json!("done"))
        },
    );
    let long = tokio::spawn(long);
    entered.await.expect("the first call runs");
    let clash = run
        .call("wait", json!({}))
        .call_id("busy")
        .invoke(echo)
        .await
        .expect_err("a call with a running call's id is refused");
    assert!(clash.to_string().contains("\"busy\" is taken"), "{clash}");
    tx.send(()).unwrap();
    assert_eq!(long.await.unwrap().unwrap(), json!("done"));
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    assert_eq!(started_ids(&facts), ["dup", "busy"]);
}

#[tokio::test]
async fn generated_ids_step_around_the_ids_a_host_chose() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    // The host names its call "c2", the id the next generated one would
    // have; generated ids are never refused: they skip it.
    run.call("a", json!({}))
        .call_id("c2")
        .invoke(echo)
        .await
        .unwrap();
    let generated = run.call("b", json!({}));
    assert_eq!(generated.id(), "c3");
    // A generated id is reserved when its call is prepared: a host that
    // chooses it meanwhile is refused, and the generated call runs.
    let err = run
        .call("d", json!({}))
        .call_id("c3")
        .invoke(echo)
        .await
        .expect_err("taken");
    assert!(err.to_string().contains("\"c3\" is taken"), "{err}");
    generated.invoke(echo).await.unwrap();
    // Children get generated ids too: never a taken one.
    run.call("e", json!({}))
        .call_id("c5")
        .invoke(echo)
        .await
        .unwrap();
    let last = run.call("f", json!({}));
    assert_eq!(last.id(), "c6");
    last.invoke(echo).await.unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    assert_eq!(started_ids(&facts), ["c2", "c3", "c5", "c6"]);
}

// ---------------------------------------------------------------------------
// Item 7: a context clone that outlives its call refuses, and is counted
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_context_that_outlives_its_call_refuses_and_the_run_end_counts_it() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let out = run
        .call("walk", json!({}))
        .artifacts(Arc::new(reel_recorder::MemoryArtifactStore::default()))
        .invoke(move |ctx: ToolContext, _: Value| async move {
            ctx.progress(json!({"message": "inside"}));
            let clone = ctx.clone();
            tokio::spawn(async move {
                // Runs once the call has ended.
                let _ = go_rx.await;
                clone.progress(json!({"message": "late 1"}));
                clone.progress(json!({"message": "late 2"}));
                clone.log(Level::Info, "late log");
                let notified = clone.notify("late notice");
                clone.set_output(json!("late output"));
                let put = clone.artifacts().put("text/plain", b"late".to_vec()).await;
                let now = clone.now();
                let _ = done_tx.send((notified, put.map(|m| m.id), now));
            });
            Ok::<_, ToolError>(json!("done"))
        })
        .await
        .unwrap();
    assert_eq!(out, json!("done"));
    go_tx.send(()).unwrap();
    let (notified, put, now) = done_rx.await.unwrap();
    assert!(!notified, "notify after the end is not handed on");
    let err = put.expect_err("artifacts.put after the end is refused");
    assert!(
        err.to_string()
            .contains("artifacts.put refused: call c1 has ended"),
        "{err}"
    );
    assert!(now > 0, "reading the clock still answers");
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let names: Vec<&str> = facts.iter().map(|f| f.kind.name()).collect();
    let ended = names.iter().position(|n| *n == "call.ended").unwrap();
    // Nothing of the call after its end but the run's count of refusals.
    assert_eq!(
        &names[ended..],
        ["call.ended", "log", "run.ended"],
        "{names:?}"
    );
    let FactKind::Log(count) = &facts[ended + 1].kind else {
        unreachable!()
    };
    assert_eq!(facts[ended + 1].call, None);
    assert_eq!(count.logger.as_deref(), Some("reel.after_end"));
    assert_eq!(count.level, Level::Warning);
    assert!(!count.delivered);
    assert_eq!(
        count.data["calls"],
        json!({"c1": {"progress": 2, "log": 2, "output": 1, "artifacts.put": 1, "clock": 1}}),
        "{}",
        count.data
    );
    assert_eq!(count.data["refused"], json!(7));
    // The progress filed inside the call is there, once.
    let progress: Vec<&Value> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::Progress(p) => Some(&p.payload),
            _ => None,
        })
        .collect();
    assert_eq!(progress, [&json!({"message": "inside"})]);
}

/// A call outside any run is its own stream, ended by its `call.ended`:
/// a clone used after that is refused and not recorded, and the stream
/// still ends with the call's end (its count cannot follow the end: it is
/// reported as late instead).
#[tokio::test]
async fn a_context_outliving_a_call_outside_any_run_leaves_its_stream_ended() {
    let lab = Lab::new().await;
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let (key_tx, key_rx) = tokio::sync::oneshot::channel();
    lab.recorder
        .call("walk", json!({}))
        .invoke(move |ctx: ToolContext, _: Value| async move {
            if let reel::context::Home::OutsideRun { key } = ctx.home() {
                let _ = key_tx.send(key.clone());
            }
            ctx.progress(json!({"message": "inside"}));
            let clone = ctx.clone();
            tokio::spawn(async move {
                let _ = go_rx.await;
                clone.progress(json!({"message": "late"}));
                clone.log(Level::Info, "late log");
                let _ = done_tx.send(clone.is_closed());
            });
            Ok::<_, ToolError>(json!("done"))
        })
        .await
        .unwrap();
    let key = key_rx.await.unwrap();
    go_tx.send(()).unwrap();
    assert!(done_rx.await.unwrap(), "the clone sees its call ended");
    let (facts, _, _dir) = lab.facts(&key).await;
    let names: Vec<&str> = facts.iter().map(|f| f.kind.name()).collect();
    assert_eq!(names, ["call.started", "progress", "call.ended"]);
}

#[tokio::test]
async fn a_run_whose_contexts_refuse_nothing_files_no_count() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    run.call("a", json!(1)).invoke(echo).await.unwrap();
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let names: Vec<&str> = facts.iter().map(|f| f.kind.name()).collect();
    assert_eq!(
        names,
        ["run.started", "call.started", "call.ended", "run.ended"]
    );
}

// ---------------------------------------------------------------------------
// Item 8: the teardown scopes are what the door can honour
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_run_without_a_session_never_lists_the_session_scope() {
    use TeardownScope::*;
    let lab = Lab::new().await;
    let run = lab
        .recorder
        .start_run(RunStart::new("no-session").teardown_scopes([Call, Run, Session]))
        .await
        .unwrap();
    let seen = run
        .call("browser", json!({}))
        .invoke(|ctx: ToolContext, _: Value| async move {
            let scopes = ctx.teardown_scopes().to_vec();
            let err = ctx
                .on_teardown(Session, "browser", || async { Ok::<_, String>(()) })
                .unwrap_err();
            Ok::<_, ToolError>((scopes, err.to_string()))
        })
        .await
        .unwrap();
    assert_eq!(seen.0, [Call, Run]);
    assert!(
        seen.1.contains("not honoured") && seen.1.contains("which honours: call, run;"),
        "{}",
        seen.1
    );
    run.end(RunStatus::Completed).await.unwrap();
    // With a session id, the host's explicit scopes stand as given.
    let with = lab
        .recorder
        .start_run(
            RunStart::new("with-session")
                .session("s-1")
                .teardown_scopes([Session]),
        )
        .await
        .unwrap();
    let scopes = with
        .call("browser", json!({}))
        .invoke(|ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(ctx.teardown_scopes().to_vec())
        })
        .await
        .unwrap();
    assert_eq!(scopes, [Session]);
    with.end(RunStatus::Completed).await.unwrap();
    let (facts, archive, _dir) = lab.facts("no-session").await;
    let FactKind::RunStarted(started) = &facts[0].kind else {
        unreachable!()
    };
    assert_eq!(started.teardown_scopes, [Call, Run]);
    let refused = facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::TeardownRefused(r) => Some(r),
            _ => None,
        })
        .expect("the refusal is recorded");
    assert_eq!(refused.scope, Session);
    assert_eq!(refused.honoured, [Call, Run]);
    let with: Vec<Fact> = archive
        .facts("with-session", ..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let FactKind::RunStarted(started) = &with[0].kind else {
        unreachable!()
    };
    assert_eq!(started.teardown_scopes, [Session]);
}

// ---------------------------------------------------------------------------
// Item 9: `wanted` is present only when declared and resolved
// ---------------------------------------------------------------------------

fn ticket(id: &str) -> ArtifactMeta {
    ArtifactMeta {
        id: id.into(),
        digest: format!("sha256:{}", "0".repeat(64)),
        size: 4,
        media_type: "text/plain".into(),
        scope: Identity::default(),
        origin: Origin {
            run_id: Some("elsewhere".into()),
            call_id: "c9".into(),
        },
    }
}

fn wants_plan() -> reel::spec::ToolSpec {
    use reel::spec::ToolSpecExt as _;
    reel::spec::ToolSpec::new::<Value, Value>("deploy").wants(["plan"])
}

#[tokio::test]
async fn a_host_cannot_set_wanted_beyond_what_the_tool_declared() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let one = |name: &str| -> std::collections::BTreeMap<String, ArtifactMeta> {
        [(name.to_owned(), ticket("art-1"))].into_iter().collect()
    };
    let wanted_seen = |ctx: ToolContext, _: Value| async move {
        Ok::<_, ToolError>(json!(ctx
            .wanted()
            .map(|w| w.keys().cloned().collect::<Vec<_>>())))
    };
    // No spec: nothing is declared, so nothing can be wanted.
    let err = run
        .call("deploy", json!({"plan": "p"}))
        .wanted(one("plan"))
        .invoke(wanted_seen)
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.contains("\"plan\"") && message.contains("declare"),
        "{message}"
    );
    // A spec that declares another argument.
    let err = run
        .call("deploy", json!({"plan": "p", "notes": "n"}))
        .spec(wants_plan())
        .wanted(one("notes"))
        .invoke(wanted_seen)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("\"notes\""), "{err}");
    // A declared argument that still holds a claim ticket was not
    // resolved: the host's ticket for it is refused.
    let err = run
        .call(
            "deploy",
            json!({"plan": reel::spec::claim_ticket(&ticket("art-1"))}),
        )
        .spec(wants_plan())
        .wanted(one("plan"))
        .invoke(wanted_seen)
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.contains("\"plan\"") && message.contains("still holds a claim ticket"),
        "{message}"
    );
    // A declared argument the host resolved itself is kept.
    let kept = run
        .call("deploy", json!({"plan": "the plan"}))
        .spec(wants_plan())
        .wanted(one("plan"))
        .invoke(wanted_seen)
        .await
        .unwrap();
    assert_eq!(kept, json!(["plan"]));
    // Empty is not "at least one resolved": absent.
    let empty = run
        .call("deploy", json!({"plan": "the plan"}))
        .spec(wants_plan())
        .wanted(std::collections::BTreeMap::new())
        .invoke(wanted_seen)
        .await
        .unwrap();
    assert_eq!(empty, json!(null));
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let wanted: Vec<Option<Vec<String>>> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c) => {
                Some(c.wanted.as_ref().map(|w| w.keys().cloned().collect()))
            }
            _ => None,
        })
        .collect();
    // The refused calls were never recorded.
    assert_eq!(wanted, [Some(vec!["plan".to_owned()]), None]);
}

// ---------------------------------------------------------------------------
// Item 6: run-level cancellation
// ---------------------------------------------------------------------------

/// Waits for cancellation, then ends as cancelled (what a well-behaved
/// long tool does); dispatches `child` first when given, which does the same.
async fn wait_for_cancel(ctx: ToolContext, child: Value) -> Result<Value, ToolError> {
    if let Some(name) = child.as_str() {
        return ctx.dispatch(name, json!(null)).await;
    }
    ctx.cancelled().await;
    ctx.check_cancel()?;
    Ok(json!("not cancelled"))
}

/// The outcome of each call, by call id, and the reasons of the
/// `cancel.requested` facts, by call id.
type ByCall<T> = Vec<(String, T)>;

fn outcomes(facts: &[Fact]) -> (ByCall<String>, ByCall<Option<String>>) {
    let mut ended = Vec::new();
    let mut requested = Vec::new();
    for f in facts {
        let call = f.call.clone().unwrap_or_default();
        match &f.kind {
            FactKind::CallEnded(e) => ended.push((
                call,
                match &e.outcome {
                    CallOutcome::Aborted { reason } => format!("aborted {reason:?}"),
                    other => format!("{other:?}"),
                },
            )),
            FactKind::CancelRequested(c) => requested.push((call, c.reason.clone())),
            _ => {}
        }
    }
    ended.sort();
    requested.sort();
    (ended, requested)
}

#[tokio::test]
async fn cancelling_a_run_reaches_every_call_and_their_children() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let tools = reel::tools::Tools::new().register("inner", wait_for_cancel);
    let a = tokio::spawn(
        run.call("outer", json!("inner"))
            .dispatcher(tools.clone())
            .invoke(wait_for_cancel),
    );
    let b = tokio::spawn(run.call("plain", json!(null)).invoke(wait_for_cancel));
    // Both calls (and the child) are running.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    run.cancel(Some("user pressed stop"));
    for handle in [a, b] {
        let err = handle.await.unwrap().expect_err("cancelled");
        assert!(err.is_cancelled(), "{err}");
    }
    // A call made after the run was cancelled starts cancelled.
    let late = run
        .call("late", json!(null))
        .invoke(wait_for_cancel)
        .await
        .expect_err("cancelled");
    assert!(late.is_cancelled(), "{late}");
    run.end(RunStatus::Cancelled).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let (ended, requested) = outcomes(&facts);
    let stop = "aborted Some(\"user pressed stop\")".to_owned();
    assert_eq!(
        ended,
        [
            ("c1".to_owned(), stop.clone()),
            ("c2".to_owned(), stop.clone()),
            ("c3".to_owned(), stop.clone()),
            ("c4".to_owned(), stop.clone()),
        ]
    );
    // One cancel.requested per call the run's cancel reached (the child
    // through its parent, as a call's own cancel reaches it).
    let reason = Some("user pressed stop".to_owned());
    let want: Vec<(String, Option<String>)> = ["c1", "c2", "c4"]
        .iter()
        .map(|c| (c.to_string(), reason.clone()))
        .collect();
    assert_eq!(requested, want);
}

#[tokio::test]
async fn a_host_token_cancels_the_run() {
    let lab = Lab::new().await;
    let token = tokio_util::sync::CancellationToken::new();
    let run = lab
        .recorder
        .start_run(RunStart::new("r").cancellation(token.clone()))
        .await
        .unwrap();
    let call = tokio::spawn(run.call("wait", json!(null)).invoke(wait_for_cancel));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    token.cancel();
    let err = call.await.unwrap().expect_err("cancelled");
    assert!(err.is_cancelled(), "{err}");
    run.end(RunStatus::Cancelled).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let (ended, requested) = outcomes(&facts);
    assert_eq!(ended, [("c1".to_owned(), "aborted None".to_owned())]);
    assert_eq!(requested, [("c1".to_owned(), None)]);
    // The request is on the record before the call's end.
    let at = |name: &str| facts.iter().position(|f| f.kind.name() == name).unwrap();
    assert!(at("cancel.requested") < at("call.ended"));
}

/// Seed 000: a host hands one call its own cancellation token. Its
/// cancel reaches that call (and no other of the run); the call's own
/// cancel never trips it.
#[tokio::test]
async fn a_host_token_for_one_call_cancels_that_call_only() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let mine = tokio_util::sync::CancellationToken::new();
    let first = tokio::spawn(
        run.call("wait", json!(null))
            .cancellation(mine.clone())
            .invoke(wait_for_cancel),
    );
    let other = run.call("wait", json!(null));
    let other_canceller = other.canceller();
    let second = tokio::spawn(other.invoke(wait_for_cancel));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    mine.cancel();
    let err = first.await.unwrap().expect_err("cancelled");
    assert!(err.is_cancelled(), "{err}");
    assert!(!second.is_finished(), "the other call was cancelled too");
    other_canceller.cancel(Some("done"));
    assert!(second.await.unwrap().unwrap_err().is_cancelled());
    // The call's own cancel leaves the host's token alone.
    let kept = tokio_util::sync::CancellationToken::new();
    let call = run.call("wait", json!(null)).cancellation(kept.clone());
    let canceller = call.canceller();
    let third = tokio::spawn(call.invoke(wait_for_cancel));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    canceller.cancel(Some("operator"));
    assert!(third.await.unwrap().unwrap_err().is_cancelled());
    assert!(!kept.is_cancelled());
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let (_, requested) = outcomes(&facts);
    assert_eq!(
        requested,
        [
            ("c1".to_owned(), None),
            ("c2".to_owned(), Some("done".to_owned())),
            ("c3".to_owned(), Some("operator".to_owned())),
        ]
    );
}

/// agent-core's receipt: the host computes a value from the context and
/// the result after the tool returned, and it is on the record as the
/// call's `call.output` of stage `reel.receipt`, before `call.ended`.
#[tokio::test]
async fn a_host_receipt_is_on_the_record_before_the_calls_end() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let out = run
        .call("add", json!([2, 3]))
        .receipt(|ctx, result| {
            json!({
                "invocation": ctx.invocation_id(),
                "ok": result.is_ok(),
                "tool": ctx.tool_name(),
            })
        })
        .invoke(|_ctx: ToolContext, (a, b): (i64, i64)| async move { Ok::<_, ToolError>(a + b) })
        .await
        .unwrap();
    assert_eq!(out, 5);
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let names: Vec<&str> = facts.iter().map(|f| f.kind.name()).collect();
    let at = |name: &str| names.iter().position(|n| *n == name).unwrap();
    assert!(at("call.output") < at("call.ended"), "{names:?}");
    let invocation = facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallStarted(c) => c.invocation_id.clone(),
            _ => None,
        })
        .unwrap();
    let receipt = facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallOutput(o) => Some(o.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(receipt.stage.as_deref(), Some(reel::marker::RECEIPT_STAGE));
    assert_eq!(
        receipt.value,
        json!({ "invocation": invocation, "ok": true, "tool": "add" })
    );
}

/// Tries to trip a token the host shares with other work: the host hands
/// a run its token, and the run is cancelled on its own. The run's calls
/// are cancelled; the host's token is not (the run watches a child of it).
#[tokio::test]
async fn cancelling_a_run_leaves_the_hosts_shared_token_alone() {
    let lab = Lab::new().await;
    let shared = tokio_util::sync::CancellationToken::new();
    let run = lab
        .recorder
        .start_run(RunStart::new("r").cancellation(shared.clone()))
        .await
        .unwrap();
    let call = tokio::spawn(run.call("wait", json!(null)).invoke(wait_for_cancel));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    run.cancel(Some("operator"));
    let err = call.await.unwrap().expect_err("cancelled");
    assert!(err.is_cancelled(), "{err}");
    assert!(run.cancellation_token().is_cancelled());
    assert!(
        !shared.is_cancelled(),
        "the host's shared token was tripped"
    );
    run.end(RunStatus::Cancelled).await.unwrap();
}

// ---------------------------------------------------------------------------
// Item 11: sync tools that fail or panic, toolId's fallback, a refused
// dispatch on the record
// ---------------------------------------------------------------------------

/// The single `call.ended` outcome and the mode of call `id`.
fn end_and_mode(facts: &[Fact], id: &str) -> (CallOutcome, CallMode) {
    let mode = facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallStarted(c) if c.call_id == id => Some(c.mode),
            _ => None,
        })
        .unwrap();
    let ended = facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallEnded(e) if f.call.as_deref() == Some(id) => Some(e.outcome.clone()),
            _ => None,
        })
        .unwrap();
    (ended, mode)
}

#[tokio::test]
async fn a_failing_and_a_panicking_sync_tool_are_recorded_as_sync_calls_that_failed() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let failed = run
        .call("divide", json!({"by": 0}))
        .invoke_sync(
            |ctx: ToolContext, args: Value| -> Result<Value, ToolError> {
                ctx.progress(json!({"message": "dividing"}));
                if args["by"] == 0 {
                    return Err(ToolError::msg("division by zero"));
                }
                Ok(json!(1))
            },
        )
        .await
        .expect_err("the sync tool failed");
    assert_eq!(failed.to_string(), "division by zero");
    // A panic in a sync tool (on its blocking thread) is recorded, then
    // goes on unwinding in the host, as an async tool's does.
    let panicked = tokio::spawn(run.call("explode", json!({})).invoke_sync(
        |_ctx: ToolContext, _: Value| -> Result<Value, ToolError> { panic!("sync boom") },
    ))
    .await
    .expect_err("the host's task panicked");
    assert!(panicked.is_panic());
    run.end(RunStatus::Failed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    assert_eq!(
        end_and_mode(&facts, "c1"),
        (
            CallOutcome::Error {
                error: "division by zero".into(),
                result: None
            },
            CallMode::Sync
        )
    );
    let (outcome, mode) = end_and_mode(&facts, "c2");
    assert_eq!(mode, CallMode::Sync);
    assert_eq!(
        outcome,
        CallOutcome::Error {
            error: "the tool panicked: sync boom".into(),
            result: None
        }
    );
    // The failing tool's progress is on the record, before its end.
    assert!(facts
        .iter()
        .any(|f| matches!(&f.kind, FactKind::Progress(p) if p.payload["message"] == "dividing")));
}

#[tokio::test]
async fn the_tool_id_falls_back_to_the_tool_name() {
    use reel::spec::ToolSpecExt as _;
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let id_of =
        |ctx: ToolContext, _: Value| async move { Ok::<_, ToolError>(json!(ctx.tool_id())) };
    let plain = run.call("search", json!({})).invoke(id_of).await.unwrap();
    let given = run
        .call("search", json!({}))
        .tool_id("search-v2")
        .invoke(id_of)
        .await
        .unwrap();
    let from_spec = run
        .call("search", json!({}))
        .spec(reel::spec::ToolSpec::new::<Value, Value>("search").id("search-v3"))
        .invoke(id_of)
        .await
        .unwrap();
    assert_eq!(
        [plain, given, from_spec],
        [json!("search"), json!("search-v2"), json!("search-v3")]
    );
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let ids: Vec<Option<String>> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c) => Some(c.tool_id.clone()),
            _ => None,
        })
        .collect();
    // The fallback is not written down: absent on the record, the name.
    assert_eq!(
        ids,
        [
            None,
            Some("search-v2".to_owned()),
            Some("search-v3".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_refused_dispatch_is_on_the_record() {
    let lab = Lab::new().await;
    let run = lab.run("r").await;
    let out = run
        .call("planner", json!({}))
        .invoke(|ctx: ToolContext, _: Value| async move {
            let err = ctx.dispatch("search", json!({"q": 1})).await.unwrap_err();
            Ok::<_, ToolError>(json!(err.to_string()))
        })
        .await
        .unwrap();
    assert!(out.as_str().unwrap().contains("no tool dispatch"), "{out}");
    run.end(RunStatus::Completed).await.unwrap();
    let (facts, _, _dir) = lab.facts("r").await;
    let refused: Vec<&Log> = facts
        .iter()
        .filter(|f| f.call.as_deref() == Some("c1"))
        .filter_map(|f| match &f.kind {
            FactKind::Log(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "{facts:?}");
    assert_eq!(refused[0].logger.as_deref(), Some("reel.dispatch"));
    assert_eq!(refused[0].level, Level::Warning);
    assert!(!refused[0].delivered);
    assert_eq!(refused[0].data["tool"], "search");
    assert_eq!(refused[0].data["message"], out);
}

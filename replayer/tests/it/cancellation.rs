//! Cancellation at every await of the context: the tool is waiting on a
//! provider (or an effect, or a dispatched child) that never answers, the
//! host cancels, and the await ends with a cancelled error. Recorded
//! through a real recorder, exported as a tape and replayed from it with
//! no divergence: the replay cancels at the same point and the same await
//! ends the same way.
//!
//! What is on the record: the capability's request fact (when it has one),
//! then the host's `cancel.requested`, then `call.ended` `aborted`. No
//! answer fact is filed: no answer came.

use crate::support::record;

use std::future::Future;
use std::sync::Arc;

use reel::context::*;
use reel::fact::*;
use reel::tools::Tools;
use reel_recorder::{ArtifactStore, CallBuilder, CredentialProvider, Elicitor, ResolvedSecret};
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};
use tokio::sync::Notify;

/// A provider of every kind that, asked anything, says so and then never
/// answers.
#[derive(Default)]
struct Stuck {
    asked: Notify,
}

impl Stuck {
    fn hang<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, T> {
        self.asked.notify_one();
        Box::pin(futures::future::pending())
    }
}

impl CredentialProvider for Stuck {
    fn resolve<'a>(
        &'a self,
        _identity: Option<&'a Identity>,
        _need: &'a CredentialNeed,
    ) -> BoxFuture<'a, Result<ResolvedSecret, String>> {
        self.hang()
    }
}

impl ArtifactStore for Stuck {
    fn put(
        &self,
        _meta: ArtifactMeta,
        _bytes: Vec<u8>,
    ) -> BoxFuture<'_, Result<ArtifactMeta, String>> {
        self.hang()
    }

    fn get<'a>(
        &'a self,
        _scope: &'a Identity,
        _id: &'a str,
    ) -> BoxFuture<'a, Result<Option<FoundArtifact>, String>> {
        self.hang()
    }
}

impl Elicitor for Stuck {
    fn elicit<'a>(&'a self, _q: &'a Elicitation) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        self.hang()
    }
}

const REASON: &str = "user pressed stop";

/// Calls `tool` (from `tools`) with `attach`ed providers, cancels it once
/// `stuck` was asked, and checks the call ended cancelled; then replays.
async fn cancel_while_waiting(
    name: &str,
    tools: Tools,
    tool: &str,
    stuck: Arc<Stuck>,
    attach: impl FnOnce(CallBuilder) -> CallBuilder,
) -> Recording {
    let t = tools.clone();
    let tool = tool.to_owned();
    let recording = record(name, RunStatus::Cancelled, |run| async move {
        let call = attach(run.call(&tool, json!({})));
        let canceller = call.canceller();
        let waiting = tokio::spawn(async move { call.invoke_tool(&t).await });
        stuck.asked.notified().await;
        canceller.cancel(Some(REASON));
        let out = waiting.await.unwrap();
        let err = out.expect_err("the call was cancelled");
        assert!(err.is_cancelled(), "{err:?}");
        assert_eq!(err.to_string(), format!("cancelled: {REASON}"));
    })
    .await;
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    assert_eq!(report.calls.len(), recording.calls.len(), "{report}");
    recording
}

fn kinds(recording: &Recording, call: &str) -> Vec<String> {
    recording.calls[call]
        .facts
        .iter()
        .map(|f| f.kind.name().to_owned())
        .collect()
}

fn aborted(recording: &Recording, call: &str) {
    assert_eq!(
        recording.calls[call].ended().expect("ended").outcome,
        CallOutcome::Aborted {
            reason: Some(REASON.into())
        }
    );
}

fn tool<F, Fut>(name: &str, f: F) -> Tools
where
    F: Fn(ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    Tools::new().register(name, move |ctx: ToolContext, _: Value| f(ctx))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_elicitation_ends_cancelled() {
    let stuck = Arc::new(Stuck::default());
    let tools = tool("ask", |ctx| async move {
        ctx.elicit(Elicitation::form("Deploy?", json!({ "type": "object" })))
            .await?;
        Ok(json!("answered"))
    });
    let s = stuck.clone();
    let rec = cancel_while_waiting("elicit", tools, "ask", stuck, |c| c.elicitor(s)).await;
    assert_eq!(
        kinds(&rec, "c1"),
        [
            "call.started",
            "elicit.requested",
            "cancel.requested",
            "call.ended"
        ]
    );
    aborted(&rec, "c1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_credential_pull_ends_cancelled() {
    let stuck = Arc::new(Stuck::default());
    let tools = tool("pull", |ctx| async move {
        ctx.credential("github").await?;
        Ok(json!("resolved"))
    });
    let s = stuck.clone();
    let rec = cancel_while_waiting("credential", tools, "pull", stuck, |c| c.credentials(s)).await;
    assert_eq!(
        kinds(&rec, "c1"),
        [
            "call.started",
            "credential.requested",
            "cancel.requested",
            "call.ended"
        ]
    );
    aborted(&rec, "c1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_artifact_put_ends_cancelled() {
    let stuck = Arc::new(Stuck::default());
    let tools = tool("store", |ctx| async move {
        ctx.artifacts()
            .put("text/plain", b"report".to_vec())
            .await?;
        Ok(json!("stored"))
    });
    let s = stuck.clone();
    let rec = cancel_while_waiting("put", tools, "store", stuck, |c| c.artifacts(s)).await;
    assert_eq!(
        kinds(&rec, "c1"),
        ["call.started", "cancel.requested", "call.ended"]
    );
    aborted(&rec, "c1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_artifact_get_ends_cancelled() {
    let stuck = Arc::new(Stuck::default());
    let tools = tool("load", |ctx| async move {
        ctx.artifacts().get("art-0").await?;
        Ok(json!("loaded"))
    });
    let s = stuck.clone();
    let rec = cancel_while_waiting("get", tools, "load", stuck, |c| c.artifacts(s)).await;
    assert_eq!(
        kinds(&rec, "c1"),
        ["call.started", "cancel.requested", "call.ended"]
    );
    aborted(&rec, "c1");
}

/// A tool whose effect says it started and then never finishes.
fn effect_tool(name: &str, stuck: Arc<Stuck>) -> Tools {
    tool(name, move |ctx| {
        let stuck = stuck.clone();
        async move {
            let done: String = ctx
                .effect(
                    "deploy",
                    &json!({ "service": "billing" }),
                    move || async move {
                        stuck.asked.notify_one();
                        futures::future::pending::<Result<String, String>>().await
                    },
                )
                .await?;
            Ok(json!(done))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_effect_ends_cancelled_and_files_no_outcome() {
    let stuck = Arc::new(Stuck::default());
    let tools = effect_tool("deploy", stuck.clone());
    let rec = cancel_while_waiting("effect", tools, "deploy", stuck, |c| c).await;
    assert_eq!(
        kinds(&rec, "c1"),
        ["call.started", "cancel.requested", "call.ended"]
    );
    aborted(&rec, "c1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_dispatch_cancels_the_child_which_ends_on_its_own_record() {
    let stuck = Arc::new(Stuck::default());
    let tools = effect_tool("deploy", stuck.clone()).register(
        "rollout",
        |ctx: ToolContext, _: Value| async move {
            ctx.progress(json!({ "message": "rolling out" }));
            let child = ctx.dispatch("deploy", json!({})).await?;
            Ok::<_, ToolError>(child)
        },
    );
    let rec = cancel_while_waiting("dispatch", tools.clone(), "rollout", stuck, move |c| {
        c.dispatcher(tools)
    })
    .await;
    assert_eq!(
        kinds(&rec, "c1"),
        ["call.started", "progress", "cancel.requested", "call.ended"]
    );
    aborted(&rec, "c1");
    // The child was cancelled with its parent and ended on its own record.
    let child = &rec.calls[&rec.calls["c1"].children[0]];
    assert_eq!(child.started.parent_call.as_deref(), Some("c1"));
    assert_eq!(
        child.ended().expect("the child ended").outcome,
        CallOutcome::Aborted {
            reason: Some(REASON.into())
        }
    );
}

/// While recording only: the tool, past its last check, waits here for
/// the host's cancel (the outside world; offline there is nothing to wait
/// for).
static RECORDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static CHECKED: Notify = Notify::const_new();
static RELEASED: Notify = Notify::const_new();

/// A cancel that arrives after the tool's last check is recorded before
/// `call.ended`, and the call still ends ok (cancellation is cooperative):
/// the race a client's cancel runs with a finishing tool. Replay does not
/// cancel the tool there, so it finishes as it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_after_the_tools_last_check_changes_nothing_on_replay() {
    use std::sync::atomic::Ordering;
    let tools = tool("finishing", |ctx| async move {
        ctx.progress(json!({ "message": "almost" }));
        ctx.check_cancel()?;
        if RECORDING.load(Ordering::SeqCst) {
            CHECKED.notify_one();
            RELEASED.notified().await;
        }
        Ok(json!("done"))
    });
    let t = tools.clone();
    RECORDING.store(true, Ordering::SeqCst);
    let recording = record("late-cancel", RunStatus::Completed, |run| async move {
        let call = run.call("finishing", json!({}));
        let canceller = call.canceller();
        let running = tokio::spawn(async move { call.invoke_tool(&t).await });
        CHECKED.notified().await;
        canceller.cancel(Some(REASON));
        RELEASED.notify_one();
        assert_eq!(running.await.unwrap().unwrap(), json!("done"));
    })
    .await;
    RECORDING.store(false, Ordering::SeqCst);
    let call = recording.calls.keys().next().unwrap().clone();
    assert_eq!(
        kinds(&recording, &call),
        ["call.started", "progress", "cancel.requested", "call.ended"]
    );
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
}

/// A run-level cancel (seed 000: the signal comes from the run) reaches a
/// waiting call and the child it dispatched; the recording replays with no
/// divergence, the replay cancelling at the recorded point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_level_cancel_replays() {
    let stuck = Arc::new(Stuck::default());
    let tools = tool("ask", |ctx| async move {
        ctx.elicit(Elicitation::form("Deploy?", json!({ "type": "object" })))
            .await?;
        Ok(json!("answered"))
    })
    .register("outer", |ctx: ToolContext, _: Value| async move {
        ctx.dispatch("ask", json!({})).await
    });
    let t = tools.clone();
    let s = stuck.clone();
    let recording = record("run-cancel", RunStatus::Cancelled, |run| async move {
        let call = run
            .call("outer", json!({}))
            .elicitor(s.clone())
            .dispatcher(t.clone());
        let waiting = tokio::spawn(async move { call.invoke_tool(&t).await });
        s.asked.notified().await;
        run.cancel(Some(REASON));
        let err = waiting.await.unwrap().expect_err("cancelled");
        assert_eq!(err.to_string(), format!("cancelled: {REASON}"));
    })
    .await;
    assert_eq!(
        kinds(&recording, "c1"),
        ["call.started", "cancel.requested", "call.ended"]
    );
    assert_eq!(
        kinds(&recording, "c2"),
        ["call.started", "elicit.requested", "call.ended"]
    );
    aborted(&recording, "c1");
    aborted(&recording, "c2");
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert_eq!(report.calls.len(), 2, "{report}");
}

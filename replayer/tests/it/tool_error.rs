//! `ToolError` keeps the tool's own error: `?` works on any
//! `std::error::Error`, the chain and the type are reachable live, and the
//! record keeps the message, so a replay gives back the same message (and
//! no type). Recorded through a real recorder, exported as a tape, replayed
//! from it with no divergence.

use crate::support::record;

use std::fmt;
use std::sync::{Arc, Mutex};

use reel::context::*;
use reel::fact::*;
use reel::tools::Tools;
use reel_replayer::{replay, Recording, ReplayOptions};
use serde_json::{json, Value};

fn error_of(recording: &Recording, call: &str) -> String {
    match &recording.calls[call].ended().expect("ended").outcome {
        CallOutcome::Error { error, .. } => error.clone(),
        other => panic!("call {call} ended {other:?}, not with an error"),
    }
}

/// A user's own error type, with a cause.
#[derive(Debug)]
struct QuotaError {
    left: u32,
    cause: std::io::Error,
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "quota exhausted ({} left)", self.left)
    }
}

impl std::error::Error for QuotaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

fn failing_tools() -> Tools {
    Tools::new()
        .register("read", |_ctx: ToolContext, path: String| async move {
            let text = std::fs::read_to_string(path)?;
            Ok::<_, ToolError>(json!(text))
        })
        .register("parse", |_ctx: ToolContext, text: String| async move {
            let v: Value = serde_json::from_str(&text)?;
            Ok::<_, ToolError>(v)
        })
        .register("quota", |_ctx: ToolContext, _: Value| async move {
            fn check() -> Result<(), QuotaError> {
                Err(QuotaError {
                    left: 0,
                    cause: std::io::Error::other("the billing service said 429"),
                })
            }
            check()?;
            Ok::<_, ToolError>(json!("ok"))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_mark_works_on_io_json_and_a_users_error_and_keeps_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt").display().to_string();
    let tools = failing_tools();
    let t = tools.clone();
    let m = missing.clone();
    let recording = record("tool-errors", RunStatus::Completed, |run| async move {
        let io = run.call("read", &m).invoke_tool(&t).await.unwrap_err();
        assert_eq!(
            io.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
        let json = run
            .call("parse", "{nope")
            .invoke_tool(&t)
            .await
            .unwrap_err();
        let inner = json.downcast_ref::<serde_json::Error>().expect("typed");
        assert_eq!(inner.line(), 1);
        let quota = run
            .call("quota", json!({}))
            .invoke_tool(&t)
            .await
            .unwrap_err();
        assert_eq!(quota.downcast_ref::<QuotaError>().map(|q| q.left), Some(0));
        let chain: Vec<String> = quota.chain().map(|e| e.to_string()).collect();
        assert_eq!(
            chain,
            ["quota exhausted (0 left)", "the billing service said 429"]
        );
        // The cause is reachable by type too.
        assert!(quota.downcast_ref::<std::io::Error>().is_some());
        // A ContextError still becomes the Context variant.
        let ctx_err = ToolError::from(ContextError::NoElicitor);
        assert!(matches!(
            ctx_err,
            ToolError::Context(ContextError::NoElicitor)
        ));
        // As a boxed std error, for hosts that want one.
        let boxed: Box<dyn std::error::Error + Send + Sync> = quota.into();
        assert_eq!(
            boxed.source().unwrap().to_string(),
            "the billing service said 429"
        );
    })
    .await;
    // The record keeps each error's Display, unchanged.
    assert!(
        error_of(&recording, "c1").contains("No such file or directory"),
        "{}",
        error_of(&recording, "c1")
    );
    assert!(error_of(&recording, "c2").starts_with("key must be a string at line 1"));
    assert_eq!(error_of(&recording, "c3"), "quota exhausted (0 left)");
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
}

#[derive(Debug)]
struct Rejected {
    status: u16,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the registry rejected the push with {}", self.status)
    }
}

impl std::error::Error for Rejected {}

/// The message of an error, and the status when it was a `Rejected`.
type Seen = (String, Option<u16>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effects_error_is_typed_live_and_its_message_in_replay() {
    // What the tool saw of its effect's error: (message, typed status).
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let s = seen.clone();
    let tools = Tools::new().register("push", move |ctx: ToolContext, _: Value| {
        let seen = s.clone();
        async move {
            let out: Result<String, ToolError> = ctx
                .effect("push", &json!({ "image": "billing:7" }), || async {
                    Err::<String, _>(Rejected { status: 409 })
                })
                .await;
            let err = out.unwrap_err();
            seen.lock().unwrap().push((
                err.to_string(),
                err.downcast_ref::<Rejected>().map(|r| r.status),
            ));
            Err::<Value, _>(err)
        }
    });
    let t = tools.clone();
    let recording = record("effect-error", RunStatus::Completed, |run| async move {
        run.call("push", json!({}))
            .invoke_tool(&t)
            .await
            .unwrap_err();
    })
    .await;
    let message = "the registry rejected the push with 409";
    assert_eq!(error_of(&recording, "c1"), message);
    let effect = recording.calls["c1"]
        .facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::Effect(e) => Some(e.outcome.clone()),
            _ => None,
        })
        .expect("effect");
    assert_eq!(effect, EffectOutcome::Err(message.into()));
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    // Live the tool got the Rejected itself; in replay the recorded
    // message, with the same Display, and no type.
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (message.to_string(), Some(409)),
            (message.to_string(), None)
        ]
    );
}

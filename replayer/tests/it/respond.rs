//! Seed 004's `respond(value)`: "Set output and end execution
//! immediately". Each case is recorded through a real recorder into a real
//! archive, exported as a tape, and replayed from that tape: respond is an
//! early exit (`ctx.respond(v)?`), the call's result is the responded
//! value, and code that goes on after respond is refused or flagged on the
//! record, never recorded as the result, live and in replay alike.

use reel::context::*;
use reel::fact::*;
use reel::report::ReplayReport;
use reel::tools::Tools;
use reel_recorder::MemoryVault;
use reel_replayer::{replay, Recording, ReplayOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::support::{record, result_of};

async fn replays_clean(recording: &Recording, tools: &Tools) -> ReplayReport {
    let report = replay(recording, tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    assert_eq!(report.calls.len(), recording.calls.len(), "{report}");
    report
}

fn kinds(recording: &Recording, call: &str) -> Vec<String> {
    recording.calls[call]
        .facts
        .iter()
        .map(|f| f.kind.name().to_owned())
        .collect()
}

/// The flags of code that went on after respond, in record order.
fn flags(recording: &Recording, call: &str) -> Vec<Value> {
    recording.calls[call]
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::Log(l) if l.logger.as_deref() == Some(AFTER_RESPOND_LOGGER) => {
                assert_eq!(l.level, Level::Warning);
                assert!(!l.delivered, "a flag is for the record, not the client");
                Some(l.data.clone())
            }
            _ => None,
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pages {
    pages: Vec<String>,
}

/// `ctx.respond(v)?` in the middle of a tool, and `return ctx.respond(v);`
/// in a typed one: both end the call there.
fn search_tools() -> Tools {
    Tools::new()
        .register("search", |ctx: ToolContext, query: String| async move {
            ctx.progress(json!({ "message": "searching" }));
            if query == "cached" {
                ctx.respond(json!({ "pages": ["from cache"] }))?;
            }
            // Never reached for "cached".
            ctx.progress(json!({ "message": "ranking" }));
            Ok(json!({ "pages": ["ranked"] }))
        })
        .register("typed", |ctx: ToolContext, query: String| async move {
            if query.is_empty() {
                return ctx.respond(Pages { pages: Vec::new() });
            }
            Ok(Pages { pages: vec![query] })
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respond_ends_execution_and_its_value_is_the_result() {
    let tools = search_tools();
    let t = tools.clone();
    let recording = record("respond-ends", RunStatus::Completed, |run| async move {
        let out = run.call("search", "cached").invoke_tool(&t).await;
        assert_eq!(out.unwrap(), json!({ "pages": ["from cache"] }));
        let out = run.call("search", "fresh").invoke_tool(&t).await;
        assert_eq!(out.unwrap(), json!({ "pages": ["ranked"] }));
        // The typed host gives back the typed value.
        let typed: Pages = run
            .call("typed", "")
            .invoke(|ctx: ToolContext, q: String| async move {
                if q.is_empty() {
                    return ctx.respond(Pages { pages: Vec::new() });
                }
                Ok(Pages { pages: vec![q] })
            })
            .await
            .unwrap();
        assert_eq!(typed, Pages { pages: Vec::new() });
    })
    .await;

    // Nothing after respond ran: no "ranking" progress, and call.ended
    // follows the respond output at once, ok with the responded value.
    assert_eq!(
        kinds(&recording, "c1"),
        ["call.started", "progress", "call.output", "call.ended"]
    );
    let output = recording.calls["c1"]
        .facts
        .iter()
        .find_map(|f| match &f.kind {
            FactKind::CallOutput(o) => Some(o.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(output.stage.as_deref(), Some("respond"));
    assert_eq!(output.value, json!({ "pages": ["from cache"] }));
    assert_eq!(
        result_of(&recording, "c1"),
        json!({ "pages": ["from cache"] })
    );
    assert!(flags(&recording, "c1").is_empty());
    assert_eq!(result_of(&recording, "c2"), json!({ "pages": ["ranked"] }));
    assert_eq!(result_of(&recording, "c3"), json!({ "pages": [] }));
    assert_eq!(
        kinds(&recording, "c3"),
        ["call.started", "call.output", "call.ended"]
    );

    replays_clean(&recording, &tools).await;

    // A tool that no longer responds is caught by replay.
    let changed = Tools::new()
        .register("search", |ctx: ToolContext, _q: String| async move {
            ctx.progress(json!({ "message": "searching" }));
            ctx.progress(json!({ "message": "ranking" }));
            Ok(json!({ "pages": ["ranked"] }))
        })
        .register("typed", |_ctx: ToolContext, _q: String| async move {
            Ok(Pages { pages: Vec::new() })
        });
    let report = replay(&recording, &changed, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
}

/// A tool that ignores respond's early exit and goes on.
async fn stubborn(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    let _ = ctx.respond(json!({ "answer": 42 }));
    // A capability that can fail refuses, saying respond ended the call.
    let err = ctx.credential("github").await.unwrap_err();
    assert!(
        matches!(&err, ContextError::AfterRespond { capability } if capability == "credential"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("respond already ended this call"),
        "{err}"
    );
    // So does a second respond: the first value stands.
    let again = ctx.respond(json!({ "answer": 43 })).unwrap_err();
    assert!(
        matches!(&again, ToolError::Context(ContextError::AfterRespond { capability }) if capability == "respond"),
        "{again:?}"
    );
    // One that cannot fail drops its fact.
    ctx.progress(json!({ "message": "still going" }));
    ctx.set_output_as(json!({ "late": true }), Stage::new("late"));
    assert_eq!(ctx.output_history(), [json!({ "answer": 42 })]);
    assert_eq!(ctx.responded(), Some(json!({ "answer": 42 })));
    // And what it returns is not the result.
    Ok(json!({ "answer": "something else" }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_after_respond_is_refused_or_flagged_and_never_the_result() {
    let tools = Tools::new().register("stubborn", stubborn);
    let t = tools.clone();
    let recording = record("respond-after", RunStatus::Completed, |run| async move {
        let vault = std::sync::Arc::new(MemoryVault::new().with("github", "ghp_afterRespond1"));
        let out = run
            .call("stubborn", json!({}))
            .credentials(vault)
            .invoke_tool(&t)
            .await;
        assert_eq!(out.unwrap(), json!({ "answer": 42 }));
    })
    .await;

    assert_eq!(result_of(&recording, "c1"), json!({ "answer": 42 }));
    let k = kinds(&recording, "c1");
    assert!(!k.contains(&"credential.requested".to_owned()), "{k:?}");
    assert!(!k.contains(&"progress".to_owned()), "{k:?}");
    let outputs = k.iter().filter(|k| *k == "call.output").count();
    assert_eq!(outputs, 1, "only respond's output is on the record: {k:?}");
    let flags = flags(&recording, "c1");
    let what: Vec<Value> = flags
        .iter()
        .map(|f| f.get("capability").cloned().unwrap_or(Value::Null))
        .collect();
    assert_eq!(
        what,
        [
            json!("credential"),
            json!("respond"),
            json!("progress"),
            json!("output"),
            Value::Null
        ]
    );
    // The last flag names what the tool returned instead.
    assert_eq!(
        flags[4]["returned"],
        json!({ "ok": { "answer": "something else" } })
    );
    assert!(flags[4]["message"]
        .as_str()
        .unwrap()
        .contains("the call's result stays the responded value"));
    assert_eq!(k.last().map(String::as_str), Some("call.ended"));

    replays_clean(&recording, &tools).await;
}

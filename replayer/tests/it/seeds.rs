//! The seeds' rules the second audit (issue 32) found partly kept, where
//! replay is part of the promise: recorded through a real recorder into a
//! real archive, exported as a tape and replayed from it.

use crate::support::record;

use reel::context::*;
use reel::fact::*;
use reel::spec::{ToolSpec, ToolSpecExt};
use reel::tools::Tools;
use reel_replayer::{replay, ReplayOptions};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Item 3: results are checked against the declared output schema
// ---------------------------------------------------------------------------

fn counted_spec() -> ToolSpec {
    ToolSpec::new::<Value, Value>("count").output_schema(Some(json!({
        "type": "object",
        "properties": {
            "count": { "type": "integer" },
            "items": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["count"]
    })))
}

/// Returns what its input says to return.
async fn count(_ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    Ok(args["return"].clone())
}

/// Responds with what its input says, then returns something else.
async fn respond_count(ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    ctx.respond(args["return"].clone())?;
    Ok(json!({ "count": 1 }))
}

fn tools() -> Tools {
    Tools::new().tool(counted_spec(), count).tool(
        ToolSpec {
            name: "respond".into(),
            ..counted_spec()
        },
        respond_count,
    )
}

#[tokio::test]
async fn a_result_off_the_output_schema_is_an_error_naming_the_pointer_live_and_in_replay() {
    let t = tools();
    let recording = record("output", RunStatus::Completed, |run| async move {
        let ok = run
            .call("count", json!({ "return": { "count": 3, "items": ["a"] } }))
            .invoke_tool(&t)
            .await;
        assert_eq!(ok.unwrap(), json!({ "count": 3, "items": ["a"] }));
        let bad = run
            .call(
                "count",
                json!({ "return": { "count": "three", "items": ["a", 2] } }),
            )
            .invoke_tool(&t)
            .await
            .expect_err("the result does not match the output schema");
        let ToolError::InvalidOutput { tool, errors } = &bad else {
            panic!("not an output error: {bad:?}")
        };
        assert_eq!(tool, "count");
        let pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(pointers, ["/count", "/items/1"], "{bad}");
        let message = bad.to_string();
        assert!(
            message.contains("/count") && message.contains("output schema"),
            "{message}"
        );
        // Respond's value is the result: checked the same.
        let responded = run
            .call("respond", json!({ "return": { "items": [] } }))
            .invoke_tool(&t)
            .await
            .expect_err("the responded value does not match either");
        assert!(
            responded
                .to_string()
                .contains("\"count\" is a required property"),
            "{responded}"
        );
    })
    .await;
    let ended = |call: &str| recording.calls[call].ended().unwrap().outcome.clone();
    assert!(matches!(ended("c1"), CallOutcome::Ok { .. }));
    let CallOutcome::Error { error, .. } = ended("c2") else {
        panic!("c2 should have ended with the output error")
    };
    assert!(
        error.contains("/count") && error.contains("/items/1"),
        "{error}"
    );
    assert!(matches!(ended("c3"), CallOutcome::Error { .. }));
    // Replay checks the same: the same outcomes, no divergence.
    let report = replay(&recording, &tools(), &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
    // A tool changed since the record, whose result is now off the schema,
    // is caught in replay by the same check (the first call now fails).
    let broken = Tools::new()
        .tool(counted_spec(), |_ctx: ToolContext, _: Value| async move {
            Ok::<_, ToolError>(json!({ "count": 1.5 }))
        })
        .tool(
            ToolSpec {
                name: "respond".into(),
                ..counted_spec()
            },
            respond_count,
        );
    let report = replay(&recording, &broken, &ReplayOptions::default()).await;
    assert!(!report.is_match(), "{report}");
    let text = format!("{report}");
    assert!(
        text.contains("call c1 `count`, fact 1 (seq 2), call.ended:/outcome/status: expected \"ok\", got \"error\""),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// Item 4: FrontMCP's view of an elicitation's answer
// ---------------------------------------------------------------------------

/// Answers each question by its message: `accept <json>`, `decline`,
/// `cancel`, `timeout`.
struct Scripted;

impl reel_recorder::Elicitor for Scripted {
    fn elicit<'a>(&'a self, q: &'a Elicitation) -> BoxFuture<'a, Result<ElicitAnswer, String>> {
        let outcome = match q.message.split_once(' ') {
            Some(("accept", json)) => ElicitOutcome::Accept {
                content: serde_json::from_str(json).unwrap(),
            },
            _ if q.message == "decline" => ElicitOutcome::Decline,
            _ if q.message == "cancel" => ElicitOutcome::Cancel,
            _ => ElicitOutcome::Timeout,
        };
        Box::pin(async move {
            Ok(ElicitAnswer {
                outcome,
                validation_errors: Vec::new(),
                pre_resolved: false,
            })
        })
    }
}

/// Asks every question of its input; returns FrontMCP's view of each
/// answer, and MCP's outcome beside it.
async fn ask_all(ctx: ToolContext, questions: Vec<String>) -> Result<Value, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": { "confirmed": { "type": "boolean" } },
        "required": ["confirmed"]
    });
    let mut views = Vec::new();
    for q in questions {
        let answer = ctx.elicit(Elicitation::form(q, schema.clone())).await?;
        let view = answer.frontmcp();
        assert_eq!(view.status, answer.status());
        views.push(json!({ "mcp": answer.outcome.as_str(), "frontmcp": view.to_json() }));
    }
    Ok(Value::Array(views))
}

#[tokio::test]
async fn an_answer_has_frontmcps_status_view_beside_mcps_outcome() {
    let tools = Tools::new().register("ask", ask_all);
    let t = tools.clone();
    let questions = json!([
        "accept {\"confirmed\": true}",
        "accept {\"confirmed\": \"yes\"}",
        "decline",
        "cancel",
        "timeout"
    ]);
    let mut seen = Value::Null;
    let out = &mut seen;
    let recording = record("frontmcp-view", RunStatus::Completed, |run| async move {
        *out = run
            .call("ask", questions)
            .elicitor(std::sync::Arc::new(Scripted))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(
        seen,
        json!([
            { "mcp": "accept", "frontmcp": { "status": "accept", "content": { "confirmed": true } } },
            { "mcp": "accept", "frontmcp": {
                "status": "reject",
                "validationErrors": ["/confirmed: \"yes\" is not of type \"boolean\""]
            } },
            { "mcp": "decline", "frontmcp": { "status": "reject" } },
            { "mcp": "cancel", "frontmcp": { "status": "reject" } },
            { "mcp": "timeout", "frontmcp": { "status": "timeout" } }
        ])
    );
    // The view is computed from the record's answers: replay gives the same.
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
}

// ---------------------------------------------------------------------------
// Item 11: a refused dispatch is a fact, filed alike in replay
// ---------------------------------------------------------------------------

async fn planner(ctx: ToolContext, _: Value) -> Result<Value, ToolError> {
    match ctx.dispatch("search", json!({})).await {
        Err(e) => Ok(json!(e.to_string())),
        Ok(v) => Ok(v),
    }
}

#[tokio::test]
async fn a_refused_dispatch_is_recorded_and_replays() {
    let tools = Tools::new().register("planner", planner);
    let t = tools.clone();
    let recording = record("no-dispatch", RunStatus::Completed, |run| async move {
        run.call("planner", json!({}))
            .invoke_tool(&t)
            .await
            .unwrap();
    })
    .await;
    let kinds: Vec<&str> = recording.calls["c1"]
        .facts
        .iter()
        .map(|f| f.kind.name())
        .collect();
    assert_eq!(kinds, ["call.started", "log", "call.ended"]);
    let report = replay(&recording, &tools, &ReplayOptions::default()).await;
    assert!(report.is_match(), "{report}");
    assert!(report.calls.iter().all(|c| c.result.matches), "{report}");
}

//! A tool or agent span as a call: its `call.started` (with the tool's
//! definition when the span carried one) and its `call.ended`.

use reel::fact::{CallEnded, CallMode, CallOutcome, CallStarted};
use serde_json::Value;

use super::{first, first_str, json_text, tool_name, PROTOCOL};
use crate::decode::SpanIn;

/// A tool or agent span's `call.started` and `call.ended`.
pub(super) fn call_facts(
    span: &SpanIn,
    id: &str,
    parent: Option<&str>,
) -> (CallStarted, CallEnded) {
    let tool_name = tool_name(span);
    let args = first(
        span,
        &[
            "gen_ai.tool.call.arguments",
            "ai.toolCall.args",
            // Not OpenInference's `tool.parameters`: the tool's schema.
            "input.value",
            "traceloop.entity.input",
        ],
    )
    .map(json_text)
    .unwrap_or(Value::Null);
    let result = first(
        span,
        &[
            "gen_ai.tool.call.result",
            "ai.toolCall.result",
            "output.value",
            "traceloop.entity.output",
            "final_result",
        ],
    )
    .cloned();
    let started = CallStarted {
        call_id: id.to_owned(),
        tool_name: tool_name.clone(),
        tool_id: None,
        parent_call: parent.map(str::to_owned),
        iteration: 0,
        invocation_id: Some(span.span_id.clone()),
        mode: CallMode::Async,
        protocol: Some(PROTOCOL.into()),
        platform: None,
        client_info: None,
        args,
        wanted: None,
        attached: None,
        spec: spec(span, &tool_name),
        dispatch_tools: None,
        outside_run: None,
    };
    let outcome = match error_of(span) {
        Some(error) => CallOutcome::Error {
            error,
            result: result.filter(|r| !r.is_null()),
        },
        None => CallOutcome::Ok {
            result: result.unwrap_or(Value::Null),
        },
    };
    let ended = CallEnded {
        outcome,
        duration_ns: span.end - span.start,
        invocation_id: Some(span.span_id.clone()),
    };
    (started, ended)
}

/// The tool's definition, when the span carried its parameters' schema
/// (OpenInference's `tool.parameters`, with `tool.description`): what the
/// mock of the run lists. No schema, no spec: none is invented.
fn spec(span: &SpanIn, name: &str) -> Option<Box<reel::spec::ToolSpec>> {
    let schema = first(span, &["tool.parameters"])
        .map(json_text)
        .filter(Value::is_object)?;
    Some(Box::new(reel::spec::ToolSpec {
        name: name.to_owned(),
        id: None,
        title: None,
        description: first_str(span, &["tool.description"]),
        annotations: None,
        input_schema: schema,
        output_schema: None,
        mode: CallMode::Async,
        needs: Vec::new(),
        wants: Vec::new(),
    }))
}

/// The span's error, when it failed: its status message, else its
/// exception event (`type: message`), else `error.type`.
pub(super) fn error_of(span: &SpanIn) -> Option<String> {
    let error_type = span.str("error.type");
    if span.status_code != 2 && error_type.is_none() {
        return None;
    }
    if !span.status_message.is_empty() {
        return Some(span.status_message.clone());
    }
    let exception = span.events.iter().find(|(_, n, _)| n == "exception");
    if let Some((_, _, a)) = exception {
        let ty = a.get("exception.type").and_then(Value::as_str);
        let msg = a.get("exception.message").and_then(Value::as_str);
        match (ty, msg) {
            (Some(t), Some(m)) => return Some(format!("{t}: {m}")),
            (None, Some(m)) | (Some(m), None) => return Some(m.to_owned()),
            _ => {}
        }
    }
    Some(error_type.unwrap_or("error").to_owned())
}

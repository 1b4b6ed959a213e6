//! Between reel's values and MCP's.

use reel::context::{ElicitAnswer, Elicitation, ToolError};
use reel::fact::{ElicitOutcome, Level};
use reel::spec::ToolSpec;
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData,
    LoggingLevel, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{json, Value};

/// The reason a cancelled call records.
pub(crate) const CANCELLED: &str =
    "the MCP client cancelled the request (notifications/cancelled, or its response stream closed)";

/// The MCP session id of the request: streamable HTTP's `Mcp-Session-Id`
/// header. Stdio and stateless HTTP have none.
pub(crate) fn session_id(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let parts = ctx.extensions.get::<http::request::Parts>()?;
    let id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
    (!id.is_empty()).then(|| id.to_owned())
}

/// True for an object schema (what MCP's `outputSchema` must be).
fn object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// What the `tools/list` entry of a tool registered without a spec says of
/// it: exactly what it lacks (see the MCP page of the book).
pub(crate) const SPECLESS: &str = "This tool declares no spec: its arguments are not described and not validated (any object is passed to it as sent), it has no output schema (its result is text only, never structuredContent), and no title, no annotations (no read-only or destructive hint), no declared credential needs and no wanted artifacts.";

/// The `tools/list` entry of a tool: from its spec, or one that says what
/// a tool without a spec lacks ([`SPECLESS`]).
pub(crate) fn listing(name: &str, spec: Option<&ToolSpec>) -> Result<Tool, ErrorData> {
    let mut tool = match spec {
        Some(spec) => spec.mcp_tool(),
        None => json!({
            "name": name,
            "description": SPECLESS,
            "inputSchema": { "type": "object" },
        }),
    };
    if let Some(map) = tool.as_object_mut() {
        // The registry's name is what a call names.
        map.insert("name".into(), json!(name));
        if map.get("outputSchema").is_some_and(|o| !object_schema(o)) {
            map.remove("outputSchema");
        }
        if map.get("inputSchema").is_some_and(|i| !i.is_object()) {
            map.insert("inputSchema".into(), json!({ "type": "object" }));
        }
    }
    serde_json::from_value(tool).map_err(|e| {
        ErrorData::internal_error(
            format!("tool {name:?}: its spec is not an MCP tool: {e}"),
            None,
        )
    })
}

/// True when the result goes out as `structuredContent` too.
fn structured(spec: Option<&ToolSpec>) -> bool {
    spec.and_then(|s| s.output_schema.as_ref())
        .is_some_and(object_schema)
}

/// The answer to a finished `tools/call`.
pub(crate) fn response(
    spec: Option<&ToolSpec>,
    result: Result<Value, ToolError>,
) -> Result<CallToolResult, ErrorData> {
    match result {
        Ok(value) => {
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut out = CallToolResult::success(vec![ContentBlock::text(text)]);
            if structured(spec) {
                out.structured_content = Some(value);
            }
            Ok(out)
        }
        Err(ToolError::UnknownTool(name)) => Err(ErrorData::invalid_params(
            format!("unknown tool {name:?}: tools/list names the tools this server has"),
            Some(json!({ "tool": name })),
        )),
        Err(e) if e.is_cancelled() => Err(ErrorData::internal_error(
            format!("the call was cancelled: {e}"),
            None,
        )),
        Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(
            e.to_string(),
        )])),
    }
}

/// MCP's level of a reel level (the same RFC 5424 names).
pub(crate) fn level(level: Level) -> LoggingLevel {
    match level {
        Level::Emergency => LoggingLevel::Emergency,
        Level::Alert => LoggingLevel::Alert,
        Level::Critical => LoggingLevel::Critical,
        Level::Error => LoggingLevel::Error,
        Level::Warning => LoggingLevel::Warning,
        Level::Notice => LoggingLevel::Notice,
        Level::Info => LoggingLevel::Info,
        Level::Debug => LoggingLevel::Debug,
    }
}

/// Severity rank, most severe highest.
pub(crate) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The `elicitation/create` parameters of a question (MCP 2025-11-25:
/// form mode with `requestedSchema`, url mode with `url` and
/// `elicitationId`). `Err` when the question's schema is not one MCP's
/// restricted elicitation schema allows.
pub(crate) fn elicit_params(question: &Elicitation) -> Result<ElicitRequestParams, String> {
    serde_json::from_value(question.to_mcp()).map_err(|e| {
        format!("the question cannot be asked over MCP (an elicitation schema is an object of primitive-typed properties): {e}")
    })
}

/// reel's answer of an MCP elicitation result.
pub(crate) fn answer(result: ElicitResult) -> ElicitAnswer {
    let outcome = match result.action {
        ElicitationAction::Accept => ElicitOutcome::Accept {
            content: result.content.unwrap_or(Value::Null),
        },
        ElicitationAction::Decline => ElicitOutcome::Decline,
        ElicitationAction::Cancel => ElicitOutcome::Cancel,
        // An action of a later protocol: the user did not answer.
        _ => ElicitOutcome::Cancel,
    };
    ElicitAnswer {
        outcome,
        validation_errors: Vec::new(),
        pre_resolved: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel::spec::{Annotations, ToolSpecExt};

    #[test]
    fn a_spec_lists_with_its_schemas_and_hints_and_a_bare_tool_takes_any_object() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Out {
            n: u32,
        }
        let spec = ToolSpec::new::<String, Out>("count")
            .title("Count")
            .annotations(Annotations {
                read_only_hint: Some(true),
                ..Annotations::default()
            });
        let tool = serde_json::to_value(listing("count", Some(&spec)).unwrap()).unwrap();
        assert_eq!(tool["title"], "Count");
        assert_eq!(tool["annotations"], json!({ "readOnlyHint": true }));
        assert_eq!(tool["outputSchema"]["type"], "object");
        // The spec's input schema, as the tool declared it.
        assert_eq!(tool["inputSchema"]["type"], "string");

        let text = ToolSpec::new::<String, String>("echo");
        let tool = serde_json::to_value(listing("echo", Some(&text)).unwrap()).unwrap();
        assert!(tool.get("outputSchema").is_none(), "{tool}");

        let bare = serde_json::to_value(listing("bare", None).unwrap()).unwrap();
        assert_eq!(bare["inputSchema"], json!({ "type": "object" }));
        assert_eq!(bare["name"], "bare");
    }

    #[test]
    fn errors_map_to_is_error_results_and_an_unknown_tool_to_invalid_params() {
        let r = response(None, Err(ToolError::msg("boom"))).unwrap();
        assert_eq!(r.is_error, Some(true));
        let r = response(None, Ok(json!("hi"))).unwrap();
        assert_eq!(r.is_error, Some(false));
        assert!(r.structured_content.is_none());
        let e = response(None, Err(ToolError::UnknownTool("nope".into()))).unwrap_err();
        assert_eq!(e.code.0, -32602);
    }
}

//! MCP spans (the semantic conventions' `tools/call get_weather`, with
//! `mcp.method.name`, `mcp.session.id`, `jsonrpc.request.id`,
//! `server.address`, `network.transport`, ...) joined to the call they
//! belong to.
//!
//! - Inside a tool call (the framework's `execute_tool` span, with the MCP
//!   client's `tools/call` beneath it): the MCP span is a `log` fact of
//!   that call, logger `mcp`, at the span's start, not a call of its own.
//! - A `tools/call` span in no tool call (a framework that only
//!   instruments its MCP client) is the call itself, and its MCP
//!   attributes are that call's `mcp` log fact too.
//! - Any other MCP span (`initialize`, `tools/list`, a notification) is
//!   an `mcp` log fact of the call it is in, or of the run.
//!
//! The log's data: the method, the MCP details under short names (those
//! present: `session_id`, `request_id`, `tool`, `server`, `transport`,
//! `protocol_version`), the span's name, id, duration and status, and all
//! of its attributes as sent (nothing dropped).

use serde_json::{json, Map, Value};

use reel::fact::{Level, Log};

use super::error_of;
use crate::decode::SpanIn;

/// The MCP method of an MCP span (`mcp.method.name`).
pub(super) fn method(span: &SpanIn) -> Option<&str> {
    span.str("mcp.method.name")
}

/// Whether the span is an MCP `tools/call`.
pub(super) fn is_tool_call(span: &SpanIn) -> bool {
    method(span) == Some("tools/call")
}

/// The short names the log lifts out of the attributes: (name, keys).
const DETAILS: &[(&str, &[&str])] = &[
    ("session_id", &["mcp.session.id"]),
    ("request_id", &["jsonrpc.request.id"]),
    ("tool", &["gen_ai.tool.name"]),
    ("transport", &["network.transport"]),
    ("protocol_version", &["mcp.protocol.version"]),
];

/// An MCP span as the `mcp` log fact of its call.
pub(super) fn log(span: &SpanIn) -> Log {
    let a = &span.attributes;
    let mut data = Map::new();
    data.insert("method".into(), json!(method(span)));
    for (name, keys) in DETAILS {
        if let Some(v) = keys.iter().find_map(|k| a.get(*k)) {
            data.insert((*name).into(), v.clone());
        }
    }
    let server: Map<String, Value> = [("address", "server.address"), ("port", "server.port")]
        .into_iter()
        .filter_map(|(name, key)| a.get(key).map(|v| (name.to_owned(), v.clone())))
        .collect();
    if !server.is_empty() {
        data.insert("server".into(), Value::Object(server));
    }
    let error = error_of(span);
    data.insert(
        "span".into(),
        json!({
            "name": span.name,
            "span_id": span.span_id,
            "duration_ns": span.end - span.start,
            "status": {"code": span.status_code, "message": span.status_message},
        }),
    );
    if let Some(e) = &error {
        data.insert("error".into(), json!(e));
    }
    data.insert("attributes".into(), Value::Object(a.clone()));
    Log {
        level: if error.is_some() {
            Level::Error
        } else {
            Level::Info
        },
        logger: Some("mcp".into()),
        subflow: None,
        data: Value::Object(data),
        delivered: false,
        in_flight: Vec::new(),
    }
}

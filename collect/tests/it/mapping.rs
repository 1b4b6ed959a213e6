//! The mapping of the book's "Record any framework" page, row by row:
//! each case a few spans in, the facts out.

use std::sync::Arc;

use reel_collect::decode::SpanIn;
use reel_collect::map::map_trace;
use serde_json::{json, Map, Value};

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn span(id: &str, parent: Option<&str>, name: &str, times: (u64, u64), a: Value) -> SpanIn {
    SpanIn {
        trace_id: "ab".repeat(16),
        span_id: id.repeat(8),
        parent: parent.map(|p| p.repeat(8)),
        name: name.into(),
        start: 1_000 + times.0,
        end: 1_000 + times.1,
        status_code: 0,
        status_message: String::new(),
        attributes: attrs(a),
        events: Vec::new(),
        resource: Arc::new(attrs(json!({
            "service.name": "svc", "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.language": "python"
        }))),
    }
}

fn root() -> SpanIn {
    span(
        "01",
        None,
        "invoke_agent a",
        (0, 100),
        json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}),
    )
}

/// The facts of `spans` as (kind, call, data).
fn check(spans: Vec<SpanIn>) -> Vec<(String, Value, Value)> {
    let (_, facts) = map_trace(spans).expect("a run");
    facts
        .into_iter()
        .map(|f| {
            let v = serde_json::to_value(&f).unwrap();
            (
                v["kind"].as_str().unwrap().to_owned(),
                v["call"].clone(),
                v["data"].clone(),
            )
        })
        .collect()
}

#[test]
fn the_root_is_the_run_with_its_identity_producer_and_labels() {
    let mut r = root();
    r.attributes.insert("user.id".into(), json!("ana"));
    r.attributes
        .insert("gen_ai.conversation.id".into(), json!("conv-1"));
    r.attributes.insert("session.id".into(), json!("s-9"));
    r.status_code = 2;
    let facts = check(vec![r]);
    let started = &facts[0].2;
    assert_eq!(
        started["identity"],
        json!({"tenant": null, "principal": "ana", "conversation": "conv-1"})
    );
    assert_eq!(started["session_id"], "s-9");
    assert_eq!(started["producer"], json!({"name": "svc", "version": ""}));
    assert_eq!(started["labels"]["gen_ai.agent.name"], "a");
    assert_eq!(started["labels"]["telemetry.sdk.language"], "python");
    assert_eq!(started["labels"]["reel.source"], "otlp");
    assert_eq!(facts[1].2, json!({"status": "failed"}));
}

#[test]
fn a_tool_span_is_a_call_and_absent_content_stays_absent() {
    let tool = span(
        "02",
        Some("01"),
        "execute_tool search",
        (10, 30),
        json!({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"
        }),
    );
    let facts = check(vec![root(), tool]);
    let call = "02".repeat(8);
    assert_eq!(facts[1].0, "call.started");
    assert_eq!(facts[1].1, json!(call), "no call id: the span id");
    assert_eq!(
        facts[1].2["args"],
        Value::Null,
        "no arguments captured: none"
    );
    assert_eq!(facts[1].2["protocol"], "otel");
    assert_eq!(
        facts[2].2["outcome"],
        json!({"status": "ok", "result": null})
    );
    assert_eq!(facts[2].2["duration_ns"], 20);
}

#[test]
fn error_type_fails_a_call_and_its_exception_event_is_a_log() {
    let mut tool = span(
        "02",
        Some("01"),
        "execute_tool pay",
        (10, 30),
        json!({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "t1",
            "error.type": "TimeoutError", "gen_ai.tool.call.arguments": "not json"
        }),
    );
    tool.events.push((
        1_020,
        "exception".into(),
        attrs(json!({"exception.message": "slow"})),
    ));
    let facts = check(vec![root(), tool]);
    let kinds: Vec<&str> = facts.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run.started",
            "call.started",
            "log",
            "call.ended",
            "run.ended"
        ]
    );
    assert_eq!(
        facts[1].2["args"], "not json",
        "text that is not JSON kept as text"
    );
    assert_eq!(facts[2].2["level"], "error");
    assert_eq!(facts[2].2["data"], json!({"exception.message": "slow"}));
    assert_eq!(
        facts[3].2["outcome"],
        json!({"status": "error", "error": "slow"})
    );
}

#[test]
fn model_spans_are_model_called_under_either_generation_of_names() {
    let current = span(
        "02",
        Some("01"),
        "chat m",
        (5, 9),
        json!({
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3,
            "gen_ai.usage.output_tokens": 4, "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.input.messages": "[{\"role\":\"user\"}]"
        }),
    );
    let older = span(
        "03",
        Some("01"),
        "chat m",
        (20, 29),
        json!({
            "gen_ai.system": "openai", "gen_ai.request.model": "m",
            "gen_ai.usage.prompt_tokens": 5, "gen_ai.usage.completion_tokens": 6
        }),
    );
    let facts = check(vec![root(), current, older]);
    assert_eq!(facts[1].0, "model.called");
    assert_eq!(
        facts[1].2,
        json!({
            "operation": "chat", "provider": "openai", "model": "m", "input_tokens": 3,
            "output_tokens": 4, "finish_reasons": ["stop"], "duration_ns": 4,
            "input": [{"role": "user"}]
        })
    );
    assert_eq!(
        facts[2].2,
        json!({
            "operation": "chat", "provider": "openai", "model": "m", "input_tokens": 5,
            "output_tokens": 6, "duration_ns": 9
        }),
        "no content captured: none kept"
    );
}

#[test]
fn a_sub_agent_is_a_call_with_its_calls_beneath_it_and_an_unknown_span_is_kept() {
    let tool = span(
        "02",
        Some("01"),
        "execute_tool ask",
        (10, 90),
        json!({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "c1"
        }),
    );
    let sub = span(
        "03",
        Some("02"),
        "invoke_agent helper",
        (20, 80),
        json!({
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"
        }),
    );
    let http = span(
        "04",
        Some("03"),
        "POST",
        (30, 40),
        json!({"http.request.method": "POST"}),
    );
    let inner = span(
        "05",
        Some("03"),
        "execute_tool lookup",
        (50, 60),
        json!({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "c1"
        }),
    );
    let facts = check(vec![inner, http, sub, tool, root()]);
    let shape: Vec<(&str, Value)> = facts.iter().map(|f| (f.0.as_str(), f.1.clone())).collect();
    let sub_id = json!("03".repeat(8));
    let dup = json!(format!("c1@{}", "05".repeat(8)));
    assert_eq!(
        shape,
        [
            ("run.started", Value::Null),
            ("call.started", json!("c1")),
            ("call.started", sub_id.clone()),
            ("otel.span", sub_id.clone()),
            ("call.started", dup.clone()),
            ("call.ended", dup.clone()),
            ("call.ended", sub_id.clone()),
            ("call.ended", json!("c1")),
            ("run.ended", Value::Null),
        ]
    );
    assert_eq!(facts[2].2["tool_name"], "agent:helper");
    assert_eq!(facts[2].2["parent_call"], "c1");
    assert_eq!(
        facts[4].2["parent_call"], sub_id,
        "a repeated call id made unique"
    );
    assert_eq!(
        facts[3].2["attributes"],
        json!({"http.request.method": "POST"})
    );
}

#[test]
fn vercel_and_openinference_tool_spans_are_calls_too() {
    let vercel = span(
        "02",
        Some("01"),
        "ai.toolCall",
        (1, 2),
        json!({
            "ai.toolCall.name": "weather", "ai.toolCall.id": "v1",
            "ai.toolCall.args": "{\"city\":\"Oslo\"}", "ai.toolCall.result": "{\"t\":3}"
        }),
    );
    let oi = span(
        "03",
        Some("01"),
        "lookup",
        (3, 4),
        json!({
            "openinference.span.kind": "TOOL", "tool.name": "lookup",
            "input.value": "{\"q\":1}", "output.value": "found",
            "tool.description": "Looks a term up.",
            "tool.parameters": "{\"type\":\"object\",\"required\":[\"q\"]}"
        }),
    );
    let facts = check(vec![root(), vercel, oi]);
    assert_eq!(facts[1].2["tool_name"], "weather");
    assert_eq!(facts[1].2["args"], json!({"city": "Oslo"}));
    assert_eq!(facts[2].2["outcome"]["result"], "{\"t\":3}", "as recorded");
    assert_eq!(facts[3].2["tool_name"], "lookup");
    assert_eq!(
        facts[3].2["args"],
        json!({"q": 1}),
        "the call's input, not the tool's schema"
    );
    assert_eq!(facts[4].2["outcome"]["result"], "found");
    // The tool's definition, as the span carried it; none carried, none.
    let spec = &facts[3].2["spec"];
    assert_eq!(
        (&spec["name"], &spec["description"], &spec["input_schema"]),
        (
            &json!("lookup"),
            &json!("Looks a term up."),
            &json!({"type": "object", "required": ["q"]})
        )
    );
    assert_eq!(facts[1].2["spec"], Value::Null);
}

/// An MCP span as the semantic conventions write it.
fn mcp_span(id: &str, parent: &str, method: &str, tool: Option<&str>, times: (u64, u64)) -> SpanIn {
    let mut a = json!({
        "mcp.method.name": method, "mcp.session.id": "sess-1",
        "mcp.protocol.version": "2025-06-18", "jsonrpc.request.id": "7",
        "server.address": "tools.example", "server.port": 8080,
        "network.transport": "tcp",
    });
    let name = match tool {
        Some(t) => {
            a["gen_ai.tool.name"] = json!(t);
            a["gen_ai.operation.name"] = json!("execute_tool");
            format!("{method} {t}")
        }
        None => method.to_owned(),
    };
    span(id, Some(parent), &name, times, a)
}

/// The MCP spans' rows, one case each: (spans besides the root, the facts'
/// (kind, call) after `run.started` and before `run.ended`).
#[test]
fn mcp_spans_join_the_call_they_belong_to() {
    let tool = |id: &str, parent: &str| {
        span(
            id,
            Some(parent),
            "execute_tool weather",
            (10, 90),
            json!({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather",
                   "gen_ai.tool.call.id": "c1"}),
        )
    };
    let agent = span(
        "06",
        Some("01"),
        "invoke_agent helper",
        (5, 95),
        json!({"gen_ai.operation.name": "invoke_agent"}),
    );
    let http = span("04", Some("03"), "POST", (30, 40), json!({}));
    let c1 = json!("c1");
    let own = json!("03".repeat(8));
    let helper = json!("06".repeat(8));
    type Case<'a> = (&'a str, Vec<SpanIn>, Vec<(&'a str, Value)>);
    let cases: Vec<Case> = vec![
        (
            "a tools/call in a tool call: an mcp log of that call, its children the call's",
            vec![
                tool("02", "01"),
                mcp_span("03", "02", "tools/call", Some("weather"), (20, 80)),
                http.clone(),
            ],
            vec![
                ("call.started", c1.clone()),
                ("log", c1.clone()),
                ("otel.span", c1.clone()),
                ("call.ended", c1.clone()),
            ],
        ),
        (
            "a tools/call in no tool call: the call itself, with its mcp log",
            vec![mcp_span(
                "03",
                "01",
                "tools/call",
                Some("weather"),
                (20, 80),
            )],
            vec![
                ("call.started", own.clone()),
                ("log", own.clone()),
                ("call.ended", own.clone()),
            ],
        ),
        (
            "a tools/call in an agent's call: a call beneath the agent's",
            vec![
                agent.clone(),
                mcp_span("03", "06", "tools/call", Some("weather"), (20, 80)),
            ],
            vec![
                ("call.started", helper.clone()),
                ("call.started", own.clone()),
                ("log", own.clone()),
                ("call.ended", own.clone()),
                ("call.ended", helper.clone()),
            ],
        ),
        (
            "initialize and tools/list: mcp logs of the run",
            vec![
                mcp_span("03", "01", "initialize", None, (2, 3)),
                mcp_span("05", "01", "tools/list", None, (4, 5)),
            ],
            vec![("log", Value::Null), ("log", Value::Null)],
        ),
    ];
    for (case, spans, want) in cases {
        let mut all = vec![root()];
        all.extend(spans);
        let facts = check(all);
        let got: Vec<(&str, Value)> = facts[1..facts.len() - 1]
            .iter()
            .map(|f| (f.0.as_str(), f.1.clone()))
            .collect();
        assert_eq!(got, want, "{case}");
        for f in facts.iter().filter(|f| f.0 == "log") {
            assert_eq!(f.2["logger"], "mcp", "{case}");
        }
        for f in facts.iter().filter(|f| f.0 == "call.started") {
            assert_ne!(f.2["tool_name"], "tools/call weather", "{case}");
        }
    }

    // What the log holds: the method and the MCP details under short
    // names, the span, and every attribute as sent.
    let facts = check(vec![
        root(),
        tool("02", "01"),
        mcp_span("03", "02", "tools/call", Some("weather"), (20, 80)),
    ]);
    let log = &facts[2].2;
    assert_eq!(log["level"], "info");
    let data = &log["data"];
    assert_eq!(data["method"], "tools/call");
    assert_eq!(data["session_id"], "sess-1");
    assert_eq!(data["request_id"], "7");
    assert_eq!(data["tool"], "weather");
    assert_eq!(data["transport"], "tcp");
    assert_eq!(data["protocol_version"], "2025-06-18");
    assert_eq!(
        data["server"],
        json!({"address": "tools.example", "port": 8080})
    );
    assert_eq!(data["span"]["name"], "tools/call weather");
    assert_eq!(data["span"]["duration_ns"], 60);
    assert_eq!(data["attributes"]["mcp.session.id"], "sess-1");
    assert!(data.get("error").is_none());
    assert_eq!(facts[1].2["tool_name"], "weather");

    // A failed MCP request: the log at level error, naming the error; the
    // call's outcome stays its tool span's.
    let mut failed = mcp_span("03", "02", "tools/call", Some("weather"), (20, 80));
    failed
        .attributes
        .insert("error.type".into(), json!("-32602"));
    let facts = check(vec![root(), tool("02", "01"), failed]);
    assert_eq!(facts[2].2["level"], "error");
    assert_eq!(facts[2].2["data"]["error"], "-32602");
    assert_eq!(facts[3].2["outcome"]["status"], "ok");
}

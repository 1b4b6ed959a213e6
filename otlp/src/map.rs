//! The mapping: one recorded stream (a run, or a call outside any run)
//! and its facts to OTLP spans, following the OpenTelemetry GenAI
//! semantic conventions (see the crate's README for the version).

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span, Status};
use reel_core::fact::{
    CallEnded, CallOutcome, CallStarted, EffectOutcome, ElicitOutcome, Fact, FactKind, Producer,
    RunEnded, RunStarted, TeardownOutcome,
};
use reel_core::run::RunRecord;
use serde_json::Value;
use sha2::{Digest, Sha256};

mod call;
mod events;
mod ids;

pub(crate) use call::mcp_initialize;
use call::*;
use events::*;
pub use ids::{derived_span_id, derived_trace_id, StreamId, TraceParent};

/// What the mapping exports beside the spans' shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Export content: a call's arguments and result, progress payloads,
    /// log data, elicitation answers, effect requests and outcomes, call
    /// outputs. Off by default; when on it is the recorded (already
    /// redacted) data, never more.
    pub content: bool,
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn s(key: &str, value: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.into()))
}

fn int(key: &str, value: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(value))
}

fn boolean(key: &str, value: bool) -> KeyValue {
    kv(key, any_value::Value::BoolValue(value))
}

fn json(key: &str, value: &Value) -> KeyValue {
    s(key, value.to_string())
}

fn nanos(at: i64) -> u64 {
    u64::try_from(at).unwrap_or(0)
}

/// One call's span while its facts are read.
struct CallSpan {
    span: Span,
    started: u64,
    tool: String,
    /// A tool call (reel's, or an MCP `tools/call`), not another MCP
    /// request.
    tool_call: bool,
    /// Recorded from MCP (`protocol` = `mcp`).
    mcp: bool,
    ended: bool,
}

/// The spans of one stream: for a run, an `invoke_agent {agent}` span
/// (the agent: the recorded producer's name) and one span per call
/// (nested dispatch as child spans), named `execute_tool
/// {gen_ai.tool.name}`, or for a call recorded from MCP
/// `{mcp.method.name} {target}` by the OpenTelemetry MCP conventions; for
/// a call outside any run, its span alone, the root of its own trace.
/// Facts become span events. A `traceparent` label (recorded from MCP
/// `_meta`, or given by the host) puts the spans into the caller's trace
/// under the caller's span.
///
/// Times are the recorded ones: the stream's first fact's `at` (wall
/// clock) plus each fact's monotonic `offset` from it, so spans and events
/// keep the recorded order and distances even if the wall clock stepped.
/// A call's span starts at its `call.started` and lasts its recorded
/// `duration_ns`; the run's ends at `run.ended`; a span that never ended
/// ends at the stream's last fact.
pub fn stream_spans(record: &RunRecord, facts: &[Fact], options: &Options) -> Vec<Span> {
    let id = StreamId::of(record, facts);
    let outside = record.outside_run.is_some();
    let base_at = facts.first().map_or(record.started_at, |f| f.at);
    let base_offset = facts.first().map_or(0, |f| f.offset);
    let time =
        |f: &Fact| nanos(base_at.saturating_add(f.offset.saturating_sub(base_offset) as i64));

    let mut run_span: Option<Span> = None;
    let mut calls: BTreeMap<String, CallSpan> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut last_time = nanos(base_at);
    let mut trace_id = derived_trace_id(&id).to_vec();
    let mut run_parent: Vec<u8> = Vec::new();
    let mut trace_state = String::new();
    let mut run_session: Option<String> = None;
    let mcp_session = McpSession::of(record, facts);

    for fact in facts {
        let t = time(fact);
        last_time = last_time.max(t);
        match (&fact.kind, &fact.call) {
            (FactKind::RunStarted(r), _) => {
                run_session = r.session_id.clone();
                if let Some(tp) = r
                    .labels
                    .get("traceparent")
                    .and_then(|v| TraceParent::parse(v))
                {
                    trace_id = tp.trace_id.to_vec();
                    run_parent = tp.span_id.to_vec();
                    trace_state = r.labels.get("tracestate").cloned().unwrap_or_default();
                }
                run_span = Some(agent_span(
                    r,
                    &id,
                    t,
                    trace_id.clone(),
                    run_parent.clone(),
                    trace_state.clone(),
                ));
            }
            (FactKind::RunEnded(e), _) => {
                if let Some(span) = run_span.as_mut() {
                    end_run_span(span, e, t);
                }
            }
            (FactKind::CallStarted(c), Some(call)) => {
                let (parent, state) = match (&c.parent_call, &c.outside_run) {
                    (Some(p), _) => (derived_span_id(&id, Some(p)).to_vec(), trace_state.clone()),
                    (None, Some(o)) => {
                        match o
                            .labels
                            .get("traceparent")
                            .and_then(|v| TraceParent::parse(v))
                        {
                            Some(tp) => {
                                trace_id = tp.trace_id.to_vec();
                                (
                                    tp.span_id.to_vec(),
                                    o.labels.get("tracestate").cloned().unwrap_or_default(),
                                )
                            }
                            None => (Vec::new(), String::new()),
                        }
                    }
                    (None, None) if outside => (Vec::new(), String::new()),
                    (None, None) => (derived_span_id(&id, None).to_vec(), trace_state.clone()),
                };
                if c.outside_run.is_some() {
                    trace_state = state.clone();
                }
                let request = Request::of(c);
                let span = Span {
                    trace_id: trace_id.clone(),
                    span_id: derived_span_id(&id, Some(call)).to_vec(),
                    trace_state: state,
                    parent_span_id: parent,
                    name: request.span_name(),
                    kind: SpanKind::Internal as i32,
                    start_time_unix_nano: t,
                    attributes: call_attributes(
                        c,
                        &request,
                        run_session.as_deref(),
                        &mcp_session,
                        options,
                    ),
                    ..Default::default()
                };
                order.push(call.clone());
                calls.insert(
                    call.clone(),
                    CallSpan {
                        span,
                        started: t,
                        tool: c.tool_name.clone(),
                        tool_call: request.is_tool_call(),
                        mcp: request.is_mcp(),
                        ended: false,
                    },
                );
            }
            (FactKind::CallEnded(e), Some(call)) => {
                if let Some(cs) = calls.get_mut(call) {
                    end_call_span(cs, e, time(fact), options);
                }
            }
            (kind, call) => {
                let event = fact_event(
                    kind,
                    t,
                    call.as_deref()
                        .and_then(|c| calls.get(c))
                        .map(|c| c.tool.as_str()),
                    options,
                );
                let Some(event) = event else { continue };
                let target = match call.as_deref().and_then(|c| calls.get_mut(c)) {
                    Some(cs) => Some(&mut cs.span),
                    None => run_span.as_mut(),
                };
                if let Some(span) = target {
                    span.events.push(event);
                }
            }
        }
    }

    let mut out = Vec::new();
    if let Some(mut span) = run_span {
        if span.end_time_unix_nano == 0 {
            span.end_time_unix_nano = last_time;
            span.attributes
                .push(s("reel.run.status", record.state.as_str()));
        }
        out.push(span);
    }
    for call in order {
        let mut cs = calls.remove(&call).expect("ordered calls are kept");
        if !cs.ended {
            cs.span.end_time_unix_nano = last_time.max(cs.span.start_time_unix_nano);
            cs.span.attributes.push(s("reel.call.status", "unended"));
        }
        out.push(cs.span);
    }
    out
}

/// The run's span, from its `run.started` at `t`: named after the agent,
/// in the trace (under the parent span) its `traceparent` gives.
fn agent_span(
    r: &RunStarted,
    id: &StreamId,
    t: u64,
    trace_id: Vec<u8>,
    parent: Vec<u8>,
    trace_state: String,
) -> Span {
    let agent = agent_name(&r.producer);
    let mut attributes = vec![s("gen_ai.operation.name", "invoke_agent")];
    if let Some(agent) = agent {
        attributes.push(s("gen_ai.agent.name", agent));
    }
    attributes.extend([
        s("reel.run.id", r.run_id.clone()),
        s(
            "reel.producer",
            format!("{} {}", r.producer.name, r.producer.version),
        ),
    ]);
    if let Some(c) = r.identity.as_ref().and_then(|i| i.conversation.clone()) {
        attributes.push(s("gen_ai.conversation.id", c));
    }
    identity_attributes(
        &mut attributes,
        r.identity.as_ref(),
        r.session_id.as_deref(),
    );
    for (k, v) in &r.labels {
        if k != "traceparent" && k != "tracestate" {
            attributes.push(s(&format!("reel.label.{k}"), v.clone()));
        }
    }
    Span {
        trace_id,
        span_id: derived_span_id(id, None).to_vec(),
        trace_state,
        parent_span_id: parent,
        name: match agent {
            Some(agent) => format!("invoke_agent {agent}"),
            None => "invoke_agent".into(),
        },
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: t,
        attributes,
        ..Default::default()
    }
}

/// The run's span ends at `t` with the run's status.
fn end_run_span(span: &mut Span, e: &RunEnded, t: u64) {
    span.end_time_unix_nano = t;
    span.attributes
        .push(s("reel.run.status", e.status.as_str()));
    span.status = Some(match e.status {
        reel_core::fact::RunStatus::Completed => Status {
            code: StatusCode::Ok as i32,
            message: String::new(),
        },
        other => Status {
            code: StatusCode::Error as i32,
            message: format!("run {other}"),
        },
    });
    if e.status != reel_core::fact::RunStatus::Completed {
        span.attributes.push(s("error.type", e.status.as_str()));
    }
}

/// A call's span ends: at its recorded duration from its start (or at
/// `fact_time`, the `call.ended`'s own time, when the duration is absent),
/// with its status and, for a failure, its `error.type`.
fn end_call_span(cs: &mut CallSpan, e: &CallEnded, fact_time: u64, options: &Options) {
    cs.ended = true;
    // The recorded duration from the recorded start; the
    // fact's own offset when the duration is absent.
    let end = if e.duration_ns > 0 {
        cs.started.saturating_add(e.duration_ns)
    } else {
        fact_time
    };
    cs.span.end_time_unix_nano = end.max(cs.span.start_time_unix_nano);
    let a = &mut cs.span.attributes;
    a.push(s("reel.call.status", e.status().as_str()));
    match &e.outcome {
        CallOutcome::Ok { result } => {
            if options.content {
                a.push(json(content_key(cs.tool_call, "result"), result));
            }
            // An MCP tool's own failure is a result
            // (`CallToolResult.isError`), not a JSON-RPC
            // error: `tool_error` by the MCP conventions.
            let failed =
                cs.mcp && cs.tool_call && result.get("isError") == Some(&Value::Bool(true));
            if failed {
                a.push(s("error.type", "tool_error"));
            }
            cs.span.status = Some(Status {
                code: if failed {
                    StatusCode::Error
                } else {
                    StatusCode::Ok
                } as i32,
                message: String::new(),
            });
        }
        CallOutcome::Error { error, .. } => {
            match json_rpc_error(error).filter(|_| cs.mcp) {
                // A protocol error: its JSON-RPC code, as
                // `rpc.response.status_code` and as
                // `error.type`.
                Some(Some(code)) => {
                    a.push(s("rpc.response.status_code", code.to_string()));
                    a.push(s("error.type", code.to_string()));
                }
                // A JSON-RPC error without a usable code.
                Some(None) => a.push(s("error.type", "_OTHER")),
                // The call's own failure (for a proxied MCP
                // call: the session ended unanswered).
                None => a.push(s("error.type", "tool_error")),
            }
            cs.span.status = Some(Status {
                code: StatusCode::Error as i32,
                message: if options.content {
                    error.clone()
                } else {
                    String::new()
                },
            });
        }
        CallOutcome::Aborted { .. } => {
            a.push(s("error.type", "cancelled"));
            cs.span.status = Some(Status {
                code: StatusCode::Error as i32,
                message: "cancelled".into(),
            });
        }
    }
}

/// The agent a run's span is named after (`gen_ai.agent.name`): the
/// recorded producer's name, the program the host says recorded the run
/// (`RecorderConfig::producer`; `reel-recorder` unless the host names its
/// agent). `None` when it is empty.
///
/// The GenAI conventions name an agent invocation span
/// `invoke_agent {gen_ai.agent.name}`, and `invoke_agent` alone only when
/// no name is available (open-telemetry/semantic-conventions-genai,
/// `docs/gen-ai/gen-ai-agent-spans.md`, the invoke agent spans: "**Span
/// name** SHOULD be `invoke_agent {gen_ai.agent.name}` if
/// `gen_ai.agent.name` is readily available"). The name is low
/// cardinality, as a span name must be: the run id is not, and stays an
/// attribute (`reel.run.id`). A call outside any run has no agent span:
/// its root is its own tool's span, named after the tool.
fn agent_name(producer: &Producer) -> Option<&str> {
    Some(producer.name.as_str()).filter(|n| !n.trim().is_empty())
}

fn identity_attributes(
    attributes: &mut Vec<KeyValue>,
    identity: Option<&reel_core::fact::Identity>,
    session: Option<&str>,
) {
    if let Some(i) = identity {
        if let Some(t) = &i.tenant {
            attributes.push(s("reel.tenant", t.clone()));
        }
        if let Some(p) = &i.principal {
            attributes.push(s("reel.principal", p.clone()));
        }
    }
    if let Some(session) = session {
        attributes.push(s("reel.session.id", session));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::fact::{
        CallEnded, CallMode, OutsideRun, Producer, RunEnded, RunStarted, RunStatus,
    };
    use serde_json::json;

    #[test]
    fn traceparent_parses_only_the_w3c_form() {
        let tp = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(hex::encode(tp.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex::encode(tp.span_id), "00f067aa0ba902b7");
        assert_eq!(tp.flags, 1);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn derived_ids_are_stable_and_keep_streams_and_calls_apart() {
        let id = |key: &str| StreamId::new(key, 7, &producer());
        assert_eq!(
            derived_trace_id(&id("run-1")),
            derived_trace_id(&id("run-1"))
        );
        assert_ne!(
            derived_trace_id(&id("run-1")),
            derived_trace_id(&id("run-2"))
        );
        let run = derived_span_id(&id("run-1"), None);
        let c1 = derived_span_id(&id("run-1"), Some("c1"));
        assert_eq!(c1, derived_span_id(&id("run-1"), Some("c1")));
        assert_ne!(run, c1);
        // Call ids repeat across runs ("c1"); their spans do not.
        assert_ne!(c1, derived_span_id(&id("run-2"), Some("c1")));
        // Length-prefixed parts: no collision by moving a boundary.
        assert_ne!(
            derived_span_id(&id("ab"), Some("c")),
            derived_span_id(&id("a"), Some("bc"))
        );
    }

    /// A run, its call `c1`, and the run's end, as a host with `producer`
    /// recorded them starting at `at`.
    fn recorded(run_id: &str, at: i64, producer: Producer) -> Vec<Fact> {
        let mut facts = vec![
            fact(
                0,
                0,
                None,
                FactKind::RunStarted(RunStarted {
                    run_id: run_id.into(),
                    session_id: None,
                    identity: None,
                    producer,
                    labels: Default::default(),
                    teardown_scopes: vec![],
                }),
            ),
            fact(1, 10, Some("c1"), started("c1", None, None)),
            fact(2, 20, Some("c1"), ended(10)),
        ];
        for f in &mut facts {
            f.at += at;
        }
        facts
    }

    fn ids(facts: &[Fact]) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        let record = RunRecord::from_first(&facts[0]).unwrap();
        stream_spans(&record, facts, &Options::default())
            .into_iter()
            .map(|s| (s.trace_id, s.span_id, s.parent_span_id))
            .collect()
    }

    #[test]
    fn two_recordings_of_one_run_id_never_share_ids_and_each_keeps_its_own() {
        // Two hosts run the same demo: the same run id, call ids and
        // producer, recorded at different instants (or by another program).
        let here = recorded("demo", 0, producer());
        let there = recorded("demo", 1_000, producer());
        let other = recorded(
            "demo",
            0,
            Producer {
                name: "other-agent".into(),
                version: "0".into(),
            },
        );
        let (a, b, c) = (ids(&here), ids(&there), ids(&other));
        for (x, y) in [(&a, &b), (&a, &c), (&b, &c)] {
            for (one, two) in x.iter().zip(y.iter()) {
                assert_ne!(one.0, two.0, "trace ids collide");
                assert_ne!(one.1, two.1, "span ids collide");
            }
        }
        // Exported again (or live, from the same facts): the same ids.
        assert_eq!(ids(&here), a);
        assert_eq!(ids(&recorded("demo", 0, producer())), a);
        // The record's own start, when the stream is read from its middle.
        let record = RunRecord::from_first(&here[0]).unwrap();
        assert_eq!(
            StreamId::of(&record, &here[1..]),
            StreamId::of(&record, &[])
        );
    }

    fn fact(seq: u64, offset: u64, call: Option<&str>, kind: FactKind) -> Fact {
        Fact {
            seq,
            at: 1_000_000_000 + offset as i64 + 7, // a wall clock that drifts from the offsets
            offset,
            call: call.map(str::to_owned),
            kind,
        }
    }

    fn started(call: &str, parent: Option<&str>, outside: Option<OutsideRun>) -> FactKind {
        FactKind::CallStarted(CallStarted {
            call_id: call.into(),
            tool_name: "t".into(),
            tool_id: None,
            parent_call: parent.map(str::to_owned),
            iteration: 0,
            invocation_id: None,
            mode: CallMode::Async,
            protocol: None,
            platform: None,
            client_info: None,
            args: json!({ "q": "needle" }),
            wanted: None,
            attached: None,
            spec: None,
            dispatch_tools: None,
            outside_run: outside.map(Box::new),
        })
    }

    fn ended(duration_ns: u64) -> FactKind {
        FactKind::CallEnded(CallEnded {
            outcome: CallOutcome::Ok {
                result: json!("haystack"),
            },
            duration_ns,
            invocation_id: None,
        })
    }

    fn producer() -> Producer {
        Producer {
            name: "test".into(),
            version: "0".into(),
        }
    }

    #[test]
    fn a_run_is_the_parent_of_its_calls_and_a_dispatch_of_its_child() {
        let facts = vec![
            fact(
                0,
                0,
                None,
                FactKind::RunStarted(RunStarted {
                    run_id: "r".into(),
                    session_id: None,
                    identity: None,
                    producer: producer(),
                    labels: Default::default(),
                    teardown_scopes: vec![],
                }),
            ),
            fact(1, 10, Some("c1"), started("c1", None, None)),
            fact(2, 20, Some("c2"), started("c2", Some("c1"), None)),
            fact(3, 30, Some("c2"), ended(10)),
            fact(4, 40, Some("c1"), ended(30)),
            fact(
                5,
                50,
                None,
                FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }),
            ),
        ];
        let record = RunRecord::from_first(&facts[0]).unwrap();
        let spans = stream_spans(&record, &facts, &Options::default());
        let [run, c1, c2] = &spans[..] else {
            panic!("{spans:?}")
        };
        // Named after the agent: the recorded producer.
        assert_eq!(run.name, "invoke_agent test");
        assert_eq!(run.attributes[1].key, "gen_ai.agent.name");
        assert!(run.parent_span_id.is_empty());
        assert_eq!(c1.parent_span_id, run.span_id);
        assert_eq!(c2.parent_span_id, c1.span_id);
        let id = StreamId::of(&record, &facts);
        assert!(spans.iter().all(|s| s.trace_id == derived_trace_id(&id)));
        // The first fact's `at`, then offsets: 1e9 + 10 .. + 30 for c1.
        assert_eq!(
            (c1.start_time_unix_nano, c1.end_time_unix_nano),
            (1_000_000_017, 1_000_000_047)
        );
        assert_eq!(run.end_time_unix_nano, 1_000_000_057);
        let keys: Vec<&str> = c1.attributes.iter().map(|a| a.key.as_str()).collect();
        assert!(!keys.contains(&"gen_ai.tool.call.arguments"), "{keys:?}");
        assert!(!keys.contains(&"gen_ai.tool.call.result"), "{keys:?}");

        let with = stream_spans(&record, &facts, &Options { content: true });
        let keys: Vec<&str> = with[1].attributes.iter().map(|a| a.key.as_str()).collect();
        assert!(keys.contains(&"gen_ai.tool.call.arguments"), "{keys:?}");
        assert!(keys.contains(&"gen_ai.tool.call.result"), "{keys:?}");
    }

    #[test]
    fn a_run_labelled_with_a_traceparent_joins_the_callers_trace() {
        let labels = [(
            "traceparent".to_owned(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
        )]
        .into_iter()
        .collect();
        let facts = vec![
            fact(
                0,
                0,
                None,
                FactKind::RunStarted(RunStarted {
                    run_id: "r".into(),
                    session_id: None,
                    identity: None,
                    producer: producer(),
                    labels,
                    teardown_scopes: vec![],
                }),
            ),
            fact(1, 10, Some("c1"), started("c1", None, None)),
            fact(2, 20, Some("c1"), ended(10)),
        ];
        let record = RunRecord::from_first(&facts[0]).unwrap();
        let spans = stream_spans(&record, &facts, &Options::default());
        let [run, c1] = &spans[..] else {
            panic!("{spans:?}")
        };
        assert_eq!(
            hex::encode(&run.trace_id),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(hex::encode(&run.parent_span_id), "00f067aa0ba902b7");
        assert_eq!(c1.trace_id, run.trace_id);
        assert_eq!(c1.parent_span_id, run.span_id);
        // The label is the trace context, not an attribute.
        assert!(run
            .attributes
            .iter()
            .all(|a| !a.key.contains("traceparent")));
        // An unended run ends at its last fact.
        assert_eq!(run.end_time_unix_nano, 1_000_000_027);
    }

    #[test]
    fn a_call_outside_any_run_is_its_own_root() {
        let outside = OutsideRun {
            key: "call-k".into(),
            session_id: Some("s".into()),
            identity: None,
            producer: producer(),
            labels: Default::default(),
            teardown_scopes: vec![],
        };
        let facts = vec![
            fact(0, 0, Some("c1"), started("c1", None, Some(outside))),
            fact(1, 5, Some("c1"), ended(5)),
        ];
        let record = RunRecord::from_first(&facts[0]).unwrap();
        let spans = stream_spans(&record, &facts, &Options::default());
        assert_eq!(spans.len(), 1);
        assert!(spans[0].parent_span_id.is_empty(), "no invoke_agent parent");
        assert_eq!(
            spans[0].trace_id,
            derived_trace_id(&StreamId::of(&record, &facts))
        );
        assert_eq!(spans[0].name, "execute_tool t");
    }

    /// A `call.started` of `tool` recorded from MCP.
    fn mcp_started(call: &str, tool: &str, outside: Option<OutsideRun>) -> FactKind {
        let FactKind::CallStarted(mut c) = started(call, None, outside) else {
            unreachable!()
        };
        c.tool_name = tool.into();
        c.protocol = Some("mcp".into());
        FactKind::CallStarted(c)
    }

    fn ended_with(outcome: CallOutcome) -> FactKind {
        FactKind::CallEnded(CallEnded {
            outcome,
            duration_ns: 1,
            invocation_id: None,
        })
    }

    fn ok(result: Value) -> FactKind {
        ended_with(CallOutcome::Ok { result })
    }

    fn failed(error: &str) -> FactKind {
        ended_with(CallOutcome::Error {
            error: error.into(),
            result: None,
        })
    }

    /// A run as `reel mcp record` records a session: its labels, then one
    /// call per request (`tool`, how it ended), then the run's end.
    fn mcp_session(labels: &[(&str, &str)], calls: Vec<(&str, FactKind)>) -> Vec<Fact> {
        let mut facts = vec![fact(
            0,
            0,
            None,
            FactKind::RunStarted(RunStarted {
                run_id: "mcp-0123".into(),
                session_id: None,
                identity: None,
                producer: Producer {
                    name: "reel-recorder".into(),
                    version: "0.1.0".into(),
                },
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                teardown_scopes: vec![],
            }),
        )];
        for (i, (tool, end)) in calls.into_iter().enumerate() {
            let call = format!("c{}", i + 1);
            let seq = facts.len() as u64;
            facts.push(fact(
                seq,
                seq * 10,
                Some(&call),
                mcp_started(&call, tool, None),
            ));
            facts.push(fact(seq + 1, seq * 10 + 5, Some(&call), end));
        }
        let seq = facts.len() as u64;
        facts.push(fact(
            seq,
            seq * 10,
            None,
            FactKind::RunEnded(RunEnded {
                status: RunStatus::Completed,
            }),
        ));
        facts
    }

    /// The attributes an MCP span is judged by, in this order.
    const MCP_KEYS: [&str; 11] = [
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "mcp.method.name",
        "mcp.session.id",
        "mcp.protocol.version",
        "network.transport",
        "network.protocol.name",
        "jsonrpc.request.id",
        "error.type",
        "rpc.response.status_code",
        "gen_ai.tool.call.arguments",
    ];

    /// One line per span: its name, status, and those of [`MCP_KEYS`] it
    /// carries (an absent one is left out, never shown empty).
    fn shown(spans: &[Span]) -> Vec<String> {
        spans
            .iter()
            .map(|span| {
                let mut line = format!(
                    "{} [{}]",
                    span.name,
                    match span.status.as_ref().map(|s| s.code) {
                        Some(c) if c == StatusCode::Ok as i32 => "ok",
                        Some(c) if c == StatusCode::Error as i32 => "error",
                        _ => "unset",
                    }
                );
                for key in MCP_KEYS {
                    if let Some(a) = span.attributes.iter().find(|a| a.key == key) {
                        let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(any_value::Value::StringValue(v)) => v.clone(),
                            other => format!("{other:?}"),
                        };
                        line.push_str(&format!(" {key}={value}"));
                    }
                }
                line
            })
            .collect()
    }

    fn check(facts: &[Fact], expected: &[&str]) {
        let record = RunRecord::from_first(&facts[0]).unwrap();
        let spans = stream_spans(&record, facts, &Options::default());
        assert_eq!(shown(&spans), expected);
    }

    #[test]
    fn a_stdio_mcp_session_is_named_by_json_rpc_method_with_its_errors() {
        let facts = mcp_session(
            &[("mcp.transport", "stdio"), ("mcp.command", "server")],
            vec![
                (
                    "mcp:initialize",
                    ok(json!({ "protocolVersion": "2025-11-25", "capabilities": {} })),
                ),
                ("mcp:tools/list", ok(json!({ "tools": [] }))),
                (
                    "get-weather",
                    ok(json!({ "content": [], "isError": false })),
                ),
                ("flaky", ok(json!({ "content": [], "isError": true }))),
                ("nope", failed("json-rpc error -32602: Unknown tool: nope")),
                (
                    "odd",
                    failed("json-rpc error \"x\": a code that is no number"),
                ),
                (
                    "slow",
                    failed("the MCP session ended before the server answered"),
                ),
            ],
        );
        let common = "mcp.protocol.version=2025-11-25 network.transport=pipe";
        check(
            &facts,
            &[
                "invoke_agent reel-recorder [ok] gen_ai.operation.name=invoke_agent",
                &format!("initialize [ok] mcp.method.name=initialize {common}"),
                &format!("tools/list [ok] mcp.method.name=tools/list {common}"),
                &format!("tools/call get-weather [ok] gen_ai.operation.name=execute_tool gen_ai.tool.name=get-weather mcp.method.name=tools/call {common}"),
                &format!("tools/call flaky [error] gen_ai.operation.name=execute_tool gen_ai.tool.name=flaky mcp.method.name=tools/call {common} error.type=tool_error"),
                &format!("tools/call nope [error] gen_ai.operation.name=execute_tool gen_ai.tool.name=nope mcp.method.name=tools/call {common} error.type=-32602 rpc.response.status_code=-32602"),
                &format!("tools/call odd [error] gen_ai.operation.name=execute_tool gen_ai.tool.name=odd mcp.method.name=tools/call {common} error.type=_OTHER"),
                &format!("tools/call slow [error] gen_ai.operation.name=execute_tool gen_ai.tool.name=slow mcp.method.name=tools/call {common} error.type=tool_error"),
            ],
        );
        // With content, `initialize`'s params are no tool's arguments.
        let record = RunRecord::from_first(&facts[0]).unwrap();
        let spans = stream_spans(&record, &facts, &Options { content: true });
        let keys: Vec<&str> = spans[1].attributes.iter().map(|a| a.key.as_str()).collect();
        assert!(keys.contains(&"reel.call.arguments"), "{keys:?}");
        assert!(!keys.iter().any(|k| k.starts_with("gen_ai.")), "{keys:?}");
    }

    #[test]
    fn an_http_mcp_session_names_its_session_and_what_is_not_recorded_is_absent() {
        // Over streamable HTTP, with a session; no `initialize` recorded
        // (a session that began before the proxy, or 2026-07-28), and a
        // server whose version is not one: no `mcp.protocol.version`.
        let facts = mcp_session(
            &[
                ("mcp.transport", "streamable-http"),
                ("mcp.session", "sess-h"),
            ],
            vec![("get-weather", ok(json!({ "content": [] })))],
        );
        check(
            &facts,
            &[
                "invoke_agent reel-recorder [ok] gen_ai.operation.name=invoke_agent",
                "tools/call get-weather [ok] gen_ai.operation.name=execute_tool gen_ai.tool.name=get-weather mcp.method.name=tools/call mcp.session.id=sess-h network.transport=tcp network.protocol.name=http",
            ],
        );
        let facts = mcp_session(
            &[("mcp.transport", "carrier-pigeon")],
            vec![(
                "mcp:initialize",
                ok(json!({ "protocolVersion": "not a version: some other text" })),
            )],
        );
        check(
            &facts,
            &[
                "invoke_agent reel-recorder [ok] gen_ai.operation.name=invoke_agent",
                "initialize [ok] mcp.method.name=initialize",
            ],
        );
    }

    #[test]
    fn a_call_mcphost_served_outside_any_run_keeps_its_session_and_request_id() {
        let outside = OutsideRun {
            key: "call-k".into(),
            session_id: Some("mcp-session-9".into()),
            identity: None,
            producer: producer(),
            labels: [("jsonrpc.request.id".to_owned(), "7".to_owned())]
                .into_iter()
                .collect(),
            teardown_scopes: vec![],
        };
        let facts = vec![
            fact(0, 0, Some("c1"), mcp_started("c1", "lookup", Some(outside))),
            fact(1, 5, Some("c1"), failed("no such row")),
        ];
        // No transport and no version recorded: both left out.
        check(
            &facts,
            &["tools/call lookup [error] gen_ai.operation.name=execute_tool gen_ai.tool.name=lookup mcp.method.name=tools/call mcp.session.id=mcp-session-9 jsonrpc.request.id=7 error.type=tool_error"],
        );
    }
}

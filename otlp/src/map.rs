//! The mapping: one recorded stream (a run, or a call outside any run)
//! and its facts to OTLP spans, following the OpenTelemetry GenAI
//! semantic conventions (see the crate's README for the version).

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span, Status};
use reel_core::fact::{
    CallEnded, CallOutcome, CallStarted, EffectOutcome, ElicitOutcome, Fact, FactKind, Producer,
    TeardownOutcome,
};
use reel_core::run::RunRecord;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the mapping exports beside the spans' shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Export content: a call's arguments and result, progress payloads,
    /// log data, elicitation answers, effect requests and outcomes, call
    /// outputs. Off by default; when on it is the recorded (already
    /// redacted) data, never more.
    pub content: bool,
}

/// A W3C `traceparent` (`00-<32 hex trace id>-<16 hex span id>-<2 hex
/// flags>`), parsed. All-zero ids and other versions than `00` are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The caller's trace id.
    pub trace_id: [u8; 16],
    /// The caller's span: the parent of the spans reel exports.
    pub span_id: [u8; 8],
    /// The trace flags.
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value; `None` when it is malformed.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let parts: Vec<&str> = value.trim().split('-').collect();
        let [version, trace, span, flags] = parts[..] else {
            return None;
        };
        if version != "00" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
            return None;
        }
        let lower = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !lower(trace) || !lower(span) || !lower(flags) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex::decode_to_slice(trace, &mut trace_id).ok()?;
        hex::decode_to_slice(span, &mut span_id).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

/// What reel derives a stream's trace and span ids from, when no
/// recorded `traceparent` gives them: the archive's key of the stream (a
/// run id, or the key of a call outside any run), the wall-clock `at` of
/// its first fact (`run.started`, or the outside call's `call.started`)
/// and its recorded producer (name and version). Each is hashed
/// (SHA-256, length-prefixed parts) and truncated.
///
/// Why these: a run id alone is not unique across archives. Two hosts
/// running the same demo record `demo-deploy` twice; a collector given
/// both keeps the first trace and silently drops the second. The ids
/// must stay a pure function of the record (exporting a run twice, or
/// live and then from the archive, gives the same ids, so a collector
/// deduplicates instead of doubling), and the record is all an export
/// reads: these three fields are in every stream's first fact, in every
/// version of the fact model, and never change once written. The start
/// instant is what differs between two recordings of one run id; the
/// producer separates two programs that share a clock tick. A per-archive
/// salt in the archive's meta would do the same, but it is not in the
/// record (live export sees only facts), and a tape imported elsewhere
/// would change its ids.
///
/// Limits: two streams still collide when they have the same key and the
/// same producer and started at the same nanosecond by their wall clocks
/// (a clock of coarse resolution, or two hosts whose clocks were set to
/// the same fixed time, make that likelier; random run ids, as `reel mcp
/// record` gives, rule it out). A copy of a recording (a tape imported
/// into another archive, a synced stream) keeps its ids on purpose: it
/// is the same recording, the same trace. The ids identify, they do not
/// hide: anyone holding the record can compute them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamId {
    key: String,
    started_at: i64,
    producer_name: String,
    producer_version: String,
}

impl StreamId {
    /// The stream id of `key`, first recorded at `started_at` (unix
    /// nanoseconds, its first fact's `at`) by `producer`.
    pub fn new(key: &str, started_at: i64, producer: &Producer) -> StreamId {
        StreamId {
            key: key.to_owned(),
            started_at,
            producer_name: producer.name.clone(),
            producer_version: producer.version.clone(),
        }
    }

    /// The stream id of a stream's record and facts: its first fact's
    /// `at` and producer when that fact starts the stream, else the
    /// record's start and no producer (a stream read from its middle).
    pub fn of(record: &RunRecord, facts: &[Fact]) -> StreamId {
        let start = facts.first().and_then(|f| match &f.kind {
            FactKind::RunStarted(r) => Some((f.at, &r.producer)),
            FactKind::CallStarted(c) => c.outside_run.as_ref().map(|o| (f.at, &o.producer)),
            _ => None,
        });
        match start {
            Some((at, producer)) => StreamId::new(&record.run_id, at, producer),
            None => StreamId {
                key: record.run_id.clone(),
                started_at: record.started_at,
                producer_name: String::new(),
                producer_version: String::new(),
            },
        }
    }

    fn digest(&self, domain: &str, call: Option<&str>) -> [u8; 32] {
        let at = self.started_at.to_string();
        let mut parts = vec![
            domain,
            self.key.as_str(),
            at.as_str(),
            self.producer_name.as_str(),
            self.producer_version.as_str(),
        ];
        parts.extend(call);
        digest(&parts)
    }
}

/// The trace id reel derives for a stream: the first 16 bytes of a
/// SHA-256 of its [`StreamId`], so exporting twice gives the same id and
/// two recordings of one run id (two archives) do not collide.
pub fn derived_trace_id(stream: &StreamId) -> [u8; 16] {
    let d = stream.digest("reel.trace", None);
    d[..16].try_into().expect("16 bytes")
}

/// The span id reel derives for a call of a stream (`call`) or for the
/// run itself (`None`): the first 8 bytes of a SHA-256 of the
/// [`StreamId`] and the call id.
pub fn derived_span_id(stream: &StreamId, call: Option<&str>) -> [u8; 8] {
    let d = match call {
        Some(call) => stream.digest("reel.span.call", Some(call)),
        None => stream.digest("reel.span.run", None),
    };
    d[..8].try_into().expect("8 bytes")
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
                run_span = Some(Span {
                    trace_id: trace_id.clone(),
                    span_id: derived_span_id(&id, None).to_vec(),
                    trace_state: trace_state.clone(),
                    parent_span_id: run_parent.clone(),
                    name: match agent {
                        Some(agent) => format!("invoke_agent {agent}"),
                        None => "invoke_agent".into(),
                    },
                    kind: SpanKind::Internal as i32,
                    start_time_unix_nano: t,
                    attributes,
                    ..Default::default()
                });
            }
            (FactKind::RunEnded(e), _) => {
                if let Some(span) = run_span.as_mut() {
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
                    cs.ended = true;
                    // The recorded duration from the recorded start; the
                    // fact's own offset when the duration is absent.
                    let end = if e.duration_ns > 0 {
                        cs.started.saturating_add(e.duration_ns)
                    } else {
                        time(fact)
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
                            let failed = cs.mcp
                                && cs.tool_call
                                && result.get("isError") == Some(&Value::Bool(true));
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
                        CallOutcome::Error { error } => {
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

/// What a recorded call was, for its span's name and attributes.
///
/// A call recorded from MCP (`protocol` = `mcp`) follows the
/// OpenTelemetry MCP conventions (open-telemetry/semantic-conventions-genai,
/// `docs/gen-ai/mcp.md` and `model/mcp/spans.yaml`, `model/mcp/common.yaml`):
/// `mcp.method.name` is the JSON-RPC method, and the span is named
/// `{mcp.method.name} {target}`, the target being `gen_ai.tool.name` when
/// there is one, else `{mcp.method.name}` alone (`tools/call get-weather`,
/// `initialize`). A `tools/call` span is also the GenAI `execute_tool`
/// span ("MCP tool call execution spans are compatible with GenAI
/// execute_tool spans"; one span, not two), so it keeps
/// `gen_ai.operation.name` = `execute_tool` and the `gen_ai.tool.*`
/// attributes; other methods carry neither ("SHOULD be set to
/// `execute_tool` when the operation describes a tool call and SHOULD NOT
/// be set otherwise"). Any other call is a GenAI `execute_tool
/// {gen_ai.tool.name}` span.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    /// A tool call not recorded from MCP.
    Tool { tool: String },
    /// An MCP request: `method`, and for a `tools/call` its `tool`.
    Mcp {
        method: String,
        tool: Option<String>,
    },
}

impl Request {
    /// `reel mcp record` records `initialize` and the first `tools/list`
    /// as calls named `mcp:{method}` (see `reel_mcp::proxy`), and every
    /// `tools/call` as a call of the tool's name. An MCP tool name cannot
    /// be mistaken for the first: MCP tool names hold no `:`.
    fn of(c: &CallStarted) -> Request {
        if c.protocol.as_deref() != Some("mcp") {
            return Request::Tool {
                tool: c.tool_name.clone(),
            };
        }
        match c.tool_name.strip_prefix("mcp:") {
            Some(method) => Request::Mcp {
                method: method.to_owned(),
                tool: None,
            },
            None => Request::Mcp {
                method: "tools/call".into(),
                tool: Some(c.tool_name.clone()),
            },
        }
    }

    fn span_name(&self) -> String {
        match self {
            Request::Tool { tool } => format!("execute_tool {tool}"),
            Request::Mcp {
                method,
                tool: Some(tool),
            } => format!("{method} {tool}"),
            Request::Mcp { method, tool: None } => method.clone(),
        }
    }

    fn is_tool_call(&self) -> bool {
        !matches!(self, Request::Mcp { tool: None, .. })
    }

    fn is_mcp(&self) -> bool {
        matches!(self, Request::Mcp { .. })
    }
}

/// What a stream's record says of its MCP session, for each MCP span of
/// the stream. A field the record does not hold is `None`, and its
/// attribute is left out (absent, never empty).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct McpSession {
    /// `network.transport`, and `network.protocol.name` when it is HTTP,
    /// from the `mcp.transport` label `reel mcp record` gives its runs:
    /// `stdio` is `pipe`, `streamable-http` is `tcp` over `http` ("SHOULD
    /// be set to `tcp` or `quic` if the transport protocol is HTTP. It
    /// SHOULD be set to `pipe` if the transport is stdio."). `McpHost`
    /// records no transport for the calls it serves, so theirs is absent.
    transport: Option<(&'static str, Option<&'static str>)>,
    /// The `Mcp-Session-Id` of a proxied streamable HTTP session (the
    /// `mcp.session` label). Stdio has no session id.
    session: Option<String>,
    /// `mcp.protocol.version`: the version the server answered
    /// `initialize` with (the `protocolVersion` of the recorded
    /// `mcp:initialize` call's result). A session without a recorded
    /// `initialize` (2026-07-28 names the version in each request's
    /// `_meta`, which is not recorded; `McpHost` records no version)
    /// leaves it out.
    version: Option<String>,
}

impl McpSession {
    fn of(record: &RunRecord, facts: &[Fact]) -> McpSession {
        let transport = match record.labels.get("mcp.transport").map(String::as_str) {
            Some("stdio") => Some(("pipe", None)),
            Some("streamable-http") => Some(("tcp", Some("http"))),
            // Another label value says nothing this mapping knows.
            _ => None,
        };
        let initialize = mcp_initialize(facts);
        let version = facts
            .iter()
            .filter(|f| initialize.is_some() && f.call.as_deref() == initialize)
            .find_map(|f| match &f.kind {
                FactKind::CallEnded(CallEnded {
                    outcome: CallOutcome::Ok { result },
                    ..
                }) => result.get("protocolVersion").and_then(Value::as_str),
                _ => None,
            })
            .and_then(protocol_version)
            .map(str::to_owned);
        McpSession {
            transport,
            session: record.labels.get("mcp.session").cloned(),
            version,
        }
    }
}

/// The call id of the stream's first recorded MCP `initialize`, whose
/// result names the session's protocol version for every span of the
/// stream (live export keeps its facts while the stream is open).
pub(crate) fn mcp_initialize(facts: &[Fact]) -> Option<&str> {
    facts.iter().find_map(|f| match &f.kind {
        FactKind::CallStarted(c)
            if c.protocol.as_deref() == Some("mcp") && c.tool_name == "mcp:initialize" =>
        {
            f.call.as_deref()
        }
        _ => None,
    })
}

/// `v` when it has the form of an MCP protocol version (`YYYY-MM-DD`).
/// The version is read from a recorded result, which is content: only
/// that form is exported without `--content`, never other text.
fn protocol_version(v: &str) -> Option<&str> {
    let b = v.as_bytes();
    let shape = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
    shape.then_some(v)
}

/// The code of a proxied call's JSON-RPC error: `reel mcp record` ends a
/// call answered with a JSON-RPC error with the error `json-rpc error
/// <code>: <message>`. `None` when `error` is not one (the call failed
/// otherwise); `Some(None)` when its code is not an integer.
fn json_rpc_error(error: &str) -> Option<Option<i64>> {
    let rest = error.strip_prefix("json-rpc error ")?;
    let code = rest.split_once(':').map_or(rest, |(code, _)| code);
    Some(code.trim().parse().ok())
}

/// The attribute of a call's content `what` (`arguments`, `result`):
/// `gen_ai.tool.call.*` for a tool call, `reel.call.*` for another MCP
/// request (`initialize`'s params are no tool's arguments).
fn content_key(tool_call: bool, what: &str) -> &'static str {
    match (tool_call, what) {
        (true, "arguments") => "gen_ai.tool.call.arguments",
        (true, _) => "gen_ai.tool.call.result",
        (false, "arguments") => "reel.call.arguments",
        (false, _) => "reel.call.result",
    }
}

/// A call's attributes; `run_session` is the session of the run the call
/// is in (a call outside any run names its own), `mcp` what the stream
/// says of its MCP session.
fn call_attributes(
    c: &CallStarted,
    request: &Request,
    run_session: Option<&str>,
    mcp: &McpSession,
    options: &Options,
) -> Vec<KeyValue> {
    let tool_call = request.is_tool_call();
    let mut a = Vec::new();
    if tool_call {
        a.extend([
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", c.tool_name.clone()),
            s(
                "gen_ai.tool.call.id",
                c.invocation_id.clone().unwrap_or_else(|| c.call_id.clone()),
            ),
            s("gen_ai.tool.type", "function"),
        ]);
    }
    a.push(s("reel.call.id", c.call_id.clone()));
    if let Some(d) = c.spec.as_ref().and_then(|s| s.description.clone()) {
        if tool_call {
            a.push(s("gen_ai.tool.description", d));
        }
    }
    if let Some(p) = &c.parent_call {
        a.push(s("reel.call.parent", p.clone()));
    }
    if c.iteration > 0 {
        a.push(int("reel.call.iteration", i64::from(c.iteration)));
    }
    if let Some(p) = &c.platform {
        a.push(s("reel.platform", p.clone()));
    }
    if let Some(ci) = &c.client_info {
        a.push(s("reel.client.name", ci.name.clone()));
    }
    let session = match &c.outside_run {
        Some(o) => o.session_id.clone(),
        None => run_session.map(str::to_owned),
    };
    if let Some(o) = &c.outside_run {
        a.push(s("reel.outside_run.key", o.key.clone()));
        identity_attributes(&mut a, o.identity.as_ref(), None);
    }
    match request {
        Request::Mcp { method, .. } => {
            a.push(s("mcp.method.name", method.clone()));
            // The proxied HTTP session's id, else the session the host
            // named (`McpHost`: the `Mcp-Session-Id`); none over stdio.
            if let Some(session) = mcp.session.clone().or(session) {
                a.push(s("mcp.session.id", session));
            }
            if let Some(v) = &mcp.version {
                a.push(s("mcp.protocol.version", v.clone()));
            }
            if let Some((transport, protocol)) = mcp.transport {
                a.push(s("network.transport", transport));
                if let Some(p) = protocol {
                    a.push(s("network.protocol.name", p));
                }
            }
            // The JSON-RPC request id, when the host recorded one as a
            // label (`McpHost` does; `reel mcp record` does not yet).
            if let Some(id) = c
                .outside_run
                .as_ref()
                .and_then(|o| o.labels.get("jsonrpc.request.id"))
            {
                a.push(s("jsonrpc.request.id", id.clone()));
            }
        }
        Request::Tool { .. } => {
            if let Some(p) = &c.protocol {
                a.push(s("reel.protocol", p.clone()));
            }
        }
    }
    if options.content {
        a.push(json(content_key(tool_call, "arguments"), &c.args));
    }
    a
}

fn event(name: &str, t: u64, attributes: Vec<KeyValue>) -> Event {
    Event {
        time_unix_nano: t,
        name: name.into(),
        attributes,
        dropped_attributes_count: 0,
    }
}

/// The span event of one fact other than the span boundaries; `None` for
/// facts no trace viewer needs (clock and random reads).
fn fact_event(kind: &FactKind, t: u64, tool: Option<&str>, options: &Options) -> Option<Event> {
    let c = options.content;
    let name = kind.name();
    let mut a = Vec::new();
    match kind {
        FactKind::CredentialRequested(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.mode", f.mode.as_str()));
        }
        FactKind::CredentialResolved(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.mode", f.mode.as_str()));
            a.push(s("reel.credential.fingerprint", f.fingerprint.0.clone()));
        }
        FactKind::CredentialFailed(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.reason", f.reason.clone()));
        }
        FactKind::CredentialRefused(f) => {
            a.push(s("reel.credential.need", f.need.clone()));
            a.push(s("reel.credential.reason", f.reason.clone()));
        }
        FactKind::ArtifactPut(f) => artifact_meta(&mut a, &f.meta),
        FactKind::ArtifactGet(f) => match &f.meta {
            Some(m) => artifact_meta(&mut a, m),
            None => a.push(s("reel.artifact.id", f.id.clone())),
        },
        FactKind::ArtifactRefused(f) => {
            a.push(s("reel.artifact.op", f.op.as_str()));
            a.push(s("reel.artifact.reason", f.reason.clone()));
        }
        FactKind::Progress(f) => {
            a.push(int("reel.progress.count", f.count as i64));
            a.push(s(
                "reel.progress.line",
                reel_core::display::progress_line(tool.unwrap_or("?"), &f.payload, f.count),
            ));
            if c {
                a.push(json("reel.progress.payload", &f.payload));
            }
        }
        FactKind::ProgressDropped(f) => a.push(int("reel.progress.dropped", f.count as i64)),
        FactKind::RedactionTripped(f) => {
            a.push(s("reel.redaction.point", f.point.clone()));
            a.push(s("reel.redaction.fact", f.fact.clone()));
            a.push(s("reel.redaction.field", f.field.clone()));
            a.push(s("reel.redaction.encoding", f.encoding.clone()));
            a.push(s("reel.redaction.rule", f.rule.clone()));
        }
        FactKind::Log(f) => {
            a.push(s("log.level", f.level.as_str()));
            if let Some(l) = &f.logger {
                a.push(s("reel.log.logger", l.clone()));
            }
            if c {
                a.push(json("reel.log.data", &f.data));
            }
        }
        FactKind::ElicitRequested(f) => {
            a.push(s("reel.elicit.mode", f.mode.as_str()));
            if c {
                a.push(s("reel.elicit.message", f.message.clone()));
            }
        }
        FactKind::ElicitAnswered(f) => {
            a.push(s("reel.elicit.outcome", f.outcome.as_str()));
            if !f.validation_errors.is_empty() {
                a.push(int(
                    "reel.elicit.validation_errors",
                    f.validation_errors.len() as i64,
                ));
            }
            if c {
                if let ElicitOutcome::Accept { content } = &f.outcome {
                    a.push(json("reel.elicit.content", content));
                }
            }
        }
        FactKind::ElicitRefused(f) => {
            a.push(s("reel.elicit.mode", f.mode.as_str()));
            a.push(s("reel.elicit.reason", f.reason.clone()));
        }
        FactKind::TeardownRegistered(f) => {
            a.push(s("reel.teardown.scope", f.scope.as_str()));
            a.push(boolean("reel.teardown.first", f.first));
        }
        FactKind::TeardownRefused(f) => {
            a.push(s("reel.teardown.scope", f.scope.as_str()));
            a.push(s("reel.teardown.reason", f.reason.clone()));
        }
        FactKind::TeardownRan(f) => {
            a.push(s("reel.teardown.scope", f.scope.as_str()));
            a.push(s("reel.teardown.outcome", f.outcome.as_str()));
            a.push(int("reel.teardown.duration_ns", f.duration_ns as i64));
            if let (true, TeardownOutcome::Error { message }) = (c, &f.outcome) {
                a.push(s("reel.teardown.error", message.clone()));
            }
        }
        FactKind::Effect(f) => {
            a.push(s("reel.effect.name", f.name.clone()));
            a.push(s(
                "reel.effect.outcome",
                match f.outcome {
                    EffectOutcome::Ok(_) => "ok",
                    EffectOutcome::Err(_) => "error",
                },
            ));
            if c {
                a.push(json("reel.effect.request", &f.request));
            }
        }
        FactKind::CancelRequested(f) => {
            if let Some(r) = &f.reason {
                a.push(s("reel.cancel.reason", r.clone()));
            }
        }
        FactKind::CallOutput(f) => {
            if let Some(stage) = &f.stage {
                a.push(s("reel.output.stage", stage.clone()));
            }
            if c {
                a.push(json("reel.output.value", &f.value));
            }
        }
        FactKind::Clock(_) | FactKind::Random(_) => return None,
        FactKind::Unknown { .. } => {}
        FactKind::RunStarted(_)
        | FactKind::RunEnded(_)
        | FactKind::CallStarted(_)
        | FactKind::CallEnded(_) => return None,
    }
    Some(event(name, t, a))
}

fn artifact_meta(a: &mut Vec<KeyValue>, m: &reel_core::fact::ArtifactMeta) {
    a.push(s("reel.artifact.id", m.id.clone()));
    a.push(s("reel.artifact.digest", m.digest.clone()));
    a.push(int("reel.artifact.size", m.size as i64));
    a.push(s("reel.artifact.media_type", m.media_type.clone()));
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

//! One trace's spans as one run's facts: the mapping of the book's "Record
//! any framework" page, row by row.
//!
//! - The trace's root span is the run (`otel-` and the trace id): its
//!   identity from `user.id` (or `enduser.id`) and
//!   `gen_ai.conversation.id`, its session from `session.id`, its
//!   producer from the resource's `service.name` and `service.version`,
//!   labels for the agent's name, the trace id and `telemetry.sdk.*`; it
//!   ends `failed` when the root's status is an error.
//! - An `execute_tool` span (GenAI's, Vercel's `ai.toolCall`,
//!   OpenInference's `TOOL`) is a call: the tool's name, the call id
//!   (`gen_ai.tool.call.id`, else the span id), the arguments
//!   (`gen_ai.tool.call.arguments`, read as JSON when they are) and the
//!   result (`gen_ai.tool.call.result`, as recorded) when captured (absent
//!   stays absent: `null`), the outcome from the status and `error.type`,
//!   the span's times; its parent call is the nearest enclosing call.
//! - An `invoke_agent` span below the root (a handoff, a sub-agent) is a
//!   call `agent:NAME` with its own calls beneath it.
//! - A model span (`chat`, `text_completion`, `generate_content`,
//!   `embeddings`) is a `model.called` fact at its start.
//! - A span event is a `log` fact at its time (`exception`: level error),
//!   its attributes the data.
//! - An MCP span (`mcp.method.name`) joins the call it belongs to: in a
//!   tool call it is an `mcp` log fact of that call; a `tools/call` in no
//!   tool call is a call itself ([`mcp`]'s module says it all).
//! - Any other span is kept as an unknown kind, `otel.span`, with its raw
//!   attributes, under the call it belongs to.
//!
//! Facts are in span time order; a child's facts stay within its parent's
//! call (a call's `call.ended` comes after everything beneath it). Spans
//! that came after their trace was written are a run of their own
//! ([`map_late`]: the `late` module).

use std::collections::{BTreeMap, HashMap, HashSet};

use reel::fact::{Fact, FactKind, Identity, Level, Log, Producer, RunEnded, RunStarted, RunStatus};

use serde_json::{json, Map, Value};

use crate::decode::SpanIn;

mod call;
mod held;
mod late;
mod mcp;
mod model;
use call::{call_facts, error_of};
pub use held::held_record;
pub use late::{late_run_id, map_late, Late, LATE_LOGGER, LATE_OF_LABEL};
use model::model_called;

/// The label every run taken in carries (`otlp`): `reel mcp mock` serves
/// such a run's recorded results as text content.
pub const SOURCE_LABEL: &str = "reel.source";

/// The protocol of every call taken in.
pub const PROTOCOL: &str = "otel";

/// The run id of a trace.
pub fn run_id(trace_id: &str) -> String {
    format!("otel-{trace_id}")
}

/// What a span is to the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Tool,
    Agent,
    Model,
    Other,
}

fn role(span: &SpanIn) -> Role {
    let op = span.str("gen_ai.operation.name").unwrap_or_default();
    let open_inference = span.str("openinference.span.kind").unwrap_or_default();
    let traceloop = span.str("traceloop.span.kind").unwrap_or_default();
    if mcp::is_tool_call(span) {
        return Role::Tool;
    }
    match op {
        "execute_tool" => return Role::Tool,
        "invoke_agent" => return Role::Agent,
        "chat" | "text_completion" | "generate_content" | "embeddings" => return Role::Model,
        _ => {}
    }
    if span.attributes.contains_key("ai.toolCall.name")
        || open_inference.eq_ignore_ascii_case("tool")
        || traceloop == "tool"
    {
        Role::Tool
    } else if open_inference.eq_ignore_ascii_case("agent") || traceloop == "agent" {
        Role::Agent
    } else if open_inference.eq_ignore_ascii_case("llm")
        || (span.attributes.contains_key("gen_ai.request.model")
            && !span.attributes.contains_key("ai.toolCall.name"))
    {
        Role::Model
    } else {
        Role::Other
    }
}

/// The first of `keys` the span carries.
fn first<'a>(span: &'a SpanIn, keys: &[&str]) -> Option<&'a Value> {
    keys.iter()
        .find_map(|k| span.attributes.get(*k))
        .filter(|v| !v.is_null())
}

fn first_str(span: &SpanIn, keys: &[&str]) -> Option<String> {
    first(span, keys).map(|v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn first_u64(span: &SpanIn, keys: &[&str]) -> Option<u64> {
    first(span, keys).and_then(|v| match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    })
}

/// A value that is JSON text read as JSON; anything else as it is.
fn json_text(value: &Value) -> Value {
    match value {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| value.clone()),
        other => other.clone(),
    }
}

/// One fact before it is numbered.
struct Draft {
    at: u64,
    call: Option<String>,
    kind: FactKind,
}

/// A trace being mapped.
struct Trace<'a> {
    spans: &'a [SpanIn],
    children: HashMap<usize, Vec<usize>>,
    call_ids: HashSet<String>,
    /// The calls of tool spans (not agents'): an MCP span in one joins it.
    tool_calls: HashSet<String>,
}

/// The run of a trace's spans; `None` when there are none.
pub fn map_trace(mut spans: Vec<SpanIn>) -> Option<(String, Vec<Fact>)> {
    for s in &mut spans {
        s.end = s.end.max(s.start);
    }
    spans.sort_by(|a, b| (a.start, &a.span_id).cmp(&(b.start, &b.span_id)));
    let (root, children) = tree(&spans)?;
    let mut trace = Trace {
        spans: &spans,
        children,
        call_ids: HashSet::new(),
        tool_calls: HashSet::new(),
    };
    let root_span = &spans[root];
    let run_id = run_id(&root_span.trace_id);
    let mut drafts = vec![Draft {
        at: root_span.start,
        call: None,
        kind: FactKind::RunStarted(run_started(&spans, root, &run_id)),
    }];
    let body = match role(root_span) {
        // The run is the agent: what it did is the run's.
        Role::Agent | Role::Other => trace.inside(root, None),
        _ => trace.span(root, None),
    };
    drafts.extend(body);
    drafts.push(Draft {
        at: root_span.end,
        call: None,
        kind: FactKind::RunEnded(RunEnded {
            status: if root_span.status_code == 2 {
                RunStatus::Failed
            } else {
                RunStatus::Completed
            },
        }),
    });
    Some((run_id, number(drafts, root_span.start)))
}

/// Drafts numbered from 0, their times made monotone from `start`.
fn number(drafts: Vec<Draft>, start: u64) -> Vec<Fact> {
    let mut last = start;
    drafts
        .into_iter()
        .enumerate()
        .map(|(seq, d)| {
            last = d.at.max(last);
            Fact {
                seq: seq as u64,
                at: i64::try_from(last).unwrap_or(i64::MAX),
                offset: last - start,
                call: d.call,
                kind: d.kind,
            }
        })
        .collect()
}

/// Groups of drafts (a span's events, each child's facts) in time order,
/// each group kept in its own order.
fn merge(groups: Vec<Vec<Draft>>) -> Vec<Draft> {
    let mut out: Vec<Draft> = Vec::new();
    for mut group in groups {
        // Each group's times made monotone, so a stable sort by time
        // keeps its order.
        let mut last = 0;
        for d in &mut group {
            last = d.at.max(last);
            d.at = last;
        }
        out.extend(group);
    }
    out.sort_by_key(|d| d.at);
    out
}

/// How deep spans nest beneath the root; a span further down (or in a
/// cycle of parents) hangs under the root instead, so mapping a trace
/// never recurses deeper than this, whatever an exporter sends.
pub const MAX_DEPTH: usize = 256;

/// The root span and each span's children. The root: the first span
/// without a parent, else the first whose parent never arrived, else the
/// first. Every other span whose parent is unknown, or whose chain of
/// parents does not reach the root within [`MAX_DEPTH`] (a cycle), hangs
/// under the root.
fn tree(spans: &[SpanIn]) -> Option<(usize, HashMap<usize, Vec<usize>>)> {
    if spans.is_empty() {
        return None;
    }
    let parents = parents(spans);
    let parent_of = |i: usize| parents[i];
    let root = spans
        .iter()
        .position(|s| s.parent.is_none())
        .or_else(|| (0..spans.len()).find(|i| parent_of(*i).is_none()))
        .unwrap_or(0);
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in (0..spans.len()).filter(|i| *i != root) {
        let mut at = i;
        let mut reaches = false;
        for _ in 0..MAX_DEPTH {
            match parent_of(at) {
                Some(p) if p == root => {
                    reaches = true;
                    break;
                }
                Some(p) => at = p,
                None => break,
            }
        }
        let parent = match (reaches, parent_of(i)) {
            (true, Some(p)) => p,
            _ => root,
        };
        children.entry(parent).or_default().push(i);
    }
    Some((root, children))
}

/// Each span's parent among `spans`, by index: `None` for a span whose
/// parent is not among them, or that names itself.
fn parents(spans: &[SpanIn]) -> Vec<Option<usize>> {
    let index: HashMap<&str, usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id.as_str(), i))
        .collect();
    spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.parent
                .as_deref()
                .and_then(|p| index.get(p).copied())
                .filter(|p| *p != i)
        })
        .collect()
}

impl Trace<'_> {
    /// The facts of span `i` and everything beneath it, filed under
    /// `call` (the nearest enclosing call).
    fn span(&mut self, i: usize, call: Option<&str>) -> Vec<Draft> {
        let spans = self.spans;
        let span = &spans[i];
        let in_tool_call = call.is_some_and(|c| self.tool_calls.contains(c));
        if mcp::method(span).is_some() && (in_tool_call || !mcp::is_tool_call(span)) {
            // Joined to the call it is in (or the run's).
            let mut out = vec![Draft {
                at: span.start,
                call: call.map(str::to_owned),
                kind: FactKind::Log(mcp::log(span)),
            }];
            out.extend(self.inside(i, call));
            return out;
        }
        match role(span) {
            role @ (Role::Tool | Role::Agent) => {
                let id = self.call_id(span);
                if role == Role::Tool {
                    self.tool_calls.insert(id.clone());
                }
                let (started, ended) = call_facts(span, &id, call);
                let mut out = vec![Draft {
                    at: span.start,
                    call: Some(id.clone()),
                    kind: FactKind::CallStarted(started),
                }];
                if mcp::method(span).is_some() {
                    // A `tools/call` that is the call: its MCP details.
                    out.push(Draft {
                        at: span.start,
                        call: Some(id.clone()),
                        kind: FactKind::Log(mcp::log(span)),
                    });
                }
                let inside = self.inside(i, Some(&id));
                out.extend(inside.into_iter().map(|mut d| {
                    d.at = d.at.clamp(span.start, span.end);
                    d
                }));
                out.push(Draft {
                    at: span.end,
                    call: Some(id),
                    kind: FactKind::CallEnded(ended),
                });
                out
            }
            Role::Model => {
                let mut out = vec![Draft {
                    at: span.start,
                    call: call.map(str::to_owned),
                    kind: FactKind::ModelCalled(model_called(span)),
                }];
                out.extend(self.inside(i, call));
                out
            }
            Role::Other => {
                let mut out = vec![Draft {
                    at: span.start,
                    call: call.map(str::to_owned),
                    kind: FactKind::Unknown {
                        kind: "otel.span".into(),
                        data: json!({
                            "name": span.name,
                            "span_id": span.span_id,
                            "parent_span_id": span.parent,
                            "end_unix_nano": span.end,
                            "status": {"code": span.status_code, "message": span.status_message},
                            "attributes": span.attributes,
                        }),
                    },
                }];
                out.extend(self.inside(i, call));
                out
            }
        }
    }

    /// The facts beneath span `i` (its events and its children's facts),
    /// in time order, each child's kept in its own order.
    fn inside(&mut self, i: usize, call: Option<&str>) -> Vec<Draft> {
        let spans = self.spans;
        let span = &spans[i];
        let mut groups: Vec<Vec<Draft>> = vec![span
            .events
            .iter()
            .map(|(t, name, attributes)| Draft {
                at: *t,
                call: call.map(str::to_owned),
                kind: FactKind::Log(event_log(name, attributes)),
            })
            .collect()];
        let kids = self.children.get(&i).cloned().unwrap_or_default();
        for k in kids {
            groups.push(self.span(k, call));
        }
        merge(groups)
    }

    /// A call id unique in the run: the framework's, else the span id.
    fn call_id(&mut self, span: &SpanIn) -> String {
        let preferred = first_str(
            span,
            &["gen_ai.tool.call.id", "ai.toolCall.id", "tool_call.id"],
        )
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| span.span_id.clone());
        let id = if self.call_ids.contains(&preferred) {
            format!("{preferred}@{}", span.span_id)
        } else {
            preferred
        };
        self.call_ids.insert(id.clone());
        id
    }
}

fn run_started(spans: &[SpanIn], root: usize, run_id: &str) -> RunStarted {
    let root_span = &spans[root];
    // The root's attribute, else the first span's that has it.
    let find = |keys: &[&str]| {
        first_str(root_span, keys).or_else(|| spans.iter().find_map(|s| first_str(s, keys)))
    };
    let principal = find(&["user.id", "enduser.id"]);
    let conversation = find(&["gen_ai.conversation.id"]);
    let identity = (principal.is_some() || conversation.is_some()).then_some(Identity {
        tenant: None,
        principal,
        conversation,
    });
    let resource = &root_span.resource;
    let text = |key: &str| resource.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut labels = BTreeMap::new();
    labels.insert(SOURCE_LABEL.to_owned(), "otlp".to_owned());
    labels.insert("otel.trace_id".to_owned(), root_span.trace_id.clone());
    labels.insert("otel.root_span".to_owned(), root_span.name.clone());
    if let Some(agent) = agent_name(root_span).or_else(|| {
        spans
            .iter()
            .filter(|s| role(s) == Role::Agent)
            .find_map(agent_name)
    }) {
        labels.insert("gen_ai.agent.name".to_owned(), agent);
    }
    for key in [
        "telemetry.sdk.name",
        "telemetry.sdk.language",
        "telemetry.sdk.version",
    ] {
        if let Some(v) = text(key) {
            labels.insert(key.to_owned(), v);
        }
    }
    RunStarted {
        run_id: run_id.to_owned(),
        session_id: find(&["session.id", "gen_ai.session.id"]),
        identity,
        producer: Producer {
            name: text("service.name").unwrap_or_else(|| "unknown_service".into()),
            version: text("service.version").unwrap_or_default(),
        },
        labels,
        teardown_scopes: Vec::new(),
    }
}

fn agent_name(span: &SpanIn) -> Option<String> {
    first_str(span, &["gen_ai.agent.name", "agent_name", "agent.name"]).or_else(|| {
        span.name
            .strip_prefix("invoke_agent ")
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
    })
}

/// The tool a tool or agent span's call names (`agent:NAME` for an agent).
fn tool_name(span: &SpanIn) -> String {
    match role(span) {
        Role::Agent => format!(
            "agent:{}",
            agent_name(span).unwrap_or_else(|| span.name.clone())
        ),
        _ => first_str(
            span,
            &[
                "gen_ai.tool.name",
                "ai.toolCall.name",
                "tool.name",
                "traceloop.entity.name",
            ],
        )
        .or_else(|| {
            ["execute_tool ", "tools/call "]
                .iter()
                .find_map(|p| span.name.strip_prefix(p))
                .map(|n| n.trim().to_owned())
        })
        .unwrap_or_else(|| span.name.clone()),
    }
}

/// A span event as a `log` fact.
fn event_log(name: &str, attributes: &Map<String, Value>) -> Log {
    Log {
        level: if name == "exception" {
            Level::Error
        } else {
            Level::Info
        },
        logger: Some(name.to_owned()),
        subflow: None,
        data: Value::Object(attributes.clone()),
        delivered: false,
        in_flight: Vec::new(),
    }
}

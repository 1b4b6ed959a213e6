//! A run taken in from an agent framework's spans (`reel collect`, label
//! `reel.source` = `otlp`) served as an MCP session: the framework
//! recorded each tool's result as it saw it (`gen_ai.tool.call.result`),
//! not as an MCP `CallToolResult`, and no `tools/list` exchange.
//!
//! - A call's result is served as its text content: a recorded string as
//!   it is, anything else as compact JSON; a call without a recorded
//!   result answers no content. A failed call is a tool error
//!   (`isError: true`) whose text is its recorded result, else its error.
//! - The calls served are the run's own: those at its top level and,
//!   when the run's agent is itself a call (`agent:NAME` at the top level:
//!   the OpenAI Agents SDK's workflow holds its agents), the calls beneath
//!   it; an agent call is not a tool. A call beneath a tool's call (a
//!   sub-agent's) is part of that tool's answer.
//! - `tools/list` lists the tools the run's model calls were offered
//!   (`gen_ai.tool.definitions` on its `model.called` facts), then those
//!   whose calls carry their definition (the `spec` of `call.started`,
//!   from OpenInference's `tool.description` and `tool.parameters`), each
//!   with its description and parameters as the spans carried them, and
//!   every other tool the run called with a description saying no
//!   definition was carried and an input schema that says nothing
//!   (`{"type": "object"}`): no schema is invented.

use std::collections::{BTreeMap, HashSet};

use reel::fact::{CallOutcome, FactKind};
use reel::tape::Tape;
use serde_json::{json, Map, Value};

use super::Session;

/// The label `reel collect` puts on every run it writes.
const SOURCE_LABEL: &str = "reel.source";

/// What a tool without a carried definition says of itself.
pub const NO_DEFINITION: &str = "reel: the recorded spans carried no definition of this tool \
     (no gen_ai.tool.definitions, no tool.parameters), so its arguments are not described";

/// Whether `tape` is a run taken in over OpenTelemetry.
pub(super) fn is_ingested(tape: &Tape) -> bool {
    tape.facts.iter().take(1).any(|f| {
        matches!(&f.kind, FactKind::RunStarted(s)
            if s.labels.get(SOURCE_LABEL).map(String::as_str) == Some("otlp"))
    })
}

/// The ids of the agent calls at the top level of a run taken in (none
/// for any other tape): the run's agents, whose calls are the run's.
pub(super) fn run_agents(tape: &Tape) -> HashSet<String> {
    if !is_ingested(tape) {
        return HashSet::new();
    }
    tape.facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallStarted(c)
                if c.parent_call.is_none() && c.tool_name.starts_with(AGENT_PREFIX) =>
            {
                Some(c.call_id.clone())
            }
            _ => None,
        })
        .collect()
}

/// How `reel collect` names an agent's call.
const AGENT_PREFIX: &str = "agent:";

/// Puts `session`'s recorded answers in MCP's shape, and its listing.
pub(super) fn adapt(session: &mut Session, tape: &Tape) {
    for call in &mut session.calls {
        call.outcome = call.outcome.take().map(|outcome| match outcome {
            CallOutcome::Ok { result } => CallOutcome::Ok {
                result: text_result(&result, false),
            },
            CallOutcome::Error { error, result } => {
                let shown = result.unwrap_or_else(|| Value::String(error.clone()));
                CallOutcome::Error {
                    error,
                    result: Some(text_result(&shown, true)),
                }
            }
            aborted => aborted,
        });
    }
    if session.tools_list.is_none() {
        let list = tools_list(session, tape);
        session.tools_list_pages.push((None, list.clone()));
        session.tools_list = Some(list);
    }
}

/// A recorded result as a `CallToolResult` of one text content.
fn text_result(result: &Value, is_error: bool) -> Value {
    let content = match result {
        Value::Null => Vec::new(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        other => vec![json!({"type": "text", "text": other.to_string()})],
    };
    let mut out = json!({ "content": content });
    if is_error {
        out["isError"] = Value::Bool(true);
    }
    out
}

/// The run's own model calls' tool definitions, then its calls'
/// definitions, then the called tools none defined.
fn tools_list(session: &Session, tape: &Tape) -> Value {
    let agents = run_agents(tape);
    let mut tools: BTreeMap<String, Value> = BTreeMap::new();
    for fact in &tape.facts {
        let FactKind::ModelCalled(m) = &fact.kind else {
            continue;
        };
        if fact.call.as_ref().is_some_and(|c| !agents.contains(c)) {
            // A sub-agent's model: its tools are not the run's.
            continue;
        }
        let Some(Value::Array(definitions)) = &m.tool_definitions else {
            continue;
        };
        for d in definitions {
            if let Some((name, tool)) = definition(d) {
                tools.entry(name).or_insert(tool);
            }
        }
    }
    let served: HashSet<&str> = session.calls.iter().map(|c| c.call_id.as_str()).collect();
    for fact in &tape.facts {
        if let FactKind::CallStarted(c) = &fact.kind {
            if let Some(spec) = c
                .spec
                .as_ref()
                .filter(|_| served.contains(c.call_id.as_str()))
            {
                tools
                    .entry(c.tool_name.clone())
                    .or_insert_with(|| spec.mcp_tool());
            }
        }
    }
    for call in &session.calls {
        tools.entry(call.tool.clone()).or_insert_with(|| {
            json!({
                "name": call.tool,
                "description": NO_DEFINITION,
                "inputSchema": {"type": "object"},
            })
        });
    }
    json!({ "tools": tools.into_values().collect::<Vec<_>>() })
}

/// One carried definition as an MCP tool: GenAI's (`name`, `description`,
/// `parameters`) or OpenAI's (the same under `function`).
fn definition(d: &Value) -> Option<(String, Value)> {
    let d = d.get("function").unwrap_or(d);
    let name = d.get("name")?.as_str()?.to_owned();
    let mut tool = Map::new();
    tool.insert("name".into(), Value::String(name.clone()));
    if let Some(description) = d.get("description").filter(|v| v.is_string()) {
        tool.insert("description".into(), description.clone());
    }
    let schema = d
        .get("parameters")
        .or_else(|| d.get("input_schema"))
        .or_else(|| d.get("inputSchema"))
        .filter(|v| v.is_object())
        .cloned();
    tool.insert(
        "inputSchema".into(),
        schema.unwrap_or_else(|| json!({"type": "object"})),
    );
    Some((name, Value::Object(tool)))
}

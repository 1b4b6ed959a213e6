//! The tools' findings: their definitions as the recorded `tools/list`
//! pages give them, and each `tools/call` result against the tool's
//! declared `outputSchema`.

use std::collections::HashMap;

use reel::fact::CallOutcome;
use reel::spec::{schema_fault, validate_value};
use serde_json::Value;

use super::{Call, Finding, Rule};

/// The recorded `tools/list` exchange's call name.
const TOOLS_LIST: &str = "mcp:tools/list";

/// One tool as a recorded listing defined it.
pub(super) struct Listed {
    /// The `tools/list` call whose page listed it.
    call: String,
    /// That call's `call.ended` seq.
    seq: u64,
    name: String,
    definition: Value,
}

/// Every tool of every recorded `tools/list` page, in order.
pub(super) fn listed(calls: &[Call]) -> Vec<Listed> {
    let mut out = Vec::new();
    for c in calls.iter().filter(|c| c.tool == TOOLS_LIST) {
        let Some((seq, _, CallOutcome::Ok { result })) = &c.end else {
            continue;
        };
        let Some(Value::Array(tools)) = result.get("tools") else {
            continue;
        };
        for t in tools {
            out.push(Listed {
                call: c.id.clone(),
                seq: *seq,
                name: t
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                definition: t.clone(),
            });
        }
    }
    out
}

/// Schemas that are no usable JSON Schema of an object, missing
/// descriptions, names listed twice.
pub(super) fn definitions(listed: &[Listed]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for t in listed {
        let finding = |rule: Rule, what: String, fix: &str| Finding {
            rule,
            seq: t.seq,
            call: Some(t.call.clone()),
            tool: Some(t.name.clone()),
            what,
            fix: fix.into(),
        };
        let times = seen.entry(t.name.as_str()).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(finding(
                Rule::DuplicateName,
                format!("the tool `{}` is listed more than once", t.name),
                "give every tool a name of its own: a client keeps one of the definitions, \
                 and which one is not said",
            ));
        }
        let description = t.definition.get("description").and_then(Value::as_str);
        if description.is_none_or(|d| d.trim().is_empty()) {
            out.push(finding(
                Rule::NoDescription,
                format!("the tool `{}` has no description", t.name),
                "describe what the tool does and when to use it: a model chooses tools by \
                 their descriptions",
            ));
        }
        match t.definition.get("inputSchema") {
            None => out.push(finding(
                Rule::InputSchema,
                format!("the tool `{}` has no inputSchema", t.name),
                "declare an inputSchema (`{\"type\": \"object\"}` for a tool without arguments)",
            )),
            Some(schema) => {
                if let Some(fault) = fault_of(schema) {
                    out.push(finding(
                        Rule::InputSchema,
                        format!("the tool `{}` has an inputSchema that {fault}", t.name),
                        "make inputSchema a valid JSON Schema (2020-12 unless `$schema` says \
                         otherwise) whose type is object",
                    ));
                }
            }
        }
        if let Some(schema) = t.definition.get("outputSchema") {
            if let Some(fault) = fault_of(schema) {
                out.push(finding(
                    Rule::OutputSchema,
                    format!("the tool `{}` has an outputSchema that {fault}", t.name),
                    "make outputSchema a valid JSON Schema whose type is object, or drop it",
                ));
            }
        }
    }
    out
}

/// What is wrong with a declared tool schema (MCP: a JSON Schema of an
/// object), as the end of a sentence.
fn fault_of(schema: &Value) -> Option<String> {
    if !schema.is_object() {
        return Some(format!("is not a JSON object ({schema})"));
    }
    if let Some(fault) = schema_fault(schema) {
        return Some(format!("is not a valid JSON Schema: {fault}"));
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => None,
        Some(other) => Some(format!("is of type {other}, not object")),
        None => Some("says no `type` (MCP wants `\"type\": \"object\"`)".into()),
    }
}

/// Each successful `tools/call` of a tool that declares a usable
/// `outputSchema`: `structuredContent` present and valid against it.
/// A tool error (`isError: true`) is not held to it. A place whose value
/// the recorder redacted is not judged (the record no longer holds what
/// the server sent there).
pub(super) fn results(calls: &[Call], listed: &[Listed]) -> Vec<Finding> {
    let mut schemas: HashMap<&str, &Value> = HashMap::new();
    for t in listed {
        if let Some(schema) = t.definition.get("outputSchema") {
            if fault_of(schema).is_none() {
                schemas.entry(t.name.as_str()).or_insert(schema);
            }
        }
    }
    let mut out = Vec::new();
    for c in calls.iter().filter(|c| c.is_tool_call()) {
        let (Some(schema), Some((seq, _, CallOutcome::Ok { result }))) =
            (schemas.get(c.tool.as_str()), &c.end)
        else {
            continue;
        };
        let finding = |what: String| Finding {
            rule: Rule::OffOutputSchema,
            seq: *seq,
            call: Some(c.id.clone()),
            tool: Some(c.tool.clone()),
            what,
            fix: "return structuredContent that validates against the declared outputSchema \
                  (or change the schema to what the tool returns)"
                .into(),
        };
        let Some(structured) = result.get("structuredContent") else {
            out.push(finding(format!(
                "`{}` declares an outputSchema but answered without structuredContent",
                c.tool
            )));
            continue;
        };
        let Err(errors) = validate_value(schema, structured, "the outputSchema", "the tool") else {
            continue;
        };
        let errors: Vec<String> = errors
            .into_iter()
            .filter(|e| {
                !structured
                    .pointer(&e.pointer)
                    .is_some_and(reel::marker::holds_marker)
            })
            .map(|e| e.to_string())
            .collect();
        if errors.is_empty() {
            continue;
        }
        let shown = errors
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        let more = match errors.len() {
            0..=3 => String::new(),
            n => format!(" (and {} more)", n - 3),
        };
        out.push(finding(format!(
            "`{}` answered structuredContent off its outputSchema: {shown}{more}",
            c.tool
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::fault_of;
    use serde_json::json;

    fn check(schema: serde_json::Value, expected: Option<&str>) {
        let fault = fault_of(&schema);
        match (expected, &fault) {
            (None, None) => {}
            (Some(part), Some(fault)) if fault.contains(part) => {}
            _ => panic!("{schema}: expected {expected:?}, got {fault:?}"),
        }
    }

    #[test]
    fn a_tool_schema_is_a_valid_json_schema_of_an_object() {
        check(json!({"type": "object"}), None);
        check(
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}),
            None,
        );
        check(
            json!({"type": "objekt"}),
            Some("is not a valid JSON Schema"),
        );
        check(
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "("}}}),
            Some("is not a valid JSON Schema"),
        );
        check(json!({"type": "array"}), Some("is of type \"array\""));
        check(json!({}), Some("says no `type`"));
        check(json!("object"), Some("is not a JSON object"));
    }
}

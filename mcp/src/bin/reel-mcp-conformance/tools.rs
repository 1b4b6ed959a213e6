//! The official conformance suite's fixture tools
//! (`@modelcontextprotocol/conformance`, server scenarios), written as reel
//! tools from the scenarios' descriptions. Also compiled into the CLI's
//! conformance test (`cli/tests/it/mcp_conformance.rs`), which serves them in
//! process.
//!
//! Only tools: reel's MCP host serves tools, and a tool's value goes out as
//! one text block. What the suite asks beyond that (resources, prompts,
//! completion, sampling, roots, image and audio content) is in the
//! committed baselines, `cli/tests/conformance/baseline-<revision>.yml`, each with its
//! reason.

use std::time::Duration;

use reel::context::{ElicitAnswer, Elicitation, ToolContext, ToolError};
use reel::fact::{ElicitOutcome, Level};
use reel::spec::{ToolSpec, ToolSpecExt};
use reel::tools::Tools;
use serde_json::{json, Value};

/// An input schema taking no arguments.
fn no_args() -> Value {
    json!({ "type": "object", "properties": {} })
}

/// A described tool taking and returning JSON.
fn spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec::new::<Value, Value>(name)
        .description(description)
        .input_schema(no_args())
}

/// `action=<accept|decline|cancel>, content={...}`, as the elicitation
/// scenarios read it.
fn answered(answer: &ElicitAnswer) -> String {
    match &answer.outcome {
        ElicitOutcome::Accept { content } => format!("action=accept, content={content}"),
        ElicitOutcome::Decline => "action=decline, content={}".into(),
        ElicitOutcome::Cancel => "action=cancel, content={}".into(),
        ElicitOutcome::Timeout => "action=cancel, content={} (timed out)".into(),
        ElicitOutcome::Error { message } => format!("action=cancel, content={{}} ({message})"),
    }
}

/// The accepted answer's field `key`, as text.
fn field(answer: &ElicitAnswer, key: &str) -> Option<String> {
    match &answer.outcome {
        ElicitOutcome::Accept { content } => content.get(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        _ => None,
    }
}

/// A form question with one required property, named `id` (on
/// 2026-07-28 its key in the round's `inputRequests`).
fn ask_one(id: &str, message: &str, key: &str, kind: &str) -> Elicitation {
    Elicitation {
        elicitation_id: Some(id.into()),
        ..Elicitation::form(
            message,
            json!({
                "type": "object",
                "properties": { key: { "type": kind } },
                "required": [key],
            }),
        )
    }
}

/// `tools-call-simple-text`.
async fn simple_text(_ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".into())
}

/// `tools-call-with-logging`: three info messages, 50 ms apart.
async fn with_logging(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    ctx.notify("Tool execution started");
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.notify("Tool processing data");
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.notify("Tool execution completed");
    Ok("Tool with logging executed successfully".into())
}

/// `tools-call-error`: always a tool error.
async fn error_handling(_ctx: ToolContext, _args: Value) -> Result<Value, ToolError> {
    Err(ToolError::msg(
        "This tool intentionally returns an error for testing",
    ))
}

/// `tools-call-with-progress`: 0, 50 and 100 of 100, 50 ms apart.
async fn with_progress(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    ctx.progress(json!({ "progress": 0, "total": 100 }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.progress(json!({ "progress": 50, "total": 100 }));
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.progress(json!({ "progress": 100, "total": 100 }));
    Ok("Progress test completed".into())
}

/// `tools-call-elicitation`: asks for a username and an email.
async fn elicitation(ctx: ToolContext, args: Value) -> Result<String, ToolError> {
    let message = args["message"]
        .as_str()
        .unwrap_or("Please provide your details");
    let question = Elicitation::form(
        message,
        json!({
            "type": "object",
            "properties": {
                "username": { "type": "string", "description": "User's response" },
                "email": { "type": "string", "description": "User's email address" },
            },
            "required": ["username", "email"],
        }),
    );
    let answer = ctx.elicit(question).await?;
    Ok(format!("User response: {}", answered(&answer)))
}

/// `elicitation-sep1034-defaults`: a default for every primitive type.
async fn sep1034_defaults(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let question = Elicitation::form(
        "Please review and update the form fields with defaults",
        json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "User name", "default": "John Doe" },
                "age": { "type": "integer", "description": "User age", "default": 30 },
                "score": { "type": "number", "description": "User score", "default": 95.5 },
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": { "type": "boolean", "description": "Verification status", "default": true },
            },
        }),
    );
    let answer = ctx.elicit(question).await?;
    Ok(format!("Elicitation completed: {}", answered(&answer)))
}

/// `elicitation-sep1330-enums`: the five enum shapes.
async fn sep1330_enums(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let question = Elicitation::form(
        "Please select options from the enum fields",
        json!({
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        { "const": "value1", "title": "First Option" },
                        { "const": "value2", "title": "Second Option" },
                        { "const": "value3", "title": "Third Option" },
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" },
                        ],
                    },
                },
            },
        }),
    );
    let answer = ctx.elicit(question).await?;
    Ok(format!("Elicitation completed: {}", answered(&answer)))
}

/// `input-required-result-basic-elicitation` and `-result-type`.
async fn ir_elicitation(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let answer = ctx
        .elicit(ask_one("user_name", "What is your name?", "name", "string"))
        .await?;
    let name = field(&answer, "name").unwrap_or_else(|| "stranger".into());
    Ok(format!("Hello, {name}!"))
}

/// `input-required-result-request-state`: the state came back sealed and
/// whole, or this round would have been refused.
async fn ir_request_state(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let answer = ctx
        .elicit(ask_one("confirm", "Please confirm", "ok", "boolean"))
        .await?;
    Ok(format!("state-ok: {}", answered(&answer)))
}

/// `input-required-result-multi-round`: two questions, two rounds.
async fn ir_multi_round(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let first = ctx
        .elicit(ask_one(
            "step1",
            "Step 1: What is your name?",
            "name",
            "string",
        ))
        .await?;
    let second = ctx
        .elicit(ask_one(
            "step2",
            "Step 2: What is your favorite color?",
            "color",
            "string",
        ))
        .await?;
    Ok(format!(
        "Completed: name={}, color={}",
        field(&first, "name").unwrap_or_default(),
        field(&second, "color").unwrap_or_default()
    ))
}

/// `input-required-result-tampered-state`: reel seals every request
/// state with the archive's keyed MAC.
async fn ir_tampered_state(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let answer = ctx
        .elicit(ask_one("confirm", "Please confirm", "ok", "boolean"))
        .await?;
    Ok(format!("state-ok: {}", answered(&answer)))
}

/// `input-required-result-capability-check`: asks only what the client
/// can answer (reel asks by elicitation alone; a client without it gets
/// the question refused, and no input request).
async fn ir_capabilities(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    if !ctx.has_elicitor() {
        return Ok("no input requested: the client declared no elicitation".into());
    }
    let answer = ctx
        .elicit(ask_one("user_name", "What is your name?", "name", "string"))
        .await?;
    Ok(format!("Completed: {}", answered(&answer)))
}

/// `server-stateless`'s diagnostic logging tool: one info message
/// (sent only to a request that opted in with a log level).
async fn logging_tool(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    ctx.log(Level::Info, "a log message from test_logging_tool");
    Ok("logged".into())
}

/// `server-stateless`'s diagnostic streaming elicitation tool.
async fn streaming_elicitation(ctx: ToolContext, _args: Value) -> Result<String, ToolError> {
    let answer = ctx
        .elicit(ask_one("user_name", "What is your name?", "name", "string"))
        .await?;
    Ok(format!("Completed: {}", answered(&answer)))
}

/// The suite's `json_schema_2020_12_tool` (scenario `json-schema-2020-12`,
/// not scored): a 2020-12 input schema, listed as declared.
async fn json_schema_2020_12(_ctx: ToolContext, args: Value) -> Result<Value, ToolError> {
    Ok(args)
}

fn json_schema_2020_12_input() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": { "street": { "type": "string" }, "city": { "type": "string" } },
            },
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" },
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": {
            "properties": { "contactMethod": { "const": "phone" } },
            "required": ["contactMethod"],
        },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false,
    })
}

/// The registry the conformance server serves.
pub fn tools() -> Tools {
    Tools::new()
        .tool(
            spec("test_simple_text", "Returns a simple text response."),
            simple_text,
        )
        .tool(
            spec(
                "test_tool_with_logging",
                "Sends three info log messages while it runs.",
            ),
            with_logging,
        )
        .tool(
            spec("test_error_handling", "Always fails with a tool error."),
            error_handling,
        )
        .tool(
            spec(
                "test_tool_with_progress",
                "Reports progress 0, 50 and 100 of 100.",
            ),
            with_progress,
        )
        .tool(
            spec(
                "test_elicitation",
                "Asks the user for a username and an email.",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "message": { "type": "string", "description": "The message to show the user" },
                },
                "required": ["message"],
            })),
            elicitation,
        )
        .tool(
            spec(
                "test_elicitation_sep1034_defaults",
                "Asks a form whose every primitive field has a default (SEP-1034).",
            ),
            sep1034_defaults,
        )
        .tool(
            spec(
                "test_elicitation_sep1330_enums",
                "Asks a form with the five enum shapes (SEP-1330).",
            ),
            sep1330_enums,
        )
        .tool(
            spec(
                "test_input_required_result_elicitation",
                "Asks the user's name in an input-required round.",
            ),
            ir_elicitation,
        )
        .tool(
            spec(
                "test_input_required_result_request_state",
                "Asks for a confirmation; the sealed request state comes back.",
            ),
            ir_request_state,
        )
        .tool(
            spec(
                "test_input_required_result_multi_round",
                "Asks two questions, one per round.",
            ),
            ir_multi_round,
        )
        .tool(
            spec(
                "test_input_required_result_tampered_state",
                "Asks for a confirmation; a tampered request state is refused.",
            ),
            ir_tampered_state,
        )
        .tool(
            spec(
                "test_input_required_result_capabilities",
                "Asks only what the client declared it can answer.",
            ),
            ir_capabilities,
        )
        .tool(
            spec("test_logging_tool", "Logs one info message."),
            logging_tool,
        )
        .tool(
            spec(
                "test_streaming_elicitation",
                "Asks the user's name (an input-required round on 2026-07-28).",
            ),
            streaming_elicitation,
        )
        .tool(
            ToolSpec::new::<Value, Value>("json_schema_2020_12_tool")
                .description("Tool with JSON Schema 2020-12 features")
                .input_schema(json_schema_2020_12_input()),
            json_schema_2020_12,
        )
}

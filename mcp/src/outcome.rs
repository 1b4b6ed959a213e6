//! How an MCP answer is written in a record, one place for the proxy that
//! records it, the mock that serves it back and `verify` that compares a
//! live answer with it.
//!
//! - A `CallToolResult` is the call's `ok` result, whole, unless it says
//!   `isError: true`: a tool error is the call's `error` with the whole
//!   result kept structured beside its message (`tool error: ` and the
//!   result's text), so the call reads as failed, a divergence names the
//!   field by its pointer, and the mock serves the result field for field.
//!   (Archives of format 4 and older kept the whole result as JSON text
//!   after the prefix: [`parse_tool_error`] still reads it.)
//! - A JSON-RPC error (a protocol error) is the call's `error`
//!   `json-rpc error CODE: MESSAGE`, with the whole error object (code,
//!   message and `data`) kept structured beside it, so the mock answers
//!   with the error as the server sent it ([`rpc_error`]). (Records made
//!   before kept the text only: [`rpc_error`] reads the code and message
//!   back from it.)
//!
//! The two prefixes keep a tool's own failure and the protocol's apart.

use reel::context::ToolError;
use reel::redact::{KnownSecrets, Redactor};
use serde_json::Value;

/// The prefix of a recorded tool error (`isError: true`).
pub const TOOL_ERROR: &str = "tool error: ";
/// The prefix of a recorded JSON-RPC error.
pub const RPC_ERROR: &str = "json-rpc error ";

/// A JSON-RPC error object as recorded: `json-rpc error CODE: MESSAGE`.
pub fn rpc_error_text(error: &Value) -> String {
    format!(
        "{RPC_ERROR}{}: {}",
        error.get("code").map(Value::to_string).unwrap_or_default(),
        error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
    )
}

/// The code and message of a recorded JSON-RPC error.
pub fn parse_rpc_error(text: &str) -> Option<(i32, String)> {
    let (code, message) = text.strip_prefix(RPC_ERROR)?.split_once(": ")?;
    Some((code.parse().ok()?, message.to_owned()))
}

/// The JSON-RPC error object a call recorded as ending with `error` (its
/// text) and `kept` (its structured result) answered: the object kept
/// whole, else the code and message of the text; `None` when the call
/// did not end with a JSON-RPC error.
pub fn rpc_error(error: &str, kept: Option<&Value>) -> Option<Value> {
    if !error.starts_with(RPC_ERROR) {
        return None;
    }
    match kept {
        Some(object @ Value::Object(o)) if o.get("code").is_some_and(Value::is_i64) => {
            Some(object.clone())
        }
        _ => {
            let (code, message) = parse_rpc_error(error)?;
            Some(serde_json::json!({"code": code, "message": message}))
        }
    }
}

/// Whether a `CallToolResult` says the tool failed.
pub fn is_tool_error(result: &Value) -> bool {
    result.get("isError") == Some(&Value::Bool(true))
}

/// A `CallToolResult` with `isError: true` as recorded.
pub fn tool_error_text(result: &Value) -> String {
    let mut shown = result.clone();
    Redactor::default().redact_value(&mut shown, &mut KnownSecrets::new());
    format!("{TOOL_ERROR}{shown}")
}

/// What a tool error says: `tool error: ` and the text of its content
/// (its text blocks, one per line), else its structured content as JSON.
pub fn tool_error_message(result: &Value) -> String {
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        let mut shown = result
            .get("structuredContent")
            .cloned()
            .unwrap_or(Value::Null);
        Redactor::default().redact_value(&mut shown, &mut KnownSecrets::new());
        return format!("{TOOL_ERROR}{shown}");
    }
    format!("{TOOL_ERROR}{}", texts.join("\n"))
}

/// The `CallToolResult` of a tool error recorded as text (format 4 and
/// older).
pub fn parse_tool_error(text: &str) -> Option<Value> {
    serde_json::from_str(text.strip_prefix(TOOL_ERROR)?)
        .ok()
        .filter(is_tool_error)
}

/// A `tools/call` response (its `result`, or its `error` object) as the
/// call's end: the result, a structured tool error, or a JSON-RPC error
/// (its text, the object kept whole beside it).
pub fn call_end(response: Result<Value, Value>) -> Result<Value, ToolError> {
    match response {
        Ok(result) if is_tool_error(&result) => {
            Err(ToolError::structured(tool_error_message(&result), result))
        }
        Ok(result) => Ok(result),
        Err(error @ Value::Object(_)) => Err(ToolError::structured(rpc_error_text(&error), error)),
        Err(error) => Err(ToolError::msg(rpc_error_text(&error))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_and_protocol_errors_are_recorded_apart_and_read_back() {
        let failed = json!({"content": [{"type": "text", "text": "no"}], "isError": true, "x": 1});
        let error = call_end(Ok(failed.clone())).unwrap_err();
        assert_eq!(error.to_string(), "tool error: no");
        assert_eq!(error.result(), Some(&failed), "kept whole, structured");
        assert_eq!(parse_rpc_error(&error.to_string()), None);
        let ok = json!({"content": [], "isError": false});
        assert_eq!(call_end(Ok(ok.clone())), Ok(ok));
        let object = json!({"code": -32021, "message": "bad: args", "data": {"requiredCapabilities": ["tasks"]}});
        let rpc = call_end(Err(object.clone())).unwrap_err();
        assert_eq!(rpc.to_string(), "json-rpc error -32021: bad: args");
        assert_eq!(rpc.result(), Some(&object), "kept whole, its data too");
        assert_eq!(
            parse_rpc_error(&rpc.to_string()),
            Some((-32021, "bad: args".into()))
        );
        assert_eq!(parse_tool_error(&rpc.to_string()), None);
        assert_eq!(rpc_error(&rpc.to_string(), rpc.result()), Some(object));
        // A record that kept the text only (before the object was kept).
        assert_eq!(
            rpc_error(&rpc.to_string(), None),
            Some(json!({"code": -32021, "message": "bad: args"}))
        );
        // A tool error is no JSON-RPC error, whatever it holds.
        assert_eq!(rpc_error(&error.to_string(), error.result()), None);
        // A format-4 record (the result as text after the prefix) still reads.
        assert_eq!(parse_tool_error(&tool_error_text(&failed)), Some(failed));
        // Secret-named keys in a message made of structured content are
        // redacted (the recorder redacts the result itself).
        let secret = call_end(Ok(
            json!({"isError": true, "structuredContent": {"api_key": "k-123"}}),
        ))
        .unwrap_err();
        assert!(!secret.to_string().contains("k-123"), "{secret}");
    }
}

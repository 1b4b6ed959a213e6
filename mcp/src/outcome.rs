//! How an MCP answer is written in a record, one place for the proxy that
//! records it, the mock that serves it back and `verify` that compares a
//! live answer with it.
//!
//! - A `CallToolResult` is the call's `ok` result, whole, unless it says
//!   `isError: true`: a tool error is the call's `error`, `tool error: `
//!   followed by the whole result as JSON (secret-named keys redacted
//!   first, as the recorder would redact them in a result), so the call
//!   reads as failed and the mock can still serve the result field for
//!   field.
//! - A JSON-RPC error (a protocol error) is `json-rpc error CODE: MESSAGE`.
//!
//! The two prefixes keep a tool's own failure and the protocol's apart.

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

/// The `CallToolResult` of a recorded tool error.
pub fn parse_tool_error(text: &str) -> Option<Value> {
    serde_json::from_str(text.strip_prefix(TOOL_ERROR)?)
        .ok()
        .filter(is_tool_error)
}

/// A `tools/call` response (its `result`, or its `error` object) as the
/// call's end: the result, or the recorded error text.
pub fn call_end(response: Result<Value, Value>) -> Result<Value, String> {
    match response {
        Ok(result) if is_tool_error(&result) => Err(tool_error_text(&result)),
        Ok(result) => Ok(result),
        Err(error) => Err(rpc_error_text(&error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_and_protocol_errors_are_recorded_apart_and_read_back() {
        let failed = json!({"content": [{"type": "text", "text": "no"}], "isError": true, "x": 1});
        let text = call_end(Ok(failed.clone())).unwrap_err();
        assert!(text.starts_with(TOOL_ERROR), "{text}");
        assert_eq!(parse_tool_error(&text), Some(failed));
        assert_eq!(parse_rpc_error(&text), None);
        let ok = json!({"content": [], "isError": false});
        assert_eq!(call_end(Ok(ok.clone())), Ok(ok));
        let rpc = call_end(Err(json!({"code": -32602, "message": "bad: args"}))).unwrap_err();
        assert_eq!(rpc, "json-rpc error -32602: bad: args");
        assert_eq!(parse_rpc_error(&rpc), Some((-32602, "bad: args".into())));
        assert_eq!(parse_tool_error(&rpc), None);
        // Secret-named keys inside a tool error are redacted.
        let secret = call_end(Ok(
            json!({"isError": true, "structuredContent": {"api_key": "k-123"}}),
        ))
        .unwrap_err();
        assert!(!secret.contains("k-123"), "{secret}");
    }
}

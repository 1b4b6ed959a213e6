//! What reel's MCP HTTP listeners (the recording proxy and the HTTP mock)
//! refuse in a POST before forwarding or serving it, as the 2026-07-28
//! streamable HTTP transport says:
//!
//! - a JSON-RPC batch (a JSON array body): `400`, error `-32600`;
//! - SEP-2243 headers that disagree with the body: `Mcp-Method` (when
//!   sent) must be the message's `method`, and `Mcp-Name` (when sent)
//!   the name the method acts on (`params.name` of `tools/call` and
//!   `prompts/get`, `params.uri` of `resources/read`, `subscribe` and
//!   `unsubscribe`, `params.taskId` of `tasks/get`, `update` and
//!   `cancel`), plain or `=?base64?…?=`; a header sent twice disagrees.
//!   `400`, error `-32020`, the request's id echoed.
//!
//! The checks read the headers and body as the client sent them, before
//! any redaction: redacting a value never makes a mismatch.

use base64::Engine;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

/// JSON-RPC error code of a request whose SEP-2243 headers disagree with
/// its body.
pub const HEADER_MISMATCH: i64 = -32020;

/// JSON-RPC error code of an invalid request (a batch, here).
pub const INVALID_REQUEST: i64 = -32600;

/// A POST refused before it reached the server (or the record's answers).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// The JSON-RPC error code.
    pub code: i64,
    /// The error's message, saying what to do.
    pub message: String,
    /// The refused request's id (`null` for a batch or a notification).
    pub id: Value,
}

impl Refusal {
    /// The JSON-RPC error response that answers it.
    pub(crate) fn message(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        })
    }

    /// The HTTP response: `400 Bad Request`, the JSON-RPC error as body.
    pub(crate) fn response(&self) -> Response<Full<Bytes>> {
        let body = serde_json::to_vec(&self.message()).unwrap_or_default();
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = StatusCode::BAD_REQUEST;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// Why the POST of `body` with `headers` is refused, or `None`. A body
/// that is no JSON is not refused here (the server says what it says).
pub(crate) fn refusal(headers: &HeaderMap, body: &[u8]) -> Option<Refusal> {
    let message: Value = serde_json::from_slice(body).ok()?;
    if message.is_array() {
        return Some(Refusal {
            code: INVALID_REQUEST,
            message: "JSON-RPC batches are not supported: send one message per POST \
                      (MCP streamable HTTP, 2025-06-18 and later)"
                .to_owned(),
            id: Value::Null,
        });
    }
    let method = message.get("method").and_then(Value::as_str)?;
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let mismatch = |message: String| Refusal {
        code: HEADER_MISMATCH,
        message,
        id: id.clone(),
    };
    match single(headers, "mcp-method") {
        Err(why) => return Some(mismatch(why)),
        Ok(Some(sent)) if sent != method => {
            return Some(mismatch(format!(
                "the Mcp-Method header {sent:?} does not match the body's method {method:?}; \
                 send the method the body carries"
            )))
        }
        Ok(_) => {}
    }
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    let sent = match single(headers, "mcp-name") {
        Ok(Some(sent)) => sent,
        Ok(None) => return None,
        Err(why) => return Some(mismatch(why)),
    };
    let Some(sent) = decoded(sent) else {
        return Some(mismatch(
            "the Mcp-Name header is not valid =?base64?...?= (Base64 of UTF-8 text)".to_owned(),
        ));
    };
    let expected = message
        .pointer(&format!("/params/{key}"))
        .and_then(Value::as_str);
    if expected != Some(sent.as_str()) {
        return Some(mismatch(format!(
            "the Mcp-Name header {sent:?} does not match the body's params.{key} {:?}; \
             send the name the body carries",
            expected.unwrap_or_default()
        )));
    }
    None
}

/// The one value of header `name`: `Ok(None)` when absent, `Err` when
/// sent twice or not text.
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!(
            "the {name} header was sent more than once; send it once"
        ));
    }
    first.to_str().map(|v| Some(v.trim())).map_err(|_| {
        format!("the {name} header is not visible ASCII; Base64-encode it (=?base64?...?=)")
    })
}

/// A SEP-2243 header value: plain, or `=?base64?B64?=`.
fn decoded(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(inner) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(headers: &[(&str, &str)], body: Value) -> Option<(i64, Value)> {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        refusal(&h, &serde_json::to_vec(&body).unwrap()).map(|r| (r.code, r.id))
    }

    #[test]
    fn batches_and_headers_that_disagree_with_the_body_are_refused() {
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"name": "add", "arguments": {"a": 1}}});
        let read = json!({"jsonrpc": "2.0", "id": "r", "method": "resources/read",
                          "params": {"uri": "file:///a b"}});
        let ok = [
            (vec![], call.clone()),
            (vec![("Mcp-Method", "tools/call")], call.clone()),
            (
                vec![("Mcp-Method", "tools/call"), ("Mcp-Name", "add")],
                call.clone(),
            ),
            (vec![("Mcp-Name", "=?base64?YWRk?=")], call.clone()),
            (vec![("Mcp-Name", "file:///a b")], read.clone()),
            (
                vec![("Mcp-Method", "tools/list"), ("Mcp-Name", "x")],
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            ),
            (vec![("Mcp-Method", "tools/call")], json!("not a message")),
        ];
        for (headers, body) in ok {
            assert_eq!(check(&headers, body.clone()), None, "{headers:?} {body}");
        }
        let refused = [
            (vec![("Mcp-Method", "tools/list")], call.clone()),
            (vec![("Mcp-Name", "sub")], call.clone()),
            (vec![("Mcp-Name", "=?base64?c3Vi?=")], call.clone()),
            (vec![("Mcp-Name", "=?base64?!!?=")], call.clone()),
            (vec![("Mcp-Name", "add"), ("Mcp-Name", "add")], call.clone()),
            (vec![("Mcp-Name", "file:///b")], read.clone()),
        ];
        for (headers, body) in refused {
            let id = body["id"].clone();
            assert_eq!(
                check(&headers, body),
                Some((HEADER_MISMATCH, id)),
                "{headers:?}"
            );
        }
        assert_eq!(
            check(&[], json!([call, read])),
            Some((INVALID_REQUEST, Value::Null))
        );
    }
}

//! An OTLP trace export request (protobuf or OTLP/JSON) read into
//! [`SpanIn`]s: one owned span each, its attributes as JSON, its
//! resource's beside it. Reading never panics: a body that does not decode
//! is a [`DecodeError`] naming what is wrong, and a span that cannot be
//! kept (a missing or malformed id) is rejected alone, counted and named.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use prost::Message as _;
use serde_json::{Map, Value};

/// How a request's body is encoded (its `Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf`.
    Protobuf,
    /// `application/json` (OTLP/JSON: hex ids, 64-bit integers as strings).
    Json,
}

impl Encoding {
    /// The encoding a `Content-Type` names, or what to send instead.
    pub fn of_content_type(content_type: Option<&str>) -> Result<Encoding, DecodeError> {
        let media = content_type
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
            "application/json" => Ok(Encoding::Json),
            _ => Err(DecodeError::ContentType(if media.is_empty() {
                "none".into()
            } else {
                media
            })),
        }
    }
}

/// Why a body could not be read. The message names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Neither protobuf nor JSON.
    #[error(
        "unsupported Content-Type {0:?}: send OTLP as application/x-protobuf or application/json"
    )]
    ContentType(String),
    /// The body is not a protobuf `ExportTraceServiceRequest`.
    #[error("the body is not an OTLP ExportTraceServiceRequest in protobuf: {0}")]
    Protobuf(String),
    /// The body is not an OTLP/JSON `ExportTraceServiceRequest`.
    #[error("the body is not an OTLP/JSON ExportTraceServiceRequest: {0}")]
    Json(String),
}

/// One span as taken in.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanIn {
    /// The trace id, 32 lowercase hex digits.
    pub trace_id: String,
    /// The span id, 16 lowercase hex digits.
    pub span_id: String,
    /// The parent span's id; `None` for a root span.
    pub parent: Option<String>,
    /// The span's name (`execute_tool get_weather`).
    pub name: String,
    /// Start, unix nanoseconds.
    pub start: u64,
    /// End, unix nanoseconds (never before the start).
    pub end: u64,
    /// The status: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// The status message.
    pub status_message: String,
    /// The span's attributes, as JSON.
    pub attributes: Map<String, Value>,
    /// The span's events: time, name, attributes.
    pub events: Vec<(u64, String, Map<String, Value>)>,
    /// The resource's attributes (`service.name`, `telemetry.sdk.*`).
    pub resource: Arc<Map<String, Value>>,
}

impl SpanIn {
    /// A string attribute.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(Value::as_str)
    }
}

/// What a request held: the spans kept, and the rejected ones, counted
/// with the first reason.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The spans kept.
    pub spans: Vec<SpanIn>,
    /// How many spans were rejected.
    pub rejected: u64,
    /// Why the first rejected span was.
    pub reason: Option<String>,
}

/// Reads a body of `encoding`.
pub fn decode(body: &[u8], encoding: Encoding) -> Result<Decoded, DecodeError> {
    let request = match encoding {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(body)
            .map_err(|e| DecodeError::Protobuf(e.to_string()))?,
        Encoding::Json => serde_json::from_slice::<ExportTraceServiceRequest>(body)
            .map_err(|e| DecodeError::Json(e.to_string()))?,
    };
    Ok(spans_of(request))
}

/// The spans of a request.
pub fn spans_of(request: ExportTraceServiceRequest) -> Decoded {
    let mut out = Decoded::default();
    for (r, resource_spans) in request.resource_spans.into_iter().enumerate() {
        let resource = Arc::new(
            resource_spans
                .resource
                .map(|r| attributes(r.attributes))
                .unwrap_or_default(),
        );
        for (s, scope_spans) in resource_spans.scope_spans.into_iter().enumerate() {
            for (i, span) in scope_spans.spans.into_iter().enumerate() {
                let at = format!("resourceSpans[{r}].scopeSpans[{s}].spans[{i}]");
                let ids = (
                    id(&span.trace_id, 16, "traceId"),
                    id(&span.span_id, 8, "spanId"),
                    match span.parent_span_id.len() {
                        0 => Ok(None),
                        _ => id(&span.parent_span_id, 8, "parentSpanId").map(Some),
                    },
                );
                let (trace_id, span_id, parent) = match ids {
                    (Ok(t), Ok(s), Ok(p)) => (t, s, p),
                    (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                        out.rejected += 1;
                        out.reason.get_or_insert_with(|| format!("{at}: {e}"));
                        continue;
                    }
                };
                let (status_code, status_message) =
                    span.status.map(|s| (s.code, s.message)).unwrap_or_default();
                let start = span.start_time_unix_nano;
                out.spans.push(SpanIn {
                    trace_id,
                    span_id,
                    parent,
                    name: span.name,
                    start,
                    end: span.end_time_unix_nano.max(start),
                    status_code,
                    status_message,
                    attributes: attributes(span.attributes),
                    events: span
                        .events
                        .into_iter()
                        .map(|e| (e.time_unix_nano, e.name, attributes(e.attributes)))
                        .collect(),
                    resource: resource.clone(),
                });
            }
        }
    }
    out
}

/// An id of `len` bytes, as lowercase hex; all zeroes is invalid.
fn id(bytes: &[u8], len: usize, field: &str) -> Result<String, String> {
    if bytes.len() != len {
        return Err(format!(
            "{field} is {} bytes long: OTLP ids are {len} bytes",
            bytes.len()
        ));
    }
    if bytes.iter().all(|b| *b == 0) {
        return Err(format!("{field} is all zeroes, which OTLP calls invalid"));
    }
    Ok(hex::encode(bytes))
}

/// Attributes as a JSON object (a repeated key: the last one).
pub fn attributes(kvs: Vec<KeyValue>) -> Map<String, Value> {
    kvs.into_iter()
        .map(|kv| (kv.key, kv.value.map_or(Value::Null, any_value_json)))
        .collect()
}

/// An OTLP `AnyValue` as JSON: bytes as lowercase hex, a non-finite
/// double as its text.
pub fn any_value_json(value: AnyValue) -> Value {
    match value.value {
        None => Value::Null,
        Some(any_value::Value::StringValue(s)) => Value::String(s),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(b),
        Some(any_value::Value::IntValue(i)) => Value::from(i),
        Some(any_value::Value::DoubleValue(d)) => serde_json::Number::from_f64(d)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(d.to_string())),
        Some(any_value::Value::BytesValue(b)) => Value::String(hex::encode(b)),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.into_iter().map(any_value_json).collect())
        }
        Some(any_value::Value::KvlistValue(kv)) => Value::Object(attributes(kv.values)),
        // An index into a profile's string table: kept as given.
        Some(any_value::Value::StringValueStrindex(i)) => serde_json::json!({ "strindex": i }),
    }
}

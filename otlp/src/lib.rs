//! Recorded reel runs as OpenTelemetry spans (OTLP), following the GenAI
//! semantic conventions: a run is an `invoke_agent {gen_ai.agent.name}`
//! span (the agent: the recorded producer), each call an
//! `execute_tool {gen_ai.tool.name}` span (nested dispatch as child
//! spans; a call recorded from MCP follows the MCP conventions, as
//! `tools/call {tool}`, `initialize`, ...), and the facts are span
//! events. The crate's README names the version of the conventions the
//! attribute names follow.
//!
//! - [`map`]: the mapping, a pure function of a run's record and facts.
//! - [`stream_request`] / [`archive_request`]: an `ExportTraceServiceRequest`
//!   of whole streams, from facts in hand or from an [`Archive`].
//! - [`LiveExport`]: a `Store` wrapper that sends each call's span when the
//!   call ends, off the tools' threads and the writer's.
//! - [`send()`]: the request to a collector, protobuf over HTTP
//!   (`POST /v1/traces`) or gRPC.
//!
//! Content (arguments, results, payloads) is exported only with
//! [`Options::content`], and then only as recorded: the archive holds
//! redacted data, and credentials only as fingerprints.
//!
//! ```
//! use reel_core::fact::Producer;
//! use reel_otlp::{derived_trace_id, StreamId, TraceParent};
//! let producer = Producer { name: "demo".into(), version: "1".into() };
//! // Stable ids: the same recording gives the same trace id ...
//! let run = StreamId::new("run-1", 1_700_000_000_000_000_000, &producer);
//! assert_eq!(derived_trace_id(&run), derived_trace_id(&run.clone()));
//! // ... and another recording of the same run id (another host) another.
//! let elsewhere = StreamId::new("run-1", 1_700_000_000_000_000_001, &producer);
//! assert_ne!(derived_trace_id(&run), derived_trace_id(&elsewhere));
//! assert!(TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").is_some());
//! ```

#![warn(missing_docs)]

mod live_export;
pub mod map;
pub mod send;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use reel_archive::{Archive, ArchiveError};
use reel_core::fact::Fact;
use reel_core::guard::{Encoding, Guard};
use reel_core::run::RunRecord;

pub use live_export::{LiveExport, LiveHandle};
pub use map::{derived_span_id, derived_trace_id, stream_spans, Options, StreamId, TraceParent};
pub use opentelemetry_proto;
pub use send::{send, Collector, ExportError, Protocol};

/// The instrumentation scope's name on every exported span.
pub const SCOPE: &str = "reel-otlp";

/// The conventions the attribute names follow: the
/// open-telemetry/semantic-conventions-genai repository (no tagged
/// release), at this commit. The README says the same.
pub const CONVENTIONS: &str = "semantic-conventions-genai@55a32cddb97d99cec08d5ee081e74206a0636041";

/// One request holding `spans` under reel's resource (`service.name` =
/// `reel`) and scope.
pub fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    let string = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    string("service.name", "reel"),
                    string("telemetry.sdk.name", SCOPE),
                    string("telemetry.sdk.language", "rust"),
                    string("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: SCOPE.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The request of streams whose facts are in hand (a tape, say).
pub fn stream_request<'a>(
    streams: impl IntoIterator<Item = (&'a RunRecord, &'a [Fact])>,
    options: &Options,
) -> ExportTraceServiceRequest {
    let spans = streams
        .into_iter()
        .flat_map(|(record, facts)| stream_spans(record, facts, options))
        .collect();
    request(spans)
}

/// The request of the streams `run_ids` (run ids, or the keys of calls
/// outside any run) read from `archive`. A stream whose facts cannot all
/// be read is refused whole (the error names it): a trace with holes
/// would show a run that did not happen.
pub fn archive_request(
    archive: &Archive,
    run_ids: &[String],
    options: &Options,
) -> Result<ExportTraceServiceRequest, ArchiveError> {
    let mut spans = Vec::new();
    for id in run_ids {
        let record = archive.run(id)?;
        let facts = archive.facts(id, ..)?.collect::<Result<Vec<Fact>, _>>()?;
        spans.extend(stream_spans(&record, &facts, options));
    }
    Ok(request(spans))
}

/// The tripwire over a request about to be sent ([`Guard`]; the host
/// passes `reel::tripwire::Tripwire`): its protobuf bytes are searched
/// for every value `wire` holds, raw and encoded; on a hit, every string of every span (name, attributes,
/// events, links, nested values) is scrubbed, and the span gains a
/// `redaction.tripped` event per field hit, with `reel.redaction.point`
/// (`otlp`), `reel.redaction.span` (the span's name),
/// `reel.redaction.field`, `reel.redaction.encoding` and
/// `reel.redaction.rule` (`rule`), never the value. How many fields were
/// hit.
pub fn guard_request(
    request: &mut ExportTraceServiceRequest,
    wire: &dyn Guard,
    rule: &str,
) -> usize {
    use prost::Message as _;
    if wire.is_empty() || wire.scan(&request.encode_to_vec()).is_none() {
        return 0;
    }
    let mut total = 0;
    for rs in &mut request.resource_spans {
        if let Some(resource) = &mut rs.resource {
            let mut hits = Vec::new();
            scrub_attributes(wire, &mut resource.attributes, "resource", &mut hits);
            total += hits.len();
        }
        for ss in &mut rs.scope_spans {
            for span in &mut ss.spans {
                let mut hits: Vec<(String, Encoding)> = Vec::new();
                if let Some(e) = wire.scrub_str(&mut span.name) {
                    hits.push(("name".into(), e));
                }
                scrub_attributes(wire, &mut span.attributes, "attributes", &mut hits);
                for (i, event) in span.events.iter_mut().enumerate() {
                    if let Some(e) = wire.scrub_str(&mut event.name) {
                        hits.push((format!("events/{i}/name"), e));
                    }
                    let at = format!("events/{i}/attributes");
                    scrub_attributes(wire, &mut event.attributes, &at, &mut hits);
                }
                for (i, link) in span.links.iter_mut().enumerate() {
                    let at = format!("links/{i}/attributes");
                    scrub_attributes(wire, &mut link.attributes, &at, &mut hits);
                }
                if let Some(status) = &mut span.status {
                    if let Some(e) = wire.scrub_str(&mut status.message) {
                        hits.push(("status/message".into(), e));
                    }
                }
                total += hits.len();
                for (field, encoding) in hits {
                    let string = |k: &str, v: &str| KeyValue {
                        key: k.into(),
                        value: Some(AnyValue {
                            value: Some(any_value::Value::StringValue(v.into())),
                        }),
                        ..Default::default()
                    };
                    span.events
                        .push(opentelemetry_proto::tonic::trace::v1::span::Event {
                            time_unix_nano: span.start_time_unix_nano,
                            name: "redaction.tripped".into(),
                            attributes: vec![
                                string("reel.redaction.point", "otlp"),
                                string("reel.redaction.span", &span.name),
                                string("reel.redaction.field", &field),
                                string("reel.redaction.encoding", encoding.as_str()),
                                string("reel.redaction.rule", rule),
                            ],
                            dropped_attributes_count: 0,
                        });
                }
            }
        }
    }
    if total > 0 {
        tracing::warn!("reel-otlp: a secret was found in spans about to be exported, and scrubbed ({total} fields; see their redaction.tripped events)");
    }
    total
}

fn scrub_attributes(
    wire: &dyn Guard,
    attributes: &mut [KeyValue],
    at: &str,
    hits: &mut Vec<(String, Encoding)>,
) {
    for kv in attributes {
        if let Some(e) = wire.scrub_str(&mut kv.key) {
            hits.push((format!("{at}/{}", kv.key), e));
        }
        let here = format!("{at}/{}", kv.key);
        if let Some(value) = &mut kv.value {
            scrub_any(wire, value, &here, hits);
        }
    }
}

fn scrub_any(wire: &dyn Guard, value: &mut AnyValue, at: &str, hits: &mut Vec<(String, Encoding)>) {
    match &mut value.value {
        Some(any_value::Value::StringValue(s)) => {
            if let Some(e) = wire.scrub_str(s) {
                hits.push((at.to_owned(), e));
            }
        }
        Some(any_value::Value::BytesValue(b)) => {
            if let Some(e) = wire.scan(b) {
                b.clear();
                b.extend_from_slice(reel_core::marker::MARKER.as_bytes());
                hits.push((at.to_owned(), e));
            }
        }
        Some(any_value::Value::ArrayValue(a)) => {
            for (i, v) in a.values.iter_mut().enumerate() {
                scrub_any(wire, v, &format!("{at}/{i}"), hits);
            }
        }
        Some(any_value::Value::KvlistValue(kv)) => scrub_attributes(wire, &mut kv.values, at, hits),
        _ => {}
    }
}

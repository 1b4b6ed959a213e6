//! Recorded reel runs as OpenTelemetry spans (OTLP), following the GenAI
//! semantic conventions: a run is an `invoke_agent` span, each call an
//! `execute_tool {gen_ai.tool.name}` span (nested dispatch as child
//! spans), and the facts are span events. The crate's README names the
//! version of the conventions the attribute names follow.
//!
//! - [`map`]: the mapping, a pure function of a run's record and facts.
//! - [`stream_request`] / [`archive_request`]: an `ExportTraceServiceRequest`
//!   of whole streams, from facts in hand or from an [`Archive`].
//! - [`LiveExport`]: a `Store` wrapper that sends each call's span when the
//!   call ends, off the tools' threads and the writer's.
//! - [`send`]: the request to a collector, protobuf over HTTP
//!   (`POST /v1/traces`) or gRPC.
//!
//! Content (arguments, results, payloads) is exported only with
//! [`Options::content`], and then only as recorded: the archive holds
//! redacted data, and credentials only as fingerprints.
//!
//! ```
//! use reel_otlp::{derived_trace_id, TraceParent};
//! // Stable ids: the same run id gives the same trace id.
//! assert_eq!(derived_trace_id("run-1"), derived_trace_id("run-1"));
//! assert!(TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").is_some());
//! ```

#![warn(missing_docs)]

pub mod live;
pub mod map;
pub mod send;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use reel::fact::Fact;
use reel::run::RunRecord;
use reel_archive::{Archive, ArchiveError};

pub use live::{LiveExport, LiveHandle};
pub use map::{derived_span_id, derived_trace_id, stream_spans, Options, TraceParent};
pub use opentelemetry_proto;
pub use send::{send, ExportError, Protocol};

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

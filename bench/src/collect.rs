//! The `collect` workload: agent traces as an OTLP exporter sends them
//! (protobuf requests of up to 512 spans, a trace's children before its
//! root), taken in by `reel collect`'s collector and written as runs,
//! against the same spans decoded and written as JSON Lines with the same
//! group commit (one fsync per trace, as reel flushes once per run).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;

use crate::record::Recorded;

/// The shape of the collect workload.
#[derive(Debug, Clone, Copy)]
pub struct CollectShape {
    /// Traces (agent runs).
    pub traces: usize,
    /// Tool calls per trace, each after a model call: 2 spans each.
    pub calls: usize,
}

impl CollectShape {
    /// Spans sent: per trace the root and two per call.
    pub fn spans(&self) -> usize {
        self.traces * (1 + 2 * self.calls)
    }
}

fn kv(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..KeyValue::default()
    }
}

fn trace_spans(t: usize, shape: CollectShape) -> Vec<Span> {
    let mut trace_id = [0u8; 16];
    trace_id[..8].copy_from_slice(&(t as u64 + 1).to_be_bytes());
    let root_id = [1u8, 0, 0, 0, 0, 0, 0, 0];
    let base = 1_700_000_000_000_000_000u64 + t as u64 * 1_000_000_000;
    let span = |id: u64, name: String, start: u64, end: u64, attrs: Vec<KeyValue>| Span {
        trace_id: trace_id.to_vec(),
        span_id: (id + 2).to_be_bytes().to_vec(),
        parent_span_id: root_id.to_vec(),
        name,
        start_time_unix_nano: base + start,
        end_time_unix_nano: base + end,
        attributes: attrs,
        ..Span::default()
    };
    let mut out = Vec::with_capacity(1 + 2 * shape.calls);
    for c in 0..shape.calls as u64 {
        let at = 1_000 + c * 10_000;
        out.push(span(2 * c, "chat model".into(), at, at + 4_000, vec![
            kv("gen_ai.operation.name", "chat".into()),
            kv("gen_ai.provider.name", "openai".into()),
            kv("gen_ai.request.model", "gpt-4o".into()),
            kv("gen_ai.input.messages", format!(r#"[{{"role":"user","parts":[{{"type":"text","content":"step {c} of the task, with some context to carry"}}]}}]"#)),
        ]));
        out.push(span(
            2 * c + 1,
            "execute_tool search".into(),
            at + 5_000,
            at + 9_000,
            vec![
                kv("gen_ai.operation.name", "execute_tool".into()),
                kv("gen_ai.tool.name", "search".into()),
                kv("gen_ai.tool.call.id", format!("call-{c}")),
                kv(
                    "gen_ai.tool.call.arguments",
                    format!(r#"{{"query":"weather in city {c}","limit":10}}"#),
                ),
                kv(
                    "gen_ai.tool.call.result",
                    format!("{{\"results\":[\"sunny, 21C, light wind from the west, {c}\"]}}"),
                ),
            ],
        ));
    }
    let mut root = span(
        u64::MAX - 2,
        "invoke_agent agent".into(),
        0,
        1_000 + shape.calls as u64 * 10_000,
        vec![
            kv("gen_ai.operation.name", "invoke_agent".into()),
            kv("gen_ai.agent.name", "agent".into()),
        ],
    );
    root.span_id = root_id.to_vec();
    root.parent_span_id = Vec::new();
    out.push(root);
    out
}

/// The request bodies an exporter with a batch of 512 spans sends.
pub fn requests(shape: CollectShape) -> Vec<Vec<u8>> {
    let spans: Vec<Span> = (0..shape.traces)
        .flat_map(|t| trace_spans(t, shape))
        .collect();
    spans
        .chunks(512)
        .map(|batch| {
            ExportTraceServiceRequest {
                resource_spans: vec![ResourceSpans {
                    resource: Some(Resource {
                        attributes: vec![kv("service.name", "bench-agent".into())],
                        ..Resource::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        spans: batch.to_vec(),
                        ..ScopeSpans::default()
                    }],
                    schema_url: String::new(),
                }],
            }
            .encode_to_vec()
        })
        .collect()
}

/// reel: every body taken in, every trace written as a run (redaction,
/// the tripwire, one import and one flush per run).
pub fn reel(dir: &Path, bodies: &[Vec<u8>], spans: usize) -> io::Result<Recorded> {
    let archive = reel_archive::Archive::open(dir, reel_archive::ArchiveConfig::default())
        .map_err(io::Error::other)?;
    let config = reel_collect::CollectConfig::new(dir.into(), "127.0.0.1:0".parse().unwrap());
    let collector = reel_collect::Collector::with_archive(archive, &config);
    let started = Instant::now();
    for body in bodies {
        let answer = collector.receive(Some("application/x-protobuf"), body);
        if !answer.status().is_success() {
            return Err(io::Error::other(format!("refused: {}", answer.status())));
        }
    }
    collector.write_ready(true);
    let elapsed = started.elapsed();
    if collector.summary().failed > 0 {
        return Err(io::Error::other("a trace was not written"));
    }
    Ok(Recorded {
        facts: spans,
        elapsed,
    })
}

/// The baseline: the same bodies decoded, each trace's spans written as
/// JSON Lines (OTLP/JSON's span), one fsync per trace.
pub fn jsonl(path: &Path, bodies: &[Vec<u8>], spans: usize) -> io::Result<Recorded> {
    let started = Instant::now();
    let mut file = File::create(path)?;
    let mut traces: HashMap<Vec<u8>, Vec<Span>> = HashMap::new();
    for body in bodies {
        let request = ExportTraceServiceRequest::decode(&body[..]).map_err(io::Error::other)?;
        for rs in request.resource_spans {
            for ss in rs.scope_spans {
                for span in ss.spans {
                    traces.entry(span.trace_id.clone()).or_default().push(span);
                }
            }
        }
    }
    let mut buf = Vec::with_capacity(1 << 20);
    for (_, spans) in traces {
        buf.clear();
        for span in &spans {
            serde_json::to_writer(&mut buf, span).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        file.write_all(&buf)?;
        file.sync_data()?;
    }
    Ok(Recorded {
        facts: spans,
        elapsed: started.elapsed(),
    })
}

//! Spans and requests built by hand for the arrival and door tests, an
//! HTTP/1.1 client in a few lines, and a collector served on loopback.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use reel_archive::{Archive, ArchiveConfig, RunFilter};
use reel_collect::{CollectConfig, Collector, Summary};
use serde_json::Value;

pub const TRACE: [u8; 16] = [7; 16];

pub fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

/// A span of [`TRACE`]: id `id`, parent `parent` (0: none), from `start`
/// to `end` (nanoseconds past 1.7e18).
pub fn span(id: u8, parent: u8, name: &str, start: u64, end: u64, attrs: Vec<KeyValue>) -> Span {
    let base = 1_700_000_000_000_000_000;
    Span {
        trace_id: TRACE.to_vec(),
        span_id: vec![id; 8],
        parent_span_id: if parent == 0 {
            Vec::new()
        } else {
            vec![parent; 8]
        },
        name: name.into(),
        start_time_unix_nano: base + start,
        end_time_unix_nano: base + end,
        attributes: attrs,
        ..Span::default()
    }
}

pub fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "test-agent"), kv("service.version", "9")],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            schema_url: String::new(),
        }],
    }
}

pub fn protobuf(spans: Vec<Span>) -> Vec<u8> {
    request(spans).encode_to_vec()
}

/// `POST path` with `headers`; the status and the body.
pub fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
        addr.port(),
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A refused body may be answered before it is all sent.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(raw.len(), |i| i + 4);
    (status, raw[at..].to_vec())
}

pub fn post_protobuf(addr: SocketAddr, body: &[u8]) -> (u16, Vec<u8>) {
    post(
        addr,
        "/v1/traces",
        &[("Content-Type", "application/x-protobuf")],
        body,
    )
}

/// A collector served on loopback: its address, and a stop that writes
/// what it holds and returns the summary and the archive.
pub struct Served {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<std::thread::JoinHandle<Summary>>,
    archive: Archive,
}

impl Served {
    pub fn start(dir: &std::path::Path, edit: impl FnOnce(&mut CollectConfig)) -> Served {
        let mut config = CollectConfig::new(dir.to_path_buf(), "127.0.0.1:0".parse().unwrap());
        // Nothing is written before the stop: no test waits on a timer.
        config.grace = Duration::from_secs(3600);
        edit(&mut config);
        let archive = Archive::open(dir, ArchiveConfig::default()).unwrap();
        let collector = Collector::with_archive(archive.clone(), &config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = std::sync::mpsc::channel();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                config.listen = listener.local_addr().unwrap();
                tx.send(config.listen).unwrap();
                collector
                    .serve(&config, listener, async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap()
            })
        });
        let addr = rx.recv().unwrap();
        Served {
            addr,
            stop: Some(stop),
            done: Some(done),
            archive,
        }
    }

    pub fn stop(mut self) -> (Summary, Archive) {
        let _ = self.stop.take().unwrap().send(());
        let summary = self.done.take().unwrap().join().unwrap();
        (summary, self.archive.clone())
    }
}

/// Every run's facts, as JSON (kind, call, data), by run id.
pub fn runs(archive: &Archive) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    let page = archive.list_runs(&RunFilter::default()).unwrap();
    for record in page.runs {
        let facts = archive
            .facts(&record.run_id, ..)
            .unwrap()
            .map(|f| serde_json::to_value(f.unwrap()).unwrap())
            .collect();
        out.push((record.run_id.clone(), facts));
    }
    out
}

pub fn kinds(facts: &[Value]) -> Vec<String> {
    facts
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}

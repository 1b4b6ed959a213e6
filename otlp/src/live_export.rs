//! Live export: each call's span sent when the call ends, while the run
//! is still being recorded.
//!
//! [`LiveExport`] wraps the recorder's [`Store`] (the write pipeline's
//! seam: `Recorder::with_archive_and_store`). After a batch is stored it hands the
//! stored facts (numbered, timed, redacted: what the archive holds) to an
//! exporter thread over an unbounded channel, so neither the tools nor
//! the recorder's writer ever wait on a collector. The exporter keeps each
//! open stream's facts, builds a call's span with the same mapping as
//! `reel export --otlp` when its `call.ended` arrives (the run's span at
//! `run.ended`), and sends it. A collector that is down or refuses costs
//! only a `tracing` warning: the facts are in the archive, and `reel export
//! --otlp` later delivers every span with the same ids.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

use opentelemetry_proto::tonic::trace::v1::Span;
use reel_core::fact::{Fact, FactKind};
use reel_core::lock::{lock, wait};
use reel_core::run::RunRecord;
use reel_core::store::{Store, StoreError};

use crate::map::{derived_span_id, mcp_initialize, stream_spans, Options, StreamId};
use crate::send::{Collector, ExportError, Protocol};

/// What the exporter thread has left to do: batches queued, not yet
/// handled.
#[derive(Default)]
struct Backlog {
    queued: Mutex<u64>,
    idle: Condvar,
}

/// Waits for the exporter thread; see [`LiveExport::new`].
#[derive(Clone)]
pub struct LiveHandle {
    backlog: Arc<Backlog>,
}

impl LiveHandle {
    /// Blocks until every batch stored so far has been handled (its spans
    /// sent, or given up on). For tests and orderly shutdowns; the
    /// recording never calls it.
    pub fn wait_idle(&self) {
        let mut queued = lock(&self.backlog.queued);
        while *queued > 0 {
            queued = wait(&self.backlog.idle, queued);
        }
    }
}

/// A [`Store`] that stores into `inner` and exports each ended call's span
/// live. Pass it to `Recorder::with_archive_and_store`.
pub struct LiveExport<S: Store> {
    inner: S,
    queue: mpsc::Sender<(String, Vec<Fact>)>,
    backlog: Arc<Backlog>,
}

impl<S: Store> LiveExport<S> {
    /// Stores into `inner`, and sends spans to `endpoint` over `protocol`
    /// from a thread of its own (which ends when the store is dropped).
    /// An endpoint [`Collector::new`] refuses is reported at each export.
    pub fn new(
        inner: S,
        endpoint: impl Into<String>,
        protocol: Protocol,
        options: Options,
    ) -> (LiveExport<S>, LiveHandle) {
        let endpoint = endpoint.into();
        LiveExport::to(inner, Collector::new(&endpoint, protocol), options)
    }

    /// The same, to a configured [`Collector`] (TLS roots, headers).
    pub fn to(
        inner: S,
        collector: Result<Collector, ExportError>,
        options: Options,
    ) -> (LiveExport<S>, LiveHandle) {
        let (queue, batches) = mpsc::channel::<(String, Vec<Fact>)>();
        let backlog = Arc::new(Backlog::default());
        let done = backlog.clone();
        std::thread::Builder::new()
            .name("reel-otlp-live".into())
            .spawn(move || {
                let mut streams: HashMap<String, Vec<Fact>> = HashMap::new();
                for (stream, facts) in batches {
                    handle(&mut streams, &stream, facts, &collector, &options);
                    let mut queued = lock(&done.queued);
                    *queued -= 1;
                    if *queued == 0 {
                        done.idle.notify_all();
                    }
                }
            })
            .expect("the OS starts a thread");
        let handle = LiveHandle {
            backlog: backlog.clone(),
        };
        (
            LiveExport {
                inner,
                queue,
                backlog,
            },
            handle,
        )
    }
}

/// One stored batch: kept with its stream's facts, and every call (or run)
/// that ended in it exported.
fn handle(
    streams: &mut HashMap<String, Vec<Fact>>,
    stream: &str,
    batch: Vec<Fact>,
    collector: &Result<Collector, ExportError>,
    options: &Options,
) {
    let spans = ended_spans(streams, stream, batch, options);
    if spans.is_empty() {
        return;
    }
    let sent = match collector {
        Ok(c) => c.send(&crate::request(spans)).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = sent {
        tracing::warn!(
            "reel-otlp: live export of {stream} failed ({e}); its spans are in the archive: `reel export --otlp` sends them"
        );
    }
}

/// One stored batch kept with its stream's facts: the spans of every call
/// (or run) that ended in it, as an export of the archive builds them.
fn ended_spans(
    streams: &mut HashMap<String, Vec<Fact>>,
    stream: &str,
    batch: Vec<Fact>,
    options: &Options,
) -> Vec<Span> {
    let ended: Vec<Option<String>> = batch
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::CallEnded(_) => Some(f.call.clone()),
            FactKind::RunEnded(_) => Some(None),
            _ => None,
        })
        .collect();
    let facts = streams.entry(stream.to_owned()).or_default();
    facts.extend(batch);
    if ended.is_empty() {
        return Vec::new();
    }
    let Some(mut record) = facts.first().and_then(RunRecord::from_first) else {
        return Vec::new();
    };
    for f in &facts[1..] {
        record.observe(f);
    }
    let id = StreamId::of(&record, facts);
    let wanted: Vec<[u8; 8]> = ended
        .iter()
        .map(|call| derived_span_id(&id, call.as_deref()))
        .collect();
    let spans: Vec<_> = stream_spans(&record, facts, options)
        .into_iter()
        .filter(|s| {
            // A span under a caller's traceparent keeps its derived span id.
            wanted.iter().any(|w| s.span_id == w[..])
        })
        .collect();
    let stream_over = facts.last().is_some_and(|f| {
        reel_core::rules::ends_stream(record.outside_run.as_deref(), f.call.as_deref(), &f.kind)
    });
    // An ended call's own facts are no longer needed; the run's, its
    // start's, open calls' and the MCP `initialize`'s (the session's
    // protocol version, on every later span) are.
    let done: Vec<&str> = ended.iter().flatten().map(String::as_str).collect();
    let initialize = mcp_initialize(facts).map(str::to_owned);
    facts.retain(|f| {
        f.seq == 0
            || (initialize.is_some() && f.call == initialize)
            || !f.call.as_deref().is_some_and(|c| done.contains(&c))
    });
    if stream_over {
        streams.remove(stream);
    }
    spans
}

impl<S: Store> Store for LiveExport<S> {
    fn append_batch(&self, stream: &str, facts: Vec<Fact>) -> Result<(), StoreError> {
        let copy = facts.clone();
        self.inner.append_batch(stream, facts)?;
        let mut queued = lock(&self.backlog.queued);
        if self.queue.send((stream.to_owned(), copy)).is_ok() {
            *queued += 1;
        }
        Ok(())
    }

    fn put_artifact(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.inner.put_artifact(bytes)
    }

    fn put_artifact_of(&self, stream: &str, bytes: &[u8]) -> Result<String, StoreError> {
        self.inner.put_artifact_of(stream, bytes)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }

    fn close_stream(&self, stream: &str) -> Result<(), StoreError> {
        self.inner.close_stream(stream)
    }

    /// The inner store's: the wrapper's flush is the inner flush, and its
    /// appends only queue a copy for the exporting thread. (Not forwarded,
    /// a recorder exporting live waited for every flush on the writer's
    /// thread, its device round trips no longer overlapping the next
    /// drain's work.)
    fn flushes_concurrently(&self) -> bool {
        self.inner.flushes_concurrently()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_core::fact::{
        CallEnded, CallMode, CallOutcome, CallStarted, Producer, RunEnded, RunStarted, RunStatus,
    };
    use serde_json::{json, Value};

    fn fact(seq: u64, call: Option<&str>, kind: FactKind) -> Fact {
        Fact {
            seq,
            at: 1_000 + seq as i64,
            offset: seq,
            call: call.map(str::to_owned),
            kind,
        }
    }

    fn mcp_call(seq: u64, call: &str, tool: &str, result: Value) -> Vec<Fact> {
        vec![
            fact(
                seq,
                Some(call),
                FactKind::CallStarted(CallStarted {
                    call_id: call.into(),
                    tool_name: tool.into(),
                    tool_id: None,
                    parent_call: None,
                    iteration: 0,
                    invocation_id: None,
                    mode: CallMode::Async,
                    protocol: Some("mcp".into()),
                    platform: None,
                    client_info: None,
                    args: json!({}),
                    wanted: None,
                    attached: None,
                    spec: None,
                    dispatch_tools: None,
                    outside_run: None,
                }),
            ),
            fact(
                seq + 1,
                Some(call),
                FactKind::CallEnded(CallEnded {
                    outcome: CallOutcome::Ok { result },
                    duration_ns: 1,
                    invocation_id: None,
                }),
            ),
        ]
    }

    fn version(span: &Span) -> Option<String> {
        span.attributes
            .iter()
            .find(|a| a.key == "mcp.protocol.version")
            .map(|a| format!("{:?}", a.value))
    }

    /// Live, a session's `initialize` ends long before its tool calls do;
    /// their spans still carry the version it named, as the archive's do.
    #[test]
    fn live_spans_of_an_mcp_session_keep_the_version_initialize_named() {
        let started = fact(
            0,
            None,
            FactKind::RunStarted(RunStarted {
                run_id: "mcp-1".into(),
                session_id: None,
                identity: None,
                producer: Producer {
                    name: "reel-recorder".into(),
                    version: "0".into(),
                },
                labels: [("mcp.transport".to_owned(), "stdio".to_owned())]
                    .into_iter()
                    .collect(),
                teardown_scopes: vec![],
            }),
        );
        let mut all = Vec::new();
        let batches = [
            vec![started],
            mcp_call(
                1,
                "c1",
                "mcp:initialize",
                json!({ "protocolVersion": "2025-11-25" }),
            ),
            mcp_call(3, "c2", "mcp:tools/list", json!({ "tools": [] })),
            mcp_call(5, "c3", "get-weather", json!({ "content": [] })),
            vec![fact(
                7,
                None,
                FactKind::RunEnded(RunEnded {
                    status: RunStatus::Completed,
                }),
            )],
        ];
        let mut streams = HashMap::new();
        let mut live = Vec::new();
        for batch in batches {
            all.extend(batch.iter().cloned());
            live.extend(ended_spans(
                &mut streams,
                "mcp-1",
                batch,
                &Options::default(),
            ));
        }
        assert!(streams.is_empty(), "the stream is over");
        let names: Vec<&str> = live.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "initialize",
                "tools/list",
                "tools/call get-weather",
                "invoke_agent reel-recorder"
            ]
        );
        for span in &live[..3] {
            assert!(version(span).is_some(), "{}: no version", span.name);
        }
        // The same spans as an export of the whole stream.
        let record = RunRecord::from_first(&all[0]).unwrap();
        let mut archived = crate::stream_spans(&record, &all, &Options::default());
        archived.sort_by_key(|s| s.start_time_unix_nano);
        let mut live_sorted = live.clone();
        live_sorted.sort_by_key(|s| s.start_time_unix_nano);
        assert_eq!(live_sorted, archived);
    }
}

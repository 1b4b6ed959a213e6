//! `reel export --otlp`, end to end: the real `reel` binary sends the
//! committed demo tapes' runs (imported into a temporary archive) to an
//! in-process OTLP receiver, over protobuf/HTTP (a hyper server decoding
//! `ExportTraceServiceRequest` at `POST /v1/traces`) and over gRPC (a
//! tonic `TraceServiceServer` from `opentelemetry-proto`), both bound to
//! 127.0.0.1:0. The received spans are snapshotted as a tree (names,
//! kinds, status, attributes, events, relative times); ids are stable
//! across exports; a recorded `traceparent` puts a call into the caller's
//! trace; and no planted secret, nor any argument or result byte without
//! `--content`, reaches the receiver. Two archives holding one run id
//! (two hosts running one demo) send two traces; a session `reel mcp
//! record` recorded (in front of a python3 stand-in server on stdio)
//! arrives as the OpenTelemetry MCP conventions' spans.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prost::Message;
use reel::context::{ToolContext, ToolError};
use reel::fact::{Level, RunStatus};
use reel::tape::Tape;
use reel::tools::Tools;
use reel_archive::{Archive, ArchiveConfig, FingerprintKey, TapeExt};
use reel_otlp::opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use reel_otlp::opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use reel_otlp::opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use reel_otlp::opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use reel_otlp::opentelemetry_proto::tonic::trace::v1::Span;
use reel_recorder::{Caller, MemoryVault, Recorder, RecorderConfig, RunStart};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::support::reel_command;

/// What a receiver got: each request's bytes as they arrived.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Vec<u8>>>>);

impl Received {
    fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
    fn push(&self, bytes: Vec<u8>) {
        self.0.lock().unwrap().push(bytes);
    }
}

/// The gRPC receiver: `TraceService/Export` keeps the request's encoding,
/// and its `authorization` when asked to.
struct Grpc(Received, Option<Arc<Mutex<Vec<String>>>>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        if let (Some(auth), Some(v)) = (&self.1, request.metadata().get("authorization")) {
            auth.lock().unwrap().push(v.to_str().unwrap().to_owned());
        }
        self.0.push(request.into_inner().encode_to_vec());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// The receivers, served on a runtime of their own while the test runs
/// the binary.
struct Receivers {
    _runtime: tokio::runtime::Runtime,
    http: SocketAddr,
    grpc: SocketAddr,
    http_got: Received,
    grpc_got: Received,
}

fn receivers() -> Receivers {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (http_got, grpc_got) = (Received::default(), Received::default());
    let (http, grpc) = runtime.block_on(async {
        let http_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (http, grpc) = (
            http_listener.local_addr().unwrap(),
            grpc_listener.local_addr().unwrap(),
        );
        let got = http_got.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = http_listener.accept().await.unwrap();
                tokio::spawn(serve_http(stream, got.clone(), None));
            }
        });
        let incoming = tokio_stream_of(grpc_listener);
        let server = TraceServiceServer::new(Grpc(grpc_got.clone(), None));
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(server)
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        (http, grpc)
    });
    Receivers {
        _runtime: runtime,
        http,
        grpc,
        http_got,
        grpc_got,
    }
}

/// Serves OTLP over HTTP on one connection: a `POST /v1/traces` of a
/// decodable protobuf request is kept (200), anything else is a 400; the
/// `authorization` of each request is kept when `auth` is given.
async fn serve_http<IO>(io: IO, got: Received, auth: Option<Arc<Mutex<Vec<String>>>>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let (got, auth) = (got.clone(), auth.clone());
        async move {
            if let (Some(auth), Some(v)) = (&auth, req.headers().get("authorization")) {
                auth.lock().unwrap().push(v.to_str().unwrap().to_owned());
            }
            let ok = req.method() == hyper::Method::POST
                && req.uri().path() == "/v1/traces"
                && req.headers().get("content-type").map(|v| v.as_bytes())
                    == Some(b"application/x-protobuf");
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let decodes = ExportTraceServiceRequest::decode(body.clone()).is_ok();
            let status = if ok && decodes { 200 } else { 400 };
            if status == 200 {
                got.push(body.to_vec());
            }
            let answer = ExportTraceServiceResponse::default().encode_to_vec();
            Ok::<_, std::convert::Infallible>(
                hyper::Response::builder()
                    .status(status)
                    .header("content-type", "application/x-protobuf")
                    .body(Full::new(Bytes::from(answer)))
                    .unwrap(),
            )
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// A listener as the stream of connections tonic serves.
fn tokio_stream_of(
    listener: TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |l| async move {
        let next = l.accept().await.map(|(s, _)| s);
        Some((next, l))
    })
}

fn reel(config: &Path, args: &[&str]) -> Output {
    reel_command(config)
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        .env_remove("OTEL_EXPORTER_OTLP_CERTIFICATE")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
        .output()
        .expect("the reel binary runs")
}

fn reel_ok(config: &Path, args: &[&str]) -> String {
    let out = reel(config, args);
    assert!(
        out.status.success(),
        "reel {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

/// A temporary archive holding the committed demo tapes, imported in name
/// order.
fn demo_archive(dir: &Path) {
    let archive = Archive::open(
        dir,
        ArchiveConfig {
            fingerprint_key: FingerprintKey::Key([5; 32]),
            ..ArchiveConfig::default()
        },
    )
    .unwrap();
    let tapes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tapes");
    let mut names: Vec<_> = std::fs::read_dir(&tapes)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tape.jsonl"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 5, "{names:?}");
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        Tape::read(text.as_bytes())
            .unwrap()
            .import(&archive)
            .unwrap();
    }
}

fn spans(requests: &[Vec<u8>]) -> Vec<Span> {
    requests
        .iter()
        .flat_map(|bytes| {
            ExportTraceServiceRequest::decode(&bytes[..])
                .unwrap()
                .resource_spans
        })
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

fn value(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => format!("{s:?}"),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// What a rendering shows beside each span's name, kind, status,
/// attributes and events.
#[derive(Clone, Copy)]
struct Shown {
    /// Trace and span ids, and times relative to the trace's first span:
    /// stable for the committed demo tapes, not for a fresh recording
    /// (whose run id, invocation ids and times are new each time, and
    /// whose [`VOLATILE`] attributes are shown as `…`).
    ids_and_times: bool,
}

/// Attributes whose values a fresh recording makes anew (or a new reel
/// version: the producer), and the server's command line (a temporary
/// path and a script).
const VOLATILE: [&str; 4] = [
    "reel.run.id",
    "gen_ai.tool.call.id",
    "reel.producer",
    "reel.label.mcp.command",
];

/// The spans as a tree per trace: children under their parent, in start
/// order; times relative to the trace's first span. A parent outside the
/// export (the caller's span) is named.
fn render(spans: &[Span]) -> String {
    render_shown(
        spans,
        Shown {
            ids_and_times: true,
        },
    )
}

fn render_shown(spans: &[Span], shown: Shown) -> String {
    let mut traces: BTreeMap<Vec<u8>, Vec<&Span>> = BTreeMap::new();
    for s in spans {
        traces.entry(s.trace_id.clone()).or_default().push(s);
    }
    let mut traces: Vec<_> = traces.into_values().collect();
    for t in &mut traces {
        t.sort_by_key(|s| (s.start_time_unix_nano, s.name.clone()));
    }
    traces.sort_by_key(|t| t[0].start_time_unix_nano);
    let mut out = String::new();
    for t in traces {
        let base = t[0].start_time_unix_nano;
        if shown.ids_and_times {
            writeln!(out, "trace {}", hex(&t[0].trace_id)).unwrap();
        } else {
            writeln!(out, "trace").unwrap();
        }
        let ids: Vec<&Vec<u8>> = t.iter().map(|s| &s.span_id).collect();
        for root in t.iter().filter(|s| !ids.contains(&&s.parent_span_id)) {
            tree(&mut out, root, &t, (base, shown), 1);
        }
    }
    out
}

fn tree(out: &mut String, span: &Span, all: &[&Span], (base, shown): (u64, Shown), depth: usize) {
    let pad = "  ".repeat(depth);
    let status = span
        .status
        .as_ref()
        .map(|s| {
            format!(
                "{}{}",
                code(s.code),
                if s.message.is_empty() {
                    String::new()
                } else {
                    format!(" {:?}", s.message)
                }
            )
        })
        .unwrap_or_else(|| "UNSET".into());
    let kind = SpanKind::try_from(span.kind).map_or("?", |k| k.as_str_name());
    if shown.ids_and_times {
        writeln!(
            out,
            "{pad}{:?} span {} kind {kind} status {status} +{}..+{}{}",
            span.name,
            hex(&span.span_id),
            span.start_time_unix_nano - base,
            span.end_time_unix_nano - base,
            if depth == 1 && !span.parent_span_id.is_empty() {
                format!(" parent {} (the caller's)", hex(&span.parent_span_id))
            } else {
                String::new()
            }
        )
        .unwrap();
    } else {
        writeln!(out, "{pad}{:?} kind {kind} status {status}", span.name).unwrap();
    }
    for a in &span.attributes {
        let shown_value = if !shown.ids_and_times && VOLATILE.contains(&a.key.as_str()) {
            "…".to_owned()
        } else {
            value(a)
        };
        writeln!(out, "{pad}  @{} = {shown_value}", a.key).unwrap();
    }
    for e in &span.events {
        let attrs: Vec<String> = e
            .attributes
            .iter()
            .map(|a| format!("{}={}", a.key, value(a)))
            .collect();
        let at = if shown.ids_and_times {
            format!(" +{}", e.time_unix_nano - base)
        } else {
            String::new()
        };
        writeln!(out, "{pad}  event {}{at} {}", e.name, attrs.join(" ")).unwrap();
    }
    let mut children: Vec<&&Span> = all
        .iter()
        .filter(|s| s.parent_span_id == span.span_id)
        .collect();
    children.sort_by_key(|s| s.start_time_unix_nano);
    for c in children {
        tree(out, c, all, (base, shown), depth + 1);
    }
}

/// A run's span: `gen_ai.operation.name` = `invoke_agent` (its name
/// also names the agent).
fn is_agent(span: &Span) -> bool {
    attribute(span, "gen_ai.operation.name").as_deref() == Some("\"invoke_agent\"")
}

/// The value of `span`'s attribute `key`, as [`value`] shows it.
fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).map(value)
}

fn code(c: i32) -> &'static str {
    match c {
        0 => "UNSET",
        1 => "OK",
        2 => "ERROR",
        _ => "?",
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn ids(spans: &[Span]) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = spans
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                hex(&s.trace_id),
                hex(&s.span_id),
                hex(&s.parent_span_id),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_demo_runs_arrive_as_genai_span_trees_over_http_and_grpc() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, config) = (tmp.path().join("archive"), tmp.path().join("config"));
    demo_archive(&archive);
    let a = archive.to_str().unwrap();
    let rx = receivers();

    let http = format!("http://{}", rx.http);
    let said = reel_ok(&config, &["--archive", a, "export", "--otlp", &http]);
    assert_eq!(said, format!("exported 5 runs (12 spans) to {http}\n"));
    let first = rx.http_got.take();
    assert_eq!(first.len(), 1, "one request");
    let first_spans = spans(&first);
    insta::assert_snapshot!("demo_spans", render(&first_spans));

    // Exporting again gives the same ids; gRPC carries the same spans.
    reel_ok(&config, &["--archive", a, "export", "--otlp", &http]);
    let again = spans(&rx.http_got.take());
    assert_eq!(ids(&again), ids(&first_spans));
    assert_eq!(again, first_spans, "the same spans, byte for byte");

    let grpc = format!("http://{}", rx.grpc);
    reel_ok(
        &config,
        &["--archive", a, "export", "--otlp", &grpc, "--grpc"],
    );
    let over_grpc = spans(&rx.grpc_got.take());
    assert_eq!(over_grpc, first_spans);

    // Named runs and filters choose what is sent.
    reel_ok(
        &config,
        &[
            "--archive",
            a,
            "export",
            "--otlp",
            &http,
            "demo-deploy",
            "demo-search",
        ],
    );
    let named = spans(&rx.http_got.take());
    assert_eq!(named.iter().filter(|s| is_agent(s)).count(), 2);
    reel_ok(
        &config,
        &[
            "--archive",
            a,
            "export",
            "--otlp",
            &http,
            "--status",
            "failed",
        ],
    );
    let failed = spans(&rx.http_got.take());
    let runs: Vec<String> = failed
        .iter()
        .filter(|s| is_agent(s))
        .flat_map(|s| {
            s.attributes
                .iter()
                .filter(|a| a.key == "reel.run.id")
                .map(value)
        })
        .collect();
    assert_eq!(runs, ["\"demo-deploy-failed\""]);

    // Without --content no argument or result reaches the receiver; with
    // it they do (the check can fail).
    let raw: Vec<u8> = first.concat();
    for needle in [
        "billing",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ] {
        assert!(
            !contains(&raw, needle.as_bytes()),
            "{needle} exported without --content"
        );
    }
    reel_ok(
        &config,
        &["--archive", a, "export", "--otlp", &http, "--content"],
    );
    let with_content = rx.http_got.take().concat();
    for needle in [
        "billing",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ] {
        assert!(
            contains(&with_content, needle.as_bytes()),
            "{needle} missing with --content"
        );
    }
}

#[test]
fn an_unreachable_collector_is_named_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, config) = (tmp.path().join("archive"), tmp.path().join("config"));
    demo_archive(&archive);
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    for extra in [&[][..], &["--grpc"][..]] {
        let mut args = vec![
            "--archive",
            archive.to_str().unwrap(),
            "export",
            "--otlp",
            &endpoint,
        ];
        args.extend(extra);
        let out = reel(&config, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("cannot reach the OTLP collector at {endpoint}")),
            "{args:?}: {err}"
        );
    }
    let out = reel(
        &config,
        &[
            "--archive",
            archive.to_str().unwrap(),
            "export",
            "--otlp",
            "ftp://collector.invalid",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "ftp://collector.invalid is not a usable OTLP endpoint: use an http:// or https:// URL"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const SECRET: &str = "ghp_otlpCanarySecret93QX";
const ARG: &str = "argument-canary-71Z";

/// Records one call outside any run, as an MCP host does: the caller's
/// `traceparent` and `tracestate` as labels, a session, a credential whose
/// secret the tool tries to leak into its result and log, and an argument
/// canary in its args, progress and result.
fn record_outside_call(archive: &Path) -> String {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let recorder = Recorder::open(
            archive,
            RecorderConfig {
                fingerprint_key: FingerprintKey::Key([5; 32]),
                serve_live: false,
                ..RecorderConfig::default()
            },
        )
        .await
        .unwrap();
        let tools = Tools::new().register("lookup", |ctx: ToolContext, args: Value| async move {
            let c = ctx.credential("github").await?;
            let secret = c.secret().expose().to_owned();
            ctx.progress(json!({ "message": "looking", "echo": args["query"] }));
            ctx.log(
                Level::Info,
                json!({ "token": secret.clone(), "q": args["query"] }),
            );
            Ok::<_, ToolError>(json!({ "found": args["query"], "leak": secret }))
        });
        let caller = Caller::new()
            .session("mcp-session-9")
            .label("traceparent", format!("00-{TRACE}-{PARENT}-01"))
            .label("tracestate", "vendor=1");
        let call = recorder
            .call_from(caller, "lookup", json!({ "query": ARG }))
            .unwrap()
            .protocol("mcp")
            .credentials(Arc::new(MemoryVault::new().with("github", SECRET)));
        let key = call.key().to_owned();
        call.invoke_tool(&tools).await.unwrap();
        recorder.shutdown().await.unwrap();
        key
    })
}

#[test]
fn a_recorded_traceparent_is_honoured_and_no_secret_reaches_the_receiver() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, config) = (tmp.path().join("archive"), tmp.path().join("config"));
    let key = record_outside_call(&archive);
    let a = archive.to_str().unwrap();
    let rx = receivers();
    let http = format!("http://{}", rx.http);

    reel_ok(&config, &["--archive", a, "export", "--otlp", &http, &key]);
    let plain = rx.http_got.take();
    let got = spans(&plain);
    assert_eq!(got.len(), 1, "a call outside any run is one span: {got:?}");
    let span = &got[0];
    // Served over MCP: named by the MCP conventions, `{method} {tool}`.
    assert_eq!(span.name, "tools/call lookup");
    assert_eq!(hex(&span.trace_id), TRACE, "the caller's trace");
    assert_eq!(
        hex(&span.parent_span_id),
        PARENT,
        "the caller's span is the parent"
    );
    assert_eq!(span.trace_state, "vendor=1");
    let attr = |k: &str| {
        span.attributes
            .iter()
            .find(|a| a.key == k)
            .map(value)
            .unwrap_or_else(|| panic!("no {k} in {:?}", span.attributes))
    };
    assert_eq!(attr("gen_ai.operation.name"), "\"execute_tool\"");
    assert_eq!(attr("mcp.method.name"), "\"tools/call\"");
    assert_eq!(attr("mcp.session.id"), "\"mcp-session-9\"");
    let events: Vec<&str> = span.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        events,
        [
            "credential.requested",
            "credential.resolved",
            "progress",
            "log"
        ]
    );
    let fingerprint = span.events[1]
        .attributes
        .iter()
        .find(|a| a.key == "reel.credential.fingerprint")
        .map(value)
        .unwrap();
    assert!(fingerprint.starts_with("\"hmac-sha256:"), "{fingerprint}");

    // Without --content: neither the secret nor the argument canary.
    let raw = plain.concat();
    assert!(
        !contains(&raw, SECRET.as_bytes()),
        "the secret was exported"
    );
    assert!(
        !contains(&raw, ARG.as_bytes()),
        "an argument was exported without --content"
    );

    // With --content: the (redacted) content arrives, the secret never.
    reel_ok(
        &config,
        &["--archive", a, "export", "--otlp", &http, "--content", &key],
    );
    let raw = rx.http_got.take().concat();
    assert!(
        contains(&raw, ARG.as_bytes()),
        "--content exports the arguments"
    );
    assert!(
        !contains(&raw, SECRET.as_bytes()),
        "the secret was exported with --content"
    );

    // Twice, the same ids.
    reel_ok(&config, &["--archive", a, "export", "--otlp", &http, &key]);
    assert_eq!(ids(&spans(&rx.http_got.take())), ids(&got));
}

/// Records the run `run_id` (one call of `step`) into the archive at
/// `archive`, as a host running a demo does.
fn record_run(archive: &Path, run_id: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let recorder = Recorder::open(
            archive,
            RecorderConfig {
                fingerprint_key: FingerprintKey::Key([5; 32]),
                serve_live: false,
                ..RecorderConfig::default()
            },
        )
        .await
        .unwrap();
        let tools = Tools::new().register("step", |_ctx: ToolContext, args: Value| async move {
            Ok::<_, ToolError>(args)
        });
        let run = recorder.start_run(RunStart::new(run_id)).await.unwrap();
        run.call("step", json!({ "i": 1 }))
            .invoke_tool(&tools)
            .await
            .unwrap();
        run.end(RunStatus::Completed).await.unwrap();
        recorder.shutdown().await.unwrap();
    })
}

/// Two hosts run the same demo: two archives hold a run of the same id,
/// with the same call ids. Their spans must not share a trace id (a
/// viewer keeps the first trace of an id and drops the second), nor a
/// span id; and each archive exported again gives its own ids again.
#[test]
fn two_archives_that_recorded_one_run_id_send_two_traces_each_stable() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let (here, there) = (tmp.path().join("host-a"), tmp.path().join("host-b"));
    record_run(&here, "demo-twice");
    record_run(&there, "demo-twice");
    let rx = receivers();
    let http = format!("http://{}", rx.http);
    let export = |archive: &Path| {
        let a = archive.to_str().unwrap();
        reel_ok(
            &config,
            &["--archive", a, "export", "--otlp", &http, "demo-twice"],
        );
        spans(&rx.http_got.take())
    };
    let (a, b) = (export(&here), export(&there));
    assert_eq!((a.len(), b.len()), (2, 2), "a run and its call, each");
    let of = |spans: &[Span], id: fn(&Span) -> Vec<u8>| -> BTreeSet<Vec<u8>> {
        spans.iter().map(id).collect()
    };
    let trace = |s: &Span| s.trace_id.clone();
    let span = |s: &Span| s.span_id.clone();
    assert!(
        of(&a, trace).is_disjoint(&of(&b, trace)),
        "two archives' runs share a trace id: a viewer drops one"
    );
    assert!(of(&a, span).is_disjoint(&of(&b, span)));
    assert_eq!(ids(&export(&here)), ids(&a));
    assert_eq!(ids(&export(&there)), ids(&b));
}

/// A stand-in MCP server on stdio (python3, no packages): answers
/// `initialize` (protocol 2025-11-25), `tools/list`, and `tools/call` of
/// `get-weather` (a result), `flaky` (a result with `isError`) and of any
/// other tool (JSON-RPC error -32602).
const STDIO_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, params = m["method"], m.get("params") or {}
    if method == "initialize":
        r = {"result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "weather", "version": "1.0"}}}
    elif method == "tools/list":
        r = {"result": {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                                  for n in ("get-weather", "flaky")]}}
    elif method == "tools/call" and params.get("name") == "get-weather":
        r = {"result": {"content": [{"type": "text", "text": "sunny"}], "isError": False}}
    elif method == "tools/call" and params.get("name") == "flaky":
        r = {"result": {"content": [{"type": "text", "text": "upstream down"}], "isError": True}}
    elif method == "tools/call":
        r = {"error": {"code": -32602, "message": "Unknown tool: " + str(params.get("name"))}}
    else:
        r = {"error": {"code": -32601, "message": "Method not found"}}
    r.update(jsonrpc="2.0", id=m["id"])
    print(json.dumps(r), flush=True)
"#;

/// A client's session through `reel mcp record` (stdio) in front of
/// [`STDIO_SERVER`], recorded into `archive`: `initialize`, `tools/list`,
/// and a call of `get-weather`, `flaky` and `nope`, each answered before
/// the next is sent.
fn record_mcp_session(archive: &Path, config: &Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never", "--archive"])
        .arg(archive)
        .args(["mcp", "record", "--", "python3", "-c", STDIO_SERVER])
        .env_remove("REEL_ARCHIVE")
        .env_remove("REEL_FINGERPRINT_KEY")
        .env("REEL_CONFIG_DIR", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the reel binary runs");
    let mut to_server = child.stdin.take().unwrap();
    let mut from_server = BufReader::new(child.stdout.take().unwrap());
    let requests = [
        (
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "otlp-test-client", "version": "1.0" },
            }),
        ),
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({ "name": "get-weather", "arguments": { "city": "Oslo" } }),
        ),
        ("tools/call", json!({ "name": "flaky", "arguments": {} })),
        ("tools/call", json!({ "name": "nope", "arguments": {} })),
    ];
    for (id, (method, params)) in requests.into_iter().enumerate() {
        let request = json!({ "jsonrpc": "2.0", "id": id + 1, "method": method, "params": params });
        writeln!(to_server, "{request}").unwrap();
        let mut line = String::new();
        from_server.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{method}: not a JSON-RPC answer ({e}): {line:?}"));
        assert_eq!(answer["id"], json!(id + 1), "{answer}");
        if method == "initialize" {
            let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
            writeln!(to_server, "{note}").unwrap();
        }
    }
    drop(to_server);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "reel mcp record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A session `reel mcp record` recorded arrives as the OpenTelemetry MCP
/// conventions' spans: named `{mcp.method.name} {target}` (`initialize`,
/// `tools/list`, `tools/call get-weather`), `mcp.method.name` the
/// JSON-RPC method, `network.transport` = `pipe` (stdio, no session id),
/// `mcp.protocol.version` the one `initialize` answered, a result with
/// `isError` an ERROR with `error.type` = `tool_error`, a JSON-RPC error
/// its code; under `invoke_agent reel-recorder`.
#[test]
fn a_session_reel_mcp_record_recorded_arrives_as_mcp_spans() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, config) = (tmp.path().join("archive"), tmp.path().join("config"));
    record_mcp_session(&archive, &config);
    let rx = receivers();
    let http = format!("http://{}", rx.http);
    let a = archive.to_str().unwrap();
    reel_ok(&config, &["--archive", a, "export", "--otlp", &http]);
    let got = spans(&rx.http_got.take());
    let names: BTreeSet<&str> = got.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "invoke_agent reel-recorder",
            "initialize",
            "tools/list",
            "tools/call get-weather",
            "tools/call flaky",
            "tools/call nope",
        ])
    );
    let named = |name: &str| got.iter().find(|s| s.name == name).unwrap();
    let flaky = named("tools/call flaky");
    assert_eq!(
        attribute(flaky, "error.type").as_deref(),
        Some("\"tool_error\"")
    );
    let nope = named("tools/call nope");
    assert_eq!(attribute(nope, "error.type").as_deref(), Some("\"-32602\""));
    let init = named("initialize");
    assert_eq!(attribute(init, "gen_ai.operation.name"), None);
    assert_eq!(
        attribute(init, "mcp.protocol.version").as_deref(),
        Some("\"2025-11-25\"")
    );
    assert_eq!(attribute(init, "mcp.session.id"), None, "stdio has none");
    insta::assert_snapshot!(
        "mcp_session_spans",
        render_shown(
            &got,
            Shown {
                ids_and_times: false
            }
        )
    );
}

/// Records `n` calls outside any run (each its own stream, each a dispatch
/// of a child) through a recorder whose store exports live to `endpoint`;
/// returns their keys once the recorder is shut down and the exporter has
/// handled every batch.
fn record_live(archive: &Path, endpoint: &str, n: usize) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Archive::open(
            archive,
            ArchiveConfig {
                fingerprint_key: FingerprintKey::Key([5; 32]),
                ..ArchiveConfig::default()
            },
        )
        .unwrap();
        let (live, handle) = reel_otlp::LiveExport::new(
            store.clone(),
            endpoint,
            reel_otlp::Protocol::Http,
            reel_otlp::Options::default(),
        );
        // The archive flushes on the writer's flusher thread; exporting
        // live must not take that from it.
        assert!(reel::store::Store::flushes_concurrently(&live));
        let recorder = Recorder::with_archive_and_store(
            store,
            Arc::new(live),
            RecorderConfig {
                fingerprint_key: FingerprintKey::Key([5; 32]),
                serve_live: false,
                ..RecorderConfig::default()
            },
        )
        .unwrap();
        let tools = Tools::new().register("step", |ctx: ToolContext, args: Value| async move {
            ctx.progress(json!({ "message": "stepping" }));
            Ok::<_, ToolError>(args)
        });
        let mut keys = Vec::new();
        for i in 0..n {
            let call = recorder
                .call_from(Caller::new().session("s"), "step", json!({ "i": i }))
                .unwrap();
            keys.push(call.key().to_owned());
            call.invoke_tool(&tools).await.unwrap();
        }
        recorder.shutdown().await.unwrap();
        handle.wait_idle();
        keys
    })
}

#[test]
fn live_export_sends_each_span_as_it_ends_and_a_down_collector_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let rx = receivers();
    let http = format!("http://{}", rx.http);

    // Collector up: each call's span arrives live, as `reel export
    // --otlp` of the archive would send it, in a request of its own.
    let up = tmp.path().join("up");
    let keys = record_live(&up, &http, 3);
    let live = rx.http_got.take();
    assert_eq!(live.len(), 3, "one request per ended call");
    let live_spans = spans(&live);
    let mut args = vec!["--archive", up.to_str().unwrap(), "export", "--otlp", &http];
    args.extend(keys.iter().map(String::as_str));
    reel_ok(&config, &args);
    let archived = spans(&rx.http_got.take());
    assert_eq!(live_spans, archived, "the live spans are the archive's");

    // Collector down: the recording completes all the same, and the
    // archive delivers every span afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = tmp.path().join("down");
    let keys = record_live(&down, &format!("http://127.0.0.1:{port}"), 3);
    assert!(rx.http_got.take().is_empty());
    let mut args = vec![
        "--archive",
        down.to_str().unwrap(),
        "export",
        "--otlp",
        &http,
    ];
    args.extend(keys.iter().map(String::as_str));
    reel_ok(&config, &args);
    let later = spans(&rx.http_got.take());
    assert_eq!(later.len(), 3);
    assert!(later.iter().all(|s| s.name == "execute_tool step"));
}

/// The `https://` receivers: protobuf over HTTP behind rustls, and tonic's
/// gRPC server with TLS, both with a certificate for 127.0.0.1 that a
/// private CA signed. Each keeps the requests and their `authorization`.
struct TlsReceivers {
    _runtime: tokio::runtime::Runtime,
    http: SocketAddr,
    grpc: SocketAddr,
    got: Received,
    authorization: Arc<Mutex<Vec<String>>>,
}

/// A private CA (its PEM) and a server certificate and key it signed.
fn private_ca() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "reel test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), server.pem(), key.serialize_pem())
}

fn tls_receivers(cert_pem: &str, key_pem: &str) -> TlsReceivers {
    use rustls::pki_types::pem::PemObject;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let got = Received::default();
    let authorization = Arc::new(Mutex::new(Vec::new()));
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let identity = tonic::transport::Identity::from_pem(cert_pem, key_pem);
    let (http, grpc) = runtime.block_on(async {
        let http_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (http, grpc) = (
            http_listener.local_addr().unwrap(),
            grpc_listener.local_addr().unwrap(),
        );
        let (got_http, auth_http) = (got.clone(), authorization.clone());
        tokio::spawn(async move {
            loop {
                let (stream, _) = http_listener.accept().await.unwrap();
                let (got, auth, acceptor) = (got_http.clone(), auth_http.clone(), acceptor.clone());
                tokio::spawn(async move {
                    // A client that does not trust the CA aborts here.
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    serve_http(stream, got, Some(auth)).await;
                });
            }
        });
        let incoming = tokio_stream_of(grpc_listener);
        let server = TraceServiceServer::new(Grpc(got.clone(), Some(authorization.clone())));
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .tls_config({
                    // tonic's server takes the process's default provider,
                    // ambiguous when the test build links both (fantoccini's
                    // hyper-rustls brings aws-lc-rs).
                    let _ = rustls::crypto::ring::default_provider().install_default();
                    tonic::transport::ServerTlsConfig::new().identity(identity)
                })
                .unwrap()
                .add_service(server)
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        (http, grpc)
    });
    TlsReceivers {
        _runtime: runtime,
        http,
        grpc,
        got,
        authorization,
    }
}

/// `https://` collectors, over HTTP and gRPC: with the private CA named
/// (`--otlp-ca`, or `OTEL_EXPORTER_OTLP_CERTIFICATE`) and the headers of
/// `OTEL_EXPORTER_OTLP_HEADERS`, the spans arrive with the header; without
/// the CA the export fails, naming the endpoint and the certificate; a
/// malformed header list is named. The header's value (an API key) is in
/// no output of reel's and in no span.
#[test]
fn an_https_collector_with_a_private_ca_gets_the_spans_and_the_headers() {
    const KEY: &str = "tok-7d1f3c9a2b64e5";
    let tmp = tempfile::tempdir().unwrap();
    let (archive, config) = (tmp.path().join("archive"), tmp.path().join("config"));
    demo_archive(&archive);
    let (ca, cert, key) = private_ca();
    let ca_file = tmp.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let rx = tls_receivers(&cert, &key);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_reel"));
        cmd.args(["--color", "never", "--archive"])
            .arg(&archive)
            .arg("export")
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .env_remove("OTEL_EXPORTER_OTLP_CERTIFICATE")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
            .env("REEL_CONFIG_DIR", &config);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!said.contains(KEY), "the header's value was shown: {said}");
        (out.status.code(), said)
    };
    let headers = format!("authorization=Bearer%20{KEY}");
    let ca_arg = ca_file.to_str().unwrap();
    let http = format!("https://{}", rx.http);
    let grpc = format!("https://{}", rx.grpc);
    for (endpoint, grpc_flag) in [(&http, None), (&grpc, Some("--grpc"))] {
        let mut args = vec!["--otlp", endpoint.as_str(), "--otlp-ca", ca_arg];
        args.extend(grpc_flag);
        let (code, said) = run(&args, &[("OTEL_EXPORTER_OTLP_HEADERS", &headers)]);
        assert_eq!(code, Some(0), "{said}");
        assert_eq!(said, format!("exported 5 runs (12 spans) to {endpoint}\n"));
        let got = rx.got.take();
        assert_eq!(spans(&got).len(), 12, "{endpoint}");
        assert!(
            !contains(&got.concat(), KEY.as_bytes()),
            "the key is in a span"
        );
        assert_eq!(
            std::mem::take(&mut *rx.authorization.lock().unwrap()),
            [format!("Bearer {KEY}")],
            "{endpoint}"
        );
    }
    // The CA named by the OpenTelemetry variable instead.
    let (code, said) = run(
        &["--otlp", &http],
        &[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca_arg),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &headers),
        ],
    );
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(spans(&rx.got.take()).len(), 12);
    assert_eq!(
        std::mem::take(&mut *rx.authorization.lock().unwrap()),
        [format!("Bearer {KEY}")]
    );

    // Without the CA: refused by the client, named, nothing delivered.
    for (endpoint, grpc_flag) in [(&http, None), (&grpc, Some("--grpc"))] {
        let mut args = vec!["--otlp", endpoint.as_str()];
        args.extend(grpc_flag);
        let (code, said) = run(&args, &[("OTEL_EXPORTER_OTLP_HEADERS", &headers)]);
        assert_eq!(code, Some(1), "{said}");
        assert!(
            said.contains(&format!("cannot reach the OTLP collector at {endpoint}")),
            "{said}"
        );
        assert!(said.to_lowercase().contains("certificate"), "{said}");
    }
    assert!(rx.got.take().is_empty());
    assert!(
        rx.authorization.lock().unwrap().is_empty(),
        "a header went to an untrusted peer"
    );

    // A malformed header list, and a CA file that is not one: named.
    let (code, said) = run(
        &["--otlp", &http],
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            &format!("authorization {KEY}"),
        )],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("$OTEL_EXPORTER_OTLP_HEADERS: OTLP headers is not usable"),
        "{said}"
    );
    let (code, said) = run(
        &["--otlp", &http, "--otlp-ca", archive.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("--otlp-ca"), "{said}");
}

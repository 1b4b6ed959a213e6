//! # reel-collect: any agent framework's runs, taken in over OpenTelemetry
//!
//! `reel collect` is an OTLP receiver. Agent frameworks (Pydantic AI, the
//! OpenAI Agents SDK, the Vercel AI SDK, LangGraph through OpenInference
//! or OpenLLMetry) already describe what their agents do as GenAI spans;
//! pointed at reel (`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`),
//! their traces become runs in a reel archive, which `reel runs`, `show`,
//! `export`, the console and `reel mcp mock` work on as on any run.
//!
//! - **Where.** `POST /v1/traces`, OTLP/HTTP, protobuf
//!   (`application/x-protobuf`) or OTLP/JSON (`application/json`), and
//!   OTLP/gRPC (HTTP/2 without TLS) on the same port, decoded with the
//!   official `opentelemetry-proto` types (tonic for gRPC). Loopback unless a
//!   token is given, with the console's gate ([`reel_serve::gated`]).
//!   A gzip body (`Content-Encoding: gzip`) is inflated; bodies over
//!   [`CollectConfig::max_body`], inflated, get 413; a body that is not
//!   OTLP gets 400 naming what is wrong; a span with a malformed id is
//!   rejected alone (OTLP's partial success names it).
//! - **When.** A trace's spans are held ([`assemble`]) until its root has
//!   arrived and none came for [`CollectConfig::grace`]; then the trace
//!   is written as one run, in span time order. A retried batch is stored
//!   once (span ids seen are dropped). A span of a run already written is
//!   late: the run has ended and is never rewritten, so a trace's late
//!   spans are held likewise and written as a run of their own,
//!   `otel-TRACEID-late-N`, linked to the first ([`map::map_late`]). What
//!   is held when the collector stops is written then. Meanwhile a trace
//!   held is listed as a running run (`reel runs`, the console), through
//!   the archive's live socket.
//! - **What.** The mapping is [`map`]'s; the writing [`write`]'s: the
//!   recorder's redaction and tripwire, then the whole run appended as one batch.
//!
//! ```no_run
//! # async fn example() -> Result<(), reel_collect::CollectError> {
//! use reel_collect::{CollectConfig, Collector};
//!
//! let config = CollectConfig::new("./archive".into(), "127.0.0.1:4318".parse().unwrap());
//! let collector = Collector::open(&config)?;
//! let listener = tokio::net::TcpListener::bind(config.listen).await?;
//! // Whatever stops it: a signal, a test's channel.
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! # drop(stop);
//! let summary = collector.serve(&config, listener, async {
//!     let _ = stopped.await;
//! }).await?;
//! println!("{} runs written", summary.runs);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod assemble;
mod body;
pub mod decode;
#[doc(hidden)]
pub mod fuzzing;
mod grpc;
pub mod map;
pub mod write;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message as _;
use reel::context::Secret;
use reel_archive::{Archive, ArchiveConfig, ArchiveError};
use reel_serve::{ServeError, Token};

use assemble::{Assembler, Offered};
use decode::{decode, Encoding};
use write::{RunWriter, Written};

/// The default bound of a request's body: 16 MiB.
pub const DEFAULT_MAX_BODY: usize = 16 << 20;

/// The default quiet period after a trace's root arrived: 2 seconds.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// How `reel collect` runs.
#[derive(Clone)]
pub struct CollectConfig {
    /// The archive runs are written to (created when missing).
    pub archive: PathBuf,
    /// The address to listen on (loopback unless a token is given).
    pub listen: SocketAddr,
    /// Tokens an exporter presents (`Authorization: Bearer TOKEN`); at
    /// least one is required off loopback.
    pub tokens: Vec<Token>,
    /// Host names the exporter may use besides loopback and the listen
    /// address.
    pub allowed_hosts: Vec<String>,
    /// The largest body taken, counted after a gzip body is inflated.
    pub max_body: usize,
    /// How long a trace stays held after its root arrived and its last
    /// span came.
    pub grace: Duration,
    /// Known secret values, scrubbed from every fact (`--secret-env`).
    pub secrets: Vec<Secret>,
    /// Keys redacted besides the built-in secret names.
    pub redact_keys: Vec<String>,
}

impl std::fmt::Debug for CollectConfig {
    // Never the secrets nor the tokens.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectConfig")
            .field("archive", &self.archive)
            .field("listen", &self.listen)
            .field("tokens", &self.tokens.len())
            .field("max_body", &self.max_body)
            .field("grace", &self.grace)
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
    }
}

impl CollectConfig {
    /// Defaults: no token, no secrets, [`DEFAULT_MAX_BODY`], [`DEFAULT_GRACE`].
    pub fn new(archive: PathBuf, listen: SocketAddr) -> CollectConfig {
        CollectConfig {
            archive,
            listen,
            tokens: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
            grace: DEFAULT_GRACE,
            secrets: Vec::new(),
            redact_keys: Vec::new(),
        }
    }
}

/// Why the collector cannot run.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Off loopback without a token, or a weak token.
    #[error("{0}")]
    Listen(#[from] ServeError),
    /// The archive cannot be opened or written.
    #[error("{0}")]
    Archive(#[from] ArchiveError),
    /// Listening or serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What the collector took in and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Spans held for their traces.
    pub spans: u64,
    /// Spans dropped as seen before (an exporter's retry).
    pub duplicates: u64,
    /// Spans of a run already written (held, then written as a run of
    /// their own linked to it).
    pub late: u64,
    /// Spans rejected (a malformed id).
    pub rejected: u64,
    /// Runs written, runs of late spans included.
    pub runs: u64,
    /// Runs of late spans written (`otel-TRACEID-late-N`).
    pub late_runs: u64,
    /// Traces that could not be written (each reported through `tracing`).
    pub failed: u64,
}

/// The receiver: spans in, runs out. Cheap to clone.
#[derive(Clone)]
pub struct Collector {
    shared: Arc<Shared>,
}

struct Shared {
    assembler: Mutex<Assembler>,
    writer: Mutex<RunWriter>,
    summary: Mutex<Summary>,
    grace: Duration,
    max_body: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    reel::lock::lock(m)
}

impl Collector {
    /// Opens (or creates) the archive of `config`.
    pub fn open(config: &CollectConfig) -> Result<Collector, CollectError> {
        let archive = Archive::open(&config.archive, ArchiveConfig::default())?;
        Ok(Collector::with_archive(archive, config))
    }

    /// A collector writing into `archive`.
    pub fn with_archive(archive: Archive, config: &CollectConfig) -> Collector {
        let writer = RunWriter::new(archive, config.secrets.clone(), &config.redact_keys);
        Collector {
            shared: Arc::new(Shared {
                assembler: Mutex::new(Assembler::new()),
                writer: Mutex::new(writer),
                summary: Mutex::new(Summary::default()),
                grace: config.grace,
                max_body: config.max_body,
            }),
        }
    }

    /// The archive written to.
    pub fn archive(&self) -> Archive {
        lock(&self.shared.writer).archive().clone()
    }

    /// What was taken in and written so far.
    pub fn summary(&self) -> Summary {
        lock(&self.shared.summary).clone()
    }

    /// Takes in one request's body (what `POST /v1/traces` does): the
    /// response to send, protobuf or JSON as the request was.
    pub fn receive(&self, content_type: Option<&str>, body: &[u8]) -> Response {
        let encoding = match Encoding::of_content_type(content_type) {
            Ok(e) => e,
            Err(e) => return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, &e.to_string()),
        };
        let decoded = match decode(body, encoding) {
            Ok(d) => d,
            Err(e) => return refuse(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        respond(encoding, &self.take_in(decoded))
    }

    /// Holds the spans of one request (over HTTP or gRPC) for their
    /// traces; the answer, with OTLP's partial success when spans were
    /// rejected.
    pub fn take_in(&self, decoded: decode::Decoded) -> ExportTraceServiceResponse {
        let now = Instant::now();
        let mut counts = [0u64; 3];
        {
            let mut assembler = lock(&self.shared.assembler);
            for span in decoded.spans {
                let i = match assembler.offer(span, now) {
                    Offered::Held => 0,
                    Offered::Duplicate => 1,
                    Offered::Late => 2,
                };
                counts[i] += 1;
            }
        }
        if counts[2] > 0 {
            tracing::warn!(
                "reel collect: {} span(s) came after their run was written: they will be written \
                 as a run of their own linked to it, never rewriting it (raise --grace-ms if the \
                 exporter sends a trace's spans further apart)",
                counts[2]
            );
        }
        {
            let mut s = lock(&self.shared.summary);
            s.spans += counts[0];
            s.duplicates += counts[1];
            s.late += counts[2];
            s.rejected += decoded.rejected;
        }
        ExportTraceServiceResponse {
            partial_success: (decoded.rejected > 0).then(|| ExportTracePartialSuccess {
                rejected_spans: decoded.rejected as i64,
                error_message: decoded.reason.unwrap_or_default(),
            }),
        }
    }

    /// Writes every trace that is ready (with `all`, every trace held):
    /// blocking, the archive's IO.
    pub fn write_ready(&self, all: bool) -> Vec<Written> {
        let traces =
            lock(&self.shared.assembler).take_ready(Instant::now(), self.shared.grace, all);
        let mut written = Vec::new();
        let mut late = 0;
        let mut writer = lock(&self.shared.writer);
        for ready in traces {
            let trace = ready
                .spans
                .first()
                .map(|s| s.trace_id.clone())
                .unwrap_or_default();
            let wrote = if ready.late {
                writer.write_late(ready.spans)
            } else {
                writer.write(ready.spans)
            };
            match wrote {
                Ok(Some(w)) => {
                    late += u64::from(ready.late);
                    written.push(w);
                }
                Ok(None) => {}
                Err(e) => {
                    lock(&self.shared.summary).failed += 1;
                    let what = if ready.late {
                        format!("late spans of the trace {trace} were")
                    } else {
                        format!("trace {trace} was")
                    };
                    tracing::error!("reel collect: the {what} not written: {e}");
                }
            }
        }
        let mut summary = lock(&self.shared.summary);
        summary.runs += written.len() as u64;
        summary.late_runs += late;
        written
    }

    /// How many traces are held, waiting to be written.
    pub fn held(&self) -> usize {
        lock(&self.shared.assembler).held()
    }

    /// The traces held, as the running runs they will be written as
    /// ([`map::held_record`]): what `reel runs` and the console list
    /// meanwhile.
    pub fn held_runs(&self) -> Vec<reel::RunRecord> {
        lock(&self.shared.assembler)
            .held_traces()
            .filter_map(map::held_record)
            .collect()
    }

    /// The routes (`POST /v1/traces`, and OTLP/gRPC's
    /// `TraceService/Export` over HTTP/2) behind the console's gate and
    /// the body limit of `config`.
    pub fn router(&self, config: &CollectConfig) -> Result<Router, CollectError> {
        // tonic bounds a gzip message's inflated size by the same limit.
        let grpc = TraceServiceServer::new(grpc::Grpc(self.clone()))
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .max_decoding_message_size(config.max_body);
        let routes = Router::new()
            .route("/v1/traces", post(traces))
            .layer(DefaultBodyLimit::max(config.max_body))
            .with_state(self.clone())
            .merge(tonic::service::Routes::new(grpc).into_axum_router());
        Ok(reel_serve::gated(
            routes,
            config.listen,
            config.tokens.clone(),
            config.allowed_hosts.clone(),
        )?)
    }

    /// Serves on `listener` until `shutdown` completes, writing traces as
    /// they become ready; then writes every trace still held. Live
    /// inspection (`reel runs`, the console) reads the archive meanwhile,
    /// through the live socket, which lists each trace held as a running
    /// run.
    pub async fn serve(
        self,
        config: &CollectConfig,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Summary, CollectError> {
        let router = self.router(config)?;
        let held = {
            let collector = self.clone();
            Arc::new(move || collector.held_runs())
        };
        let live = reel_archive::live::LiveServer::start_holding(self.archive(), held)?;
        let ticker = {
            let collector = self.clone();
            let every = (self.shared.grace / 4).max(Duration::from_millis(20));
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(every);
                loop {
                    interval.tick().await;
                    let c = collector.clone();
                    let _ = tokio::task::spawn_blocking(move || c.write_ready(false)).await;
                }
            })
        };
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        ticker.abort();
        let c = self.clone();
        let _ = tokio::task::spawn_blocking(move || c.write_ready(true)).await;
        live.stop(Duration::from_secs(1)).await;
        served?;
        Ok(self.summary())
    }
}

async fn traces(
    State(collector): State<Collector>,
    headers: HeaderMap,
    body: Result<bytes::Bytes, BytesRejection>,
) -> Response {
    let max = collector.shared.max_body;
    let body = match body::read(headers.get(header::CONTENT_ENCODING), body, max) {
        Ok(b) => b,
        Err((status, why)) => return refuse(status, &why),
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    collector.receive(content_type, &body)
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("reel collect: {why}\n"),
    )
        .into_response()
}

fn respond(encoding: Encoding, response: &ExportTraceServiceResponse) -> Response {
    match encoding {
        Encoding::Protobuf => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            response.encode_to_vec(),
        )
            .into_response(),
        Encoding::Json => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            json_response(response),
        )
            .into_response(),
    }
}

/// The response as OTLP/JSON, absent members left out (not `null`).
fn json_response(response: &ExportTraceServiceResponse) -> Vec<u8> {
    let mut value = serde_json::to_value(response).unwrap_or_default();
    if let Some(members) = value.as_object_mut() {
        members.retain(|_, v| !v.is_null());
    }
    serde_json::to_vec(&value).unwrap_or_else(|_| b"{}".to_vec())
}

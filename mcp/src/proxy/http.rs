//! The recording proxy over streamable HTTP (`reel mcp record --listen
//! ADDR --upstream URL`).
//!
//! [`HttpProxy`] is a reverse proxy in front of one MCP server's
//! streamable HTTP endpoint. Every request and response passes through
//! unchanged (headers too, `Host` included, but the hop-by-hop ones),
//! `Mcp-Session-Id` included, once `Host` and `Origin` name a host the
//! proxy answers for (loopback names, and those of
//! [`HttpProxy::allow_host`]; else `403 Forbidden`); an SSE response
//! (`text/event-stream`) is streamed through chunk by chunk, each event
//! linked to its call before the chunk that completes it is forwarded; a
//! JSON response is linked whole, then forwarded. Requests to other paths
//! of the upstream's origin (OAuth metadata, say) are forwarded and not
//! recorded.
//!
//! ## How the traffic is recorded
//!
//! - A 2025-11-25 session (the `Mcp-Session-Id` its `initialize` response
//!   named) is one run, recorded exactly as a stdio session is (see
//!   [`super`]), labels `mcp.transport` = `streamable-http`,
//!   `mcp.upstream` (the URL without its query) and `mcp.session`. The
//!   client's `DELETE` ends it `completed`; a session still open when the
//!   proxy stops ends `cancelled`.
//! - Requests without a session (protocol 2026-07-28 has none; a
//!   stateless server gives none) are self-contained exchanges: they go
//!   into one run per client (the client as it names itself,
//!   `clientInfo` name and version, label `mcp.client`), ended
//!   `completed` once the client has been idle for
//!   [`HttpProxy::idle_close`] (its next exchange starts a new run) or
//!   when the proxy stops, each exchange's messages
//!   linked within that exchange
//!   (two clients may both number their requests from 1), but for a
//!   call's input-required rounds, which are one call across exchanges
//!   (by the echoed `requestState`). Each `tools/list` of such an
//!   exchange is recorded.
//! - On 2026-07-28 a client cancels by closing the response stream: a
//!   stream closed before its `tools/call` was answered files
//!   `cancel.requested` on that call (a 2025-11-25 client's closed stream
//!   is no cancellation: it sends `notifications/cancelled`).
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, Uri};
use reel::context::Secret;
use reel::fact::RunStatus;
use reel_recorder::{Recorder, Run, RunStart};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::line::Line;
use super::link::{end_rounds, Rounds, Router};
use crate::accept::{accept_until, AcceptFailure};

mod clients;
mod exchange;
mod observed;
mod sse;
mod upstream;

#[cfg(feature = "fuzzing")]
pub(crate) use exchange::requests;
pub(crate) use sse::Sse;

use clients::{end_idle, sweep_idle, ClientRun};
use exchange::handle;

/// The header naming a streamable HTTP session.
const SESSION: &str = "mcp-session-id";
/// The header naming the protocol version of a request.
const VERSION: &str = "mcp-protocol-version";
/// The first protocol version whose clients cancel by closing the stream.
const MODERN: &str = "2026-07-28";

/// The largest message the proxy holds in memory by default (64 MiB): a
/// request body, a JSON response, one server-sent event.
pub const DEFAULT_MAX_BODY: usize = 64 << 20;

/// A recording proxy in front of an MCP server's streamable HTTP endpoint.
#[derive(Debug, Clone)]
pub struct HttpProxy {
    upstream: Uri,
    secrets: Vec<Secret>,
    max_body: usize,
    /// Who may use the proxy: `Host` and `Origin` names, its tokens.
    gate: Gate,
    /// How long a client's sessionless run may see no exchange before it
    /// is ended ([`HttpProxy::idle_close`]).
    idle_close: std::time::Duration,
}

use crate::gate::Gate;
pub use crate::gate::{MIN_TOKEN_LEN, TOKEN_HEADER};

/// The default of [`HttpProxy::idle_close`]: five minutes.
pub const DEFAULT_IDLE_CLOSE: std::time::Duration = std::time::Duration::from_secs(300);

/// What an HTTP proxy recorded, once stopped.
#[derive(Debug)]
pub struct HttpOutcome {
    /// The runs recorded, in the order they started.
    pub run_ids: Vec<String>,
}

impl HttpProxy {
    /// A proxy in front of the endpoint `upstream` (an `http://` URL).
    /// `Err` says what is wrong with the URL.
    pub fn new(upstream: &str) -> Result<HttpProxy, String> {
        let uri: Uri = upstream
            .parse()
            .map_err(|e| format!("--upstream {upstream:?} is not a URL ({e})"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(format!(
                    "--upstream {upstream:?}: https is not supported; proxy a plain http endpoint \
                     (a TLS terminator can sit in front of it)"
                ))
            }
            _ => {
                return Err(format!(
                    "--upstream {upstream:?} is not an http:// URL (say http://HOST:PORT/mcp)"
                ))
            }
        }
        if uri.authority().is_none() {
            return Err(format!("--upstream {upstream:?} names no host"));
        }
        Ok(HttpProxy {
            upstream: uri,
            secrets: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
            gate: Gate::new(
                "reel mcp record",
                "call the upstream MCP server through the proxy and have their traffic recorded",
            ),
            idle_close: DEFAULT_IDLE_CLOSE,
        })
    }

    /// Also answers requests whose `Host` (and `Origin`, when sent) names
    /// `name` (a host name or address, no port: any port matches), besides
    /// [`LOOPBACK_HOSTS`]. `Err` says what is wrong with the name.
    pub fn allow_host(mut self, name: &str) -> Result<HttpProxy, String> {
        self.gate.allow_host(name)?;
        Ok(self)
    }

    /// Why a request may not be answered (`Host` or `Origin` naming a
    /// host not allowed, the proxy's token missing), or `None`.
    fn refusal(&self, headers: &HeaderMap) -> Option<String> {
        self.gate.refusal(headers)
    }

    /// The largest message held in memory ([`DEFAULT_MAX_BODY`] unless
    /// set). A request body over it is refused with `413 Payload Too
    /// Large`; a JSON response or a server-sent event over it is passed
    /// through whole but not recorded (a warning says so), so a hostile
    /// peer cannot make the proxy hold an unbounded message.
    pub fn max_body(mut self, bytes: usize) -> HttpProxy {
        self.max_body = bytes.max(1);
        self
    }

    /// How long a client's sessionless run (2026-07-28, a stateless
    /// server) may go without an exchange before it is ended `completed`
    /// ([`DEFAULT_IDLE_CLOSE`] unless told): the client's next exchange
    /// starts a new run. A run with an exchange still open is not idle.
    pub fn idle_close(mut self, idle: std::time::Duration) -> HttpProxy {
        self.idle_close = idle;
        self
    }

    /// A token of the proxy's own (repeatable): every request must then
    /// present one in the [`TOKEN_HEADER`] header (`Reel-Token: TOKEN`),
    /// else it is refused with 403 (not 401, which would start an MCP
    /// client's OAuth flow toward the upstream); the header is never
    /// forwarded. Needed to listen off loopback ([`HttpProxy::check_listen`]).
    pub fn token(mut self, token: Secret) -> HttpProxy {
        self.gate.token(token);
        self
    }

    /// Refuses to listen at `addr` off loopback without a token (anyone
    /// who reaches the port could call the upstream through it and have
    /// their traffic recorded), and any token shorter than
    /// [`MIN_TOKEN_LEN`]. The error says what to do.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), String> {
        self.gate.check_listen(addr)
    }

    /// A value scrubbed from every fact of every session.
    pub fn secret(mut self, secret: Secret) -> HttpProxy {
        self.secrets.push(secret);
        self
    }

    /// The upstream endpoint without its query (a token may ride there),
    /// as the runs' `mcp.upstream` label has it.
    pub fn upstream_shown(&self) -> String {
        format!(
            "http://{}{}",
            self.upstream
                .authority()
                .map(|a| a.as_str().rsplit('@').next().unwrap_or_default())
                .unwrap_or_default(),
            self.upstream.path()
        )
    }

    /// Binds the proxy's listener at `addr` (port 0 picks one).
    pub async fn bind(self, addr: SocketAddr) -> std::io::Result<BoundHttpProxy> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(BoundHttpProxy {
            proxy: self,
            listener,
            addr,
        })
    }
}

/// A bound [`HttpProxy`]; [`BoundHttpProxy::run`] serves it.
#[derive(Debug)]
pub struct BoundHttpProxy {
    proxy: HttpProxy,
    listener: TcpListener,
    addr: SocketAddr,
}

impl BoundHttpProxy {
    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint clients connect to: this address, the upstream's path.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.proxy.upstream.path())
    }

    /// Serves until `stop` resolves, recording into `recorder` when given
    /// (never failing because of recording); then ends every run.
    pub async fn run(
        self,
        recorder: Option<&Recorder>,
        stop: impl Future<Output = ()>,
    ) -> std::io::Result<HttpOutcome> {
        let shared = Arc::new(Shared {
            line: Arc::new(Line::default()),
            upstream: Arc::new(upstream::Upstream::new(self.proxy.upstream.clone())),
            recorder: recorder.cloned(),
            proxy: self.proxy,
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            sessionless: tokio::sync::Mutex::new(HashMap::new()),
            rounds: Rounds::default(),
            run_ids: Mutex::new(Vec::new()),
            closing: Mutex::new(Vec::new()),
        });
        let ct = CancellationToken::new();
        let sweeper = tokio::spawn(sweep_idle(shared.clone()));
        let serving = shared.clone();
        accept_until(&self.listener, stop, &ct, AcceptFailure::Warn, move |_| {
            let shared = serving.clone();
            // The connection's first request holds its place in line from
            // now (accepts come in order); later ones from their head.
            let first = Arc::new(Mutex::new(Some(shared.line.take())));
            hyper::service::service_fn(move |req| {
                let ticket = lock(&first).take();
                let ticket = ticket.unwrap_or_else(|| shared.line.take());
                handle(shared.clone(), req, ticket)
            })
        })
        .await?;
        sweeper.abort();
        // No next round will come for a suspended call.
        end_rounds(&shared.rounds);
        // Every exchange's body is dropped now: its calls are filed.
        let closing = std::mem::take(&mut *lock(&shared.closing));
        for task in closing {
            let _ = task.await;
        }
        let sessions: Vec<Arc<Session>> = shared
            .sessions
            .lock()
            .await
            .drain()
            .map(|(_, s)| s)
            .collect();
        for session in sessions {
            session.end(RunStatus::Cancelled).await;
        }
        let sessionless: Vec<Run> = shared
            .sessionless
            .lock()
            .await
            .drain()
            .filter_map(|(_, client)| client.run)
            .collect();
        for run in sessionless {
            if let Err(e) = run.end(RunStatus::Completed).await {
                tracing::warn!("the sessionless MCP run did not end cleanly: {e}");
            }
        }
        let run_ids = std::mem::take(&mut *lock(&shared.run_ids));
        Ok(HttpOutcome { run_ids })
    }
}

use reel::lock::lock;

struct Shared {
    proxy: HttpProxy,
    /// Requests reach the upstream in the order they reached the proxy
    /// (see [`super::line`]).
    line: Arc<Line>,
    /// Its kept-alive connections (see [`upstream::Upstream`]).
    upstream: Arc<upstream::Upstream>,
    recorder: Option<Recorder>,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
    /// The run of requests without a session, started with the first.
    /// Runs of requests without a session, one per client (see
    /// [`Requests::client`]), each started with its first request.
    sessionless: tokio::sync::Mutex<HashMap<String, ClientRun>>,
    /// Its calls suspended at input-required rounds (2026-07-28): the
    /// next round is another exchange.
    rounds: Rounds,
    run_ids: Mutex<Vec<String>>,
    /// Exchanges' routers being closed (their calls filed).
    closing: Mutex<Vec<JoinHandle<()>>>,
}

/// One 2025-11-25 session: its run and its router.
struct Session {
    run: Option<Run>,
    router: Arc<Router>,
}

impl Session {
    async fn end(&self, status: RunStatus) {
        self.router.close().await;
        if let Some(run) = &self.run {
            if let Err(e) = run.end(status).await {
                tracing::warn!("the MCP session's run did not end cleanly: {e}");
            }
        }
    }
}

impl Shared {
    /// Starts a run; `None` (and the operator told) when it cannot be.
    async fn start_run(&self, session: Option<&str>, client: Option<&str>) -> Option<Run> {
        let recorder = self.recorder.as_ref()?;
        let mut start = RunStart::new(format!("mcp-{:032x}", rand::random::<u128>()))
            .label("mcp.transport", "streamable-http")
            .label("mcp.upstream", self.proxy.upstream_shown());
        if let Some(session) = session {
            start = start.label("mcp.session", session);
        }
        if let Some(client) = client {
            start = start.label("mcp.client", client);
        }
        for secret in &self.proxy.secrets {
            start = start.secret(secret.clone());
        }
        match recorder.start_run(start).await {
            Ok(run) => {
                lock(&self.run_ids).push(run.id().to_owned());
                Some(run)
            }
            Err(e) => {
                tracing::warn!("the MCP session is not recorded: {e}");
                None
            }
        }
    }

    /// The session `id`'s record, started when first seen.
    async fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.recorder.as_ref()?;
        let mut sessions = self.sessions.lock().await;
        if let Some(s) = sessions.get(id) {
            return Some(s.clone());
        }
        let run = self.start_run(Some(id), None).await;
        let session = Arc::new(Session {
            router: Arc::new(Router::new(run.clone()).scrubbing(&self.proxy.secrets)),
            run,
        });
        sessions.insert(id.to_owned(), session.clone());
        Some(session)
    }

    /// A router for one sessionless exchange, in the run of its client
    /// (started with the client's first exchange, or its first after the
    /// idle bound); the exchange is open until [`Shared::exchange_closed`].
    async fn exchange(&self, client: &Option<String>) -> Option<Arc<Router>> {
        self.recorder.as_ref()?;
        let mut runs = self.sessionless.lock().await;
        let key = client.clone().unwrap_or_default();
        if runs
            .get(&key)
            .is_some_and(|c| c.idle(self.proxy.idle_close))
        {
            if let Some(run) = runs.remove(&key).and_then(|c| c.run) {
                end_idle(run).await;
            }
        }
        if !runs.contains_key(&key) {
            let run = self.start_run(None, client.as_deref()).await;
            runs.insert(
                key.clone(),
                ClientRun {
                    run,
                    last: std::time::Instant::now(),
                    open: 0,
                },
            );
        }
        let entry = runs.get_mut(&key)?;
        let run = entry.run.clone()?;
        entry.open += 1;
        entry.last = std::time::Instant::now();
        let router = Router::sharing(Some(run), self.rounds.clone());
        Some(Arc::new(router.scrubbing(&self.proxy.secrets)))
    }

    /// The exchange of `client` that [`Shared::exchange`] opened has
    /// ended (its calls filed).
    async fn exchange_closed(&self, client: &Option<String>) {
        let key = client.clone().unwrap_or_default();
        if let Some(entry) = self.sessionless.lock().await.get_mut(&key) {
            entry.open = entry.open.saturating_sub(1);
            entry.last = std::time::Instant::now();
        }
    }

    fn upstream_uri(&self, original: &Uri, endpoint: bool) -> Uri {
        let path = if endpoint {
            self.proxy.upstream.path_and_query().cloned()
        } else {
            original.path_and_query().cloned()
        };
        let mut parts = http::uri::Parts::default();
        parts.scheme = self.proxy.upstream.scheme().cloned();
        parts.authority = self.proxy.upstream.authority().cloned();
        parts.path_and_query = path.or_else(|| Some(http::uri::PathAndQuery::from_static("/")));
        Uri::from_parts(parts).unwrap_or_else(|_| self.proxy.upstream.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{header, HeaderValue};

    #[test]
    fn the_proxys_token_is_checked_and_never_forwarded() {
        let proxy = HttpProxy::new("http://127.0.0.1:8000/mcp")
            .unwrap()
            .token(Secret::new("a-token-of-the-proxy"));
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:9"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer upstream"),
        );
        assert!(proxy
            .refusal(&h)
            .is_some_and(|why| why.contains("Reel-Token")));
        h.insert(
            TOKEN_HEADER,
            HeaderValue::from_static("a-token-of-the-proxy"),
        );
        assert_eq!(proxy.refusal(&h), None);
        let forwarded = exchange::forwarded_headers(&h);
        assert!(forwarded.get(TOKEN_HEADER).is_none());
        // The upstream's own bearer passes through untouched.
        assert_eq!(forwarded[header::AUTHORIZATION], "Bearer upstream");
        assert!(proxy.check_listen("0.0.0.0:0".parse().unwrap()).is_ok());
        let open = HttpProxy::new("http://127.0.0.1:8000/mcp").unwrap();
        assert!(open.check_listen("0.0.0.0:0".parse().unwrap()).is_err());
        assert!(open.check_listen("127.0.0.1:0".parse().unwrap()).is_ok());
    }

    #[test]
    fn an_upstream_url_is_checked_and_shown_without_its_query() {
        let p = HttpProxy::new("http://127.0.0.1:8000/mcp?token=abc").unwrap();
        assert_eq!(p.upstream_shown(), "http://127.0.0.1:8000/mcp");
        assert!(HttpProxy::new("https://example.invalid/mcp")
            .unwrap_err()
            .contains("https is not supported"));
        assert!(HttpProxy::new("localhost:8000").is_err());
    }
}

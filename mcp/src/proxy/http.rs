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
//!   into one run per client for the proxy's lifetime (the client as it
//!   names itself, `clientInfo` name and version, label `mcp.client`),
//!   ended `completed` when the proxy stops, each exchange's messages
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
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{
    header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri,
};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use reel::context::Secret;
use reel::fact::RunStatus;
use reel_recorder::{Recorder, Run, RunStart};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::line::{Line, Ticket};
use super::link::{end_rounds, Dir, Rounds, Router};

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
    /// The host names a request's `Host` and `Origin` may name (any
    /// port), normalized ([`normalize_host`]).
    allowed_hosts: Vec<String>,
}

/// The host names the proxy answers for unless told more
/// ([`HttpProxy::allow_host`]): the loopback names, any port.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A host name as compared: lower case, without IPv6 brackets.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

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
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect(),
        })
    }

    /// Also answers requests whose `Host` (and `Origin`, when sent) names
    /// `name` (a host name or address, no port: any port matches), besides
    /// [`LOOPBACK_HOSTS`]. `Err` says what is wrong with the name.
    pub fn allow_host(mut self, name: &str) -> Result<HttpProxy, String> {
        let host = normalize_host(name.trim());
        let parsed = http::uri::Authority::try_from(name.trim());
        let bare = match &parsed {
            Ok(a) => a.port().is_none() && normalize_host(a.host()) == host,
            // An IPv6 address without brackets is no authority, but a host.
            Err(_) => host.parse::<std::net::Ipv6Addr>().is_ok(),
        };
        if host.is_empty() || !bare {
            return Err(format!(
                "--allow-host {name:?} is not a host name; give a name or an address \
                 without scheme, port or path (e.g. --allow-host mcp.internal)"
            ));
        }
        if !self.allowed_hosts.contains(&host) {
            self.allowed_hosts.push(host);
        }
        Ok(self)
    }

    /// Why a request may not be answered (`Host` or `Origin` naming a
    /// host not allowed), or `None`. The guard against DNS rebinding: a
    /// page a browser loaded from a name an attacker controls, rebound to
    /// this address, sends that name in `Host` and its origin in `Origin`.
    fn refusal(&self, headers: &HeaderMap) -> Option<String> {
        let allowed = |host: &str| self.allowed_hosts.contains(&normalize_host(host));
        let hosts = self.allowed_hosts.join(", ");
        let advice = "start the proxy with --allow-host NAME to accept another name";
        // (An HTTP/2 request's `:authority` was made its `Host` by then.)
        let host = headers.get(header::HOST).map(|v| {
            v.to_str()
                .ok()
                .and_then(|t| http::uri::Authority::try_from(t).ok())
        });
        match host {
            None => {
                return Some(format!(
                    "reel mcp record: the request has no Host header; this proxy answers only \
                 requests naming {hosts} (any port) in Host, a guard against DNS rebinding\n"
                ))
            }
            Some(Some(a)) if allowed(a.host()) => {}
            Some(_) => {
                let shown = headers
                    .get(header::HOST)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_default();
                return Some(format!(
                    "reel mcp record: refused the Host {shown:?}: this proxy answers only \
                     {hosts} (any port), a guard against DNS rebinding; {advice}\n"
                ));
            }
        }
        let origin = headers.get(header::ORIGIN)?;
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|t| t.parse::<Uri>().ok())
            .and_then(|u| u.host().map(str::to_owned));
        match origin_host {
            Some(h) if allowed(&h) => None,
            _ => Some(format!(
                "reel mcp record: refused the Origin {:?}: this proxy answers only pages of \
                 {hosts} (any port), a guard against DNS rebinding; {advice}\n",
                String::from_utf8_lossy(origin.as_bytes())
            )),
        }
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
            recorder: recorder.cloned(),
            proxy: self.proxy,
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            sessionless: tokio::sync::Mutex::new(HashMap::new()),
            rounds: Rounds::default(),
            run_ids: Mutex::new(Vec::new()),
            closing: Mutex::new(Vec::new()),
        });
        let ct = CancellationToken::new();
        let mut connections = JoinSet::new();
        tokio::pin!(stop);
        loop {
            let stream = tokio::select! {
                _ = &mut stop => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!("accepting a connection failed: {e}");
                        continue;
                    }
                },
            };
            let shared = shared.clone();
            let stop = ct.child_token();
            // The connection's first request holds its place in line from
            // now (accepts come in order); later ones from their head.
            let first = Arc::new(Mutex::new(Some(shared.line.take())));
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let ticket = lock(&first).take();
                    let ticket = ticket.unwrap_or_else(|| shared.line.take());
                    handle(shared.clone(), req, ticket)
                });
                let conn = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .into_owned();
                tokio::select! {
                    _ = conn => {}
                    _ = stop.cancelled() => {}
                }
            });
        }
        ct.cancel();
        while connections.join_next().await.is_some() {}
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
            .filter_map(|(_, run)| run)
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Shared {
    proxy: HttpProxy,
    /// Requests reach the upstream in the order they reached the proxy
    /// (see [`super::line`]).
    line: Arc<Line>,
    recorder: Option<Recorder>,
    sessions: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
    /// The run of requests without a session, started with the first.
    /// Runs of requests without a session, one per client (see
    /// [`Requests::client`]), each started with its first request.
    sessionless: tokio::sync::Mutex<HashMap<String, Option<Run>>>,
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
            router: Arc::new(Router::new(run.clone())),
            run,
        });
        sessions.insert(id.to_owned(), session.clone());
        Some(session)
    }

    /// A router for one sessionless exchange, in the run of its client
    /// (started with the client's first exchange).
    async fn exchange(&self, client: &Option<String>) -> Option<Arc<Router>> {
        self.recorder.as_ref()?;
        let mut runs = self.sessionless.lock().await;
        let key = client.clone().unwrap_or_default();
        let run = match runs.get(&key) {
            Some(run) => run.clone(),
            None => {
                let run = self.start_run(None, client.as_deref()).await;
                runs.insert(key, run.clone());
                run
            }
        }?;
        Some(Arc::new(Router::sharing(Some(run), self.rounds.clone())))
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

type ProxyBody = BoxBody<Bytes, hyper::Error>;

fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut response = Response::new(Full::new(Bytes::from(text)).map_err(|e| match e {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Headers that belong to one hop, never forwarded.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
    )
}

fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(from.len());
    for (name, value) in from {
        if !hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// The JSON-RPC messages of a request body: the requests' ids, whether one
/// is `initialize`, whether one says 2026-07-28 or later in its `_meta`.
pub(crate) struct Requests {
    ids: Vec<Value>,
    initialize: bool,
    modern: bool,
    /// Who sent them, as the client names itself (`NAME VERSION`): its
    /// `initialize`'s `clientInfo`, or on 2026-07-28 the
    /// `io.modelcontextprotocol/clientInfo` of a request's `_meta`. Without
    /// a session it is all that tells clients apart: each gets its own
    /// run. (Two instances of the same client and version share one; the
    /// network address does not tell them apart either, behind a local
    /// proxy.)
    client: Option<String>,
}

pub(crate) fn requests(body: &[u8]) -> Requests {
    let mut out = Requests {
        ids: Vec::new(),
        initialize: false,
        modern: false,
        client: None,
    };
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return out;
    };
    let messages = match message {
        Value::Array(batch) => batch,
        m => vec![m],
    };
    for m in &messages {
        let Some(method) = m.get("method").and_then(Value::as_str) else {
            continue;
        };
        if let Some(id) = m.get("id") {
            out.ids.push(id.clone());
        }
        out.initialize |= method == "initialize";
        if out.client.is_none() {
            let info = m
                .pointer("/params/clientInfo")
                .or_else(|| m.pointer("/params/_meta/io.modelcontextprotocol~1clientInfo"));
            out.client = info.and_then(client_name);
        }
        out.modern |= m
            .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v >= MODERN);
    }
    out
}

/// An MCP `Implementation` as `NAME VERSION` (`NAME` without a version);
/// `None` without a name.
fn client_name(info: &Value) -> Option<String> {
    let name = info.get("name").and_then(Value::as_str)?;
    Some(match info.get("version").and_then(Value::as_str) {
        Some(version) => format!("{name} {version}"),
        None => name.to_owned(),
    })
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    ticket: Ticket,
) -> Result<Response<ProxyBody>, Infallible> {
    let (mut parts, body) = req.into_parts();
    // HTTP/2 names the host in `:authority`, HTTP/1.1 in `Host`: the
    // guard checks, and the upstream (HTTP/1.1) is sent, one `Host`.
    if !parts.headers.contains_key(header::HOST) {
        if let Some(host) = parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            parts.headers.insert(header::HOST, host);
        }
    }
    if let Some(why) = shared.proxy.refusal(&parts.headers) {
        tracing::warn!("{}", why.trim_end());
        return Ok(plain(StatusCode::FORBIDDEN, why));
    }
    let endpoint = parts.uri.path() == shared.proxy.upstream.path();
    let max = shared.proxy.max_body;
    // A declared length over the limit is refused before a byte is read.
    if body.size_hint().lower() > max as u64 {
        return Ok(too_large(max));
    }
    let body = match http_body_util::Limited::new(body, max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Ok(too_large(max)),
        Err(e) => {
            return Ok(plain(
                StatusCode::BAD_REQUEST,
                format!("reel mcp record: the request body could not be read: {e}\n"),
            ))
        }
    };
    // Its turn: every request that reached the proxy before it is
    // written upstream (see `super::line`).
    let ticket = ticket.turn().await;
    let session_id = parts
        .headers
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let recording = endpoint && shared.recorder.is_some();
    let seen = if recording && parts.method == Method::POST {
        requests(&body)
    } else {
        Requests {
            ids: Vec::new(),
            initialize: false,
            modern: false,
            client: None,
        }
    };
    let modern = seen.modern
        || parts
            .headers
            .get(VERSION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v >= MODERN);

    // The router is known before forwarding, but for a session's
    // `initialize`, whose session the response names.
    let mut session = None;
    let mut router = None;
    let mut exchange = false;
    if recording {
        match &session_id {
            Some(id) => {
                session = shared.session(id).await;
                router = session.as_ref().map(|s| s.router.clone());
            }
            None if seen.initialize => {}
            None if parts.method == Method::POST => {
                router = shared.exchange(&seen.client).await;
                exchange = true;
            }
            None => {}
        }
    }
    let observed_early = router.is_some();
    if let Some(router) = &router {
        if parts.method == Method::POST {
            router.observe(Dir::ClientToServer, &body);
        }
    }

    let mut upstream = Request::new(Full::new(body.clone()));
    *upstream.method_mut() = parts.method.clone();
    *upstream.uri_mut() = shared.upstream_uri(&parts.uri, endpoint);
    // `Host` goes as the client sent it (checked above): the upstream's
    // own guard against DNS rebinding sees what the client named.
    *upstream.headers_mut() = forwarded_headers(&parts.headers);
    let response = match send_in_order(&shared.proxy.upstream, upstream, ticket).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                "the upstream MCP server {} did not answer: {e}",
                shared.proxy.upstream_shown()
            );
            if let Some(router) = router.filter(|_| exchange) {
                close_later(&shared, router);
            }
            return Ok(plain(
                StatusCode::BAD_GATEWAY,
                format!(
                    "reel mcp record: the upstream MCP server {} did not answer: {e}\n",
                    shared.proxy.upstream_shown()
                ),
            ));
        }
    };
    let (mut head, upstream_body) = response.into_parts();
    head.headers = forwarded_headers(&head.headers);

    if recording && router.is_none() && seen.initialize {
        // A new session: the one the response names, else a sessionless
        // exchange (a stateless server).
        let named = head
            .headers
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match named {
            Some(id) => {
                session = shared.session(&id).await;
                router = session.as_ref().map(|s| s.router.clone());
            }
            None => {
                router = shared.exchange(&seen.client).await;
                exchange = true;
            }
        }
    }
    if let (Some(router), false) = (&router, observed_early) {
        router.observe(Dir::ClientToServer, &body);
    }

    if parts.method == Method::DELETE && head.status.is_success() {
        if let Some(id) = &session_id {
            let ended = shared.sessions.lock().await.remove(id);
            if let Some(s) = ended {
                s.end(RunStatus::Completed).await;
            }
        }
    }

    let kind = match head
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        _ if router.is_none() => Kind::Raw,
        Some(t) if t.starts_with("text/event-stream") => Kind::Sse(Sse::with_limit(max)),
        Some(t) if t.starts_with("application/json") => Kind::Json(Vec::new()),
        _ => Kind::Raw,
    };
    let router_of = router.clone();
    let on_close = router.map(|router| {
        let shared = shared.clone();
        let ids = seen.ids;
        Box::new(move |complete: bool| {
            if !complete && modern {
                for id in &ids {
                    router.cancel_request(id, "the client closed the response stream");
                }
            }
            if exchange {
                close_later(&shared, router);
            }
        }) as Box<dyn FnOnce(bool) + Send + Sync>
    });
    let body = Observed {
        inner: upstream_body,
        kind,
        max,
        trailers: None,
        on_close,
        router_of,
    };
    drop(session);
    Ok(Response::from_parts(head, body.boxed()))
}

/// How long connecting to the upstream may take (the line of requests
/// waits for it).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Sends `request` to `upstream` on a connection of its own, releasing
/// its `ticket` once its first bytes are in the connection's socket (or it
/// failed): the next request in line is sent after it, so the upstream
/// receives the client's requests in the order the proxy received them
/// (a GET stream opened before a POST is open before the POST arrives).
/// A pooled client could not say so: it hands a request to whichever
/// connection is ready first.
async fn send_in_order(
    upstream: &Uri,
    mut request: Request<Full<Bytes>>,
    ticket: Ticket,
) -> Result<Response<Incoming>, String> {
    let host = upstream.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = upstream.port_u16().unwrap_or(80);
    let stream = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    .map_err(|_| format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()))?
    .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let (written, mut on_written) = tokio::sync::oneshot::channel();
    let io = TokioIo::new(Written {
        inner: stream,
        written: Some(written),
    });
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // A connection of its own is sent the origin form.
    let path = request
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    *request.uri_mut() = Uri::from(path);
    let response = sender.send_request(request);
    tokio::pin!(response);
    let answered = tokio::select! {
        r = &mut response => Some(r),
        // Written (or the connection is gone: the response says how).
        _ = &mut on_written => None,
    };
    drop(ticket);
    match answered {
        Some(r) => r,
        None => response.await,
    }
    .map_err(|e| e.to_string())
}

/// An upstream connection that says when bytes were first written to it.
struct Written {
    inner: tokio::net::TcpStream,
    written: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Written {
    fn wrote<T>(&mut self, poll: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if matches!(poll, Poll::Ready(Ok(_))) {
            if let Some(tx) = self.written.take() {
                let _ = tx.send(());
            }
        }
        poll
    }
}

impl tokio::io::AsyncRead for Written {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Written {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// `413 Payload Too Large` for a request body over `max` bytes.
fn too_large(max: usize) -> Response<ProxyBody> {
    tracing::warn!("a request body over {max} bytes was refused (--max-body)");
    plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "reel mcp record: the request body is over the proxy's limit of {max} bytes; \
             send a smaller message, or start the proxy with a larger --max-body\n"
        ),
    )
}

/// Closes an exchange's router (its calls end and are filed) on its own
/// task; the proxy's stop waits for it.
fn close_later(shared: &Arc<Shared>, router: Arc<Router>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let task = rt.spawn(async move { router.close().await });
    let mut closing = lock(&shared.closing);
    closing.retain(|t| !t.is_finished());
    closing.push(task);
}

/// How a response body is observed.
enum Kind {
    /// Passed through unseen.
    Raw,
    /// Server-sent events: each event's data is a message.
    Sse(Sse),
    /// One JSON message (or batch), linked whole before it goes out.
    Json(Vec<u8>),
}

/// A response body passed through unchanged while its messages are linked.
struct Observed {
    inner: Incoming,
    kind: Kind,
    /// The most a JSON body may buffer (see [`HttpProxy::max_body`]).
    max: usize,
    /// Trailers held while a JSON body's data goes out first.
    trailers: Option<HeaderMap>,
    /// Called once: `true` at the body's end, `false` when it was dropped
    /// (the client closed the stream) or failed before.
    on_close: Option<Box<dyn FnOnce(bool) + Send + Sync>>,
    router_of: Option<Arc<Router>>,
}

impl Observed {
    fn close(&mut self, complete: bool) {
        if let Some(f) = self.on_close.take() {
            f(complete);
        }
    }

    fn router(&self) -> Option<&Router> {
        self.router_of.as_deref()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.close(false);
    }
}

impl Body for Observed {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if let Some(trailers) = this.trailers.take() {
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        loop {
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(frame) => frame,
            };
            match frame {
                Some(Ok(frame)) => {
                    let frame = match frame.into_data() {
                        Ok(data) => {
                            match &mut this.kind {
                                Kind::Raw => {}
                                Kind::Sse(sse) => {
                                    let events = sse.feed(&data);
                                    let oversized = sse.take_oversized();
                                    for event in events {
                                        if let Some(r) = this.router() {
                                            r.observe(Dir::ServerToClient, &event);
                                        }
                                    }
                                    if oversized {
                                        tracing::warn!(
                                            "a server-sent event over {} bytes was passed through unrecorded (--max-body)",
                                            this.max
                                        );
                                    }
                                }
                                Kind::Json(buf) if buf.len() + data.len() > this.max => {
                                    // Over the limit: what was held goes out
                                    // with this chunk, the rest as it comes,
                                    // none of it recorded.
                                    tracing::warn!(
                                        "a JSON response over {} bytes was passed through unrecorded (--max-body)",
                                        this.max
                                    );
                                    let mut held = std::mem::take(buf);
                                    this.kind = Kind::Raw;
                                    held.extend_from_slice(&data);
                                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(held)))));
                                }
                                Kind::Json(buf) => {
                                    buf.extend_from_slice(&data);
                                    continue;
                                }
                            }
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                        Err(frame) => frame,
                    };
                    let Kind::Json(buf) = &mut this.kind else {
                        // Trailers of a body passed through as it comes.
                        return Poll::Ready(Some(Ok(frame)));
                    };
                    let Ok(trailers) = frame.into_trailers() else {
                        continue;
                    };
                    // A JSON body's data goes out (linked) before its
                    // trailers.
                    let data = std::mem::take(buf);
                    if let Some(r) = this.router() {
                        r.observe(Dir::ServerToClient, &data);
                    }
                    this.trailers = Some(trailers);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(data)))));
                }
                Some(Err(e)) => {
                    this.close(false);
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    if let Kind::Json(buf) = &mut this.kind {
                        if !buf.is_empty() {
                            let data = std::mem::take(buf);
                            if let Some(r) = this.router() {
                                r.observe(Dir::ServerToClient, &data);
                            }
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(data)))));
                        }
                    }
                    this.close(true);
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A server-sent events parser: the data of each complete event, none
/// over its limit (an event that grows past it is skipped to its end).
pub(crate) struct Sse {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    limit: usize,
    /// The current event went over the limit: skipped to its end.
    skipping: bool,
    /// While skipping: the current line is not blank (a line cut short
    /// counts), so its end is not the event's.
    skipped_line: bool,
    /// An event was skipped since the last [`Sse::take_oversized`].
    oversized: bool,
}

impl Default for Sse {
    fn default() -> Sse {
        Sse::with_limit(DEFAULT_MAX_BODY)
    }
}

impl Sse {
    /// A parser holding at most `limit` bytes of one event.
    pub(crate) fn with_limit(limit: usize) -> Sse {
        Sse {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            limit,
            skipping: false,
            skipped_line: false,
            oversized: false,
        }
    }

    /// Whether an event was skipped for its size since the last call.
    pub(crate) fn take_oversized(&mut self) -> bool {
        std::mem::take(&mut self.oversized)
    }

    /// Feeds a chunk; returns the data of the events it completed.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        let mut events = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                if self.skipping {
                    // A lone `\r` before the `\n` is no content.
                    self.skipped_line |= b != b'\r';
                } else {
                    self.line.push(b);
                    if self.line.len() + self.data.len() > self.limit {
                        self.skip();
                    }
                }
                continue;
            }
            if self.skipping {
                // A blank line ends the skipped event.
                self.skipping = std::mem::take(&mut self.skipped_line);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.data));
                }
                self.has_data = false;
                continue;
            }
            if let Some(value) = line.strip_prefix(b"data") {
                let value = match value {
                    [b':', b' ', rest @ ..] | [b':', rest @ ..] => rest,
                    [] => &[][..],
                    _ => continue,
                };
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
        }
        events
    }

    fn skip(&mut self) {
        self.line = Vec::new();
        self.data = Vec::new();
        self.has_data = false;
        self.skipping = true;
        self.skipped_line = true;
        self.oversized = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks_are_whole() {
        let mut sse = Sse::default();
        assert!(sse.feed(b"id: 1\nevent: message\ndata: {\"a\"").is_empty());
        assert!(sse.feed(b":1}\r\n").is_empty());
        assert_eq!(
            sse.feed(b"\r\n: ping\n\ndata:x\ndata: y\n\n"),
            vec![b"{\"a\":1}".to_vec(), b"x\ny".to_vec()]
        );
        // A priming event with no data is no message.
        assert!(sse.feed(b"id: 7\nretry: 100\n\n").is_empty());
    }

    #[test]
    fn an_sse_event_over_the_limit_is_skipped_and_the_next_is_whole() {
        let mut sse = Sse::with_limit(16);
        // One line that never ends within the limit, fed in pieces: the
        // parser holds no more than its limit.
        for _ in 0..1000 {
            assert!(sse.feed(b"data: xxxxxxxxxxxxxxxxxxxxxxxx").is_empty());
            assert!(sse.line.len() + sse.data.len() <= 16);
        }
        // The cut line's end is not the event's; the blank line is.
        assert!(sse.feed(b"\r\ndata: more of it\r\n").is_empty());
        assert_eq!(
            sse.feed(b"\r\ndata: {\"ok\":1}\n\n"),
            vec![b"{\"ok\":1}".to_vec()]
        );
        assert!(sse.take_oversized());
        assert!(!sse.take_oversized());
        // Short lines adding up past it are one event over it, too.
        let mut sse = Sse::with_limit(16);
        assert!(sse
            .feed(b"data: 1234567\ndata: 1234567\ndata: 12\n\n")
            .is_empty());
        assert!(sse.take_oversized());
        assert_eq!(sse.feed(b"data: 12345\n\n"), vec![b"12345".to_vec()]);
        assert!(!sse.take_oversized());
    }

    #[test]
    fn host_and_origin_name_an_allowed_host_or_are_refused() {
        let proxy = HttpProxy::new("http://127.0.0.1:8000/mcp")
            .unwrap()
            .allow_host("MCP.Internal")
            .unwrap();
        let check = |host: Option<&str>, origin: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = host {
                h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
            }
            if let Some(v) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
            }
            proxy.refusal(&h).is_none()
        };
        for host in [
            "localhost",
            "localhost:1",
            "127.0.0.1:8765",
            "[::1]:80",
            "mcp.internal:9",
        ] {
            assert!(check(Some(host), None), "{host}");
        }
        for host in [
            "evil.test",
            "evil.test:8765",
            "127.0.0.2",
            "localhost.evil.test",
            "",
        ] {
            assert!(!check(Some(host), None), "{host}");
        }
        assert!(!check(None, None), "no Host");
        assert!(check(Some("localhost:1"), Some("http://localhost:3000")));
        assert!(check(Some("localhost:1"), Some("https://[::1]")));
        for origin in ["http://evil.test", "null", "file://", "garbage"] {
            assert!(!check(Some("localhost:1"), Some(origin)), "{origin}");
        }
        for bad in ["", "http://x", "x:80", "x/y"] {
            let e = HttpProxy::new("http://127.0.0.1:8000/mcp")
                .unwrap()
                .allow_host(bad)
                .unwrap_err();
            assert!(e.contains("--allow-host"), "{e}");
        }
        assert!(HttpProxy::new("http://127.0.0.1:8000/mcp")
            .unwrap()
            .allow_host("::1")
            .is_ok());
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

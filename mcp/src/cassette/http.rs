//! `reel mcp mock --listen ADDR`: the cassette over MCP streamable HTTP,
//! at `http://ADDR/mcp`, with rmcp's streamable HTTP server.
//!
//! - The door is the recording proxy's: `Host` and `Origin` must name a
//!   loopback name or an [`HttpMock::allow_host`] one (else `403`), and
//!   off loopback every request must carry the mock's own token in
//!   `Reel-Token` ([`HttpMock::token`], [`HttpMock::check_listen`]).
//! - A POST is refused before it is served as the proxy refuses it
//!   ([`crate::refusal`]): a JSON-RPC batch (`400`, `-32600`), SEP-2243
//!   headers that disagree with the body (`400`, `-32020`); a body over
//!   [`HttpMock::max_body`] gets `413`.
//! - Sessions as the record had them: a session recorded with 2025's
//!   `initialize` is served with sessions (`Mcp-Session-Id`, a `GET`
//!   stream, `DELETE` ends one); a tape of a 2026-07-28 session only
//!   ([`super::Session::sessionless`]) is served as a sessionless server:
//!   no session id is minted, and `GET` and `DELETE` are answered `405
//!   Method Not Allowed` (`Allow: POST`), as that version says of a server
//!   that offers no stream and no session. A 2026-07-28 request is served
//!   statelessly either way.
//! - Answers, misses and rounds are the cassette's, as on stdio: a miss
//!   is a JSON-RPC error, never a guess.
//! - A client that closes a 2026-07-28 request's response stream cancels
//!   it: rmcp cancels the request's token when the stream is dropped, and
//!   the replay stops sending there ([`Cassette::stream_closed`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use reel::context::Secret;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::relay::{Framing, Rewritten, EXCHANGE_HEADER};
use super::Cassette;
use crate::accept::{accept_until, AcceptFailure};
use crate::gate::Gate;

/// The path the mock serves MCP at.
pub const PATH: &str = "/mcp";

/// A [`Cassette`] to be served over streamable HTTP ([`Cassette::http`]).
#[derive(Debug, Clone)]
pub struct HttpMock {
    cassette: Cassette,
    gate: Gate,
    max_body: usize,
}

type MockBody = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<Cassette, LocalSessionManager>;

impl Cassette {
    /// This cassette as a streamable HTTP server (loopback names only, no
    /// token, [`crate::proxy::DEFAULT_MAX_BODY`]).
    pub fn http(self) -> HttpMock {
        HttpMock {
            cassette: self,
            gate: Gate::new(
                "reel mcp mock",
                "use the recorded session it serves (its answers, its tools)",
            ),
            max_body: crate::proxy::DEFAULT_MAX_BODY,
        }
    }
}

impl HttpMock {
    /// Also answers requests whose `Host` (and `Origin`) names `name`, any
    /// port. `Err` says what is wrong with the name.
    pub fn allow_host(mut self, name: &str) -> Result<HttpMock, String> {
        self.gate.allow_host(name)?;
        Ok(self)
    }

    /// A token of the mock's own (repeatable): every request must present
    /// one as `Reel-Token: TOKEN`, else `403`.
    pub fn token(mut self, token: Secret) -> HttpMock {
        self.gate.token(token);
        self
    }

    /// Refuses `addr` off loopback without a token, and short tokens.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), String> {
        self.gate.check_listen(addr)
    }

    /// The largest request body read (bytes); over it, `413`.
    pub fn max_body(mut self, bytes: usize) -> HttpMock {
        self.max_body = bytes.max(1);
        self
    }

    /// Binds the listener at `addr` (port 0 picks one).
    pub async fn bind(self, addr: SocketAddr) -> std::io::Result<BoundHttpMock> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(BoundHttpMock {
            mock: self,
            listener,
            addr,
        })
    }
}

/// A bound [`HttpMock`]; [`BoundHttpMock::run`] serves it.
#[derive(Debug)]
pub struct BoundHttpMock {
    mock: HttpMock,
    listener: TcpListener,
    addr: SocketAddr,
}

impl BoundHttpMock {
    /// The endpoint's URL: `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{PATH}", self.addr)
    }

    /// Serves until `stop` completes.
    pub async fn run(self, stop: impl Future<Output = ()>) -> std::io::Result<()> {
        let ct = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = ct.child_token();
        config.legacy_session_mode = !self.mock.cassette.session.sessionless();
        // The gate checks `Host` and `Origin` (with --allow-host names).
        config.allowed_hosts.clear();
        let cassette = self.mock.cassette.clone();
        let service: Arc<Service> = Arc::new(StreamableHttpService::new(
            move || Ok(cassette.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        ));
        let mock = Arc::new(self.mock);
        let exchanges = Arc::new(AtomicU64::new(0));
        accept_until(&self.listener, stop, &ct, AcceptFailure::Return, |_| {
            let (mock, service, exchanges) = (mock.clone(), service.clone(), exchanges.clone());
            hyper::service::service_fn(move |req| {
                let (mock, service) = (mock.clone(), service.clone());
                let exchange = exchanges.fetch_add(1, Ordering::Relaxed).to_string();
                async move { Ok::<_, Infallible>(handle(&mock, &service, req, exchange).await) }
            })
        })
        .await
    }
}

fn plain(status: StatusCode, text: String) -> Response<MockBody> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// One request: the gate, the refusals, then rmcp, its answers put back
/// as recorded.
async fn handle(
    mock: &HttpMock,
    service: &Service,
    req: Request<Incoming>,
    exchange: String,
) -> Response<MockBody> {
    let (mut parts, body) = req.into_parts();
    crate::gate::host_from_authority(&mut parts);
    if let Some(why) = mock.gate.refusal(&parts.headers) {
        tracing::warn!("{}", why.trim_end());
        return plain(StatusCode::FORBIDDEN, why);
    }
    if parts.uri.path() != PATH {
        return plain(
            StatusCode::NOT_FOUND,
            format!(
                "reel mcp mock: MCP is served at {PATH}, not {}\n",
                parts.uri.path()
            ),
        );
    }
    parts.headers.remove(EXCHANGE_HEADER);
    let max = mock.max_body;
    if body.size_hint().lower() > max as u64 {
        return too_large(max);
    }
    let body = match http_body_util::Limited::new(body, max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_large(max),
        Err(e) => {
            return plain(
                StatusCode::BAD_REQUEST,
                format!("reel mcp mock: the request body could not be read: {e}\n"),
            )
        }
    };
    if parts.method == Method::POST {
        if let Some(refused) = crate::refusal::refusal(&parts.headers, &body) {
            tracing::warn!("refused a request: {}", refused.message);
            mock.cassette.refused();
            return refused.response().map(|b| b.boxed());
        }
        if let Ok(tag) = HeaderValue::from_str(&exchange) {
            parts.headers.insert(EXCHANGE_HEADER, tag);
        }
    }
    let response = service
        .handle(Request::from_parts(parts, Full::new(body)))
        .await;
    let framing = match response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        Some(t) if t.starts_with("text/event-stream") => Framing::Sse,
        Some(t) if t.starts_with("application/json") => Framing::Json,
        _ => return response,
    };
    let exact = mock.cassette.exact.clone();
    response.map(|b| Rewritten::new(b, framing, exchange, exact).boxed())
}

/// `413 Payload Too Large` for a request body over `max` bytes.
fn too_large(max: usize) -> Response<MockBody> {
    plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "reel mcp mock: the request body is over the mock's limit of {max} bytes; send a \
             smaller message, or start the mock with a larger --max-body\n"
        ),
    )
}

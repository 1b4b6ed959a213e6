//! One request through the proxy: the host guard and the body limit, the
//! session or exchange it belongs to, forwarding it in line, and the
//! response body that links its messages on the way back.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use reel::fact::RunStatus;
use serde_json::Value;

use crate::proxy::line::Ticket;
use crate::proxy::link::{Dir, Router};

use super::observed::{Ending, Kind, Observed};
use super::*;

pub(super) type ProxyBody = BoxBody<Bytes, hyper::Error>;

pub(super) fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
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
            // The proxy's own token: for the proxy, never the upstream.
            | super::TOKEN_HEADER
    )
}

pub(super) fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
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

pub(super) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    ticket: Ticket,
) -> Result<Response<ProxyBody>, Infallible> {
    let (parts, body) = match read_request(&shared, req).await {
        Ok(read) => read,
        Err(refused) => return Ok(refused),
    };
    let endpoint = parts.uri.path() == shared.proxy.upstream.path();
    if endpoint && parts.method == Method::POST {
        if let Some(refused) = crate::refusal::refusal(&parts.headers, &body) {
            drop(ticket);
            record_refused(&shared, &parts.headers, &body, &refused).await;
            return Ok(refused
                .response()
                .map(|b| b.map_err(|e| match e {}).boxed()));
        }
    }
    let max = shared.proxy.max_body;
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
    // The client of a sessionless exchange (its run is the client's).
    let mut exchange: Option<Option<String>> = None;
    if recording {
        match &session_id {
            Some(id) => {
                session = shared.session(id).await;
                router = session.as_ref().map(|s| s.router.clone());
            }
            None if seen.initialize => {}
            None if parts.method == Method::POST => {
                router = shared.exchange(&seen.client).await;
                exchange = router.as_ref().map(|_| seen.client.clone());
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
    let response = match shared.upstream.send_in_order(upstream, ticket).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                "the upstream MCP server {} did not answer: {e}",
                shared.proxy.upstream_shown()
            );
            if let (Some(router), Some(client)) = (router, exchange) {
                close_later(&shared, router, client);
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
                exchange = router.as_ref().map(|_| seen.client.clone());
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

    drop(session);
    let response = ResponseOf {
        shared: &shared,
        router,
        ids: seen.ids,
        modern,
        exchange,
        max,
    };
    Ok(response.observed(head, upstream_body))
}

/// Files a request refused before forwarding ([`crate::refusal`]) in the
/// run it belongs to: its session's, else its client's sessionless run.
async fn record_refused(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: &[u8],
    refused: &crate::refusal::Refusal,
) {
    if shared.recorder.is_none() {
        return;
    }
    let error = refused.message()["error"].clone();
    let session = headers.get(SESSION).and_then(|v| v.to_str().ok());
    match session {
        Some(id) => {
            if let Some(session) = shared.session(id).await {
                session.router.refused(body, &error);
            }
        }
        None => {
            let client = requests(body).client;
            if let Some(router) = shared.exchange(&client).await {
                router.refused(body, &error);
                close_later(shared, router, client);
            }
        }
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
/// task, then tells its client's run the exchange is over; the proxy's
/// stop waits for it.
pub(super) fn close_later(shared: &Arc<Shared>, router: Arc<Router>, client: Option<String>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let after = shared.clone();
    let task = rt.spawn(async move {
        router.close().await;
        after.exchange_closed(&client).await;
    });
    let mut closing = lock(&shared.closing);
    closing.retain(|t| !t.is_finished());
    closing.push(task);
}

/// Reads a request whole: its head with `Host` set (from `:authority`
/// over HTTP/2), checked against the host guard, and its body within the
/// limit; `Err` is the response that refuses it.
async fn read_request(
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<(http::request::Parts, Bytes), Response<ProxyBody>> {
    let (mut parts, body) = req.into_parts();
    crate::gate::host_from_authority(&mut parts);
    if let Some(why) = shared.proxy.refusal(&parts.headers) {
        tracing::warn!("{}", why.trim_end());
        return Err(plain(StatusCode::FORBIDDEN, why));
    }
    let max = shared.proxy.max_body;
    // A declared length over the limit is refused before a byte is read.
    if body.size_hint().lower() > max as u64 {
        return Err(too_large(max));
    }
    let body = match http_body_util::Limited::new(body, max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large(max)),
        Err(e) => {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                format!("reel mcp record: the request body could not be read: {e}\n"),
            ))
        }
    };
    Ok((parts, body))
}

/// What the response to one request is linked with.
struct ResponseOf<'a> {
    shared: &'a Arc<Shared>,
    /// The session's or exchange's router; none when not recorded.
    router: Option<Arc<Router>>,
    /// The ids of the requests it answers.
    ids: Vec<Value>,
    /// Whether a closed stream cancels its calls (2026-07-28).
    modern: bool,
    /// For a sessionless exchange's router (closed with it), its client.
    exchange: Option<Option<String>>,
    max: usize,
}

impl ResponseOf<'_> {
    /// The response with its body observed: each SSE event or JSON reply
    /// linked to its call on the way back.
    fn observed(self, head: http::response::Parts, upstream_body: Incoming) -> Response<ProxyBody> {
        let ResponseOf {
            shared,
            router,
            ids,
            modern,
            exchange,
            max,
        } = self;
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
            Box::new(move |ending: Ending| {
                if ending == Ending::Cut && modern {
                    for id in &ids {
                        router.cancel_request(id, "the client closed the response stream");
                    }
                }
                if let Some(client) = exchange {
                    close_later(&shared, router, client);
                }
            }) as Box<dyn FnOnce(Ending) + Send + Sync>
        });
        let body = Observed {
            inner: upstream_body,
            kind,
            max,
            trailers: None,
            on_close,
            router_of,
        };
        Response::from_parts(head, body.boxed())
    }
}

//! The relay between rmcp and the client: a response whose recorded JSON
//! is waiting goes out as recorded (see the module docs of `cassette`),
//! on stdio line by line, over HTTP event by event.
//!
//! Answers wait under their exchange and request id: over stdio the
//! exchange is empty (one client); over HTTP each POST is an exchange of
//! its own ([`EXCHANGE_HEADER`], set by the mock), since two clients both
//! number their requests from 1.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame};
use reel::lock::lock;
use rmcp::model::RequestId;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Recorded answers on their way out, by [`key`].
pub(super) type Exact = Arc<Mutex<HashMap<String, Value>>>;

/// The header the HTTP mock tags each POST it hands rmcp with (a client's
/// own is dropped first).
pub(super) const EXCHANGE_HEADER: &str = "reel-mock-exchange";

/// Where an answer waits: the exchange and the request id.
pub(super) fn key(exchange: &str, id: &RequestId) -> Option<String> {
    Some(format!("{exchange} {}", serde_json::to_string(id).ok()?))
}

/// The exchange of the request `context` answers ("" on stdio).
pub(super) fn exchange_of(context: &RequestContext<RoleServer>) -> &str {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.headers.get(EXCHANGE_HEADER))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// Copies rmcp's lines to the client; a response whose recorded JSON is
/// in `exact` goes out as recorded.
pub(super) async fn relay<R, W>(read: R, mut write: W, exact: Exact)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut read = tokio::io::BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let out = match recorded_answer(&line, "", &exact) {
            Some(mut out) => {
                out.push(b'\n');
                out
            }
            None => line.clone(),
        };
        if write.write_all(&out).await.is_err() || write.flush().await.is_err() {
            break;
        }
    }
    let _ = write.shutdown().await;
}

/// `message` (a response of rmcp's, JSON) with its result replaced by
/// the recorded one waiting in `exact`, rmcp's own additions kept;
/// `None`: unchanged.
fn recorded_answer(message: &[u8], exchange: &str, exact: &Exact) -> Option<Vec<u8>> {
    let mut message: Value = serde_json::from_slice(message).ok()?;
    let id = serde_json::from_value::<RequestId>(message.get("id")?.clone()).ok()?;
    let typed = message.get_mut("result")?;
    let Value::Object(mut recorded) = lock(exact).remove(&key(exchange, &id)?)? else {
        return None;
    };
    // What rmcp decides, not the record: the version negotiated with this
    // client, and members the record lacks that the negotiated version
    // requires (2026-07-28's `resultType`, a listing's `ttlMs`...).
    if let Value::Object(typed) = typed.take() {
        for (k, v) in typed {
            if k == "protocolVersion" {
                recorded.insert(k, v);
            } else {
                recorded.entry(k).or_insert(v);
            }
        }
    }
    *typed = Value::Object(recorded);
    serde_json::to_vec(&message).ok()
}

/// How an HTTP response body of rmcp's is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// `text/event-stream`: each event's data is a message.
    Sse,
    /// `application/json`: the whole body is one message.
    Json,
}

/// An HTTP response body of rmcp's, with the answers of its exchange put
/// back as recorded.
pub(super) struct Rewritten {
    inner: BoxBody<Bytes, std::convert::Infallible>,
    framing: Framing,
    exchange: String,
    exact: Exact,
    held: Vec<u8>,
    done: bool,
}

impl Rewritten {
    pub(super) fn new(
        inner: BoxBody<Bytes, std::convert::Infallible>,
        framing: Framing,
        exchange: String,
        exact: Exact,
    ) -> Rewritten {
        Rewritten {
            inner,
            framing,
            exchange,
            exact,
            held: Vec::new(),
            done: false,
        }
    }

    /// What can go out of `held` now: its complete events (SSE).
    fn complete_events(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(end) = find(&self.held, b"\n\n") {
            let event: Vec<u8> = self.held.drain(..end + 2).collect();
            out.extend(self.event(&event));
        }
        out
    }

    /// One SSE event (with its blank line): its data replaced when it is
    /// an answer waiting as recorded.
    fn event(&self, event: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(event);
        let data: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            return event.to_vec();
        }
        let Some(answer) = recorded_answer(data.join("\n").as_bytes(), &self.exchange, &self.exact)
        else {
            return event.to_vec();
        };
        let mut out = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("data:"))
        {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"data: ");
        out.extend(answer);
        out.extend_from_slice(b"\n\n");
        out
    }

    /// The rest, at the end of rmcp's body.
    fn rest(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        match self.framing {
            Framing::Sse => held,
            Framing::Json => recorded_answer(&held, &self.exchange, &self.exact).unwrap_or(held),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Body for Rewritten {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    let rest = this.rest();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest.into()))));
                    }
                }
                Poll::Ready(Some(Err(e))) => match e {},
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.held.extend_from_slice(&data);
                        if this.framing == Framing::Sse {
                            let out = this.complete_events();
                            if !out.is_empty() {
                                return Poll::Ready(Some(Ok(Frame::data(out.into()))));
                            }
                        }
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }
}

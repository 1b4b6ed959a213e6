//! The response body on its way back: passed through unchanged, each SSE
//! event or JSON reply linked to its call before it is forwarded.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use crate::proxy::link::{Dir, Router};

use super::*;

/// How a response body is observed.
pub(super) enum Kind {
    /// Passed through unseen.
    Raw,
    /// Server-sent events: each event's data is a message.
    Sse(Sse),
    /// One JSON message (or batch), linked whole before it goes out.
    Json(Vec<u8>),
}

/// How an [`Observed`] body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The body was read to its end.
    Complete,
    /// It was dropped (the client closed the stream) or failed before.
    Cut,
}

/// A response body passed through unchanged while its messages are linked.
pub(super) struct Observed {
    pub(super) inner: Incoming,
    pub(super) kind: Kind,
    /// The most a JSON body may buffer (see [`HttpProxy::max_body`]).
    pub(super) max: usize,
    /// Trailers held while a JSON body's data goes out first.
    pub(super) trailers: Option<HeaderMap>,
    /// Called once, with how the body ended.
    pub(super) on_close: Option<Box<dyn FnOnce(Ending) + Send + Sync>>,
    pub(super) router_of: Option<Arc<Router>>,
}

impl Observed {
    fn close(&mut self, ending: Ending) {
        if let Some(f) = self.on_close.take() {
            f(ending);
        }
    }

    fn router(&self) -> Option<&Router> {
        self.router_of.as_deref()
    }
}

/// The non-blank lines of `bytes`.
fn json_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
}

/// How many bytes of `held` are whole JSON lines: up to its last newline,
/// when every non-blank line before it is a JSON value of its own (one
/// value written over several lines, or cut mid-line, is not).
fn whole_lines(held: &[u8]) -> Option<usize> {
    let n = held.iter().rposition(|b| *b == b'\n')? + 1;
    let mut lines = json_lines(&held[..n]).peekable();
    lines.peek()?;
    lines
        .all(|l| serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok())
        .then_some(n)
}

impl Drop for Observed {
    fn drop(&mut self) {
        self.close(Ending::Cut);
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
                                    // A stream of JSON lines (2026-07-28's
                                    // `subscriptions/listen` answers so) goes
                                    // out line by line, each recorded first;
                                    // one JSON value waits for its end.
                                    let Some(n) = whole_lines(buf) else {
                                        continue;
                                    };
                                    let ready: Vec<u8> = buf.drain(..n).collect();
                                    if let Some(r) = this.router() {
                                        for line in json_lines(&ready) {
                                            r.observe(Dir::ServerToClient, line);
                                        }
                                    }
                                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(ready)))));
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
                    this.close(Ending::Cut);
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
                    this.close(Ending::Complete);
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::whole_lines;

    #[test]
    fn json_lines_go_out_whole_and_one_value_waits_for_its_end() {
        let stream = b"{\"a\":1}\n{\"b\":2}\n{\"c\":";
        assert_eq!(
            whole_lines(stream),
            Some(16),
            "two whole lines, the third held"
        );
        assert_eq!(whole_lines(b"{\"a\":1}"), None, "no newline yet");
        let pretty = b"{\n  \"a\": 1\n}\n";
        assert_eq!(
            whole_lines(pretty),
            None,
            "one value over several lines waits"
        );
        assert_eq!(whole_lines(b"\n\n"), None, "nothing but blank lines");
    }
}

//! Sending a request upstream in line: a connection of its own, the next
//! request released once this one's first bytes are written.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::proxy::line::Ticket;

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
pub(super) async fn send_in_order(
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

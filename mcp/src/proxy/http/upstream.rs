//! Sending a request upstream in line, on a kept-alive connection the
//! proxy reuses, the next request released once this one's first bytes
//! are written.

use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use crate::proxy::line::Ticket;
use reel::lock::lock;

/// How long connecting to the upstream may take (the line of requests
/// waits for it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many idle upstream connections are kept for reuse.
const IDLE_KEPT: usize = 32;

/// How long an idle upstream connection is kept. Servers close theirs
/// sooner (uvicorn after 5 s, Node after 5 s), which the proxy sees; this
/// bounds what it keeps from one that never says.
const IDLE_FOR: Duration = Duration::from_secs(60);

/// The upstream server and the proxy's idle connections to it.
pub(super) struct Upstream {
    uri: Uri,
    idle: Mutex<Vec<Conn>>,
}

/// One HTTP/1.1 connection to the upstream.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    /// Counts the writes to its socket (see [`Written`]).
    writes: watch::Receiver<u64>,
    idle_since: Instant,
}

impl Upstream {
    pub(super) fn new(uri: Uri) -> Upstream {
        Upstream {
            uri,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Sends `request` upstream, releasing its `ticket` once its first
    /// bytes are in a connection's socket (or it failed): the next
    /// request in line is sent after it, so the upstream receives the
    /// client's requests in the order the proxy received them (a GET
    /// stream opened before a POST is open before the POST arrives).
    ///
    /// The connection is an idle one the proxy kept, or a new one when
    /// none is idle: a pooled client that hands a request to whichever
    /// connection is ready first could not say when it was written. A
    /// connection is idle again once its response has been read whole; a
    /// request the upstream's closing connection never took is sent again
    /// on a new one (it was not sent, so nothing is repeated).
    pub(super) async fn send_in_order(
        self: &std::sync::Arc<Self>,
        mut request: Request<Full<Bytes>>,
        ticket: Ticket,
    ) -> Result<Response<Incoming>, String> {
        // A connection to the origin server is sent the origin form.
        let path = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        *request.uri_mut() = Uri::from(path);
        let (request, ticket) = match self.take_idle() {
            Some(conn) => match Self::try_send(conn, request, ticket).await {
                Ok(sent) => return Ok(self.answered(sent)),
                Err(Unsent::Back(request, ticket)) => (*request, ticket),
                Err(Unsent::Failed(e)) => return Err(e),
            },
            None => (request, ticket),
        };
        let conn = self.connect().await?;
        match Self::try_send(conn, request, ticket).await {
            Ok(sent) => Ok(self.answered(sent)),
            Err(Unsent::Back(..)) => Err("the upstream closed a new connection".into()),
            Err(Unsent::Failed(e)) => Err(e),
        }
    }

    /// A response has come: its connection goes back to the idle ones
    /// once the response has been read whole.
    fn answered(
        self: &std::sync::Arc<Self>,
        (response, mut conn): (Response<Incoming>, Conn),
    ) -> Response<Incoming> {
        let upstream = self.clone();
        tokio::spawn(async move {
            if conn.sender.ready().await.is_ok() {
                conn.idle_since = Instant::now();
                let mut idle = lock(&upstream.idle);
                if idle.len() < IDLE_KEPT {
                    idle.push(conn);
                }
            }
        });
        response
    }

    /// The most recently used idle connection still open, dropping the
    /// closed and the stale.
    fn take_idle(&self) -> Option<Conn> {
        let mut idle = lock(&self.idle);
        while let Some(conn) = idle.pop() {
            if !conn.sender.is_closed()
                && conn.sender.is_ready()
                && conn.idle_since.elapsed() < IDLE_FOR
            {
                return Some(conn);
            }
        }
        None
    }

    async fn connect(&self) -> Result<Conn, String> {
        let host = self.uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = self.uri.port_u16().unwrap_or(80);
        let stream = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect((host, port)),
        )
        .await
        .map_err(|_| format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let (counter, writes) = watch::channel(0);
        let io = TokioIo::new(Written {
            inner: stream,
            writes: counter,
        });
        let (sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            writes,
            idle_since: Instant::now(),
        })
    }

    /// Sends `request` on `conn`; the ticket is released once its first
    /// bytes are written. A request the connection did not take (it was
    /// closing) comes back with its ticket still held.
    async fn try_send(
        mut conn: Conn,
        request: Request<Full<Bytes>>,
        ticket: Ticket,
    ) -> Result<(Response<Incoming>, Conn), Unsent> {
        let mut writes = conn.writes.clone();
        writes.mark_unchanged();
        let response = conn.sender.try_send_request(request);
        tokio::pin!(response);
        let answered = tokio::select! {
            r = &mut response => Some(r),
            // Written (or the connection is gone: the response says how).
            Ok(()) = writes.changed() => None,
        };
        let answered = match answered {
            Some(r) => r,
            None => {
                drop(ticket);
                return match response.await {
                    Ok(r) => Ok((r, conn)),
                    Err(mut e) => match e.take_message() {
                        // Not written after all: nothing was sent.
                        Some(request) => Err(Unsent::Failed(format!(
                            "the upstream connection closed before {} was sent",
                            request.uri()
                        ))),
                        None => Err(Unsent::Failed(e.into_error().to_string())),
                    },
                };
            }
        };
        match answered {
            Ok(r) => {
                drop(ticket);
                Ok((r, conn))
            }
            Err(mut e) => match e.take_message() {
                Some(request) => Err(Unsent::Back(Box::new(request), ticket)),
                None => {
                    drop(ticket);
                    Err(Unsent::Failed(e.into_error().to_string()))
                }
            },
        }
    }
}

/// A request [`Upstream::try_send`] did not get answered.
enum Unsent {
    /// The connection did not take it: send it on another.
    Back(Box<Request<Full<Bytes>>>, Ticket),
    /// Sent (or being sent) and failed: the upstream did not answer.
    Failed(String),
}

/// An upstream connection that counts its writes, so a request sent on
/// it knows when its first bytes are in the socket.
struct Written {
    inner: tokio::net::TcpStream,
    writes: watch::Sender<u64>,
}

impl Written {
    fn wrote<T>(&mut self, poll: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if matches!(poll, Poll::Ready(Ok(_))) {
            self.writes.send_modify(|n| *n += 1);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use http_body_util::BodyExt;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::proxy::line::Line;

    /// An HTTP/1.1 upstream that answers each request `ok N` (N counting
    /// its connections) and closes a connection after `answers` answers.
    async fn upstream(answers: usize) -> (Uri, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    for _ in 0..answers {
                        let mut length = 0;
                        loop {
                            let mut line = String::new();
                            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            let lower = line.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap();
                            }
                            if line == "\r\n" {
                                break;
                            }
                        }
                        let mut body = vec![0; length];
                        stream.read_exact(&mut body).await.unwrap();
                        let answer = format!("ok {n}");
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                            answer.len()
                        );
                        let out = stream.get_mut();
                        out.write_all(format!("{head}{answer}").as_bytes())
                            .await
                            .unwrap();
                    }
                });
            }
        });
        (uri, accepted)
    }

    async fn post(upstream: &Arc<Upstream>, line: &Arc<Line>) -> String {
        let request = Request::post(upstream.uri.clone())
            .header(http::header::HOST, "127.0.0.1")
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap();
        let response = upstream.send_in_order(request, line.take()).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        // Its connection is idle again once the answer is read whole.
        for _ in 0..1000 {
            if !lock(&upstream.idle).is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn requests_one_after_another_reuse_one_upstream_connection() {
        let (uri, accepted) = upstream(usize::MAX).await;
        let (upstream, line) = (Arc::new(Upstream::new(uri)), Arc::new(Line::default()));
        for _ in 0..5 {
            assert_eq!(post(&upstream, &line).await, "ok 1");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_is_not_used_again() {
        // The upstream closes each connection after two answers (as a
        // server's keep-alive limit does): the third request goes on a
        // new connection and is answered.
        let (uri, accepted) = upstream(2).await;
        let (upstream, line) = (Arc::new(Upstream::new(uri)), Arc::new(Line::default()));
        let mut answers = Vec::new();
        for _ in 0..5 {
            answers.push(post(&upstream, &line).await);
            // The upstream's close reaches the proxy's connection.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(answers, ["ok 1", "ok 1", "ok 2", "ok 2", "ok 3"]);
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }
}

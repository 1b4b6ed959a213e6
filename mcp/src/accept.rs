//! The one hyper accept loop of the crate's HTTP servers (the recording
//! proxy and the MCP host's streamable HTTP endpoint).

use std::error::Error as StdError;
use std::future::Future;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// What [`accept_until`] does when accepting a connection fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcceptFailure {
    /// Says so (a `tracing` warning) and accepts the next.
    Warn,
    /// Stops serving and returns the error.
    Return,
}

/// Serves the connections of `listener` until `stop` completes: each one
/// (HTTP/1 or 2) with the service `service_for` makes for it, called in
/// accept order. Every accepted socket has `TCP_NODELAY` set: a response
/// written in pieces (headers, then the body or an event) must not wait
/// for the client's delayed ACK (Nagle's algorithm held each request after
/// a kept-alive connection's first for about 40 ms). At the stop, or on an accept failure `on_failure` says to
/// return, `ct` is cancelled, which ends every connection still open, and
/// this returns once they have ended.
pub(crate) async fn accept_until<S, B>(
    listener: &TcpListener,
    stop: impl Future<Output = ()>,
    ct: &CancellationToken,
    on_failure: AcceptFailure,
    mut service_for: impl FnMut(&TcpStream) -> S,
) -> std::io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    let result = loop {
        let stream = tokio::select! {
            _ = &mut stop => break Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::warn!("cannot set TCP_NODELAY on a connection: {e}");
                    }
                    stream
                }
                Err(e) if on_failure == AcceptFailure::Warn => {
                    tracing::warn!("accepting a connection failed: {e}");
                    continue;
                }
                Err(e) => break Err(e),
            },
        };
        let service = service_for(&stream);
        let stop = ct.child_token();
        connections.spawn(async move {
            let conn = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .into_owned();
            tokio::select! {
                _ = conn => {}
                _ = stop.cancelled() => {}
            }
        });
    };
    ct.cancel();
    while connections.join_next().await.is_some() {}
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Each accepted socket reaches its service with `TCP_NODELAY` set
    /// (read back with getsockopt), kept-alive or new.
    #[tokio::test]
    async fn every_accepted_socket_has_tcp_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (with, without) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (w, wo) = (with.clone(), without.clone());
        let ct = CancellationToken::new();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(async move {
            accept_until(
                &listener,
                async {
                    let _ = stop_rx.await;
                },
                &ct,
                AcceptFailure::Return,
                move |stream: &TcpStream| {
                    let counter = if stream.nodelay().unwrap() { &w } else { &wo };
                    counter.fetch_add(1, Ordering::SeqCst);
                    hyper::service::service_fn(|_req| async {
                        Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Empty::<
                            bytes::Bytes,
                        >::new(
                        )))
                    })
                },
            )
            .await
        });
        for _ in 0..3 {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).await.unwrap();
            assert!(
                answer.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&answer)
            );
        }
        let _ = stop_tx.send(());
        serving.await.unwrap().unwrap();
        assert_eq!(
            (with.load(Ordering::SeqCst), without.load(Ordering::SeqCst)),
            (3, 0)
        );
    }
}

//! The one hyper accept loop of the crate's HTTP servers (the recording
//! proxy and the MCP host's streamable HTTP endpoint).

use std::error::Error as StdError;
use std::future::Future;

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
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
/// accept order. At the stop, or on an accept failure `on_failure` says to
/// return, `ct` is cancelled, which ends every connection still open, and
/// this returns once they have ended.
pub(crate) async fn accept_until<S, B>(
    listener: &TcpListener,
    stop: impl Future<Output = ()>,
    ct: &CancellationToken,
    on_failure: AcceptFailure,
    mut service_for: impl FnMut() -> S,
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
                Ok((stream, _)) => stream,
                Err(e) if on_failure == AcceptFailure::Warn => {
                    tracing::warn!("accepting a connection failed: {e}");
                    continue;
                }
                Err(e) => break Err(e),
            },
        };
        let service = service_for();
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

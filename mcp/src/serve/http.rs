//! Streamable HTTP: the MCP endpoint at `/mcp`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::McpHost;
use crate::accept::{accept_until, AcceptFailure};

/// A bound streamable HTTP server ([`McpHost::bind_http`]). Sessions of
/// 2025-11-25 clients are kept in memory (`Mcp-Session-Id`); 2026-07-28
/// requests are served statelessly, as that version has no sessions.
pub struct HttpServer {
    host: McpHost,
    listener: TcpListener,
    addr: SocketAddr,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    pub(crate) async fn bind(host: McpHost, addr: SocketAddr) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(HttpServer {
            host,
            listener,
            addr,
        })
    }

    /// The address bound (with the port picked, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint's URL: `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Serves until `shutdown` completes; then open sessions are ended.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let ct = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = ct.child_token();
        // Host validation (against DNS rebinding) accepts loopback names;
        // the address bound is accepted too.
        config.allowed_hosts.push(self.addr.ip().to_string());
        config.allowed_hosts.push(self.addr.to_string());
        let host = self.host.clone();
        let service = TowerToHyperService::new(StreamableHttpService::new(
            move || Ok(host.handler()),
            Arc::new(LocalSessionManager::default()),
            config,
        ));
        accept_until(&self.listener, shutdown, &ct, AcceptFailure::Return, |_| {
            service.clone()
        })
        .await?;
        Ok(())
    }
}

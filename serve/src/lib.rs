//! # reel-serve: the operator's console
//!
//! `reel serve --archive DIR` in the browser: the runs of an archive (newest
//! first, paged by the archive's cursor, filtered in the URL) and one run
//! (the viewer's header, anomalies, waterfall and ledgers, then its facts,
//! a page at a time, each with the `#seq-N` anchor the CLI names it by, an
//! inspector of its fields and raw JSON, a filter that hides what does not
//! match), its tape for download, and a server-sent event when the list of
//! runs changes. A run's page folds and focuses its call tree, shows its
//! lanes (progress, effects, elicitations, artifacts, teardown,
//! cancellation), copies each fact as a `reel show` command and follows a
//! run still being recorded (`/runs/ID/events`); from it: its artifacts
//! (`/runs/ID/artifacts/SEQ`), two runs compared (`/compare?a=&b=`, aligned
//! as `reel diff` aligns them), replay reports (`/reports`, with
//! [`ServeConfig::reports`]) and a proxy recording's wire view
//! (`/runs/ID/wire`).
//!
//! Read-only: the archive is opened with [`ArchiveConfig::read_only`](reel_archive::ArchiveConfig::read_only), a
//! checked scratch copy, never the store itself; when the archive changes
//! (its control record, `reel.control`, is rewritten by every writer's
//! flush) it is opened again and the pages are told ([`Console::watch`]).
//! While a recorder holds it, the pages read through the recorder's live
//! socket instead.
//!
//! ```no_run
//! # async fn doc() -> Result<(), reel_serve::ServeError> {
//! use reel_serve::{Console, ServeConfig};
//! let config = ServeConfig::new("./reel-archive".into(), "127.0.0.1:7777".parse().unwrap());
//! let listener = tokio::net::TcpListener::bind(config.listen).await?;
//! let console = Console::open(config).await?;
//! reel_serve::serve(console, listener).await
//! # }
//! ```
//!
//! # Security
//!
//! See [`security`]: loopback unless a token is given, `Host` and `Origin`
//! checked, a strict Content-Security-Policy (no inline script), every
//! recorded string escaped with the viewer's [`escape`].
//!
//! [`escape`]: reel_viewer::render::html::escape
#![warn(missing_docs)]

mod pages;
mod reports;
pub mod security;
mod source;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;

pub use security::{check_listen, gated, parse_tokens, Token};
pub use source::Console;

/// How many facts a run's page lists.
pub const FACTS_PER_PAGE: u64 = 2000;

/// What `reel serve` serves and how.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The archive directory.
    pub archive: PathBuf,
    /// The address to listen on (loopback unless a token is given).
    pub listen: SocketAddr,
    /// The secrets a client may present (bearer or cookie), each maybe
    /// limited to one tenant; at least one is required off loopback, none
    /// means no token is asked for.
    pub tokens: Vec<security::Token>,
    /// Host names (beyond the loopback ones and the listen address's IP)
    /// the `Host` and `Origin` headers may name.
    pub allowed_hosts: Vec<String>,
    /// How often the archive's control record is looked at for changes.
    pub poll: Duration,
    /// A directory of replay reports (`<tape>.report.json`, as the
    /// replayer writes them), listed at `/reports`.
    pub reports: Option<PathBuf>,
}

impl ServeConfig {
    /// Loopback defaults: no token, no other host names, polled twice a
    /// second.
    pub fn new(archive: PathBuf, listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            archive,
            listen,
            tokens: Vec::new(),
            allowed_hosts: Vec::new(),
            poll: Duration::from_millis(500),
            reports: None,
        }
    }
}

/// Why the console cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {addr} without a token: anyone who can reach that address \
         could read every run. Pass --token-file FILE (a file holding a secret of at least \
         16 characters), or listen on loopback (the default, 127.0.0.1:7777)"
    )]
    NeedsToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A token too short to be a secret.
    #[error(
        "the token is {len} characters long: use at least 16 (e.g. `openssl rand -hex 32 > FILE`)"
    )]
    WeakToken {
        /// Its length.
        len: usize,
    },
    /// The archive cannot be opened.
    #[error("{0}")]
    Archive(#[from] reel_archive::ArchiveError),
    /// Listening or serving failed.
    #[error("serving failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The console's routes, behind its security layers.
pub fn router(console: Arc<Console>) -> Router {
    let routes = Router::new()
        .route("/", get(pages::runs))
        .route("/runs/{id}", get(pages::run))
        .route("/runs/{id}/tape", get(pages::tape))
        .route("/runs/{id}/events", get(pages::run_events))
        .route("/runs/{id}/wire", get(pages::wire))
        .route("/runs/{id}/artifacts/{seq}", get(pages::artifact))
        .route("/runs/{id}/artifacts/{seq}/raw", get(pages::artifact_raw))
        .route("/compare", get(pages::compare))
        .route("/tools", get(pages::tools))
        .route("/reports", get(pages::reports))
        .route("/reports/{*name}", get(pages::report))
        .route("/events", get(pages::events))
        .route("/assets/console.js", get(pages::script))
        .route("/assets/console.css", get(pages::style))
        .route("/favicon.ico", get(pages::no_icon))
        .route("/login", get(security::login))
        .with_state(console.clone());
    security::layers(routes, console)
}

/// `listener`, each accepted socket with `TCP_NODELAY` set: a page or an
/// event written in pieces must not wait for the browser's delayed ACK
/// (Nagle's algorithm, about 40 ms a response on a kept-alive connection).
fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY on a connection: {e}");
        }
    })
}

/// Serves `console` on `listener` until the future is dropped.
pub async fn serve(
    console: Arc<Console>,
    listener: tokio::net::TcpListener,
) -> Result<(), ServeError> {
    let watcher = tokio::spawn(console.clone().watch());
    let app = router(console);
    let served = axum::serve(no_delay(listener), app).await;
    watcher.abort();
    Ok(served?)
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    /// The console's accepted sockets have `TCP_NODELAY` set (read back
    /// with getsockopt).
    #[tokio::test]
    async fn the_console_accepts_with_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::no_delay(listener);
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap());
        client.await.unwrap().unwrap();
    }
}

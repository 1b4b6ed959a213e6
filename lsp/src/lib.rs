//! # reel-lsp: the tape language server
//!
//! `reel lsp`: a language server for tape files (`*.tape.jsonl`), over
//! stdio, built with tower-lsp-server. The only crate of reel that knows
//! LSP: the viewer it reads timelines with stays pure functions of facts,
//! and embedding the renderers brings no language server nor its runtime.
//!
//! A thin shell over the pure [`Timeline`](reel_viewer::timeline::Timeline): the
//! [`document`] model keeps each open tape's lines and their parses current
//! under incremental edits, [`analysis`] answers from them, and this module
//! is the only part that speaks LSP.
//!
//! What it serves:
//!
//! - **Sync**: open, change (incremental) and close; every answer comes
//!   from the current text, also half-edited and invalid. A keystroke
//!   re-parses the lines it touches, never the whole file.
//! - **Outline** (`textDocument/documentSymbol`): the run, its calls nested
//!   by dispatch, their facts, the artifact lines.
//! - **Hover**: a fact's kind, call and tool, offset from the run's start,
//!   the call's duration, the progress display line and the payload
//!   pretty-printed, redaction markers named as such.
//! - **Diagnostics**: lines that are not valid tape lines (with the parser's
//!   column), the tape's faults ([`reel_core::tape::TapeCheck`]: what stands
//!   where, and the stream rules, as `reel import` and `verify` judge
//!   them), the timeline's anomalies, and the
//!   divergences of a replay report beside the tape (`<tape>.report.json`,
//!   see [`report`]), re-read whenever it changes on disk.
//! - **Go to definition**: `artifact.get` → its `artifact.put`; any fact of
//!   a call → its `call.started`; a child's `call.started` → its parent's.
//! - **Folding**: one range per call.
//!
//! Positions are UTF-16 (the LSP default) unless the client offers UTF-8
//! (see [`position`]). A position that is not in the document gets an
//! empty answer. A panic in an answer is caught and answered empty (and
//! logged through `tracing`; the `reel` binary prints it on stderr): the
//! server never goes down with a document.

#![warn(missing_docs)]

pub mod analysis;
pub mod document;
pub mod position;
pub mod report;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tower_lsp_server::jsonrpc::Result;
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, ClientSocket, LanguageServer, LspService, Server};

use analysis::ReportInput;
use document::Document;
use position::Encoding;
use reel_core::report::ReplayReport;
use report::{parse_report, report_path};

/// Serves the language server on standard input and output; returns when
/// the client sends `exit` (or closes standard input).
///
/// Standard input is read on a thread of its own, so that returning never
/// waits for a read that cannot be cancelled.
pub async fn serve_stdio() {
    let (mut tx, rx) = tokio::io::duplex(64 * 1024);
    let reader = std::thread::Builder::new()
        .name("reel-lsp-stdin".into())
        .spawn(move || {
            use std::io::Read as _;
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if futures::executor::block_on(tx.write_all(&buf[..n])).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
    if let Err(e) = reader {
        tracing::error!("reel lsp: cannot start the stdin reader: {e}");
        return;
    }
    serve(rx, tokio::io::stdout()).await;
}

/// Serves the language server over any byte streams (LSP base protocol:
/// `Content-Length` framed JSON-RPC); returns after `exit` or at the end
/// of `input`.
pub async fn serve<I, O>(input: I, output: O)
where
    I: AsyncRead + Unpin,
    O: AsyncWrite,
{
    let (service, socket) = service();
    serve_service(service, socket, input, output).await;
}

/// [`serve`] with a service made by [`service`] (tests keep a
/// [`Backend::probe`] of it).
///
/// Messages pass through a filter first: a frame whose body is not a
/// JSON-RPC message (broken JSON, invalid UTF-8, a lone surrogate) is
/// dropped with a `tracing` warning, where tower-lsp-server would answer it
/// with a parse error and then stop reading, ending the session.
pub async fn serve_service<I, O>(
    service: LspService<Backend>,
    socket: ClientSocket,
    input: I,
    output: O,
) where
    I: AsyncRead + Unpin,
    O: AsyncWrite,
{
    let (to_server, from_filter) = tokio::io::duplex(64 * 1024);
    let filter = std::pin::pin!(filter_frames(input, to_server));
    let server = std::pin::pin!(Server::new(from_filter, output, socket).serve(service));
    match futures::future::select(server, filter).await {
        // The server is done (exit): stop reading.
        futures::future::Either::Left(_) => {}
        // The input ended: the server reads what is left, then ends too.
        futures::future::Either::Right(((), server)) => server.await,
    }
}

/// The largest message read (a bigger `Content-Length` ends the session).
pub const MAX_MESSAGE: usize = 1 << 30;

/// Copies well-formed JSON-RPC frames from `input` to `out`, re-framed
/// with a plain `Content-Length` header; drops the others.
async fn filter_frames<I, W>(input: I, mut out: W)
where
    I: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    use tower_lsp_server::jsonrpc::{Request, Response};
    let mut r = tokio::io::BufReader::with_capacity(64 * 1024, input);
    loop {
        let mut len: Option<usize> = None;
        loop {
            let mut line = Vec::new();
            // Header lines are short; garbage without a newline is read
            // in bounded pieces.
            match (&mut r).take(8 * 1024).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            if line.is_empty() {
                if len.is_some() {
                    break;
                }
                continue;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    len = value.trim().parse().ok();
                }
            }
        }
        let len = len.unwrap_or_default();
        if len > MAX_MESSAGE {
            tracing::error!(
                "reel lsp: a message of {len} bytes is over the limit of {MAX_MESSAGE}: stopping"
            );
            return;
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).await.is_err() {
            return;
        }
        let valid = std::str::from_utf8(&body).is_ok()
            && (serde_json::from_slice::<Request>(&body).is_ok()
                || serde_json::from_slice::<Response>(&body).is_ok());
        if !valid {
            let why = serde_json::from_slice::<serde_json::Value>(&body)
                .err()
                .map_or_else(|| "not a JSON-RPC message".to_owned(), |e| e.to_string());
            tracing::warn!("reel lsp: dropped a message of {len} bytes: {why}");
            continue;
        }
        let head = format!("Content-Length: {len}\r\n\r\n");
        if out.write_all(head.as_bytes()).await.is_err() || out.write_all(&body).await.is_err() {
            return;
        }
        if out.flush().await.is_err() {
            return;
        }
    }
}

/// The service and its client socket, for [`Server`] or for driving the
/// service directly.
pub fn service() -> (LspService<Backend>, ClientSocket) {
    LspService::new(Backend::new)
}

/// The language server.
#[derive(Debug)]
pub struct Backend {
    client: Client,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    encoding: Mutex<Encoding>,
    docs: Mutex<HashMap<Uri, Open>>,
    reports: Mutex<HashMap<PathBuf, CachedReport>>,
}

#[derive(Debug)]
struct Open {
    doc: Document,
    version: i32,
}

#[derive(Debug, Clone)]
struct CachedReport {
    stamp: (Option<SystemTime>, u64),
    read: std::result::Result<ReplayReport, String>,
}

/// A read-only look at the server's state, for tests.
#[derive(Debug, Clone)]
pub struct Probe(Arc<State>);

impl Probe {
    /// How many line parses the open document `uri` has done since it was
    /// opened (`None` when it is not open).
    pub fn parsed_lines(&self, uri: &Uri) -> Option<u64> {
        lock(&self.0.docs).get(uri).map(|o| o.doc.parsed_lines())
    }

    /// How many times the document's index was built since it was opened.
    pub fn index_builds(&self, uri: &Uri) -> Option<u64> {
        lock(&self.0.docs).get(uri).map(|o| o.doc.index_builds())
    }

    /// The open document's text as the server has it.
    pub fn text(&self, uri: &Uri) -> Option<String> {
        lock(&self.0.docs).get(uri).map(|o| o.doc.text())
    }
}

// A panic while holding the lock was caught (see `guarded`); the data is
// still usable.
use reel_core::lock::lock;

/// Runs `f`, turning a panic into `T::default()` (logged through
/// `tracing`).
fn guarded<T: Default>(what: &str, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        tracing::error!("reel lsp: {what} failed (a bug in reel): answered empty");
        T::default()
    })
}

impl Backend {
    /// A server that talks to `client`.
    pub fn new(client: Client) -> Backend {
        Backend {
            client,
            state: Arc::default(),
        }
    }

    /// A look at the state, for tests.
    pub fn probe(&self) -> Probe {
        Probe(self.state.clone())
    }

    fn encoding(&self) -> Encoding {
        *lock(&self.state.encoding)
    }

    /// Runs `f` on the view of an open document.
    fn with_view<T: Default>(
        &self,
        uri: &Uri,
        what: &str,
        f: impl FnOnce(document::View<'_>, Encoding) -> T,
    ) -> T {
        let enc = self.encoding();
        guarded(what, || {
            let mut docs = lock(&self.state.docs);
            match docs.get_mut(uri) {
                Some(open) => f(open.doc.view(), enc),
                None => T::default(),
            }
        })
    }

    /// The report beside the tape at `uri`, read again when it changed.
    fn report_for(&self, uri: &Uri) -> Option<(String, CachedReport)> {
        if !uri.scheme().as_str().eq_ignore_ascii_case("file") {
            return None;
        }
        let tape = uri.to_file_path()?;
        let path = report_path(&tape);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut reports = lock(&self.state.reports);
        let Ok(meta) = std::fs::metadata(&path) else {
            reports.remove(&path);
            return None;
        };
        let stamp = (meta.modified().ok(), meta.len());
        if let Some(cached) = reports.get(&path).filter(|c| c.stamp == stamp) {
            return Some((name, cached.clone()));
        }
        let read = read_report(&path);
        let cached = CachedReport { stamp, read };
        reports.insert(path, cached.clone());
        Some((name, cached))
    }

    /// Publishes the diagnostics of `uri`; with `latest`, only if no later
    /// change was applied since (that change publishes instead).
    async fn publish(&self, uri: Uri, latest: Option<i32>) {
        let report = self.report_for(&uri);
        let input = match &report {
            None => ReportInput::None,
            Some((name, CachedReport { read: Ok(r), .. })) => ReportInput::Read { name, report: r },
            Some((name, CachedReport { read: Err(e), .. })) => {
                ReportInput::Unreadable { name, error: e }
            }
        };
        let enc = self.encoding();
        let found = guarded("diagnostics", || {
            let mut docs = lock(&self.state.docs);
            let open = docs.get_mut(&uri)?;
            if latest.is_some_and(|v| v != open.version) {
                return None;
            }
            Some((
                analysis::diagnostics(open.doc.view(), enc, input),
                open.version,
            ))
        });
        if let Some((diags, version)) = found {
            self.client
                .publish_diagnostics(uri, diags, Some(version))
                .await;
        }
    }
}

fn read_report(path: &Path) -> std::result::Result<ReplayReport, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse_report(&text)
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let offered = params
            .capabilities
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_deref());
        let enc = Encoding::negotiate(offered);
        *lock(&self.state.encoding) = enc;
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(enc.kind()),
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::INCREMENTAL),
                        save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                        ..Default::default()
                    },
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                definition_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
                ..Default::default()
            },
            server_info: Some(ServerInfo {
                name: "reel".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            offset_encoding: None,
        })
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let d = params.text_document;
        guarded("didOpen", || {
            lock(&self.state.docs).insert(
                d.uri.clone(),
                Open {
                    doc: Document::new(&d.text),
                    version: d.version,
                },
            );
        });
        self.publish(d.uri, None).await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let enc = self.encoding();
        let version = params.text_document.version;
        let known = guarded("didChange", || {
            let mut docs = lock(&self.state.docs);
            let Some(open) = docs.get_mut(&uri) else {
                return false;
            };
            for change in &params.content_changes {
                open.doc.apply_change(change.range, &change.text, enc);
            }
            open.version = version;
            true
        });
        if known {
            // Let changes already received apply first: while typing
            // outpaces the server, only the last of them builds the index
            // and publishes.
            tokio::task::yield_now().await;
            self.publish(uri, Some(version)).await;
        }
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        self.publish(params.text_document.uri, None).await;
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        let removed = guarded("didClose", || lock(&self.state.docs).remove(&uri).is_some());
        if removed {
            self.client.publish_diagnostics(uri, Vec::new(), None).await;
        }
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        Ok(
            self.with_view(&params.text_document.uri, "documentSymbol", |v, enc| {
                Some(DocumentSymbolResponse::Nested(analysis::document_symbols(
                    v, enc,
                )))
            }),
        )
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let p = params.text_document_position_params;
        Ok(self.with_view(&p.text_document.uri, "hover", |v, enc| {
            analysis::hover(v, p.position, enc)
        }))
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let p = params.text_document_position_params;
        let uri = p.text_document.uri;
        Ok(self.with_view(&uri, "definition", |v, enc| {
            let line = analysis::definition(v, p.position, enc)?;
            Some(GotoDefinitionResponse::Scalar(Location {
                uri: uri.clone(),
                range: analysis::line_range(v, line, enc),
            }))
        }))
    }

    async fn folding_range(&self, params: FoldingRangeParams) -> Result<Option<Vec<FoldingRange>>> {
        Ok(
            self.with_view(&params.text_document.uri, "foldingRange", |v, _| {
                Some(analysis::folding_ranges(v))
            }),
        )
    }
}

//! Serving reel tools over MCP.
//!
//! An [`McpHost`] holds a [`Tools`] registry and the [`Recorder`] its calls
//! are recorded into; [`McpHost::serve_stdio`], [`McpHost::serve_io`] and
//! [`McpHost::bind_http`] serve it with the official Rust SDK (`rmcp`).
//! Protocol versions 2025-11-25 (initialize handshake) and 2026-07-28 (no
//! handshake, per-request `_meta`, multi round-trip requests) are served.
//!
//! ## How MCP maps onto reel
//!
//! - `tools/list` lists every registered tool, from its
//!   [`ToolSpec`](reel::spec::ToolSpec) ([`ToolSpec::mcp_tool`](reel::spec::ToolSpec::mcp_tool):
//!   name, title, description, `inputSchema`, annotations). `outputSchema`
//!   is listed only when the spec's output schema is an object schema
//!   (MCP requires `"type": "object"`; a tool returning a string has none),
//!   and then the result also goes out as `structuredContent`. A tool
//!   registered without a spec is listed with its name, an input schema
//!   that takes any object (`{"type": "object"}`), and a description that
//!   says it has no spec.
//! - Each `tools/call` is recorded as a call outside any run (seed 000:
//!   "a call served where there is no run, as over MCP, has no run id"):
//!   [`Recorder::call_from`] with the MCP session id (streamable HTTP's
//!   `Mcp-Session-Id`; stdio has none) as the caller's session, protocol
//!   `mcp`, the client's `clientInfo` (from `initialize`, or from the
//!   request's `_meta` on 2026-07-28) and the platform detected from it
//!   ([`Platform::detect`](reel::context::Platform::detect)). A `traceparent`
//!   (and `tracestate`) in the request's `_meta` is kept as a caller label
//!   of that name, on the call's `call.started` (`outside_run.labels`).
//! - Results: a tool's value is a text content block (a string as is,
//!   anything else as JSON) plus `structuredContent` when an output schema
//!   is listed. A tool's error, and an input that fails the tool's schema or
//!   does not fit its arguments, is a result with `isError: true` (MCP
//!   2025-11-25, SEP-1303: input validation errors are tool execution
//!   errors, so the model can correct itself). An unknown tool is a
//!   JSON-RPC error, `-32602` (invalid params), as the spec's example has
//!   it; the call is still recorded (it ends with "unknown tool"). A
//!   cancelled call answers a JSON-RPC error (the client has stopped
//!   waiting for it).
//! - `ctx.progress(..)` sends `notifications/progress` with the request's
//!   `progressToken` exactly as the client sent it (string or number, `0`
//!   included), `progress`, `total` and `message` from the payload's MCP
//!   fields (a payload without a numeric `progress` sends the number of
//!   reports so far). Without a token a report is only recorded.
//! - `ctx.log(..)`, `ctx.notify(..)` send `notifications/message` with the
//!   level and the logger name (`ctx.set_logger`). On 2025-11-25 the level
//!   set by `logging/setLevel` filters them (all go out until one is set);
//!   on 2026-07-28 only a request that opts in with
//!   `io.modelcontextprotocol/logLevel` in `_meta` gets them, at or above
//!   that level. The `log` fact's `delivered` says whether it went out.
//! - `ctx.elicit(..)`: on 2025-11-25, `elicitation/create` to the client
//!   (form mode with `requestedSchema`; url mode with `url` and
//!   `elicitationId`); `accept`, `decline` and `cancel` are reel's
//!   [`ElicitOutcome`](reel::fact::ElicitOutcome)s, a transport error is
//!   outcome `error`. An accepted URL-mode question is followed by
//!   `notifications/elicitation/complete` with its `elicitationId` (the
//!   tool has what it waited for). A client that declared no elicitation capability gets
//!   no elicitor: the tool's question is refused (`elicit.refused`). On
//!   2026-07-28 the call's answer is an input-required result instead (see
//!   *Multi round-trip requests* below).
//! - `notifications/cancelled` for a request (and over streamable HTTP a
//!   closed response stream, which is the 2026-07-28 way to cancel) cancels
//!   the call's context with [`Canceller::cancel`](reel_recorder::Canceller::cancel).
//!
//! ## Multi round-trip requests (2026-07-28)
//!
//! The tool runs once, on the server, across the rounds: when it asks a
//! question, the `tools/call` is answered with `resultType:
//! "input_required"`, the question in `inputRequests`, and a
//! `requestState` that names the waiting call. The question's key in
//! `inputRequests` is its `elicitation_id` when it has one (a tool names
//! its question so), `elicit-<round>` otherwise. The client answers by
//! calling again with `inputResponses` and the state echoed; the tool gets
//! the answer and goes on. The state is sealed with the archive's keyed MAC
//! ([`reel_archive::Archive::keyed_mac`], HMAC-SHA256 under a key derived from the
//! fingerprint key) and opened only when the seal holds, names the same
//! tool, and names the round the call waits at; anything else is refused
//! with `-32602` and the waiting call is untouched. A call whose client
//! does not come back within [`McpHost::abandon_after`] is cancelled.

// MCP logging (`notifications/message`, `logging/setLevel`) is deprecated
// by SEP-2577 on 2026-07-28, and rmcp marks it so; seed 004's `notify` is
// that message, and 2025-11-25 clients rely on it.
#![allow(deprecated)]

pub(crate) mod convert;
mod elicit;
mod http;
mod notify;
mod round_trips;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reel::context::Platform;
use reel::fact::ClientInfo;
use reel::tools::Tools;
use reel_recorder::{Caller, Recorder};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, Implementation, ListToolsResult,
    LoggingLevel, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::Value;

pub use http::HttpServer;

use notify::{LogGate, Notifier};

/// Why serving stopped before the client was done.
#[derive(Debug)]
pub enum ServeError {
    /// The connection could not be set up (e.g. the client's first message
    /// was not a valid start of an MCP session).
    Init(String),
    /// Reading or writing the transport failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Init(e) => write!(f, "the MCP session did not start: {e}"),
            ServeError::Io(e) => write!(f, "the MCP transport failed: {e}"),
        }
    }
}

impl std::error::Error for ServeError {}

impl From<std::io::Error> for ServeError {
    fn from(e: std::io::Error) -> ServeError {
        ServeError::Io(e)
    }
}

/// Serves a registry of reel tools over MCP, recording each call. Cheap
/// to clone; one host serves any number of connections.
#[derive(Clone)]
pub struct McpHost {
    recorder: Recorder,
    tools: Tools,
    info: Implementation,
    instructions: Option<String>,
    abandon_after: Duration,
    suspended: round_trips::Suspended,
}

impl std::fmt::Debug for McpHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHost")
            .field("tools", &self.tools)
            .field("server", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl McpHost {
    /// A host serving `tools`, recording into `recorder`. It names itself
    /// `reel-mcp` and this crate's version until [`McpHost::server_info`].
    pub fn new(recorder: Recorder, tools: Tools) -> McpHost {
        McpHost {
            recorder,
            tools,
            info: Implementation::new("reel-mcp", env!("CARGO_PKG_VERSION")),
            instructions: None,
            abandon_after: Duration::from_secs(600),
            suspended: round_trips::Suspended::default(),
        }
    }

    /// The server's name and version, as `initialize` and
    /// `server/discover` give them.
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> McpHost {
        self.info = Implementation::new(name, version);
        self
    }

    /// Instructions for the client's model.
    pub fn instructions(mut self, text: impl Into<String>) -> McpHost {
        self.instructions = Some(text.into());
        self
    }

    /// How long a call suspended in an input-required round (2026-07-28)
    /// waits for its client to come back before it is cancelled (default
    /// ten minutes).
    pub fn abandon_after(mut self, wait: Duration) -> McpHost {
        self.abandon_after = wait;
        self
    }

    /// The registry served.
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    /// The MCP handler of one connection (what the transports serve).
    pub fn handler(&self) -> ReelServer {
        ReelServer {
            host: self.clone(),
            log_level: Arc::new(Mutex::new(None)),
        }
    }

    /// Serves one client on this process's standard input and output until
    /// the client closes it. Pipes (as a client that starts the server
    /// makes them) are driven by the reactor, with their blocking mode
    /// given back at the end ([`crate::proxy::client_stdio`]).
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let (read, write) = crate::proxy::client_stdio();
        self.serve_io(read, write).await
    }

    /// Serves one client on a byte stream pair (newline-delimited JSON-RPC,
    /// as stdio) until the client closes it.
    pub async fn serve_io<R, W>(self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        serve_until_closed(self.handler(), read, write).await
    }

    /// Binds streamable HTTP at `addr` (MCP endpoint `/mcp`); serve it with
    /// [`HttpServer::run`]. Port 0 picks a free port
    /// ([`HttpServer::local_addr`] says which).
    pub async fn bind_http(self, addr: std::net::SocketAddr) -> std::io::Result<HttpServer> {
        HttpServer::bind(self, addr).await
    }
}

/// Serves `handler` to one client on a byte stream pair until the client
/// closes it: the crate's one rmcp serve-and-wait (the MCP host, the
/// cassette server).
pub(crate) async fn serve_until_closed<H, R, W>(
    handler: H,
    read: R,
    write: W,
) -> Result<(), ServeError>
where
    H: ServerHandler,
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let running = handler
        .serve((read, write))
        .await
        .map_err(|e| ServeError::Init(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Init(e.to_string()))?;
    Ok(())
}

/// The MCP handler of one connection: [`rmcp::ServerHandler`] over an
/// [`McpHost`]. Made by [`McpHost::handler`].
#[derive(Clone)]
pub struct ReelServer {
    host: McpHost,
    /// The level `logging/setLevel` set on this connection (2025-11-25).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

use reel::lock::lock;

/// What one `tools/call` request says besides the tool and its arguments.
struct Request {
    caller: Caller,
    client: Option<ClientInfo>,
    modern: bool,
    elicitation: bool,
}

impl ReelServer {
    fn request(&self, ctx: &RequestContext<RoleServer>) -> Request {
        let mut caller = Caller::new();
        if let Some(session) = convert::session_id(ctx) {
            caller = caller.session(session);
        }
        for key in ["traceparent", "tracestate"] {
            if let Some(Value::String(v)) = ctx.meta.get(key) {
                caller = caller.label(key, v.clone());
            }
        }
        // The JSON-RPC request id, for trace tools (`jsonrpc.request.id`
        // in OpenTelemetry's MCP conventions).
        let id = match &ctx.id {
            rmcp::model::NumberOrString::Number(n) => n.to_string(),
            rmcp::model::NumberOrString::String(s) => s.to_string(),
        };
        caller = caller.label("jsonrpc.request.id", id);
        let client = ctx.client_info().map(|i| ClientInfo {
            name: i.name,
            version: Some(i.version).filter(|v| !v.is_empty()),
            title: i.title,
        });
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let elicitation = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        Request {
            caller,
            client,
            modern,
            elicitation,
        }
    }

    fn log_gate(&self, ctx: &RequestContext<RoleServer>, modern: bool) -> LogGate {
        if modern {
            match ctx.meta.log_level() {
                Some(level) => LogGate::AtLeast(level),
                None => LogGate::Closed,
            }
        } else {
            match *lock(&self.log_level) {
                Some(level) => LogGate::AtLeast(level),
                None => LogGate::Open,
            }
        }
    }

    /// A prepared call of `name` with `args` for this request.
    fn prepare(
        &self,
        request: &Request,
        name: &str,
        args: Value,
        notifier: &Arc<Notifier>,
    ) -> Result<reel_recorder::CallBuilder, ErrorData> {
        let host = &self.host;
        let mut call = host
            .recorder
            .call_from(request.caller.clone(), name, args)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .protocol("mcp")
            .platform(Platform::detect(request.client.as_ref()))
            .listener(notifier.clone())
            .progress_listener(notifier.clone())
            .dispatcher(host.tools.clone());
        if let Some(client) = &request.client {
            call = call.client_info(client.clone());
        }
        Ok(call)
    }
}

impl ServerHandler for ReelServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
        .with_server_info(self.host.info.clone());
        if let Some(text) = &self.host.instructions {
            info = info.with_instructions(text.clone());
        }
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = self
            .host
            .tools
            .names()
            .map(|name| convert::listing(name, self.host.tools.get(name).and_then(|t| t.spec())))
            .collect::<Result<_, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *lock(&self.log_level) = Some(request.level);
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let req = self.request(&context);
        let name = request.name.to_string();
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let gate = self.log_gate(&context, req.modern);
        let token = context.meta.get_progress_token();
        if req.modern {
            return round_trips::call(self, req, request, context, gate).await;
        }
        let notifier = Notifier::start(context.peer.clone(), token, gate);
        let mut call = self.prepare(&req, &name, args, &notifier)?;
        if req.elicitation {
            call = call.elicitor(Arc::new(elicit::PeerElicitor::new(context.peer.clone())));
        }
        let canceller = call.canceller();
        // The client's cancellation, watched in this task (no task of its
        // own per call): it cancels the call, which then ends as the tool
        // makes it end.
        let invoke = call.invoke_tool(&self.host.tools);
        tokio::pin!(invoke);
        let result = tokio::select! {
            biased;
            result = &mut invoke => result,
            () = context.ct.cancelled() => {
                canceller.cancel(Some(convert::CANCELLED));
                invoke.await
            }
        };
        notifier.flush().await;
        convert::response(self.host.tools.get(&name).and_then(|t| t.spec()), result)
            .map(CallToolResponse::from)
    }
}

//! The MCP rows: real processes on stdio, driven by an rmcp client.
//!
//! - `mcp-record`: `tools/call` round trips through the recording proxy
//!   (`reel mcp record -- SERVER`, the real `reel` binary when it is found,
//!   else [`proxy_main`], the library entry point the binary calls) against
//!   the same client talking to the same server spawned directly.
//! - `mcp-serve`: `tools/call`/s of [`reel_mcp::serve::McpHost`] serving
//!   the [`echo`] tool on stdio, recording every call (the recorder's
//!   defaults: call-boundary durability), against a plain rmcp server
//!   ([`Plain`]) with the same tool body and no recording.
//!
//! Both servers are modes of the `reel-bench` binary itself
//! (`reel-bench --mcp-server plain|reel`), so every side pays the same
//! process, pipe and JSON-RPC costs and the difference is reel's. The
//! client speaks 2025-11-25 (the `initialize` handshake, what MCP clients
//! ship today), lists the tools once, as a client does, and checks every
//! answer (the echoed text, `isError` unset).

use std::borrow::Cow;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reel::context::{ToolContext, ToolError};
use reel::spec::{JsonSchema, ToolSpec, ToolSpecExt};
use reel::tools::Tools;
use reel_mcp::serve::McpHost;
use reel_recorder::{Recorder, RecorderConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::{ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};

/// The one tool both servers serve.
pub const TOOL: &str = "echo";

/// The bytes of text each call sends (and gets back): a small tool call.
pub const TEXT_BYTES: usize = 256;

/// The arguments of [`TOOL`].
#[derive(Deserialize, JsonSchema)]
pub struct EchoArgs {
    /// The text to give back.
    pub text: String,
}

/// The tool body both servers run: the text back.
pub fn echo_body(args: EchoArgs) -> String {
    args.text
}

/// [`echo_body`] as a reel tool (what [`McpHost`] serves).
pub async fn echo(_ctx: ToolContext, args: EchoArgs) -> Result<String, ToolError> {
    Ok(echo_body(args))
}

/// The registry [`McpHost`] serves: [`echo`] with its spec.
pub fn tools() -> Tools {
    Tools::new().tool(ToolSpec::new::<EchoArgs, String>(TOOL), echo)
}

/// [`TOOL`]'s listing, the same for both servers (from the same spec).
fn listing() -> Result<Tool, ErrorData> {
    serde_json::from_value(ToolSpec::new::<EchoArgs, String>(TOOL).mcp_tool())
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// A plain rmcp server of [`echo_body`], recording nothing: the baseline
/// of the `mcp-serve` row, and the server behind the proxy in the
/// `mcp-record` row.
#[derive(Clone, Debug, Default)]
pub struct Plain;

impl ServerHandler for Plain {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("reel-bench-plain", env!("CARGO_PKG_VERSION")),
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![listing()?]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let args: EchoArgs = serde_json::from_value(args)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(echo_body(args))]).into())
    }
}

/// The runtime of every process of these rows: what the `reel` binary
/// runs on (multi-thread, 2 workers).
fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// `reel-bench --mcp-server plain|reel|reel-buffered [--archive DIR]`:
/// serves one client on this process's stdio until it closes standard
/// input. `reel` records into `archive` with the recorder's defaults,
/// `reel-buffered` with buffered durability.
pub fn server_main(kind: &str, archive: Option<&Path>) -> io::Result<()> {
    let rt = runtime()?;
    let served = rt.block_on(async {
        match (kind, archive) {
            ("plain", _) => {
                // The same stdio as `McpHost::serve_stdio`: pipes through
                // the reactor, so the row compares recording, not stdio.
                let running = Plain
                    .serve(reel_mcp::proxy::client_stdio())
                    .await
                    .map_err(io::Error::other)?;
                running.waiting().await.map_err(io::Error::other)?;
                Ok(())
            }
            ("reel" | "reel-buffered", Some(archive)) => {
                let config = match kind {
                    "reel" => RecorderConfig::default(),
                    _ => RecorderConfig {
                        durability: reel_recorder::Durability::Buffered,
                        ..RecorderConfig::default()
                    },
                };
                let recorder = Recorder::open(archive, config)
                    .await
                    .map_err(io::Error::other)?;
                McpHost::new(recorder.clone(), tools())
                    .server_info("reel-bench-reel", env!("CARGO_PKG_VERSION"))
                    .serve_stdio()
                    .await
                    .map_err(io::Error::other)?;
                recorder.shutdown().await.map_err(io::Error::other)
            }
            (_, None) if kind.starts_with("reel") => Err(io::Error::other(format!(
                "--mcp-server {kind} needs --archive DIR"
            ))),
            (other, _) => Err(io::Error::other(format!(
                "--mcp-server {other:?}: use plain, reel or reel-buffered"
            ))),
        }
    });
    rt.shutdown_background();
    served
}

/// `reel-bench --mcp-record ARCHIVE -- CMD ARGS...`: what `reel --archive
/// ARCHIVE mcp record -- CMD ARGS...` runs (cli/src/cmd/mcp/record.rs),
/// the same library calls on the same runtime: the proxy of the
/// `mcp-record` row when no `reel` binary is found.
pub fn proxy_main(archive: &Path, command: Vec<OsString>) -> io::Result<()> {
    let mut command = command.into_iter();
    let Some(program) = command.next() else {
        return Err(io::Error::other("--mcp-record: name the server after `--`"));
    };
    let proxy =
        reel_mcp::proxy::StdioProxy::new(program, command).exit_grace(reel_mcp::proxy::EXIT_GRACE);
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let recorder = Recorder::open(archive, reel_mcp::proxy::recorder_config())
            .await
            .map_err(io::Error::other)?;
        let (client_in, client_out) = reel_mcp::proxy::client_stdio();
        let outcome = proxy
            .run(
                Some(&recorder),
                client_in,
                client_out,
                std::future::pending(),
            )
            .await;
        recorder.shutdown().await.map_err(io::Error::other)?;
        outcome
    });
    rt.shutdown_background();
    outcome.map(drop)
}

/// `reel-bench --mcp-relay -- CMD ARGS...`: the floor of any stdio proxy,
/// for information beside the `mcp-record` row: starts the server and
/// copies bytes both ways (the client's side through
/// [`reel_mcp::proxy::client_stdio`], as the proxy has it), no parse, no
/// recording. What it costs over talking to the server directly is the
/// price of one more process in the path.
pub fn relay_main(command: Vec<OsString>) -> io::Result<()> {
    let mut command = command.into_iter();
    let Some(program) = command.next() else {
        return Err(io::Error::other("--mcp-relay: name the server after `--`"));
    };
    let rt = runtime()?;
    let relayed = rt.block_on(async {
        let mut child = tokio::process::Command::new(program)
            .args(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(mut to_server), Some(mut from_server)) =
            (child.stdin.take(), child.stdout.take())
        else {
            return Err(io::Error::other("the server's stdio is not piped"));
        };
        let (mut client_in, mut client_out) = reel_mcp::proxy::client_stdio();
        let up = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut client_in, &mut to_server).await;
        });
        let _ = tokio::io::copy(&mut from_server, &mut client_out).await;
        up.abort();
        child.wait().await.map(drop)
    });
    rt.shutdown_background();
    relayed
}

/// How the `mcp-record` row starts the recording proxy.
#[derive(Debug, Clone)]
pub enum ProxyBin {
    /// The `reel` binary: `reel --archive DIR mcp record -- SERVER`.
    Reel(PathBuf),
    /// `reel-bench --mcp-record DIR -- SERVER` ([`proxy_main`]).
    InBench,
}

/// What the rows spawn.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `reel-bench` binary (its `--mcp-server` and `--mcp-record`
    /// modes).
    pub bench: PathBuf,
    /// The proxy.
    pub proxy: ProxyBin,
    /// Where archives, the fingerprint key (`REEL_CONFIG_DIR`) and the
    /// children's standard error go.
    pub dir: PathBuf,
}

/// Which server a session talks to, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The plain server, spawned directly.
    Direct,
    /// The plain server behind the recording proxy.
    Proxied,
    /// reel's [`McpHost`], recording every call.
    Served,
    /// The plain server behind [`relay_main`] (for information).
    Relayed,
    /// The same, the recorder's durability buffered (for information: what
    /// call-boundary durability costs a served call).
    ServedBuffered,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Direct => "direct",
            Side::Proxied => "proxied",
            Side::Served => "served",
            Side::ServedBuffered => "served-buffered",
            Side::Relayed => "relayed",
        }
    }
}

/// A client connected to a server process.
pub struct Session {
    client: RunningService<RoleClient, ClientConfig>,
    child: tokio::process::Child,
    stderr: PathBuf,
    args: JsonObject,
    text: String,
}

impl Programs {
    /// The command of `side`, recording into a new archive under `dir`.
    fn command(&self, side: Side, n: usize) -> tokio::process::Command {
        let archive = self.dir.join(format!("{}-{n}", side.name()));
        let (program, mut args): (PathBuf, Vec<OsString>) = match side {
            Side::Direct => (
                self.bench.clone(),
                vec!["--mcp-server".into(), "plain".into()],
            ),
            Side::Served | Side::ServedBuffered => (
                self.bench.clone(),
                vec![
                    "--mcp-server".into(),
                    if side == Side::Served {
                        "reel"
                    } else {
                        "reel-buffered"
                    }
                    .into(),
                    "--archive".into(),
                    archive.into(),
                ],
            ),
            Side::Relayed => (self.bench.clone(), vec!["--mcp-relay".into(), "--".into()]),
            Side::Proxied => match &self.proxy {
                ProxyBin::Reel(reel) => (
                    reel.clone(),
                    vec![
                        "--archive".into(),
                        archive.into(),
                        "mcp".into(),
                        "record".into(),
                        "--".into(),
                    ],
                ),
                ProxyBin::InBench => (
                    self.bench.clone(),
                    vec!["--mcp-record".into(), archive.into(), "--".into()],
                ),
            },
        };
        if matches!(side, Side::Proxied | Side::Relayed) {
            args.extend([
                self.bench.clone().into(),
                "--mcp-server".into(),
                "plain".into(),
            ]);
        }
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .env("REEL_CONFIG_DIR", self.dir.join("config"))
            .env_remove("REEL_ARCHIVE")
            .kill_on_drop(true);
        cmd
    }

    /// Starts `side` (the `n`-th session of the bench) and connects: the
    /// `initialize` handshake and one `tools/list`, untimed.
    pub async fn connect(&self, side: Side, n: usize) -> io::Result<Session> {
        let stderr = self.dir.join(format!("{}-{n}.stderr", side.name()));
        let mut cmd = self.command(side, n);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?);
        let mut child = cmd.spawn()?;
        let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(io::Error::other("the server's stdio is not piped"));
        };
        let mut config = ClientConfig::default();
        config.protocol_version = ProtocolVersion::V_2025_11_25;
        config.client_info = Implementation::new("reel-bench", env!("CARGO_PKG_VERSION"));
        let client = config.serve((out, inp)).await.map_err(|e| {
            io::Error::other(format!(
                "the {} session did not start: {e}; {}",
                side.name(),
                tail(&stderr)
            ))
        })?;
        let listed = client
            .list_tools(None)
            .await
            .map_err(|e| io::Error::other(format!("tools/list: {e}")))?;
        if !listed.tools.iter().any(|t| t.name == TOOL) {
            return Err(io::Error::other(format!(
                "the {} server does not list {TOOL:?}",
                side.name()
            )));
        }
        let text: String = "reel-bench ".chars().cycle().take(TEXT_BYTES).collect();
        let args = match json!({ "text": text }) {
            Value::Object(m) => m,
            _ => unreachable!("an object literal"),
        };
        Ok(Session {
            client,
            child,
            stderr,
            args,
            text,
        })
    }
}

/// The last lines a child wrote on standard error, for an error message.
fn tail(stderr: &Path) -> String {
    let text = std::fs::read_to_string(stderr).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    if lines.is_empty() {
        "it wrote nothing on standard error".into()
    } else {
        format!(
            "its standard error ends: {}",
            lines.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )
    }
}

/// One `tools/call` of [`TOOL`], its answer checked.
async fn call(peer: &Peer<RoleClient>, args: &JsonObject, text: &str) -> io::Result<()> {
    let result = peer
        .call_tool(CallToolRequestParams::new(TOOL).with_arguments(args.clone()))
        .await
        .map_err(|e| io::Error::other(format!("tools/call: {e}")))?;
    let echoed = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str());
    if result.is_error == Some(true) || echoed != Some(text) {
        return Err(io::Error::other(format!(
            "tools/call answered {result:?}, not the text back"
        )));
    }
    Ok(())
}

impl Session {
    /// `n` calls one after the other, each timed from the request until
    /// its answer is in.
    pub async fn sequential(&self, n: usize) -> io::Result<Vec<Duration>> {
        let mut took = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            call(self.client.peer(), &self.args, &self.text).await?;
            took.push(t.elapsed());
        }
        Ok(took)
    }

    /// `n` calls, `inflight` of them in flight at any time (each of
    /// `inflight` tasks calls one after the other): calls per second.
    pub async fn concurrent(&self, n: usize, inflight: usize) -> io::Result<f64> {
        let inflight = inflight.clamp(1, n.max(1));
        let args = Arc::new(self.args.clone());
        let text: Arc<str> = self.text.as_str().into();
        let t = Instant::now();
        let tasks: Vec<_> = (0..inflight)
            .map(|i| {
                let peer = self.client.peer().clone();
                let (args, text) = (args.clone(), text.clone());
                let calls = n / inflight + usize::from(i < n % inflight);
                tokio::spawn(async move {
                    for _ in 0..calls {
                        call(&peer, &args, &text).await?;
                    }
                    io::Result::Ok(())
                })
            })
            .collect();
        for task in tasks {
            task.await.map_err(io::Error::other)??;
        }
        Ok(n as f64 / t.elapsed().as_secs_f64())
    }

    /// Closes the session (the server's standard input) and waits for the
    /// server (and a proxy, its server) to exit cleanly.
    pub async fn close(mut self) -> io::Result<()> {
        let _ = self.client.cancel().await;
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .map_err(|_| {
                io::Error::other("the server did not exit within 30 s of the session's end")
            })??;
        if !status.success() {
            return Err(io::Error::other(format!(
                "the server exited {status}; {}",
                tail(&self.stderr)
            )));
        }
        Ok(())
    }
}

/// The `q` quantile of `took`, in microseconds.
pub fn quantile_us(took: &[Duration], q: f64) -> f64 {
    let mut us: Vec<f64> = took.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    if us.is_empty() {
        return f64::NAN;
    }
    us[((us.len() - 1) as f64 * q).round() as usize]
}

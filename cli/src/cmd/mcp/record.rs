//! `reel mcp record -- CMD ARGS...`: a recording proxy in front of any MCP
//! server on stdio ([`reel_mcp::proxy::StdioProxy`]); `reel mcp record
//! --listen ADDR --upstream URL`: the same over streamable HTTP
//! ([`reel_mcp::proxy::HttpProxy`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel::context::Secret;
use reel::fact::RunStatus;
use reel_archive::ArchiveError;
use reel_recorder::{Recorder, RecorderError};
use reel_viewer::render::terminal::escape;

use crate::failure::{shown, Failure};

/// `reel mcp record`'s arguments.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// An environment variable whose value is secret (repeatable): the
    /// value is scrubbed from every recorded fact.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// Proxy streamable HTTP instead of stdio: listen at this address
    /// (e.g. 127.0.0.1:8765; port 0 picks one) with `--upstream`.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "upstream",
        conflicts_with = "command"
    )]
    listen: Option<std::net::SocketAddr>,
    /// The MCP server's streamable HTTP endpoint (an http:// URL) that
    /// `--listen` proxies.
    #[arg(long, value_name = "URL", requires = "listen")]
    upstream: Option<String>,
    /// With `--listen`: a host name (or address) clients may name in
    /// `Host` and `Origin`, besides localhost, 127.0.0.1 and [::1], on any
    /// port (repeatable). Any other is refused (403): a guard against DNS
    /// rebinding, a web page's script reaching the proxy through a name
    /// it controls.
    #[arg(long = "allow-host", value_name = "NAME", requires = "listen")]
    allow_host: Vec<String>,
    /// The largest message (bytes) the proxy holds in memory. On stdio, a
    /// line over it is passed through unrecorded, either way; with
    /// `--listen`, a request body over it is refused (413), and a response
    /// or event over it is passed through unrecorded.
    #[arg(long, value_name = "BYTES", default_value_t = reel_mcp::proxy::DEFAULT_MAX_BODY)]
    max_body: usize,
    /// With `--listen`: a file of the proxy's own tokens, one per line
    /// (`#` comments and blank lines skipped), each at least 16
    /// characters. Every request must then send one as `Reel-Token:
    /// TOKEN` (not in `Authorization`, which carries the upstream's own
    /// bearer token, passed through); required to listen off loopback.
    #[arg(long = "token-file", value_name = "FILE", requires = "listen")]
    token_file: Option<std::path::PathBuf>,
    /// With `--listen`: seconds a client without a session (2026-07-28,
    /// or a stateless server) may go without an exchange before its run
    /// is ended `completed`; its next exchange starts a new run.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 300.0,
        requires = "listen"
    )]
    idle_close: f64,
    /// Seconds the server may take to exit after the client hung up (its
    /// stdin closed) before it is killed.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    exit_grace: f64,
    /// The server's command and its arguments (after `--`).
    #[arg(required_unless_present = "listen", last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// The values of `--secret-env`, each named variable's. A variable that
/// is unset or empty fails closed: the session would otherwise be recorded
/// with the secret in clear should it appear, so the proxy refuses to start.
pub(crate) fn secrets(names: &[String]) -> Result<Vec<Secret>, String> {
    names
        .iter()
        .map(|name| match std::env::var(name) {
            Ok(value) if !value.is_empty() => Ok(Secret::new(value)),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(format!(
                "--secret-env {name}: the variable is not set, so its value could not be scrubbed from the record; set it (or drop the flag) and start again; nothing was started"
            )),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "--secret-env {name}: the variable's value is not UTF-8, so it could not be scrubbed from the record; nothing was started"
            )),
        })
        .collect()
}

/// Opens the archive; the traffic flows even when it cannot be, except
/// when another writer (a second `reel mcp record`) holds it: then the
/// session would silently go unrecorded, so nothing is started and reel
/// says what to do (an MCP client often hides the server's stderr, but
/// shows that it failed to start).
async fn open_recorder(dir: &Path) -> Result<Option<Recorder>, Failure> {
    match Recorder::open(dir, reel_mcp::proxy::recorder_config()).await {
        Ok(r) => Ok(Some(r)),
        Err(RecorderError::Archive(ArchiveError::Locked { .. })) => Err(Failure::msg(format!(
            "archive {} is held by another recorder (another `reel mcp record`, or a program \
             recording into it), and one archive takes one recorder at a time: this session would \
             not be recorded, so nothing was started; give each server its own archive \
             (`reel --archive DIR mcp record ...`, one DIR per server in the MCP client's \
             configuration) and read each with `reel --archive DIR runs`",
            shown(dir)
        ))),
        Err(e) => {
            eprintln!(
                "reel: the MCP session is not recorded: cannot open the archive {}: {}",
                shown(dir),
                escape(&e.to_string())
            );
            Ok(None)
        }
    }
}

async fn close_recorder(recorder: Option<Recorder>) {
    if let Some(recorder) = recorder {
        if let Err(e) = recorder.shutdown().await {
            eprintln!(
                "reel: recording the MCP session failed: {}",
                escape(&e.to_string())
            );
        }
    }
}

/// The signal that stopped the proxy (2 for Ctrl-C, 15 for SIGTERM), 0
/// while none has: a stdio session stopped so exits 128 + the signal, as
/// a shell expects of a program a signal stopped.
static STOPPED_BY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Resolves when the process is asked to stop: Ctrl-C (SIGINT) or, on
/// Unix, SIGTERM (what a service manager, `kill` or a container runtime
/// sends). Both end the proxy the same way: every run ended, the archive
/// closed. Notes which in [`STOPPED_BY`]. On Unix both handlers are in
/// place when this returns (call it within the runtime, before saying
/// where the listener listens): a signal sent as soon as that is said
/// stops it cleanly, never by the default action.
pub(super) fn interrupted() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let handlers = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        let signal = match handlers {
            (Some(mut int), Some(mut term)) => {
                tokio::select! {
                    _ = int.recv() => 2,
                    _ = term.recv() => 15,
                }
            }
            _ => {
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
                2
            }
        };
        #[cfg(not(unix))]
        let signal = {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            2
        };
        STOPPED_BY.store(signal, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A listener's tokens from `--token-file` (the proxy's, the mock's): one
/// per line; the error names the file and the line, never a secret.
pub(super) fn listener_tokens(file: &Path) -> Result<Vec<Secret>, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("--token-file {}: cannot read it: {e}", shown(file)))?;
    let mut tokens = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.split_whitespace().count() > 1 {
            return Err(format!(
                "--token-file {}: line {}: one token per line, nothing after it (these \
                 tokens are not limited to a tenant, as the console's may be)",
                shown(file),
                i + 1
            ));
        }
        tokens.push(Secret::new(line));
    }
    if tokens.is_empty() {
        return Err(format!(
            "--token-file {}: no token in it: put one secret of at least {} characters on a line",
            shown(file),
            reel_mcp::proxy::MIN_TOKEN_LEN
        ));
    }
    Ok(tokens)
}

/// `--listen ADDR --upstream URL`: serves until interrupted (Ctrl-C,
/// SIGTERM).
fn run_http(
    dir: &Path,
    listen: std::net::SocketAddr,
    upstream: &str,
    secrets: Vec<Secret>,
    args: &RecordArgs,
) -> Result<ExitCode, Failure> {
    let Ok(idle) = std::time::Duration::try_from_secs_f64(args.idle_close) else {
        return Ok(super::bad_input(&format!(
            "--idle-close {}: give a number of seconds, 0 or more",
            args.idle_close
        )));
    };
    let mut proxy = match reel_mcp::proxy::HttpProxy::new(upstream) {
        Ok(p) => p.max_body(args.max_body).idle_close(idle),
        // Bad input: exit code 64, as the other `mcp` verbs.
        Err(e) => return Ok(super::bad_input(&e)),
    };
    for name in &args.allow_host {
        proxy = match proxy.allow_host(name) {
            Ok(p) => p,
            Err(e) => return Ok(super::bad_input(&e)),
        };
    }
    for secret in secrets {
        proxy = proxy.secret(secret);
    }
    if let Some(file) = &args.token_file {
        match listener_tokens(file) {
            Ok(tokens) => {
                for token in tokens {
                    proxy = proxy.token(token);
                }
            }
            Err(e) => return Ok(super::bad_input(&e)),
        }
    }
    if let Err(e) = proxy.check_listen(listen) {
        return Ok(super::bad_input(&e));
    }
    let shown_upstream = proxy.upstream_shown();
    // The proxy's connections on one thread, as on stdio: a request's
    // hops between tasks (client connection, upstream connection, the
    // line) then cost no wakeup of another worker (the `mcp-http` bench
    // row: p50 99 -> 76 us, against 44 us for a bare relay). Recording is
    // the writer's own thread either way.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async {
        let bound = proxy
            .bind(listen)
            .await
            .map_err(|e| Failure::msg(format!("cannot listen at {listen}: {e}")))?;
        let recorder = open_recorder(dir).await?;
        let stop = interrupted();
        eprintln!(
            "reel: recording MCP traffic to {} at {} (Ctrl-C or SIGTERM stops)",
            escape(&shown_upstream),
            bound.url()
        );
        let outcome = bound.run(recorder.as_ref(), stop).await;
        close_recorder(recorder).await;
        outcome.map_err(|e| Failure::msg(format!("the MCP proxy failed: {e}")))
    })?;
    rt.shutdown_background();
    for id in &outcome.run_ids {
        eprintln!(
            "reel: recorded MCP session {} into {}",
            escape(id),
            shown(dir)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Proxies one session; exits as the server did when it failed.
pub fn run(dir: &Path, args: RecordArgs) -> Result<ExitCode, Failure> {
    let secrets = match secrets(&args.secret_env) {
        Ok(s) => s,
        Err(e) => return Ok(super::bad_input(&e)),
    };
    if let (Some(listen), Some(upstream)) = (args.listen, &args.upstream) {
        return run_http(dir, listen, upstream, secrets, &args);
    }
    let mut command = args.command.into_iter();
    let Some(program) = command.next() else {
        return Err(Failure::msg("name the server's command after `--`"));
    };
    let program_shown = program.to_string_lossy().into_owned();
    let grace = std::time::Duration::try_from_secs_f64(args.exit_grace).map_err(|_| {
        Failure::msg(format!(
            "--exit-grace {}: give a number of seconds, 0 or more",
            args.exit_grace
        ))
    })?;
    let mut proxy = reel_mcp::proxy::StdioProxy::new(program, command)
        .exit_grace(grace)
        .max_message(args.max_body);
    for secret in secrets {
        proxy = proxy.secret(secret);
    }
    // One session: its two pumps and its calls' tasks on one thread. A
    // second worker only adds wakeups between them, on the cores the
    // client and the server share (the `mcp-record` bench row).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async {
        // The traffic flows even when nothing can be recorded (but not
        // into an archive another recorder holds).
        let recorder = open_recorder(dir).await?;
        let (client_in, client_out) = reel_mcp::proxy::client_stdio();
        let outcome = proxy
            .run(recorder.as_ref(), client_in, client_out, interrupted())
            .await;
        close_recorder(recorder).await;
        Ok::<_, Failure>(outcome)
    });
    // A blocking read of standard input may still be waiting: do not wait
    // for it.
    rt.shutdown_background();
    let outcome = outcome?.map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such program".to_owned(),
            std::io::ErrorKind::PermissionDenied => "it is not executable".to_owned(),
            _ => e.to_string(),
        };
        Failure::msg(format!(
            "cannot start the MCP server {}: {why}; check the command after `--`",
            escape(&program_shown)
        ))
    })?;
    if outcome.killed {
        eprintln!(
            "reel: the MCP server had not exited {} s after the session ended (its stdin closed): killed it",
            args.exit_grace
        );
    }
    // A server that failed is said first, so that "recorded" never reads
    // as all went well.
    let code = outcome.exit.and_then(|e| e.code());
    match (code, outcome.exit) {
        (Some(code), _) if code != 0 => eprintln!(
            "reel: the MCP server {} exited with code {code}",
            escape(&program_shown)
        ),
        // Killed by reel itself when it was stopped: not the server's failure.
        (None, Some(status)) if !status.success() && outcome.status != RunStatus::Cancelled => {
            eprintln!(
                "reel: the MCP server {} ended by a signal ({status})",
                escape(&program_shown)
            )
        }
        _ => {}
    }
    if let Some(id) = &outcome.run_id {
        eprintln!(
            "reel: recorded MCP session {} ({}) into {}",
            escape(id),
            outcome.status.as_str(),
            shown(dir)
        );
    }
    Ok(match (outcome.status, code) {
        // The server's own failure is the exit code, even when the client
        // hung up first.
        (_, Some(code)) if code != 0 => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (RunStatus::Completed, _) => ExitCode::SUCCESS,
        (RunStatus::Cancelled, _) => match STOPPED_BY.load(std::sync::atomic::Ordering::SeqCst) {
            0 => ExitCode::FAILURE,
            signal => ExitCode::from(128 + signal),
        },
        _ => ExitCode::FAILURE,
    })
}

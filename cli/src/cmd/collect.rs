//! `reel collect`: an OpenTelemetry receiver (`reel_collect`) that takes
//! any agent framework's GenAI spans in as runs of the archive.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use reel_collect::{CollectConfig, CollectError, Collector};
use reel_serve::ServeError;

use crate::failure::{shown, Failure};

/// `reel collect`'s arguments.
#[derive(Args, Debug)]
pub struct CollectArgs {
    /// The address to listen on: OTLP/HTTP (`POST /v1/traces`) and
    /// OTLP/gRPC (HTTP/2 without TLS) on one port. Loopback only, unless
    /// --token-file is given (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:4318")]
    listen: SocketAddr,
    /// A file of tokens, one a line; an exporter presents one as
    /// `Authorization: Bearer TOKEN` (OTEL_EXPORTER_OTLP_HEADERS). Required
    /// to listen off loopback.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// A host name exporters may use besides the loopback names and the
    /// listen address (checked in `Host`); repeatable.
    #[arg(long = "allow-host")]
    allow_host: Vec<String>,
    /// An environment variable holding a secret value (an API key): the
    /// value is scrubbed from every run taken in, and the tripwire watches
    /// for it. Repeatable; an unset variable refuses to start.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// How long a trace is held after its root span arrived and its last
    /// span came, before it is written as a run (milliseconds).
    #[arg(long, default_value_t = 2000)]
    grace_ms: u64,
    /// The largest request body taken (bytes, a gzip body counted inflated);
    /// larger ones get 413.
    #[arg(long, default_value_t = reel_collect::DEFAULT_MAX_BODY)]
    max_body: usize,
}

/// Takes spans in until interrupted (Ctrl-C or SIGTERM), then writes what
/// is held and says what was taken in.
pub fn run(dir: &Path, args: CollectArgs) -> Result<ExitCode, Failure> {
    let tokens = super::serve::read_tokens(args.token_file.as_deref())?;
    // Refused before anything is opened or bound.
    reel_serve::check_listen(args.listen, &tokens).map_err(|e| match e {
        ServeError::NeedsToken { addr } => Failure::usage(format!(
            "reel collect: refusing to listen on {addr} without a token: anyone who can reach \
             that address could write runs into the archive. Pass --token-file FILE (a file \
             holding a secret of at least 16 characters), or listen on loopback (the default, \
             127.0.0.1:4318)"
        )),
        e => Failure::usage(format!("reel collect: {e}")),
    })?;
    let secrets = super::mcp::record::secrets(&args.secret_env)
        .map_err(|e| Failure::usage(format!("reel collect: {e}")))?;
    let config = CollectConfig {
        tokens,
        allowed_hosts: args.allow_host,
        secrets,
        grace: Duration::from_millis(args.grace_ms),
        max_body: args.max_body,
        ..CollectConfig::new(dir.to_path_buf(), args.listen)
    };
    let rt = super::runtime()?;
    let summary = rt.block_on(async move {
        let collector = Collector::open(&config).map_err(failure)?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| Failure::msg(format!("cannot listen on {}: {e}", config.listen)))?;
        let addr = listener.local_addr()?;
        // Said, not required: a closed standard output must not stop it.
        let mut out = std::io::stdout();
        let _ = writeln!(
            out,
            "reel collect: OTLP/HTTP on http://{addr}/v1/traces and OTLP/gRPC on {addr} (archive {}; Ctrl-C stops)",
            shown(dir)
        );
        let _ = out.flush();
        collector
            .serve(&config, listener, stopped())
            .await
            .map_err(failure)
    })?;
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "reel collect: {} run(s) written from {} span(s); {} retried span(s) dropped, {} late (in {} run(s) of their own), {} rejected, {} trace(s) not written",
        summary.runs, summary.spans, summary.duplicates, summary.late, summary.late_runs, summary.rejected, summary.failed
    );
    Ok(if summary.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Ctrl-C, or SIGTERM where there is one.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn failure(e: CollectError) -> Failure {
    match e {
        CollectError::Listen(e) => Failure::usage(format!("reel collect: {e}")),
        CollectError::Archive(e) => e.into(),
        e => Failure::msg(format!("reel collect: {e}")),
    }
}

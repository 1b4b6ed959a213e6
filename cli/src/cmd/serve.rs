//! `reel serve`: the operator's console (`reel_serve`) in the browser,
//! read-only over the archive.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use reel_serve::{Console, ServeConfig, ServeError};

use crate::failure::{shown, Failure};

/// `reel serve`'s arguments.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address to listen on. Loopback only, unless --token-file is
    /// given (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: SocketAddr,
    /// A file of tokens, one a line: `TOKEN`, or `TOKEN tenant=NAME` for a
    /// token that reaches only that tenant's runs. Every request presents
    /// one (as `Authorization: Bearer TOKEN`, or the cookie
    /// `/login?token=TOKEN` sets); required to listen off loopback.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// A host name the browser may use for the console besides the
    /// loopback names and the listen address (checked in `Host` and
    /// `Origin`); repeatable.
    #[arg(long = "allow-host")]
    allow_host: Vec<String>,
    /// A directory of replay reports (the `<tape>.report.json` files the
    /// replayer writes beside a tape that diverged), listed at /reports
    /// and shown beside their recordings.
    #[arg(long)]
    reports: Option<PathBuf>,
}

/// Serves the console until interrupted (Ctrl-C).
pub fn run(dir: &Path, args: ServeArgs) -> Result<ExitCode, Failure> {
    let tokens = read_tokens(args.token_file.as_deref())?;
    // Refused before anything is opened or bound.
    reel_serve::check_listen(args.listen, &tokens)
        .map_err(|e| Failure::usage(format!("reel serve: {e}")))?;
    let config = ServeConfig {
        tokens,
        allowed_hosts: args.allow_host,
        reports: args.reports,
        ..ServeConfig::new(dir.to_path_buf(), args.listen)
    };
    let rt = super::runtime()?;
    rt.block_on(async move {
        let console = Console::open(config.clone()).await.map_err(failure)?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| Failure::msg(format!("cannot listen on {}: {e}", config.listen)))?;
        let addr = listener.local_addr()?;
        // Said, not required: a closed standard output (a reader that
        // took the address and left) must not stop the console.
        let mut out = std::io::stdout();
        let _ = writeln!(
            out,
            "reel serve: http://{addr}/ (archive {}, read-only; Ctrl-C stops)",
            shown(dir)
        );
        if !config.tokens.is_empty() {
            let _ = writeln!(
                out,
                "reel serve: open http://{addr}/login?token=TOKEN once to sign this browser in"
            );
        }
        let _ = out.flush();
        tokio::select! {
            served = reel_serve::serve(console, listener) => served.map_err(failure)?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok::<_, Failure>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The tokens of `--token-file` (none without one): `reel serve`'s and
/// `reel collect`'s.
pub(crate) fn read_tokens(file: Option<&Path>) -> Result<Vec<reel_serve::Token>, Failure> {
    let Some(file) = file else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::usage(format!("cannot read the token file {}: {e}", shown(file))))?;
    let tokens = reel_serve::parse_tokens(&text)
        .map_err(|e| Failure::usage(format!("the token file {}: {e}", shown(file))))?;
    if tokens.is_empty() {
        return Err(Failure::usage(format!(
            "the token file {} holds no token: write one a line (`TOKEN` or `TOKEN tenant=NAME`)",
            shown(file)
        )));
    }
    Ok(tokens)
}

fn failure(e: ServeError) -> Failure {
    match e {
        ServeError::NeedsToken { .. } | ServeError::WeakToken { .. } => {
            Failure::usage(format!("reel serve: {e}"))
        }
        ServeError::Archive(e) => e.into(),
        e => Failure::msg(format!("reel serve: {e}")),
    }
}

//! `reel mcp record -- CMD ARGS...`: a recording proxy in front of any MCP
//! server on stdio ([`reel_mcp::proxy::StdioProxy`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel::context::Secret;
use reel::fact::RunStatus;
use reel_recorder::{Recorder, RecorderConfig};
use reel_viewer::render::terminal::escape;

use crate::failure::{shown, Failure};

/// `reel mcp record`'s arguments.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// An environment variable whose value is secret (repeatable): the
    /// value is scrubbed from every recorded fact.
    #[arg(long = "secret-env", value_name = "NAME")]
    secret_env: Vec<String>,
    /// The server's command and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Proxies one session; exits as the server did when it failed.
pub fn run(dir: &Path, args: RecordArgs) -> Result<ExitCode, Failure> {
    let mut command = args.command.into_iter();
    let Some(program) = command.next() else {
        return Err(Failure::msg("name the server's command after `--`"));
    };
    let mut proxy = reel_mcp::proxy::StdioProxy::new(program, command);
    for name in &args.secret_env {
        match std::env::var(name) {
            Ok(value) => proxy = proxy.secret(Secret::new(value)),
            Err(_) => eprintln!(
                "reel: --secret-env {}: the variable is not set (nothing to scrub)",
                escape(name)
            ),
        }
    }
    let rt = super::super::runtime()?;
    let outcome = rt.block_on(async {
        // The traffic flows even when nothing can be recorded.
        let recorder = match Recorder::open(dir, RecorderConfig::default()).await {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!(
                    "reel: the MCP session is not recorded: cannot open the archive {}: {}",
                    shown(dir),
                    escape(&e.to_string())
                );
                None
            }
        };
        let stop = async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let outcome = proxy
            .run(
                recorder.as_ref(),
                tokio::io::stdin(),
                tokio::io::stdout(),
                stop,
            )
            .await;
        if let Some(recorder) = recorder {
            if let Err(e) = recorder.shutdown().await {
                eprintln!(
                    "reel: recording the MCP session failed: {}",
                    escape(&e.to_string())
                );
            }
        }
        outcome
    });
    // A blocking read of standard input may still be waiting: do not wait
    // for it.
    rt.shutdown_background();
    let outcome = outcome.map_err(|e| Failure::msg(format!("cannot start the MCP server: {e}")))?;
    if let Some(id) = &outcome.run_id {
        eprintln!(
            "reel: recorded MCP session {} into {}",
            escape(id),
            shown(dir)
        );
    }
    Ok(
        match (outcome.status, outcome.exit.and_then(|e| e.code())) {
            (RunStatus::Completed, _) => ExitCode::SUCCESS,
            (_, Some(code)) if code != 0 => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            _ => ExitCode::FAILURE,
        },
    )
}

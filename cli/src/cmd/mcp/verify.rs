//! `reel mcp verify TAPE|RUN -- CMD ARGS...`: a recorded session's tool
//! calls re-driven against a live MCP server (see `reel_mcp::verify`).

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_mcp::cassette::Session;
use reel_viewer::render::terminal::escape;

use crate::failure::Failure;

/// `reel mcp verify`'s arguments.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// A tape file, or the id of a run in the archive.
    session: String,
    /// A field not compared, as a JSON pointer into a fact's data,
    /// optionally `KIND:` first (a result is `/outcome/result/...` of
    /// `call.ended`), as a divergence line names it; or a kind alone
    /// (`log`): its messages are not compared. Repeatable.
    #[arg(long = "ignore", value_name = "POINTER")]
    ignore: Vec<String>,
    /// The server command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Prints one line per call; 0 all matched, 1 a divergence, 64 bad input.
pub fn run(dir: &Path, args: VerifyArgs) -> Result<ExitCode, Failure> {
    let ignore = match super::ignore_rules(&args.ignore) {
        Ok(rules) => rules,
        Err(e) => return Ok(super::bad_input(&e)),
    };
    let session = match Session::load(&args.session, dir) {
        Ok(s) => s,
        Err(e) => return Ok(super::bad_input(&e.to_string())),
    };
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Failure::msg("no server command after `--`"))?;
    let report = super::super::runtime()?
        .block_on(reel_mcp::verify::verify(&session, program, rest, &ignore));
    match report {
        Err(e) => Ok(super::bad_input(&e.to_string())),
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            // One line per call, each escaped (a server's text is not
            // trusted with the terminal).
            for line in report.to_string().lines() {
                writeln!(out, "{}", escape(line))?;
            }
            Ok(if report.is_match() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

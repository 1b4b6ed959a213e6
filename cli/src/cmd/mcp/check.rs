//! `reel mcp check TAPE|RUN`: a recorded MCP session linted (see
//! `reel_mcp::check`).

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use reel_mcp::check::{check, load, Config, LoadError, DEFAULT_SLOW};
use reel_viewer::render::terminal::escape;

use crate::failure::{exit, Failure};

/// `reel mcp check`'s arguments.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// A tape file (`reel export`), or the id of a run in the archive.
    session: String,
    /// A tools/call answered later than this many milliseconds is a
    /// finding (`slow`).
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_SLOW.as_millis() as u64)]
    slow: u64,
    /// Print the findings as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Prints the findings; 0 none, 1 some, 2 a damaged tape or run, 64 no
/// session.
pub fn run(dir: &Path, args: CheckArgs) -> Result<ExitCode, Failure> {
    let loaded = load(&args.session, dir).and_then(|(tape, source)| {
        let config = Config {
            slow: Duration::from_millis(args.slow),
        };
        check(&tape, source, &config)
    });
    let report = match loaded {
        Ok(report) => report,
        Err(LoadError::NoSession(m)) => return Ok(super::bad_input(&m)),
        Err(LoadError::Damaged(m)) => return Err(Failure::damaged(m)),
        Err(LoadError::Failed(m)) => return Err(Failure::msg(m)),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        // JSON escapes every control character: safe for a terminal.
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        // A recorded line is not trusted with the terminal.
        for line in report.text().lines() {
            writeln!(out, "{}", escape(line))?;
        }
    }
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::FAILURE)
    })
}

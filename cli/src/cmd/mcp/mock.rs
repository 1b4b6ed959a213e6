//! `reel mcp mock TAPE|RUN`: a recorded MCP session served back as an MCP
//! server on stdio (see `reel_mcp::cassette`).

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use reel_mcp::cassette::{Cassette, Session};

use crate::failure::Failure;

/// `reel mcp mock`'s arguments.
#[derive(Args, Debug)]
pub struct MockArgs {
    /// A tape file, or the id of a run in the archive.
    session: String,
    /// A field not compared when matching, as a JSON pointer into a fact's
    /// data, optionally `KIND:` first (arguments are `/args/...` of
    /// `call.started`). Repeatable.
    #[arg(long = "ignore", value_name = "POINTER")]
    ignore: Vec<String>,
}

/// Serves the session until the client closes standard input.
pub fn run(dir: &Path, args: MockArgs) -> Result<ExitCode, Failure> {
    let ignore = match super::ignore_rules(&args.ignore) {
        Ok(rules) => rules,
        Err(e) => return Ok(super::bad_input(&e)),
    };
    let session = match Session::load(&args.session, dir) {
        Ok(s) => s,
        Err(e) => return Ok(super::bad_input(&e.to_string())),
    };
    let cassette = Cassette::new(session, &ignore);
    super::super::runtime()?.block_on(cassette.serve_stdio())?;
    Ok(ExitCode::SUCCESS)
}

//! `reel mcp …`: MCP traffic into and out of reel archives: a session
//! recorded through a proxy (`record`), a recorded one served back
//! (`mock`), re-driven against a live server (`verify`), linted
//! (`check`). One module per subcommand.

pub mod check;
pub mod mock;
pub mod record;
pub mod verify;

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use reel::matching::IgnoreRule;
use reel_viewer::render::terminal::escape;

use crate::failure::Failure;

/// The `reel mcp` verbs.
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Record an MCP server's session: a proxy on stdio between the client
    /// and the server it starts, or over streamable HTTP in front of a
    /// server's endpoint (--listen ADDR --upstream URL).
    ///
    /// Every message passes through unchanged; the session is one run whose
    /// tools/call requests are calls (with their progress, log,
    /// elicitation and cancellation), plus initialize and tools/list.
    /// Example: reel mcp record --secret-env GITHUB_TOKEN -- npx -y @modelcontextprotocol/server-everything
    /// Example: reel mcp record --listen 127.0.0.1:8765 --upstream http://127.0.0.1:8000/mcp
    Record(record::RecordArgs),
    /// Serve a recorded MCP session (a tape or a run) as an MCP server on
    /// stdio, or over streamable HTTP (--listen ADDR), for client tests.
    ///
    /// Calls match strictly (tool name plus arguments); a miss is a
    /// JSON-RPC error naming the closest recorded call and the first field
    /// that differs. Misses are loud: the mock exits 1 when it stops (the
    /// client hangs up, or Ctrl-C/SIGTERM with --listen) if any tools/call,
    /// resources/read or prompts/get missed, 0 otherwise; --report FILE
    /// says which tools were covered.
    /// Example: reel mcp mock session.tape.jsonl --ignore /args/request_id
    /// Example: reel mcp mock session.tape.jsonl --listen 127.0.0.1:8766
    Mock(mock::MockArgs),
    /// Re-drive a recorded session's tool calls against a live MCP server
    /// (started over stdio) and compare each answer with the record.
    ///
    /// Exits 0 when every call matched, 1 on a divergence, 64 on bad input.
    /// Example: reel mcp verify session.tape.jsonl -- python3 server.py
    Verify(verify::VerifyArgs),
    /// Lint a recorded MCP session (a tape or a run): non-JSON on the
    /// server's stdout, bad tool schemas, missing descriptions, duplicate
    /// names, requests never answered, answers nobody asked for,
    /// notifications with ids, progress after the result, results off
    /// the output schema, slow calls.
    ///
    /// Each finding names the fact and call, and what to do. Exits 0 when
    /// nothing is found, 1 on findings (for CI to gate on), 2 when the
    /// tape or run is damaged, 64 on bad input.
    /// Example: reel mcp check session.tape.jsonl --slow 2000
    /// Example: reel mcp check mcp-0123... --json
    Check(check::CheckArgs),
}

/// Runs an `mcp` verb.
pub fn run(dir: &Path, command: McpCommand) -> Result<ExitCode, Failure> {
    match command {
        McpCommand::Record(args) => record::run(dir, args),
        McpCommand::Mock(args) => mock::run(dir, args),
        McpCommand::Verify(args) => verify::run(dir, args),
        McpCommand::Check(args) => check::run(dir, args),
    }
}

/// Parses `--ignore` rules; a bad one is bad input.
fn ignore_rules(texts: &[String]) -> Result<Vec<IgnoreRule>, String> {
    texts
        .iter()
        .map(|t| reel_mcp::cassette::parse_ignore(t))
        .collect()
}

/// Bad input (a session that is no tape or run, a bad `--ignore`): said
/// on standard error, exit code 64 as for any usage error (2 is damage).
fn bad_input(message: &str) -> ExitCode {
    eprintln!("reel: {}", escape(message));
    ExitCode::from(crate::failure::exit::USAGE)
}

//! `reel mcp`: MCP traffic into and out of reel archives. One module per
//! subcommand.

pub mod record;

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;

use crate::failure::Failure;

/// `reel mcp`'s subcommands.
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Record an MCP server's session: a proxy on stdio between the client
    /// and the server it starts.
    ///
    /// Every message passes through unchanged; the session is one run whose
    /// tools/call requests are calls (with their progress, log,
    /// elicitation and cancellation), plus initialize and tools/list.
    /// Example: reel mcp record --secret-env GITHUB_TOKEN -- npx -y @modelcontextprotocol/server-everything
    Record(record::RecordArgs),
}

/// Runs one `reel mcp` subcommand.
pub fn run(dir: &Path, command: McpCommand) -> Result<ExitCode, Failure> {
    match command {
        McpCommand::Record(args) => record::run(dir, args),
    }
}

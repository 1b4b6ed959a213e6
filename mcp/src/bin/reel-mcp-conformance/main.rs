//! The official MCP conformance suite's fixture server, built on reel's
//! MCP host: the suite's fixture tools (`test_simple_text`,
//! `test_tool_with_progress`, the elicitation and input-required ones) as
//! reel tools, each call recorded into an archive.
//!
//! ```text
//! reel-mcp-conformance --archive DIR --http 127.0.0.1:0
//! node conformance server --url URL --requirements 2025-11-25
//! ```
//!
//! It prints the endpoint's URL on standard output and serves streamable
//! HTTP until standard input closes or it is interrupted.
//! `cli/tests/it/mcp_conformance.rs` runs the suite against the same tools,
//! directly and through `reel mcp record`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use reel_mcp::serve::McpHost;
use reel_recorder::{Recorder, RecorderConfig};
use tokio::io::AsyncReadExt;

mod tools;

#[derive(Parser)]
#[command(about = "The MCP conformance suite's fixture tools, served as reel tools")]
struct Args {
    /// The archive to record into.
    #[arg(long, env = "REEL_ARCHIVE")]
    archive: PathBuf,
    /// Serve streamable HTTP at this address (endpoint /mcp).
    #[arg(long, default_value = "127.0.0.1:0")]
    http: SocketAddr,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let recorder = Recorder::open(&args.archive, RecorderConfig::default()).await?;
    let host = McpHost::new(recorder.clone(), tools::tools())
        .server_info("reel-mcp-conformance", env!("CARGO_PKG_VERSION"));
    let server = host.bind_http(args.http).await?;
    println!("{}", server.url());
    server
        .run(async {
            let mut stdin = tokio::io::stdin();
            let mut sink = [0u8; 256];
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { while stdin.read(&mut sink).await.is_ok_and(|n| n > 0) {} } => {}
            }
        })
        .await?;
    recorder.shutdown().await?;
    Ok(())
}

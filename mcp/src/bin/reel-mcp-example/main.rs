//! An MCP server of reel tools that use every capability of the context,
//! recording each call into an archive.
//!
//! ```text
//! reel-mcp-example --archive DIR            # stdio
//! reel-mcp-example --archive DIR --http 127.0.0.1:8080
//! ```
//!
//! Over HTTP it prints the endpoint's URL on standard output, and serves
//! until standard input closes or it is interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use reel_mcp::serve::McpHost;
use reel_recorder::{Recorder, RecorderConfig};
use tokio::io::AsyncReadExt;

mod tools;
use tools::tools;

#[derive(Parser)]
#[command(about = "An MCP server of reel tools, recording every call")]
struct Args {
    /// The archive to record into.
    #[arg(long, env = "REEL_ARCHIVE")]
    archive: PathBuf,
    /// Serve streamable HTTP at this address (endpoint /mcp) instead of
    /// stdio.
    #[arg(long)]
    http: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let recorder = Recorder::open(&args.archive, RecorderConfig::default()).await?;
    let host = McpHost::new(recorder.clone(), tools())
        .server_info("reel-mcp-example", env!("CARGO_PKG_VERSION"));
    match args.http {
        None => host.serve_stdio().await?,
        Some(addr) => {
            let server = host.bind_http(addr).await?;
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
        }
    }
    recorder.shutdown().await?;
    Ok(())
}

//! # reel-mcp: reel over the Model Context Protocol
//!
//! [`serve`] serves a [`reel::tools::Tools`] registry to any MCP client,
//! over stdio or streamable HTTP, with the official Rust MCP SDK (`rmcp`).
//! Each `tools/call` is recorded as a call outside any run (seed 000: a
//! call served over MCP has no run id, and the archive invents none), and
//! the tool's context speaks MCP: `progress` is `notifications/progress`,
//! `log` and `notify` are `notifications/message`, `elicit` is
//! `elicitation/create` (2025-11-25) or an input-required round (MRTR,
//! 2026-07-28), and `notifications/cancelled` cancels the call.
//!
//! [`cassette`] serves a recorded MCP session back as an MCP server
//! (`reel mcp mock`), and [`verify`] re-drives its calls against a live
//! server (`reel mcp verify`); [`check`] lints it (`reel mcp check`).
//!
//! ```no_run
//! use reel::context::{ToolContext, ToolError};
//! use reel::spec::{ToolSpec, ToolSpecExt};
//! use reel::tools::Tools;
//! use reel_mcp::serve::McpHost;
//! use reel_recorder::{Recorder, RecorderConfig};
//!
//! async fn echo(ctx: ToolContext, text: String) -> Result<String, ToolError> {
//!     ctx.notify(format!("echoing {} bytes", text.len()));
//!     Ok(text)
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let recorder = Recorder::open("archive", RecorderConfig::default()).await?;
//! let tools = Tools::new().tool(ToolSpec::new::<String, String>("echo"), echo);
//! McpHost::new(recorder.clone(), tools).serve_stdio().await?;
//! recorder.shutdown().await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod accept;
pub mod cassette;
pub mod check;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gate;
pub mod outcome;
pub mod proxy;
mod refusal;
pub mod serve;
pub mod verify;

/// The book's MCP page's Rust examples, compiled as doc tests of this
/// crate (`tests/it/tidy/doc_examples.rs` at the workspace root checks every page
/// with a Rust example is compiled by some crate).
#[cfg(doctest)]
#[doc = include_str!("../../docs/src/mcp.md")]
pub struct BookMcpExamples;

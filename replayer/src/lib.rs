//! # reel-replayer: deterministic offline replay
//!
//! Re-drives recorded tool calls, offline, with a replay context that
//! serves every answer from the record (identity, credentials as stand-ins
//! carrying the recorded fingerprint, artifact bytes, elicitation answers,
//! effect results, clock, randomness, child calls) and fires cancellation
//! where it was recorded. Every fact the tool files is matched against the
//! record, in order; the [`ReplayReport`](reel::report::ReplayReport) names, per call, the first
//! divergence with a field-level diff and one readable line.
//!
//! Replay never runs an effect closure, never runs a cleanup and never reads
//! the wall clock on the tool's behalf.
//!
//! ```
//! use reel::context::{ToolContext, ToolError};
//! use reel::fact::RunStatus;
//! use reel::tools::Tools;
//! use reel_recorder::{Recorder, RecorderConfig, RunStart};
//! use reel_replayer::{replay, Recording, ReplayOptions};
//! use serde_json::json;
//!
//! async fn hop(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
//!     for i in 1..=n {
//!         ctx.progress(json!({ "message": format!("Hop {i} of {n}") }));
//!     }
//!     Ok(n)
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let recorder = Recorder::open(dir.path(), RecorderConfig::default()).await.unwrap();
//! let run = recorder.start_run(RunStart::new("r1")).await.unwrap();
//! run.call("hop", 3).invoke(hop).await.unwrap();
//! run.end(RunStatus::Completed).await.unwrap();
//! let archive = recorder.archive().clone();
//! recorder.shutdown().await.unwrap();
//!
//! let recording = Recording::from_archive(&archive, "r1").unwrap();
//! let report = replay(&recording, &Tools::new().register("hop", hop), &ReplayOptions::default()).await;
//! assert!(report.is_match(), "{report}");
//!
//! // Today's code says "Hop 1 of 3 done": the report says exactly where.
//! async fn hop_v2(ctx: ToolContext, n: u32) -> Result<u32, ToolError> {
//!     for i in 1..=n {
//!         ctx.progress(json!({ "message": format!("Hop {i} of {n} done") }));
//!     }
//!     Ok(n)
//! }
//! let report = replay(&recording, &Tools::new().register("hop", hop_v2), &ReplayOptions::default()).await;
//! assert_eq!(
//!     report.problems(),
//!     [r#"call c1 `hop`, fact 1 (seq 2), progress:/payload/message: expected "Hop 1 of 3", got "Hop 1 of 3 done""#]
//! );
//! # });
//! ```
#![warn(missing_docs)]

mod recording;
mod replay;
#[cfg(feature = "insta")]
#[doc(hidden)]
pub mod support;

pub use recording::{Head, LoadError, RecordedCall, Recording};
pub use replay::{replay, ReplayInput, ReplayOptions, TapeRecording};

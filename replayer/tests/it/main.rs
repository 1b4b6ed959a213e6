//! The replayer's integration tests: one test binary, each former
//! `tests/*.rs` file a module, so the workspace is linked once. What
//! several modules share (recording a run, a clean report, a call's
//! result) is in [`support`].
//!
//! Every test of this crate is here: none needs a process of its own.

mod cancellation;
mod demo;
mod determinism;
mod dispatch_inherit;
mod elicitation;
mod frontmcp;
mod isolation;
mod mutations;
mod offline;
mod outside_run;
mod progress_dropped;
mod proof;
mod property;
mod report_file;
mod respond;
mod seeds;
mod services;
mod spec;
mod support;
mod teardown_liveness;
mod tool_error;

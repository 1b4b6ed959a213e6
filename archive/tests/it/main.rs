//! The archive's integration tests: one test binary, each former
//! `tests/*.rs` file a module, so the workspace is linked once. What
//! several modules share is in [`support`].
//!
//! One test stays a binary of its own (`Cargo.toml` names it):
//! `tests/crash.rs`, a `harness = false` crash test that kills a child
//! writer and owns `main`. `lock` re-runs this binary for one test
//! (`--exact lock::child_opens_archive`): a second process on one archive.

mod archive_model;
mod call_ids;
mod corruption;
mod damage_sweep;
mod errors;
mod fingerprint_key;
mod format_version;
mod fuzz_seeds;
mod import_integrity;
mod lock;
mod projected;
mod salvage;
mod support;
mod views;

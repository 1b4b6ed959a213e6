//! The archive's integration tests: one test binary, each former
//! `tests/*.rs` file a module, so the workspace is linked once. What
//! several modules share is in [`support`].
//!
//! Two tests stay binaries of their own (`Cargo.toml` names them):
//! `tests/crash.rs` and `tests/journal_crash.rs`, `harness = false` crash
//! tests that kill a child writer and own `main`. `lock` re-runs this binary for one test
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
mod journal;
mod lock;
mod projected;
mod salvage;
mod sled_open;
mod summary;
mod support;
mod views;
mod wal;

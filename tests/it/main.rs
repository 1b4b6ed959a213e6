//! The `reel` package's integration tests: one test binary, each former
//! `tests/*.rs` file a module, so the workspace is linked once.
//!
//! - [`tidy`]: the rules over the workspace's own files (sizes, the key
//!   layout, prints, the allocator, the book's examples), with one walk of
//!   the tree;
//! - [`dependency_direction`]: the crate graph's rules, from `cargo
//!   metadata`;
//! - the rest test the contract: facts round-trip, redaction, the demo
//!   replayed against its snapshots.
//!
//! None needs a process of its own.

mod dependency_direction;
mod fact_roundtrip;
mod redaction;
mod replay_demo;
mod tidy;

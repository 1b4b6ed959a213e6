//! The `reel` package's integration tests: one test binary, each former
//! `tests/*.rs` file a module, so the workspace is linked once.
//!
//! - [`tidy`]: the rules over the workspace itself: the crate graph's
//!   direction (from `cargo metadata`), and, over one walk of the tree,
//!   sizes, the key layout, locks, prints, the allocator, the book's
//!   examples;
//! - the rest test the contract: facts round-trip, redaction, the demo
//!   replayed against its snapshots.
//!
//! None needs a process of its own.

mod determinism_lint;
mod fact_roundtrip;
mod redaction;
mod replay_demo;
mod tidy;

//! The recorder's integration tests: one test binary, each former
//! `tests/*.rs` file a module, so the workspace is linked once. The secret
//! canary ([`canary`]: plans, a careless tool, the scanner, every file of an
//! archive) is shared with `cli/tests/it/secret_canary_cli.rs`.
//!
//! Two tests stay binaries of their own (`Cargo.toml` names them):
//! - `tests/progress_alloc.rs` sets a counting `#[global_allocator]`, which
//!   would count every other test's allocations too;
//! - `tests/durability.rs` is a `harness = false` crash test: it kills a
//!   child writer, and owns `main`.
//!
//! `progress_storm` re-runs this binary for one test (`--exact` with the
//! module path) to read the peak memory of a process that did nothing else.

mod canary;
mod hiccup;
mod isolation;
mod known_secret;
mod listeners;
mod load;
mod progress_bound;
mod progress_order;
mod progress_storm;
mod rules;
mod secret_canary;
mod seeds;
mod store;
mod tripwire;

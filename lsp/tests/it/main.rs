//! The language server's integration tests: one test binary, one module
//! per area. Driving the server over stdio, as an editor does, is the
//! `reel` binary's test (`cli/tests/it/lsp.rs`).

mod tape_verdict;

//! reel-mcp's integration tests: one test binary, each former `tests/*.rs`
//! file a module, so the workspace is linked once. None needs a process of
//! its own; the servers under test are the crate's binaries
//! (`CARGO_BIN_EXE_*`) and the official Python SDK's client.

mod fuzz_seeds;
mod http_limits;
mod proxy_server_first;
mod python_client;
mod raw_stdio;

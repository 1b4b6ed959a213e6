//! The `reel` binary's integration tests: one test binary (a module a
//! former `tests/*.rs` file), so the workspace is linked once, not once a
//! file. What several modules share is in [`support`] (and the console's
//! browser driving in [`console`]).
//!
//! Every test of this crate is here: none needs a process of its own (no
//! `#[global_allocator]`, no `harness = false`, no process-global state).
//! Tests that start a child (the real `reel`) do so with
//! `env!("CARGO_BIN_EXE_reel")`; insta names a snapshot after its module
//! (`it__cli__runs.snap`).

mod cli;
mod collect;
mod collect_held;
mod collect_late;
mod console;
mod damage;
mod fingerprint_key_cli;
mod format_drift;
mod html;
mod live;
mod lsp;
mod mcp_agents;
mod mcp_auth;
mod mcp_cassette;
mod mcp_check;
mod mcp_conformance;
mod mcp_mock_cancel;
mod mcp_mock_http;
mod mcp_mock_rules;
mod mcp_one_archive;
mod mcp_record;
mod mcp_record_banner;
mod mcp_record_max_body;
mod mcp_record_pipe_mode;
mod mcp_record_rules;
mod mcp_secrets_wire;
mod mcp_tasks;
mod mcp_tasks_input;
mod nats_cli;
mod otlp_export;
mod outside_run_cli;
mod salvage_cli;
mod scale;
mod secret_canary_cli;
mod serve;
mod serve_a11y;
mod serve_controls;
mod serve_layout;
mod serve_run;
mod serve_table;
mod serve_tools;
mod stats_by_tool;
mod stream;
mod support;
mod templates_cli;
mod terminal_injection;
mod torn_tail;
mod tripwire_export;

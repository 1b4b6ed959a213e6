//! The demo's integration tests: one test binary, one module per area.

mod runs;

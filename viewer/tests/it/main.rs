//! The viewer's integration tests: one test binary, each former
//! `tests/*.rs` file a module. None needs a process of its own. The rules
//! over the viewer's sources (it prints nothing, it names enums by their
//! stored names) are tidy rules, in the root package's `tests/it/tidy/`.

mod diff;
mod display;
mod timeline;
mod timeline_views;

//! One module per verb. Each takes its parsed arguments and the archive
//! directory and returns the exit code (or a [`Failure`] that `main`
//! prints): 0 done, 1 a difference found (`diff`), 2 damage found (a gap
//! in a run shown, problems in `verify`), 64 a command line reel cannot use
//! (`crate::failure::exit`, the book's "Exit codes").

pub mod collect;
pub mod demo;
pub mod diff;
pub mod export;
pub mod import;
pub mod lsp;
pub mod mcp;
pub mod prune;
pub mod runs;
pub mod salvage;
pub mod serve;
pub mod show;
pub mod stats;
pub mod sync;
pub mod tail;
pub mod verify;

use std::path::Path;

use reel_archive::Archive;

use crate::failure::Failure;

/// Opens an archive that must already exist, for verbs that need the
/// archive itself (not a running recorder's socket).
pub fn open_existing(dir: &Path, verb: &str) -> Result<Archive, Failure> {
    crate::source::local(crate::source::open(dir)?, verb)
}

/// As [`open_existing`], for a verb that writes to the archive.
pub fn open_existing_to_write(dir: &Path, verb: &str) -> Result<Archive, Failure> {
    crate::source::local(crate::source::open_to_write(dir)?, verb)
}

/// The runtime of the verbs that drive async code (demo, lsp).
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

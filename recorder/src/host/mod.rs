//! The host side: [`Recorder`], [`Run`], [`CallBuilder`], and the live
//! backend that answers a tool's context, one module each:
//!
//! - `recorder`: [`Recorder`] (opening, runs, calls outside any run,
//!   flush, shutdown);
//! - `run`: [`RunStart`], [`Caller`], [`Run`] (filing facts, ending);
//! - `call`: [`CallBuilder`] (what a call gets, invoking it) and
//!   [`Canceller`];
//! - `inner`: `RecorderInner`, what every handle of one recorder shares;
//! - `teardown`: the cleanups a holder keeps and running them;
//! - `backend`: `LiveBackend`, the live answers of a call's context.

// The modules import one another only downwards, in this order (each
// may use those above it, never one below):
// teardown -> inner -> run -> backend -> call -> recorder.
mod admit;
mod backend;
mod call;
mod inner;
mod recorder;
mod run;
mod teardown;

use reel::store::StoreError;
use reel_archive::ArchiveError;

use crate::writer::WriteError;

pub use call::{CallBuilder, Canceller};
pub use recorder::Recorder;
pub use run::{Caller, Run, RunStart};

/// Errors of the host side.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// The archive failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The store recorded into failed (a store that is not the archive:
    /// the archive's own errors are [`RecorderError::Archive`]).
    #[error("the store failed: {0}")]
    Store(StoreError),
    /// The fingerprint key of [`crate::RecorderConfig::fingerprint_key`]
    /// cannot be used; the message says what to do.
    #[error("the fingerprint key cannot be used: {0}")]
    FingerprintKey(String),
    /// A run with this id exists already.
    #[error(
        "run {0:?} already exists in the archive or is being recorded: give each run a unique id"
    )]
    RunExists(String),
    /// The run has ended.
    #[error("run {0:?} has already ended: start a new run")]
    RunEnded(String),
    /// The run was started with an empty session id.
    #[error("run {0:?} not started: its session id is empty, and an empty id names no session (session-scoped cleanups would be shared by every run that passes \"\"); pass a non-empty `.session(id)`, or leave it out for a run bound to no session")]
    EmptySession(String),
    /// The writer failed; the error says how.
    #[error("the recorder's writer failed: {0}")]
    Writer(#[from] WriteError),
    /// A task the recorder ran on a blocking thread panicked.
    #[error("{what} panicked: {detail}")]
    Panicked {
        /// What the task was doing.
        what: &'static str,
        /// The panic's message.
        detail: String,
    },
    /// The writer thread could not start.
    #[error("the recorder's writer thread could not start: {0}")]
    Thread(#[from] std::io::Error),
}

impl From<StoreError> for RecorderError {
    /// The archive's errors stay [`RecorderError::Archive`], as when the
    /// recorder reads the archive directly.
    fn from(e: StoreError) -> RecorderError {
        match e {
            StoreError::Other(e) => match e.downcast::<ArchiveError>() {
                Ok(e) => RecorderError::Archive(*e),
                Err(e) => RecorderError::Store(StoreError::Other(e)),
            },
            e => RecorderError::Store(e),
        }
    }
}

use reel::lock::lock;

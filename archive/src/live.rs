//! Live inspection: how `reel` and the console read an archive that a
//! running recorder holds (sled admits one process per archive).
//!
//! The recorder listens on a Unix socket inside the archive directory
//! ([`SOCKET_NAME`], owner-only permissions). A client connects, writes one
//! [`Request`] as a JSON line, and reads [`Reply`] JSON lines until the
//! answer is complete: one line for most requests; for
//! [`Request::Facts`], one line per fact (or gap) and then [`Reply::End`].
//! All of it lives here: the message types, the server ([`LiveServer`],
//! which a recorder and `reel sync --follow` start), the one client
//! ([`Client`]) and the one reader of "the archive, or the live socket of
//! the recorder that holds it" ([`Source`]), used by the `reel` binary and
//! the console.

use serde::{Deserialize, Serialize};

use crate::{ArchiveStats, RunFilter, RunPage};
use reel_core::gap::Gap;
use reel_core::summary::Overview;
use reel_core::{Fact, RunRecord};

mod client;
mod server;
mod source;
pub use client::{Asked, Client, Item, TapeAsked};
pub use server::{Held, LiveServer};
pub use source::{Source, SourceError};

/// The socket's file name inside the archive directory.
pub const SOCKET_NAME: &str = "reel.sock";

/// A request to a live recorder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// List runs.
    Runs {
        /// The filter.
        filter: RunFilter,
    },
    /// One run's record.
    Run {
        /// The run.
        run_id: String,
    },
    /// Every run id (for suggestions).
    RunIds,
    /// A run's facts from `from` on; with `follow`, keep sending new facts
    /// as they land until the run ends.
    Facts {
        /// The run.
        run_id: String,
        /// First seq wanted.
        from: u64,
        /// Keep following.
        follow: bool,
    },
    /// Archive figures.
    Stats,
    /// The runs a filter selects merged into an overview (see
    /// [`Archive::overview`](crate::Archive::overview)).
    Overview {
        /// The filter (its limit and cursor are not used).
        filter: RunFilter,
        /// Time buckets.
        buckets: u32,
        /// Runs per state only, from the status index (see
        /// [`Archive::runs_over_time`](crate::Archive::runs_over_time)).
        #[serde(default)]
        runs_only: bool,
    },
}

/// One line of a reply.
// A reply is built for one line on the socket and serialised at once, never
// stored or queued in numbers: boxing the fact would cost an allocation per
// line for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A page of runs.
    Runs(RunPage),
    /// A run record.
    Run(RunRecord),
    /// Run ids.
    RunIds(Vec<String>),
    /// One fact.
    Fact(Fact),
    /// Facts that could not be read (a damaged block): the one gap type.
    Gap(Gap),
    /// The end of a fact stream.
    End,
    /// Archive figures.
    Stats(ArchiveStats),
    /// An overview.
    Overview(Overview),
    /// The request failed.
    Error {
        /// What happened, and what to do.
        message: String,
        /// True when the run asked for does not exist.
        unknown_run: bool,
    },
}

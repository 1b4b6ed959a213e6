//! The one reader of "the archive, or the live socket of the recorder that
//! holds it", for the `reel` binary and the console alike: sled admits one
//! process per archive, so a reader that finds the archive held asks the
//! holder through its socket, and gets the same records and the same
//! stream of facts and gaps.

use std::ops::Range;
use std::path::{Path, PathBuf};

use reel_core::codec::{FactView, ViewSink};
use reel_core::tape::Tape;
use reel_core::RunRecord;

use super::{Asked, Client, Item, TapeAsked, SOCKET_NAME};
use crate::{Archive, ArchiveConfig, ArchiveError, ArchiveStats, RunFilter, RunPage, TapeExt};

/// How long [`Source::open`] waits for the live socket of a writer that
/// has claimed the archive.
pub const LIVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where an archive is read from.
#[derive(Clone)]
pub enum Source {
    /// The archive itself, opened by this process.
    Archive(Archive),
    /// The live socket of the recorder (or other writer) that holds the
    /// archive in `dir`.
    Live {
        /// The archive directory.
        dir: PathBuf,
        /// The client of its socket.
        client: Client,
    },
}

/// Why a read through a [`Source`] failed: the archive's error, or the
/// live client's. Each caller words them for its own reader (the `reel`
/// binary says to run the command again, the console to reload the page).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading the archive failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// Asking the recorder failed.
    #[error(transparent)]
    Live(#[from] Asked),
}

impl SourceError {
    /// Whether the run asked for does not exist (either way it was read).
    pub fn is_unknown_run(&self) -> bool {
        matches!(
            self,
            SourceError::Archive(ArchiveError::UnknownRun { .. })
                | SourceError::Live(Asked::UnknownRun(_))
        )
    }
}

impl Source {
    /// Opens the archive in `dir` to read: through its live socket when a
    /// recorder answers on it (a stale socket left by a crashed recorder
    /// refuses connections), else with [`Archive::open`] and `config`.
    /// A writer that has claimed the archive ([`crate::claim`]) but serves
    /// no socket yet (it is starting, or waiting for readers to let go of
    /// the store) is waited for, up to [`LIVE_WAIT`]: a reader never opens
    /// a claimed archive, so it never holds the lock a starting recorder
    /// needs.
    ///
    /// # Errors
    /// [`Archive::open`]'s; [`ArchiveError::Locked`] when another process
    /// holds the archive and serves no live socket (the caller says what
    /// to do).
    pub fn open(dir: &Path, config: ArchiveConfig) -> Result<Source, ArchiveError> {
        let socket = dir.join(SOCKET_NAME);
        let started = std::time::Instant::now();
        loop {
            if Client::answers(&socket) {
                return Ok(Source::live(dir));
            }
            match Archive::open(dir, config.clone()) {
                Ok(a) => return Ok(Source::Archive(a)),
                // The recorder may have started serving meanwhile.
                Err(ArchiveError::Locked { .. }) if Client::answers(&socket) => {
                    return Ok(Source::live(dir))
                }
                Err(ArchiveError::Locked { .. })
                    if started.elapsed() < LIVE_WAIT && crate::claim::claimed(dir) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The live socket of the archive in `dir`, whether or not a recorder
    /// answers on it now.
    pub fn live(dir: &Path) -> Source {
        Source::Live {
            dir: dir.to_path_buf(),
            client: Client::new(dir.join(SOCKET_NAME)),
        }
    }

    /// The archive directory.
    pub fn dir(&self) -> &Path {
        match self {
            Source::Archive(a) => a.dir(),
            Source::Live { dir, .. } => dir,
        }
    }

    /// A page of runs.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<RunPage, SourceError> {
        match self {
            Source::Archive(a) => Ok(a.list_runs(filter)?),
            Source::Live { client, .. } => Ok(client.list_runs(filter)?),
        }
    }

    /// One run's record ([`SourceError::is_unknown_run`] when there is
    /// none).
    pub fn run(&self, run_id: &str) -> Result<RunRecord, SourceError> {
        match self {
            Source::Archive(a) => Ok(a.run(run_id)?),
            Source::Live { client, .. } => Ok(client.run(run_id)?),
        }
    }

    /// Every run id (those the archive cannot read left out).
    pub fn run_ids(&self) -> Result<Vec<String>, SourceError> {
        match self {
            Source::Archive(a) => Ok(a.run_ids().filter_map(Result::ok).collect()),
            Source::Live { client, .. } => Ok(client.run_ids()?),
        }
    }

    /// The overview of the runs `filter` selects, in `buckets` time
    /// buckets (see [`Archive::overview`]).
    pub fn overview(
        &self,
        filter: &RunFilter,
        buckets: u32,
    ) -> Result<reel_core::summary::Overview, SourceError> {
        match self {
            Source::Archive(a) => Ok(a.overview(filter, buckets)?),
            Source::Live { client, .. } => Ok(client.overview(filter, buckets)?),
        }
    }

    /// The runs per state over time only (see
    /// [`Archive::runs_over_time`]).
    pub fn runs_over_time(
        &self,
        filter: &RunFilter,
        buckets: u32,
    ) -> Result<reel_core::summary::Overview, SourceError> {
        match self {
            Source::Archive(a) => Ok(a.runs_over_time(filter, buckets)?),
            Source::Live { client, .. } => Ok(client.runs_over_time(filter, buckets)?),
        }
    }

    /// The archive's figures.
    pub fn stats(&self) -> Result<ArchiveStats, SourceError> {
        match self {
            Source::Archive(a) => Ok(a.stats()?),
            Source::Live { client, .. } => Ok(client.stats()?),
        }
    }

    /// A run's facts with seqs in `seqs` (`from..u64::MAX` for all from
    /// `from` on), in order, damage as an [`Item::Gap`] at its place. With
    /// `follow` (through the socket only) the stream goes on as facts land,
    /// until the run ends. Dropping the iterator closes the connection.
    pub fn facts(
        &self,
        run_id: &str,
        seqs: Range<u64>,
        follow: bool,
    ) -> Result<Box<dyn Iterator<Item = Result<Item, SourceError>> + '_>, SourceError> {
        match self {
            Source::Archive(a) => Ok(Box::new(a.facts(run_id, seqs)?.map(|item| match item {
                Ok(f) => Ok(Item::Fact(f)),
                Err(ArchiveError::Corrupt { gap, .. }) => Ok(Item::Gap(gap)),
                Err(e) => Err(e.into()),
            }))),
            Source::Live { client, .. } => {
                let until = seqs.end;
                Ok(Box::new(
                    client
                        .facts(run_id, seqs.start, follow)?
                        .map(|item| item.map_err(SourceError::from))
                        .take_while(
                            move |item| !matches!(item, Ok(Item::Fact(f)) if f.seq >= until),
                        ),
                ))
            }
        }
    }

    /// A run's facts as views into `sink`, every gap at its place: from
    /// the archive, a progress report read in place; through the socket,
    /// each fact whole. What a timeline alone is built from.
    pub fn views(&self, run_id: &str, sink: &mut dyn ViewSink) -> Result<(), SourceError> {
        match self {
            Source::Archive(a) => a.facts(run_id, ..)?.views(sink)?,
            Source::Live { client, .. } => {
                for item in client.facts(run_id, 0, false)? {
                    match item? {
                        Item::Fact(f) => sink.view(&FactView::Whole(f)),
                        Item::Gap(gap) => sink.gap(&gap),
                    }
                }
            }
        }
        Ok(())
    }

    /// An artifact's bytes (`None`: no such artifact). Through the socket
    /// they are read from their files, which are written once and never
    /// changed, so they are safe to read beside the recorder; one an older
    /// reel kept inside the store cannot be read until it stops.
    pub fn artifact(&self, digest: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        match self {
            Source::Archive(a) => a.artifact(digest),
            Source::Live { dir, .. } => crate::read_artifact_file(dir, digest),
        }
    }

    /// The run as a tape, with its artifacts. Through the socket, the
    /// record and the facts come from the recorder and the artifacts from
    /// their files ([`Client::tape`]).
    pub fn tape(&self, run_id: &str) -> Result<Tape, TapeAsked> {
        match self {
            Source::Archive(a) => Ok(Tape::export(a, run_id)?),
            Source::Live { dir, client } => client.tape(dir, run_id),
        }
    }
}

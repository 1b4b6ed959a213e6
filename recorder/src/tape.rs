//! One run recorded straight into a tape, for a test author who wants a
//! tape of their own tool without an archive to keep: the run is recorded
//! into a temporary archive, exported, and the archive removed.

use std::path::{Path, PathBuf};

use reel::fact::RunStatus;
use reel::tape::{Tape, TapeError};
use reel::RunRecord;
use reel_archive::{ArchiveError, TapeExt};

use crate::{Recorder, RecorderConfig, RecorderError, Run, RunStart};

/// Why a run could not be recorded into a tape.
#[derive(Debug, thiserror::Error)]
pub enum TapeRecordingError {
    /// The temporary archive could not be made.
    #[error("cannot make a temporary archive to record into: {0}")]
    Temporary(std::io::Error),
    /// Recording failed.
    #[error(transparent)]
    Recorder(#[from] RecorderError),
    /// Reading the run back failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The tape could not be written.
    #[error("cannot write the tape {}: {source}", path.display())]
    Write {
        /// The tape's path.
        path: PathBuf,
        /// What failed.
        source: TapeError,
    },
}

/// A run being recorded into a temporary archive, written as a tape by
/// [`TapeRecording::finish`].
///
/// ```no_run
/// # async fn doc() -> Result<(), reel_recorder::TapeRecordingError> {
/// use reel::context::{ToolContext, ToolError};
/// use reel::fact::RunStatus;
/// use reel::tools::Tools;
/// use reel_recorder::{RunStart, TapeRecording};
/// use serde_json::json;
///
/// async fn walk(ctx: ToolContext, hops: u32) -> Result<u32, ToolError> {
///     for hop in 1..=hops {
///         ctx.progress(json!({ "message": format!("Hop {hop} of {hops}") }));
///     }
///     Ok(hops)
/// }
/// let tools = Tools::new().register("walk", walk);
///
/// let recording = TapeRecording::start(RunStart::new("walk-12")).await?;
/// let _ = recording.run().call("walk", 12).invoke_tool(&tools).await;
/// recording.finish(RunStatus::Completed, "tests/tapes/walk-12.tape.jsonl").await?;
/// // assert_replays!("tests/tapes/walk-12.tape.jsonl", tools) replays it.
/// # Ok(()) }
/// ```
pub struct TapeRecording {
    recorder: Recorder,
    run: Run,
    // Dropped last: the archive lives in it.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for TapeRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapeRecording")
            .field("run", &self.run.id())
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl TapeRecording {
    /// Starts the run `start` in a fresh temporary archive, with the
    /// default configuration.
    pub async fn start(start: RunStart) -> Result<TapeRecording, TapeRecordingError> {
        TapeRecording::start_with(start, RecorderConfig::default()).await
    }

    /// Starts the run `start` in a fresh temporary archive, recorded with
    /// `config` (redaction, a fingerprint key, ...).
    pub async fn start_with(
        start: RunStart,
        config: RecorderConfig,
    ) -> Result<TapeRecording, TapeRecordingError> {
        let dir = tempfile::Builder::new()
            .prefix("reel-tape-")
            .tempdir()
            .map_err(TapeRecordingError::Temporary)?;
        let recorder = Recorder::open(dir.path().join("archive"), config).await?;
        let run = recorder.start_run(start).await?;
        Ok(TapeRecording { recorder, run, dir })
    }

    /// The run: make its calls through it ([`Run::call`]).
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// Ends the run with `status`, makes everything durable and writes the
    /// run as a tape at `path` (its folder made when missing; written
    /// whole or not at all: a temporary file beside it is renamed into
    /// place). Returns the run's record. The temporary archive is removed.
    pub async fn finish(
        self,
        status: RunStatus,
        path: impl AsRef<Path>,
    ) -> Result<RunRecord, TapeRecordingError> {
        let path = path.as_ref();
        self.run.end(status).await?;
        let archive = self.recorder.archive().clone();
        self.recorder.shutdown().await?;
        let tape = Tape::export(&archive, self.run.id())?;
        let failed = |source: TapeError| TapeRecordingError::Write {
            path: path.to_owned(),
            source,
        };
        write_whole(&tape, path).map_err(failed)?;
        Ok(tape.header.run)
    }
}

/// Writes `tape` to a temporary file beside `path`, synced, then renamed
/// over it.
fn write_whole(tape: &Tape, path: &Path) -> Result<(), TapeError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(parent)?;
    let mut file = tempfile::Builder::new()
        .prefix(".reel-tape-")
        .tempfile_in(parent)?;
    tape.write(std::io::BufWriter::new(file.as_file_mut()))?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| TapeError::Io(e.error))?;
    Ok(())
}

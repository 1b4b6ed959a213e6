//! The archive's errors.

use std::path::PathBuf;

use reel_core::gap::Gap;
use reel_core::rules::Violation;
use reel_core::run::RunState;

/// Errors of the archive. Each message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Another process holds the archive open.
    #[error(
        "archive {dir} is held open by another process (sled allows one process per archive): \
         stop that process, or read the archive through it (`reel` does this by itself when the \
         recorder serves its socket)"
    )]
    Locked {
        /// The archive directory.
        dir: PathBuf,
    },
    /// The archive's store is damaged on disk: sled cannot open or read it
    /// (a flipped byte, a truncated file). Not a version problem.
    #[error(
        "archive {dir} is damaged on disk: {detail}; nothing was changed: keep a copy of the \
         directory as it is, then recover every intact run into a fresh archive with \
         `reel salvage {dir} --into NEW`, or restore the archive from a backup"
    )]
    Damaged {
        /// The archive directory.
        dir: PathBuf,
        /// What sled reported.
        detail: String,
    },
    /// A write to an archive opened only to read
    /// ([`crate::ArchiveConfig::read_only`]).
    #[error("archive {dir} is open only to read: open it without `read_only` to write to it")]
    ReadOnly {
        /// The archive directory.
        dir: PathBuf,
    },
    /// The directory is not an archive this reel can read.
    #[error("{dir} is not a reel archive this version can read: {detail}")]
    Format {
        /// The archive directory.
        dir: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The directory holds nothing of an archive at all (a wrong path).
    #[error("{} is not a reel archive: {detail}", dir.display())]
    NotAnArchive {
        /// The directory.
        dir: PathBuf,
        /// What was looked for, and what to do.
        detail: String,
    },
    /// sled or the file system failed.
    #[error("archive {dir}: storage error: {source}")]
    Storage {
        /// The archive directory.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: sled::Error,
    },
    /// No run with this id.
    #[error("no run {run_id:?} in the archive: list runs with `reel runs`")]
    UnknownRun {
        /// The id asked for.
        run_id: String,
    },
    /// A run with this id already exists.
    #[error("run {run_id:?} already exists in the archive: run ids must be unique; import it under a new id (`reel import TAPE --as NEW-ID`) or into another archive")]
    RunExists {
        /// The id.
        run_id: String,
    },
    /// The run no longer takes facts.
    #[error("run {run_id:?} is {state}: it takes no more facts; start a new run")]
    RunClosed {
        /// The id.
        run_id: String,
        /// Its state.
        state: RunState,
    },
    /// Facts that cannot be appended as given.
    #[error("run {run_id:?}: {detail}")]
    InvalidFacts {
        /// The run.
        run_id: String,
        /// What is wrong with them.
        detail: String,
    },
    /// Facts of a run could not be read: a stored block is damaged or
    /// missing. The gap says which seqs and why; the facts around it still
    /// read.
    #[error("run {run_id:?}, seq {}..={}: stored block is damaged ({}); run `reel verify` for the whole archive", gap.first, gap.last.map(|s| s.to_string()).unwrap_or_else(|| "?".into()), gap.detail)]
    Corrupt {
        /// The run.
        run_id: String,
        /// The facts that could not be read.
        gap: Gap,
    },
    /// A run's stored record (or its run id entry) is damaged: the run is
    /// named by its id when that is known, else by its ordinal (`#7`).
    #[error("run {run}: its stored record is damaged ({detail}); run `reel verify` for the whole archive")]
    DamagedRecord {
        /// The run's id, or `#<ordinal>` when the id is unreadable.
        run: String,
        /// What is wrong.
        detail: String,
    },
    /// A listing cursor that this archive did not hand out.
    #[error(
        "cursor {cursor:?} is not one reel handed out: pass the `next` cursor of a previous page"
    )]
    BadCursor {
        /// The cursor given.
        cursor: String,
    },
    /// The archive was written by a newer reel, in a format this one does
    /// not know: nothing of it is read (its blocks would look damaged).
    #[error("archive {dir} was written by a newer reel (format {found}; this reel reads up to {supported}): upgrade reel")]
    NewerFormat {
        /// The archive directory.
        dir: PathBuf,
        /// The format it is stamped with.
        found: u32,
        /// The newest format this reel reads ([`crate::FORMAT_VERSION`]).
        supported: u32,
    },
    /// The fingerprint key given in the environment is malformed.
    #[error("archive {dir}: {detail}")]
    FingerprintKey {
        /// The archive directory.
        dir: PathBuf,
        /// What is wrong and what to do.
        detail: String,
    },
    /// A fact could not be encoded.
    #[error("run {run_id:?}: a fact could not be encoded: {detail}")]
    Encode {
        /// The run.
        run_id: String,
        /// The encoder's message.
        detail: String,
    },
    /// An import was refused: one of its facts breaks a rule of the run's
    /// fact stream (see [`reel_core::rules`]). Nothing of the import was stored.
    #[error("run {run_id:?}: fact {index} of the import breaks a stream rule: {violation}; nothing was imported: fix that fact, or export the run again")]
    ImportBreaksRule {
        /// The run.
        run_id: String,
        /// The fact's position among the facts given (0-based).
        index: usize,
        /// Which fact and which rule.
        violation: Box<Violation>,
    },
    /// An import was refused: an artifact's bytes do not match its digest.
    /// Nothing of the import was stored.
    #[error("artifact {index} of the import, {digest:?}: {detail}; nothing was imported: export the run again")]
    ImportArtifactMismatch {
        /// The artifact's position among the artifacts given (0-based).
        index: usize,
        /// The digest it was given under.
        digest: String,
        /// What is wrong.
        detail: String,
    },
}

/// Result of archive operations.
pub type Result<T, E = ArchiveError> = std::result::Result<T, E>;

impl ArchiveError {
    /// True for damage to what is stored (the store, a block, a run
    /// record), as against a refusal, a lock or a version: what `reel`
    /// reports with exit code 2.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            ArchiveError::Damaged { .. }
                | ArchiveError::Corrupt { .. }
                | ArchiveError::DamagedRecord { .. }
        )
    }

    /// The facts this error says could not be read, as the one gap type
    /// every reader shares; `None` for any other error.
    pub fn gap(&self) -> Option<&Gap> {
        match self {
            ArchiveError::Corrupt { gap, .. } => Some(gap),
            _ => None,
        }
    }
}

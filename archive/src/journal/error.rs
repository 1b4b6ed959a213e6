//! The journal's errors.

use std::io;
use std::path::{Path, PathBuf};

use super::{frame, Cut, Position};

/// The journal's errors. Each message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Acknowledged batches are missing or damaged.
    #[error(
        "journal {dir} is damaged: acknowledged batches reach journal position {acknowledged} \
         (by the archive's record, or by the journal's own later frames), but its valid part \
         ends at position {end}, at {}; nothing was changed: keep a copy of the archive \
         directory as it is, then recover every intact batch with `reel salvage`",
        cut.as_ref().map(|c| c.to_string())
            .unwrap_or_else(|| "the clean end of its last file (whole trailing batches are missing)".into())
    )]
    Damaged {
        /// The journal's directory.
        dir: PathBuf,
        /// How far acknowledged data reaches (the caller's position, or
        /// further by the journal's own frames).
        acknowledged: Position,
        /// Where the valid part ends.
        end: Position,
        /// Where and why it stops, unless at the clean end of its last file.
        cut: Option<Box<Cut>>,
    },
    /// A segment file of a newer journal format.
    #[error(
        "journal file {file} was written by a newer reel (journal format {found}; this reel reads \
         format {}): upgrade reel",
        frame::VERSION
    )]
    NewerFormat {
        /// The file.
        file: PathBuf,
        /// Its format version.
        found: u32,
    },
    /// Another process writes this journal.
    #[error(
        "journal {dir} is held by another writer process: stop it, or give this writer another \
         writer id"
    )]
    Locked {
        /// The journal's directory.
        dir: PathBuf,
    },
    /// The file system failed.
    #[error("journal {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A batch too large for one frame.
    #[error(
        "a batch of more than {} bytes is too large for one journal frame: split it",
        frame::MAX_PAYLOAD
    )]
    TooLarge,
    /// A write or sync failed earlier: the journal takes no more batches.
    #[error(
        "journal {dir} stopped after a failed write or sync ({detail}); batches not acknowledged \
         before it were not made durable: free the disk or fix the device, then reopen the \
         archive (its open recovers the journal's valid part)"
    )]
    Failed {
        /// The journal's directory.
        dir: PathBuf,
        /// The failure.
        detail: String,
    },
    /// The journal was closed.
    #[error("journal {dir} is closed: reopen the archive to write")]
    Closed {
        /// The journal's directory.
        dir: PathBuf,
    },
    /// A writer id that cannot name a directory.
    #[error("{id:?} is not a journal writer id: use 1 to 64 ASCII letters, digits, `-` or `_`")]
    WriterId {
        /// The id given.
        id: String,
    },
}

impl JournalError {
    pub(crate) fn io(path: &Path, source: io::Error) -> JournalError {
        JournalError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// True for acknowledged data missing or damaged (exit 2).
    pub fn is_damage(&self) -> bool {
        matches!(self, JournalError::Damaged { .. })
    }
}

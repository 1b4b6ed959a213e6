//! Tapes in and out of the archive. The tape format itself (lines, header,
//! `facts_sha256`) is the core's ([`reel_core::tape`]); this module moves a tape
//! between that format and a sled archive, as [`TapeExt`] methods on
//! [`Tape`], so `Tape::export(&archive, id)` and `tape.import(&archive)`
//! read as they always did once the trait is in scope.

use reel_core::fact::Fact;
use reel_core::guard::Guard;
use reel_core::run::RunRecord;
use reel_core::tape::{referenced_digests, Tape, TapeError, TapeLines};

use crate::{Archive, ArchiveError};

/// Moving tapes between the archive and the tape format.
pub trait TapeExt: Sized {
    /// Exports one stream (a run, or a call outside any run) of `archive`,
    /// with the artifacts its facts refer to.
    fn export(archive: &Archive, run_id: &str) -> Result<Tape, ArchiveError>;

    /// [`TapeExt::export`] through the tripwire ([`Guard::guard_tape`]; the
    /// host passes `reel::tripwire::Tripwire`): the values `wire` holds
    /// (the host's declared secrets, e.g. `reel export --secret-env`) are
    /// scrubbed from the tape in every encoding,
    /// each hit named by a `redaction.tripped` fact (point `tape`, rule
    /// `declared-at-export`). The tape, and how many tripped facts it gained.
    fn export_guarded(
        archive: &Archive,
        run_id: &str,
        wire: &dyn Guard,
    ) -> Result<(Tape, usize), ArchiveError>;

    /// Imports the tape into `archive`, all or nothing (see
    /// [`Archive::import_run_with_artifacts`]): the run, its facts keeping
    /// their seqs, and its artifacts. Errors name lines as [`Tape::write`]
    /// lays the tape out; [`TapeExt::import_with_lines`] names the lines it
    /// was read from.
    fn import(&self, archive: &Archive) -> Result<RunRecord, TapeError>;

    /// Imports the tape into `archive`, all or nothing. A tape that holds
    /// fewer facts than its header counts (cut short), a fact that breaks a
    /// stream rule (the checks `append` applies; see [`reel_core::rules`]) or an
    /// artifact that does not match its digest is refused with the line it
    /// is on, before anything is stored; so is a first fact naming another
    /// stream than the header, and an id the archive has already
    /// ([`ArchiveError::RunExists`], as [`TapeError::Store`]).
    fn import_with_lines(
        &self,
        archive: &Archive,
        lines: &TapeLines,
    ) -> Result<RunRecord, TapeError>;
}

impl TapeExt for Tape {
    fn export(archive: &Archive, run_id: &str) -> Result<Tape, ArchiveError> {
        let run = archive.run(run_id)?;
        let facts: Vec<Fact> = archive.facts(run_id, ..)?.collect::<Result<_, _>>()?;
        let mut artifacts = Vec::new();
        for digest in referenced_digests(&facts) {
            if let Some(bytes) = archive.artifact(&digest)? {
                artifacts.push((digest, bytes));
            }
        }
        Ok(Tape::new(run, facts, artifacts))
    }

    fn export_guarded(
        archive: &Archive,
        run_id: &str,
        wire: &dyn Guard,
    ) -> Result<(Tape, usize), ArchiveError> {
        let mut tape = Tape::export(archive, run_id)?;
        let tripped = wire.guard_tape(&mut tape, "tape", "declared-at-export");
        Ok((tape, tripped))
    }

    fn import(&self, archive: &Archive) -> Result<RunRecord, TapeError> {
        self.import_with_lines(archive, &TapeLines::written(self))
    }

    fn import_with_lines(
        &self,
        archive: &Archive,
        lines: &TapeLines,
    ) -> Result<RunRecord, TapeError> {
        self.check_whole(lines)?;
        let fact_line = |index: usize| lines.facts.get(index).copied().unwrap_or(index + 2);
        archive
            .import_run_with_artifacts(&self.facts, &self.artifacts)
            .map_err(|e| match e {
                ArchiveError::ImportBreaksRule {
                    index, violation, ..
                } => TapeError::at(
                    fact_line(index),
                    format!(
                        "{violation}; nothing was imported: fix this line, or export the run again"
                    ),
                ),
                ArchiveError::ImportArtifactMismatch {
                    index,
                    digest,
                    detail,
                } => TapeError::at(
                    lines
                        .artifacts
                        .get(index)
                        .copied()
                        .unwrap_or(self.facts.len() + 2 + index),
                    format!(
                        "artifact {digest}: {detail}; nothing was imported: export the run again"
                    ),
                ),
                other => TapeError::Store(Box::new(other)),
            })
    }
}

//! [`Access`]'s reads for the pages beyond a run's own: a whole run at
//! once (two runs compared, the wire view), an artifact through the run
//! whose fact names it, the replay reports of `--reports DIR`. Every read
//! of a run starts at the one gate, [`Access::run`]; a tenant-limited
//! grant sees only the reports of runs it reaches.

use std::path::Path;

use reel_core::fact::{ArtifactMeta, FactKind};
use reel_core::{Fact, RunRecord};

use reel_archive::live::Item;

use super::{Access, ReadError};

impl Access {
    /// A run's record and every fact, for a page that needs the whole
    /// run at once (two runs compared): a run with a gap, or of more than
    /// `limit` facts, is refused (`what` says what the page could not do).
    pub(crate) fn run_facts(
        &self,
        run_id: &str,
        limit: u64,
        what: &str,
    ) -> Result<(RunRecord, Vec<Fact>), ReadError> {
        let record = self.run(run_id)?;
        if record.facts > limit {
            return Err(ReadError::BadRequest(format!(
                "run {run_id} has {} facts, more than the console {what} at once ({limit})",
                record.facts
            )));
        }
        let mut facts = Vec::new();
        let mut gap = None;
        self.facts(&record, 0, None, |item| match item {
            Item::Fact(f) => facts.push(f),
            Item::Gap(g) => gap = gap.take().or(Some(g)),
        })?;
        match gap {
            Some(g) => Err(ReadError::BadRequest(format!(
                "run {run_id}: {g}: a run with a gap cannot be compared fact by fact                  (`reel salvage` recovers what can be read)"
            ))),
            None => Ok(((*record).clone(), facts)),
        }
    }

    /// The artifact a run's fact `seq` (`artifact.put`, or an
    /// `artifact.get` that found one) names: its ticket and, when the
    /// archive holds them, its bytes. Reached only through a run, so
    /// what may read the run may read its artifacts, and nothing else.
    pub(crate) fn artifact(
        &self,
        run_id: &str,
        seq: u64,
    ) -> Result<(ArtifactMeta, Option<Vec<u8>>), ReadError> {
        let record = self.run(run_id)?;
        let mut found = None;
        self.facts(&record, seq, Some(seq + 1), |item| {
            if let Item::Fact(f) = item {
                if f.seq == seq {
                    found = Some(f);
                }
            }
        })?;
        let meta = match found.map(|f| f.kind) {
            Some(FactKind::ArtifactPut(p)) => p.meta,
            Some(FactKind::ArtifactGet(g)) => g.meta.ok_or_else(|| {
                ReadError::UnknownRun(format!(
                    "fact #{seq} of run {run_id} asked for artifact {:?}, which the store did not have",
                    g.id
                ))
            })?,
            Some(other) => {
                return Err(ReadError::UnknownRun(format!(
                    "fact #{seq} of run {run_id} is {}, not an artifact: artifacts are                      `artifact.put` and `artifact.get` facts (see the run's artifacts lane)",
                    other.name()
                )))
            }
            None => {
                return Err(ReadError::UnknownRun(format!(
                    "run {run_id} has no fact #{seq}"
                )))
            }
        };
        // Beside a recorder, from the artifact's file.
        let bytes = self.reader.artifact(&meta.digest)?;
        Ok((meta, bytes))
    }

    /// The replay reports under `--reports DIR` (none without it); for a
    /// tenant-limited grant, only those of a run of the archive it reaches.
    pub(crate) fn reports(&self) -> Result<Vec<crate::reports::ReportFile>, ReadError> {
        let mut files = match &self.console.reports {
            None => Vec::new(),
            Some(dir) => crate::reports::list(dir).map_err(ReadError::Other)?,
        };
        if self.tenant().is_some() {
            files.retain(|f| {
                crate::reports::read(&f.path).is_ok_and(|r| self.run(&r.run_id).is_ok())
            });
        }
        Ok(files)
    }

    /// Whether `--reports DIR` was given.
    pub(crate) fn reports_dir(&self) -> Option<&Path> {
        self.console.reports.as_deref()
    }

    /// One replay report (by its name in [`Access::reports`]) and the
    /// recording it was replayed from: the tape beside it, or else the
    /// archive's run of its id, when either is there.
    pub(crate) fn report(
        &self,
        name: &str,
    ) -> Result<(reel_core::report::ReplayReport, Option<Vec<Fact>>), ReadError> {
        let files = self.reports()?;
        let file = files.iter().find(|f| f.name == name).ok_or_else(|| {
            ReadError::UnknownRun(format!(
                "no replay report {name:?} under the reports directory: see /reports for the ones there are"
            ))
        })?;
        let report = crate::reports::read(&file.path).map_err(ReadError::Other)?;
        let recorded = match crate::reports::tape_beside(&file.path) {
            Some(facts) => Some(facts),
            None => self
                .run_facts(&report.run_id, 1_000_000, "reads")
                .ok()
                .map(|(_, f)| f),
        };
        Ok((report, recorded))
    }
}

//! Figures about the whole archive.

use crate::{keys, Archive, ArchiveError, DamagedRun, Result};

/// Figures about the whole archive.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArchiveStats {
    /// Number of runs.
    pub runs: u64,
    /// Number of facts across all runs.
    pub facts: u64,
    /// Number of stored artifacts (after deduplication).
    pub artifacts: u64,
    /// Bytes the archive takes on disk.
    pub bytes_on_disk: u64,
    /// The oldest run: (id, start time).
    pub oldest: Option<(String, i64)>,
    /// The newest run: (id, start time).
    pub newest: Option<(String, i64)>,
    /// Runs whose stored record is damaged: counted in `runs`, their facts
    /// not in `facts` (the record holds the count). `reel verify` says more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<DamagedRun>,
    /// The write-ahead journal of the process that writes the archive
    /// (this one, or the recorder whose socket answered): its unapplied
    /// bytes and the appends that waited for the checkpointer. `None` for
    /// an archive no process writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<crate::JournalFigures>,
}

impl Archive {
    /// The bytes of the artifact files (see `files`): their lengths.
    fn artifact_bytes_on_disk(&self) -> u64 {
        crate::files::Files::list(self.inner.files.root())
            .iter()
            .filter_map(|(_, path)| std::fs::metadata(path).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Figures about the archive.
    pub fn stats(&self) -> Result<ArchiveStats> {
        let t = self.trees();
        let s = |e| self.storage(e);
        let mut facts = 0;
        let mut runs = 0;
        let mut damaged = Vec::new();
        for item in t.runs.iter() {
            let (key, _) = item.map_err(s)?;
            runs += 1;
            let Some(ordinal) = keys::ordinal_from(&key) else {
                damaged.push(DamagedRun {
                    ordinal: None,
                    detail: "a run record has a damaged key".into(),
                });
                continue;
            };
            match self.record_by_ordinal(ordinal) {
                Ok(Some(r)) => facts += r.facts,
                Ok(None) => {}
                Err(ArchiveError::DamagedRecord { detail, .. }) => damaged.push(DamagedRun {
                    ordinal: Some(ordinal),
                    detail,
                }),
                Err(e) => return Err(e),
            }
        }
        let end = |item: Option<sled::Result<(sled::IVec, sled::IVec)>>| -> Result<Option<(String, i64)>> {
            let Some(item) = item else { return Ok(None) };
            let (key, _) = item.map_err(s)?;
            let Some((at, ord)) = keys::split_index_tail(&key) else {
                return Ok(None);
            };
            Ok(self
                .record_by_ordinal(ord)
                .ok()
                .flatten()
                .map(|r| (r.run_id, at)))
        };
        Ok(ArchiveStats {
            runs,
            facts,
            artifacts: (t.artifacts.len() + t.artifact_files.len()) as u64,
            bytes_on_disk: self.db().size_on_disk().map_err(s)? + self.artifact_bytes_on_disk(),
            oldest: end(t.by_time.iter().next())?,
            newest: end(t.by_time.iter().next_back())?,
            damaged,
            journal: self.journal_figures(),
        })
    }
}

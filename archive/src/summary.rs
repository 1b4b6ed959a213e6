//! Run summaries (format 6) and the overview merged from them.
//!
//! **When a summary is written:** by the append whose block ends the run
//! (`run.ended`, or a call outside any run ending), in the same journal
//! frame as that block and the closed record (see `write`), so a crash
//! keeps both or neither; by recovery on open, for the runs it marks
//! incomplete (once the archive is stamped format 6); never by a reader.
//! **Runs without one** (running runs, runs an older reel or a crash
//! before this reel left, imported and salvaged runs) are summarized from
//! their facts each time an overview needs them, and counted as such
//! ([`Overview::from_facts`]): a reader (the console, `reel stats` beside
//! a recorder) cannot store what it computes.

use reel_core::run::RunRecord;
use reel_core::summary::{Overview, OverviewQuery, RunSummary, SummaryBuilder};

use crate::keys::{self, Listing};
use crate::record::decode_summary;
use crate::{Archive, Result, RunFilter};

impl Archive {
    /// The stored summary of the run with ordinal `ordinal`, if it has a
    /// readable one.
    fn stored_summary(&self, ordinal: u64) -> Result<Option<RunSummary>> {
        let t = self.trees();
        Ok(t.summaries
            .get(keys::run_key(ordinal))
            .map_err(|e| self.storage(e))?
            .and_then(|bytes| decode_summary(&bytes).ok()))
    }

    /// A run's summary from its facts (a damaged block's facts are left
    /// out).
    pub(crate) fn summarize(&self, record: &RunRecord) -> Result<RunSummary> {
        let mut builder = SummaryBuilder::default();
        for fact in self.facts(&record.run_id, ..)?.flatten() {
            builder.observe(&fact);
        }
        Ok(builder.finish(record))
    }

    /// The summary of `run_id`: the stored one, or one from its facts.
    pub fn run_summary(&self, run_id: &str) -> Result<RunSummary> {
        let record = self.run(run_id)?;
        if record.state.is_closed() {
            if let Some(stored) = self.stored_summary(self.ordinal(run_id)?)? {
                return Ok(stored);
            }
        }
        self.summarize(&record)
    }

    /// The runs `filter` selects (its tenant, tool, status and start-time
    /// range; not its limit or cursor) merged into an [`Overview`] of
    /// `buckets` time buckets over `since..until`. Reads the index and
    /// each run's stored summary; only runs without one are read from
    /// their facts.
    pub fn overview(&self, filter: &RunFilter, buckets: u32) -> Result<Overview> {
        let t = self.trees();
        let (tree, listing) = if let Some(tenant) = &filter.tenant {
            (&t.by_tenant, Listing::Tenant(tenant))
        } else if let Some(tool) = &filter.tool {
            (&t.by_tool, Listing::Tool(tool))
        } else if let Some(status) = filter.status {
            (&t.by_status, Listing::Status(status))
        } else {
            (&t.by_time, Listing::Time)
        };
        let query = OverviewQuery {
            since: filter.since,
            until: filter.until,
            buckets,
        };
        let mut runs = Vec::new();
        let (mut from_facts, mut unreadable) = (0, 0);
        if let Some(range) = listing.range(filter.since, filter.until, None) {
            for item in tree.range(range) {
                let (key, _) = item.map_err(|e| self.storage(e))?;
                let Some((_, ordinal)) = keys::split_index_tail(&key) else {
                    continue;
                };
                let summary = match self.stored_summary(ordinal)? {
                    Some(summary) => summary,
                    None => match self.summary_from_facts(ordinal) {
                        Ok(Some(summary)) => {
                            from_facts += 1;
                            summary
                        }
                        // An index entry of no run: `verify` reports it.
                        Ok(None) => continue,
                        Err(_) => {
                            unreadable += 1;
                            continue;
                        }
                    },
                };
                if selects(filter, &summary) {
                    runs.push(summary);
                }
            }
        }
        let mut overview = Overview::build(&query, &runs);
        overview.from_facts = from_facts;
        overview.unreadable = unreadable;
        Ok(overview)
    }

    /// The summary of the run with ordinal `ordinal` from its facts
    /// (`None`: no such run).
    fn summary_from_facts(&self, ordinal: u64) -> Result<Option<RunSummary>> {
        match self.record_by_ordinal(ordinal)? {
            None => Ok(None),
            Some(record) => self.summarize(&record).map(Some),
        }
    }
}

/// Whether `filter` selects the run of `summary` (the index chose by one
/// filter; the others are checked here).
fn selects(filter: &RunFilter, s: &RunSummary) -> bool {
    filter
        .tenant
        .as_deref()
        .is_none_or(|t| s.tenant.as_deref() == Some(t))
        && filter.tool.as_ref().is_none_or(|t| s.tools.contains_key(t))
        && filter.status.is_none_or(|st| s.state == st)
        && filter.since.is_none_or(|at| s.started_at >= at)
        && filter.until.is_none_or(|at| s.started_at < at)
}

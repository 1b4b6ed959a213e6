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

use reel_core::run::{RunRecord, RunState};
use reel_core::summary::{Overview, RunSummary, SummaryBuilder};

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
        // The runs the index selects, by ordinal, and their first and
        // last start (the window, unless the filter bounds it).
        let mut wanted = Vec::new();
        let (mut first, mut last) = (i64::MAX, i64::MIN);
        if let Some(range) = listing.range(filter.since, filter.until, None) {
            for item in tree.range(range).keys() {
                let key = item.map_err(|e| self.storage(e))?;
                if let Some((started, ordinal)) = keys::split_index_tail(&key) {
                    wanted.push(ordinal);
                    (first, last) = (first.min(started), last.max(started));
                }
            }
        }
        let mut overview = window(filter, buckets, (first, last));
        wanted.sort_unstable();
        wanted.dedup();
        let found = self.stored_summaries(filter, &wanted, &mut overview)?;
        for (&ordinal, _) in wanted.iter().zip(&found).filter(|(_, f)| !**f) {
            match self.summary_from_facts(ordinal) {
                Ok(Some(summary)) => {
                    overview.from_facts += 1;
                    if selects(filter, &summary) {
                        overview.add(&summary);
                    }
                }
                // An index entry of no run: `verify` reports it.
                Ok(None) => {}
                Err(_) => overview.unreadable += 1,
            }
        }
        Ok(overview)
    }

    /// The runs per state over time only (an [`Overview`] without tools),
    /// counted from the status index's keys alone: no record, summary or
    /// fact is read, nothing held per run (what a runs table's chart
    /// needs on every view). A tenant or tool filter takes
    /// [`Archive::overview`]'s way.
    pub fn runs_over_time(&self, filter: &RunFilter, buckets: u32) -> Result<Overview> {
        if filter.tenant.is_some() || filter.tool.is_some() {
            let mut o = self.overview(filter, buckets)?;
            o.tools.clear();
            return Ok(o);
        }
        let t = self.trees();
        let states = match filter.status {
            Some(state) => vec![state],
            None => RunState::ALL.to_vec(),
        };
        let ranges: Vec<_> = states
            .iter()
            .filter_map(|&s| {
                Some((
                    s,
                    Listing::Status(s).range(filter.since, filter.until, None)?,
                ))
            })
            .collect();
        // The first and last start: each state's first and last key.
        let (mut first, mut last) = (i64::MAX, i64::MIN);
        let start = |key: Option<sled::Result<sled::IVec>>| -> Result<Option<i64>> {
            Ok(match key.transpose().map_err(|e| self.storage(e))? {
                Some(k) => keys::split_index_tail(&k).map(|(at, _)| at),
                None => None,
            })
        };
        for (_, range) in &ranges {
            if let Some(at) = start(t.by_status.range(range.clone()).keys().next())? {
                first = first.min(at);
            }
            // A fresh iterator: one entry is both the first and the last.
            if let Some(at) = start(t.by_status.range(range.clone()).keys().next_back())? {
                last = last.max(at);
            }
        }
        let mut overview = window(filter, buckets, (first, last));
        for (state, range) in ranges {
            for item in t.by_status.range(range).keys() {
                let key = item.map_err(|e| self.storage(e))?;
                if let Some((at, _)) = keys::split_index_tail(&key) {
                    overview.add_run(at, state);
                }
            }
        }
        Ok(overview)
    }

    /// The stored summaries of the runs `wanted` (sorted ordinals) that
    /// `filter` selects, read in one pass over the summaries' key range
    /// (ordinals follow creation, so this is about the window), and which
    /// of `wanted` had one.
    fn stored_summaries(
        &self,
        filter: &RunFilter,
        wanted: &[u64],
        overview: &mut Overview,
    ) -> Result<Vec<bool>> {
        let mut found = vec![false; wanted.len()];
        let (Some(&low), Some(&high)) = (wanted.first(), wanted.last()) else {
            return Ok(found);
        };
        let t = self.trees();
        for item in t.summaries.range(keys::runs_range(low, high)) {
            let (key, value) = item.map_err(|e| self.storage(e))?;
            let Some(i) = keys::ordinal_from(&key).and_then(|o| wanted.binary_search(&o).ok())
            else {
                continue;
            };
            // A damaged summary: the run is read from its facts.
            if let Ok(summary) = decode_summary(&value) {
                found[i] = true;
                if selects(filter, &summary) {
                    overview.add(&summary);
                }
            }
        }
        Ok(found)
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

/// The overview's empty window: the filter's bounds, or from the first
/// start to just after the last (`(i64::MAX, i64::MIN)`: no run).
fn window(filter: &RunFilter, buckets: u32, (first, last): (i64, i64)) -> Overview {
    let (first, last) = if first > last { (0, 0) } else { (first, last) };
    let since = filter.since.unwrap_or(first);
    let until = filter.until.unwrap_or(last.saturating_add(1));
    Overview::window(since, until, buckets)
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

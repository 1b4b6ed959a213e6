//! Listing runs with filters, answered from the index trees.

use serde::{Deserialize, Serialize};

use crate::keys::{ListCursor, Listing};
use crate::{Archive, ArchiveError, Result};
use reel_core::run::{RunRecord, RunState};

/// Which runs to list. All filters combine with AND; runs come newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFilter {
    /// Only runs whose caller identity names this tenant.
    pub tenant: Option<String>,
    /// Only runs that called this tool.
    pub tool: Option<String>,
    /// Only runs in this state.
    pub status: Option<RunState>,
    /// Only runs started at or after this time (unix nanos).
    pub since: Option<i64>,
    /// Only runs started before this time (unix nanos).
    pub until: Option<i64>,
    /// At most this many runs; `None` or 0 means 100.
    pub limit: Option<usize>,
    /// Continue after the last run of a previous page.
    pub cursor: Option<Cursor>,
}

/// Where the next page of a listing starts (opaque; pass it back as given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cursor(pub String);

/// A run whose stored record is damaged: a listing or the archive's
/// figures name it instead of leaving it out silently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedRun {
    /// The run's ordinal (its place in the archive), when its key reads.
    pub ordinal: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

/// One page of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// Set when more runs match: pass it as [`RunFilter::cursor`].
    pub next: Option<Cursor>,
    /// Runs the scanned index points at whose stored record is damaged
    /// (they cannot be filtered, so they are named here, not listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<DamagedRun>,
}

impl Archive {
    /// Lists runs matching `filter`, newest first. The most selective index
    /// (tenant, then tool, then status, then start time) drives the scan; the
    /// start-time range bounds it; other filters are checked on run records.
    /// Facts are never read.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<RunPage> {
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
        let limit = match filter.limit {
            None | Some(0) => 100,
            Some(n) => n,
        };
        let cursor = match &filter.cursor {
            None => None,
            Some(cursor) => {
                Some(
                    ListCursor::decode(&cursor.0).ok_or_else(|| ArchiveError::BadCursor {
                        cursor: cursor.0.clone(),
                    })?,
                )
            }
        };
        let mut runs = Vec::new();
        let mut next = None;
        let mut last = None;
        let mut damaged = Vec::new();
        let Some(range) = listing.range(filter.since, filter.until, cursor.as_ref()) else {
            return Ok(RunPage {
                runs,
                next,
                damaged,
            });
        };
        for item in tree.range(range).rev() {
            let (key, _) = item.map_err(|e| self.storage(e))?;
            let Some((started, ordinal)) = crate::keys::split_index_tail(&key) else {
                continue;
            };
            let record = match self.record_by_ordinal(ordinal) {
                Ok(Some(record)) => record,
                // An index entry of no run: `verify` reports it.
                Ok(None) => continue,
                Err(ArchiveError::DamagedRecord { detail, .. }) => {
                    damaged.push(DamagedRun {
                        ordinal: Some(ordinal),
                        detail,
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !matches(filter, &record) {
                continue;
            }
            if runs.len() == limit {
                next = last.map(|(started, ordinal)| Cursor(ListCursor::encode(started, ordinal)));
                break;
            }
            runs.push(record);
            last = Some((started, ordinal));
        }
        Ok(RunPage {
            runs,
            next,
            damaged,
        })
    }
}

/// Whether `r` is one of the runs `filter` selects (its limit and cursor
/// aside).
pub(crate) fn matches(filter: &RunFilter, r: &RunRecord) -> bool {
    filter
        .tenant
        .as_deref()
        .is_none_or(|t| r.tenant() == Some(t))
        && filter.tool.as_ref().is_none_or(|t| r.tools.contains(t))
        && filter.status.is_none_or(|s| r.state == s)
        && filter.since.is_none_or(|s| r.started_at >= s)
        && filter.until.is_none_or(|u| r.started_at < u)
}

impl Archive {
    /// How many runs are in each state, in [`RunState::ALL`]'s order,
    /// counted from the status index's keys (no record is read: cheap
    /// enough for a console's header on every new copy of the archive).
    pub fn count_by_status(&self) -> Result<Vec<(RunState, u64)>> {
        let t = self.trees();
        RunState::ALL
            .iter()
            .map(|&state| {
                let mut n = 0;
                if let Some(range) = Listing::Status(state).range(None, None, None) {
                    for item in t.by_status.range(range) {
                        item.map_err(|e| self.storage(e))?;
                        n += 1;
                    }
                }
                Ok((state, n))
            })
            .collect()
    }
}

//! Listing runs with filters, answered from the index trees.

use serde::{Deserialize, Serialize};

use super::{keys, Archive, ArchiveError, Result};
use reel::run::{RunRecord, RunState};

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

impl Cursor {
    fn new(started: i64, ordinal: u64) -> Cursor {
        Cursor(format!(
            "{}{}",
            hex::encode(keys::time_bytes(started)),
            hex::encode(ordinal.to_be_bytes())
        ))
    }

    fn decode(&self) -> Option<[u8; 16]> {
        let mut out = [0u8; 16];
        hex::decode_to_slice(&self.0, &mut out).ok()?;
        Some(out)
    }
}

/// One page of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// Set when more runs match: pass it as [`RunFilter::cursor`].
    pub next: Option<Cursor>,
}

impl Archive {
    /// Lists runs matching `filter`, newest first. The most selective index
    /// (tenant, then tool, then status, then start time) drives the scan; the
    /// start-time range bounds it; other filters are checked on run records.
    /// Facts are never read.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<RunPage> {
        let t = self.trees();
        let (tree, prefix) = if let Some(tenant) = &filter.tenant {
            (&t.by_tenant, keys::name_prefix(tenant))
        } else if let Some(tool) = &filter.tool {
            (&t.by_tool, keys::name_prefix(tool))
        } else if let Some(status) = filter.status {
            (&t.by_status, vec![keys::state_byte(status)])
        } else {
            (&t.by_time, Vec::new())
        };
        let limit = match filter.limit {
            None | Some(0) => 100,
            Some(n) => n,
        };
        let mut lo = prefix.clone();
        lo.extend_from_slice(&keys::time_bytes(filter.since.unwrap_or(i64::MIN)));
        let mut hi = prefix.clone();
        match filter.until {
            Some(until) => hi.extend_from_slice(&keys::time_bytes(until)),
            None => hi.extend_from_slice(&[0xff; 17]),
        }
        if let Some(cursor) = &filter.cursor {
            let c = cursor.decode().ok_or_else(|| ArchiveError::InvalidFacts {
                run_id: String::new(),
                detail: format!("cursor {:?} is not one reel handed out: pass the `next` cursor of a previous page", cursor.0),
            })?;
            let mut at = prefix.clone();
            at.extend_from_slice(&c);
            if at < hi {
                hi = at;
            }
        }
        let mut runs = Vec::new();
        let mut next = None;
        let mut last = None;
        if lo >= hi {
            return Ok(RunPage { runs, next });
        }
        for item in tree.range(lo..hi).rev() {
            let (key, _) = item.map_err(|e| self.storage(e))?;
            let Some((started, ordinal)) = keys::split_index_tail(&key) else {
                continue;
            };
            let Ok(Some(record)) = self.record_by_ordinal(ordinal) else {
                continue;
            };
            if !matches(filter, &record) {
                continue;
            }
            if runs.len() == limit {
                next = last.map(|(started, ordinal)| Cursor::new(started, ordinal));
                break;
            }
            runs.push(record);
            last = Some((started, ordinal));
        }
        Ok(RunPage { runs, next })
    }
}

fn matches(filter: &RunFilter, r: &RunRecord) -> bool {
    filter
        .tenant
        .as_deref()
        .is_none_or(|t| r.tenant() == Some(t))
        && filter.tool.as_ref().is_none_or(|t| r.tools.contains(t))
        && filter.status.is_none_or(|s| r.state == s)
        && filter.since.is_none_or(|s| r.started_at >= s)
        && filter.until.is_none_or(|u| r.started_at < u)
}

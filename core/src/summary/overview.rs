//! Summaries merged over a time window: the runs per state, and per tool
//! the figures of every run in the window, each also per time bucket
//! (for charts over time).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{RunSummary, ToolSummary};
use crate::run::RunState;

/// Which runs an overview covers and how finely it cuts time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverviewQuery {
    /// Runs started at or after this time (unix nanos); `None`: from the
    /// first run found.
    pub since: Option<i64>,
    /// Runs started before this time (unix nanos); `None`: up to the last
    /// run found.
    pub until: Option<i64>,
    /// Time buckets (0: 24).
    pub buckets: u32,
}

/// One tool over the window: the whole, and per time bucket.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOverview {
    /// Every call of the window.
    pub total: ToolSummary,
    /// The calls of runs started in each bucket.
    pub buckets: Vec<ToolSummary>,
}

/// Summaries merged over a time window (see the module's docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// The window's start (unix nanos).
    pub since: i64,
    /// The window's end (unix nanos, excluded).
    pub until: i64,
    /// Each bucket's width.
    pub bucket_ns: u64,
    /// Runs in the window.
    pub runs: u64,
    /// Runs per state.
    pub by_state: BTreeMap<RunState, u64>,
    /// Runs per state in each bucket.
    pub run_buckets: Vec<BTreeMap<RunState, u64>>,
    /// Per tool name.
    pub tools: BTreeMap<String, ToolOverview>,
    /// Runs with no stored summary, summarized from their facts for this
    /// overview (running runs, and runs a writer did not summarize: older
    /// archives, crashes, imports).
    #[serde(default)]
    pub from_facts: u64,
    /// Runs left out because their facts could not be read.
    #[serde(default)]
    pub unreadable: u64,
}

impl Overview {
    /// Merges `runs` (those started inside the window only) over the
    /// window `query` asks for (by default from the first run's start to
    /// just after the last's).
    pub fn build(query: &OverviewQuery, runs: &[RunSummary]) -> Overview {
        let starts = runs.iter().map(|r| r.started_at);
        let since = query
            .since
            .unwrap_or_else(|| starts.clone().min().unwrap_or(0));
        let until = query
            .until
            .unwrap_or_else(|| starts.max().map_or(since + 1, |t| t.saturating_add(1)));
        let mut out = Overview::window(since, until, query.buckets);
        for run in runs {
            out.add(run);
        }
        out
    }

    /// An empty overview of `since..until` in `buckets` buckets (0: 24),
    /// to [`Overview::add`] runs to one at a time.
    pub fn window(since: i64, until: i64, buckets: u32) -> Overview {
        let until = until.max(since.saturating_add(1));
        let n = if buckets == 0 { 24 } else { buckets } as usize;
        let span = (until as i128 - since as i128) as u128;
        let bucket_ns = span.div_ceil(n as u128).max(1) as u64;
        Overview {
            since,
            until,
            bucket_ns,
            run_buckets: vec![BTreeMap::new(); n],
            ..Overview::default()
        }
    }

    /// The bucket of a run started at `at`, if inside the window.
    fn bucket(&self, at: i64) -> Option<usize> {
        if at < self.since || at >= self.until {
            return None;
        }
        let b = (at as i128 - self.since as i128) as u128 / self.bucket_ns as u128;
        Some((b as usize).min(self.run_buckets.len().saturating_sub(1)))
    }

    /// Counts a run in state `state` started at `at` (nothing outside the
    /// window), without tools.
    pub fn add_run(&mut self, at: i64, state: RunState) {
        let Some(b) = self.bucket(at) else { return };
        self.runs += 1;
        *self.by_state.entry(state).or_default() += 1;
        *self.run_buckets[b].entry(state).or_default() += 1;
    }

    /// Merges one run's summary in (nothing outside the window).
    pub fn add(&mut self, run: &RunSummary) {
        let Some(b) = self.bucket(run.started_at) else {
            return;
        };
        self.add_run(run.started_at, run.state);
        let n = self.run_buckets.len();
        for (name, figures) in &run.tools {
            let tool = match self.tools.get_mut(name) {
                Some(t) => t,
                None => self
                    .tools
                    .entry(name.clone())
                    .or_insert_with(|| ToolOverview {
                        total: ToolSummary::default(),
                        buckets: vec![ToolSummary::default(); n],
                    }),
            };
            tool.total.merge(figures);
            tool.buckets[b].merge(figures);
        }
    }

    /// The start of bucket `i` (unix nanos).
    pub fn bucket_start(&self, i: usize) -> i64 {
        self.since
            .saturating_add((self.bucket_ns as i64).saturating_mul(i as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(at: i64, state: RunState, tool: &str, ms: &[u64], errors: u64) -> RunSummary {
        let mut t = ToolSummary {
            calls: ms.len() as u64,
            errors,
            ..ToolSummary::default()
        };
        ms.iter().for_each(|m| t.durations.record(m * 1_000_000));
        RunSummary {
            started_at: at,
            duration_ns: Some(1),
            state,
            tenant: None,
            tools: [(tool.to_owned(), t)].into(),
        }
    }

    #[test]
    fn runs_fall_in_their_buckets_and_tools_merge() {
        let runs = [
            run(0, RunState::Completed, "a", &[1, 2], 0),
            run(5, RunState::Failed, "a", &[3], 1),
            run(9, RunState::Completed, "b", &[4], 0),
            run(10, RunState::Completed, "b", &[4], 0),
        ];
        let o = Overview::build(
            &OverviewQuery {
                since: Some(0),
                until: Some(10),
                buckets: 2,
            },
            &runs,
        );
        assert_eq!((o.runs, o.bucket_ns), (3, 5));
        assert_eq!(o.by_state[&RunState::Completed], 2);
        assert_eq!(o.run_buckets[0][&RunState::Completed], 1);
        assert_eq!(o.run_buckets[1][&RunState::Failed], 1);
        let a = &o.tools["a"];
        assert_eq!((a.total.calls, a.total.errors), (3, 1));
        assert_eq!(a.buckets[1].calls, 1);
        assert_eq!(a.total.durations.count(), 3);
        assert_eq!(o.tools["b"].total.calls, 1);
        // Without bounds: from the first run to the last.
        let all = Overview::build(&OverviewQuery::default(), &runs);
        assert_eq!((all.since, all.until, all.runs), (0, 11, 4));
        assert_eq!(all.run_buckets.len(), 24);
        let none = Overview::build(&OverviewQuery::default(), &[]);
        assert_eq!(none.runs, 0);
        // As the live socket carries it (JSON, states as map keys).
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(serde_json::from_str::<Overview>(&json).unwrap(), o);
    }
}
